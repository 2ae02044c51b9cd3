#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "helpers.hpp"
#include "ir/loop_nest.hpp"
#include "support/json_schema.hpp"

using namespace tiletune;
using tiletune::test::error_of;
using tiletune::test::library_workload;

namespace {

nlohmann::json config_schema() { return test::schema("config.schema.json"); }

const ir::TargetTraits kAvx512{16, 32, 2};

ir::Schedule tiled_matmul() {
  return ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"C","tile":{"m":[24,6],"n":[64,32],"k":[16]},)"
      R"("order":["m.0","n.0","k.0","m.1","n.1"],"vectorize":"n","unroll":4,"parallel":2}]})");
}

}  // namespace

TEST_CASE("schedule: the naive schedule is valid for every library op and its JSON fits the schema") {
  auto schema = config_schema();
  for (auto& name : ops::op_names()) {
    CAPTURE(name);
    ir::Workload w = test::library_test_workload(name);
    ir::Schedule s = ir::naive_schedule(w);
    CHECK(ir::check_schedule(w, s, kAvx512) == "");
    CHECK(validate_json(schema, nlohmann::json::parse(s.to_json())).empty());
  }
}

TEST_CASE("schedule: JSON round trip is canonical and keys differ by knob") {
  ir::Schedule s = tiled_matmul();
  CHECK(ir::Schedule::from_json(s.to_json()).to_json() == s.to_json());
  CHECK(validate_json(config_schema(), nlohmann::json::parse(s.to_json())).empty());
  ir::Schedule t = s;
  t.stages[0].unroll = 8;
  CHECK(t.key() != s.key());
  // prefetch is written only when set, so configs from before it existed keep their keys.
  CHECK(s.to_json().find("prefetch") == std::string::npos);
  t = s;
  t.stages[0].prefetch = 16;
  CHECK(t.key() != s.key());
  CHECK(ir::Schedule::from_json(t.to_json()).stages[0].prefetch == 16);
  CHECK(validate_json(config_schema(), nlohmann::json::parse(t.to_json())).empty());
}

TEST_CASE("schedule: malformed config JSON is refused with a reason") {
  for (const char* bad :
       {"", "[]", "{", R"({"version":2,"stages":[]})", R"({"version":1,"stages":[{"stage":"C","tiles":{}}]})",
        R"({"version":1,"stages":[{"stage":"C","tile":{"m":"x"}}]})", R"({"version":1})",
        R"({"version":1,"stages":[{}]})", R"({"version":1,"stages":[],"extra":1})"}) {
    CAPTURE(bad);
    ErrorKind kind{};
    CHECK(error_of([&] { ir::Schedule::from_json(bad); }, &kind).rfind("config: ", 0) == 0);
    CHECK(kind == ErrorKind::InvalidInput);
  }
}

TEST_CASE("schedule: invalid configs are rejected by the checker, each with its reason") {
  ir::Workload w = library_workload("matmul", "M=100,N=64,K=30");
  CHECK(ir::check_schedule(w, tiled_matmul(), kAvx512) == "");
  auto reason = [&](auto edit) {
    ir::Schedule s = tiled_matmul();
    edit(s.stages[0]);
    return ir::check_schedule(w, s, kAvx512);
  };
  CHECK(reason([](auto& s) { s.tile.erase("k"); }).find("no tile sizes") != std::string::npos);
  CHECK(reason([](auto& s) { s.tile["m"] = {24, 5}; }).find("must each divide") != std::string::npos);
  CHECK(reason([](auto& s) { s.tile["q"] = {1}; }).find("unknown axis 'q'") != std::string::npos);
  CHECK(reason([](auto& s) { s.order.pop_back(); }).find("order must list each") != std::string::npos);
  CHECK(reason([](auto& s) { std::swap(s.order[0], s.order[3]); }).find("before") != std::string::npos);
  CHECK(reason([](auto& s) {
          s.order = {"k.0", "m.0", "n.0", "m.1", "n.1"};
          s.parallel = 1;
        }).find("reduces") != std::string::npos);
  // m is a CPU vector axis only with A (read strided along it) packed into panels along it.
  CHECK(reason([](auto& s) {
          s.vectorize = "m";
          s.tile["m"] = {32, 16};
          s.tile["n"] = {64, 4};
        }) == "stage C: 'A' is read strided along 'm': vectorizing it needs 'A' packed");
  CHECK(reason([](auto& s) {
          s.vectorize = "m";
          s.tile["m"] = {32, 16};
          s.tile["n"] = {64, 4};
          s.pack = {"A"};
        }) == "");
  ir::TargetTraits gpu = kAvx512;
  gpu.max_group_size = 256;
  CHECK(ir::check_schedule(
            w,
            [] {
              auto s = tiled_matmul();
              s.stages[0].vectorize = "m";
              return s;
            }(),
            gpu)
            .find("innermost left-hand axis") != std::string::npos);
  CHECK(reason([](auto& s) { s.tile["n"] = {48, 24}; }).find("multiple of 16") != std::string::npos);
  CHECK(reason([](auto& s) { s.tile["m"] = {64, 32}; }).find("vector registers") != std::string::npos);
  CHECK(reason([](auto& s) { s.unroll = 100; }).find("unroll") != std::string::npos);
  CHECK(reason([](auto& s) { s.prefetch = 65; }).find("prefetch must be in [0, 64]") != std::string::npos);
  CHECK(reason([](auto& s) { s.prefetch = 8; }) == "");
  CHECK(reason([](auto& s) { s.inline_stage = true; }).find("inlined") != std::string::npos);
  CHECK(reason([](auto& s) { s.fuse_epilogue = true; }).find("epilogue") != std::string::npos);
  CHECK(reason([](auto& s) { s.pack = {"C"}; }).find("only inputs can be packed") != std::string::npos);
  CHECK(reason([](auto& s) { s.pack = {"A", "A"}; }).find("packed twice") != std::string::npos);
  CHECK(reason([](auto& s) {
          s.tile["m"] = {24, 1};
          s.pack = {"A"};
        }).find("gains nothing") != std::string::npos);
  CHECK(reason([](auto& s) {
          s.tile["m"] = {6};
          s.order = {"m.0", "m.1", "n.0", "k.0"};
        }).find("beyond") != std::string::npos);
  CHECK(reason([](auto& s) { s.tile["m"] = {std::int64_t(1) << 32, 6}; }).find("far beyond") != std::string::npos);
  ir::Schedule rows = tiled_matmul();
  rows.fuse_rows = 24;
  CHECK(ir::check_schedule(w, rows, kAvx512).find("parallel 0") != std::string::npos);
  rows.fuse_rows = -1;
  CHECK(ir::check_schedule(w, rows, kAvx512).find("fuse_rows must be in [0, ...]") != std::string::npos);
  ir::Schedule wrong_stage = tiled_matmul();
  wrong_stage.stages[0].stage = "D";
  CHECK(ir::check_schedule(w, wrong_stage, kAvx512).find("expected 'C'") != std::string::npos);
  CHECK(error_of([&] { ir::lower(w, wrong_stage, kAvx512); }).find("invalid config") != std::string::npos);
}

