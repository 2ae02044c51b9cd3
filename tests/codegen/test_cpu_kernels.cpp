// The CPU backend's kernels against hand-written C++ (the reference semantics) and, for
// many random schedules of every library op, against the naive schedule.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "ir/loop_nest.hpp"
#include "measure/measure.hpp"
#include "measure/protocol.hpp"
#include "random_schedules.hpp"
#include "run_kernel.hpp"
#include "support/subprocess.hpp"
#include "tuner/lookup.hpp"
#include "tuner/space.hpp"

using namespace tiletune;
using tiletune::test::library_workload;
using tiletune::test::TempDir;

namespace {

using Tensors = std::vector<std::vector<float>>;

//! Builds and runs a schedule in this process; returns inputs then outputs (f32 ops).
Tensors run_in_process(const codegen::Backend& be, const ir::Workload& w, const ir::Schedule& s, const TempDir& dir) {
  return test::run_kernel(be, w, s, dir).mem;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - want[i]) > tol * (1 + std::fabs(want[i]))) {
      FAIL_CHECK("element " << i << " is " << got[i] << ", expected " << want[i]);
      return;
    }
  }
}

//! C[m, n] = sum over k of A[m, k] * B[k, n], in double.
std::vector<double> matmul_reference(const std::vector<float>& A, const std::vector<float>& B, int M, int N, int K) {
  std::vector<double> C(M * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k) C[m * N + n] += double(A[m * K + k]) * B[k * N + n];
  return C;
}

std::unique_ptr<codegen::Backend> cpu() { return codegen::make_backend("cpu"); }

//! Rows R of a register tile of two vectors a row (12 with 32 registers, 6 with AVX2's 16: within
//! the registers less 4) and the rows L = 2R/3 that M = R + L leaves to a tile cut at the end.
std::pair<int, int> row_tile_and_left(const ir::TargetTraits& t) {
  const int rows = std::min(12, (t.vector_registers - 4) / 2);
  return {rows, rows * 2 / 3};
}

//! How many register tiles of the emitted source broadcast row `row` of A.
int broadcasts_of_row(const std::string& src, int row) {
  const std::string what = "tt_A_" + std::to_string(row) + "_ =";
  int k = 0;
  for (auto at = src.find(what); at != std::string::npos; at = src.find(what, at + 1)) ++k;
  return k;
}

}  // namespace

TEST_CASE("cpu kernels: naive matmul and conv2d compute what the language says") {
  auto be = cpu();
  TempDir dir;
  {
    auto w = library_workload("matmul", "M=7,N=5,K=3");
    Tensors t = run_in_process(*be, w, ir::naive_schedule(w), dir);
    check_close(t[2], matmul_reference(t[0], t[1], 7, 5, 3), 1e-5);
  }
  {
    auto w = library_workload("conv2d", "N=2,C=3,H=6,W=5,K=4,R=3,S=2");
    Tensors t = run_in_process(*be, w, ir::naive_schedule(w), dir);
    int N = 2, C = 3, H = 6, W = 5, K = 4, R = 3, S = 2, P = H - R + 1, Q = W - S + 1;
    std::vector<double> want(N * K * P * Q);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k)
        for (int y = 0; y < P; ++y)
          for (int x = 0; x < Q; ++x)
            for (int c = 0; c < C; ++c)
              for (int r = 0; r < R; ++r)
                for (int s = 0; s < S; ++s)
                  want[((n * K + k) * P + y) * Q + x] +=
                      double(t[0][((n * C + c) * H + y + r) * W + x + s]) * t[1][((k * C + c) * R + r) * S + s];
    check_close(t[2], want, 1e-5);
  }
}

TEST_CASE(
    "cpu kernels: naive softmax, layernorm, gelu, matmul_bias_relu and matmul_bias_gelu compute what the language "
    "says") {
  auto be = cpu();
  TempDir dir;
  const int N = 3, D = 11;
  {
    auto w = library_workload("softmax", "N=3,D=11");
    Tensors t = run_in_process(*be, w, ir::naive_schedule(w), dir);
    std::vector<double> want(N * D);
    for (int n = 0; n < N; ++n) {
      double mx = -1e30, sum = 0;
      for (int d = 0; d < D; ++d) mx = std::max(mx, double(t[0][n * D + d]));
      for (int d = 0; d < D; ++d) sum += std::exp(t[0][n * D + d] - mx);
      for (int d = 0; d < D; ++d) want[n * D + d] = std::exp(t[0][n * D + d] - mx) / sum;
    }
    check_close(t[1], want, 1e-5);
  }
  {
    auto w = library_workload("layernorm", "N=3,D=11");
    Tensors t = run_in_process(*be, w, ir::naive_schedule(w), dir);
    std::vector<double> want(N * D);
    for (int n = 0; n < N; ++n) {
      double mean = 0, var = 0;
      for (int d = 0; d < D; ++d) mean += t[0][n * D + d] / double(D);
      for (int d = 0; d < D; ++d) var += (t[0][n * D + d] - mean) * (t[0][n * D + d] - mean) / D;
      for (int d = 0; d < D; ++d)
        want[n * D + d] = (t[0][n * D + d] - mean) / std::sqrt(var + 1e-5) * t[1][d] + t[2][d];
    }
    check_close(t[3], want, 1e-4);
  }
  {
    auto w = library_workload("gelu", "N=3,D=11");
    Tensors t = run_in_process(*be, w, ir::naive_schedule(w), dir);
    std::vector<double> want(N * D);
    for (int i = 0; i < N * D; ++i) {
      double x = t[0][i];
      want[i] = 0.5 * x * (1 + std::tanh(0.7978845608 * (x + 0.044715 * x * x * x)));
    }
    check_close(t[1], want, 1e-5);
  }
  {
    auto w = library_workload("matmul_bias_relu", "M=4,N=6,K=5");
    Tensors t = run_in_process(*be, w, ir::naive_schedule(w), dir);
    std::vector<double> want(4 * 6);
    for (int m = 0; m < 4; ++m)
      for (int n = 0; n < 6; ++n) {
        double acc = 0;
        for (int k = 0; k < 5; ++k) acc += double(t[0][m * 5 + k]) * t[1][k * 6 + n];
        want[m * 6 + n] = std::max(acc + t[2][n], 0.0);
      }
    check_close(t[3], want, 1e-5);
  }
  {
    auto w = library_workload("matmul_bias_gelu", "M=4,N=6,K=5");
    Tensors t = run_in_process(*be, w, ir::naive_schedule(w), dir);
    std::vector<double> want(4 * 6);
    for (int m = 0; m < 4; ++m)
      for (int n = 0; n < 6; ++n) {
        double x = t[2][n];
        for (int k = 0; k < 5; ++k) x += double(t[0][m * 5 + k]) * t[1][k * 6 + n];
        want[m * 6 + n] = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
      }
    check_close(t[3], want, 1e-5);
  }
  {  // windows: 3 x 3, stride 2 (7 x 8 -> 3 x 3), and the mean of whole planes
    auto w = library_workload("max_pool2d", "N=1,C=2,H=7,W=8");
    Tensors t = run_in_process(*be, w, ir::naive_schedule(w), dir);
    std::vector<double> want(2 * 3 * 3, -INFINITY);
    for (int c = 0; c < 2; ++c)
      for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 3; ++x)
          for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s)
              want[(c * 3 + y) * 3 + x] =
                  std::max(want[(c * 3 + y) * 3 + x], double(t[0][(c * 7 + 2 * y + r) * 8 + 2 * x + s]));
    check_close(t[1], want, 0);
    // A global pool sums each plane as one run (h_w < 3 * 5 = 15, and 7 * 11 = 77: vectors and a
    // tail), naive and in vectors along the run, two channels per register tile.
    for (auto [H, W] : {std::pair{3, 5}, std::pair{7, 11}}) {
      auto g = library_workload("global_avg_pool", "N=1,C=3,H=" + std::to_string(H) + ",W=" + std::to_string(W));
      std::vector<ir::Schedule> schedules{ir::naive_schedule(g)};
      if (be->target().traits.vector_lanes > 1) {
        ir::Schedule s = ir::naive_schedule(g);
        s.stages[0].tile = {{"n", {1}}, {"c", {2}}, {"h_w", {2 * be->target().traits.vector_lanes}}};
        s.stages[0].vectorize = "h_w";
        s.stages[0].parallel = 1;
        REQUIRE(ir::check_schedule(g, s, be->target().traits) == "");
        schedules.push_back(s);
      }
      for (auto& s : schedules) {
        Tensors u = run_in_process(*be, g, s, dir);
        for (int c = 0; c < 3; ++c) {
          double mean = 0;
          for (int i = 0; i < H * W; ++i) mean += u[0][c * H * W + i] / double(H * W);
          CHECK(u[1][c] == doctest::Approx(mean).epsilon(1e-5));
        }
      }
    }
  }
}

//! Grouped convolution, written out: in[n][g][c][stride*y + r - pad][stride*x + s - pad]
//! reads zero outside the input. G = 1 is a plain convolution, G = C with CG = KG = 1 depthwise.
std::vector<double> conv_reference(const std::vector<float>& in, const std::vector<float>& f, int N, int G, int CG,
                                   int KG, int H, int W, int R, int S, int stride, int pad) {
  int OH = (H + 2 * pad - R) / stride + 1, OW = (W + 2 * pad - S) / stride + 1;
  std::vector<double> out(std::size_t(N) * G * KG * OH * OW, 0.0);
  for (int n = 0; n < N; ++n)
    for (int g = 0; g < G; ++g)
      for (int k = 0; k < KG; ++k)
        for (int y = 0; y < OH; ++y)
          for (int x = 0; x < OW; ++x) {
            double acc = 0;
            for (int c = 0; c < CG; ++c)
              for (int r = 0; r < R; ++r)
                for (int s = 0; s < S; ++s) {
                  int iy = stride * y + r - pad, ix = stride * x + s - pad;
                  if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                  acc += double(in[(((n * G + g) * CG + c) * H + iy) * W + ix]) *
                         f[(((g * KG + k) * CG + c) * R + r) * S + s];
                }
            out[(((n * G + g) * KG + k) * OH + y) * OW + x] = acc;
          }
  return out;
}

