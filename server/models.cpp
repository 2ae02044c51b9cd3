// Model jobs: POST /v1/models imports an ONNX model (its bytes and input shapes) into tasks and
// queues one job that tunes them under one trial budget with the task scheduler, in turns like
// every job; GET /v1/models/{id} returns its progress and the assessment from the records.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "costmodel/features.hpp"
#include "ir/parse.hpp"
#include "models/onnx_import.hpp"
#include "server/schemas.hpp"
#include "server/service_impl.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "tuner/task_scheduler.hpp"
#include "tuner/tune.hpp"
#include "vendor/vendor.hpp"

namespace tiletune::server {

using nlohmann::json;

namespace {

std::vector<tuner::WeightedTask> model_tasks(const json& request) {
  std::vector<tuner::WeightedTask> tasks;
  for (auto& t : request.at("tasks"))
    tasks.push_back(
        {ir::bind(ir::parse_op(t.at("op_text").get<std::string>()), ir::parse_sizes(t.at("sizes").get<std::string>())),
         t.at("weight").get<int>()});
  return tasks;
}

//! "x=1,3,224,224;mask=1,1,1,128" as input shapes.
std::map<std::string, models::Dims> input_shapes(const std::string& text) {
  std::map<std::string, models::Dims> inputs;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find(';', at);
    auto [name, dims] = models::parse_input_shape(text.substr(at, end == std::string::npos ? end : end - at));
    if (!inputs.emplace(name, dims).second) throw_error(ErrorKind::InvalidInput, "input " + name + " is given twice");
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return inputs;
}

}  // namespace

json Service::submit_model(const std::string& onnx_bytes, const json& request) {
  validate_body("ModelRequest", request);
  if (impl_->stopping) throw_error(ErrorKind::Unavailable, "the daemon is shutting down; retry against its successor");
  if (onnx_bytes.empty()) throw_error(ErrorKind::InvalidInput, "the body must be the ONNX model's bytes");
  // The whole model is read and mapped before anything is stored: a bad model starts no job.
  models::Imported m = models::import_onnx_bytes(onnx_bytes, request.value("name", std::string("the uploaded model")),
                                                 input_shapes(request.value("inputs", std::string())));
  if (m.tasks.empty()) throw_error(ErrorKind::InvalidInput, "the model has no node that maps to a task");
  bool remote = false;
  codegen::TargetInfo target = impl_->target_of(request, &remote);
  json tasks = json::array();
  for (auto& t : m.tasks) {
    ir::Workload w = ir::bind(ir::parse_op(t.op_text), ir::parse_sizes(t.sizes));
    tuner::check_memory(w, impl_->options.job_defaults.max_memory_share);
    impl_->store->put_workload(tuner::workload_row(w));
    tasks.push_back({{"op_text", t.op_text},
                     {"sizes", t.sizes},
                     {"weight", t.weight},
                     {"onnx_nodes", t.nodes},
                     {"vendor", t.vendor.empty() ? json() : json::parse(t.vendor)}});
  }
  json skipped = json::array();
  for (auto& s : m.skipped)
    skipped.push_back({{"node", s.node}, {"op_type", s.op_type}, {"reason", s.reason}, {"layout_only", s.layout_only}});
  const int trials = request.value("trials", 8 * static_cast<int>(m.tasks.size()));
  json normalized = {{"kind", "model"},
                     {"model", m.model},
                     {"backend", request.value("backend", target.backend)},
                     {"strategy", request.value("strategy", impl_->options.job_defaults.strategy)},
                     {"trials", trials},
                     {"round", request.value("round", 8)},
                     {"scheduler", request.value("scheduler", std::string("gradient"))},
                     {"tasks", tasks},
                     {"skipped", skipped}};
  db::JobRow row;
  row.id = new_id();
  const std::string tasks_key = hash_hex(tasks.dump());
  row.request_key =
      hash_hex("model|" + tasks_key + "|" + target.key + "|" + normalized["strategy"].dump() + "|" +
               normalized["trials"].dump() + "|" + normalized["round"].dump() + "|" + normalized["scheduler"].dump());
  row.request_json = normalized.dump();
  row.workload_key = "model:" + tasks_key;
  row.target_key = target.key;
  row.state = "queued";
  row.total = trials;
  impl_->store->put_target(tuner::target_row(target));
  db::JobRow stored = impl_->store->put_job(row);
  bool created = stored.id == row.id;
  if (created) impl_->wake.notify_all();
  return {{"job", impl_->job_json(stored)}, {"created", created}, {"tasks", m.tasks.size()}, {"skipped", skipped}};
}

json Service::model(const std::string& id) {
  auto j = impl_->store->job(id);
  json request = j ? json::parse(j->request_json, nullptr, false) : json();
  if (!j || !Impl::is_model_request(request)) throw_error(ErrorKind::NotFound, "no model job '" + id + "'");
  json out = impl_->job_json(*j);
  // The assessment from the records: per task its weight, FLOPs, bytes, trials, best latency
  // and share of the model's estimated latency (sum of weight x best).
  auto tasks = model_tasks(request);
  auto status = tuner::stored_status(tasks, *impl_->store, j->target_key);
  double total = tuner::estimated_latency(tasks, status);
  // The roofs and vendor times measured when the job finished (judge_model), if it has.
  auto stored = impl_->store->job_result(id);
  json judged = stored ? json::parse(*stored, nullptr, false) : json();
  json rows = json::array();
  for (size_t i = 0; i < tasks.size(); ++i) {
    rows.push_back(tuner::task_report(tasks[i], status[i], total));
    rows.back()["onnx_nodes"] = request["tasks"][i]["onnx_nodes"];
    const json* t = judged.is_object() && judged.contains("tasks") && judged["tasks"].is_array() &&
                            judged["tasks"].size() == tasks.size() && judged["tasks"][i].is_object()
                        ? &judged["tasks"][i]
                        : nullptr;
    if (t && t->contains("roof_s") && (*t)["roof_s"].is_number()) {
      rows.back()["roof"] = t->value("roof", std::string());
      // Against the best now, which later tuning (another job) may have improved.
      rows.back()["roof_fraction"] =
          std::isfinite(status[i].best_s) ? json((*t)["roof_s"].get<double>() / status[i].best_s) : json(nullptr);
      const json* v = t->contains("vendor") && (*t)["vendor"].is_object() ? &(*t)["vendor"] : nullptr;
      if (v && v->contains("seconds") && (*v)["seconds"].is_number()) {
        double seconds = (*v)["seconds"].get<double>();
        rows.back()["vendor"] = {{"name", v->value("name", std::string())}, {"seconds", seconds}};
        rows.back()["x_vendor"] = std::isfinite(status[i].best_s) ? json(seconds / status[i].best_s) : json(nullptr);
      }
    }
    if (auto memory = impl_->memory_of_best(tasks[i].workload, j->target_key); !memory.is_null())
      rows.back()["memory"] = memory;
  }
  if (judged.is_object() && judged.contains("fma_gflops") && judged.contains("measured_unix_ms"))
    out["roofs"] = {{"fma_gflops", judged["fma_gflops"]}, {"measured_unix_ms", judged["measured_unix_ms"]}};
  out["report"] = {{"model", request["model"]},
                   {"estimated_latency_s", std::isfinite(total) ? json(total) : json(nullptr)},
                   {"tasks", rows},
                   {"skipped", request["skipped"]}};
  return out;
}

json Service::Impl::memory_of_best(const ir::Workload& w, const std::string& target_key) {
  // The memory-access analysis of the layer's best kernel, from the cost model's features.
  db::RecordQuery q;
  q.workload_key = w.key;
  q.target_key = target_key;
  q.ok_only = true;
  q.fastest_first = true;
  q.limit = 1;
  auto best = store->records(q);
  auto trow = store->target(target_key);
  if (best.empty() || !trow) return nullptr;
  costmodel::Features f;
  try {
    f = costmodel::featurize(w, ir::Schedule::from_json(best[0].config_json), tuner::target_info(*trow).traits);
  } catch (const Error&) {
    return nullptr;  // a config this build no longer lowers
  }
  // Per loop nest, then over the nests: shares and intensities on average, bytes summed.
  const auto& docs = costmodel::feature_docs();
  auto index = [&](const std::string& name) {
    for (size_t k = 0; k < docs.size(); ++k)
      if (docs[k].first == name) return k;
    throw_error(ErrorKind::Internal, "no feature '" + name + "'");
  };
  auto mean = [&](const std::string& name) {
    double sum = 0;
    for (auto& row : f.stages) sum += row[index(name)];
    return f.stages.empty() ? 0.0 : sum / static_cast<double>(f.stages.size());
  };
  double touched = 0;
  for (auto& row : f.stages) touched += std::exp2(row[index("footprint_total_log")]);
  return {{"fit_l1", mean("fit_l1")},
          {"fit_l2", mean("fit_l2")},
          {"fit_l3", mean("fit_l3")},
          {"intensity_reg", mean("intensity_reg")},
          {"intensity_l2", mean("intensity_l2")},
          {"touched_bytes", touched}};
}

void Service::Impl::judge_model(const db::JobRow& row, const json& request,
                                const std::vector<tuner::WeightedTask>& tasks,
                                const std::vector<tuner::TaskStatus>& status, codegen::Backend& be) {
  // The finished model's layers against this machine's roofs and the vendor's layers, measured
  // once now that no measurement of this daemon runs (a remote target's are not this machine's).
  if (claim_lost || be.target().key != row.target_key) return;
  std::vector<vendor::Judged> judged;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const json& task = request.at("tasks").at(i);  // jobs stored before the vendor layer have none
    judged.push_back({tasks[i].workload.flops(), tasks[i].workload.io_bytes(), status[i].best_s,
                      task.contains("vendor") ? &task.at("vendor") : nullptr});
  }
  try {
    json judgement = vendor::judge_layers(judged, be.target().traits.threads, true);
    judgement["measured_unix_ms"] = db::now_unix_ms();
    store->put_job_result(row.id, judgement.dump());
  } catch (const std::exception& e) {
    spdlog::warn("event=model_judge_failed job={} error=\"{}\"", row.id, e.what());
  }
}

