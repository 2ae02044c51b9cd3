// The OpenCL backend on this machine's OpenCL device (PoCL runs it on the CPU): kernels run and
// are checked against the reference, and the CUDA style of vectors is checked here too. Every
// test case needs an OpenCL platform and is skipped where there is none.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "codegen/backend.hpp"
#include "codegen/gpu_kernel.hpp"
#include "forwarding_backend.hpp"
#include "helpers.hpp"
#include "ir/loop_nest.hpp"
#include "ir/parse.hpp"
#include "random_schedules.hpp"
#include "tuner/space.hpp"

using namespace tiletune;
using tiletune::test::library_workload;
using tiletune::test::TempDir;

namespace {

ir::Schedule from_json(const std::string& text) { return ir::Schedule::from_json(text); }

//! Runs the naive schedule of `w` on a backend in this process: `inputs` as raw memory of a
//! float per element (the room KernelShape promises a device), the outputs returned the same.
std::vector<std::vector<float>> run_naive(const codegen::Backend& be, const ir::Workload& w,
                                          std::vector<std::vector<float>> tensors, const TempDir& dir) {
  ir::Schedule s = ir::naive_schedule(w);
  ir::LoopNest nest = ir::lower(w, s, be.target().traits);
  std::string src = dir.file(w.key + be.source_extension()), lib = dir.file(w.key + ".bin");
  std::ofstream(src) << be.emit(w, nest, s.to_json());
  std::string log = be.build(src, lib);
  REQUIRE_MESSAGE(log.empty(), log);
  codegen::KernelShape shape;
  for (auto& b : w.buffers)
    if (b.role == ir::Buffer::Role::Output) tensors.emplace_back(b.elements(), NAN);
  for (auto& b : w.buffers)
    if (b.role != ir::Buffer::Role::Temp) shape.tensor_floats.push_back(b.elements());
  shape.workspace_floats = nest.workspace_floats;
  auto kernel = be.load(lib, shape);
  std::vector<float*> args;
  for (auto& t : tensors) args.push_back(t.data());
  std::vector<float> workspace(nest.workspace_floats + 16);
  kernel->run(args.data(), workspace.data(), codegen::Kernel::kUpload | codegen::Kernel::kDownload);
  return tensors;
}

//! The OpenCL backend emitting split vectors, the CUDA style (scalar math, float4 loads and
//! stores), so that they are run and checked where there is no GPU. Like the CUDA target it
//! has at least 4 lanes: float4 is OpenCL C on every device, whatever width the device prefers.
class SplitVectorBackend : public test::ForwardingBackend {
 public:
  SplitVectorBackend() : ForwardingBackend(codegen::make_backend("opencl")), target_(inner_->target()) {
    target_.traits.vector_lanes = std::max(target_.traits.vector_lanes, 4);
  }
  std::string name() const override { return "opencl-split"; }
  const codegen::TargetInfo& target() const override { return target_; }
  std::string emit(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config) const override {
    return codegen::emit_gpu_kernel(w, nest, config, codegen::GpuDialect::OpenCL, true);
  }

 private:
  codegen::TargetInfo target_;
};

}  // namespace

TEST_CASE("opencl: random schedules of every library op compute the reference results on the OpenCL device") {
  if (auto why = test::no_opencl_platform()) TT_SKIP(*why);
  auto be = codegen::make_backend("opencl");
  INFO("OpenCL device: " << be->target().fingerprint_json);
  CHECK(be->target().traits.groups());
  test::random_schedules_of_every_op_are_correct(3, 40, "opencl");
}