TEST_CASE(
    "cpu kernels: the system headers are precompiled once beside the kernels; a damaged one is dropped and the "
    "kernel still builds") {
  namespace fs = std::filesystem;
  auto be = cpu();
  TempDir dir;
  auto w = library_workload("matmul", "M=9,N=13,K=5");
  auto precompiled = [&] {
    std::vector<fs::path> out;
    for (auto& e : fs::directory_iterator(dir.path))
      if (e.path().filename().string().rfind("pch-", 0) == 0) out.push_back(e.path() / "kernel_headers.hpp.gch");
    return out;
  };
  auto check_runs = [&](const ir::Schedule& s) {
    Tensors t = run_in_process(*be, w, s, dir);
    check_close(t[2], matmul_reference(t[0], t[1], 9, 13, 5), 1e-5);
  };
  ir::Schedule tiled = ir::naive_schedule(w);
  tiled.stages[0].tile["n"] = {4};
  check_runs(ir::naive_schedule(w));
  auto made = precompiled();
  REQUIRE(made.size() == 1);
  REQUIRE(fs::exists(made[0]));
  const auto first = fs::last_write_time(made[0]);
  check_runs(tiled);  // built once: the second kernel reads the same file
  CHECK(fs::last_write_time(made[0]) == first);
  // A truncated header fails every compile that reads it (GCC: "cannot read PCH file").
  fs::resize_file(made[0], 1000);
  tiled.stages[0].tile["n"] = {8};
  check_runs(tiled);
  CHECK_FALSE(fs::exists(made[0]));  // dropped
  tiled.stages[0].tile["n"] = {2};
  check_runs(tiled);
  CHECK(fs::file_size(made[0]) > 1000);  // and made again
  // A kernel that does not compile says why, and the header, which is not at fault, stays.
  std::ofstream(dir.file("broken.cpp")) << "extern \"C\" void tt_kernel(float* const* t, float*) { t[0][0] = ; }\n";
  std::string log = be->build(dir.file("broken.cpp"), dir.file("broken.so"));
  CHECK(log.find("expected primary-expression") != std::string::npos);
  CHECK(fs::file_size(made[0]) > 1000);
}

TEST_CASE("cpu kernels: a compiler that cannot run still describes the target; building says it cannot run") {
  TempDir dir;
  codegen::BackendOptions options;
  options.compiler = "/nonexistent/g++";
  auto be = codegen::make_backend("cpu", options);
  CHECK(!be->target().key.empty());  // the version probe found no compiler: "(version unknown)"
  const std::string source = dir.file("k.cpp");
  std::ofstream(source) << "int x;\n";
  ErrorKind kind{};
  CHECK(test::error_of([&] { be->build(source, dir.file("k.so")); }, &kind).find("cannot run /nonexistent/g++") !=
        std::string::npos);
  CHECK(kind == ErrorKind::Io);
}

TEST_CASE("cpu kernels: a build runs under a memory cap, so a compiler gone astray fails alone") {
  namespace fs = std::filesystem;
  TempDir dir;
  // A compiler that says what address space it was given (ulimit -v, in KiB), then fails.
  const std::string compiler = dir.file("cap-g++");
  std::ofstream(compiler) << "#!/bin/sh\necho \"address space $(ulimit -v)\"\nexit 1\n";
  fs::permissions(compiler, fs::perms::owner_all);
  codegen::BackendOptions options;
  options.compiler = compiler;
  auto be = codegen::make_backend("cpu", options);
  const std::string source = dir.file("k.cpp");
  std::ofstream(source) << "int x;\n";
  const std::string log = be->build(source, dir.file("k.so"));
  CAPTURE(log);
  CHECK(log.find("address space 4194304") != std::string::npos);  // 4 GiB
  CHECK(log.find("exit code 1") != std::string::npos);
}

TEST_CASE("cpu kernels: a compiler that cannot precompile the headers still builds every kernel, parsing them itself") {
  namespace fs = std::filesystem;
  TempDir dir;
  // g++ behind a wrapper that refuses to write a precompiled header.
  const std::string compiler = dir.file("no-pch-g++");
  const std::string tries = dir.file("header-tries");
  std::ofstream(compiler) << "#!/bin/sh\ncase \" $* \" in *\" c++-header \"*) echo try >> " << tries
                          << "; exit 1;; esac\nexec g++ \"$@\"\n";
  fs::permissions(compiler, fs::perms::owner_all);
  codegen::BackendOptions options;
  options.compiler = compiler;
  auto be = codegen::make_backend("cpu", options);
  auto w = library_workload("matmul", "M=9,N=13,K=5");
  for (int n : {1, 4}) {  // the second build does not try again
    ir::Schedule s = ir::naive_schedule(w);
    s.stages[0].tile["n"] = {n};
    Tensors t = run_in_process(*be, w, s, dir);
    check_close(t[2], matmul_reference(t[0], t[1], 9, 13, 5), 1e-5);
  }
  for (auto& e : fs::recursive_directory_iterator(dir.path)) CHECK_MESSAGE(e.path().extension() != ".gch", e.path());
  std::ifstream in(tries);
  int tried = 0;
  for (std::string line; std::getline(in, line);) ++tried;
  CHECK(tried == 1);
}

TEST_CASE("cpu kernels: padded inputs read their pad value outside the tensor, naive and tiled, tails included") {
  auto be = cpu();
  TempDir dir;
  int lanes = be->target().traits.vector_lanes;
  // Every schedule of each op: the naive one, and ones tiled along x in vectors whose tiles
  // reach past the borders (and past the ends: W is no multiple of the lanes): two vectors,
  // and one vector by two rows of y. Strided windows (stride 2) load their rows strided.
  auto schedules = [&](const ir::Workload& w, const std::string& vector_axis) {
    std::vector<ir::Schedule> out{ir::naive_schedule(w)};
    if (lanes < 2) return out;
    for (int vectors : {2, 1}) {
      ir::Schedule s = ir::naive_schedule(w);
      auto& st = s.stages[0];
      st.tile[vector_axis] = {vectors * lanes};
      if (vectors == 1) st.tile["y"] = {2};
      st.vectorize = vector_axis;
      REQUIRE(ir::check_schedule(w, s, be->target().traits) == "");
      out.push_back(s);
    }
    return out;
  };
  struct Case {
    std::string op, sizes;
    int N, G, CG, KG, H, W, R, S, stride;
  };
  for (const Case& c : std::vector<Case>{
           {"conv2d_p1", "N=1,C=3,H=7,W=19,K=5,R=3,S=3", 1, 1, 3, 5, 7, 19, 3, 3, 1},
           {"conv2d_p1", "N=2,C=2,H=1,W=1,K=3,R=3,S=3", 2, 1, 2, 3, 1, 1, 3, 3, 1},    // all border
           {"conv2d_p1", "N=1,C=2,H=6,W=11,K=2,R=5,S=5", 1, 1, 2, 2, 6, 11, 5, 5, 1},  // 5x5 reads 2 outside
           {"conv2d_s2p1", "N=1,C=3,H=9,W=20,K=4,R=3,S=3", 1, 1, 3, 4, 9, 20, 3, 3, 2},
           {"depthwise_conv2d_p1", "N=1,C=3,H=5,W=23,R=3,S=3", 1, 3, 1, 1, 5, 23, 3, 3, 1},
           {"depthwise_conv2d_s2p1", "N=2,C=2,H=8,W=17,R=3,S=3", 2, 2, 1, 1, 8, 17, 3, 3, 2},
           {"depthwise_conv2d_s2p1", "N=1,C=2,H=5,W=83,R=3,S=3", 1, 2, 1, 1, 5, 83, 3, 3, 2},  // interior vectors
           {"depthwise_conv2d_s2p1", "N=1,C=1,H=1,W=1,R=3,S=3", 1, 1, 1, 1, 1, 1, 3, 3, 2},
           {"grouped_conv2d_p1", "N=1,G=2,CG=3,KG=2,H=5,W=13,R=3,S=3", 1, 2, 3, 2, 5, 13, 3, 3, 1}}) {
    CAPTURE(c.op);
    CAPTURE(c.sizes);
    auto w = library_workload(c.op, c.sizes);
    auto want_for = [&](const Tensors& t) {
      return conv_reference(t[0], t[1], c.N, c.G, c.CG, c.KG, c.H, c.W, c.R, c.S, c.stride, 1);
    };
    for (auto& s : schedules(w, "x")) {
      Tensors t = run_in_process(*be, w, s, dir);
      check_close(t.back(), want_for(t), 1e-5);
    }
  }
  {  // conv + bias + ReLU fused: the epilogue sees the padded sums
    auto w = library_workload("conv2d_bias_relu_p1", "N=1,C=2,H=4,W=9,K=3,R=3,S=3");
    for (auto& s : schedules(w, "x")) {
      Tensors t = run_in_process(*be, w, s, dir);
      auto want = conv_reference(t[0], t[1], 1, 1, 2, 3, 4, 9, 3, 3, 1, 1);
      for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(want[i] + t[2][i / 36], 0.0);
      check_close(t[3], want, 1e-5);
    }
  }
  {  // max pooling pads with -inf: a window at the corner takes the max of its 4 inside points
    for (auto [H, W] : {std::pair{7, 10}, std::pair{3, 101}}) {  // -> 4 x 5, 2 x 51
      CAPTURE(W);
      auto w = library_workload("max_pool2d_p1", "N=1,C=2,H=" + std::to_string(H) + ",W=" + std::to_string(W));
      int OH = (H - 1) / 2 + 1, OW = (W - 1) / 2 + 1;
      for (auto& s : schedules(w, "x")) {
        Tensors t = run_in_process(*be, w, s, dir);
        std::vector<double> want(2 * OH * OW, -INFINITY);
        for (int ch = 0; ch < 2; ++ch)
          for (int y = 0; y < OH; ++y)
            for (int x = 0; x < OW; ++x)
              for (int r = 0; r < 3; ++r)
                for (int s2 = 0; s2 < 3; ++s2) {
                  int iy = 2 * y + r - 1, ix = 2 * x + s2 - 1;
                  if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                    want[(ch * OH + y) * OW + x] =
                        std::max(want[(ch * OH + y) * OW + x], double(t[0][(ch * H + iy) * W + ix]));
                }
        check_close(t[1], want, 0);
      }
    }
  }
}

