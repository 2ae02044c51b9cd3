// The dashboard's view of a target's cost model (dashboard.hpp: model_view): its retrains'
// metrics, and its scores against one workload's measured records.
#include <algorithm>
#include <optional>

#include "costmodel/features.hpp"
#include "costmodel/model.hpp"
#include "costmodel/ranking.hpp"
#include "server/dashboard.hpp"
#include "server/dashboard_detail.hpp"
#include "support/error.hpp"
#include "tuner/dataset.hpp"
#include "tuner/tune.hpp"

namespace tiletune::server::dashboard {

using nlohmann::json;

json model_view(db::Store& store, const std::string& target, const std::string& kind, const std::string& workload,
                int max_points) {
  auto trow = store.target(target);
  if (!trow) throw_error(ErrorKind::NotFound, "no target '" + target + "' (GET /v1/targets lists them)");
  json history = json::array();
  std::string chosen = kind;
  for (auto& m : store.model_history(target)) {
    json metrics = json::parse(m.metrics_json, nullptr, false);
    history.push_back({{"kind", m.kind},
                       {"records", m.records},
                       {"feature_version", m.feature_version},
                       {"created_unix_ms", m.created_unix_ms},
                       {"metrics", metrics.is_discarded() ? json() : metrics}});
    if (kind.empty()) chosen = m.kind;  // the last trained
  }
  json out = {{"target", target_json(*trow)}, {"kind", chosen}, {"history", history}, {"model", nullptr}};
  auto row = chosen.empty() ? std::nullopt : store.model(chosen, target);
  if (!row) return out;
  out["model"] = {{"records", row->records}, {"created_unix_ms", row->created_unix_ms}};
  std::unique_ptr<costmodel::CostModel> model;
  try {
    model = costmodel::load_model(row->blob);
  } catch (const Error& e) {
    out["model"]["unusable"] = e.what();
    return out;
  }

  // The workload to compare on: the one asked for, else the target's with most records.
  std::optional<db::WorkloadRow> wrow;
  if (!workload.empty()) {
    wrow = store.workload(workload);
    if (!wrow) throw_error(ErrorKind::NotFound, "no workload '" + workload + "' (GET /v1/dashboard lists them)");
  } else {
    std::int64_t most = 0;
    for (auto& w : store.workloads()) {
      db::RecordQuery q;
      q.workload_key = w.key;
      q.target_key = target;
      q.ok_only = true;
      std::int64_t n = store.count(q);
      if (n > most) most = n, wrow = w;
    }
  }
  if (!wrow) return out;
  ir::Workload w = tuner::workload_from_row(*wrow);
  const ir::TargetTraits traits = tuner::target_info(*trow).traits;
  db::RecordQuery q;
  q.workload_key = wrow->key;
  q.target_key = target;
  q.ok_only = true;
  const std::int64_t total = store.count(q);
  const std::int64_t stride = std::max<std::int64_t>(1, (total + max_points - 1) / std::max(max_points, 1));
  std::vector<ir::Schedule> schedules;
  std::vector<double> sampled_latency;
  q.limit = kPage;
  std::int64_t read = 0;
  for (;;) {
    auto page = store.records(q);
    for (auto& r : page) {
      if (read++ % stride != 0) continue;
      try {
        schedules.push_back(ir::Schedule::from_json(r.config_json));
        sampled_latency.push_back(r.median_s());
      } catch (const Error&) {
        // A config this build no longer reads (an older knob set): not comparable, left out.
      }
    }
    if (static_cast<int>(page.size()) < q.limit) break;
    q.after_id = page.back().id;
  }
  // Featurized on all cores; a schedule this build no longer lowers is left out too.
  std::vector<costmodel::Features> features;
  std::vector<double> latency;
  auto featurized = costmodel::featurize_all(w, schedules, traits);
  for (size_t i = 0; i < featurized.size(); ++i)
    if (featurized[i]) {
      features.push_back(std::move(*featurized[i]));
      latency.push_back(sampled_latency[i]);
    }
  std::vector<float> score = features.empty() ? std::vector<float>{} : model->rank(features);  // one workload's candidates
  const double flops = w.flops();
  json points = {{"score", json::array()}, {"gflops", json::array()}};
  for (size_t i = 0; i < score.size(); ++i) {
    points["score"].push_back(score[i]);
    points["gflops"].push_back(gflops(flops, latency[i]));
  }
  auto metrics = costmodel::evaluate_ranking(std::vector<std::string>(score.size(), w.key), latency, score);
  out["workload"] = {{"key", wrow->key}, {"op_name", wrow->op_name}, {"sizes", json::parse(wrow->sizes_json, nullptr, false)}};
  out["points"] = points;
  out["ranking"] = {{"pairwise_accuracy", metrics.pairwise_accuracy},
                    {"spearman", metrics.spearman},
                    {"top1", metrics.top1},
                    {"samples", metrics.samples}};
  return out;
}

}  // namespace tiletune::server::dashboard
