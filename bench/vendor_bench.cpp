// tiletune-bench: tunes each case with a fixed trial budget, then times the best tiletune
// kernel, oneDNN and OpenBLAS in the same run, interleaved, and prints a table of medians.
//
//   build/tiletune-bench [--trials 128] [--strategy xgb] [--reps 30] [--threads 2] [--only matmul] [--db PATH]
//
// OpenBLAS picks its kernel for this CPU only with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
// unset, and reads them when it loads: the benchmark re-executes itself without them.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "aligned.hpp"
#include "codegen/backend.hpp"
#include "db/store.hpp"
#include "ir/parse.hpp"
#include "measure/protocol.hpp"
#include "ops/library.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "support/subprocess.hpp"
#include "tuner/search.hpp"
#include "tuner/tune.hpp"
#include "vendor/vendor.hpp"
#include "vendors.hpp"

using namespace tiletune;

namespace {

struct Case {
  std::string label, op, sizes;
  double adams2019 = 0;  //!< Halide 14 Adams2019 figure from ANCHORS.md (upper end), same unit; 0: none
  std::string text;      //!< the op's text where it is not a library op
  //! An input declared `const` in the library op's text (its weights, as oneDNN's are reordered
  //! once outside the timed calls); "" for the library op as it is.
  std::string weights;
  // A constructor, so that the case lists leave the last fields out without a warning.
  Case(std::string label_, std::string op_, std::string sizes_, double adams2019_, std::string text_ = "",
       std::string weights_ = "")
      : label(std::move(label_)), op(std::move(op_)), sizes(std::move(sizes_)), adams2019(adams2019_),
        text(std::move(text_)), weights(std::move(weights_)) {}
};

//! The case's op: its text, or the library op's with Case::weights declared const.
ir::OpDef case_op(const Case& c) {
  ir::OpDef op = ir::parse_op(c.text.empty() ? ops::op_text(c.op) : c.text);
  if (c.weights.empty()) return op;
  for (auto& in : op.inputs)
    if (in.name == c.weights) {
      in.constant = true;
      return op;
    }
  throw std::logic_error("op " + c.op + " has no input " + c.weights);
}

// Mixed precision, as a user writes it: bf16 operands summed in f32 (the language's rule),
// and u8 x i8 summed in i32 and requantized to u8 by a scale and a zero point. The weights
// are `const`, as an inference layer's are: packed once by the kernel's prepare entry point,
// as oneDNN's are reordered once, both outside the timed calls.
const char* kMatmulBf16 = R"(op matmul_bf16(A: bf16[M, K], B: bf16[K, N] const) -> C: f32[M, N] {
  C[m, n] += A[m, k] * B[k, n]
})";
const char* kMatmulInt8 = R"(op matmul_u8s8_u8(A: u8[M, K], B: i8[K, N] const) -> Y: u8[M, N] {
  acc[m, n] += A[m, k] * B[k, n]
  Y[m, n] = f32(acc[m, n]) * 0.0005 + 128
})";
// The same layer with channels last: the bf16 pairs then lie along the reduction (c).
const char* kConvNhwcBf16 =
    R"(op conv2d_nhwc_p1_bf16(I: bf16[N, H, W, C] pad 0, F: bf16[R, S, C, K] const) -> O: f32[N, H + 3 - R, W + 3 - S, K] {
  O[n, y, x, k] += I[n, y + r - 1, x + s - 1, c] * F[r, s, c, k]
})";
const char* kConvBf16 =
    R"(op conv2d_p1_bf16(I: bf16[N, C, H, W] pad 0, F: bf16[K, C, R, S] const) -> O: f32[N, K, H + 3 - R, W + 3 - S] {
  O[n, k, y, x] += I[n, c, y + r - 1, x + s - 1] * F[k, c, r, s]
})";

