// costmodel/kinds.hpp: the model implementations, for model.cpp's factory (and the tests that
// check what the implementations promise).
#pragma once
#include <memory>

#include "costmodel/model.hpp"
#include "support/error.hpp"

namespace tiletune::costmodel {

std::unique_ptr<CostModel> make_xgb_model(std::uint64_t seed);
//! How a model of make_xgb_model's pools a candidate's rows: its trees' (kept through save and
//! load); a new comparator of xgb-pairs pools as its ranker does, in one row (the dominant nest's
//! where the ranker scores each nest apart). Error(Internal) for another kind.
Pooling xgb_pooling(const CostModel& xgb);
//! The pooling an XGBoost booster's attribute names, kept in its payload; `absent` where it has
//! none (a booster saved before the attribute). Error(InvalidInput) naming an unknown one.
Pooling read_pooling_attr(void* booster, Pooling absent);
void write_pooling_attr(void* booster, Pooling how);
std::unique_ptr<CostModel> make_nn_model(std::uint64_t seed);
//! "xgb-pairs" (costmodel/pair_model.cpp): an xgb ranker and a comparator of two candidates;
//! `ranker` (a trained xgb) if given, else a fresh one.
std::unique_ptr<CostModel> make_pair_model(std::uint64_t seed, std::unique_ptr<CostModel> ranker = nullptr);

//! XGBoost's scores of `rows` row-major rows of `width` features into `out`, by in-place
//! prediction with every tree (thread-safe, on the calling thread); "" or why not.
std::string xgb_predict_dense(void* booster, const float* data, std::size_t rows, std::size_t width, float* out);

//! Error(kind) naming `what` and XGBoost's last error unless `rc` (an XGBoost C API result) is 0.
void check_xgboost(int rc, ErrorKind kind, const std::string& what);

//! Rounds the xgb model adds to a pretrained one per fine-tuning: kXgbFineTuneRounds for each
//! kXgbFineTuneStep samples it is fine-tuned on (rounded up), at most a fresh model's rounds.
//! Few on a search's first handful of records, which more rounds fit at the base's expense
//! (model eval --transfer on corpus v2, 8 records measured: held-out ops 0.839 and sizes 0.862
//! with 40 rounds, 0.849 and 0.876 with 10); more as its records grow, so that they can overrule
//! the base where it is wrong (24 measured: 0.871 and 0.889 with 10 rounds, 0.874 and 0.896 with
//! 30). A search's prior records count too: with thousands, it fine-tunes as long as it would train.
inline constexpr int kXgbFineTuneRounds = 10;
inline constexpr std::size_t kXgbFineTuneStep = 8;
int xgb_fine_tune_rounds(std::size_t samples);

//! Samples in group order with their labels (costmodel/ranking.hpp relative_speed): what both
//! models train on.
struct Grouped {
  std::vector<const Sample*> samples;
  std::vector<float> labels;
  std::vector<unsigned> group_sizes;
};
Grouped group_samples(const std::vector<Sample>& samples);

//! Error(InvalidInput) unless a loaded payload's `width` is the feature count of a version this
//! build reads (feature_count(version)); `model` names it in the message.
void check_payload_width(std::size_t width, const std::string& model);

}  // namespace tiletune::costmodel
