#include <doctest/doctest.h>
#include <xgboost/c_api.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "costmodel/kinds.hpp"
#include "costmodel/model.hpp"
#include "costmodel/tree_walk.hpp"

using namespace tiletune;
using costmodel::CompleteTrees;

namespace {

//! XGBoost's own scores of row-major rows under a saved (UBJSON) model: the reference.
std::vector<float> xgboost_scores(const std::string& ubj, const std::vector<float>& rows, std::size_t width) {
  BoosterHandle b = nullptr;
  REQUIRE(XGBoosterCreate(nullptr, 0, &b) == 0);
  REQUIRE(XGBoosterLoadModelFromBuffer(b, ubj.data(), ubj.size()) == 0);
  const std::string array = R"({"data": [)" + std::to_string(reinterpret_cast<std::uintptr_t>(rows.data())) +
                            R"(, true], "shape": [)" + std::to_string(rows.size() / width) + ", " +
                            std::to_string(width) + R"(], "typestr": "<f4", "version": 3})";
  const bst_ulong* shape = nullptr;
  bst_ulong dims = 0;
  const float* out = nullptr;
  const int rc = XGBoosterPredictFromDense(b, array.c_str(), R"({"type": 0, "training": false, "iteration_begin": 0,
      "iteration_end": 0, "strict_shape": false, "missing": NaN, "cache_id": 0})", nullptr, &shape, &dims, &out);
  INFO(XGBGetLastError());
  REQUIRE(rc == 0);
  std::vector<float> scores(out, out + shape[0]);
  XGBoosterFree(b);
  return scores;
}

//! Features with missing values (NaN) among them, so that trees learn default directions.
std::vector<costmodel::Sample> samples_with_gaps(int groups, int per_group, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 4);
  std::vector<costmodel::Sample> out;
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < per_group; ++i) {
      costmodel::FeatureRow row(costmodel::feature_count());
      for (auto& x : row) x = u(rng);
      double cost = 2.0 * row[3] + std::max(0.0f, row[7] - 2.0f) - 0.5 * row[11];
      if (rng() % 3 == 0) row[3] = NAN, cost += 3;  // missing, and slow: the default way matters
      if (rng() % 4 == 0) row[7] = NAN;
      out.push_back({costmodel::Features{{row}}, "w" + std::to_string(g), std::exp(0.3 * cost) * 1e-3});
    }
  return out;
}

//! Rows that reach every kind of value a walk meets: numbers, NaN, infinities, and each
//! threshold of the model exactly (equal goes right).
std::vector<float> probe_rows(const std::string& ubj, std::size_t width, std::size_t n, std::uint64_t seed) {
  const auto j = nlohmann::json::from_ubjson(ubj);
  std::vector<float> thresholds;
  for (auto& t : j["learner"]["gradient_booster"]["model"]["trees"])
    for (auto& c : t["split_conditions"]) thresholds.push_back(c.get<float>());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 5);
  std::vector<float> rows(n * width);
  for (auto& x : rows) {
    const auto pick = rng() % 10;
    x = pick == 0   ? NAN
        : pick == 1 ? thresholds[rng() % thresholds.size()]
        : pick == 2 ? (rng() % 2 ? 1 : -1) * std::numeric_limits<float>::infinity()
                    : u(rng);
  }
  if (n > 1) std::fill_n(rows.begin() + static_cast<std::ptrdiff_t>(width), width, 1.5f);  // a row without NaN
  return rows;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("compiled trees score every row as XGBoost does, bit for bit: missing values, infinities, ties") {
  const std::size_t width = costmodel::feature_count();
  auto m = costmodel::make_model("xgb", 5);
  m->fit(samples_with_gaps(4, 120, 1));
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    const std::string ubj = m->payload();
    auto trees = CompleteTrees::from_ubjson(ubj);
    REQUIRE(trees.has_value());
    CHECK(trees->depth() == 6);
    CHECK(trees->features() == width);
    // Rows in blocks of every length (the walk takes 16 at a time and repeats a short block's last).
    for (std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17}, std::size_t{333}}) {
      CAPTURE(n);
      const auto rows = probe_rows(ubj, width, n, 7 + n);
      std::vector<float> ours(n);
      trees->predict(rows.data(), n, ours.data());
      CHECK(same_bits(ours, xgboost_scores(ubj, rows, width)));
    }
    // The model's own predict, through the compiled trees, agrees as well.
    const auto rows = probe_rows(ubj, width, 50, 3);
    std::vector<costmodel::Features> x;
    for (std::size_t i = 0; i < 50; ++i)
      x.push_back({{costmodel::FeatureRow(rows.begin() + i * width, rows.begin() + (i + 1) * width)}});
    CHECK(same_bits(m->predict(x), xgboost_scores(ubj, rows, width)));
    const auto more = samples_with_gaps(1, 40, 2);
    m->fine_tune(more);  // more trees, then the same checks
    CHECK(CompleteTrees::from_ubjson(m->payload())->trees() ==
          trees->trees() + costmodel::xgb_fine_tune_rounds(more.size()));
  }
}

