#include "server/service.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <algorithm>
#include <thread>

#include "codegen/backend.hpp"
#include "db/store.hpp"
#include "ir/loop_nest.hpp"
#include "ir/parse.hpp"
#include "ops/library.hpp"
#include "server/remote.hpp"
#include "server/schemas.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include <spdlog/spdlog.h>
#include "tuner/dataset.hpp"
#include "tuner/lookup.hpp"
#include "tuner/tune.hpp"

namespace tiletune::server {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

std::string new_job_id() {
  static std::mt19937_64 rng(std::random_device{}());
  static std::mutex mu;
  std::lock_guard lock(mu);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

json job_json(const db::JobRow& j) {
  json out = {{"id", j.id},
              {"state", j.state},
              {"done", j.done},
              {"total", j.total},
              {"best_ms", j.best_s ? json(*j.best_s * 1e3) : json(nullptr)},
              {"error", j.error},
              {"workload_key", j.workload_key},
              {"target_key", j.target_key},
              {"created_unix_ms", j.created_unix_ms},
              {"updated_unix_ms", j.updated_unix_ms}};
  json req = json::parse(j.request_json, nullptr, false);
  if (!req.is_discarded()) out["request"] = req;
  return out;
}

//! A library op by name, else op text through the parser: the only way user text reaches code.
ir::Workload workload_of(const json& request) {
  std::string op = request.at("op").get<std::string>();
  std::string op_name = request.value("op_name", "");
  auto names = ops::op_names();
  bool library = std::find(names.begin(), names.end(), op) != names.end();
  std::vector<ir::OpDef> defs = ir::parse_ops(library ? ops::op_text(op) : op);
  return ir::bind(ir::select_op(std::move(defs), op_name, library ? "library op " + op : "the op text"),
                  ir::parse_sizes(request.at("sizes").get<std::string>()));
}

//! A target row from outside: its key must hash its fingerprint and its traits must parse (now,
//! not when a job searches it).
void check_target_row(const db::TargetRow& row) {
  if (hash_hex(row.fingerprint_json) != row.key)
    throw_error(ErrorKind::InvalidInput, "target " + row.key + ": key is not the hash of its fingerprint");
  codegen::traits_from_json(row.traits_json);
}

//! Fixed buckets of the request latency histogram, seconds.
const double kBuckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5};

}  // namespace

struct Service::Impl {
  ServiceOptions options;
  std::unique_ptr<db::Store> store;

  std::mutex backends_mu;
  std::map<std::string, std::unique_ptr<codegen::Backend>> backends;

  // Jobs run one at a time on their own thread (measurements must not overlap); timers and the
  // measurement-rate gauge live on the control context.
  asio::io_context jobs_io, control_io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> jobs_work, control_work;
  std::thread jobs_thread, control_thread;
  std::optional<asio::steady_timer> rate_timer;
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::mutex cancel_mu;
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> cancel_flags;

  // Metrics.
  std::mutex metrics_mu;
  std::int64_t measurements = 0, measurements_at_last_tick = 0;
  double measurements_per_second = 0;
  std::map<std::string, std::int64_t> errors_by_class;
  std::map<std::pair<std::string, int>, std::int64_t> requests;
  std::map<std::string, std::vector<std::int64_t>> latency_buckets;  // per route, cumulative at render
  std::map<std::string, double> latency_sum;
  std::mutex source_mu;
  std::map<std::string, std::string> source_cache;  // workload + config key -> emitted source
  std::map<std::string, std::pair<std::int64_t, json>> answers;  // GET /v1/best by keys, with the change stamp

  LeaseBoard board;
  struct Worker {
    std::string target_key, name;
    std::int64_t last_seen_unix_ms = 0;
  };
  std::mutex workers_mu;
  std::map<std::string, Worker> workers;

  explicit Impl(ServiceOptions o)
      : options(std::move(o)), store(db::open_sqlite_store(options.db_path)), board(options.lease_seconds, options.unclaimed_seconds) {}

