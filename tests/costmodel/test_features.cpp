#include <doctest/doctest.h>

#include <set>

#include "codegen/backend.hpp"
#include "costmodel/features.hpp"
#include "helpers.hpp"
#include "tuner/space.hpp"

using namespace tiletune;
using tiletune::test::library_workload;

namespace {
const ir::TargetTraits kAvx512{16, 32, 2};

std::vector<float> features_of(const ir::Workload& w, const ir::Schedule& s) {
  return costmodel::featurize(w, s, kAvx512).pooled();
}
}  // namespace

TEST_CASE("features: one documented feature per slot, each named once") {
  CHECK(costmodel::feature_docs().size() == costmodel::feature_count());
  std::set<std::string> names;
  for (auto& [name, doc] : costmodel::feature_docs()) {
    CAPTURE(name);
    CHECK(names.insert(name).second);
    CHECK(doc.size() > 10);
  }
  // The version moves with the set: tests/fixtures holds a model of version 1, which has 31.
  CHECK((costmodel::kFeatureVersion == 1) == (costmodel::feature_count() == 31));
}

TEST_CASE("features: deterministic, finite, and changed by the schedule") {
  for (auto& name : ops::op_names()) {
    CAPTURE(name);
    auto w = test::library_test_workload(name);
    tuner::Space space(w, kAvx512);
    tuner::Rng rng(5);
    ir::Schedule naive = ir::naive_schedule(w);
    auto base = features_of(w, naive);
    CHECK(base.size() == costmodel::feature_count());
    CHECK(base == features_of(w, naive));
    int different = 0;
    for (int i = 0; i < 10; ++i) {
      ir::Schedule s = space.sample(rng);
      auto f = features_of(w, s);
      for (float x : f) CHECK(std::isfinite(x));
      CHECK(f == features_of(w, s));
      different += f != base;
    }
    CHECK(different >= 8);
  }
}

TEST_CASE("features: footprints are judged against the target's cache sizes") {
  auto w = library_workload("matmul", "M=256,N=256,K=256");
  auto s = ir::Schedule::from_json(R"({"version":1,"stages":[{"stage":"C","tile":{"m":[64,4],"n":[64,32],"k":[64]},)"
                                   R"("order":["m.0","n.0","k.0","m.1","n.1"],"vectorize":"n"}]})");
  ir::TargetTraits small = kAvx512, big = kAvx512;
  small.l1_bytes = small.l2_bytes = small.l3_bytes = 1024;
  big.l1_bytes = big.l2_bytes = big.l3_bytes = std::int64_t(1) << 40;
  auto nest = ir::lower(w, s, kAvx512);
  auto f_small = costmodel::extract_features(w, nest, small).pooled(),
       f_big = costmodel::extract_features(w, nest, big).pooled();
  CHECK(f_small != f_big);
  CHECK(f_big[16] == 1.0f);  // fit_l1: every loop's footprint fits
  CHECK(f_small[16] == 0.0f);
  auto be = codegen::make_backend("cpu");
  CHECK(be->target().traits.l1_bytes > 0);
  CHECK(be->target().fingerprint_json.find("\"caches\"") != std::string::npos);
}

TEST_CASE("features: a register tile and a vector axis show up where expected") {
  auto w = library_workload("matmul", "M=64,N=64,K=64");
  auto tiled = ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"C","tile":{"m":[6],"n":[64],"k":[64]},"order":["m.0","n.0","k.0"],)"
      R"("vectorize":"n","unroll":0,"parallel":1}]})");
  auto f = features_of(w, tiled);
  auto naive = features_of(w, ir::naive_schedule(w));
  auto at = [](const std::vector<float>& v, const std::string& name) {
    const auto& docs = costmodel::feature_docs();
    for (size_t i = 0; i < docs.size(); ++i)
      if (docs[i].first == name) return v[i];
    FAIL("no feature " << name);
    return 0.0f;
  };
  CHECK(at(f, "reg_points") == 6 * 64);
  CHECK(at(naive, "reg_points") == 1);
  CHECK(at(f, "accumulators") == 24);
  CHECK(at(f, "vector_lanes_log") > 4);
  CHECK(at(naive, "vector_lanes_log") == 0);
  CHECK(at(f, "edge_fraction") > 0);  // 64 rows in blocks of 6
  CHECK(at(naive, "edge_fraction") == 0);
  CHECK(at(f, "loads_per_update") < at(naive, "loads_per_update"));
}

TEST_CASE("features: one row per loop nest; the rows sum to the program's vector") {
  auto w = library_workload("softmax", "N=32,D=96");
  auto naive = costmodel::featurize(w, ir::naive_schedule(w), kAvx512);
  CHECK(naive.stages.size() == ir::lower(w, ir::naive_schedule(w), kAvx512).stages.size());
  CHECK(naive.stages.size() > 1);
  auto pooled = naive.pooled();
  float sum0 = 0;
  for (auto& row : naive.stages) sum0 += row[0];
  CHECK(pooled[0] == doctest::Approx(sum0));
  // Pooled by max, each feature is its largest over the nests; the whole-program ones (the
  // first row's, 0 in the others) survive either pooling.
  auto most = naive.pooled(costmodel::Pooling::Max);
  for (size_t k = 0; k < most.size(); ++k) {
    float largest = naive.stages[0][k];
    for (auto& row : naive.stages) largest = std::max(largest, row[k]);
    CHECK(most[k] == largest);
  }
  const size_t stages_feature = static_cast<size_t>(
      std::find_if(costmodel::feature_docs().begin(), costmodel::feature_docs().end(),
                   [](auto& d) { return d.first == "stages"; }) -
      costmodel::feature_docs().begin());
  CHECK(most[stages_feature] == static_cast<float>(naive.stages.size()));
  CHECK(pooled[stages_feature] == most[stages_feature]);
  auto bad = ir::naive_schedule(w);
  bad.stages[0].vectorize = "nope";
  CHECK_THROWS_AS(costmodel::featurize(w, bad, kAvx512), Error);
}

TEST_CASE("features: per buffer, the largest first, its stride along the innermost loop and its reuse") {
  auto w = library_workload("matmul", "M=64,N=128,K=32");  // C 32 KiB, B 16 KiB, A 8 KiB
  auto tiled = ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"C","tile":{"m":[6],"n":[64],"k":[32]},"order":["m.0","n.0","k.0"],)"
      R"("vectorize":"n","unroll":0,"parallel":1}]})");
  auto f = features_of(w, tiled);
  auto at = [&](const std::string& name) {
    const auto& docs = costmodel::feature_docs();
    for (size_t i = 0; i < docs.size(); ++i)
      if (docs[i].first == name) return f[i];
    FAIL("no feature " << name);
    return 0.0f;
  };
  CHECK(at("buffer0_unique_log") == doctest::Approx(std::log2(1.0 + 64 * 128 * 4)));  // C
  CHECK(at("buffer2_unique_log") == doctest::Approx(std::log2(1.0 + 64 * 32 * 4)));   // A
  CHECK(at("buffer0_stride_log") == 1.0f);  // C along n: unit stride
  CHECK(at("buffer2_stride_log") == 0.0f);  // A along n: invariant (broadcast)
  CHECK(at("buffer0_reuse_type") == 2.0f);  // C's accumulators stay in registers across k
  CHECK(at("buffer2_reuse_type") == 2.0f);  // A's element serves the 64 columns of the tile
  CHECK(at("buffer1_lines_log") > 0);
  CHECK(at("intensity_curve_3") > 0);
  auto naive = costmodel::featurize(w, ir::naive_schedule(w), kAvx512).pooled();
  CHECK(naive != f);
}
