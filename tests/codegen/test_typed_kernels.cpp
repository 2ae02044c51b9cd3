// Typed tensors (bf16, f16, i8, u8, i32) on the CPU backend: kernels against hand-written
// C++ of the language's type rules (ir/dtype.hpp), and random schedules with tails against
// the naive one through the measuring worker.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "ir/loop_nest.hpp"
#include "ir/parse.hpp"
#include "ir/workload.hpp"
#include "measure/protocol.hpp"
#include "random_schedules.hpp"
#include "run_kernel.hpp"
#include "tuner/space.hpp"

using namespace tiletune;
using ir::DType;
using tiletune::test::TempDir;

namespace {

const char* kOps = R"(
op mm_bf16(A: bf16[M, K], B: bf16[K, N]) -> C: f32[M, N] {
  C[m, n] += A[m, k] * B[k, n]
}
op mm_bf16_out(A: bf16[M, K], B: bf16[K, N]) -> C: bf16[M, N] {
  C[m, n] += A[m, k] * B[k, n]
}
op mm_u8s8(A: u8[M, K], B: i8[K, N]) -> C: i32[M, N] {
  C[m, n] += A[m, k] * B[k, n]
}
op mm_requant(A: u8[M, K], B: i8[K, N], bias: i32[N]) -> Y: u8[M, N] {
  acc[m, n] += A[m, k] * B[k, n]
  Y[m, n] = f32(acc[m, n] + bias[n]) * 0.001 + 100
}
op f16_act(X: f16[N, D]) -> Y: f16[N, D] {
  Y[n, d] = max(X[n, d], 0.0) * 3 - 1
}
op casts(X: f32[N]) -> (R: f32[N], I: i32[N], Q: i8[N]) {
  R[n] = round(X[n] * 2.5)
  I[n] = i32(X[n] * 2.5) + 7
  Q[n] = X[n] * 300
}
op conv_nhwc(I: bf16[N, H, W, C] pad 0, F: bf16[R, S, C, K]) -> O: f32[N, H + 3 - R, W + 3 - S, K] {
  O[n, y, x, k] += I[n, y + r - 1, x + s - 1, c] * F[r, s, c, k]
}
op int_max(X: i8[N, D]) -> Y: i32[N] {
  Y[n] max= abs(X[n, d]) + 1
}
)";

ir::Workload typed(const std::string& name, const std::string& sizes) {
  return ir::bind(ir::select_op(ir::parse_ops(kOps), name, "typed ops"), ir::parse_sizes(sizes));
}

using test::Tensors;

//! Runs a schedule on the CPU backend (see test::run_kernel).
Tensors run(const ir::Workload& w, const ir::Schedule& s, const TempDir& dir,
            const std::optional<ir::TargetTraits>& traits = std::nullopt) {
  return test::run_kernel(*codegen::make_backend("cpu"), w, s, dir, traits);
}

//! A value rounded into type t, as the kernels store it.
double stored(DType t, double v) {
  float f[2];
  ir::store_element(t, f, 0, v);
  return ir::load_element(t, f, 0);
}

//! The schedules checked against the hand-written results: the naive one and a few random
//! ones (tiles, vectors, packs and blocked reductions with tails).
std::vector<ir::Schedule> schedules(const ir::Workload& w, int random) {
  auto be = codegen::make_backend("cpu");
  std::vector<ir::Schedule> out{ir::naive_schedule(w)};
  tuner::Space space(w, be->target().traits);
  tuner::Rng rng(11);
  for (int i = 0; i < random; ++i) out.push_back(space.sample(rng));
  return out;
}

}  // namespace

TEST_CASE("typed ops: element types parse, are part of the key, and intermediates follow the accumulation rule") {
  auto w = typed("mm_requant", "M=3,N=4,K=5");
  CHECK(w.buffers[0].dtype == DType::U8);
  CHECK(w.buffers[1].dtype == DType::I8);
  CHECK(w.buffers[w.buffer_index("acc")].dtype == DType::I32);  // u8 x i8 sums in i32
  CHECK(w.buffers[w.buffer_index("Y")].dtype == DType::U8);
  CHECK(w.canonical_text.find("A: u8[M, K], B: i8[K, N], bias: i32[N]") != std::string::npos);
  auto bf = typed("mm_bf16", "M=3,N=4,K=5");
  CHECK(bf.io_bytes() == (3 * 5 + 5 * 4) * 2 + 3 * 4 * 4);
  // The same op in f32 has another key, and f32 ops keep their text (so their keys).
  auto f32 =
      ir::bind(ir::parse_op("op mm_bf16(A: f32[M, K], B: f32[K, N]) -> C: f32[M, N] { C[m, n] += A[m, k] * B[k, n] }"),
               ir::parse_sizes("M=3,N=4,K=5"));
  CHECK(f32.key != bf.key);
  CHECK(f32.canonical_text.find("A: f32[M, K]") != std::string::npos);
  CHECK(f32.f32_only());
  CHECK_FALSE(bf.f32_only());
  auto sum = ir::bind(ir::parse_op("op s(X: bf16[N, D]) -> Y: bf16[N] { t[n] += X[n, d]\n Y[n] = t[n] }"),
                      ir::parse_sizes("N=2,D=3"));
  CHECK(sum.buffers[sum.buffer_index("t")].dtype == DType::F32);  // bf16 sums in f32
}