TEST_CASE("cpu kernels: depthwise convolutions in the channel-blocked layout, lanes along the block, tails included") {
  auto be = cpu();
  TempDir dir;
  int lanes = be->target().traits.vector_lanes;
  struct Case {
    std::string op;
    int CB, L, H, W, stride;
  };
  // Blocks shorter than a vector, one lane longer (a vector and a tail), and a 1x1 plane whose
  // every read but the centre tap is padding.
  for (const Case& c : std::vector<Case>{{"depthwise_conv2d_nchwc_p1", 2, 5, 7, 9, 1},
                                         {"depthwise_conv2d_nchwc_p1", 3, lanes + 1, 6, 11, 1},
                                         {"depthwise_conv2d_nchwc_s2p1", 1, 19, 9, 7, 2},
                                         {"depthwise_conv2d_nchwc_s2p1", 2, lanes, 1, 1, 2}}) {
    std::string sizes = "N=1,CB=" + std::to_string(c.CB) + ",L=" + std::to_string(c.L) + ",H=" + std::to_string(c.H) +
                        ",W=" + std::to_string(c.W) + ",R=3,S=3";
    CAPTURE(c.op);
    CAPTURE(sizes);
    auto w = library_workload(c.op, sizes);
    std::vector<ir::Schedule> schedules{ir::naive_schedule(w)};
    // Lanes along c, a register block of x points whose tiles reach past both borders, rows of y.
    for (auto [vectors, xs] : {std::pair{1, 4}, std::pair{2, 3}}) {
      if (lanes < 2) break;
      ir::Schedule s = ir::naive_schedule(w);
      auto& st = s.stages[0];
      st.tile["c"] = {vectors * lanes};
      st.tile["x"] = {xs};
      st.tile["y"] = {2};
      st.vectorize = "c";
      REQUIRE(ir::check_schedule(w, s, be->target().traits) == "");
      schedules.push_back(s);
    }
    const int C = c.CB * c.L, OH = (c.H + 2 - 3) / c.stride + 1, OW = (c.W + 2 - 3) / c.stride + 1;
    for (auto& s : schedules) {
      Tensors t = run_in_process(*be, w, s, dir);
      // The same tensors in NCHW (channel b * L + c), through the plain reference.
      std::vector<float> in(std::size_t(C) * c.H * c.W), f(std::size_t(C) * 9);
      for (int b = 0; b < c.CB; ++b)
        for (int l = 0; l < c.L; ++l) {
          for (int i = 0; i < c.H * c.W; ++i) in[(b * c.L + l) * c.H * c.W + i] = t[0][(b * c.H * c.W + i) * c.L + l];
          for (int i = 0; i < 9; ++i) f[(b * c.L + l) * 9 + i] = t[1][(b * 9 + i) * c.L + l];
        }
      auto plain = conv_reference(in, f, 1, C, 1, 1, c.H, c.W, 3, 3, c.stride, 1);
      std::vector<double> want(plain.size());
      for (int b = 0; b < c.CB; ++b)
        for (int l = 0; l < c.L; ++l)
          for (int i = 0; i < OH * OW; ++i) want[(b * OH * OW + i) * c.L + l] = plain[(b * c.L + l) * OH * OW + i];
      check_close(t.back(), want, 1e-5);
    }
  }
}

TEST_CASE("cpu kernels: dense convolutions in the channel-blocked layout match the plain reference, tails included") {
  auto be = cpu();
  TempDir dir;
  const int lanes = be->target().traits.vector_lanes;
  struct Case {
    std::string op;
    int CB, KB, L, H, W, R, stride, pad;
  };
  // Blocks shorter than a vector, a vector and a lane more, and a 1x1 plane (every tap but the
  // centre reads padding).
  for (const Case& c : std::vector<Case>{{"conv2d_nchwc_p1", 2, 3, 5, 7, 9, 3, 1, 1},
                                         {"conv2d_nchwc_p1", 1, 2, lanes + 1, 1, 1, 3, 1, 1},
                                         {"conv2d_nchwc_s2p1", 2, 1, lanes + 1, 9, 7, 3, 2, 1},
                                         {"conv2d_nchwc_1x1", 3, 2, lanes + 1, 5, 3, 1, 1, 0},
                                         {"conv2d_nchwc_bias_relu_p1", 2, 2, lanes + 1, 3, 7, 3, 1, 1}}) {
    std::string sizes = "N=1,CB=" + std::to_string(c.CB) + ",KB=" + std::to_string(c.KB) + ",L=" + std::to_string(c.L) +
                        ",H=" + std::to_string(c.H) + ",W=" + std::to_string(c.W);
    if (c.R == 3) sizes += ",R=3,S=3";
    CAPTURE(c.op);
    CAPTURE(sizes);
    auto w = library_workload(c.op, sizes);
    std::vector<ir::Schedule> schedules{ir::naive_schedule(w)};
    // Lanes along the output block, a register block of pixels whose tiles reach past the borders.
    const std::string px = c.R == 1 ? "p" : "x";
    for (auto [vectors, points] : {std::pair{1, 4}, std::pair{2, 3}}) {
      if (lanes < 2) break;
      ir::Schedule s = ir::naive_schedule(w);
      auto& st = s.stages[0];
      st.tile["m"] = {vectors * lanes};
      st.tile[px] = {points};
      st.vectorize = "m";
      REQUIRE(ir::check_schedule(w, s, be->target().traits) == "");
      schedules.push_back(s);
    }
    const int C = c.CB * c.L, K = c.KB * c.L, HW = c.H * c.W;
    const int OH = (c.H + 2 * c.pad - c.R) / c.stride + 1, OW = (c.W + 2 * c.pad - c.R) / c.stride + 1;
    for (auto& s : schedules) {
      Tensors t = run_in_process(*be, w, s, dir);
      // The same tensors in NCHW and KCRS (channel b * L + c), through the plain reference.
      std::vector<float> in(std::size_t(C) * HW), f(std::size_t(K) * C * c.R * c.R);
      for (int b = 0; b < c.CB; ++b)
        for (int l = 0; l < c.L; ++l)
          for (int i = 0; i < HW; ++i) in[(b * c.L + l) * HW + i] = t[0][(b * HW + i) * c.L + l];
      const int taps = c.R * c.R;
      for (int kb = 0; kb < c.KB; ++kb)
        for (int b = 0; b < c.CB; ++b)
          for (int i = 0; i < taps; ++i)
            for (int l = 0; l < c.L; ++l)
              for (int m = 0; m < c.L; ++m)
                f[((kb * c.L + m) * C + b * c.L + l) * taps + i] =
                    t[1][(((kb * c.CB + b) * taps + i) * c.L + l) * c.L + m];
      auto plain = conv_reference(in, f, 1, 1, C, K, c.H, c.W, c.R, c.R, c.stride, c.pad);
      std::vector<double> want(plain.size());
      for (int kb = 0; kb < c.KB; ++kb)
        for (int m = 0; m < c.L; ++m)
          for (int i = 0; i < OH * OW; ++i) want[(kb * OH * OW + i) * c.L + m] = plain[(kb * c.L + m) * OH * OW + i];
      if (c.op.find("bias_relu") != std::string::npos)  // bias[kb, m] per output channel, then ReLU
        for (size_t i = 0; i < want.size(); ++i)
          want[i] = std::max(want[i] + t[2][i / (OH * OW * c.L) * c.L + i % c.L], 0.0);
      check_close(t.back(), want, 1e-4);
    }
  }
}

TEST_CASE("cpu kernels: a hand-written tiled, vectorized, parallel schedule with tails matches the naive one") {
  auto be = cpu();
  int lanes = be->target().traits.vector_lanes;
  if (lanes < 2) TT_SKIP("the CPU has no SIMD lanes to vectorize with");
  TempDir dir;
  auto w = library_workload("matmul", "M=37,N=53,K=29");
  // Rows of the register tile are two vectors along n, the level above four (32 and 64 on AVX-512).
  auto s = ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"C","tile":{"m":[12,6],"n":[64,32],"k":[16,8]},)"
      R"("order":["m.0","n.0","k.0","m.1","k.1","n.1"],"vectorize":"n","unroll":4,"parallel":2}]})");
  s.stages[0].tile["n"] = {4 * lanes, 2 * lanes};
  REQUIRE(ir::check_schedule(w, s, be->target().traits) == "");
  Tensors fast = run_in_process(*be, w, s, dir);
  Tensors ref = run_in_process(*be, w, ir::naive_schedule(w), dir);
  std::vector<double> want(ref[2].begin(), ref[2].end());
  check_close(fast[2], want, 1e-4);
  // Prefetching 3 iterations ahead reads past the reduction block and the tensor's end,
  // which a prefetch may; the results stay the same.
  s.stages[0].prefetch = 3;
  std::string src = be->emit(w, ir::lower(w, s, be->target().traits), s.to_json());
  CHECK(src.find("__builtin_prefetch(&tt_B_[tt_k2_ * 53 + tt_n1_ + 159]);") != std::string::npos);
  check_close(run_in_process(*be, w, s, dir)[2], want, 1e-4);
}

