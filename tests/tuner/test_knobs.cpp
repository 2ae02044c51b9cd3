// The knob table (ir/knobs.hpp) is the one declaration of each knob: these tests keep the
// schema, the space, the checker and the features agreeing with it.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "costmodel/features.hpp"
#include "helpers.hpp"
#include "ir/knobs.hpp"
#include "support/json_schema.hpp"
#include "tuner/space.hpp"

using namespace tiletune;
using tiletune::test::library_workload;

namespace {

nlohmann::json config_schema() { return test::schema("config.schema.json"); }

const ir::TargetTraits kCpu{16, 32, 2};

ir::TargetTraits work_groups() {
  ir::TargetTraits t{4, 32, 1};
  t.max_group_size = 256;
  t.local_bytes = 32 * 1024;
  return t;
}

//! Ops of every shape the space handles: one reduction, a fused epilogue, a strided conv,
//! row-wise stages.
std::vector<ir::Workload> workloads() {
  return {library_workload("matmul", "M=37,N=70,K=29"), library_workload("matmul_bias_relu", "M=24,N=48,K=40"),
          library_workload("conv2d", "N=1,C=6,H=12,W=12,K=20,R=3,S=3"), library_workload("softmax", "N=12,D=70"),
          library_workload("layernorm", "N=9,D=40")};
}

//! The knob that a config JSON key names, if any ("tile" stands for its parts).
bool is_json_knob(const ir::Knob& k) { return std::string(k.name).find('.') == std::string::npos; }

}  // namespace

TEST_CASE("knobs: the config schema declares every knob with the table's range, and nothing else") {
  auto schema = config_schema();
  auto& stage = schema["$defs"]["stage"]["properties"];
  std::set<std::string> declared{"stage", "tile"};
  for (const ir::Knob* k : ir::all_knobs()) {
    if (!is_json_knob(*k)) continue;
    CAPTURE(k->name);
    const bool program = std::string(k->name) == "fuse_rows";
    auto& props = program ? schema["properties"] : stage;
    REQUIRE(props.contains(k->name));
    declared.insert(k->name);
    if (k->field) {  // an integer knob: its range is the schema's
      CHECK(props[k->name]["type"] == "integer");
      CHECK(props[k->name]["minimum"].get<std::int64_t>() == k->min);
      CHECK(props[k->name]["maximum"].get<std::int64_t>() == k->max);
    }
  }
  CHECK(schema["properties"]["fuse_rows"]["minimum"].get<std::int64_t>() == ir::knobs::fuse_rows.min);
  CHECK(stage["tile"]["additionalProperties"]["maxItems"].get<std::int64_t>() == ir::knobs::tile_levels.max);
  for (auto& [key, value] : stage.items()) {
    CAPTURE(key);
    CHECK(declared.count(key) == 1);
  }
}

TEST_CASE("knobs: each enters a documented feature, and its choices lie in its range") {
  std::set<std::string> features;
  for (auto& [name, doc] : costmodel::feature_docs()) features.insert(name);
  std::set<std::string> names;
  for (const ir::Knob* k : ir::all_knobs()) {
    CAPTURE(k->name);
    CHECK(names.insert(k->name).second);
    CHECK(features.count(k->feature) == 1);
    CHECK(std::string(k->doc).size() > 10);
    REQUIRE(!k->choices.empty());
    for (auto& c : k->choices) {
      CHECK(c.weight > 0);
      // A tile part's choice 0 stands for "the whole axis" (see knobs::tile_reduce).
      if (c.value != 0 || k->min == 0) CHECK(ir::knob_range_problem(*k, c.value) == "");
    }
  }
  // The checker refuses what the table refuses, naming the knob and its range.
  auto w = library_workload("matmul", "M=16,N=32,K=8");
  for (const ir::Knob* k : ir::stage_int_knobs()) {
    CAPTURE(k->name);
    ir::Schedule s = ir::naive_schedule(w);
    s.stages[0].*(k->field) = static_cast<int>(k->max + 1);
    CHECK(ir::check_schedule(w, s, kCpu).find(ir::knob_range_problem(*k, k->max + 1)) != std::string::npos);
    CHECK(ir::knob_range_problem(*k, k->max + 1).find(k->name) == 0);
  }
}

TEST_CASE("knobs: every config the space samples, mutates, crosses or seeds fits the config schema") {
  auto schema = config_schema();
  for (const ir::TargetTraits& t : {kCpu, work_groups()}) {
    for (auto& w : workloads()) {
      CAPTURE(w.op.name);
      CAPTURE(t.groups());
      tuner::Space space(w, t);
      tuner::Rng rng(11);
      std::vector<ir::Schedule> configs = space.seeds();
      for (int i = 0; i < 30; ++i) configs.push_back(space.sample(rng));
      for (int i = 0; i < 60; ++i) configs.push_back(space.mutate(configs[i % configs.size()], rng));
      for (int i = 0; i < 10; ++i) configs.push_back(space.crossover(configs[i], configs[configs.size() - 1 - i], rng));
      for (auto& s : configs) {
        CAPTURE(s.to_json());
        CHECK(space.check(s) == "");
        CHECK(validate_json(schema, nlohmann::json::parse(s.to_json())).empty());
        CHECK(ir::Schedule::from_json(s.to_json()).to_json() == s.to_json());
      }
    }
  }
}