TEST_CASE("opencl: staged inputs, two-level tiles, vector types and tails match the naive schedule") {
  if (auto why = test::no_opencl_platform()) TT_SKIP(*why);
  auto be = codegen::make_backend("opencl");
  auto w = library_workload("matmul", "M=37,N=29,K=13");
  auto s = from_json(R"({"version":1,"stages":[{"stage":"C","tile":{"m":[16,4],"n":[8,2],"k":[4]},
      "order":["m.0","n.0","k.0","m.1","n.1"],"unroll":2,"pack":["A","B"]}]})");
  REQUIRE(ir::check_schedule(w, s, be->target().traits) == "");
  auto conv = library_workload("conv2d", "N=1,C=3,H=9,W=11,K=5,R=3,S=3");
  auto c = from_json(R"({"version":1,"stages":[{"stage":"O","tile":{"n":[1,1],"k":[4,2],"y":[4,1],"x":[8,4],
      "c":[2],"r":[3],"s":[1]},"order":["n.0","k.0","y.0","x.0","c.0","r.0","s.0","n.1","k.1","y.1","x.1"],"pack":["I","F"]}]})");
  REQUIRE(ir::check_schedule(conv, c, be->target().traits) == "");
  test::all_correct(*be, w, {s});
  test::all_correct(*be, conv, {c});
  // Vector types along n with a tail of whole vectors, staged inputs and a fused epilogue.
  int lanes = be->target().traits.vector_lanes;
  if (lanes > 1) {
    std::string l = std::to_string(lanes), l2 = std::to_string(2 * lanes);
    auto mbr = library_workload("matmul_bias_relu", "M=13,N=" + std::to_string(5 * lanes) + ",K=11");
    auto v = from_json(R"({"version":1,"stages":[{"stage":"acc","tile":{"m":[6,3],"n":[)" + l2 + "," + l +
                       R"(],"k":[4]},"order":["m.0","n.0","k.0","m.1","n.1"],"vectorize":"n","pack":["A","B"],
                       "fuse_epilogue":true},{"stage":"C"}]})");
    REQUIRE(ir::check_schedule(mbr, v, be->target().traits) == "");
    std::string src = be->emit(mbr, ir::lower(mbr, v, be->target().traits), v.to_json());
    CHECK(src.find("vload" + l) != std::string::npos);
    CHECK(src.find("vstore" + l) != std::string::npos);
    test::all_correct(*be, mbr, {v});
  }
}

TEST_CASE("split vectors (the CUDA style) with tails, staging and epilogues compute the reference results") {
  if (auto why = test::no_opencl_platform()) TT_SKIP(*why);
  SplitVectorBackend be;
  int lanes = be.target().traits.vector_lanes;
  std::string l = std::to_string(lanes), l2 = std::to_string(2 * lanes);
  auto mbr = library_workload("matmul_bias_relu", "M=13,N=" + std::to_string(5 * lanes) + ",K=11");
  auto v = from_json(R"({"version":1,"stages":[{"stage":"acc","tile":{"m":[6,3],"n":[)" + l2 + "," + l +
                     R"(],"k":[4]},"order":["m.0","n.0","k.0","m.1","n.1"],"vectorize":"n","pack":["A","B"],
                     "fuse_epilogue":true},{"stage":"C"}]})");
  std::string src = be.emit(mbr, ir::lower(mbr, v, be.target().traits), v.to_json());
  CHECK(src.find("vload4(0, ") != std::string::npos);
  CHECK(src.find("vstore4((float4)(") != std::string::npos);
  CHECK(src.find(".w") != std::string::npos);
  test::all_correct(be, mbr, {v});
  // Random schedules (most vectorized) of ops whose accesses are aligned and of ones that are not.
  for (auto [op, sizes] : std::vector<std::pair<std::string, std::string>>{
           {"matmul", "M=7,N=" + std::to_string(3 * lanes) + ",K=9"},
           {"conv2d", "N=1,C=2,H=6,W=" + std::to_string(lanes + 2) + ",K=3,R=3,S=3"},
           {"softmax", "N=5,D=" + std::to_string(2 * lanes)}}) {
    auto w = library_workload(op, sizes);
    tuner::Space space(w, be.target().traits);
    tuner::Rng rng(11);
    std::vector<ir::Schedule> batch;
    for (int i = 0; i < 4; ++i) batch.push_back(space.sample(rng));
    test::all_correct(be, w, batch);
  }
}

TEST_CASE("opencl: round and the f32 cast of f32 values, as every builtin, run on the device") {
  if (auto why = test::no_opencl_platform()) TT_SKIP(*why);
  auto be = codegen::make_backend("opencl");
  auto w = ir::bind(ir::parse_op("op r(X: f32[N, D]) -> Y: f32[N, D] { Y[n, d] = round(f32(X[n, d]) * 7.5) }"),
                    ir::parse_sizes("N=5,D=37"));
  tuner::Space space(w, be->target().traits);
  tuner::Rng rng(3);
  test::all_correct(*be, w, {ir::naive_schedule(w), space.sample(rng), space.sample(rng)});
}