TEST_CASE("cpu kernels: a register tile cut along a row axis is one tile of the rows left, tails and row blocks included") {
  auto be = cpu();
  const auto& traits = be->target().traits;
  if (traits.vector_lanes < 2) TT_SKIP("the CPU has no SIMD lanes to vectorize with");
  TempDir dir;
  // Rows m in tiles of R (12 with 32 registers, 6 with AVX2's 16: two vectors a row, within the
  // registers less 4): M = R + L leaves L = 2R/3 rows (8 or 4), and M = R + 1 one. Each form of
  // the R-row tile (its whole vectors, and where N = 2 * lanes + 3 cuts them, a loop of vectors
  // and a masked one) has a twin of L rows that broadcasts rows 0 to L - 1 of A too: row L - 1
  // twice as often as row L, which only R rows have. One row at a time, each would broadcast
  // row 0 alone. The same in one loop over blocks of R rows (fuse_rows) with the epilogue fused:
  // blocks start at multiples of R, so the last block's rows are one tile too (one row at a
  // time, a matmul_bias_relu of M=67, N=19 ran 4x slower).
  const auto [rows, left] = row_tile_and_left(traits);
  const std::string n = std::to_string(2 * traits.vector_lanes + 3);
  for (bool row_blocks : {false, true})
    for (int m : {rows + left, rows + 1}) {
      CAPTURE(row_blocks);
      CAPTURE(m);
      auto w = library_workload(row_blocks ? "matmul_bias_relu" : "matmul",
                                "M=" + std::to_string(m) + ",N=" + n + ",K=5");
      auto s = ir::Schedule::from_json(
          R"({"version":1,"stages":[{"stage":"C","tile":{"m":[12],"n":[32],"k":[5]},"order":["m.0","n.0","k.0"],)"
          R"("vectorize":"n","unroll":0,"parallel":0}]})");
      s.stages[0].tile["m"] = {rows};
      s.stages[0].tile["n"] = {2 * traits.vector_lanes};
      if (row_blocks) {
        s.fuse_rows = rows;
        s.stages[0].stage = "acc";
        s.stages[0].fuse_epilogue = true;
        s.stages.push_back(ir::StageSchedule());
        s.stages[1].stage = "C";
      }
      REQUIRE(ir::check_schedule(w, s, traits) == "");
      std::string src = be->emit(w, ir::lower(w, s, traits), s.to_json());
      CHECK((src.find("tt_row_") != std::string::npos) == row_blocks);
      REQUIRE(broadcasts_of_row(src, left) > 0);
      CHECK(broadcasts_of_row(src, left - 1) == (m == rows + left ? 2 : 1) * broadcasts_of_row(src, left));
      const size_t out = row_blocks ? 3 : 2;  // the tensors are the inputs (A, B and bias), then C
      Tensors ref = run_in_process(*be, w, ir::naive_schedule(w), dir);
      check_close(run_in_process(*be, w, s, dir)[out], std::vector<double>(ref[out].begin(), ref[out].end()), 1e-5);
    }
}

TEST_CASE("cpu kernels: packed inputs with tails match the naive schedule") {
  auto be = cpu();
  int lanes = be->target().traits.vector_lanes;
  if (lanes < 2) TT_SKIP("the CPU has no SIMD lanes to vectorize with");
  TempDir dir;
  auto w = library_workload("matmul", "M=37,N=53,K=29");
  // Rows of the register tile are two vectors along n (32 on AVX-512), and so are the panels of B.
  auto s = ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"C","tile":{"m":[12,6],"n":[64,32],"k":[16]},"pack":["A","B"],)"
      R"("order":["n.0","m.0","k.0","m.1","n.1"],"vectorize":"n","unroll":2,"parallel":1}]})");
  s.stages[0].tile["n"] = {4 * lanes, 2 * lanes};
  REQUIRE(ir::check_schedule(w, s, be->target().traits) == "");
  std::string src = be->emit(w, ir::lower(w, s, be->target().traits), s.to_json());
  CHECK(src.find("// pack B into panels of " + std::to_string(2 * lanes) + " along n") != std::string::npos);
  CHECK(src.find("// pack A into panels of 6 along m") != std::string::npos);
  Tensors fast = run_in_process(*be, w, s, dir);
  Tensors ref = run_in_process(*be, w, ir::naive_schedule(w), dir);
  check_close(fast[2], std::vector<double>(ref[2].begin(), ref[2].end()), 1e-4);
}

TEST_CASE("cpu kernels: an axis the output and an input are strided along is vectorized with that input packed") {
  auto be = cpu();
  const auto& traits = be->target().traits;
  int lanes = traits.vector_lanes;
  if (lanes < 2) TT_SKIP("the CPU has no SIMD lanes to vectorize with");
  std::string panel = std::to_string(2 * lanes);  // two vectors: 32 floats on AVX-512
  TempDir dir;
  // conv2d along output channels k: F is packed into panels along k, I broadcast, O's
  // vectors gathered and scattered (and gathered again for the second block of c). K=40
  // is more than a panel (a whole one and a cut one on AVX-512), W=13 and K=19 leave cut rows
  // and panels; C=1 and a 1x1 output are the degenerate sizes.
  for (std::string sizes : {"N=1,C=3,H=7,W=8,K=40,R=3,S=2", "N=2,C=3,H=7,W=13,K=19,R=3,S=2",
                            "N=1,C=1,H=3,W=3,K=17,R=3,S=3", "N=1,C=5,H=1,W=1,K=32,R=1,S=1"}) {
    CAPTURE(sizes);
    auto w = library_workload("conv2d", sizes);
    auto s = ir::Schedule::from_json(
        R"({"version":1,"stages":[{"stage":"O","tile":{"n":[1],"k":[32],"y":[2],"x":[6,3],"c":[2],"r":[3],"s":[1]},)"
        R"("order":["k.0","n.0","y.0","x.0","c.0","r.0","s.0","x.1"],"vectorize":"k","pack":["F"],"unroll":2,"parallel":2}]})");
    s.stages[0].tile["k"] = {2 * lanes};
    std::string why = ir::check_schedule(w, s, traits);
    REQUIRE_MESSAGE(why == "", why);
    std::string src = be->emit(w, ir::lower(w, s, traits), s.to_json());
    CHECK(src.find("// pack F into panels of " + panel + " along k") != std::string::npos);
    if (sizes.find("H=7") != std::string::npos) {  // the others' O is 1x1 per channel: contiguous along k
      CHECK(src.find("tt_store_s(&tt_O_") != std::string::npos);
      CHECK(src.find(" : tt_load_s(&tt_O_") != std::string::npos);
    }
    // The updates run row by row (the vectors of one x before the next x's broadcast), though
    // k comes before x in the op's axes: a broadcast is dead after its row.
    if (sizes.find("W=13") != std::string::npos) {
      auto second_vector_of_first_row = src.find("(tt_I_0_ * tt_F_1_)");
      auto second_row = src.find("tt_I_1_ =");
      REQUIRE(second_vector_of_first_row != std::string::npos);
      REQUIRE(second_row != std::string::npos);
      CHECK(second_vector_of_first_row < second_row);
    }
    Tensors fast = run_in_process(*be, w, s, dir);
    Tensors ref = run_in_process(*be, w, ir::naive_schedule(w), dir);
    check_close(fast[2], std::vector<double>(ref[2].begin(), ref[2].end()), 1e-4);
  }
  // C = A * B^T: n is strided in B, which must be packed for it. B's panels run across its
  // contiguous k, so they are filled by transposing tiles of lanes x lanes: K = 11 is less than
  // a tile on AVX-512 (all by the scalar tail), 2 * lanes + 3 has whole tiles and a tail; N
  // leaves a cut panel (zero-padded) in both.
  const ir::OpDef mm_nt =
      ir::parse_op("op mm_nt(A: f32[M, K], B: f32[N, K]) -> C: f32[M, N] {\n  C[m, n] += A[m, k] * B[n, k]\n}");
  auto nt = ir::bind(mm_nt, ir::parse_sizes("M=7,N=37,K=11"));
  auto s = ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"C","tile":{"m":[6,3],"n":[32],"k":[5]},"order":["n.0","m.0","k.0","m.1"],)"
      R"("vectorize":"n","unroll":0,"parallel":1}]})");
  s.stages[0].tile["n"] = {2 * lanes};
  CHECK(ir::check_schedule(nt, s, traits) == "stage C: 'B' is read strided along 'n': vectorizing it needs 'B' packed");
  s.stages[0].pack = {"B"};
  for (std::string sizes : {std::string("M=7,N=37,K=11"),
                            "M=5,N=" + std::to_string(4 * lanes + 3) + ",K=" + std::to_string(2 * lanes + 3)}) {
    CAPTURE(sizes);
    auto wt = ir::bind(mm_nt, ir::parse_sizes(sizes));
    REQUIRE(ir::check_schedule(wt, s, traits) == "");
    CHECK(be->emit(wt, ir::lower(wt, s, traits), s.to_json()).find("tt_transpose_tile(") != std::string::npos);
    Tensors fast = run_in_process(*be, wt, s, dir);
    Tensors ref = run_in_process(*be, wt, ir::naive_schedule(wt), dir);
    check_close(fast[2], std::vector<double>(ref[2].begin(), ref[2].end()), 1e-4);
  }
  // Panels run along one dimension: a read whose lanes move along two is not vectorized.
  auto diag =
      ir::bind(ir::parse_op("op diag(A: f32[N, N]) -> y: f32[N] {\n  y[i] = A[i, i]\n}"), ir::parse_sizes("N=32"));
  auto d = ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"y","tile":{"i":[16]},"order":["i.0"],"vectorize":"i","pack":["A"],"unroll":0,"parallel":0}]})");
  CHECK(ir::check_schedule(diag, d, traits).find("'A' is read along 'i' in 2 dimensions") != std::string::npos);
  CHECK(tuner::Space(diag, traits).seeds().empty());
  // Work-group devices keep vectors on the contiguous axis: packing does not make up for B's stride.
  ir::TargetTraits gpu = traits;
  gpu.max_group_size = 256;
  gpu.local_bytes = 1 << 16;
  std::string refused = ir::check_schedule(nt, s, gpu);
  CHECK_MESSAGE(refused.find("'B' is read strided along 'n', which cannot be vectorized") != std::string::npos,
                refused);
}