TEST_CASE("typed ops: bad types and pad values are refused with where and why") {
  auto refused = [](const std::string& text, const std::string& part) {
    try {
      ir::parse_op(text);
      FAIL("accepted: " << text);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidInput);
      CHECK_MESSAGE(std::string(e.what()).find(part) != std::string::npos, e.what());
    }
  };
  refused("op a(X: f64[N]) -> Y: f32[N] { Y[n] = X[n] }",
          "1:9: expected an element type (f32, bf16, f16, i32, i8 or u8)");
  refused("op a(X: u8[N] pad -inf) -> Y: u8[N] { Y[n] = X[n - 1] }", "pad -inf of 'X' is not a value of its type u8");
  refused("op a(X: i8[N] pad 0.5) -> Y: i8[N] { Y[n] = X[n - 1] }", "pad 0.5 of 'X' is not a value of its type i8");
  refused("op a(X: f32[N]) -> Y: f32[N] { Y[n] = i32(X[n], 2) }", "'i32' takes 1 argument(s), got 2");
  refused("op a(i8: f32[N]) -> Y: f32[N] { Y[n] = i8[n] }", "'i8' is a reserved word");
}

TEST_CASE("typed ops: bf16 matmuls widen to f32, accumulate in f32 and round the bf16 output to nearest even") {
  TempDir dir;
  for (const char* name : {"mm_bf16", "mm_bf16_out"}) {
    auto w = typed(name, "M=19,N=37,K=67");
    for (auto& s : schedules(w, 4)) {
      CAPTURE(name);
      CAPTURE(s.to_json());
      Tensors t = run(w, s, dir);
      DType out = t.type[2];
      for (int m = 0; m < 19; ++m)
        for (int n = 0; n < 37; ++n) {
          double want = 0;
          for (int k = 0; k < 67; ++k) want += t.at(0, m * 67 + k) * t.at(1, k * 37 + n);
          // Products of bf16 are exact in f32; only the order of the f32 sums differs, and a
          // bf16 output may then round one unit the other way.
          double tol = 67 * 0x1p-24 * 4 + 2 * ir::unit_roundoff(out) * std::fabs(want) + 1e-6;
          if (std::fabs(t.at(2, m * 37 + n) - want) > tol) {
            FAIL_CHECK("C[" << m << ", " << n << "] is " << t.at(2, m * 37 + n) << ", expected " << want);
            break;
          }
        }
    }
  }
}

TEST_CASE("typed ops: u8 x i8 sums are exact in i32, and a requantization rounds half to even and saturates") {
  TempDir dir;
  auto w = typed("mm_u8s8", "M=13,N=33,K=261");
  for (auto& s : schedules(w, 4)) {
    CAPTURE(s.to_json());
    Tensors t = run(w, s, dir);
    for (int m = 0; m < 13; ++m)
      for (int n = 0; n < 33; ++n) {
        long long want = 0;
        for (int k = 0; k < 261; ++k)
          want += static_cast<long long>(t.at(0, m * 261 + k)) * static_cast<long long>(t.at(1, k * 33 + n));
        REQUIRE(t.at(2, m * 33 + n) == static_cast<double>(want));
      }
  }
  auto q = typed("mm_requant", "M=7,N=17,K=131");
  for (auto& s : schedules(q, 4)) {
    CAPTURE(s.to_json());
    Tensors t = run(q, s, dir);
    int low = 0, high = 0;
    for (int m = 0; m < 7; ++m)
      for (int n = 0; n < 17; ++n) {
        long long acc = static_cast<long long>(t.at(2, n));
        for (int k = 0; k < 131; ++k)
          acc += static_cast<long long>(t.at(0, m * 131 + k)) * static_cast<long long>(t.at(1, k * 17 + n));
        float scaled = static_cast<float>(acc) * 0.001f + 100.0f;
        double want = std::nearbyint(std::fmin(std::fmax(scaled, 0.0), 255.0));
        low += want == 0;
        high += want == 255;
        double got = t.at(3, m * 17 + n);
        // f32 arithmetic (an FMA or not) may land a value at a half on either side.
        REQUIRE(std::fabs(got - want) <= (std::fabs(scaled - std::floor(scaled) - 0.5) < 1e-3 ? 1 : 0));
      }
    CHECK(low + high > 0);  // the inputs reach the saturation
  }
}

