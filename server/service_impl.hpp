// server/service_impl.hpp — internal to server/: the state behind Service, shared by the files
// that implement its parts (service.cpp: backends and targets; jobs.cpp: the job runner;
// lookups.cpp: best kernels; records_exchange.cpp: export and import; workers.cpp: remote
// workers; metrics.hpp: counters).
#pragma once
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
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

namespace tiletune::server {

//! A random 16-hex-digit id (jobs, workers).
std::string new_id();

//! A library op by name, else op text through the parser: the only way user text reaches code.
ir::Workload workload_of(const nlohmann::json& request);

//! A target row from outside: its key must hash its fingerprint and its traits must parse (now,
//! not when a job searches it). Error(InvalidInput) otherwise.
void check_target_row(const db::TargetRow& row);

//! The backend a request names, or the default one.
std::string backend_of(const nlohmann::json& request);

struct Service::Impl {
  ServiceOptions options;
  std::unique_ptr<db::Store> store;

  std::mutex backends_mu;
  std::map<std::string, std::unique_ptr<codegen::Backend>> backends;

  // Jobs run one at a time on their own thread (measurements must not overlap); timers and the
  // measurement-rate gauge live on the control context.
  boost::asio::io_context jobs_io, control_io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> jobs_work, control_work;
  std::thread jobs_thread, control_thread;
  std::optional<boost::asio::steady_timer> rate_timer;
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::mutex cancel_mu;
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> cancel_flags;
  // The turns: job ids in the order the executor will run them, and how long each job has run
  // so far (a "seconds" budget spans its turns; a restarted daemon starts it anew).
  std::mutex queue_mu;
  std::deque<std::string> queue;
  std::map<std::string, double> spent_s;
  bool in_turn = false;  //!< a job is running its turn (it has left `queue`)

  Metrics metrics;

  // Lookups: emitted kernels and whole answers, the latter valid while the change stamp is.
  std::mutex source_mu;
  std::map<std::string, tuner::RecordKernel> kernel_cache;                 // workload + config + target key
  std::map<std::string, std::pair<std::int64_t, nlohmann::json>> answers;  // GET /v1/best by keys

  // Remote workers.
  LeaseBoard board;
  struct Worker {
    std::string target_key, name;
    std::int64_t last_seen_unix_ms = 0;
  };
  std::mutex workers_mu;
  std::map<std::string, Worker> workers;

  explicit Impl(ServiceOptions o);

  //! The target a request names: a remote worker's target key, else the local backend's.
  codegen::TargetInfo target_of(const nlohmann::json& req, bool* remote);
  //! The local backend of that name, made on first use.
  codegen::Backend& backend(const std::string& name);

  // jobs.cpp
  std::shared_ptr<std::atomic<bool>> cancel_flag(const std::string& id);
  void enqueue(const std::string& id);
  //! Runs one turn of the job; true when it should queue again for its next turn.
  bool run_job(const std::string& id);
  // models.cpp: a model job's turn (the scheduler over its tasks), and what tells one apart.
  bool run_model_job(db::JobRow row, const nlohmann::json& request);
  //! A job's stored request (parsed, possibly discarded) is a model job's.
  static bool is_model_request(const nlohmann::json& request);
  //! How many jobs run before a queued one; nullopt when it is not waiting for a turn.
  std::optional<int> queue_position(const std::string& id);
  nlohmann::json job_json(const db::JobRow& j);
  void tick_rate();

  // lookups.cpp
  nlohmann::json best_answer(const tuner::BestLookup& found, const ir::Workload& w, codegen::Backend& be);
};

}  // namespace tiletune::server