TEST_CASE("schedule: absorbed stages take no knobs; an input read by a fused epilogue is not packed") {
  ir::Workload sm = library_workload("softmax", "N=8,D=64");
  ir::Schedule s = ir::naive_schedule(sm);
  s.stages[1] = ir::StageSchedule();
  s.stages[1].stage = "e";
  s.stages[1].inline_stage = true;
  CHECK(ir::check_schedule(sm, s, kAvx512) == "");
  s.stages[1].fuse_epilogue = true;
  CHECK(ir::check_schedule(sm, s, kAvx512).find("no other knobs") != std::string::npos);
  ir::Workload w = ir::bind(ir::parse_op("op f(A: f32[M, K], B: f32[K, N]) -> C: f32[M, N] {\n"
                                         "  acc[m, n] += A[m, k] * B[k, n]\n  C[m, n] = acc[m, n] + B[0, n]\n}"),
                            {{"M", 32}, {"N", 32}, {"K", 32}});
  auto fused = ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"acc","tile":{"m":[4],"n":[32],"k":[32]},"order":["m.0","n.0","k.0"],)"
      R"("vectorize":"n","fuse_epilogue":true,"pack":["B"]},{"stage":"C"}]})");
  CHECK(ir::check_schedule(w, fused, kAvx512).find("fused epilogue too") != std::string::npos);
  fused.stages[0].pack.clear();
  CHECK(ir::check_schedule(w, fused, kAvx512) == "");
}

TEST_CASE("schedule: strided accesses cannot be vectorized; scalar targets cannot vectorize") {
  ir::Workload w =
      ir::bind(ir::parse_op("op t(A: f32[N, M]) -> B: f32[M, N] { B[j, i] = A[i, j] }"), {{"N", 32}, {"M", 32}});
  CHECK(ir::vectorizable_axes(w, 0).empty());
  ir::Workload mm = library_workload("matmul", "M=32,N=32,K=32");
  auto axes = ir::vectorizable_axes(mm, 0);
  REQUIRE(!axes.empty());
  CHECK(axes.front() == "n");  // the output's contiguous axis is preferred
  ir::TargetTraits scalar{1, 16, 1};
  CHECK(ir::check_schedule(mm, tiled_matmul(), scalar).find("no SIMD") != std::string::npos);
}

TEST_CASE("lowering: loops, register tile, fused epilogue and workspace") {
  ir::Workload w = library_workload("matmul_bias_relu", "M=64,N=64,K=64");
  ir::Schedule s = ir::naive_schedule(w);
  ir::LoopNest plain = ir::lower(w, s, kAvx512);
  CHECK(plain.stages.size() == 2);
  CHECK(plain.workspace_floats == 64 * 64);  // acc is a temporary
  s.stages[0].fuse_epilogue = true;
  s.stages[1] = ir::StageSchedule();
  s.stages[1].stage = "C";
  ir::LoopNest fused = ir::lower(w, s, kAvx512);
  REQUIRE(fused.stages.size() == 1);
  CHECK(fused.stages[0].epilogue == 1);
  CHECK(fused.workspace_floats == 0);  // partial sums live in C
  CHECK(fused.stages[0].outer.size() == 3);
  CHECK(fused.stages[0].reduce_inner.size() == 1);
}

TEST_CASE("schedule: a work-group device neither vectorizes nor stages a padded input along its border") {
  auto w = library_workload("conv2d_p1", "N=1,C=2,H=8,W=32,K=4,R=3,S=3");
  ir::TargetTraits gpu;
  gpu.vector_lanes = 4;
  gpu.max_group_size = 256;
  gpu.local_bytes = 48 * 1024;
  ir::Schedule s = ir::naive_schedule(w);
  s.stages[0].tile["x"] = {4};
  s.stages[0].vectorize = "x";
  CHECK(ir::check_schedule(w, s, gpu).find("'I' is read past its border (padding) along 'x'") != std::string::npos);
  s.stages[0].vectorize.clear();
  s.stages[0].pack = {"I"};
  CHECK(ir::check_schedule(w, s, gpu).find("a work-group device does not stage it") != std::string::npos);
  // The filter is never read outside: it may be staged.
  s.stages[0].pack = {"F"};
  CHECK(ir::check_schedule(w, s, gpu).find("past its border") == std::string::npos);
}