TEST_CASE("cpu kernels: softmax fused into row blocks matches the naive schedule") {
  auto be = cpu();
  TempDir dir;
  auto w = library_workload("softmax", "N=7,D=45");
  auto s = ir::Schedule::from_json(
      R"({"version":1,"fuse_rows":2,"stages":[)"
      R"({"stage":"mx","tile":{"n":[1],"d":[45]},"order":["n.0","d.0"],"vectorize":null,"unroll":0,"parallel":0},)"
      R"({"stage":"e","inline":true},)"
      R"({"stage":"s","tile":{"n":[2,1],"d":[45]},"order":["n.0","n.1","d.0"],"vectorize":null,"unroll":0,"parallel":0},)"
      R"({"stage":"Y","tile":{"n":[1],"d":[5]},"order":["n.0","d.0"],"vectorize":null,"unroll":0,"parallel":0}]})");
  std::string src = be->emit(w, ir::lower(w, s, be->target().traits), s.to_json());
  CHECK(src.find("for (std::int64_t tt_row_ = 0; tt_row_ < 7; tt_row_ += 2)") != std::string::npos);
  Tensors fast = run_in_process(*be, w, s, dir);
  Tensors ref = run_in_process(*be, w, ir::naive_schedule(w), dir);
  check_close(fast[1], std::vector<double>(ref[1].begin(), ref[1].end()), 1e-5);
  // Materialized, e holds only each thread's block of rows: blocks of 3 leave a cut last
  // block (7 = 3 + 3 + 1), blocks of 8 one block for one of the threads, 1 many small ones.
  for (int rows : {3, 8, 1}) {
    CAPTURE(rows);
    s.fuse_rows = rows;
    s.stages[1] =
        ir::Schedule::from_json(
            R"({"version":1,"stages":[{"stage":"e","tile":{"n":[1],"d":[16]},"order":["n.0","d.0"],"vectorize":"d","unroll":0,"parallel":0}]})")
            .stages[0];
    s.stages[2].tile["n"] = {1};
    s.stages[2].order = {"n.0", "d.0"};
    REQUIRE(ir::check_schedule(w, s, be->target().traits) == "");
    src = be->emit(w, ir::lower(w, s, be->target().traits), s.to_json());
    CHECK(src.find("- tt_row_ * 45 + tt_slot_ * 45") != std::string::npos);
    fast = run_in_process(*be, w, s, dir);
    check_close(fast[1], std::vector<double>(ref[1].begin(), ref[1].end()), 1e-5);
  }
}

TEST_CASE("cpu kernels: user names that are C++ words or macros, and an elementwise stage with a fused epilogue") {
  auto be = cpu();
  TempDir dir;
  auto w = ir::bind(ir::parse_op("op f(from: f32[N, D], to: f32[D], NAN: f32[D]) -> or: f32[N, D] {\n"
                                 "  int[n, d] = from[n, d] * 2.0 + NAN[d]\n"
                                 "  or[n, d] = int[n, d] + from[n, d] * to[d]\n}"),
                    {{"N", 5}, {"D", 37}});
  tuner::Space space(w, be->target().traits);
  tuner::Rng rng(3);
  std::vector<ir::Schedule> batch{ir::naive_schedule(w)};
  auto fused = ir::naive_schedule(w);
  fused.stages[0].fuse_epilogue = true;
  fused.stages[1] = ir::StageSchedule();
  fused.stages[1].stage = "or";
  REQUIRE(ir::check_schedule(w, fused, be->target().traits) == "");
  batch.push_back(fused);
  batch.push_back(fused);  // the same config twice in one batch builds once
  for (int i = 0; i < 6; ++i) batch.push_back(space.sample(rng));
  test::all_correct(*be, w, batch, dir.file("cache"));
}

TEST_CASE("cpu kernels: user names that the generated code or its headers also use never collide") {
  // Names of OpenMP, libm, the C library's macros, C++ and the prelude's helpers (tt_load is
  // `load` behind tiletune's prefix), in the fused-rows candidates that call omp_get_thread_num.
  auto be = cpu();
  auto w = ir::bind(ir::parse_op("op f(omp_get_thread_num: f32[N, D], load: f32[D]) -> errno: f32[N, D] {\n"
                                 "  std[n] max= omp_get_thread_num[n, d]\n"
                                 "  expf[n, d] = exp(omp_get_thread_num[n, d] - std[n]) * load[d]\n"
                                 "  memcpy[n] += expf[n, d]\n"
                                 "  errno[n, d] = expf[n, d] / memcpy[n]\n}"),
                    {{"N", 9}, {"D", 21}});
  tuner::Space space(w, be->target().traits);
  tuner::Rng rng(5);
  std::vector<ir::Schedule> batch{ir::naive_schedule(w)};
  int fused = 0;
  for (int i = 0; i < 400 && fused < 4; ++i) {
    ir::Schedule s = space.sample(rng);
    if (s.fuse_rows > 0) ++fused, batch.push_back(s);
  }
  CHECK(fused == 4);
  test::all_correct(*be, w, batch);
  // The construction: variables are tt_NAME_, and no fixed name of the prelude ends in '_'.
  std::string src = be->emit(w, ir::lower(w, batch[1], be->target().traits), batch[1].to_json());
  CHECK(src.find("tt_omp_get_thread_num_[") != std::string::npos);
  std::smatch m;
  std::string prelude = src.substr(0, src.find("extern \"C\""));
  CHECK_FALSE(std::regex_search(prelude, m, std::regex(R"(\b[tT][tT]_\w*_\b)")));
}

TEST_CASE("cpu kernels: a scalar tile's short reduction loops run straight only when nothing inside stays a loop") {
  auto be = cpu();
  TempDir dir;
  // Sums over planes of 5 x 13 (a window in rows of 14, so that h and w stay two loops): h (4
  // of 5, a tail) around w. 64 scalar sums over h < 4 of a w < 14 loop unrolled took GCC 30-40 s
  // to compile (it vectorized each copy of the w loop).
  auto w = ir::bind(ir::parse_op("op s(X: f32[N, C, H, W]) -> Y: f32[N, C] { Y[n, c] += X[n, c, h, w] where w < 13 }"),
                    ir::parse_sizes("N=2,C=19,H=5,W=14"));
  auto config = [](const std::string& wtile) {
    return ir::Schedule::from_json(R"({"version":1,"stages":[{"stage":"Y","tile":{"n":[1],"c":[8],"h":[4],"w":)" +
                                   wtile + R"(},"order":["n.0","c.0","h.0","w.0"],"unroll":2}]})");
  };
  Tensors ref = run_in_process(*be, w, ir::naive_schedule(w), dir);
  std::vector<double> want(ref[1].begin(), ref[1].end());
  for (auto [wtile, h_straight] : {std::pair{"[13]", false}, std::pair{"[2]", true}}) {
    CAPTURE(wtile);
    auto s = config(wtile);
    REQUIRE(ir::check_schedule(w, s, be->target().traits) == "");
    std::string src = be->emit(w, ir::lower(w, s, be->target().traits), s.to_json());
    std::regex h_loop(R"(#pragma GCC unroll 4\s*\n\s*for \(std::int64_t tt_h1_)");
    CHECK(std::regex_search(src, h_loop) == h_straight);
    CHECK(src.find("#pragma GCC unroll 2") != std::string::npos);  // the unroll knob, innermost
    check_close(run_in_process(*be, w, s, dir)[1], want, 1e-5);
  }
}

TEST_CASE("cpu kernels: a reduction runs straight within a budget of statements") {
  auto be = cpu();
  TempDir dir;
  // 64 scalar sums (k 1, y 2, x 32) over c < 8, r < 3, s < 3: s straight (192 statements), r and c
  // loops around it (4608 straight statements took GCC 50 s to compile).
  auto w = library_workload("conv2d_p1", "N=1,C=9,H=7,W=37,K=3,R=3,S=3");
  auto s = ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"O","tile":{"n":[1],"k":[1],"y":[2],"x":[32],"c":[8],"r":[3],"s":[3]},)"
      R"("order":["n.0","k.0","y.0","x.0","c.0","r.0","s.0"]}]})");
  REQUIRE(ir::check_schedule(w, s, be->target().traits) == "");
  std::string src = be->emit(w, ir::lower(w, s, be->target().traits), s.to_json());
  CHECK(src.find("#pragma GCC unroll 3") != std::string::npos);
  CHECK(src.find("#pragma GCC unroll 8") == std::string::npos);
  Tensors ref = run_in_process(*be, w, ir::naive_schedule(w), dir);
  check_close(run_in_process(*be, w, s, dir)[2], std::vector<double>(ref[2].begin(), ref[2].end()), 1e-5);
  // Vectors along k: 10 vector sums (k two vectors, y 5) over c < 8, r < 3, s < 3: r and s
  // straight (90 statements), c a loop (720).
  const int lanes = be->target().traits.vector_lanes;
  if (lanes < 2) return;
  auto wv = library_workload("conv2d_p1", "N=1,C=9,H=7,W=11,K=" + std::to_string(2 * lanes + 3) + ",R=3,S=3");
  auto sv = ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"O","tile":{"n":[1],"k":[)" + std::to_string(2 * lanes) +
      R"(],"y":[5],"x":[1],"c":[8],"r":[3],"s":[3]},"order":["n.0","k.0","y.0","x.0","c.0","r.0","s.0"],)"
      R"("vectorize":"k","pack":["F"]}]})");
  REQUIRE(ir::check_schedule(wv, sv, be->target().traits) == "");
  src = be->emit(wv, ir::lower(wv, sv, be->target().traits), sv.to_json());
  CHECK(src.find("#pragma GCC unroll 3") != std::string::npos);
  CHECK(src.find("#pragma GCC unroll 8") == std::string::npos);
  Tensors refv = run_in_process(*be, wv, ir::naive_schedule(wv), dir);
  check_close(run_in_process(*be, wv, sv, dir)[2], std::vector<double>(refv[2].begin(), refv[2].end()), 1e-5);
}