TEST_CASE("typed ops: f16 elementwise, casts, round and integer reductions follow the type rules") {
  TempDir dir;
  auto w = typed("f16_act", "N=3,D=37");
  for (auto& s : schedules(w, 3)) {
    Tensors t = run(w, s, dir);
    for (int i = 0; i < 3 * 37; ++i) REQUIRE(t.at(1, i) == stored(DType::F16, std::fmax(t.at(0, i), 0.0) * 3 - 1));
  }
  auto c = typed("casts", "N=45");
  for (auto& s : schedules(c, 3)) {
    Tensors t = run(c, s, dir);
    for (int i = 0; i < 45; ++i) {
      float x = static_cast<float>(t.at(0, i)) * 2.5f;
      CHECK(t.at(1, i) == std::nearbyint(x));
      CHECK(t.at(2, i) == std::nearbyint(x) + 7);
      CHECK(t.at(3, i) == stored(DType::I8, static_cast<float>(t.at(0, i)) * 300.0f));
    }
  }
  auto r = typed("int_max", "N=5,D=39");
  for (auto& s : schedules(r, 3)) {
    Tensors t = run(r, s, dir);
    for (int n = 0; n < 5; ++n) {
      double want = -1e9;
      for (int d = 0; d < 39; ++d) want = std::fmax(want, std::fabs(t.at(0, n * 39 + d)) + 1);
      REQUIRE(t.at(1, n) == want);
    }
  }
}

TEST_CASE(
    "typed ops: bf16 and u8 x i8 matmuls run dot-product tiles from a grouped pack, tails of every kind included") {
  // K = 67 ends inside a group of 2 and of 4; K blocks of 32 are whole groups; N = 37 and
  // M = 19 leave edge tiles, which read the original tensors. Rows of the register tile are two
  // vectors along n (32 on AVX-512, 16 on AVX2): 6 x 2 fits 16 registers too.
  auto be = codegen::make_backend("cpu");
  const std::string config = R"({"stages":[{"fuse_epilogue":false,"order":["n.0","m.0","k.0","m.1"],"pack":["B"],)"
                             R"("parallel":2,"stage":"C","tile":{"k":[32],"m":[12,6],"n":[)" +
                             std::to_string(2 * be->target().traits.vector_lanes) +
                             R"(]},"unroll":2,"vectorize":"n"}],"version":1})";
  TempDir dir;
  for (auto [name, group] :
       std::vector<std::pair<const char*, int>>{{"mm_bf16", 2}, {"mm_bf16_out", 2}, {"mm_u8s8", 4}}) {
    CAPTURE(name);
    auto w = typed(name, "M=19,N=37,K=67");
    auto s = ir::Schedule::from_json(config);
    ir::LoopNest nest = ir::lower(w, s, be->target().traits);
    REQUIRE(nest.stages[0].dot_group == group);
    REQUIRE(nest.stages[0].packs.size() == 1);
    CHECK(nest.stages[0].packs[0].group == group);
    CHECK(nest.stages[0].packs[0].others == (67 + group - 1) / group * group);
    std::string src = be->emit(w, nest, s.to_json());
    CHECK(src.find(group == 2 ? "= tt_dot_bf16(" : "= tt_dot_u8s8(") != std::string::npos);
    CHECK(src.find("tt_bcast_part(") != std::string::npos);  // the group cut by K's end
    // At 8 lanes (AVX2's width) the dot product takes its plain C form: the same results.
    ir::TargetTraits eight = be->target().traits;
    eight.vector_lanes = 8;
    eight.vector_registers = 32;
    for (auto* traits : {static_cast<ir::TargetTraits*>(nullptr), &eight}) {
      Tensors t = traits ? run(w, s, dir, *traits) : run(w, s, dir);
      for (int m = 0; m < 19; ++m)
        for (int n = 0; n < 37; ++n) {
          double want = 0;
          for (int k = 0; k < 67; ++k) want += t.at(0, m * 67 + k) * t.at(1, k * 37 + n);
          double tol = group == 4 ? 0 : 67 * 0x1p-24 * 4 + 2 * ir::unit_roundoff(t.type[2]) * std::fabs(want) + 1e-6;
          REQUIRE(std::fabs(t.at(2, m * 37 + n) - want) <= tol);
        }
    }
  }
  // Where a K block is not whole groups, or the operands' types have no dot product, the
  // tiles stay the widening ones.
  auto w = typed("mm_bf16", "M=19,N=37,K=67");
  std::string odd = config;
  odd.replace(odd.find("\"k\":[32]"), 8, "\"k\":[33]");
  CHECK(ir::lower(w, ir::Schedule::from_json(odd), be->target().traits).stages[0].dot_group == 1);
  auto f = test::library_workload("matmul", "M=19,N=37,K=67");
  CHECK(ir::lower(f, ir::Schedule::from_json(config), be->target().traits).stages[0].dot_group == 1);
  // Nor where the reduction axis also moves another index of an operand: its groups are not
  // consecutive elements.
  auto diag = ir::bind(ir::parse_op("op d(A: bf16[K, K], B: bf16[K, N]) -> C: f32[M, N] {\n"
                                    "  C[m, n] += A[k, k] * B[k, n] }"),
                       ir::parse_sizes("M=19,N=37,K=67"));
  CHECK(ir::lower(diag, ir::Schedule::from_json(config), be->target().traits).stages[0].dot_group == 1);
}