  //! The target a request names: a remote worker's target key, else the local backend's.
  codegen::TargetInfo target_of(const json& req, bool* remote) {
    std::string backend_name = req.value("backend", "cpu");
    if (!req.contains("target")) {
      *remote = false;
      return backend(backend_name).target();
    }
    std::string key = req["target"].get<std::string>();
    auto row = store->target(key);
    if (!row) throw_error(ErrorKind::NotFound, "no target '" + key + "': a worker registers it (tiletune worker)");
    // A target this daemon can measure itself is measured here.
    try {
      if (backend(row->backend).target().key == key) {
        *remote = false;
        return backend(row->backend).target();
      }
    } catch (const Error&) {
      // no such backend here: only remote workers can measure it
    }
    *remote = true;
    return {row->backend, row->key, row->family, row->fingerprint_json, codegen::traits_from_json(row->traits_json), /*device=*/""};
  }

  codegen::Backend& backend(const std::string& name) {
    std::lock_guard lock(backends_mu);
    auto& b = backends[name];
    if (!b) {
      codegen::BackendOptions bo;
      bo.threads = options.threads;
      bo.device = options.device;
      try {
        b = codegen::make_backend(name, bo);
      } catch (...) {
        backends.erase(name);
        throw;
      }
    }
    return *b;
  }

  std::shared_ptr<std::atomic<bool>> cancel_flag(const std::string& id) {
    std::lock_guard lock(cancel_mu);
    auto& f = cancel_flags[id];
    if (!f) f = std::make_shared<std::atomic<bool>>(false);
    return f;
  }

  void enqueue(const std::string& id) {
    asio::post(jobs_io, [this, id] {
      try {
        run_job(id);
      } catch (const std::exception& e) {
        // The database failed under the job's bookkeeping: the job stays as it was stored and
        // resumes at the next start; the daemon keeps serving.
        spdlog::error("event=job_error job={} error=\"{}\"", id, e.what());
      }
      std::lock_guard lock(cancel_mu);
      cancel_flags.erase(id);
    });
  }

  void run_job(const std::string& id) {
    auto row = store->job(id);
    if (!row || row->state == "cancelled" || row->state == "done" || row->state == "failed") return;
    if (stopping) return;  // stays queued for the next start
    auto cancel = cancel_flag(id);
    if (cancel->load()) return;
    if (!store->set_job_state_if(id, "queued", "running")) return;  // cancelled meanwhile
    row->state = "running";
    std::atomic<bool> stop_now{false};
    try {
      json req = json::parse(row->request_json);
      ir::Workload w = workload_of(req);
      bool remote = false;
      codegen::TargetInfo target = target_of(req, &remote);
      tuner::TuneOptions o;
      o.trials = req.value("trials", req.contains("seconds") ? 100000 : 64);
      o.max_seconds = req.value("seconds", 0.0);
      o.strategy = req.value("strategy", o.strategy);
      o.batch_size = options.batch_size;
      o.measure.cache_dir = options.cache_dir;
      o.measure.timeout_s = options.timeout_s;
      o.measure.min_seconds = options.min_seconds;
      // Both a cancel of this job and a stop of the service end it after the batch in flight.
      o.cancel = &stop_now;
      std::int64_t last_id = 0;  // records after this one are this job's, for the metrics
      if (auto before = store->history(w.key, target.key); !before.empty()) last_id = before.back().id;
      auto on_progress = [&](const tuner::Progress& p) {
        row->done = p.done;
        row->total = p.total;
        if (std::isfinite(p.best_s)) row->best_s = p.best_s;
        store->update_job(*row);
        // Count what this batch measured, by error class.
        auto fresh = store->records({w.key, target.key, last_id, 100000});
        std::lock_guard lock(metrics_mu);
        for (auto& r : fresh) {
          ++measurements;
          if (!r.ok()) ++errors_by_class[r.error_class];
          last_id = r.id;
        }
        if (cancel->load() || stopping.load()) stop_now = true;
      };
      // Remote batches wait for a worker: a cancel or a stop must also end that wait.
      std::atomic<bool> abandon{false};
      std::thread watch;
      std::optional<tuner::TuneSummary> summary;
      if (remote) {
        watch = std::thread([&] {
          while (!abandon && !cancel->load() && !stopping.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
          stop_now = true;
        });
        json wl = {{"key", w.key}, {"op_name", w.op.name}, {"canonical_text", w.canonical_text},
                   {"sizes_json", json(w.sizes).dump()}, {"op_text", w.source_text}};
        RemoteMeasurer measurer(board, target.key, wl, o.measure, stop_now);
        try {
          summary = tuner::tune(w, target, measurer, *store, o, on_progress);
        } catch (...) {
          abandon = true;
          watch.join();
          throw;
        }
        abandon = true;
        watch.join();
      } else {
        // The backend asked for by name (a decorated backend may report another's target).
        summary = tuner::tune(w, backend(req.contains("target") ? target.backend : req.value("backend", "cpu")), *store, o,
                              on_progress);
      }
      if (summary->stopped && stopping && !cancel->load()) {
        row->state = "queued";  // resumes where it stopped at the next start
      } else if (cancel->load() && summary->stopped) {
        row->state = "cancelled";
      } else {
        row->state = "done";
        if (!summary->best) row->error = "no candidate passed the correctness check";
      }
    } catch (const std::exception& e) {
      // Stopped while a remote worker measured: nothing of that batch was stored.
      row->state = cancel->load() ? "cancelled" : stopping.load() ? "queued" : "failed";
      if (row->state == "failed") row->error = e.what();
    }
    store->update_job(*row);
  }

  void tick_rate() {
    rate_timer->expires_after(std::chrono::seconds(5));
    rate_timer->async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      {
        std::lock_guard lock(metrics_mu);
        measurements_per_second = (measurements - measurements_at_last_tick) / 5.0;
        measurements_at_last_tick = measurements;
      }
      tick_rate();
    });
  }

  json best_answer(const tuner::BestLookup& found, const ir::Workload& w, codegen::Backend& be) {
    const db::Record& r = found.record;
    std::string cache_key = w.key + "/" + r.config_key + "/" + be.target().key;
    std::string source;
    {
      std::lock_guard lock(source_mu);
      auto it = source_cache.find(cache_key);
      if (it != source_cache.end()) source = it->second;
    }
    if (source.empty()) {
      ir::Schedule s = ir::Schedule::from_json(r.config_json);
      source = be.emit(w, ir::lower(w, s, be.target().traits), s.to_json());
      std::lock_guard lock(source_mu);
      if (source_cache.size() > 4096) source_cache.clear();
      source_cache[cache_key] = source;
    }
    return {{"workload_key", w.key},
            {"target_key", r.target_key},
            {"exact_target", found.exact_target},
            {"config", json::parse(r.config_json)},
            {"latency_s", r.median_s()},
            {"gflops", w.flops() / r.median_s() / 1e9},
            {"source", source},
            {"source_language", be.source_extension()},
            {"record_id", r.id}};
  }
};

