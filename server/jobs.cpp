// The job runner of Service: jobs persisted in the database, run one at a time.
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "server/schemas.hpp"
#include "server/service_impl.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "tuner/tune.hpp"

namespace tiletune::server {

using nlohmann::json;
namespace asio = boost::asio;

json Service::Impl::job_json(const db::JobRow& j) {
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
  if (j.state == "queued")
    if (auto position = queue_position(j.id)) out["queue_position"] = *position;
  return out;
}

std::optional<int> Service::Impl::queue_position(const std::string& id) {
  std::lock_guard lock(queue_mu);
  auto it = std::find(queue.begin(), queue.end(), id);
  if (it == queue.end()) return std::nullopt;
  // The job whose turn it is (it has left the queue) goes first.
  return static_cast<int>(it - queue.begin()) + (in_turn ? 1 : 0);
}

std::shared_ptr<std::atomic<bool>> Service::Impl::cancel_flag(const std::string& id) {
  std::lock_guard lock(cancel_mu);
  auto& f = cancel_flags[id];
  if (!f) f = std::make_shared<std::atomic<bool>>(false);
  return f;
}

void Service::Impl::enqueue(const std::string& id) {
  {
    std::lock_guard lock(queue_mu);
    queue.push_back(id);
  }
  asio::post(jobs_io, [this, id] {
    {
      std::lock_guard lock(queue_mu);
      auto it = std::find(queue.begin(), queue.end(), id);
      if (it != queue.end()) queue.erase(it);
      in_turn = true;
    }
    bool again = false;
    try {
      again = run_job(id);
    } catch (const std::exception& e) {
      // The database failed under the job's bookkeeping: the job stays as it was stored and
      // resumes at the next start; the daemon keeps serving.
      spdlog::error("event=job_error job={} error=\"{}\"", id, e.what());
    }
    {
      std::lock_guard lock(queue_mu);
      in_turn = false;
      if (!again) spent_s.erase(id);
    }
    if (again) return enqueue(id);  // its next turn, behind the jobs waiting now
    std::lock_guard lock(cancel_mu);
    cancel_flags.erase(id);
  });
}

bool Service::Impl::run_job(const std::string& id) {
  auto row = store->job(id);
  if (!row || row->state == "cancelled" || row->state == "done" || row->state == "failed") return false;
  if (stopping) return false;  // stays queued for the next start
  if (json request = json::parse(row->request_json, nullptr, false); is_model_request(request))
    return run_model_job(*row, request);
  auto cancel = cancel_flag(id);
  if (cancel->load()) return false;
  if (!store->set_job_state_if(id, "queued", "running")) return false;  // cancelled meanwhile
  row->state = "running";
  bool again = false;
  std::atomic<bool> stop_now{false};
  try {
    json req = json::parse(row->request_json);
    ir::Workload w = workload_of(req);
    bool remote = false;
    codegen::TargetInfo target = target_of(req, &remote);
    tuner::TuneOptions o = options.job_defaults;
    // A request bounded by time alone gets the largest budget, so that its time ends it.
    o.trials = req.value("trials", req.contains("seconds") ? tuner::kMaxTrials : o.trials);
    // One turn lasts a slice, or what is left of the job's own time budget.
    const double budget = req.value("seconds", 0.0);
    double spent = 0;
    {
      std::lock_guard lock(queue_mu);
      spent = spent_s[id];
    }
    o.max_seconds =
        budget > 0 ? std::min(options.slice_seconds, std::max(budget - spent, 1e-3)) : options.slice_seconds;
    o.strategy = req.value("strategy", o.strategy);
    const auto turn_start = std::chrono::steady_clock::now();
    o.models = store.get();
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
      for (auto& r : store->records({w.key, target.key, last_id, tuner::kMaxTrials})) {
        metrics.count_measurement(r.error_class);
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
        while (!abandon && !cancel->load() && !stopping.load())
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        stop_now = true;
      });
      RemoteMeasurer measurer(board, target.key, tuner::workload_row(w), o.measure, stop_now);
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
    spent += std::chrono::duration<double>(std::chrono::steady_clock::now() - turn_start).count();
    {
      std::lock_guard lock(queue_mu);
      spent_s[id] = spent;
    }
    if (summary->stopped && stopping && !cancel->load()) {
      row->state = "queued";  // resumes where it stopped at the next start
    } else if (cancel->load() && summary->stopped) {
      row->state = "cancelled";
    } else if (summary->stopped && (budget <= 0 || spent < budget)) {
      row->state = "queued";  // its turn ended: the next job's turn, then this one goes on
      again = true;
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
  return again;
}

void Service::Impl::tick_rate() {
  rate_timer->expires_after(std::chrono::seconds(5));
  rate_timer->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    metrics.tick(5.0);
    tick_rate();
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
  if (created && impl_->started) impl_->enqueue(stored.id);
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
  for (auto& j : impl_->store->jobs(state, std::clamp(limit, 1, 1000))) out.push_back(impl_->job_json(j));
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

}  // namespace tiletune::server