TEST_CASE("typed ops: a padded NHWC bf16 convolution runs dot-product tiles, its border tiles reading pairs of pad") {
  // C = 5 ends inside a pair; K = 19 leaves a vector edge (tiles of one vector, 16 or 8 lanes);
  // every output row touches the border.
  auto be = codegen::make_backend("cpu");
  const std::string config = R"({"stages":[{"fuse_epilogue":false,"order":["x.0","k.0","y.0","n.0","r.0","s.0","c.0"],)"
                             R"("pack":["F"],"parallel":2,"stage":"O","tile":{"c":[4],"k":[)" +
                             std::to_string(be->target().traits.vector_lanes) +
                             R"(],"n":[1],"r":[3],"s":[3],"x":[1],"y":[7]},"unroll":0,"vectorize":"k"}],"version":1})";
  TempDir dir;
  auto w = typed("conv_nhwc", "N=1,H=7,W=6,C=5,K=19,R=3,S=3");
  auto s = ir::Schedule::from_json(config);
  ir::LoopNest nest = ir::lower(w, s, be->target().traits);
  REQUIRE(nest.stages[0].dot_group == 2);
  // Border tiles too: a pair outside the input is the pad value.
  CHECK(be->emit(w, nest, s.to_json()).find(" ? tt_bcast32(") != std::string::npos);
  for (auto& sched : {s, ir::naive_schedule(w)}) {
    Tensors t = run(w, sched, dir);
    const int H = 7, W = 6, C = 5, K = 19;
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x)
        for (int k = 0; k < K; ++k) {
          double want = 0;
          for (int r = 0; r < 3; ++r)
            for (int q = 0; q < 3; ++q)
              for (int c = 0; c < C; ++c) {
                int iy = y + r - 1, ix = x + q - 1;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                want += t.at(0, (iy * W + ix) * C + c) * t.at(1, ((r * 3 + q) * C + c) * K + k);
              }
          REQUIRE(std::fabs(t.at(2, (y * W + x) * K + k) - want) <= 45 * 0x1p-24 * 4 + 1e-6);
        }
  }
}

TEST_CASE("typed ops: random schedules with tails match the naive kernel through the measuring worker") {
  auto be = codegen::make_backend("cpu");
  for (auto [name, sizes] : std::vector<std::pair<const char*, const char*>>{
           {"mm_bf16_out", "M=1,N=17,K=3"}, {"mm_requant", "M=23,N=31,K=67"}, {"mm_u8s8", "M=5,N=64,K=128"}}) {
    CAPTURE(name);
    auto w = typed(name, sizes);
    tuner::Space space(w, be->target().traits);
    tuner::Rng rng(5);
    std::vector<ir::Schedule> batch;
    for (int i = 0; i < 6; ++i) batch.push_back(space.sample(rng));
    test::all_correct(*be, w, batch);
  }
}

TEST_CASE("typed ops: a run request with an unknown element type is refused") {
  measure::RunRequest r;
  r.inputs = {{2}};
  r.input_types = {DType::BF16};
  nlohmann::json j = nlohmann::json::parse(r.to_json());
  CHECK(measure::RunRequest::from_json(j.dump()).input_types == std::vector<DType>{DType::BF16});
  j["input_types"] = {"f64"};
  CHECK(test::error_of([&] { measure::RunRequest::from_json(j.dump()); }).find("unknown element type \"f64\"") !=
        std::string::npos);
}

TEST_CASE("typed ops: backends that compute f32 only refuse them, naming the tensor") {
  auto w = typed("mm_bf16", "M=3,N=4,K=5");
  try {
    codegen::require_f32_only(w, "the opencl backend");
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "the opencl backend runs f32 ops only, and op 'mm_bf16' has the bf16 tensor 'A' (typed ops run on the cpu "
          "backend)");
  }
  CHECK_NOTHROW(codegen::require_f32_only(test::library_workload("matmul", "M=2,N=2,K=2"), "x"));
}