Service::Service(ServiceOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Service::~Service() { stop(); }

void Service::start() {
  auto& m = *impl_;
  if (m.started) return;
  m.started = true;
  m.stopping = false;
  m.jobs_work.emplace(m.jobs_io.get_executor());
  m.control_work.emplace(m.control_io.get_executor());
  m.rate_timer.emplace(m.control_io);
  m.tick_rate();
  // Oldest first: a restarted daemon resumes in the order jobs came.
  auto pending = m.store->jobs("running", 100000);
  auto queued = m.store->jobs("queued", 100000);
  pending.insert(pending.end(), queued.begin(), queued.end());
  std::sort(pending.begin(), pending.end(), [](auto& a, auto& b) { return a.created_unix_ms < b.created_unix_ms; });
  for (auto& j : pending) {
    if (j.state == "running") {
      j.state = "queued";  // it was running when the last daemon died
      m.store->update_job(j);
    }
    m.enqueue(j.id);
  }
  m.jobs_thread = std::thread([&m] { m.jobs_io.run(); });
  m.control_thread = std::thread([&m] { m.control_io.run(); });
}

void Service::stop() {
  auto& m = *impl_;
  if (!m.started) return;
  m.stopping = true;
  m.jobs_work.reset();
  m.control_work.reset();
  // Handlers still queued run after the next start(); run_job skips jobs no longer queued.
  m.jobs_io.stop();
  if (m.jobs_thread.joinable()) m.jobs_thread.join();  // the running job ends after its batch
  m.control_io.stop();
  if (m.control_thread.joinable()) m.control_thread.join();
  m.jobs_io.restart();
  m.control_io.restart();
  m.started = false;
}

json Service::submit(const json& request) {
  validate_body("TuneRequest", request);
  if (impl_->stopping) throw_error(ErrorKind::Unavailable, "the daemon is shutting down; retry against its successor");
  ir::Workload w = workload_of(request);
  bool remote = false;
  codegen::TargetInfo target = impl_->target_of(request, &remote);
  std::string strategy = request.value("strategy", tuner::TuneOptions().strategy);
  json normalized = request;
  normalized["backend"] = request.value("backend", target.backend);
  normalized["strategy"] = strategy;
  std::string request_key = hash_hex(w.key + "|" + target.key + "|" + strategy + "|" +
                                     json(request.value("trials", 0)).dump() + "|" +
                                     json(request.value("seconds", 0.0)).dump());
  db::JobRow row;
  row.id = new_job_id();
  row.request_key = request_key;
  row.request_json = normalized.dump();
  row.workload_key = w.key;
  row.target_key = target.key;
  row.state = "queued";
  row.total = request.value("trials", 0);
  impl_->store->put_workload(tuner::workload_row(w));
  impl_->store->put_target(tuner::target_row(target));
  db::JobRow stored = impl_->store->put_job(row);
  bool created = stored.id == row.id;
  if (created && impl_->started) impl_->enqueue(stored.id);
  return {{"job", job_json(stored)}, {"created", created}};
}

json Service::job(const std::string& id) {
  auto j = impl_->store->job(id);
  if (!j) throw_error(ErrorKind::NotFound, "no job '" + id + "'");
  return job_json(*j);
}

json Service::jobs(const std::string& state, int limit) {
  static const std::set<std::string> states = {"", "queued", "running", "done", "failed", "cancelled"};
  if (!states.count(state))
    throw_error(ErrorKind::InvalidInput, "state must be one of queued, running, done, failed, cancelled");
  json out = json::array();
  for (auto& j : impl_->store->jobs(state, std::clamp(limit, 1, 1000))) out.push_back(job_json(j));
  return {{"jobs", out}};
}

json Service::cancel(const std::string& id) {
  auto j = impl_->store->job(id);
  if (!j) throw_error(ErrorKind::NotFound, "no job '" + id + "'");
  if (j->state != "queued" && j->state != "running")
    throw_error(ErrorKind::Conflict, "job '" + id + "' is already " + j->state);
  impl_->cancel_flag(id)->store(true);
  // A queued job is cancelled here; a running one when its batch in flight is stored.
  impl_->store->set_job_state_if(id, "queued", "cancelled");
  return job(id);
}

json Service::best(const std::string& workload_key, const std::string& target_key) {
  auto& store = *impl_->store;
  // Compilers ask the same question often: the answer stands until the database changes.
  std::int64_t stamp = store.change_stamp();
  std::string cache_key = workload_key + "/" + target_key;
  {
    std::lock_guard lock(impl_->source_mu);
    auto it = impl_->answers.find(cache_key);
    if (it != impl_->answers.end() && it->second.first == stamp) return it->second.second;
  }
  json answer = best_uncached(workload_key, target_key);
  std::lock_guard lock(impl_->source_mu);
  if (impl_->answers.size() > 4096) impl_->answers.clear();
  impl_->answers[cache_key] = {stamp, answer};
  return answer;
}

json Service::best_uncached(const std::string& workload_key, const std::string& target_key) {
  auto& store = *impl_->store;
  auto wrow = store.workload(workload_key);
  if (!wrow) throw_error(ErrorKind::NotFound, "no workload '" + workload_key + "'; tune it first (POST /v1/tune)");
  auto trow = store.target(target_key);
  if (!trow) throw_error(ErrorKind::NotFound, "no target '" + target_key + "' (GET /v1/targets lists them)");
  codegen::TargetInfo target{trow->backend, trow->key, trow->family, trow->fingerprint_json, {}, /*device=*/""};
  auto found = tuner::find_best(store, workload_key, target);
  if (!found)
    throw_error(ErrorKind::NotFound, "no measured kernel of workload " + workload_key + " for target " + target_key +
                                         " or its device family; tune it first (POST /v1/tune)");
  return impl_->best_answer(*found, tuner::workload_from_row(*wrow), impl_->backend(trow->backend));
}

json Service::best_for(const json& request) {
  validate_body("BestRequest", request);
  ir::Workload w = workload_of(request);
  codegen::Backend& be = impl_->backend(request.value("backend", "cpu"));
  auto found = tuner::find_best(*impl_->store, w.key, be.target());
  if (!found)
    throw_error(ErrorKind::NotFound, "no measured kernel of " + w.op.name + " with " + w.sizes_text() +
                                         " on this target; tune it first (POST /v1/tune)");
  return impl_->best_answer(*found, w, be);
}

json Service::records(const std::string& workload_key, const std::string& target_key, std::int64_t after, int limit) {
  auto& store = *impl_->store;
  auto page = store.records({workload_key, target_key, after, std::clamp(limit, 1, 10000)});
  std::set<std::string> wkeys, tkeys;
  json recs = json::array(), ws = json::array(), ts = json::array();
  for (auto& r : page) {
    recs.push_back(json::parse(db::record_to_json(r)));
    wkeys.insert(r.workload_key);
    tkeys.insert(r.target_key);
  }
  for (auto& k : wkeys)
    if (auto w = store.workload(k))
      ws.push_back({{"key", w->key}, {"op_name", w->op_name}, {"canonical_text", w->canonical_text},
                    {"sizes_json", w->sizes_json}, {"op_text", w->op_text}});
  for (auto& k : tkeys)
    if (auto t = store.target(k))
      ts.push_back({{"key", t->key}, {"backend", t->backend}, {"family", t->family}, {"fingerprint_json", t->fingerprint_json},
                    {"traits_json", t->traits_json}});
  json out = {{"workloads", ws}, {"targets", ts}, {"records", recs}};
  out["next_after"] = page.empty() ? after : page.back().id;
  return out;
}

json Service::import_records(const json& batch) {
  validate_body("RecordBatch", batch);
  auto& store = *impl_->store;
  // Everything is checked before anything is written: a bad batch imports nothing.
  std::vector<db::WorkloadRow> workloads;
  std::map<std::string, ir::Workload> bound;
  for (auto& w : batch["workloads"]) {
    db::WorkloadRow row{w["key"], w["op_name"], w["canonical_text"], w["sizes_json"], w.value("op_text", "")};
    try {
      bound.emplace(row.key, tuner::workload_from_row(row));  // through the parser, and the key must match
    } catch (const Error& e) {
      throw_error(ErrorKind::InvalidInput, std::string("workload ") + row.key + ": " + e.what());
    }
    workloads.push_back(row);
  }
  std::vector<db::TargetRow> targets;
  for (auto& t : batch["targets"]) {
    db::TargetRow row{t["key"], t["backend"], t["family"], t["fingerprint_json"], t.value("traits_json", "")};
    check_target_row(row);
    targets.push_back(row);
  }
  std::vector<db::Record> records;
  for (auto& r : batch["records"]) {
    db::Record rec = db::record_from_json(r.dump());
    bool known_w = bound.count(rec.workload_key) || store.workload(rec.workload_key);
    bool known_t = std::any_of(targets.begin(), targets.end(), [&](auto& t) { return t.key == rec.target_key; }) ||
                   store.target(rec.target_key);
    if (!known_w || !known_t)
      throw_error(ErrorKind::InvalidInput, "record of workload " + rec.workload_key + " and target " + rec.target_key +
                                               ": include its workload and target in the batch");
    // A config this version cannot read is refused, as is one whose key was not derived from it.
    if (ir::Schedule::from_json(rec.config_json).key() != rec.config_key)
      throw_error(ErrorKind::InvalidInput, "record " + std::to_string(rec.id) + ": config_key does not match its config");
    records.push_back(std::move(rec));
  }
  for (auto& w : workloads) store.put_workload(w);
  for (auto& t : targets) store.put_target(t);
  int imported = 0, duplicates = 0;
  for (auto& r : records) {
    if (store.has_config(r.workload_key, r.target_key, r.config_key)) {
      ++duplicates;
      continue;
    }
    store.add_record(r);
    ++imported;
  }
  return {{"imported", imported}, {"duplicates", duplicates}};
}

json Service::register_worker(const json& registration) {
  validate_body("WorkerRegistration", registration);
  const json& t = registration["target"];
  db::TargetRow row{t["key"], t["backend"], t["family"], t["fingerprint_json"], t.value("traits_json", "")};
  check_target_row(row);
  impl_->store->put_target(row);
  std::string id = "w" + new_job_id();
  std::lock_guard lock(impl_->workers_mu);
  impl_->workers[id] = {row.key, registration["name"].get<std::string>(), 0};
  spdlog::info("event=worker_registered worker={} name={} target={}", id, registration["name"].get<std::string>(), row.key);
  return {{"worker_id", id}, {"target_key", row.key}};
}

std::optional<json> Service::lease(const std::string& worker_id) {
  std::string target;
  {
    std::lock_guard lock(impl_->workers_mu);
    auto it = impl_->workers.find(worker_id);
    if (it == impl_->workers.end())
      throw_error(ErrorKind::NotFound, "no worker '" + worker_id + "' (a restarted daemon forgets workers: register again)");
    it->second.last_seen_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::system_clock::now().time_since_epoch()).count();
    target = it->second.target_key;
  }
  return impl_->board.lease(worker_id, target);
}

