#include "measure/measure.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "measure/protocol.hpp"
#include "support/error.hpp"
#include "support/files.hpp"
#include "support/hash.hpp"
#include "support/stats.hpp"
#include "support/subprocess.hpp"

namespace tiletune::measure {

namespace fs = std::filesystem;

nlohmann::json MeasureOptions::to_json() const {
  nlohmann::json j{{"timeout_s", timeout_s}};
  Timing::to_json(j);
  return j;
}

MeasureOptions MeasureOptions::from_json(const nlohmann::json& j) {
  MeasureOptions o;
  try {
    o.read_json(j);
    o.timeout_s = j.value("timeout_s", o.timeout_s);
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::InvalidInput, std::string("measure options: ") + e.what());
  }
  if (!(o.timeout_s > 0 && o.timeout_s <= kMaxTimeoutS) || o.min_repeats < 1 || o.max_repeats < o.min_repeats)
    throw_error(ErrorKind::InvalidInput, "measure options out of range: " + j.dump());
  return o;
}

std::string Measurer::params_json() const { return options_.to_json().dump(); }

nlohmann::json result_to_json(const MeasureResult& r) {
  return {{"config_json", r.config_json},
          {"config_key", r.config_key},
          {"times_s", r.times_s},
          {"error_class", r.error_class},
          {"error_message", r.error_message},
          {"build_s", r.build_s},
          {"run_s", r.run_s}};
}

MeasureResult result_from_json(const nlohmann::json& j) {
  MeasureResult r;
  try {
    r.config_json = j.at("config_json").get<std::string>();
    r.config_key = j.at("config_key").get<std::string>();
    r.times_s = j.at("times_s").get<std::vector<double>>();
    r.error_class = j.at("error_class").get<std::string>();
    r.error_message = j.value("error_message", "");
    r.build_s = j.value("build_s", 0.0);
    r.run_s = j.value("run_s", 0.0);
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::InvalidInput, std::string("measurement result: ") + e.what());
  }
  for (double t : r.times_s)
    if (!(t > 0) || !std::isfinite(t))
      throw_error(ErrorKind::InvalidInput, "measurement result: a time is not positive");
  if (r.ok() && r.times_s.empty()) throw_error(ErrorKind::InvalidInput, "measurement result: success without times");
  return r;
}

double MeasureResult::median_s() const {
  if (!ok() || times_s.empty()) return std::numeric_limits<double>::infinity();
  return median_of(times_s);
}

std::string default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/tiletune";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/tiletune";
  return "/tmp/tiletune-cache";
}

namespace {

std::int64_t longest_reduction(const ir::Workload& w) {
  std::int64_t longest = 1;
  for (auto& s : w.stages) {
    std::int64_t n = 1;
    for (auto& a : s.axes)
      if (a.reduce) n *= a.extent;
    longest = std::max(longest, n);
  }
  return longest;
}

//! Whether every tensor is an integer and every value computed is i32: results then match exactly.
bool integer_only(const ir::Workload& w) {
  for (auto& b : w.buffers)
    if (!ir::is_integer(b.dtype)) return false;
  return w.computes_in(ir::DType::I32);
}

//! Whether an error while building or running a candidate is the machine's, not the
//! candidate's: an Error(Io) (the compiler or the worker cannot run, a file cannot be written).
bool machine_fault(const std::exception& e) {
  const auto* error = dynamic_cast<const Error*>(&e);
  return error && error->kind() == ErrorKind::Io;
}

//! A candidate on its way through build and run.
struct Job {
  ir::Schedule schedule;
  ir::LoopNest nest;
  std::string source;
  std::string artifact;
  MeasureResult result;
  //! Why it could not be built where that is the machine's fault, not the candidate's (an
  //! Error(Io): the compiler cannot run, the cache cannot be written); build_all throws it.
  std::string machine_error;
};

}  // namespace

struct Measurer::Impl {
  const codegen::Backend& backend;
  const ir::Workload& workload;
  std::string reference_path;

  Impl(const codegen::Backend& b, const ir::Workload& w) : backend(b), workload(w) {}