TEST_CASE("cpu kernels: the generated source is readable") {
  auto be = cpu();
  auto w = library_workload("matmul", "M=64,N=64,K=64");
  std::string src = be->emit(w, ir::lower(w, ir::naive_schedule(w), be->target().traits), "{}");
  CHECK(src.find("// stage C: C[m, n] += (A[m, k] * B[k, n])") != std::string::npos);
  CHECK(src.find("for (std::int64_t tt_m0_ = 0; tt_m0_ < 64; tt_m0_ += 1)") != std::string::npos);
  CHECK(src.find("tt_acc0_ = tt_acc0_ + (tt_A_0_ * tt_B_0_);") != std::string::npos);
}

TEST_CASE("backend registry: unknown backends are refused with the list of known ones") {
  std::string msg = tiletune::test::error_of([] { codegen::make_backend("tpu"); });
  CHECK(msg.find("unknown backend 'tpu'") != std::string::npos);
  CHECK(msg.find("cpu") != std::string::npos);
  auto be = cpu();
  CHECK(be->target().key.size() == 16);
  CHECK(be->target().fingerprint_json.find("\"compiler\"") != std::string::npos);
}

// Sizes are primes, ones and other numbers that no tile size divides, so tails are exercised.
TEST_CASE("library ops: random valid schedules compute the reference results") {
  test::random_schedules_of_every_op_are_correct(5, 1);
}

