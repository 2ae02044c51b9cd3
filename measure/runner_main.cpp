// tiletune-runner: the measuring worker. Runs one kernel in its own process so that a crash,
// a hang or a wild write ends this process only. Usage: tiletune-runner REQUEST.json
// Prints one JSON line (measure/protocol.hpp) and exits 0, whatever the kernel did, unless
// the kernel kills the process.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "codegen/backend.hpp"
#include "measure/measure.hpp"
#include "measure/protocol.hpp"

using namespace tiletune;

namespace {

//! A tensor of n elements of one type; kernels take it as a float pointer (the kernel ABI).
struct Buffer {
  float* data = nullptr;
  std::int64_t n = 0;
  ir::DType type = ir::DType::F32;
  std::int64_t bytes() const { return n * ir::dtype_bytes(type); }
  explicit Buffer(std::int64_t count, ir::DType t = ir::DType::F32) : n(count), type(t) {
    std::size_t bytes = (static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * 4 + 63) / 64 * 64;
    data = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!data) throw std::bad_alloc();
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

//! The tensors every kernel of a request runs on: inputs filled from the seed, outputs after them.
struct Tensors {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<float*> args;
  size_t first_output = 0;

  explicit Tensors(const measure::RunRequest& req) : first_output(req.inputs.size()) {
    int index = 0;
    for (size_t i = 0; i < req.inputs.size(); ++i) {
      buffers.push_back(std::make_unique<Buffer>(elements(req.inputs[i]), req.input_types[i]));
      measure::fill_input(buffers.back()->type, buffers.back()->data, buffers.back()->n, req.seed, index++);
    }
    for (size_t i = 0; i < req.outputs.size(); ++i)
      buffers.push_back(std::make_unique<Buffer>(elements(req.outputs[i]), req.output_types[i]));
    for (auto& b : buffers) args.push_back(b->data);
    poison_outputs();
  }

  //! Outputs start as NaN (integers as an unlikely pattern), so a kernel that skips an element
  //! is caught.
  void poison_outputs() {
    for (size_t o = first_output; o < buffers.size(); ++o) {
      Buffer& b = *buffers[o];
      if (b.type == ir::DType::F32)
        std::fill(b.data, b.data + b.n, NAN);
      else
        std::memset(b.data, 0xA5, b.bytes());
    }
  }

  codegen::KernelShape shape(std::int64_t workspace_floats) const {
    codegen::KernelShape s;
    for (auto& b : buffers) s.tensor_floats.push_back(b->n);
    s.workspace_floats = workspace_floats;
    return s;
  }

