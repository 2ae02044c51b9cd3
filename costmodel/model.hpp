// costmodel/model.hpp
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/features.hpp"

namespace tiletune::costmodel {

//! One measured candidate: its features, the workload it belongs to (rankings only compare
//! candidates of one workload) and its median latency (+infinity for a failure).
struct Sample {
  Features x;
  std::string group;
  double latency_s = 0;
};

//! A learned ranker of candidates. Scores are comparable within one workload only: higher
//! means faster. Implementations: "xgb" (gradient-boosted trees, XGBoost) and "nn" (an MLP
//! over per-nest rows, sum-pooled, LibTorch) and "xgb-pairs" (xgb, its first picks ordered again
//! by a comparator of two candidates). Library errors become tiletune::Error.
class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string kind() const = 0;
  //! Trains from scratch. Groups with fewer than two successful samples teach nothing.
  virtual void fit(const std::vector<Sample>& samples) = 0;
  virtual bool trained() const = 0;
  //! Features it reads of each row: feature_count(), or the prefix of an earlier version's
  //! (feature_count(version)) for a model trained on that version.
  virtual std::size_t width() const = 0;
  //! Continues training the current model (a pretrained base) on the samples, keeping what it
  //! learned: trees added on top (xgb), a few passes at a lower rate (nn). The transfer of
  //! TenSet and TLP. Error(Internal) if not trained.
  virtual void fine_tune(const std::vector<Sample>& samples) = 0;
  //! One score per candidate; Error(Internal) if not trained.
  virtual std::vector<float> predict(const std::vector<Features>& x) const = 0;
  //! Scores of candidates of one workload, which a model may compare with each other (xgb-pairs
  //! orders predict's first picks again by comparing them in pairs); predict's by default.
  virtual std::vector<float> rank(const std::vector<Features>& x) const { return predict(x); }
  //! The model's own bytes (no metadata: see save_model).
  virtual std::string payload() const = 0;
  virtual void load_payload(const std::string& bytes) = 0;
};

//! A kind of model_kinds(); anything else is Error(InvalidInput) naming the known kinds.
std::unique_ptr<CostModel> make_model(const std::string& kind, std::uint64_t seed = 1);
//! The kind whose trained model a model of `kind` can start from ("xgb" for "xgb-pairs", whose
//! ranker it is); "" for a kind that builds on none.
std::string built_on_kind(const std::string& kind);
//! A model of `kind` that starts from `base`, a trained model of built_on_kind(kind): an
//! xgb-pairs whose ranker is `base` and whose comparator comes with the first pairs it is
//! fine-tuned on. Error(InvalidInput) if `kind` builds on no kind, or `base` is missing,
//! untrained or of another kind.
std::unique_ptr<CostModel> make_model_on(const std::string& kind, std::unique_ptr<CostModel> base,
                                         std::uint64_t seed = 1);
std::vector<std::string> model_kinds();
//! The kinds `model train` and `model eval` use when none is named: those shipped for machine
//! kinds (xgb-pairs is asked for by name: none of its own is shipped, and it trains longest).
std::vector<std::string> default_model_kinds();

//! What a saved model was trained with. save_model writes the feature version of the model's own
//! width, whatever feature_version says; load_model reports it.
struct ModelMeta {
  std::string kind;
  std::string target_key;
  int feature_version = kFeatureVersion;
  std::int64_t records = 0;
  std::string metrics_json = "{}";
  //! The pretrained model it was fine-tuned from ("xgb-cpu-simd16.model"), "" if trained from
  //! nothing: a search fine-tunes such a model further, as it would its base, instead of
  //! retraining it from nothing (tuner::SearchContext).
  std::string base;
};

//! A self-describing blob: a JSON header line (the metadata, a format tag) and the payload.
std::string save_model(const CostModel& model, const ModelMeta& meta);
//! Error(InvalidInput) with the reason for a corrupt blob, a feature version whose features are
//! not a prefix of this build's (feature_count(version) is 0), or a payload the model library
//! rejects.
std::unique_ptr<CostModel> load_model(const std::string& blob, ModelMeta* meta = nullptr);

//! A model kept current as measurements arrive: it retrains on everything it has seen (the
//! prior samples of other workloads, for transfer, plus the new ones) only once enough new
//! samples have come since the last training.
class OnlineModel {
 public:
  //! A model that is already trained counts as trained on `prior`.
  OnlineModel(std::unique_ptr<CostModel> model, std::vector<Sample> prior);
  struct FromBase {};
  //! `base` is a pretrained model (one shipped for the machine kind): every update starts again
  //! from it and fine-tunes it on everything seen (`prior`, then the new samples), so that what
  //! it learned from the corpus stays while the target's own records correct it.
  OnlineModel(FromBase, std::unique_ptr<CostModel> base, std::vector<Sample> prior);
  void add(std::vector<Sample> samples);
  //! Retrains when the new samples reach max(min_new, a tenth of the non-prior samples it was
  //! trained on): a large prior must not keep the model from learning the workload at hand.
  //! Returns whether it did.
  bool update(int min_new = 8);
  bool trained() const { return model_->trained(); }
  std::vector<float> predict(const std::vector<Features>& x) const { return model_->predict(x); }
  std::vector<float> rank(const std::vector<Features>& x) const { return model_->rank(x); }
  const CostModel& model() const { return *model_; }

 private:
  std::unique_ptr<CostModel> model_;
  std::vector<Sample> samples_;
  std::size_t trained_on_ = 0;
  std::size_t prior_ = 0;
  std::optional<std::string> base_;  //!< the pretrained base's payload
};

}  // namespace tiletune::costmodel