//! The ResNet convolutions and the depthwise layer in the channel-blocked layout
//! NCHW[L]c that oneDNN times them in (nChw16c, and nChw8c, the block of its AVX2 kernels):
//! input channel b * L + c is lane c of block b, the counts the same.
std::vector<Case> blocked_cases(int L) {
  auto blocks = [&](int channels) { return std::to_string(channels / L); };
  const std::string layout = ", NCHW" + std::to_string(L) + "c", lanes = ",L=" + std::to_string(L);
  auto dense = [&](int c, int k) { return "N=1,CB=" + blocks(c) + ",KB=" + blocks(k) + ",H=56,W=56" + lanes; };
  const std::string dw = "N=1,CB=" + blocks(144) + ",H=56,W=56" + lanes + ",R=3,S=3";
  return {
      {"ResNet conv 3x3 pad 1 C64 K64 56x56" + layout, "conv2d_nchwc_p1", dense(64, 64) + ",R=3,S=3", 0},
      {"ResNet conv 1x1 C256 K64 56x56" + layout, "conv2d_nchwc_1x1", dense(256, 64), 0},
      {"ResNet conv 3x3 s2 pad 1 C128 K128 56x56" + layout, "conv2d_nchwc_s2p1", dense(128, 128) + ",R=3,S=3", 0},
      {"ResNet conv 3x3 pad 1 + bias + relu C64 K64 56x56" + layout, "conv2d_nchwc_bias_relu_p1",
       dense(64, 64) + ",R=3,S=3", 0},
      {"depthwise 3x3 pad 1 C144 56x56" + layout, "depthwise_conv2d_nchwc_p1", dw, 0},
      {"depthwise 3x3 s2 pad 1 C144 56x56" + layout, "depthwise_conv2d_nchwc_s2p1", dw, 0},
  };
}