TEST_CASE("opencl: bf16 and f16 tensors widen and round exactly as the host does, special values included") {
  if (auto why = test::no_opencl_platform()) TT_SKIP(*why);
  auto be = codegen::make_backend("opencl");
  TempDir dir;
  // Every 16-bit pattern through a load, then f32 values through a store: zeros, subnormals of
  // both types, the f16 range's end and the halfway points around it, infinities, NaN.
  const int n = 65536;
  std::vector<float> words(n);  // a float per element: what a device copies (KernelShape)
  for (int i = 0; i < n; ++i) reinterpret_cast<std::uint16_t*>(words.data())[i] = static_cast<std::uint16_t>(i);
  auto widen =
      ir::bind(ir::parse_op("op w(B: bf16[N], H: f16[N]) -> (Y: f32[N], Z: f32[N]) { Y[n] = B[n]\n Z[n] = H[n] }"),
               ir::parse_sizes("N=65536"));
  auto out = run_naive(*be, widen, {words, words}, dir);
  for (int i = 0; i < n; ++i) {
    double b = ir::load_element(ir::DType::BF16, words.data(), i),
           h = ir::load_element(ir::DType::F16, words.data(), i);
    if (std::isnan(b) ? !std::isnan(out[2][i]) : out[2][i] != b) FAIL_CHECK("bf16 " << i << ": " << out[2][i]);
    if (std::isnan(h) ? !std::isnan(out[3][i]) : out[3][i] != h) FAIL_CHECK("f16 " << i << ": " << out[3][i]);
  }
  std::vector<float> values = {0.0f,      -0.0f,    1e-45f,      1e-39f,      5.96e-8f,  2.98e-8f, 2.99e-8f,
                               6.1e-5f,   65504.0f, 65519.0f,    65520.0f,    -65520.0f, 1e6f,     INFINITY,
                               -INFINITY, NAN,      1.00390625f, 1.01171875f, 3.14159f,  -2.71828f};
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::uint32_t> bits;
  while (values.size() < 4096) {
    std::uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    values.push_back(f);
  }
  auto narrow = ir::bind(ir::parse_op("op s(X: f32[N]) -> (B: bf16[N], H: f16[N]) { B[n] = X[n]\n H[n] = X[n] }"),
                         ir::parse_sizes("N=4096"));
  auto stored = run_naive(*be, narrow, {values}, dir);
  for (size_t i = 0; i < values.size(); ++i) {
    std::uint16_t want_b, want_h;
    ir::store_element(ir::DType::BF16, &want_b, 0, values[i]);
    ir::store_element(ir::DType::F16, &want_h, 0, values[i]);
    std::uint16_t got_b = reinterpret_cast<const std::uint16_t*>(stored[1].data())[i];
    std::uint16_t got_h = reinterpret_cast<const std::uint16_t*>(stored[2].data())[i];
    bool nan = std::isnan(values[i]);
    // NaN: any NaN pattern (quiet, same sign).
    if (nan ? (got_b & 0x7f80) != 0x7f80 || (got_b & 0x7f) == 0 : got_b != want_b)
      FAIL_CHECK("bf16 of " << values[i] << ": " << got_b << ", want " << want_b);
    if (nan ? (got_h & 0x7c00) != 0x7c00 || (got_h & 0x3ff) == 0 : got_h != want_h)
      FAIL_CHECK("f16 of " << values[i] << ": " << got_h << ", want " << want_h);
  }
}

TEST_CASE("opencl: typed matmuls and padded f16 windows match the naive kernel; integer ops are refused by name") {
  if (auto why = test::no_opencl_platform()) TT_SKIP(*why);
  auto be = codegen::make_backend("opencl");
  for (const ir::Workload& w : test::half_workloads()) {
    CAPTURE(w.canonical_text);
    tuner::Space space(w, be->target().traits);
    tuner::Rng rng(9);
    std::vector<ir::Schedule> batch{ir::naive_schedule(w)};
    for (int i = 0; i < 5; ++i) batch.push_back(space.sample(rng));
    test::all_correct(*be, w, batch);
  }
  auto q = ir::bind(ir::parse_op("op q(A: u8[M, K], B: i8[K, N]) -> C: i32[M, N] { C[m, n] += A[m, k] * B[k, n] }"),
                    ir::parse_sizes("M=3,N=4,K=5"));
  CHECK(test::error_of([&] {
          auto naive = ir::naive_schedule(q);
          be->emit(q, ir::lower(q, naive, be->target().traits), naive.to_json());
        }).find("runs f32, bf16 and f16 ops only, and op 'q' has the u8 tensor 'A'") != std::string::npos);
}

