// tuner/model_eval.hpp
#pragma once
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "costmodel/model.hpp"
#include "costmodel/ranking.hpp"
#include "tuner/dataset.hpp"

namespace tiletune::tuner {

//! Held-out evaluation of one ranker on one kind of split.
struct EvalRow {
  std::string model;  //!< a cost model kind, or "random"
  std::string split;  //!< "held-out sizes" | "held-out ops"
  int folds = 0;
  costmodel::RankingMetrics metrics;  //!< averaged over the test workloads of every fold
  //! The same per op of the test workloads (not for the random ranker): which ops it ranks worst.
  std::map<std::string, costmodel::RankingMetrics> by_op;
  //! Rows of the transfer test (split "…, K measured") but a cold start's: the share of the
  //! workloads' draws where a search's first 2K trials (the K measured, then this model's K
  //! best-ranked of the others) find a faster / a slower best than a cold start's, among draws
  //! that left more than K records to pick from; NAN elsewhere.
  double faster_than_cold = NAN, slower_than_cold = NAN;
};

//! A pretrained model that training starts from instead of from nothing: fine-tuned on the
//! training records (CostModel::fine_tune), as a search fine-tunes the shipped model.
struct Base {
  std::string name;                          //!< what it is, for row names and a model's header
  const costmodel::CostModel* model = nullptr;  //!< trained; of the kind it is given for
};

//! What evaluate_models does besides the two splits.
struct EvalOptions {
  std::vector<int> transfer;      //!< record counts K of the transfer test
  std::vector<double> op_shares;  //!< shares of the other ops of the learning curve
  //! By kind: each fold fine-tunes this model on its training records instead of training a fresh
  //! one (row "KIND from NAME"): whether a machine's own records serve better on top of a
  //! shipped model than alone.
  std::map<std::string, Base> bases;
};

//! Evaluates each model kind, and a random ranker, on two splits of the dataset's workloads,
//! five folds each: "held-out sizes" tests workloads of ops that have several sizes with a
//! model trained on every other workload (other sizes of the same op included); "held-out ops"
//! tests every workload of a fold's ops with a model trained on the other ops only.
//! With `options.transfer` (record counts K), each test workload is also tested as a search meets it:
//! once K of its records are measured (drawn at random), its other records are ranked by the
//! fold's model as it is ("KIND pretrained"), by that model fine-tuned on the K as a search
//! fine-tunes the shipped model ("KIND fine-tuned"), and by a model trained on the K alone, a
//! cold start's ("KIND cold"): splits "held-out sizes, K measured" and "held-out ops, K measured".
//! With `options.op_shares` (each above 0 and below 1; Error(InvalidInput) otherwise), the learning
//! curve over ops: each fold's held-out ops are also ranked by models trained on that share of
//! the other ops (three draws of which, by a hash of the op's name), split "held-out ops, 50 %
//! of the other ops": whether a corpus of more ops would rank ops it has not seen better.
std::vector<EvalRow> evaluate_models(const Dataset& data, const std::vector<std::string>& kinds, std::uint64_t seed,
                                     const EvalOptions& options = {});

//! Ranks every workload of the dataset with an already trained model (the shipped one, on ops
//! it never saw): split "as trained"; with `transfer`, also as evaluate_models does, with this
//! model as the pretrained one ("as trained, K measured").
std::vector<EvalRow> evaluate_trained(const Dataset& data, const costmodel::CostModel& model, const std::string& name,
                                      const std::vector<int>& transfer = {}, std::uint64_t seed = 1);

//! Trains a model of the kind on every sample of the dataset and returns it saved, with
//! held-out metrics (held-out sizes) in its metadata. With `base` (a trained model of the kind),
//! the model is that one fine-tuned on the samples, and says so in its header
//! (costmodel::ModelMeta::base), the metrics those of folds fine-tuned alike.
//! Error(InvalidInput) with too little data.
db::ModelRow train_model(const Dataset& data, const std::string& kind, const std::string& target_key,
                         std::uint64_t seed, const Base* base = nullptr);

}  // namespace tiletune::tuner