const std::vector<Case> kCases = [] {
  std::vector<Case> cases = {
      {"matmul 1024^3", "matmul", "M=1024,N=1024,K=1024", 207},
      {"matmul 512^3", "matmul", "M=512,N=512,K=512", 253},
      {"matmul 2048^3", "matmul", "M=2048,N=2048,K=2048", 0},
      {"matmul M128 N768 K768", "matmul", "M=128,N=768,K=768", 149},
      {"matmul M49 N512 K4608", "matmul", "M=49,N=512,K=4608", 153},
      {"batch_matmul 12x128x64x128", "batch_matmul", "G=12,M=128,N=128,K=64", 0},
      {"attention Q.K^T 12x128x128x64", "batch_matmul_nt", "G=12,M=128,N=128,K=64", 0},
      {"attention softmax 1536x128", "softmax", "N=1536,D=128", 0},
      {"attention P.V 12x128x64x128", "batch_matmul", "G=12,M=128,N=64,K=128", 0},
      {"matmul_bias_relu 1024^3", "matmul_bias_relu", "M=1024,N=1024,K=1024", 0},
      {"BERT FFN M128 N3072 K768 + bias + GELU(erf)", "matmul_bias_gelu", "M=128,N=3072,K=768", 0},
      {"BERT FFN M128 N3072 K768 + bias + GELU(erf), weights const", "matmul_bias_gelu", "M=128,N=3072,K=768", 0, "",
       "B"},
      {"conv2d C64 K64 56x56 3x3", "conv2d", "N=1,C=64,H=58,W=58,K=64,R=3,S=3", 56},
      {"conv2d C256 K256 14x14 3x3", "conv2d", "N=1,C=256,H=16,W=16,K=256,R=3,S=3", 0},
      {"depthwise C128 56x56 3x3", "depthwise_conv2d", "N=1,C=128,H=58,W=58,R=3,S=3", 0},
      {"ResNet conv 3x3 pad 1 C64 K64 56x56", "conv2d_p1", "N=1,C=64,H=56,W=56,K=64,R=3,S=3", 0},
      {"ResNet conv 3x3 pad 1 C64 K64 56x56, weights const", "conv2d_p1", "N=1,C=64,H=56,W=56,K=64,R=3,S=3", 0, "",
       "F"},
      {"ResNet conv 1x1 C256 K64 56x56", "conv2d_1x1", "N=1,C=256,H=56,W=56,K=64", 0},
      {"ResNet conv 1x1 C256 K64 56x56, weights const", "conv2d_1x1", "N=1,C=256,H=56,W=56,K=64", 0, "", "F"},
      {"ResNet conv 3x3 s2 pad 1 C128 K128 56x56", "conv2d_s2p1", "N=1,C=128,H=56,W=56,K=128,R=3,S=3", 0},
      {"ResNet conv 3x3 s2 pad 1 C128 K128 56x56, weights const", "conv2d_s2p1", "N=1,C=128,H=56,W=56,K=128,R=3,S=3", 0,
       "", "F"},
      {"ResNet conv 3x3 pad 1 + bias + relu C64 K64 56x56", "conv2d_bias_relu_p1", "N=1,C=64,H=56,W=56,K=64,R=3,S=3",
       0},
      {"depthwise 3x3 pad 1 C144 56x56", "depthwise_conv2d_p1", "N=1,C=144,H=56,W=56,R=3,S=3", 0},
      {"depthwise 3x3 s2 pad 1 C144 56x56", "depthwise_conv2d_s2p1", "N=1,C=144,H=56,W=56,R=3,S=3", 0},
  };
  for (int L : {16, 8})
    for (Case& c : blocked_cases(L)) cases.push_back(std::move(c));
  std::vector<Case> rest = {
      {"grouped conv 3x3 pad 1 G8 C128 K128 28x28", "grouped_conv2d_p1", "N=1,G=8,CG=16,KG=16,H=28,W=28,R=3,S=3", 0},
      {"softmax 4096x1024", "softmax", "N=4096,D=1024", 18},
      {"layernorm 4096x1024", "layernorm", "N=4096,D=1024", 0},
      {"max pool 3x3 s2 C64 113x113 (no pad)", "max_pool2d", "N=1,C=64,H=113,W=113", 0},
      {"max pool 3x3 s2 pad 1 C64 112x112", "max_pool2d_p1", "N=1,C=64,H=112,W=112", 0},
      {"global avg pool C2048 7x7", "global_avg_pool", "N=1,C=2048,H=7,W=7", 0},
      {"bf16 matmul 1024^3 (f32 accumulate)", "matmul_bf16", "M=1024,N=1024,K=1024", 0, kMatmulBf16},
      {"int8 matmul 1024^3 (u8 x s8 -> s32 -> u8)", "matmul_u8s8_u8", "M=1024,N=1024,K=1024", 0, kMatmulInt8},
      {"bf16 conv 3x3 pad 1 C64 K64 56x56 NCHW", "conv2d_p1_bf16", "N=1,C=64,H=56,W=56,K=64,R=3,S=3", 0, kConvBf16},
      {"bf16 conv 3x3 pad 1 C64 K64 56x56 NHWC", "conv2d_nhwc_p1_bf16", "N=1,C=64,H=56,W=56,K=64,R=3,S=3", 0,
       kConvNhwcBf16},
  };
  cases.insert(cases.end(), rest.begin(), rest.end());
  return cases;
}();

bool memory_bound(const std::string& op) {
  return op == "softmax" || op == "layernorm" || op == "rmsnorm" || op.find("pool") != std::string::npos ||
         op.rfind("depthwise", 0) == 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? NAN : v[v.size() / 2];
}