TEST_CASE("knobs: a mutated config keeps the packs its vectorized axes require") {
  for (auto& w : workloads()) {
    CAPTURE(w.op.name);
    tuner::Space space(w, kCpu);
    tuner::Rng rng(3);
    ir::Schedule s = space.sample(rng);
    int vectorized_strided = 0;
    for (int i = 0; i < 150; ++i) {
      s = space.mutate(s, rng);
      for (size_t st = 0; st < s.stages.size(); ++st) {
        const auto& ss = s.stages[st];
        if (ss.vectorize.empty()) continue;
        for (auto& tensor : ir::panel_reads(w.stages[st].rhs, ss.vectorize)) {
          CAPTURE(s.to_json());
          CHECK(std::find(ss.pack.begin(), ss.pack.end(), tensor) != ss.pack.end());
          ++vectorized_strided;
        }
      }
    }
    // conv2d is vectorized along its output channels (the filter read strided) at times.
    if (w.op.name == "conv2d") CHECK(vectorized_strided > 0);
  }
}

TEST_CASE("knobs: two configs that differ in one knob have different features") {
  // Sizes no tile divides and of different lengths, so that no two axes look alike.
  auto w = library_workload("matmul_bias_relu", "M=96,N=160,K=72");
  tuner::Space space(w, kCpu);
  auto features = [&](const ir::Schedule& s) { return costmodel::featurize(w, s, kCpu).pooled(); };
  std::map<std::string, int> compared;  // knob -> pairs compared
  auto compare = [&](const std::string& knob, const ir::Schedule& a, const ir::Schedule& b) {
    if (space.check(a) != "" || space.check(b) != "" || a.key() == b.key()) return;
    CAPTURE(knob);
    CAPTURE(a.to_json());
    CAPTURE(b.to_json());
    CHECK(features(a) != features(b));
    ++compared[knob];
  };
  tuner::Rng rng(17);
  std::vector<ir::Schedule> bases = space.seeds();
  for (int i = 0; i < 40; ++i) bases.push_back(space.sample(rng));
  for (const ir::Schedule& base : bases) {
    ir::Schedule s = base;
    s.fuse_rows = 0;
    ir::StageSchedule& ss = s.stages[0];
    if (ss.inline_stage) continue;
    for (const ir::Knob* k : ir::stage_int_knobs())
      for (auto& c : k->choices) {
        ir::Schedule t = s;
        t.stages[0].*(k->field) = static_cast<int>(c.value);
        compare(k->name, s, t);
      }
    {  // fuse_epilogue: the relu computed at the store or in its own loop
      ir::Schedule t = s;
      t.stages[0].fuse_epilogue = !ss.fuse_epilogue;
      if (t.stages[0].fuse_epilogue)
        t.stages[1].reset();
      else
        t.stages[1] = ir::naive_schedule(w).stages[1];
      compare("fuse_epilogue", s, t);
    }
    if (!ss.vectorize.empty() && ir::strided_reads(w.stages[0].rhs, ss.vectorize).empty()) {
      ir::Schedule t = s;
      t.stages[0].vectorize.clear();
      compare("vectorize", s, t);
    }
    for (auto& input : {std::string("A"), std::string("B")}) {
      ir::Schedule t = s;
      auto& pack = t.stages[0].pack;
      auto at = std::find(pack.begin(), pack.end(), input);
      if (at == pack.end())
        pack.push_back(input);
      else
        pack.erase(at);
      compare("pack", s, t);
    }
    for (size_t i = 0; i + 1 < ss.order.size(); ++i) {
      ir::Schedule t = s;
      auto& order = t.stages[0].order;
      if (order[i].substr(0, order[i].rfind('.')) == order[i + 1].substr(0, order[i + 1].rfind('.'))) continue;
      // Two loops of one trip each: swapping them changes nothing in the program.
      ir::LoopNest nest = ir::lower(w, s, kCpu);
      const auto& outer = nest.stages[0].outer;
      if (outer[i].trips() == 1 && outer[i + 1].trips() == 1) continue;
      std::swap(order[i], order[i + 1]);
      compare("order", s, t);
    }
    for (auto& [axis, sizes] : ss.tile) {
      if (sizes.size() < 2) continue;
      // One tile level fewer: the level above the block goes, with its loop.
      ir::Schedule t = s;
      auto& levels = t.stages[0].tile[axis];
      levels.erase(levels.end() - 2);
      auto& order = t.stages[0].order;
      order.erase(std::find(order.begin(), order.end(), axis + "." + std::to_string(levels.size())));
      compare("tile.levels", s, t);
    }
  }
  {  // inline and fuse_rows need a stage that can be inlined or row-fused: layernorm
    auto ln = library_workload("layernorm", "N=24,D=40");
    tuner::Space ln_space(ln, kCpu);
    auto ln_features = [&](const ir::Schedule& s) { return costmodel::featurize(ln, s, kCpu).pooled(); };
    for (auto& seed : ln_space.seeds()) {
      ir::Schedule t = seed;
      t.fuse_rows = seed.fuse_rows > 0 ? 0 : 16;
      if (ln_space.check(t) == "" && ln_space.check(seed) == "") {
        CHECK(ln_features(t) != ln_features(seed));
        ++compared["fuse_rows"];
      }
      for (size_t i = 0; i < seed.stages.size(); ++i)
        if (seed.stages[i].inline_stage) {
          ir::Schedule u = seed;
          u.stages[i] = ir::naive_schedule(ln).stages[i];
          if (ln_space.check(u) == "") {
            CHECK(ln_features(u) != ln_features(seed));
            ++compared["inline"];
          }
        }
    }
  }
  // Every knob of a config was compared at least once.
  for (const ir::Knob* k : ir::all_knobs()) {
    if (!is_json_knob(*k) || std::string(k->name) == "tile") continue;
    CAPTURE(k->name);
    CHECK(compared[k->name] > 0);
  }
  CHECK(compared["tile.levels"] > 0);
}
