// The OpenCL backend on this machine's OpenCL device (PoCL runs it on the CPU): kernels run and
// are checked against the reference, and the CUDA style of vectors is checked here too. Every
// test case needs an OpenCL platform and is skipped where there is none.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

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
