// tuner/model_eval.hpp
#pragma once
#include <map>
#include <string>
#include <vector>

#include "costmodel/ranking.hpp"
#include "tuner/dataset.hpp"

namespace tiletune::tuner {

//! Held-out evaluation of one ranker on one kind of split.
struct EvalRow {
  std::string model;  //!< "xgb", "nn", "random"
  std::string split;  //!< "held-out sizes" | "held-out ops"
  int folds = 0;
  costmodel::RankingMetrics metrics;  //!< averaged over the test workloads of every fold
  //! The same per op of the test workloads (not for the random ranker): which ops it ranks worst.
  std::map<std::string, costmodel::RankingMetrics> by_op;
};

//! Evaluates each model kind, and a random ranker, on two splits of the dataset's workloads,
//! five folds each: "held-out sizes" tests workloads of ops that have several sizes with a
//! model trained on every other workload (other sizes of the same op included); "held-out ops"
//! tests every workload of a fold's ops with a model trained on the other ops only.
std::vector<EvalRow> evaluate_models(const Dataset& data, const std::vector<std::string>& kinds, std::uint64_t seed);

//! Ranks every workload of the dataset with an already trained model (the shipped one, on ops
//! it never saw): split "as trained".
EvalRow evaluate_trained(const Dataset& data, const costmodel::CostModel& model, const std::string& name);

//! Trains a model of the kind on every sample of the dataset and returns it saved, with
//! held-out metrics (held-out sizes) in its metadata. Error(InvalidInput) with too little data.
db::ModelRow train_model(const Dataset& data, const std::string& kind, const std::string& target_key,
                         std::uint64_t seed);

}  // namespace tiletune::tuner
