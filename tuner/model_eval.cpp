#include "tuner/model_eval.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "support/error.hpp"

namespace tiletune::tuner {

namespace {

//! One fold: which workloads are tested; the rest (or, for ops, the other ops) train.
struct Fold {
  std::set<std::string> test;
  std::set<std::string> train;
};

std::vector<Fold> folds_for(const Dataset& data, const std::string& split) {
  std::map<std::string, std::vector<std::string>> by_op;
  for (auto& [key, row] : data.workloads) by_op[row.op_name].push_back(key);
  std::vector<Fold> out;
  for (auto& [op, keys] : by_op) {
    if (split == "held-out sizes") {
      if (keys.size() < 2) continue;
      for (auto& k : keys) {
        Fold f{{k}, {}};
        for (auto& [other, row] : data.workloads)
          if (other != k) f.train.insert(other);
        out.push_back(f);
      }
    } else {
      Fold f{{keys.begin(), keys.end()}, {}};
      for (auto& [other, row] : data.workloads)
        if (row.op_name != op) f.train.insert(other);
      if (!f.train.empty()) out.push_back(f);
    }
  }
  return out;
}

costmodel::RankingMetrics test_on(const std::vector<const costmodel::Sample*>& test, const std::vector<float>& score) {
  std::vector<std::string> group;
  std::vector<double> latency;
  for (auto* s : test) {
    group.push_back(s->group);
    latency.push_back(s->latency_s);
  }
  return costmodel::evaluate_ranking(group, latency, score);
}

std::vector<float> random_scores(std::size_t n, std::mt19937_64& rng) {
  std::vector<float> s(n);
  std::uniform_real_distribution<float> u(0, 1);
  for (auto& x : s) x = u(rng);
  return s;
}

}  // namespace

std::vector<EvalRow> evaluate_models(const Dataset& data, const std::vector<std::string>& kinds, std::uint64_t seed) {
  std::vector<EvalRow> out;
  for (const std::string split : {"held-out sizes", "held-out ops"}) {
    auto folds = folds_for(data, split);
    std::map<std::string, std::vector<costmodel::RankingMetrics>> parts;
    for (auto& fold : folds) {
      std::vector<costmodel::Sample> train;
      std::vector<const costmodel::Sample*> test;
      std::vector<costmodel::Features> test_x;
      for (auto& s : data.samples) {
        if (fold.train.count(s.group)) train.push_back(s);
        if (fold.test.count(s.group)) {
          test.push_back(&s);
          test_x.push_back(s.x);
        }
      }
      if (train.empty() || test.empty()) continue;
      for (auto& kind : kinds) {
        auto model = costmodel::make_model(kind, seed);
        model->fit(train);
        parts[kind].push_back(test_on(test, model->predict(test_x)));
      }
      // A random ranker, averaged over draws so that its figure is its expectation.
      std::mt19937_64 rng(seed);
      std::vector<costmodel::RankingMetrics> draws;
      for (int draw = 0; draw < 20; ++draw) draws.push_back(test_on(test, random_scores(test.size(), rng)));
      auto r = costmodel::combine(draws);
      r.groups /= 20;
      r.samples /= 20;
      parts["random"].push_back(r);
    }
    std::vector<std::string> names = kinds;
    names.push_back("random");
    for (auto& name : names)
      out.push_back({name, split, static_cast<int>(folds.size()), costmodel::combine(parts[name])});
  }
  return out;
}

db::ModelRow train_model(const Dataset& data, const std::string& kind, const std::string& target_key,
                         std::uint64_t seed) {
  if (data.samples.size() < 2)
    throw_error(ErrorKind::InvalidInput, "too few records to train a " + kind + " model on (" +
                                             std::to_string(data.samples.size()) + "): tune some ops first");
  nlohmann::json metrics = nlohmann::json::object();
  for (auto& row : evaluate_models(data, {kind}, seed))
    if (row.model == kind && row.folds > 0)
      metrics[row.split] = {{"folds", row.folds},
                            {"pairwise_accuracy", row.metrics.pairwise_accuracy},
                            {"spearman", row.metrics.spearman},
                            {"top1", row.metrics.top1},
                            {"top5", row.metrics.top5}};
  auto model = costmodel::make_model(kind, seed);
  model->fit(data.samples);
  costmodel::ModelMeta meta{kind, target_key, costmodel::kFeatureVersion,
                            static_cast<std::int64_t>(data.samples.size()), metrics.dump()};
  return {kind,
          target_key,
          costmodel::kFeatureVersion,
          meta.records,
          meta.metrics_json,
          costmodel::save_model(*model, meta),
          0};
}

}  // namespace tiletune::tuner
