// The job runner of Service: jobs in the database, claimed by the daemons on it and run one at a
// time by each.
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <set>
#include <tuple>

#include "db/retry.hpp"
#include "server/schemas.hpp"
#include "server/service_impl.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "tuner/tune.hpp"

namespace tiletune::server {

using nlohmann::json;
namespace asio = boost::asio;

json Service::Impl::job_json(const db::JobRow& j, const QueuePositions& positions) {
  json out = {{"id", j.id},
              {"state", j.state},
              {"done", j.done},
              {"total", j.total},
              {"best_ms", j.best_s ? json(*j.best_s * 1e3) : json(nullptr)},
              {"error", j.error},
              {"workload_key", j.workload_key},
              {"target_key", j.target_key},
              {"owner", j.owner},
              {"created_unix_ms", j.created_unix_ms},
              {"updated_unix_ms", j.updated_unix_ms}};
  json req = json::parse(j.request_json, nullptr, false);
  if (!req.is_discarded()) out["request"] = req;
  if (auto it = positions.find(j.id); it != positions.end()) out["queue_position"] = it->second;
  return out;
}

json Service::Impl::job_json(const db::JobRow& j) {
  return job_json(j, j.state == "queued" ? queue_positions() : QueuePositions{});
}

Service::Impl::QueuePositions Service::Impl::queue_positions() {
  // Turns go by how long a job has waited: the order claim_job takes them in.
  auto queued = store->jobs("queued", 100000);
  std::sort(queued.begin(), queued.end(),
            [](auto& a, auto& b) { return std::tie(a.updated_unix_ms, a.id) < std::tie(b.updated_unix_ms, b.id); });
  const int running = static_cast<int>(store->jobs("running", 100000).size());
  QueuePositions out;
  for (size_t i = 0; i < queued.size(); ++i) out[queued[i].id] = running + static_cast<int>(i);
  return out;
}

bool Service::Impl::save_job(const db::JobRow& row) {
  // The job's bookkeeping waits for a database that is briefly away, as its records do.
  bool held = db::retry_unavailable(
      options.job_defaults.store_patience_s, [&] { return store->update_job(row); },
      [&](const std::string& why) { spdlog::warn("event=database_away job={} error=\"{}\"", row.id, why); });
  if (!held) lose_claim(row.id);
  return held;
}

void Service::Impl::lose_claim(const std::string& id) {
  claim_lost = true;
  spdlog::warn("event=claim_lost job={} (cancelled, or taken over by another daemon)", id);
}

void Service::Impl::heartbeat() {
  try {
    release_dead_owners();
  } catch (const std::exception& e) {
    spdlog::warn("event=release_failed error=\"{}\"", e.what());
  }
  std::string id;
  {
    std::lock_guard lock(turn_mu);
    id = turn_job;
  }
  if (id.empty()) return;
  try {
    if (!store->renew_job(id, daemon_id, db::now_unix_ms(), job_lease_ms)) lose_claim(id);
  } catch (const std::exception& e) {
    // The database is away: the claim holds until it runs out, and renewing goes on.
    spdlog::warn("event=heartbeat_failed job={} error=\"{}\"", id, e.what());
  }
}

void Service::Impl::release_dead_owners() {
  const std::string prefix = host + ":";
  for (auto& j : store->jobs("running", 100000)) {
    if (j.owner.rfind(prefix, 0) != 0) continue;
    long pid = std::strtol(j.owner.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || j.owner == daemon_id || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    db::JobRow released = j;
    released.state = "queued";
    if (store->update_job(released)) spdlog::info("event=job_released job={} dead_owner={}", j.id, j.owner);
  }
}

void Service::Impl::run_jobs() {
  while (!stopping) {
    std::optional<db::JobRow> row;
    try {
      row = store->claim_job(daemon_id, db::now_unix_ms(), job_lease_ms);
    } catch (const std::exception& e) {
      spdlog::error("event=claim_failed error=\"{}\"", e.what());  // the database is away: try again
    }
    if (!row) {
      std::unique_lock lock(wake_mu);
      wake.wait_for(lock, std::chrono::duration<double>(options.poll_seconds), [this] { return stopping.load(); });
      continue;
    }
    {
      std::lock_guard lock(turn_mu);
      turn_job = row->id;
      claim_lost = false;
    }
    try {
      run_job(*row);
    } catch (const std::exception& e) {
      // The database failed under the job's bookkeeping: its claim runs out and the job resumes
      // (here or on another daemon); the daemon keeps serving.
      spdlog::error("event=job_error job={} error=\"{}\"", row->id, e.what());
    }
    // After this line the daemon writes nothing more for the job until it claims it again.
    spdlog::info("event=turn_ended job={} claim={}", row->id, claim_lost.load() ? "lost" : "held");
    std::lock_guard lock(turn_mu);
    turn_job.clear();
  }
}

void Service::Impl::run_job(db::JobRow row) {
  if (json request = json::parse(row.request_json, nullptr, false); is_model_request(request))
    return run_model_job(row, request);
  std::atomic<bool> stop_now{false};
  try {
    json req = json::parse(row.request_json);
    ir::Workload w = workload_of(req);
    bool remote = false;
    codegen::TargetInfo target = target_of(req, &remote);
    tuner::TuneOptions o = options.job_defaults;
    // A request bounded by time alone gets the largest budget, so that its time ends it.
    o.trials = req.value("trials", req.contains("seconds") ? tuner::kMaxTrials : o.trials);
    // One turn lasts a slice, or what is left of the job's own time budget.
    const double budget = req.value("seconds", 0.0);
    o.max_seconds =
        budget > 0 ? std::min(options.slice_seconds, std::max(budget - row.spent_s, 1e-3)) : options.slice_seconds;
    o.strategy = req.value("strategy", o.strategy);
    const auto turn_start = std::chrono::steady_clock::now();
    o.models = store.get();
    // A stop of the service or a lost claim (a cancel releases it) end it after the batch in flight.
    o.cancel = &stop_now;
    std::int64_t last_id = 0;  // records after this one are this job's, for the metrics
    if (auto before = store->history(w.key, target.key); !before.empty()) last_id = before.back().id;
    auto on_progress = [&](const tuner::Progress& p) {
      row.done = p.done;
      row.total = p.total;
      if (std::isfinite(p.best_s)) row.best_s = p.best_s;
      save_job(row);
      // Count what this batch measured, by error class.
      for (auto& r : store->records({w.key, target.key, last_id, tuner::kMaxTrials})) {
        metrics.count_measurement(r.error_class);
        last_id = r.id;
      }
      if (stopping.load() || claim_lost.load()) stop_now = true;
    };
    // Remote batches wait for a worker: a stop or a lost claim must also end that wait.
    std::atomic<bool> abandon{false};
    std::thread watch;
    std::optional<tuner::TuneSummary> summary;
    if (remote) {
      watch = std::thread([&] {
        while (!abandon && !stopping.load() && !claim_lost.load())
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        stop_now = true;
      });
      store->remove_job_batches(row.id);  // a dead daemon's turn may have left one
      RemoteMeasurer measurer(board, row.id, target.key, tuner::workload_row(w), o.measure, stop_now);
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
      summary =
          tuner::tune(w, backend(req.contains("target") ? target.backend : backend_of(req)), *store, o, on_progress);
    }
    row.spent_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - turn_start).count();
    if (summary->stopped && stopping) {
      row.state = "queued";  // resumes where it stopped, here at the next start or on another daemon
    } else if (summary->stopped && (budget <= 0 || row.spent_s < budget)) {
      row.state = "queued";  // its turn ended: the next job's turn, then this one goes on
    } else {
      row.state = "done";
      if (!summary->best) row.error = "no candidate passed the correctness check";
    }
    // After the side-by-side round the best is the store's, as GET /v1/best answers it.
    if (summary->best) row.best_s = summary->best->median_s();
  } catch (const std::exception& e) {
    // Stopped while a remote worker measured: nothing of that batch was stored.
    row.state = stopping.load() ? "queued" : "failed";
    if (row.state == "failed") row.error = e.what();
  }
  // A lost claim writes nothing: the job is cancelled, or another daemon runs it now.
  if (!claim_lost) save_job(row);
}

void Service::Impl::tick_rate() {
  rate_timer->expires_after(std::chrono::seconds(5));
  rate_timer->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    metrics.tick(5.0);
    tick_rate();
  });
}

