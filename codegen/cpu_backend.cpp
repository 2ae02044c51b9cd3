// The CPU backend: C++ through the system compiler, loaded with dlopen.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "codegen/backend.hpp"
#include "codegen/cpu_emitter.hpp"
#include "support/error.hpp"
#include "support/files.hpp"
#include "support/hash.hpp"
#include "support/subprocess.hpp"

namespace tiletune::codegen {

namespace {

//! Bumped whenever the emitted code changes meaning or speed: records of another version
//! belong to another target.
constexpr const char* kCodegenVersion = "cpu-15";
//! Kernel builds run at a lower CPU priority: they are throughput work, and on a few cores they
//! otherwise delay the daemon's answers and the measurements running beside them.
constexpr int kBuildNiceness = 10;
//! The longest a kernel's build may take. The two largest kernels in a cache of thousands (340 and
//! 395 KB of source) compile in 4.8 and 6.9 s; a config on which the compiler goes astray fails
//! the build at this.
constexpr double kBuildSeconds = 300;
//! The most address space a build may take. Those two kernels compile in 340 and 540 MB (the
//! larger under a cap of 700 MB too); one random config of a five-stage attention op held GCC at
//! 6 GB after 4 minutes. The cap makes such a build fail alone, before it starves the machine's
//! other builds, measurements or daemon of memory.
constexpr std::uint64_t kBuildMemoryBytes = std::uint64_t{4} << 30;

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
    // No compiler to run: the target is still described; its builds say what is missing.
    ProcessResult version = probe_process({compiler_, "--version"}, 30);
    std::string compiler_id = version.output.substr(0, version.output.find('\n'));
    if (!version.ok() || compiler_id.empty()) compiler_id = compiler_ + " (version unknown)";
    compiler_id_ = compiler_id;
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
    nlohmann::json fp = {{"backend", "cpu"},        {"device", device},     {"threads", target_.traits.threads},
                         {"compiler", compiler_id}, {"flags", flag_text()}, {"codegen", kCodegenVersion}};
    target_.fingerprint_json = fp.dump();
    device_id_ = device.dump();
    target_.key = hash_hex(target_.fingerprint_json);
    target_.family = device_family("cpu", device);
  }

  std::string build(const std::string& source_path, const std::string& artifact_path) const override {
    auto compile = [&](const std::string& headers) {
      std::vector<std::string> argv{compiler_};
      argv.insert(argv.end(), flags_.begin(), flags_.end());
      if (!headers.empty()) argv.insert(argv.end(), {"-include", headers});
      argv.insert(argv.end(), {"-o", artifact_path, source_path});
      return run_process(argv, kBuildSeconds, 1 << 20, kBuildNiceness, kBuildMemoryBytes);
    };
    std::string headers = precompiled_headers(std::filesystem::path(source_path).parent_path().string());
    ProcessResult r = compile(headers);
    if (!r.ok() && !r.timed_out && !headers.empty()) {
      // A damaged precompiled header fails every compile: the kernel is compiled once more on its
      // own, and when that passes, the header is dropped (the next build makes a new one). A
      // compile that ran out of time is not tried twice.
      ProcessResult plain = compile("");
      if (plain.ok()) forget_precompiled_headers(headers);
      r = std::move(plain);
    }
    if (r.ok()) return "";
    return compiler_ + " " + r.describe() + "\n" + r.output;
  }

  //! The system headers every kernel includes (cpu_kernel_headers), precompiled. Parsing them is
  //! most of a kernel's compile: with GCC 12 and -march=native a 600-line matmul kernel compiled
  //! in 1.02 s and its headers alone in 1.05 s (-ftime-report: parsing 85-91 %); with the
  //! precompiled header, 0.26 s, the code the same. Built once per compiler, CPU, flags and
  //! header list (a cache folder shared by machines holds one per kind) in a folder of `dir`
  //! named by their hash, and reused from any folder while its file lasts.
  //! Returns the path to pass to -include (GCC reads PATH.gch in its place, or the text where the
  //! .gch does not fit), or "" when it could not be built.
  std::string precompiled_headers(const std::string& dir) const {
    namespace fs = std::filesystem;
    target();  // the compiler's version and the CPU (compiler_id_, device_id_)
    std::lock_guard lock(headers_mu_);
    std::error_code ec;
    if (!headers_path_.empty() && fs::exists(headers_path_ + ".gch", ec)) return headers_path_;
    if (headers_failed_) return "";
    std::string text = "// The system headers of tiletune's CPU kernels, precompiled (codegen/cpu_backend.cpp).\n";
    for (auto& h : cpu_kernel_headers()) text += "#if __has_include(<" + h + ">)\n#include <" + h + ">\n#endif\n";
    const std::string folder =
        dir + "/pch-" +
        hash_hex(compiler_ + "\n" + compiler_id_ + "\n" + device_id_ + "\n" + flag_text() + "\n" + text);
    const std::string header = folder + "/kernel_headers.hpp";
    try {
      if (!fs::exists(header + ".gch", ec)) {
        fs::create_directories(folder);
        write_file_atomically(header, text);
        const std::string tmp = header + ".gch.tmp." + unique_suffix();
        std::vector<std::string> argv{compiler_};
        argv.insert(argv.end(), flags_.begin(), flags_.end());
        argv.insert(argv.end(), {"-x", "c++-header", "-o", tmp, header});
        if (!run_process(argv, kBuildSeconds, 1 << 20, kBuildNiceness, kBuildMemoryBytes).ok()) {
          fs::remove(tmp, ec);
          headers_failed_ = true;  // kernels parse the headers themselves, as without one
          return "";
        }
        fs::rename(tmp, header + ".gch");
      }
    } catch (const std::exception&) {
      headers_failed_ = true;  // a folder that cannot be written: no precompiled header
      return "";
    }
    headers_path_ = header;
    return header;
  }

  std::string flag_text() const {
    std::string out;
    for (auto& f : flags_) out += (out.empty() ? "" : " ") + f;
    return out;
  }

  void forget_precompiled_headers(const std::string& header) const {
    std::lock_guard lock(headers_mu_);
    std::error_code ec;
    std::filesystem::remove(header + ".gch", ec);
    if (headers_path_ == header) headers_path_.clear();
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
  mutable std::string compiler_id_;  // the first line of `compiler --version`
  mutable std::string device_id_;    // the CPU -march=native stands for, as the fingerprint has it
  mutable std::mutex headers_mu_;
  mutable std::string headers_path_;  // the precompiled header in use ("" : none yet)
  mutable bool headers_failed_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace tiletune::codegen
