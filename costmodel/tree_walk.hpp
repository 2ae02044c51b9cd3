// costmodel/tree_walk.hpp — a trained XGBoost ensemble laid out for fast scoring. Internal to
// costmodel/.
//
// XGBoost walks each tree node by node with a data-dependent branch per level; on the search's
// batches (10,000 candidates, 150+ trees of depth 6) those branches mispredict about half the
// time. Here every tree is padded to a complete tree of the ensemble's depth, so a row's walk is
// `depth` steps of index arithmetic with no branch on the data, and a block of rows walks each
// tree together (their steps overlap). Scores are XGBoost's own, bit for bit: the same float
// comparisons, leaves summed in the same order from the same base score.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tiletune::costmodel {

class CompleteTrees {
 public:
  //! The ensemble of a model XGBoost saved as UBJSON (`XGBoosterSaveModelToBuffer`, "ubj"), or
  //! nullopt when it is not a plain numerical gbtree of depth at most kMaxDepth (categorical
  //! splits, several outputs, dart, gblinear): XGBoost then scores it itself.
  static std::optional<CompleteTrees> from_ubjson(const std::string& model);

  //! Scores of `n` rows of `features` floats each, row-major, into out[0, n).
  void predict(const float* rows, std::size_t n, float* out) const;

  int depth() const { return depth_; }
  std::size_t trees() const { return trees_; }
  std::size_t features() const { return features_; }

  static constexpr int kMaxDepth = 10;

 private:
  int depth_ = 0;
  std::size_t trees_ = 0;
  std::size_t features_ = 0;
  float base_ = 0;
  // Per tree, (2^depth - 1) inner nodes in heap order (children of i at 2i+1, 2i+2) and 2^depth
  // leaves. A leaf above the last level becomes inner nodes whose leaves all hold its value.
  std::vector<std::uint32_t> feature_;     //!< split feature
  std::vector<float> threshold_;           //!< a value below it goes left
  std::vector<std::uint8_t> missing_left_;  //!< 1: a missing (NaN) value goes left
  std::vector<float> leaf_;
};

}  // namespace tiletune::costmodel