void Service::Impl::tick_heartbeat() {
  heartbeat_timer->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::min(options.job_lease_seconds / 4, 2.0))));
  heartbeat_timer->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    heartbeat();
    tick_heartbeat();
  });
}

json Service::submit(const json& request) {
  validate_body("TuneRequest", request);
  if (impl_->stopping) throw_error(ErrorKind::Unavailable, "the daemon is shutting down; retry against its successor");
  ir::Workload w = workload_of(request);
  tuner::check_memory(w, impl_->options.job_defaults.max_memory_share);
  bool remote = false;
  codegen::TargetInfo target = impl_->target_of(request, &remote);
  std::string strategy = request.value("strategy", impl_->options.job_defaults.strategy);
  json normalized = request;
  normalized["backend"] = request.value("backend", target.backend);
  normalized["strategy"] = strategy;
  std::string request_key =
      hash_hex(w.key + "|" + target.key + "|" + strategy + "|" + json(request.value("trials", 0)).dump() + "|" +
               json(request.value("seconds", 0.0)).dump());
  db::JobRow row;
  row.id = new_id();
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
  if (created) impl_->wake.notify_all();
  return {{"job", impl_->job_json(stored)}, {"created", created}};
}

json Service::job(const std::string& id) {
  auto j = impl_->store->job(id);
  if (!j) throw_error(ErrorKind::NotFound, "no job '" + id + "'");
  return impl_->job_json(*j);
}

json Service::jobs(const std::string& state, int limit) {
  static const std::set<std::string> states = {"", "queued", "running", "done", "failed", "cancelled"};
  if (!states.count(state))
    throw_error(ErrorKind::InvalidInput, "state must be one of queued, running, done, failed, cancelled");
  json out = json::array();
  auto positions = impl_->queue_positions();  // once for the page, not per job
  for (auto& j : impl_->store->jobs(state, std::clamp(limit, 1, 1000))) out.push_back(impl_->job_json(j, positions));
  return {{"jobs", out}};
}

json Service::cancel(const std::string& id) {
  auto j = impl_->store->job(id);
  if (!j) throw_error(ErrorKind::NotFound, "no job '" + id + "'");
  if (j->state != "queued" && j->state != "running")
    throw_error(ErrorKind::Conflict, "job '" + id + "' is already " + j->state);
  // Cancelled here; a running job's owner (this daemon or another) finds its claim gone at its
  // next write or renewal and stops after the batch in flight, whose records are kept.
  if (!impl_->store->set_job_state_if(id, "queued", "cancelled"))
    impl_->store->set_job_state_if(id, "running", "cancelled");
  return job(id);
}

}  // namespace tiletune::server