  //! Emits a candidate and names its artifact by the hash of source and toolchain.
  void prepare(Job& job, const MeasureOptions& o) {
    job.result.config_json = job.schedule.to_json();
    job.result.config_key = job.schedule.key();
    job.nest = ir::lower(workload, job.schedule, backend.target().traits);
    job.source = backend.emit(workload, job.nest, job.result.config_json);
    std::string key = hash_hex(job.source + "\n" + backend.target().fingerprint_json);
    job.artifact = o.cache_dir + "/kernels/" + key + ".so";
  }

  //! A job per config, emitted; a config the lowering refuses is its invalid_config result.
  //! Returns the jobs to build.
  std::vector<Job*> prepare_all(std::vector<Job>& jobs, const std::vector<ir::Schedule>& configs,
                                const MeasureOptions& o) {
    std::vector<Job*> to_build;
    for (size_t i = 0; i < configs.size(); ++i) {
      jobs[i].schedule = configs[i];
      try {
        prepare(jobs[i], o);
        to_build.push_back(&jobs[i]);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::InvalidInput) throw;
        jobs[i].result.error_class = error_class::kInvalidConfig;
        jobs[i].result.error_message = e.what();
      }
    }
    return to_build;
  }

  void build_all(std::vector<Job*>& jobs, int parallel) {
    // One build per distinct artifact; jobs that share it share the outcome.
    std::map<std::string, std::vector<Job*>> by_artifact;
    for (Job* job : jobs) by_artifact[job->artifact].push_back(job);
    std::vector<std::vector<Job*>*> groups;
    for (auto& [artifact, group] : by_artifact) groups.push_back(&group);
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i = next++; i < groups.size(); i = next++) {
        Job& job = *groups[i]->front();
        build_one(job);
        for (Job* other : *groups[i]) {
          other->result.build_s = job.result.build_s;
          other->result.error_class = job.result.error_class;
          other->result.error_message = job.result.error_message;
        }
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < std::max(1, parallel); ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    for (auto* group : groups)
      if (!group->front()->machine_error.empty()) throw_error(ErrorKind::Io, group->front()->machine_error);
  }

  //! Compiles one candidate unless its artifact is cached; a failure becomes its result, except
  //! the machine's (Job::machine_error).
  void build_one(Job& job) {
    std::string base = job.artifact.substr(0, job.artifact.size() - 3);
    std::string tmp = base + ".tmp." + unique_suffix() + ".so";
    auto t0 = std::chrono::steady_clock::now();
    std::string log;
    try {
      std::error_code ec;
      if (fs::exists(job.artifact, ec)) return;
      std::string source_path = base + backend.source_extension();
      write_file_atomically(source_path, job.source);
      log = backend.build(source_path, tmp);
      if (log.empty()) fs::rename(tmp, job.artifact);
    } catch (const std::exception& e) {
      if (machine_fault(e)) job.machine_error = std::string("cannot build kernels: ") + e.what();
      log = std::string("building failed: ") + e.what();
    }
    job.result.build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!log.empty()) {
      job.result.error_class = error_class::kBuild;
      job.result.error_message = log.substr(0, 4000);
      std::error_code ignored;
      fs::remove(tmp, ignored);
    }
  }

  //! Runs a worker on one job (Reference, Measure) or on several in turns (SideBySide: `rivals`).
  RunReply run(const Job& job, RunRequest::Mode mode, const MeasureOptions& o, double timeout, double& wall,
               double single_run_s = 0, const std::vector<Job*>& rivals = {}) {
    RunRequest req;
    req.mode = mode;
    for (const Job* rival : rivals) req.rivals.push_back({rival->artifact, rival->nest.workspace_floats});
    req.runtime = backend.runtime();
    req.plugin = codegen::backend_origin(req.runtime);
    req.device = backend.target().device;
    req.artifact = job.artifact;
    ir::DType narrowest = ir::DType::F32;
    for (auto& b : workload.buffers) {
      if (b.role == ir::Buffer::Role::Input) {
        req.inputs.push_back(b.shape);
        req.input_types.push_back(b.dtype);
      }
      if (b.role == ir::Buffer::Role::Output) {
        req.outputs.push_back(b.shape);
        req.output_types.push_back(b.dtype);
        if (ir::unit_roundoff(b.dtype) > ir::unit_roundoff(narrowest)) narrowest = b.dtype;
      }
    }
    req.workspace_floats = job.nest.workspace_floats;
    req.reference_path = reference_path;
    static_cast<Timing&>(req) = o;
    req.tolerance = tolerance_for(longest_reduction(workload), narrowest);
    // Integer results are exact unless f32 arithmetic leads to them (a requantization's scale).
    req.integer_slack = integer_only(workload) ? 0 : 1;
    req.single_run_s = single_run_s;
    std::string req_path = job.artifact + ".req." + unique_suffix() + ".json";
    write_file_atomically(req_path, req.to_json());
    std::string runner = o.runner_path.empty() ? executable_dir() + "/tiletune-runner" : o.runner_path;
    // Room for the reply: a side-by-side one holds up to kSideBySideMaxTurns times per rival,
    // each at most kBytesPerTime characters as JSON writes a double.
    constexpr size_t kBytesPerTime = 32;
    const size_t max_output = kDefaultMaxOutput + rivals.size() * Measurer::kSideBySideMaxTurns * kBytesPerTime;
    ProcessResult p = run_process({runner, req_path}, timeout, max_output);
    std::error_code ignored;
    fs::remove(req_path, ignored);
    wall = p.seconds;
    RunReply reply;
    if (p.timed_out) {
      reply.error_class = error_class::kTimeout;
      reply.message = "no result within " + std::to_string(timeout).substr(0, 5) + " s; the worker was killed";
      return reply;
    }
    std::string last = p.output;
    while (!last.empty() && last.back() == '\n') last.pop_back();
    last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
    if (p.ok()) {
      try {
        return RunReply::from_json(last);
      } catch (const std::exception&) {
      }
    }
    reply.error_class = error_class::kRuntime;
    reply.message = "worker " + p.describe();
    if (p.output.size() >= max_output)
      reply.message += ": its output was cut at " + std::to_string(max_output) + " bytes";
    std::string tail = p.output.size() > 1000 ? p.output.substr(p.output.size() - 1000) : p.output;
    if (!tail.empty()) reply.message += ": " + tail;
    return reply;
  }

  void ensure_reference(const MeasureOptions& o) {
    if (!reference_path.empty() && fs::exists(reference_path)) return;
    Job job;
    job.schedule = ir::naive_schedule(workload);
    prepare(job, o);
    reference_path =
        o.cache_dir + "/reference/" + workload.key + "-" + backend.target().key + "-" + std::to_string(o.seed) + ".f32";
    if (fs::exists(reference_path)) return;
    std::vector<Job*> jobs{&job};
    build_all(jobs, 1);
    if (!job.result.ok())
      throw_error(ErrorKind::Build, "cannot build the reference kernel: " + job.result.error_message);
    double wall = 0;
    RunReply r = run(job, RunRequest::Mode::Reference, o, o.reference_timeout_s, wall);
    if (!r.error_class.empty())
      throw_error(ErrorKind::Internal, "the reference kernel failed (" + r.error_class + "): " + r.message);
    if (!r.times_s.empty()) write_file_atomically(reference_path + ".seconds", std::to_string(r.times_s.front()));
  }

  //! How long the reference run of the naive kernel took, if it is known (0 if not).
  double reference_seconds() const {
    std::ifstream in(reference_path + ".seconds");
    double s = 0;
    return in >> s && s > 0 ? s : 0;
  }
};

