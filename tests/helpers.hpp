// tests/helpers.hpp — shared by the test files
#pragma once
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "codegen/backend.hpp"
#include "ir/parse.hpp"
#include "ir/workload.hpp"
#include "ops/library.hpp"
#include "support/error.hpp"
#include "support/subprocess.hpp"
#include "tuner/tune.hpp"

namespace tiletune::test {

//! Set by TT_SKIP; the listener in tests/main.cpp clears it when a test case starts and counts
//! the test case as skipped when it ends with it set.
inline bool g_skip_current = false;

//! Ends the test case as skipped, for a machine that lacks what it needs (a device, a compiler,
//! an instruction set); `why` is streamed like MESSAGE's argument. Checks made before it still
//! count. A test file whose test cases all skip exits 77, which ctest reports as skipped.
#define TT_SKIP(why)                         \
  do {                                       \
    ::tiletune::test::g_skip_current = true; \
    MESSAGE("[skipped] " << why);            \
    return;                                  \
  } while (false)

//! A fresh folder removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("tiletune-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

//! A file of the source tree (schemas/, tests/fixtures/, ...) as text; the test fails if unreadable.
inline std::string source_file(const std::string& path) {
  std::ifstream in(std::string(TILETUNE_SOURCE_DIR) + "/" + path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

//! One of schemas/*.json, parsed.
inline nlohmann::json schema(const std::string& name) { return nlohmann::json::parse(source_file("schemas/" + name)); }

//! Built kernels are content-addressed, so tests share one cache across runs.
inline std::string kernel_cache() { return TILETUNE_TEST_CACHE; }

//! Options for a short random tuning run in a test: `trials` in batches of `batch`, the test
//! kernel cache, 2 ms of timing per candidate.
inline tuner::TuneOptions quick_tune_options(int trials, int batch) {
  tuner::TuneOptions o;
  o.trials = trials;
  o.batch_size = batch;
  o.strategy = "random";
  o.measure.cache_dir = kernel_cache();
  o.measure.min_seconds = 0.002;
  return o;
}

inline ir::Workload library_workload(const std::string& op, const std::string& sizes) {
  return ir::bind(ir::parse_op(ops::op_text(op)), ir::parse_sizes(sizes));
}

//! Small sizes of every library op for tests: primes and other numbers no tile or vector
//! divides, so that edge tiles are exercised. A new library op is not tested until it is here.
inline const std::map<std::string, std::string>& library_test_sizes() {
  static const std::map<std::string, std::string> sizes = {{"matmul", "M=37,N=67,K=23"},
                                                           {"matmul_bias_relu", "M=29,N=41,K=19"},
                                                           {"matmul_bias_gelu", "M=13,N=29,K=11"},
                                                           {"batch_matmul", "G=3,M=13,N=35,K=7"},
                                                           {"batch_matmul_nt", "G=2,M=11,N=19,K=13"},
                                                           {"conv2d", "N=1,C=3,H=11,W=19,K=5,R=3,S=3"},
                                                           {"depthwise_conv2d", "N=2,C=3,H=9,W=21,R=3,S=3"},
                                                           {"softmax", "N=7,D=43"},
                                                           {"layernorm", "N=5,D=37"},
                                                           {"rmsnorm", "N=5,D=41"},
                                                           {"row_sum", "N=11,D=53"},
                                                           {"gelu", "N=3,D=71"},
                                                           {"max_pool2d", "N=1,C=3,H=13,W=19"},
                                                           {"avg_pool2d", "N=2,C=3,H=9,W=14"},
                                                           {"global_avg_pool", "N=2,C=5,H=7,W=11"},
                                                           {"conv2d_p1", "N=1,C=3,H=7,W=13,K=5,R=3,S=3"},
                                                           {"conv2d_s2p1", "N=1,C=2,H=9,W=15,K=3,R=3,S=3"},
                                                           {"conv2d_1x1", "N=2,C=5,H=3,W=11,K=7"},
                                                           {"conv2d_bias_relu_p1", "N=1,C=2,H=5,W=11,K=3,R=3,S=3"},
                                                           {"depthwise_conv2d_p1", "N=1,C=3,H=7,W=19,R=3,S=3"},
                                                           {"depthwise_conv2d_s2p1", "N=1,C=2,H=9,W=13,R=3,S=3"},
                                                           {"depthwise_conv2d_nchwc_p1", "N=1,CB=2,H=7,W=9,L=5,R=3,S=3"},
                                                           {"depthwise_conv2d_nchwc_s2p1", "N=1,CB=2,H=9,W=7,L=19,R=3,S=3"},
                                                           {"conv2d_nchwc_p1", "N=1,CB=2,KB=3,H=5,W=7,L=3,R=3,S=3"},
                                                           {"conv2d_nchwc_s2p1", "N=1,CB=1,KB=2,H=7,W=5,L=5,R=3,S=3"},
                                                           {"conv2d_nchwc_1x1", "N=2,CB=3,KB=2,H=3,W=5,L=3"},
                                                           {"conv2d_nchwc_bias_relu_p1", "N=1,CB=1,KB=2,H=3,W=7,L=3,R=3,S=3"},
                                                           {"grouped_conv2d_p1", "N=1,G=2,CG=2,KG=3,H=5,W=11,R=3,S=3"},
                                                           {"max_pool2d_p1", "N=1,C=3,H=11,W=17"}};
  return sizes;
}

//! Ops in bf16 and f16 that the GPU backends run (16-bit storage, f32 math): a matmul into
//! bf16 and a padded window in f16, at sizes no tile divides.
inline std::vector<ir::Workload> half_workloads() {
  std::vector<ir::Workload> out;
  for (auto [text, sizes] : std::vector<std::pair<const char*, const char*>>{
           {"op m(A: bf16[M, K], B: bf16[K, N]) -> C: bf16[M, N] { C[m, n] += A[m, k] * B[k, n] }", "M=19,N=37,K=23"},
           {"op h(X: f16[N, D] pad 0) -> Y: f16[N, D] { Y[n, d] = max(X[n, d - 1], 0.0) * 3 - 1 }", "N=5,D=41"}})
    out.push_back(ir::bind(ir::parse_op(text), ir::parse_sizes(sizes)));
  return out;
}

//! A library op at its library_test_sizes(); fails the test if it has none.
inline ir::Workload library_test_workload(const std::string& op) {
  auto it = library_test_sizes().find(op);
  REQUIRE_MESSAGE(it != library_test_sizes().end(), "library op " << op << " has no test sizes in tests/helpers.hpp");
  return library_workload(op, it->second);
}

//! The message of the tiletune::Error that `f` throws, or nullopt if it throws none: for the
//! few checks where either is right. `*kind` is the error's kind, or ErrorKind::Internal (which
//! no check expects) when nothing is thrown, so that its initial value never passes a check.
template <typename F>
std::optional<std::string> try_error_of(F&& f, ErrorKind* kind = nullptr) {
  if (kind) *kind = ErrorKind::Internal;
  try {
    f();
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return std::string(e.what());
  }
  return std::nullopt;
}

//! The message of the tiletune::Error that `f` must throw. If it throws none the test fails and
//! the answer is "<nothing thrown>", which no expected message contains; `*kind` as above.
template <typename F>
std::string error_of(F&& f, ErrorKind* kind = nullptr) {
  if (auto message = try_error_of(f, kind)) return *message;
  FAIL_CHECK("expected a tiletune::Error, nothing was thrown");
  return "<nothing thrown>";
}

//! Whether nvcc is installed where the CUDA backend looks for it.
inline bool have_nvcc() {
  return std::filesystem::exists("/usr/local/cuda/bin/nvcc") || run_process({"nvcc", "--version"}, 30).ok();
}

//! Whether this machine has an NVIDIA GPU, asked of the driver's files and not of the CUDA
//! backend, whose answer is what the tests check. CUDA_VISIBLE_DEVICES set empty (or to a
//! negative index) hides the GPUs from the driver, and so from this answer.
inline bool have_cuda_device() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible && (!*visible || *visible == '-')) return false;
  std::error_code ec;
  if (!std::filesystem::exists("/dev/nvidiactl", ec)) return false;
  std::filesystem::directory_iterator gpus("/proc/driver/nvidia/gpus", ec);
  return !ec && gpus != std::filesystem::directory_iterator();
}

//! Why this machine has no OpenCL platform (no ICD installed), or nullopt where it has one. Only
//! that skips a test: any other failure to open a device is the backend's, and fails it.
inline std::optional<std::string> no_opencl_platform() {
  static const std::optional<std::string> why = []() -> std::optional<std::string> {
    auto message = try_error_of([] { codegen::make_backend("opencl")->target(); });
    if (message && message->rfind("no OpenCL platform", 0) == 0) return message;
    return std::nullopt;
  }();
  return why;
}

}  // namespace tiletune::test
