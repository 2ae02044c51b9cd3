#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "costmodel/model.hpp"
#include "tuner/model_eval.hpp"

using namespace tiletune;

namespace {

//! `ops` ops of `sizes` workloads each, `per_workload` candidates a workload, whose latency is
//! one function of a few features for every op (what a model learns from other ops carries
//! over), scaled per workload.
tuner::Dataset shared_structure(int ops, int sizes, int per_workload, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 4);
  tuner::Dataset data;
  for (int op = 0; op < ops; ++op)
    for (int size = 0; size < sizes; ++size) {
      const std::string key = "op" + std::to_string(op) + "_" + std::to_string(size);
      data.workloads[key] = {key, "op" + std::to_string(op), "", "{}", ""};
      for (int i = 0; i < per_workload; ++i) {
        costmodel::FeatureRow row(costmodel::feature_count());
        for (auto& x : row) x = u(rng);
        const double cost = 2.0 * row[3] + std::max(0.0f, row[7] - 2.0f) - 0.5 * row[11];
        data.samples.push_back({{{row}}, key, std::exp(0.3 * cost) * (1 + op + size) * 1e-3});
      }
    }
  return data;
}

const tuner::EvalRow* find(const std::vector<tuner::EvalRow>& rows, const std::string& split,
                           const std::string& model) {
  for (auto& r : rows)
    if (r.split == split && r.model == model) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("model eval's transfer test: a held-out workload's other records ranked once k are measured") {
  const tuner::Dataset data = shared_structure(5, 2, 20, 7);
  auto rows = tuner::evaluate_models(data, {"xgb"}, 1, {{4, 10, 19}, {}, {}});
  const std::string split = "held-out ops, 4 measured";
  const auto *pretrained = find(rows, split, "xgb pretrained"), *tuned = find(rows, split, "xgb fine-tuned"),
             *cold = find(rows, split, "xgb cold");
  REQUIRE(pretrained);
  REQUIRE(tuned);
  REQUIRE(cold);
  for (auto* r : {pretrained, tuned, cold}) {
    CHECK(r->folds == 5);
    CHECK(r->metrics.groups == 10);        // every workload, once however many draws
    CHECK(r->metrics.samples == 10 * 16);  // the records not measured
  }
  // The other ops taught the structure: 4 records alone cannot.
  CHECK(pretrained->metrics.pairwise_accuracy > 0.8);
  CHECK(tuned->metrics.pairwise_accuracy > 0.8);
  CHECK(pretrained->metrics.pairwise_accuracy > cold->metrics.pairwise_accuracy + 0.05);
  // So its first 8 trials (4 measured, then its 4 picks of the 16 left) find the faster kernel
  // more often than a cold start's; the cold start is not compared with itself.
  for (auto* r : {pretrained, tuned}) {
    REQUIRE(std::isfinite(r->faster_than_cold));
    CHECK(r->faster_than_cold + r->slower_than_cold <= 1.0);
    CHECK(r->faster_than_cold > r->slower_than_cold);
  }
  CHECK(std::isnan(cold->faster_than_cold));
  // 10 of 20 measured leave 10: picking 10 of them is no choice, so no comparison.
  auto* half = find(rows, "held-out ops, 10 measured", "xgb pretrained");
  REQUIRE(half);
  CHECK(half->metrics.samples == 10 * 10);
  CHECK(std::isnan(half->faster_than_cold));
  // The same for each size held out while the op's other sizes train.
  for (const char* model : {"xgb pretrained", "xgb fine-tuned", "xgb cold"}) {
    auto* r = find(rows, "held-out sizes, 4 measured", model);
    REQUIRE_MESSAGE(r, model);
    CHECK(r->metrics.groups == 10);
  }
  // 19 of 20 measured leave one record: nothing to rank, no row.
  CHECK(!find(rows, "held-out ops, 19 measured", "xgb cold"));
  // Without `transfer`, the splits are as before.
  for (auto& r : tuner::evaluate_models(data, {"xgb"}, 1)) CHECK(r.split.find("measured") == std::string::npos);

  // A model trained elsewhere is the pretrained one: its rows are named after it.
  auto model = costmodel::make_model("xgb", 1);
  model->fit(shared_structure(3, 1, 40, 8).samples);
  auto as_trained = tuner::evaluate_trained(data, *model, "base.model (xgb)", {4});
  REQUIRE(as_trained.size() == 4);
  CHECK(as_trained[0].split == "as trained");
  for (const char* name : {"base.model (xgb) pretrained", "base.model (xgb) fine-tuned", "base.model (xgb) cold"}) {
    auto* r = find(as_trained, "as trained, 4 measured", name);
    REQUIRE_MESSAGE(r, name);
    CHECK(r->metrics.groups == 10);
  }
}

TEST_CASE("model eval's learning curve: held-out ops ranked by models trained on a share of the other ops") {
  // Each op's candidates lie in a band along one feature, three ops wide, and latency is a wave
  // along it: a held-out op's band is learnt from the neighbours' that overlap it, and fewer
  // ops leave more of it uncovered. Two sizes an op, so that held-out sizes has folds too.
  constexpr int kOps = 20, kSizes = 2, kPerWorkload = 12;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(0, 1);
  tuner::Dataset data;
  for (int op = 0; op < kOps; ++op)
    for (int size = 0; size < kSizes; ++size) {
      const std::string name = "op" + std::to_string(op), key = name + "_" + std::to_string(size);
      data.workloads[key] = {key, name, "", "{}", ""};
      for (int i = 0; i < kPerWorkload; ++i) {
        costmodel::FeatureRow row(costmodel::feature_count());
        row[3] = (op + 3 * u(rng)) / kOps;
        data.samples.push_back({{{row}}, key, (2 + std::sin(6.28 * 2 * row[3])) * (1 + size) * 1e-3});
      }
    }
  const auto rows = tuner::evaluate_models(data, {"xgb"}, 1, {{}, {0.25, 0.5, 0.5}, {}});
  const auto *all = find(rows, "held-out ops", "xgb"), *half = find(rows, "held-out ops, 50 % of the other ops", "xgb"),
             *quarter = find(rows, "held-out ops, 25 % of the other ops", "xgb");
  REQUIRE(all);
  REQUIRE(half);
  REQUIRE(quarter);
  for (auto* r : {half, quarter}) {
    CHECK(r->folds == all->folds);
    CHECK(r->metrics.groups == kOps * kSizes);  // the same held-out workloads, once however many draws
    CHECK(r->metrics.samples == kOps * kSizes * kPerWorkload);
  }
  CHECK(all->metrics.pairwise_accuracy > half->metrics.pairwise_accuracy + 0.03);
  CHECK(half->metrics.pairwise_accuracy > quarter->metrics.pairwise_accuracy + 0.03);
  // One row a share (0.5 given twice is one), and none for held-out sizes, which train on the
  // op's other sizes.
  int curve_rows = 0;
  for (auto& r : rows) curve_rows += r.split.find("% of the other ops") != std::string::npos;
  CHECK(curve_rows == 2);
  CHECK(find(rows, "held-out sizes", "xgb"));
  // A share is of the ops: none, or all of them, is no curve.
  for (double share : {0.0, 1.0, -0.5, 1.5})
    CHECK_THROWS_WITH(tuner::evaluate_models(data, {"xgb"}, 1, {{}, {share}, {}}),
                      doctest::Contains("above 0 and below 1"));
}

TEST_CASE("model eval and train from a base: a few records fine-tune a model that learnt the structure elsewhere") {
  // The base learnt the structure from many ops; this machine has three ops of two sizes, eight
  // records a workload: too few to learn it from nothing.
  auto base = costmodel::make_model("xgb", 1);
  base->fit(shared_structure(8, 2, 24, 21).samples);
  const tuner::Dataset few = shared_structure(3, 2, 8, 11);
  tuner::EvalOptions options;
  options.bases["xgb"] = {"base.model", base.get()};
  const auto rows = tuner::evaluate_models(few, {"xgb"}, 1, options);
  const auto fresh_rows = tuner::evaluate_models(few, {"xgb"}, 1);
  for (const char* split : {"held-out ops", "held-out sizes"}) {
    const auto *from_base = find(rows, split, "xgb from base.model"), *fresh = find(fresh_rows, split, "xgb");
    REQUIRE_MESSAGE(from_base, split);
    REQUIRE_MESSAGE(fresh, split);
    CHECK(!find(rows, split, "xgb"));  // the kind's row is named after its base
    CHECK(from_base->folds == fresh->folds);
    CHECK(from_base->metrics.groups == fresh->metrics.groups);
    CHECK_MESSAGE(from_base->metrics.pairwise_accuracy > fresh->metrics.pairwise_accuracy + 0.05, split);
  }
  // A base of another kind, or untrained, is refused before any training.
  options.bases.clear();
  options.bases["nn"] = {"base.model", base.get()};
  CHECK_THROWS_WITH(tuner::evaluate_models(few, {"nn"}, 1, options),
                    doctest::Contains("a nn model starts from a trained nn model, not xgb"));
  auto untrained = costmodel::make_model("xgb", 1);
  options.bases.clear();
  options.bases["xgb"] = {"empty.model", untrained.get()};
  CHECK_THROWS_WITH(tuner::evaluate_models(few, {"xgb"}, 1, options), doctest::Contains("starts from a trained"));

  // Trained from the base: its header names the base, its metrics are those of the folds
  // fine-tuned from it, and it ranks as the base fine-tuned on every record does.
  const tuner::Base named{"base.model", base.get()};
  const db::ModelRow row = tuner::train_model(few, "xgb", "t1", 1, &named);
  costmodel::ModelMeta meta;
  auto saved = costmodel::load_model(row.blob, &meta);
  CHECK(meta.base == "base.model");
  const auto metrics = nlohmann::json::parse(row.metrics_json);
  REQUIRE(metrics.contains("held-out sizes"));
  CHECK(metrics["held-out sizes"]["pairwise_accuracy"].get<double>() ==
        doctest::Approx(find(rows, "held-out sizes", "xgb from base.model")->metrics.pairwise_accuracy));
  auto expected = costmodel::make_model("xgb", 1);
  expected->load_payload(base->payload());
  expected->fine_tune(few.samples);
  std::vector<costmodel::Features> x;
  for (auto& s : few.samples) x.push_back(s.x);
  CHECK(saved->predict(x) == expected->predict(x));
  // Trained from nothing, it names no base.
  costmodel::ModelMeta plain;
  costmodel::load_model(tuner::train_model(few, "xgb", "t1", 1).blob, &plain);
  CHECK(plain.base.empty());
}