TEST_CASE(
    "seed configs: BLAS-like schedules of the reductions are valid and compute the reference results, tails included") {
  auto be = cpu();
  int seeded = 0;
  for (auto [op, sizes] :
       std::vector<std::pair<std::string, std::string>>{{"matmul", "M=37,N=67,K=23"},
                                                        {"matmul", "M=1,N=17,K=1"},
                                                        {"matmul_bias_relu", "M=29,N=41,K=19"},
                                                        {"batch_matmul", "G=3,M=13,N=35,K=7"},
                                                        {"conv2d", "N=1,C=3,H=11,W=19,K=5,R=3,S=3"},
                                                        {"depthwise_conv2d", "N=2,C=3,H=9,W=21,R=3,S=3"},
                                                        {"conv2d_p1", "N=1,C=3,H=7,W=13,K=5,R=3,S=3"},
                                                        {"conv2d_s2p1", "N=1,C=2,H=9,W=15,K=11,R=3,S=3"},
                                                        {"conv2d_bias_relu_p1", "N=1,C=3,H=7,W=13,K=21,R=3,S=3"},
                                                        {"row_sum", "N=11,D=53"},
                                                        {"softmax", "N=7,D=43"},
                                                        {"layernorm", "N=37,D=19"}}) {
    CAPTURE(op);
    auto w = library_workload(op, sizes);
    tuner::Space space(w, be->target().traits);
    auto seeds = space.seeds();
    for (auto& s : seeds) CHECK(ir::check_schedule(w, s, be->target().traits) == "");
    if (!seeds.empty()) test::all_correct(*be, w, seeds);
    seeded += !seeds.empty();
  }
  CHECK(seeded >= 9);  // matmul (both), matmul_bias_relu, batch_matmul, the convs, softmax, layernorm
  // A strided conv's only contiguous axis is a filter tap: its seeds vectorize the output
  // channels, with F packed.
  auto strided =
      tuner::Space(library_workload("conv2d_s2p1", "N=1,C=16,H=28,W=28,K=32,R=3,S=3"), be->target().traits).seeds();
  REQUIRE(!strided.empty());
  CHECK(strided[0].stages[0].vectorize == "k");
  // Row-wise ops: one pass over row blocks, elementwise stages inlined.
  auto softmax = library_workload("softmax", "N=64,D=1024");
  auto rows = tuner::Space(softmax, be->target().traits).seeds();
  REQUIRE(!rows.empty());
  CHECK(rows[0].fuse_rows > 0);
  CHECK(rows[0].stages[1].inline_stage);
  CHECK(std::any_of(rows.begin(), rows.end(), [](const ir::Schedule& s) { return !s.stages[1].inline_stage; }));
  // Outer-product form: conv2d's rows are output channels (F is broadcast), its vectors along x.
  auto conv = library_workload("conv2d", "N=1,C=64,H=58,W=58,K=64,R=3,S=3");
  auto seeds = tuner::Space(conv, be->target().traits).seeds();
  REQUIRE(!seeds.empty());
  CHECK(seeds[0].stages[0].vectorize == "x");
  // As many rows as the registers allow (a divisor of 64 only if it costs at most one row).
  CHECK(seeds[0].stages[0].tile.at("k").back() >= 4);
  // ... and later seeds vectorize the output channels, with F packed into panels along k.
  CHECK(std::any_of(seeds.begin(), seeds.end(), [](const ir::Schedule& s) {
    return s.stages[0].vectorize == "k" && s.stages[0].pack == std::vector<std::string>{"F"};
  }));
  // Narrow operands (dot-product tiles) keep the row's vectors and a broadcast in registers
  // beside the accumulators, and prefetch the vector panel; f32 seeds do neither.
  for (const char* text : {"op b(A: bf16[M, K], B: bf16[K, N]) -> C: f32[M, N] { C[m, n] += A[m, k] * B[k, n] }",
                           "op q(A: u8[M, K], B: i8[K, N]) -> C: i32[M, N] { C[m, n] += A[m, k] * B[k, n] }"}) {
    CAPTURE(text);
    auto narrow = ir::bind(ir::parse_op(text), ir::parse_sizes("M=256,N=256,K=256"));
    const auto& traits = be->target().traits;
    auto narrow_seeds = tuner::Space(narrow, traits).seeds();
    REQUIRE(!narrow_seeds.empty());
    for (auto& seed : narrow_seeds) {
      const auto& ss = seed.stages[0];
      CAPTURE(seed.to_json());
      const std::string rows = ss.vectorize == "n" ? "m" : "n";
      std::int64_t vectors = (ss.tile.at(ss.vectorize).back() + traits.vector_lanes - 1) / traits.vector_lanes;
      CHECK(ss.tile.at(rows).back() * vectors + vectors + 1 <= traits.vector_registers);
      CHECK(ss.prefetch > 0);
    }
  }
  for (auto& seed : tuner::Space(library_workload("matmul", "M=256,N=256,K=256"), be->target().traits).seeds())
    CHECK(seed.stages[0].prefetch == 0);
  // Ops with no axis to broadcast along (every spatial axis moves the vector read: depthwise
  // convs, pooling) take the axis their vector read slides along with a tap as rows: 2 to 4 of
  // them, within the registers (rows * vectors accumulators, a row of vectors, a broadcast and 2).
  {
    const auto& traits = be->target().traits;
    for (auto [op, sizes] :
         std::vector<std::pair<std::string, std::string>>{{"depthwise_conv2d_p1", "N=1,C=144,H=56,W=56,R=3,S=3"},
                                                          {"depthwise_conv2d_s2p1", "N=1,C=144,H=56,W=56,R=3,S=3"},
                                                          {"max_pool2d_p1", "N=1,C=64,H=112,W=112"}}) {
      CAPTURE(op);
      auto window_seeds = tuner::Space(library_workload(op, sizes), traits).seeds();
      REQUIRE(!window_seeds.empty());
      for (auto& seed : window_seeds) {
        const auto& ss = seed.stages[0];
        CAPTURE(seed.to_json());
        CHECK(ss.vectorize == "x");
        std::int64_t vectors = (ss.tile.at("x").back() + traits.vector_lanes - 1) / traits.vector_lanes;
        std::int64_t rows = ss.tile.at("y").back();
        CHECK(rows >= 2);
        CHECK(rows <= 4);
        CHECK(rows * vectors + vectors + 3 <= traits.vector_registers);
      }
    }
  }
  // A channel block of one vector (NCHW[lanes]c): the row's further vectors are columns of other
  // output blocks (k), which only the filter reads, each meeting the same broadcast of I; the
  // registers bound rows * columns accumulators. They are correct, tails included.
  {
    const auto& traits = be->target().traits;
    const std::int64_t L = traits.vector_lanes;
    auto blocked = library_workload("conv2d_nchwc_p1", "N=1,CB=4,KB=8,H=14,W=14,L=" + std::to_string(L) + ",R=3,S=3");
    std::vector<ir::Schedule> with_columns;
    for (auto& seed : tuner::Space(blocked, traits).seeds()) {
      const auto& ss = seed.stages[0];
      if (ss.vectorize != "m" || ss.tile.at("k").back() < 2) continue;
      CAPTURE(seed.to_json());
      CHECK(ss.tile.at("m").back() == L);
      CHECK(ss.tile.at("x").back() * ss.tile.at("k").back() <= traits.vector_registers - 4);
      // Row by row: a row's columns meet its broadcast before the next row's is loaded, though k
      // comes before x in the op's axes (column by column kept every row's broadcast live).
      if (ss.tile.at("x").back() >= 2) {
        std::string src = be->emit(blocked, ir::lower(blocked, seed, traits), seed.to_json());
        auto second_column_of_first_row = src.find("(tt_I_0_ * tt_F_1_)"), second_row = src.find("tt_I_1_ =");
        REQUIRE(second_column_of_first_row != std::string::npos);
        REQUIRE(second_row != std::string::npos);
        CHECK(second_column_of_first_row < second_row);
      }
      with_columns.push_back(seed);
    }
    CHECK(with_columns.size() >= 2);
    test::all_correct(*be, blocked, with_columns);
    // Blocks of two vectors keep their vectors along m: no columns.
    auto wide = library_workload("conv2d_nchwc_p1", "N=1,CB=4,KB=8,H=14,W=14,L=" + std::to_string(2 * L) + ",R=3,S=3");
    for (auto& seed : tuner::Space(wide, traits).seeds())
      if (seed.stages[0].vectorize == "m") CHECK(seed.stages[0].tile.at("k").back() == 1);
    // A depthwise conv's blocks are read by the input too: no axis can be columns.
    auto dw = library_workload("depthwise_conv2d_nchwc_p1", "N=1,CB=4,H=14,W=14,L=" + std::to_string(L) + ",R=3,S=3");
    for (auto& seed : tuner::Space(dw, traits).seeds()) CHECK(seed.stages[0].tile.at("b").back() == 1);
    // The input's channels (its contiguous dimension, read by broadcast) are reduced in blocks no
    // smaller than a cache line, though the filter's panel then outgrows L1 (ResNet's stride-2
    // layer on AVX-512, where blocks of 4 channels fitted it); a matmul's k, which the panel
    // bounds, still goes in blocks smaller than K. (Seeds only: AVX-512 traits on any host.)
    const ir::TargetTraits avx512;  // 16 lanes, 32 registers, 32 KiB of L1
    REQUIRE(avx512.vector_lanes == 16);
    auto s2 = library_workload("conv2d_nchwc_s2p1", "N=1,CB=8,KB=8,H=56,W=56,L=16,R=3,S=3");
    int by_m = 0;
    for (auto& seed : tuner::Space(s2, avx512).seeds())
      if (seed.stages[0].vectorize == "m") {
        CAPTURE(seed.to_json());
        CHECK(seed.stages[0].tile.at("c").front() >= ir::kCacheLineBytes / 4);
        ++by_m;
      }
    CHECK(by_m > 0);
    bool k_blocked = false;
    for (auto& seed : tuner::Space(library_workload("matmul", "M=512,N=512,K=2048"), avx512).seeds())
      k_blocked |= seed.stages[0].tile.at("k").front() < 2048;
    CHECK(k_blocked);
  }
  // A conv with a fused bias and ReLU vectorizes its output channels too: the epilogue's own
  // value is in registers, and only the bias is loaded (unit stride along k).
  auto fused =
      tuner::Space(library_workload("conv2d_bias_relu_p1", "N=1,C=64,H=56,W=56,K=64,R=3,S=3"), be->target().traits)
          .seeds();
  CHECK(std::any_of(fused.begin(), fused.end(),
                    [](const ir::Schedule& s) { return s.stages[0].vectorize == "k" && s.stages[0].fuse_epilogue; }));
  // A window's taps read, at one tap, what a neighbouring row read at another (I[.., 2 * x + s
  // - 1], x the rows): the tile leaves a register per row beside its accumulators and a row of
  // vectors, and on a short row axis takes a divisor of it (7 rows of the stride-2 conv's 28
  // columns, 8 of the padded conv's 56). Where the registers less 4 hold more rows, seeds with
  // that plain count (one below it for a divisor) come beside them, in the BLAS structure only.
  // A matmul's rows share nothing and keep the most rows.
  {
    const auto& traits = be->target().traits;
    for (auto [op, sizes, rows_extent] : std::vector<std::tuple<std::string, std::string, std::int64_t>>{
             {"conv2d_s2p1", "N=1,C=128,H=56,W=56,K=128,R=3,S=3", 28},
             {"conv2d_p1", "N=1,C=64,H=56,W=56,K=64,R=3,S=3", 56}}) {
      CAPTURE(op);
      std::map<std::int64_t, std::set<std::int64_t>> rows_by_width;
      for (auto& seed : tuner::Space(library_workload(op, sizes), traits).seeds()) {
        const auto& ss = seed.stages[0];
        if (ss.vectorize != "k") continue;
        std::int64_t vectors = (ss.tile.at("k").back() + traits.vector_lanes - 1) / traits.vector_lanes;
        rows_by_width[vectors].insert(ss.tile.at("x").back());
      }
      CHECK(!rows_by_width.empty());
      for (auto& [vectors, counts] : rows_by_width) {
        CAPTURE(vectors);
        const std::int64_t shared = *counts.begin();
        CHECK(shared * vectors + shared + vectors + 1 <= traits.vector_registers);
        if (vectors == 2) CHECK(rows_extent % shared == 0);
        const std::int64_t plain =
            std::min<std::int64_t>({std::int64_t{12}, (traits.vector_registers - 4) / vectors, rows_extent});
        if (plain > (traits.vector_registers - vectors - 1) / (vectors + 1)) {
          // (one count only where the plain one's divisor is the shared one)
          CHECK(*counts.rbegin() >= plain - 1);
          CHECK(*counts.rbegin() <= plain);
          CHECK(counts.size() <= 2);
        } else {
          CHECK(counts.size() == 1);
        }
      }
    }
    // Two vectors of a matmul row: as many rows as the registers less 4 allow, at most 12.
    const std::int64_t most = std::min<std::int64_t>(12, (traits.vector_registers - 4) / 2);
    bool most_rows = false;
    for (auto& seed : tuner::Space(library_workload("matmul", "M=256,N=256,K=256"), traits).seeds())
      most_rows |=
          seed.stages[0].tile.at("n").back() == 2 * traits.vector_lanes && seed.stages[0].tile.at("m").back() == most;
    CHECK(most_rows);
  }
  // Another tensor the epilogue reads strided along k (a residual in NCHW) still needs loads that
  // vectors cannot make: refused, by name.
  auto residual = ir::bind(ir::parse_op("op res(I: f32[N, C, H, W] pad 0, F: f32[K, C, R, S], Z: f32[N, K, H, W]) -> "
                                        "O: f32[N, K, H, W] {\n  acc[n, k, y, x] += I[n, c, y + r - 1, x + s - 1] * "
                                        "F[k, c, r, s] where y < H, x < W\n  O[n, k, y, x] = acc[n, k, y, x] + "
                                        "Z[n, k, y, x]\n}"),
                           ir::parse_sizes("N=1,C=16,H=8,W=8,K=32,R=3,S=3"));
  auto by_k = ir::Schedule::from_json(
      R"({"stages":[{"fuse_epilogue":true,"order":["k.0","y.0","x.0","n.0","c.0","r.0","s.0"],"pack":["F"],"stage":"acc",)"
      R"("tile":{"c":[16],"k":[32],"n":[1],"r":[3],"s":[3],"x":[1],"y":[1]},"vectorize":"k"},{"stage":"O"}],"version":1})");
  CHECK(ir::check_schedule(residual, by_k, be->target().traits) ==
        "stage acc: the epilogue reads 'Z' strided along 'k'");
  // A two-stage row op that starts with a reduction gets the row recipe, and runs correctly.
  auto norm = ir::bind(
      ir::parse_op("op rownorm(X: f32[N, D]) -> Y: f32[N, D] {\n  s[n] += X[n, d]\n  Y[n, d] = X[n, d] / s[n]\n}"),
      ir::parse_sizes("N=9,D=40"));
  auto norm_seeds = tuner::Space(norm, be->target().traits).seeds();
  REQUIRE(!norm_seeds.empty());
  CHECK(norm_seeds[0].fuse_rows > 0);
  test::all_correct(*be, norm, norm_seeds);
  // Every stage of a seed is computed in SIMD vectors, fused or inlined, never left in the naive
  // schedule's scalar loops: a second contraction takes the recipe as the first does (SwiGLU's
  // two projections, the same recipe in each seed), and the row stages after a contraction
  // (attention's softmax) run in vectors and parallel loops.
  for (auto [text, sizes] : std::vector<std::pair<std::string, std::string>>{
           {"op swiglu(X: f32[M, K], W1: f32[K, N], W2: f32[K, N]) -> Y: f32[M, N] {\n"
            "  h[m, n] += X[m, k] * W1[k, n]\n  g[m, n] += X[m, k] * W2[k, n]\n"
            "  Y[m, n] = h[m, n] / (1.0 + exp(0.0 - h[m, n])) * g[m, n]\n}",
            "M=13,N=40,K=9"},
           {"op attn(Q: f32[H, L, D], Kt: f32[H, S, D]) -> P: f32[H, L, S] {\n"
            "  s[h, i, j] += Q[h, i, d] * Kt[h, j, d]\n  mx[h, i] max= s[h, i, j]\n"
            "  e[h, i, j] = exp(s[h, i, j] - mx[h, i])\n  z[h, i] += e[h, i, j]\n  P[h, i, j] = e[h, i, j] / z[h, i]\n}",
            "H=2,L=7,S=37,D=16"},
           // The contraction comes second, after a row reduction: it leads the seeds.
           {"op rms_proj(X: f32[M, K], W: f32[K, N]) -> Y: f32[M, N] {\n"
            "  ss[m] += X[m, k] * X[m, k]\n  Y[m, n] += X[m, k] * W[k, n] / sqrt(ss[m] / K + 0.00001)\n}",
            "M=11,K=24,N=40"}}) {
    CAPTURE(text);
    auto w = ir::bind(ir::parse_op(text), ir::parse_sizes(sizes));
    auto stage_seeds = tuner::Space(w, be->target().traits).seeds();
    REQUIRE(!stage_seeds.empty());
    std::set<std::string> distinct;
    for (auto& seed : stage_seeds) CHECK(distinct.insert(seed.to_json()).second);
    for (auto& seed : stage_seeds) {
      CAPTURE(seed.to_json());
      for (std::size_t i = 0; i < seed.stages.size(); ++i) {
        const bool absorbed = seed.stages[i].inline_stage || (i > 0 && seed.stages[i - 1].fuse_epilogue);
        CHECK((absorbed || !seed.stages[i].vectorize.empty()));
      }
      if (w.op.name == "swiglu") {
        // (g fuses Y, which reads h strided along m: g has no variant in vectors of m.)
        if (seed.stages[0].vectorize == "m") continue;
        CHECK(seed.stages[1].tile == seed.stages[0].tile);
        CHECK(seed.stages[1].vectorize == seed.stages[0].vectorize);
      } else if (w.op.name == "attn" && be->target().traits.threads > 1) {
        CHECK(seed.stages[1].parallel == 2);  // mx over its (h, i) loops
      } else if (w.op.name == "rms_proj") {
        CHECK(seed.stages[1].unroll == 4);  // the GEMM recipe's
        if (be->target().traits.threads > 1) CHECK(seed.stages[0].parallel == 1);  // ss over m
      }
    }
    test::all_correct(*be, w, stage_seeds);
  }
  // A target with hardly any vector registers gets no GEMM seeds rather than a crash.
  ir::TargetTraits few = be->target().traits;
  few.vector_registers = 5;
  CHECK_NOTHROW(tuner::Space(conv, few).seeds());
  // Not for work-group devices or scalar targets.
  ir::TargetTraits gpu = be->target().traits;
  gpu.max_group_size = 256;
  gpu.vector_lanes = 1;
  CHECK(tuner::Space(conv, gpu).seeds().empty());
}