json Service::complete_lease(const std::string& lease_id, const json& body) {
  validate_body("LeaseResults", body);
  std::vector<measure::MeasureResult> results;
  for (auto& r : body["results"]) results.push_back(measure::result_from_json(r.dump()));
  impl_->board.complete(lease_id, body["worker_id"].get<std::string>(), std::move(results));
  return {{"accepted", body["results"].size()}};
}

json Service::ops() {
  json out = json::array();
  for (auto& name : ops::op_names()) out.push_back({{"name", name}, {"text", ops::op_text(name)}});
  return {{"ops", out}};
}

json Service::targets() {
  json out = json::array();
  for (auto& t : impl_->store->targets())
    out.push_back({{"key", t.key}, {"backend", t.backend}, {"family", t.family},
                   {"fingerprint", json::parse(t.fingerprint_json, nullptr, false)}});
  json local = json::array();
  for (auto& [name, description] : codegen::list_backends()) local.push_back({{"name", name}, {"description", description}});
  return {{"targets", out}, {"backends", local}};
}

void Service::observe_request(const std::string& route, int status, double seconds) {
  auto& m = *impl_;
  std::lock_guard lock(m.metrics_mu);
  ++m.requests[{route, status}];
  auto& b = m.latency_buckets[route];
  b.resize(std::size(kBuckets) + 1);
  std::size_t i = 0;
  while (i < std::size(kBuckets) && seconds > kBuckets[i]) ++i;
  ++b[i];
  m.latency_sum[route] += seconds;
}