namespace {

//! A one-feature UBJSON model of the given trees (arrays as XGBoost saves them).
std::string model_of(const std::vector<nlohmann::json>& trees, const std::string& objective = "rank:pairwise") {
  nlohmann::json j;
  j["learner"]["learner_model_param"] = {{"base_score", "5E-1"}, {"num_class", "0"}, {"num_feature", "2"},
                                         {"num_target", "1"}};
  j["learner"]["objective"]["name"] = objective;
  j["learner"]["gradient_booster"]["name"] = "gbtree";
  j["learner"]["gradient_booster"]["model"]["gbtree_model_param"] = {{"num_parallel_tree", "1"},
                                                                      {"num_trees", std::to_string(trees.size())}};
  j["learner"]["gradient_booster"]["model"]["trees"] = trees;
  auto bytes = nlohmann::json::to_ubjson(j);
  return std::string(bytes.begin(), bytes.end());
}

//! A tree as XGBoost saves it, from (left, right, feature, condition, default_left) per node.
nlohmann::json tree(std::vector<int> left, std::vector<int> right, std::vector<int> feature,
                    std::vector<float> condition, std::vector<int> default_left, int split_type = 0) {
  return {{"left_children", left},         {"right_children", right},
          {"split_indices", feature},      {"split_conditions", condition},
          {"default_left", default_left},  {"split_type", std::vector<int>(left.size(), split_type)}};
}

float score(const CompleteTrees& t, float x0, float x1) {
  const float row[2] = {x0, x1};
  float out = 0;
  t.predict(row, 1, &out);
  return out;
}

}  // namespace

TEST_CASE("compiled trees: uneven trees are padded, a lone leaf is a tree, and what they cannot hold is refused") {
  // Tree 1: x0 < 1 ? 10 : (x1 < 2 ? 20 : 30), a missing x1 goes left. Tree 2: a lone leaf, 0.25.
  const auto t1 = tree({1, -1, 3, -1, -1}, {2, -1, 4, -1, -1}, {0, 0, 1, 0, 0}, {1, 10, 2, 20, 30}, {0, 0, 1, 0, 0});
  const auto t2 = tree({-1}, {-1}, {0}, {0.25f}, {0});
  auto trees = CompleteTrees::from_ubjson(model_of({t1, t2}));
  REQUIRE(trees.has_value());
  CHECK(trees->depth() == 2);
  CHECK(score(*trees, 0, 0) == 0.5f + 10 + 0.25f);
  CHECK(score(*trees, 0, 99) == 0.5f + 10 + 0.25f);  // the padded leaf, whichever way its level goes
  CHECK(score(*trees, 1, 0) == 0.5f + 20 + 0.25f);   // equal to the threshold goes right
  CHECK(score(*trees, 5, 2) == 0.5f + 30 + 0.25f);
  CHECK(score(*trees, 5, NAN) == 0.5f + 20 + 0.25f);       // missing: the node's default, left
  CHECK(score(*trees, NAN, 0) == 0.5f + 20 + 0.25f);       // missing: the default, right
  CHECK(score(*trees, -INFINITY, 9) == 0.5f + 10 + 0.25f);  // infinities are values

  // Refused, so that XGBoost scores them: categorical splits, a link function, a split on a
  // feature the rows do not have, trees deeper than the layout holds, and bytes that are no model.
  CHECK(!CompleteTrees::from_ubjson(model_of({tree({1, -1, -1}, {2, -1, -1}, {0, 0, 0}, {1, 2, 3}, {0, 0, 0}, 1)})));
  CHECK(!CompleteTrees::from_ubjson(model_of({t1}, "binary:logistic")));
  CHECK(!CompleteTrees::from_ubjson(model_of({tree({1, -1, -1}, {2, -1, -1}, {5, 0, 0}, {1, 2, 3}, {0, 0, 0})})));
  std::vector<int> left, right, feature, dl;
  std::vector<float> cond;
  const int deep = CompleteTrees::kMaxDepth + 1;  // a chain: node 2i splits, 2i+1 is a leaf
  for (int i = 0; i < deep; ++i) {
    left.insert(left.end(), {2 * i + 1, -1});
    right.insert(right.end(), {2 * i + 2, -1});
    feature.insert(feature.end(), {0, 0});
    cond.insert(cond.end(), {static_cast<float>(i), 1});
    dl.insert(dl.end(), {0, 0});
  }
  left.push_back(-1), right.push_back(-1), feature.push_back(0), cond.push_back(2), dl.push_back(0);
  CHECK(!CompleteTrees::from_ubjson(model_of({tree(left, right, feature, cond, dl)})));
  left.resize(2 * (deep - 1) + 1), right.resize(left.size()), feature.resize(left.size()), cond.resize(left.size()),
      dl.resize(left.size());
  left.back() = -1, right.back() = -1;  // one level less: held
  CHECK(CompleteTrees::from_ubjson(model_of({tree(left, right, feature, cond, dl)}))->depth() == deep - 1);
  CHECK(!CompleteTrees::from_ubjson("not a model"));
}