TEST_CASE("opencl: the schedule space respects the device's work-group limits") {
  if (auto why = test::no_opencl_platform()) TT_SKIP(*why);
  auto be = codegen::make_backend("opencl");
  ir::TargetTraits t = be->target().traits;
  auto w = library_workload("matmul", "M=64,N=64,K=64");
  // Groups over the limit, a third tile level, fused rows and CPU knobs are refused with a reason.
  t.max_group_size = 16;
  CHECK(ir::check_schedule(w, from_json(R"({"version":1,"stages":[{"stage":"C","tile":{"m":[8,1],"n":[8,1],"k":[4]},
      "order":["m.0","n.0","k.0","m.1","n.1"]}]})"),
                           t)
            .find("exceed the device's 16") != std::string::npos);
  CHECK(ir::check_schedule(w, from_json(R"({"version":1,"stages":[{"stage":"C","tile":{"m":[16,4,1],"n":[4,1],"k":[4]},
      "order":["m.0","n.0","k.0","m.1","m.2","n.1"]}]})"),
                           t)
            .find("at most 2 tile levels") != std::string::npos);
  CHECK(ir::check_schedule(w, from_json(R"({"version":1,"stages":[{"stage":"C","tile":{"m":[4,1],"n":[4,1],"k":[4]},
      "order":["m.0","n.0","k.0","m.1","n.1"],"parallel":1}]})"),
                           t)
            .find("parallel must be 0") != std::string::npos);
  t.local_bytes = 64;
  CHECK(ir::check_schedule(w, from_json(R"({"version":1,"stages":[{"stage":"C","tile":{"m":[4,1],"n":[4,1],"k":[8]},
      "order":["m.0","n.0","k.0","m.1","n.1"],"pack":["A"]}]})"),
                           t)
            .find("bytes of local memory") != std::string::npos);
  tuner::Space space(w, be->target().traits);
  tuner::Rng rng(3);
  int vectorized = 0;
  for (int i = 0; i < 50; ++i) {
    ir::Schedule s = space.sample(rng);
    CHECK(ir::check_schedule(w, s, be->target().traits) == "");
    CHECK(s.fuse_rows == 0);
    vectorized += !s.stages[0].vectorize.empty();
    s = space.mutate(s, rng);
    CHECK(ir::check_schedule(w, s, be->target().traits) == "");
  }
  if (be->target().traits.vector_lanes > 1) CHECK(vectorized > 0);
  // Vectors only along an axis whose extent is whole vectors.
  auto odd = library_workload("matmul", "M=8,N=33,K=8");
  int lanes = be->target().traits.vector_lanes;
  std::string n = std::to_string(lanes);
  auto v = from_json(R"({"version":1,"stages":[{"stage":"C","tile":{"m":[2,1],"n":[)" + n + "," + n +
                     R"(],"k":[4]},"order":["m.0","n.0","k.0","m.1","n.1"],"vectorize":"n"}]})");
  if (lanes > 1)
    CHECK(ir::check_schedule(odd, v, be->target().traits).find("multiple of " + n + " lanes") != std::string::npos);
}

TEST_CASE("opencl: the generated source is readable and records its launches") {
  if (auto why = test::no_opencl_platform()) TT_SKIP(*why);
  auto be = codegen::make_backend("opencl");
  auto w = library_workload("softmax", "N=8,D=33");
  tuner::Space space(w, be->target().traits);
  tuner::Rng rng(1);
  ir::Schedule s = space.sample(rng);
  std::string src = be->emit(w, ir::lower(w, s, be->target().traits), s.to_json());
  CHECK(src.rfind("// tt-launch: [", 0) == 0);
  CHECK(src.find("__kernel") != std::string::npos);
  CHECK(src.find("// stage ") != std::string::npos);
  auto launches = codegen::read_launches(src);
  CHECK(!launches.empty());
  CHECK(test::error_of([] { codegen::read_launches("__kernel void f() {}"); }).find("no kernel launches") !=
        std::string::npos);
  CHECK(test::error_of([] {
          codegen::read_launches("// tt-launch: [{\"kernel\":1,\"groups\":1,\"items\":1}]\n");
        }).find("malformed kernel launches") != std::string::npos);
  CHECK(test::error_of([] {
          codegen::read_launches("// tt-launch: [{\"kernel\":\"k\",\"groups\":0,\"items\":1}]\n");
        }).find("positive groups and items") != std::string::npos);
}

TEST_CASE("opencl: a missing device or a damaged artifact is a clear error") {
  if (auto why = test::no_opencl_platform()) TT_SKIP(*why);
  codegen::BackendOptions o;
  o.device = "no such device";
  auto be = codegen::make_backend("opencl", o);
  ErrorKind kind{};
  CHECK(test::error_of([&] { be->target(); }, &kind).find("no OpenCL device named like 'no such device'") !=
        std::string::npos);
  CHECK(kind == ErrorKind::Unavailable);
  TempDir dir;
  std::ofstream(dir.file("bad.bin")) << "not an artifact";
  auto ok = codegen::make_backend("opencl");
  CHECK(test::error_of([&] { ok->load(dir.file("bad.bin"), {}); }, &kind).find("not a tiletune GPU artifact") !=
        std::string::npos);
  CHECK(kind == ErrorKind::Io);
}