  //! "" when the outputs match the reference file's, else where they do not.
  std::string check(const measure::RunRequest& req, const std::string& ref) const {
    std::int64_t offset = 0;
    for (size_t o = first_output; o < buffers.size(); ++o) {
      if (static_cast<std::int64_t>(ref.size()) < offset + buffers[o]->bytes())
        throw std::runtime_error("reference file is shorter than the outputs");
      std::string diff = measure::compare(buffers[o]->type, buffers[o]->data, ref.data() + offset, buffers[o]->n,
                                          req.tolerance, req.integer_slack);
      if (!diff.empty()) return "output " + std::to_string(o - first_output) + ": " + diff;
      offset += buffers[o]->bytes();
    }
    return "";
  }
};

//! A workspace of n floats, NaN, as a kernel must not read what it has not written.
std::unique_ptr<Buffer> workspace_of(std::int64_t n) {
  auto w = std::make_unique<Buffer>(n);
  std::fill(w->data, w->data + w->n, NAN);
  return w;
}

//! Mode::SideBySide: every rival is loaded and checked, then they are timed in turns, so that
//! whatever else the machine does at the time slows them alike (kernels timed seconds apart
//! on a shared machine differ by up to 1.6x for that alone). A rival that fails its check gets
//! its error and is not timed.
measure::RunReply side_by_side(const measure::RunRequest& req, const codegen::Backend& backend, Tensors& io) {
  using codegen::Kernel;
  const size_t n = req.rivals.size();
  measure::RunReply reply;
  reply.rivals.resize(n);
  const std::string ref = read_file(req.reference_path);
  std::vector<std::unique_ptr<Kernel>> kernels(n);
  std::vector<std::unique_ptr<Buffer>> workspaces(n);
  for (size_t i = 0; i < n; ++i) {
    measure::RunReply& r = reply.rivals[i];
    try {
      kernels[i] = backend.load(req.rivals[i].artifact, io.shape(req.rivals[i].workspace_floats));
      workspaces[i] = workspace_of(req.rivals[i].workspace_floats);
      io.poison_outputs();
      kernels[i]->run(io.args.data(), workspaces[i]->data, Kernel::kUpload | Kernel::kDownload);
      r.message = io.check(req, ref);
      if (!r.message.empty()) r.error_class = measure::error_class::kWrongResult;
    } catch (const std::exception& e) {
      r.error_class = measure::error_class::kRuntime;
      r.message = e.what();
    }
    if (!r.error_class.empty()) kernels[i].reset();
  }
  // Turns of an untimed call and about a millisecond of timed calls (one timed call at least; a
  // turn also ends after that long by the wall clock, so a timer that reads 0 cannot hold it),
  // each turn's mean per timed call one time, round after round until every rival has run for
  // its share; past max_seconds per rival (slow kernels) the rounds end early, but never before
  // every rival had a turn. Where the share would take more than half of kSideBySideMaxTurns
  // turns (a long min_seconds), the turns grow instead (half: a turn's kernel time falls short of
  // its wall time), and no rival gets more than that many times: the reply stays small.
  using measure::Measurer;
  using Clock = std::chrono::steady_clock;
  const double want = Measurer::kSideBySideShare * req.min_seconds;
  const double turn_s = std::max(Measurer::kSideBySideTurnS, 2 * want / Measurer::kSideBySideMaxTurns);
  std::vector<double> spent(n, 0);
  int live = 0;
  for (auto& k : kernels) live += k != nullptr;
  double total = 0;
  for (int round = 0; round < Measurer::kSideBySideMaxTurns; ++round) {
    bool done = round >= Measurer::kSideBySideMinTurns;
    for (size_t i = 0; i < n; ++i)
      if (kernels[i] && spent[i] < want) done = false;
    if (done || (round > 0 && total >= req.max_seconds * live)) break;
    for (size_t i = 0; i < n; ++i) {
      if (!kernels[i]) continue;
      // One call first, untimed: it meets the caches as the rival before it left them. The
      // calls after it run at the kernel's steady speed, which a lone measurement's median
      // gives too (its first, cold repeat is one of many), so that records timed in turns and
      // alone compare (tuner::retime_finalists). Counted, that call is one of ~14 in a turn of
      // a 70 us kernel (Q * K^T, 12 x 128 x 128 x 64), and cold it took 2.1-2.7x the others in
      // lone measurements of it: the turn's mean 8-12 % slow.
      total += kernels[i]->run(io.args.data(), workspaces[i]->data, 0);
      double turn = 0;
      int calls = 0;
      const auto start = Clock::now();
      do {
        turn += kernels[i]->run(io.args.data(), workspaces[i]->data, 0);
        ++calls;
      } while (turn < turn_s && std::chrono::duration<double>(Clock::now() - start).count() < turn_s);
      reply.rivals[i].times_s.push_back(turn / calls);
      spent[i] += turn;
      total += turn;
    }
  }
  return reply;
}

measure::RunReply run(const measure::RunRequest& req) {
  measure::RunReply reply;
  if (!req.plugin.empty()) codegen::load_backend_plugin(req.plugin);
  codegen::BackendOptions options;
  options.device = req.device;
  auto backend = codegen::make_backend(req.runtime, options);
  Tensors io(req);
  if (req.mode == measure::RunRequest::Mode::SideBySide) return side_by_side(req, *backend, io);

  auto kernel = backend->load(req.artifact, io.shape(req.workspace_floats));
  auto workspace = workspace_of(req.workspace_floats);
  std::vector<float*>& args = io.args;

  using codegen::Kernel;
  double first = kernel->run(args.data(), workspace->data, Kernel::kUpload | Kernel::kDownload);

  if (req.mode == measure::RunRequest::Mode::Reference) {
    std::string tmp =
        req.reference_path + ".tmp." + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}());
    {
      std::ofstream out(tmp, std::ios::binary);
      for (size_t o = io.first_output; o < io.buffers.size(); ++o)
        out.write(reinterpret_cast<const char*>(io.buffers[o]->data), io.buffers[o]->bytes());
      if (!out) throw std::runtime_error("cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), req.reference_path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp);
    reply.times_s = {first};
    return reply;
  }

  if (std::string diff = io.check(req, read_file(req.reference_path)); !diff.empty()) {
    reply.error_class = measure::error_class::kWrongResult;
    reply.message = diff;
    return reply;
  }

  // A kernel slower than the whole timing budget is timed by its checked first run alone:
  // repeating it would only run into the timeout.
  if (first >= req.max_seconds) {
    reply.times_s = {first};
    return reply;
  }
  double total = 0;
  // So is one far slower than the best known, but judged by warm runs: a first run starts the
  // threads and pages the code in, and the next one or two can still be many times the median
  // (a 0.007 ms kernel's first warm run took 0.29 ms in a corpus run; a build beside it delayed
  // a 0.54 ms convolution to 4-8 ms). Up to Measurer::kWarmRuns of them decide, the later ones
  // only while the warm runs stay within the repeats' budget (min_seconds).
  if (req.single_run_s > 0 && first >= req.single_run_s) {
    double fastest = first, spent = 0;
    for (int i = 0; i < measure::Measurer::kWarmRuns && fastest >= req.single_run_s; ++i) {
      if (i > 0 && spent >= req.min_seconds) break;
      double warm = kernel->run(args.data(), workspace->data, 0);
      spent += warm;
      fastest = std::min(fastest, warm);
    }
    if (fastest >= req.single_run_s) {
      reply.times_s = {fastest};
      return reply;
    }
    reply.times_s.push_back(fastest);  // the warm run under the bar; the slower ones warmed up
    total = fastest;
  }
  auto more = [&] {
    int n = static_cast<int>(reply.times_s.size());
    if (n >= req.max_repeats || (n >= 1 && total >= req.max_seconds)) return false;
    return total < req.min_seconds || n < req.min_repeats;
  };
  while (more()) {
    double dt = kernel->run(args.data(), workspace->data, 0);
    reply.times_s.push_back(dt);
    total += dt;
  }
  return reply;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tiletune-runner REQUEST.json\n");
    return 2;
  }
  measure::RunReply reply;
  try {
    reply = run(measure::RunRequest::from_json(read_file(argv[1])));
  } catch (const std::exception& e) {
    reply.error_class = measure::error_class::kRuntime;
    reply.message = e.what();
  }
  std::cout << "\n" << reply.to_json() << std::endl;
  return 0;
}