double seconds(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string fmt(double v, const char* f = "%.1f") {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("OPENBLAS_L2_SIZE")) {
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("OPENBLAS_L2_SIZE");
    execv("/proc/self/exe", argv);
  }
  CLI::App app{"tiletune-bench: tuned kernels against oneDNN and OpenBLAS, side by side"};
  int trials = 128, reps = 10, threads = 2, pause_ms = 250, warm_ms = 20;
  std::string only, db_path = "bench.db", cache;
  app.add_option("--trials", trials, "tuning budget per case")->capture_default_str();
  app.add_option("--reps", reps, "rounds of 5 timed calls per implementation, alternating")->capture_default_str();
  app.add_option("--threads", threads, "threads for every implementation")->capture_default_str();
  app.add_option("--pause", pause_ms, "milliseconds between implementations, for idle threads to settle")
      ->capture_default_str();
  app.add_option("--warm-up", warm_ms, "milliseconds of untimed calls before each implementation's timed ones")
      ->capture_default_str();
  app.add_option("--only", only, "run only cases whose label contains this");
  std::string strategy = tuner::TuneOptions().strategy;
  app.add_option("--strategy", strategy, "search strategy of the tuning")->capture_default_str()
      ->check(CLI::IsMember(tuner::search_names()));
  bool no_seeds = false;
  app.add_flag("--no-seeds", no_seeds, "do not measure the BLAS-like seed configs first (Space::seeds)");
  app.add_option("--db", db_path, "tuning database (reused: a rerun only times)")->capture_default_str();
  app.add_option("--cache", cache, "kernel cache folder");
  CLI11_PARSE(app, argc, argv);

  try {
    codegen::BackendOptions bo;
    bo.threads = threads;
    auto backend = codegen::make_backend("cpu", bo);
    auto store = db::open_store(db_path);
    double peak = vendor::fma_peak_gflops(threads);
    std::cout << "FMA peak measured now: " << fmt(peak) << " GFLOP/s on " << threads
              << " threads; trials per case: " << trials << " (" << strategy
              << (no_seeds ? ", no seeds" : ", seeds first") << "); rounds: " << reps
              << " x 5 timed calls (medians, implementations alternating)\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const Case& c : kCases) {
      if (!only.empty() && c.label.find(only) == std::string::npos) continue;
      ir::Workload w = ir::bind(case_op(c), ir::parse_sizes(c.sizes));
      tuner::TuneOptions to;
      to.trials = trials;
      to.strategy = strategy;
      to.seeds = !no_seeds;
      to.measure.cache_dir = cache;
      to.models = store.get();  // a model saved in the bench database (tiletune model train) guides it
      int before = static_cast<int>(store->count_records(w.key, backend->target().key));
      // The naive kernel's outputs, computed once per workload and cached, are what every
      // candidate is checked against: timed apart from the candidates (minutes at 2048^3).
      double reference_s = seconds([&] { measure::Measurer(*backend, w, to.measure).measure({}); });
      double tune_s = seconds([&] { tuner::tune(w, *backend, *store, to); });
      int measured = static_cast<int>(store->count_records(w.key, backend->target().key)) - before;
      auto best = store->best(w.key, backend->target().key);
      if (!best) {
        std::cerr << c.label << ": no correct kernel\n";
        continue;
      }
      // The best kernel, built and loaded here to be timed beside the vendors.
      ir::Schedule s = ir::Schedule::from_json(best->config_json);
      ir::LoopNest nest = ir::lower(w, s, backend->target().traits);
      // Named by content: a loaded library stays loaded, so a second case must not reuse a path.
      std::string source = backend->emit(w, nest, s.to_json());
      std::string dir = std::filesystem::temp_directory_path() / ("tiletune-bench-" + std::to_string(getpid()));
      std::string base = dir + "/" + hash_hex(source);
      std::filesystem::create_directories(dir);
      std::ofstream(base + ".cpp") << source;
      std::string log = backend->build(base + ".cpp", base + ".so");
      if (!log.empty()) throw_error(ErrorKind::Build, log);
      codegen::KernelShape shape;
      for (auto& b : w.buffers)
        if (b.role != ir::Buffer::Role::Temp) shape.tensor_floats.push_back(b.elements());
      shape.workspace_floats = nest.workspace_floats;
      auto kernel = backend->load(base + ".so", shape);
      std::vector<std::unique_ptr<bench::Aligned>> bufs;
      std::vector<float*> tensors;
      int index = 0;
      for (auto& b : w.buffers) {
        if (b.role == ir::Buffer::Role::Temp) continue;
        bufs.push_back(std::make_unique<bench::Aligned>(b.elements()));
        if (b.role == ir::Buffer::Role::Input) measure::fill_input(b.dtype, bufs.back()->p, b.elements(), 1, index++);
        tensors.push_back(bufs.back()->p);
      }
      bench::Aligned workspace(nest.workspace_floats + 16);
      // New inputs once (a kernel with const inputs packs them here), then calls on the same.
      kernel->run(tensors.data(), workspace.p, codegen::Kernel::kUpload | codegen::Kernel::kDownload);
      auto ours = [&] { kernel->run(tensors.data(), workspace.p, 0); };
      auto dnnl = bench::onednn_call(w, tensors, threads);
      auto blas = bench::openblas_call(w, tensors, threads);
      // Rounds of (pause, warm-up calls for 20 ms, 5 timed calls) per implementation, the
      // implementations alternating: each library's idle threads (OpenBLAS spins for a while)
      // settle before the next one runs, and each is timed with its threads awake and its data
      // in cache, as in a network's back-to-back layers (two warm-up calls timed kernels of
      // 70 us while OpenMP's threads were still waking: a fifth slower than the tuner measured).
      bool mem = memory_bound(c.op);
      std::function<void()> copy = mem ? vendor::copy_call(w.io_bytes() / 2, threads) : nullptr;
      std::vector<double> t_ours, t_dnnl, t_blas, t_copy;
      auto timed = [&](const std::function<void()>& f, std::vector<double>& out) {
        if (!f) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
        auto warm = std::chrono::steady_clock::now() + std::chrono::milliseconds(warm_ms);
        f(), f();
        while (std::chrono::steady_clock::now() < warm) f();
        for (int i = 0; i < 5; ++i) out.push_back(seconds(f));
      };
      for (int r = 0; r < reps; ++r) {
        timed(ours, t_ours);
        timed(dnnl.run, t_dnnl);
        timed(blas.run, t_blas);
        timed(copy, t_copy);
      }
      double work = mem ? double(w.io_bytes()) : w.flops();
      double ours_rate = work / median(t_ours) / 1e9, dnnl_rate = work / median(t_dnnl) / 1e9,
             blas_rate = work / median(t_blas) / 1e9;
      double roof = mem ? double(w.io_bytes()) / median(t_copy) / 1e9 : peak;
      rows.push_back({c.label, std::to_string(measured), fmt(reference_s, "%.1f"),
                      fmt(measured ? tune_s / measured : NAN, "%.2f"), fmt(ours_rate), fmt(dnnl_rate),
                      fmt(ours_rate / dnnl_rate, "%.2f"), fmt(blas_rate), fmt(ours_rate / blas_rate, "%.2f"),
                      fmt(100 * ours_rate / roof, "%.0f%%") + (mem ? " copy" : " peak"),
                      c.adams2019 > 0 ? fmt(ours_rate / c.adams2019, "%.1f") : "-", mem ? "GB/s" : "GFLOP/s"});
      std::filesystem::remove_all(dir);
      std::cerr << c.label << " done\n";
    }
    std::vector<std::string> header = {"case",     "new trials", "reference s", "s/trial", "tiletune",    "oneDNN",
                                       "x oneDNN", "OpenBLAS",   "x OpenBLAS",  "of roof", "x Adams2019", "unit"};
    std::vector<size_t> width(header.size());
    for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
    for (auto& r : rows)
      for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    for (auto* r : {&header}) rows.insert(rows.begin(), *r);
    for (auto& r : rows) {
      for (size_t i = 0; i < r.size(); ++i)
        std::cout << (i ? "  " : "") << r[i] << std::string(width[i] - r[i].size(), ' ');
      std::cout << "\n";
    }
  } catch (const Error& e) {
    std::cerr << "tiletune-bench: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tiletune-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
