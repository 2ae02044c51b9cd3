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

measure::RunReply run(const measure::RunRequest& req) {
  measure::RunReply reply;
  if (!req.plugin.empty()) codegen::load_backend_plugin(req.plugin);
  codegen::BackendOptions options;
  options.device = req.device;
  auto backend = codegen::make_backend(req.runtime, options);
  codegen::KernelShape shape;
  for (auto& s : req.inputs) shape.tensor_floats.push_back(elements(s));
  for (auto& s : req.outputs) shape.tensor_floats.push_back(elements(s));
  shape.workspace_floats = req.workspace_floats;
  auto kernel = backend->load(req.artifact, shape);

  std::vector<std::unique_ptr<Buffer>> tensors;
  std::vector<float*> args;
  int index = 0;
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    tensors.push_back(std::make_unique<Buffer>(elements(req.inputs[i]), req.input_types[i]));
    measure::fill_input(tensors.back()->type, tensors.back()->data, tensors.back()->n, req.seed, index++);
    args.push_back(tensors.back()->data);
  }
  // Outputs and workspace start as NaN (integers as an unlikely pattern), so a kernel that
  // skips an element is caught.
  for (size_t i = 0; i < req.outputs.size(); ++i) {
    tensors.push_back(std::make_unique<Buffer>(elements(req.outputs[i]), req.output_types[i]));
    if (tensors.back()->type == ir::DType::F32)
      std::fill(tensors.back()->data, tensors.back()->data + tensors.back()->n, NAN);
    else
      std::memset(tensors.back()->data, 0xA5, tensors.back()->bytes());
    args.push_back(tensors.back()->data);
  }
  Buffer workspace(req.workspace_floats);
  std::fill(workspace.data, workspace.data + workspace.n, NAN);

  using codegen::Kernel;
  double first = kernel->run(args.data(), workspace.data, Kernel::kUpload | Kernel::kDownload);

  size_t first_output = req.inputs.size();
  if (req.mode == measure::RunRequest::Mode::Reference) {
    std::string tmp =
        req.reference_path + ".tmp." + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}());
    {
      std::ofstream out(tmp, std::ios::binary);
      for (size_t o = first_output; o < tensors.size(); ++o)
        out.write(reinterpret_cast<const char*>(tensors[o]->data), tensors[o]->bytes());
      if (!out) throw std::runtime_error("cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), req.reference_path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp);
    reply.times_s = {first};
    return reply;
  }

  std::string ref = read_file(req.reference_path);
  std::int64_t offset = 0;
  for (size_t o = first_output; o < tensors.size(); ++o) {
    if (static_cast<std::int64_t>(ref.size()) < offset + tensors[o]->bytes())
      throw std::runtime_error("reference file is shorter than the outputs");
    std::string diff = measure::compare(tensors[o]->type, tensors[o]->data, ref.data() + offset, tensors[o]->n,
                                        req.tolerance, req.integer_slack);
    if (!diff.empty()) {
      reply.error_class = measure::error_class::kWrongResult;
      reply.message = "output " + std::to_string(o - first_output) + ": " + diff;
      return reply;
    }
    offset += tensors[o]->bytes();
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
      double warm = kernel->run(args.data(), workspace.data, 0);
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
    double dt = kernel->run(args.data(), workspace.data, 0);
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
