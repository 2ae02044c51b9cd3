// The CPU backend: C++ through the system compiler, loaded with dlopen.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "codegen/backend.hpp"
#include "codegen/cpu_emitter.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "support/subprocess.hpp"

namespace tiletune::codegen {

namespace {

//! Bumped whenever the emitted code changes meaning or speed: records of another version
//! belong to another target.
constexpr const char* kCodegenVersion = "cpu-12";
//! Kernel builds run at a lower CPU priority: they are throughput work, and on a few cores they
//! otherwise delay the daemon's answers and the measurements running beside them.
constexpr int kBuildNiceness = 10;

struct CpuInfo {
  std::string model;
  std::vector<std::string> isa;  // the SIMD features that matter to generated code
};

CpuInfo read_cpuinfo() {
  CpuInfo info;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  static const std::set<std::string> wanted = {"sse4_2",   "avx",      "avx2",     "fma",         "avx512f",
                                               "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "avx512_vnni",
                                               "amx_tile", "asimd",    "sve"};
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (info.model.empty() && (key == "model name" || key == "Model" || key == "CPU part")) info.model = value;
    if (info.isa.empty() && (key == "flags" || key == "Features")) {
      std::istringstream words(value);
      std::string f;
      std::set<std::string> have;
      while (words >> f)
        if (wanted.count(f)) have.insert(f);
      info.isa.assign(have.begin(), have.end());
    }
  }
  if (info.model.empty()) info.model = "unknown cpu";
  return info;
}

bool has(const CpuInfo& c, const char* f) { return std::find(c.isa.begin(), c.isa.end(), f) != c.isa.end(); }

class CpuKernel : public Kernel {
 public:
  using Fn = void (*)(float* const*, float*);
  using PrepareFn = void (*)(float* const*, float*, int);
  CpuKernel(void* handle, Fn fn, PrepareFn prepare) : handle_(handle), fn_(fn), prepare_(prepare) {}
  ~CpuKernel() override { dlclose(handle_); }
  double run(float* const* tensors, float* workspace, unsigned flags) override {
    // New inputs: the constant ones are packed first, outside the time (as a caller packs a
    // model's weights once, at load).
    if (prepare_ && (flags & kUpload)) prepare_(tensors, workspace, 0);
    auto t0 = std::chrono::steady_clock::now();
    fn_(tensors, workspace);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  void* handle_;
  Fn fn_;
  PrepareFn prepare_;  // nullptr: the kernel packs nothing constant
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& options) : options_(options) {
    compiler_ = options.compiler.empty() ? "g++" : options.compiler;
    flags_ = {
        "-O3", "-march=native", "-ffp-contract=fast", "-fno-math-errno", "-fopenmp", "-fPIC", "-shared", "-std=c++17",
        "-w"};
  }

  std::string name() const override { return "cpu"; }
  const TargetInfo& target() const override {
    // Asking the compiler for its version costs a process: only on first use, so that a
    // measuring worker, which only loads kernels, never pays it.
    std::call_once(target_once_, [this] { describe(options_); });
    return target_;
  }
  std::string source_extension() const override { return ".cpp"; }

  std::string emit(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config_json) const override {
    return emit_cpu_kernel(w, nest, target().traits, config_json);
  }
  CallAbi call_abi(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config_json) const override {
    return cpu_call_abi(w, nest, config_json);
  }
  std::string emit_for(const ir::TargetTraits& traits, const ir::Workload& w, const ir::LoopNest& nest,
                       const std::string& config_json) const override {
    return emit_cpu_kernel(w, nest, traits, config_json);
  }

  void describe(const BackendOptions& options) const {
    CpuInfo cpu = read_cpuinfo();
    int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    target_.backend = "cpu";
    target_.traits.threads = options.threads > 0 ? options.threads : cores;
    target_.traits.vector_lanes = has(cpu, "avx512f")                         ? 16
                                  : has(cpu, "avx2")                          ? 8
                                  : (has(cpu, "sse4_2") || has(cpu, "asimd")) ? 4
                                                                              : 1;
    target_.traits.vector_registers = has(cpu, "avx512f") ? 32 : has(cpu, "asimd") ? 32 : 16;
    ProcessResult version = run_process({compiler_, "--version"}, 30);
    std::string compiler_id = version.output.substr(0, version.output.find('\n'));
    if (!version.ok() || compiler_id.empty()) compiler_id = compiler_ + " (version unknown)";
    // Cache sizes as the C library reads them (CPUID), where the system reports them.
    auto cache = [](int name, std::int64_t fallback) {
      long v = sysconf(name);
      return v > 0 ? static_cast<std::int64_t>(v) : fallback;
    };
    target_.traits.l1_bytes = cache(_SC_LEVEL1_DCACHE_SIZE, target_.traits.l1_bytes);
    target_.traits.l2_bytes = cache(_SC_LEVEL2_CACHE_SIZE, target_.traits.l2_bytes);
    target_.traits.l3_bytes = cache(_SC_LEVEL3_CACHE_SIZE, target_.traits.l3_bytes);
    nlohmann::json device = {{"cpu", cpu.model},
                             {"isa", cpu.isa},
                             {"cores", cores},
                             {"caches", {target_.traits.l1_bytes, target_.traits.l2_bytes, target_.traits.l3_bytes}}};
    std::string flags;
    for (auto& f : flags_) flags += (flags.empty() ? "" : " ") + f;
    nlohmann::json fp = {{"backend", "cpu"},        {"device", device}, {"threads", target_.traits.threads},
                         {"compiler", compiler_id}, {"flags", flags},   {"codegen", kCodegenVersion}};
    target_.fingerprint_json = fp.dump();
    target_.key = hash_hex(target_.fingerprint_json);
    target_.family = device_family("cpu", device);
  }

  std::string build(const std::string& source_path, const std::string& artifact_path) const override {
    std::vector<std::string> argv{compiler_};
    argv.insert(argv.end(), flags_.begin(), flags_.end());
    argv.insert(argv.end(), {"-o", artifact_path, source_path});
    ProcessResult r = run_process(argv, 300, 1 << 20, kBuildNiceness);
    if (r.ok()) return "";
    return compiler_ + " " + r.describe() + "\n" + r.output;
  }

  std::unique_ptr<Kernel> load(const std::string& artifact_path, const KernelShape&) const override {
    // NODELETE: unmapping a kernel whose OpenMP worker threads are still parked in it
    // crashes the process at exit.
    void* handle = dlopen(artifact_path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!handle) throw_error(ErrorKind::Io, std::string("cannot load kernel: ") + dlerror());
    void* fn = dlsym(handle, "tt_kernel");
    if (!fn) {
      dlclose(handle);
      throw_error(ErrorKind::Io, "kernel library " + artifact_path + " has no tt_kernel symbol");
    }
    return std::make_unique<CpuKernel>(handle, reinterpret_cast<CpuKernel::Fn>(fn),
                                       reinterpret_cast<CpuKernel::PrepareFn>(dlsym(handle, "tt_prepare")));
  }

 private:
  BackendOptions options_;
  std::string compiler_;
  std::vector<std::string> flags_;
  mutable std::once_flag target_once_;
  mutable TargetInfo target_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace tiletune::codegen
