#include "costmodel/tree_walk.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace tiletune::costmodel {

namespace {

using nlohmann::json;

//! Objectives whose scores are the trees' raw margins (no link function to apply).
bool margin_objective(const std::string& name) {
  return name == "rank:pairwise" || name == "rank:ndcg" || name == "rank:map" || name == "reg:squarederror";
}

//! One tree as XGBoost saves it.
struct SavedTree {
  const json& left;
  const json& right;
  const json& feature;
  const json& condition;  //!< a split's threshold, a leaf's value
  const json& default_left;
  bool leaf(std::int64_t n) const { return left[n].get<std::int64_t>() < 0; }
  int depth(std::int64_t n, int below) const {
    if (below > CompleteTrees::kMaxDepth) return below;  // deep enough to refuse; stop walking
    if (leaf(n)) return 0;
    return 1 + std::max(depth(left[n].get<std::int64_t>(), below + 1), depth(right[n].get<std::int64_t>(), below + 1));
  }
};

//! Sums the trees over kRows rows whose values are all numbers (no NaN), kRows at a time so that
//! their walks overlap and their positions stay in registers: below the threshold goes left.
template <int kRows>
void walk_block(const float* const* x, int depth, std::size_t trees, float base, const std::uint32_t* features,
                const float* thresholds, const float* leaves, float* out) {
  const std::size_t inner = (std::size_t{1} << depth) - 1, width = inner + 1;
  float acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = base;
  for (std::size_t k = 0; k < trees; ++k) {
    const std::uint32_t* feature = features + k * inner;
    const float* threshold = thresholds + k * inner;
    std::uint32_t at[kRows] = {};
    for (int level = 0; level < depth; ++level)
      for (int r = 0; r < kRows; ++r) at[r] = 2 * at[r] + 2 - (x[r][feature[at[r]]] < threshold[at[r]]);
    const float* leaf = leaves + k * width - inner;
    for (int r = 0; r < kRows; ++r) acc[r] += leaf[at[r]];
  }
  for (int r = 0; r < kRows; ++r) out[r] = acc[r];
}

}  // namespace

std::optional<CompleteTrees> CompleteTrees::from_ubjson(const std::string& model) {
  try {
    const json j = json::from_ubjson(model);
    const json& learner = j.at("learner");
    const json& param = learner.at("learner_model_param");
    if (!margin_objective(learner.at("objective").at("name").get<std::string>())) return std::nullopt;
    if (param.value("num_class", "0") != "0" || param.value("num_target", "1") != "1") return std::nullopt;
    const json& booster = learner.at("gradient_booster");
    if (booster.at("name").get<std::string>() != "gbtree") return std::nullopt;
    const json& m = booster.at("model");
    if (m.at("gbtree_model_param").value("num_parallel_tree", "1") != "1") return std::nullopt;
    const json& trees = m.at("trees");

    CompleteTrees out;
    out.base_ = std::stof(param.at("base_score").get<std::string>());
    out.features_ = static_cast<std::size_t>(std::stoul(param.at("num_feature").get<std::string>()));
    out.trees_ = trees.size();
    std::vector<SavedTree> saved;
    for (const json& t : trees) {
      for (const json& type : t.at("split_type"))
        if (type.get<int>() != 0) return std::nullopt;  // categorical
      saved.push_back({t.at("left_children"), t.at("right_children"), t.at("split_indices"), t.at("split_conditions"),
                       t.at("default_left")});
      out.depth_ = std::max(out.depth_, saved.back().depth(0, 0));
      if (out.depth_ > kMaxDepth) return std::nullopt;
    }
    const std::size_t inner = (std::size_t{1} << out.depth_) - 1, leaves = inner + 1;
    out.feature_.assign(out.trees_ * inner, 0);
    out.threshold_.assign(out.trees_ * inner, 0.0f);
    out.missing_left_.assign(out.trees_ * inner, 0);
    out.leaf_.assign(out.trees_ * leaves, 0.0f);
    for (std::size_t k = 0; k < saved.size(); ++k) {
      const SavedTree& t = saved[k];
      std::uint32_t* feature = &out.feature_[k * inner];
      std::uint8_t* missing_left = &out.missing_left_[k * inner];
      float* threshold = &out.threshold_[k * inner];
      float* leaf = &out.leaf_[k * leaves];
      // Node n of the saved tree at heap position h, `level` levels down.
      auto place = [&](auto& self, std::int64_t n, std::size_t h, int level) -> void {
        if (t.leaf(n)) {
          // Every leaf below h in the complete tree holds the value; the inner nodes between
          // keep feature 0 and threshold 0, whichever way they send a row.
          const std::size_t width = std::size_t{1} << (out.depth_ - level);
          const std::size_t first = ((h + 1) << (out.depth_ - level)) - 1 - inner;
          std::fill_n(leaf + first, width, t.condition[n].get<float>());
          return;
        }
        const auto f = t.feature[n].get<std::uint32_t>();
        if (f >= out.features_) throw std::out_of_range("split feature " + std::to_string(f));
        feature[h] = f;
        missing_left[h] = t.default_left[n].get<int>() != 0;
        threshold[h] = t.condition[n].get<float>();
        self(self, t.left[n].get<std::int64_t>(), 2 * h + 1, level + 1);
        self(self, t.right[n].get<std::int64_t>(), 2 * h + 2, level + 1);
      };
      place(place, 0, 0, 0);
    }
    return out;
  } catch (const std::exception&) {
    return std::nullopt;  // not a layout this reads: XGBoost scores it
  }
}

void CompleteTrees::predict(const float* rows, std::size_t n, float* out) const {
  constexpr int kRows = 16;
  const std::size_t inner = (std::size_t{1} << depth_) - 1, leaves = inner + 1;
  const float* x[kRows];
  float part[kRows];
  for (std::size_t b = 0; b < n; b += kRows) {
    const std::size_t m = std::min<std::size_t>(kRows, n - b);
    bool missing = false;
    for (std::size_t r = 0; r < kRows; ++r) {
      x[r] = rows + (b + std::min(r, m - 1)) * features_;  // a short block repeats its last row
      if (r < m)
        for (std::size_t f = 0; f < features_; ++f) missing |= std::isnan(x[r][f]);
    }
    if (!missing) {
      walk_block<kRows>(x, depth_, trees_, base_, feature_.data(), threshold_.data(), leaf_.data(), part);
      std::copy_n(part, m, out + b);
      continue;
    }
    // A NaN is a missing value: it goes its node's default way.
    for (std::size_t r = 0; r < m; ++r) {
      float acc = base_;
      for (std::size_t k = 0; k < trees_; ++k) {
        const std::size_t node = k * inner;
        std::size_t at = 0;
        for (int level = 0; level < depth_; ++level) {
          const float v = x[r][feature_[node + at]];
          const bool left = std::isnan(v) ? missing_left_[node + at] != 0 : v < threshold_[node + at];
          at = 2 * at + 2 - left;
        }
        acc += leaf_[k * leaves + at - inner];
      }
      out[b + r] = acc;
    }
  }
}

}  // namespace tiletune::costmodel