TEST_CASE(
    "cpu kernels: two kernels link into one program through their own entry points and agree, on any thread count") {
  auto be = codegen::make_backend("cpu");
  auto w = library_workload("matmul", "M=13,N=21,K=9");
  ir::Schedule naive = ir::naive_schedule(w);
  tuner::Space space(w, be->target().traits);
  tuner::Rng rng(4);
  ir::Schedule tuned = space.sample(rng);
  REQUIRE(naive.key() != tuned.key());
  auto entry = [&](const ir::Schedule& s) {
    return be->call_abi(w, ir::lower(w, s, be->target().traits), s.to_json()).entry_point;
  };
  std::string a = entry(naive), b = entry(tuned);
  CHECK(a != b);
  CHECK(a.rfind("tt_kernel_", 0) == 0);
  TempDir dir;
  std::vector<std::string> objects;
  for (auto* s : {&naive, &tuned}) {
    std::string source = be->emit(w, ir::lower(w, *s, be->target().traits), s->to_json());
    CHECK(source.find("void " + entry(*s) + "(") != std::string::npos);
    std::string path = dir.file("k" + std::to_string(objects.size()) + ".cpp");
    std::ofstream(path) << source;
    objects.push_back(path);
  }
  std::int64_t workspace = ir::lower(w, tuned, be->target().traits).workspace_floats;
  std::ofstream(dir.file("main.cpp"))
      << "#include <cmath>\n#include <vector>\n"
      << "extern \"C\" void " << a << "(float* const*, float*);\n"
      << "extern \"C\" void " << b << "(float* const*, float*);\n"
      << "extern \"C\" void " << b << "_threads(float* const*, float*, int);\n"
      << "int main() {\n"
      << "  std::vector<float> A(13 * 9), B(9 * 21), C1(13 * 21), C2(13 * 21), C3(13 * 21), C4(13 * 21);\n"
      << "  std::vector<float> ws(" << workspace + 1 << ");\n"
      << "  for (int i = 0; i < 13 * 9; ++i) A[i] = (i % 7) * 0.25f - 0.5f;\n"
      << "  for (int i = 0; i < 9 * 21; ++i) B[i] = (i % 5) * 0.5f - 1.0f;\n"
      << "  float* t1[] = {A.data(), B.data(), C1.data()};\n"
      << "  float* t2[] = {A.data(), B.data(), C2.data()};\n"
      << "  float* t3[] = {A.data(), B.data(), C3.data()};\n"
      << "  float* t4[] = {A.data(), B.data(), C4.data()};\n"
      << "  " << a << "(t1, ws.data());\n"
      << "  " << b
      << "(t2, ws.data());\n"
      // the caller's thread count, and the kernel called from inside the caller's parallel region
      << "  " << b << "_threads(t3, ws.data(), 3);\n"
      << "  #pragma omp parallel num_threads(2)\n"
      << "  {\n    #pragma omp single\n    " << b << "_threads(t4, ws.data(), 2);\n  }\n"
      << "  for (int i = 0; i < 13 * 21; ++i)\n"
      << "    for (float c : {C2[i], C3[i], C4[i]})\n"
      << "      if (std::fabs(C1[i] - c) > 1e-4f * (1 + std::fabs(C1[i]))) return 1;\n"
      << "  return 0;\n}\n";
  auto built = run_process({"g++", "-std=c++17", "-O1", "-march=native", "-fopenmp", objects[0], objects[1],
                            dir.file("main.cpp"), "-o", dir.file("both")},
                           240);
  REQUIRE_MESSAGE(built.ok(), built.output);
  auto ran = run_process({dir.file("both")}, 60);
  CHECK_MESSAGE(ran.ok(), ran.output);
}

TEST_CASE("const inputs: part of the key, packed once by the kernel's prepare entry point, the calls reusing it") {
  const char* text = "op mm(A: f32[M, K], B: f32[K, N] const) -> C: f32[M, N] { C[m, n] += A[m, k] * B[k, n] }";
  auto w = ir::bind(ir::parse_op(text), ir::parse_sizes("M=19,N=37,K=23"));
  CHECK(w.canonical_text.find("B: f32[K, N] const") != std::string::npos);
  auto plain =
      ir::bind(ir::parse_op("op mm(A: f32[M, K], B: f32[K, N]) -> C: f32[M, N] { C[m, n] += A[m, k] * B[k, n] }"),
               ir::parse_sizes("M=19,N=37,K=23"));
  CHECK(plain.key != w.key);
  CHECK(plain.canonical_text.find("const") == std::string::npos);  // other keys stay
  CHECK(test::error_of([] {
          ir::parse_op("op o(A: f32[N]) -> B: f32[N] const { B[n] = A[n] }");
        }).find("output 'B' cannot be 'const'") != std::string::npos);

  auto be = cpu();
  const auto& traits = be->target().traits;
  std::vector<ir::Schedule> packing;
  for (auto& s : tuner::Space(w, traits).seeds())
    if (std::find(s.stages[0].pack.begin(), s.stages[0].pack.end(), "B") != s.stages[0].pack.end())
      packing.push_back(s);
  REQUIRE(!packing.empty());
  const ir::Schedule& s = packing.front();
  auto kernel = tuner::schedule_kernel(*be, w, s, traits);
  const std::string entry = kernel.abi["entry_point"];
  CHECK(kernel.abi["prepare_entry_point"] == entry + "_prepare");
  CHECK(
      kernel.source.find("void " + entry + "_prepare(float* const* tt_tensors, float* tt_workspace, int tt_threads)") !=
      std::string::npos);
  // Without a pack of B there is nothing to prepare, and the kernel is what it was.
  auto naive = tuner::schedule_kernel(*be, w, ir::naive_schedule(w), traits);
  CHECK_FALSE(naive.abi.contains("prepare_entry_point"));
  CHECK(naive.source.find("_prepare") == std::string::npos);

  // Called as a compiler calls it: prepare (the worker's kUpload), then calls with new A only.
  TempDir dir;
  ir::LoopNest nest = ir::lower(w, s, traits);
  std::ofstream(dir.file("k.cpp")) << be->emit(w, nest, s.to_json());
  REQUIRE(be->build(dir.file("k.cpp"), dir.file("k.so")).empty());
  auto k = be->load(dir.file("k.so"), codegen::KernelShape{{19 * 23, 23 * 37, 19 * 37}, nest.workspace_floats});
  std::vector<float> A(19 * 23), B(23 * 37), C(19 * 37, NAN), ws(nest.workspace_floats + 16, NAN);
  auto check = [&](const char* what) {
    CAPTURE(what);
    double worst = 0;
    for (int m = 0; m < 19; ++m)
      for (int n = 0; n < 37; ++n) {
        double want = 0;
        for (int kk = 0; kk < 23; ++kk) want += double(A[m * 23 + kk]) * B[kk * 37 + n];
        worst = std::max(worst, std::fabs(C[m * 37 + n] - want));
      }
    CHECK(worst < 1e-3);
  };
  float* args[] = {A.data(), B.data(), C.data()};
  for (size_t i = 0; i < A.size(); ++i) A[i] = float(i % 7) - 3;
  for (size_t i = 0; i < B.size(); ++i) B[i] = float(i % 5) - 2;
  k->run(args, ws.data(), codegen::Kernel::kUpload | codegen::Kernel::kDownload);
  check("after prepare");
  for (size_t i = 0; i < A.size(); ++i) A[i] = float(i % 11) - 5;
  std::fill(C.begin(), C.end(), NAN);
  k->run(args, ws.data(), 0);
  check("new A, B as packed");
  for (size_t i = 0; i < B.size(); ++i) B[i] = float(i % 3) - 1;
  k->run(args, ws.data(), codegen::Kernel::kUpload | codegen::Kernel::kDownload);
  check("new B, prepared again");

  // Through the measuring worker, every packing seed; and an int8 GEMM's grouped pack of const weights.
  test::all_correct(*be, w, packing);
  auto q =
      ir::bind(ir::parse_op("op q(A: u8[M, K], B: i8[K, N] const) -> C: i32[M, N] { C[m, n] += A[m, k] * B[k, n] }"),
               ir::parse_sizes("M=13,N=41,K=67"));
  auto q_seeds = tuner::Space(q, traits).seeds();
  REQUIRE(!q_seeds.empty());
  test::all_correct(*be, q, q_seeds);
}

TEST_CASE("kernel ABI: a tensor whose reduction run merged is passed in its declared shape") {
  auto be = cpu();
  auto w = library_workload("global_avg_pool", "N=1,C=3,H=5,W=7");
  REQUIRE(w.buffers[0].shape == std::vector<std::int64_t>{1, 3, 35});  // the stages' view
  auto kernel = tuner::schedule_kernel(*be, w, ir::naive_schedule(w), be->target().traits);
  CHECK(kernel.abi["arguments"][0]["shape"] == nlohmann::json({1, 3, 5, 7}));
  CHECK(kernel.abi["arguments"][1]["shape"] == nlohmann::json({1, 3}));
}