std::string Service::metrics() {
  auto& m = *impl_;
  std::map<std::string, int> by_state = {{"queued", 0}, {"running", 0}, {"done", 0}, {"failed", 0}, {"cancelled", 0}};
  for (auto& j : m.store->jobs("", 100000)) ++by_state[j.state];
  std::string out;
  out += "# HELP tiletune_jobs Tuning jobs in the database by state.\n# TYPE tiletune_jobs gauge\n";
  for (auto& [state, n] : by_state) out += "tiletune_jobs{state=\"" + state + "\"} " + std::to_string(n) + "\n";
  std::lock_guard lock(m.metrics_mu);
  out += "# HELP tiletune_measurements_total Candidates measured by this daemon.\n# TYPE tiletune_measurements_total counter\n";
  out += "tiletune_measurements_total " + std::to_string(m.measurements) + "\n";
  out += "# HELP tiletune_measurements_per_second Measurements per second over the last 5 s.\n"
         "# TYPE tiletune_measurements_per_second gauge\n";
  out += "tiletune_measurements_per_second " + std::to_string(m.measurements_per_second) + "\n";
  out += "# HELP tiletune_measurement_errors_total Failed measurements by class.\n"
         "# TYPE tiletune_measurement_errors_total counter\n";
  for (auto& [cls, n] : m.errors_by_class)
    out += "tiletune_measurement_errors_total{class=\"" + cls + "\"} " + std::to_string(n) + "\n";
  out += "# HELP tiletune_http_requests_total HTTP requests by route and status.\n"
         "# TYPE tiletune_http_requests_total counter\n";
  for (auto& [key, n] : m.requests)
    out += "tiletune_http_requests_total{route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  out += "# HELP tiletune_http_request_seconds Request latency by route.\n# TYPE tiletune_http_request_seconds histogram\n";
  for (auto& [route, buckets] : m.latency_buckets) {
    std::int64_t cumulative = 0;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      cumulative += buckets[i];
      std::string le = i < std::size(kBuckets) ? std::to_string(kBuckets[i]) : "+Inf";
      out += "tiletune_http_request_seconds_bucket{route=\"" + route + "\",le=\"" + le + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    out += "tiletune_http_request_seconds_sum{route=\"" + route + "\"} " + std::to_string(m.latency_sum[route]) + "\n";
    out += "tiletune_http_request_seconds_count{route=\"" + route + "\"} " + std::to_string(cumulative) + "\n";
  }
  return out;
}

}  // namespace tiletune::server