int remove_orphans(const std::string& cache_dir) {
  int removed = 0;
  std::error_code ec;
  for (const char* sub : {"/kernels", "/reference"}) {
    for (fs::recursive_directory_iterator it(cache_dir + sub, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      // unique_suffix(): PID-TOKEN-N after ".tmp." (artifacts, files) or ".req." (run requests).
      std::size_t at = name.find(".tmp.");
      if (at == std::string::npos) at = name.find(".req.");
      if (at == std::string::npos) continue;
      std::size_t digits = at + 5, end_digits = name.find('-', digits);
      if (end_digits == std::string::npos || end_digits == digits) continue;
      pid_t writer = 0;
      try {
        writer = static_cast<pid_t>(std::stol(name.substr(digits, end_digits - digits)));
      } catch (const std::exception&) {
        continue;
      }
      if (writer <= 0 || kill(writer, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
      std::error_code ignored;
      if (fs::remove(it->path(), ignored)) ++removed;
    }
  }
  return removed;
}

Measurer::Measurer(const codegen::Backend& backend, const ir::Workload& workload, MeasureOptions options)
    : impl_(std::make_unique<Impl>(backend, workload)), options_(std::move(options)) {
  if (options_.cache_dir.empty()) options_.cache_dir = default_cache_dir();
  if (options_.build_jobs <= 0)
    options_.build_jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::error_code ec;
  for (const char* sub : {"/kernels", "/reference"}) {
    fs::create_directories(options_.cache_dir + sub, ec);
    if (ec) throw_error(ErrorKind::Io, "cannot create cache folder " + options_.cache_dir + sub + ": " + ec.message());
  }
}

Measurer::~Measurer() = default;

std::string Measurer::source(const ir::Schedule& schedule) const {
  Job job;
  job.schedule = schedule;
  impl_->prepare(job, options_);
  return job.source;
}

std::vector<MeasureResult> Measurer::side_by_side(const std::vector<ir::Schedule>& rivals) {
  impl_->ensure_reference(options_);
  std::vector<Job> jobs(rivals.size());
  std::vector<Job*> built = impl_->prepare_all(jobs, rivals, options_);
  impl_->build_all(built, options_.build_jobs);
  std::vector<Job*> timed;
  for (Job* job : built)
    if (job->result.ok()) timed.push_back(job);
  if (!timed.empty()) {
    // One worker for all of them: its timeout is theirs together.
    double wall = 0;
    RunReply r = impl_->run(*timed.front(), RunRequest::Mode::SideBySide, options_,
                            options_.timeout_s * static_cast<double>(timed.size()), wall, 0, timed);
    // A worker that died (or hung) fails every rival with its error.
    if (r.error_class.empty() && r.rivals.size() != timed.size()) {
      r.error_class = error_class::kRuntime;
      r.message =
          "the worker answered for " + std::to_string(r.rivals.size()) + " kernels of " + std::to_string(timed.size());
    }
    for (size_t i = 0; i < timed.size(); ++i) {
      MeasureResult& result = timed[i]->result;
      result.run_s = wall;
      if (!r.error_class.empty()) {
        result.error_class = r.error_class;
        result.error_message = r.message;
        continue;
      }
      result.times_s = r.rivals[i].times_s;
      result.error_class = r.rivals[i].error_class;
      result.error_message = r.rivals[i].message;
      if (result.ok() && result.times_s.empty()) {
        result.error_class = error_class::kRuntime;
        result.error_message = "the worker timed it no time";
      }
    }
  }
  std::vector<MeasureResult> results;
  for (auto& job : jobs) results.push_back(std::move(job.result));
  return results;
}

std::vector<MeasureResult> Measurer::measure(const std::vector<ir::Schedule>& batch) {
  impl_->ensure_reference(options_);
  std::vector<Job> jobs(batch.size());
  std::vector<Job*> to_build = impl_->prepare_all(jobs, batch, options_);
  // Build in parallel, then time one kernel at a time: on a few cores any overlap between
  // timing and compiling turns the timings into noise.
  impl_->build_all(to_build, options_.build_jobs);
  std::vector<MeasureResult> results;
  const std::string naive_key = ir::naive_schedule(impl_->workload).key();
  for (auto& job : jobs) {
    // The naive kernel already ran once, for the reference outputs: where timing it again
    // would only run into the timeout (large workloads), that run is its time.
    double reference_s = job.result.ok() && job.result.config_key == naive_key ? impl_->reference_seconds() : 0;
    if (reference_s >= options_.timeout_s) {
      job.result.times_s = {reference_s};
    } else if (job.result.ok()) {
      // Whatever goes wrong with one candidate is its result; the batch goes on. A worker that
      // cannot start fails every candidate alike (machine_fault): an error, which would
      // otherwise be stored as every candidate's failure.
      try {
        RunReply r = impl_->run(job, RunRequest::Mode::Measure, options_, options_.timeout_s, job.result.run_s,
                                best_s_ > 0 ? kFarSlower * best_s_ : 0);
        job.result.times_s = r.times_s;
        job.result.error_class = r.error_class;
        job.result.error_message = r.message;
      } catch (const std::exception& e) {
        if (machine_fault(e)) throw;
        job.result.error_class = error_class::kRuntime;
        job.result.error_message = std::string("measuring failed: ") + e.what();
      }
    }
    results.push_back(std::move(job.result));
  }
  return results;
}

}  // namespace tiletune::measure