void Service::Impl::run_model_job(db::JobRow row, const json& request) {
  std::function<void()> judge;  // set when the job is done: measured after it is saved as done
  bool turn_over = false;
  std::atomic<bool> stop_now{false};
  try {
    auto tasks = model_tasks(request);
    codegen::Backend& be = backend(request.value("backend", std::string(codegen::kDefaultBackend)));
    tuner::TuneOptions o = options.job_defaults;
    o.strategy = request.value("strategy", o.strategy);
    o.models = store.get();
    o.cancel = &stop_now;  // a stop, a lost claim (a cancel releases it) or the end of the turn
    o.max_seconds = options.slice_seconds;
    tuner::TaskScheduleOptions so;
    so.trials = request.at("trials").get<int>();
    so.round = request.value("round", 8);
    so.policy = request.value("scheduler", std::string("gradient"));
    const auto turn_start = std::chrono::steady_clock::now();
    auto status = tuner::tune_tasks(tasks, be, *store, o, so, [&](const tuner::ModelProgress& p) {
      row.done = p.trials;
      if (std::isfinite(p.estimate_s)) row.best_s = p.estimate_s;
      save_job(row);
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - turn_start).count();
      if (elapsed >= options.slice_seconds && p.trials < so.trials) turn_over = true;
      if (stopping.load() || claim_lost.load() || turn_over) stop_now = true;
    });
    int used = 0;
    for (auto& s : status) used += s.trials;
    row.done = used;
    double estimate = tuner::estimated_latency(tasks, status);
    if (std::isfinite(estimate)) row.best_s = estimate;
    if (stopping.load()) {
      row.state = "queued";  // resumes where it stopped, here at the next start or on another daemon
    } else if (turn_over) {
      row.state = "queued";  // the next job's turn, then this one goes on
    } else {
      row.state = "done";
      if (!std::isfinite(estimate)) row.error = "a task has no kernel that passed the correctness check";
      judge = [this, row, &request, tasks, status, backend = &be] { judge_model(row, request, tasks, status, *backend); };
    }
  } catch (const std::exception& e) {
    row.state = stopping.load() ? "queued" : "failed";
    if (row.state == "failed") row.error = e.what();
    spdlog::warn("event=model_job_error job={} error=\"{}\"", row.id, e.what());
  }
  if (!claim_lost) save_job(row);  // a lost claim writes nothing
  if (judge && !stopping) judge();
}

bool Service::Impl::is_model_request(const json& request) {
  return request.is_object() && request.value("kind", std::string()) == "model";
}

}  // namespace tiletune::server
