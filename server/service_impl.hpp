// server/service_impl.hpp — internal to server/: the state behind Service, shared by the files
// that implement its parts (service.cpp: backends and targets; jobs.cpp: the job runner;
// lookups.cpp: best kernels; records_exchange.cpp: export and import; workers.cpp: remote
// workers; metrics.hpp: counters).
#pragma once
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "codegen/backend.hpp"
#include "db/store.hpp"
#include "ir/workload.hpp"
#include "server/metrics.hpp"
#include "server/remote.hpp"
#include "server/service.hpp"
#include "tuner/lookup.hpp"
#include "tuner/task_scheduler.hpp"

namespace tiletune::server {

//! A random 16-hex-digit id (jobs, workers).
std::string new_id();

//! A library op by name, else op text through the parser: the only way user text reaches code.
ir::Workload workload_of(const nlohmann::json& request);

//! The backend a request names, or the default one.
std::string backend_of(const nlohmann::json& request);

struct Service::Impl {
  ServiceOptions options;
  std::unique_ptr<db::Store> store;

  std::mutex backends_mu;
  std::map<std::string, std::unique_ptr<codegen::Backend>> backends;

  // The job runner: one thread claims the job that has waited longest in the database (daemons on
  // one database share its queue) and runs a turn of it, so this daemon's measurements never
  // overlap. The control context holds the timers: the claim's heartbeat, the measurement rate.
  std::string host;       //!< this machine's name
  std::string daemon_id;  //!< host:pid:random, the owner of the jobs this daemon runs
  std::int64_t job_lease_ms = 0;
  boost::asio::io_context control_io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> control_work;
  std::thread jobs_thread, control_thread;
  std::thread warm_thread;  //!< dashboard::warm at start
  std::optional<boost::asio::steady_timer> rate_timer, heartbeat_timer;
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::mutex wake_mu;
  std::condition_variable wake;  //!< a submitted job wakes an idle runner
  std::mutex turn_mu;
  std::string turn_job;                  //!< the job whose turn runs now ("" when idle)
  std::atomic<bool> claim_lost{false};  //!< its claim is gone (cancelled, or another daemon has it)

  Metrics metrics;

  // Lookups: emitted kernels and whole answers, the latter valid while the change stamp is.
  std::mutex source_mu;
  std::map<std::string, tuner::RecordKernel> kernel_cache;                 // workload + config + target key
  std::map<std::string, std::pair<std::int64_t, nlohmann::json>> answers;  // GET /v1/best by keys

  // Remote workers' batches (the workers and batches are in the database).
  LeaseBoard board;

  explicit Impl(ServiceOptions o);

  //! The target a request names: a remote worker's target key, else the local backend's.
  codegen::TargetInfo target_of(const nlohmann::json& req, bool* remote);
  //! The local backend of that name, made on first use.
  codegen::Backend& backend(const std::string& name);

  // jobs.cpp
  //! The runner's loop: claims jobs and runs their turns until the service stops.
  void run_jobs();
  //! Runs one turn of a job this daemon has claimed, and stores where it ended.
  void run_job(db::JobRow row);
  //! Stores a job's state; false when its claim is lost (the write is then not made). Rides out
  //! a database that is briefly away.
  bool save_job(const db::JobRow& row);
  //! The turn's claim is gone: the turn stops after its batch in flight and writes nothing more.
  void lose_claim(const std::string& id);
  //! Renews the claim of the job whose turn runs (a lost claim stops the turn after its batch)
  //! and releases the jobs of dead daemons of this host.
  void heartbeat();
  //! Jobs of daemons on this host that have died are queued again at once (not after their
  //! claim runs out).
  void release_dead_owners();
  // models.cpp: a model job's turn (the scheduler over its tasks), and what tells one apart.
  //! fit_l1..l3, intensities and bytes touched of the workload's best kernel on the target
  //! (from its features); null without a successful record.
  nlohmann::json memory_of_best(const ir::Workload& w, const std::string& target_key);
  void run_model_job(db::JobRow row, const nlohmann::json& request);
  //! A finished model job's layers against this machine's roofs and the vendor's layers,
  //! measured once and stored as the job's result (vendor::judge_layers).
  void judge_model(const db::JobRow& row, const nlohmann::json& request, const std::vector<tuner::WeightedTask>& tasks,
                   const std::vector<tuner::TaskStatus>& status, codegen::Backend& be);
  //! A job's stored request (parsed, possibly discarded) is a model job's.
  static bool is_model_request(const nlohmann::json& request);
  //! Per queued job, how many jobs run before it: those running on any daemon of the database,
  //! and those queued ahead of it.
  using QueuePositions = std::map<std::string, int>;
  QueuePositions queue_positions();
  //! A job's API form (schema Job); a queued one with its position among `positions`.
  nlohmann::json job_json(const db::JobRow& j, const QueuePositions& positions);
  nlohmann::json job_json(const db::JobRow& j);  //!< positions looked up when it is queued
  void tick_rate();
  void tick_heartbeat();

  // lookups.cpp
  nlohmann::json best_answer(const tuner::BestLookup& found, const ir::Workload& w, codegen::Backend& be);
};

}  // namespace tiletune::server
