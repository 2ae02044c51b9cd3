// server/service.hpp
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "codegen/backend.hpp"
#include "server/dashboard.hpp"
#include "tuner/tune.hpp"

namespace tiletune::server {

struct ServiceOptions {
  std::string db_path;
  //! What a job's request does not say: trials, strategy, batch size, measuring (timeout,
  //! timing, the kernel cache folder).
  tuner::TuneOptions job_defaults;
  codegen::BackendOptions backend;  //!< threads and device of local backends
  double lease_seconds = 120;       //!< a remote worker's batch goes to another worker after this
  double unclaimed_seconds = 600;   //!< a remote job fails when no worker takes its batch in this time
  //! Jobs take turns: one runs at most this long (then its batch in flight ends) before the
  //! next queued job gets the executor; it goes on where it stopped at its next turn.
  double slice_seconds = 60;
  //! A running job's claim lasts this long and is renewed a few times within it; a daemon that
  //! dies stops renewing, and another daemon on the database takes the job over when it runs out.
  double job_lease_seconds = 60;
  double poll_seconds = 0.5;  //!< an idle daemon looks for jobs other daemons queued this often
};

//! The daemon's work, independent of HTTP: validates requests (every body against its schema in
//! schemas/api.schema.json, op text through the parser), persists jobs in the database and runs
//! them one at a time (measurements must not overlap); daemons on one database share its jobs.
//! Answers lookups.
//! Every failure is a tiletune::Error whose kind says what the caller did wrong; the HTTP layer
//! maps kinds to statuses. Thread-safe.
class Service {
 public:
  explicit Service(ServiceOptions options);
  ~Service();  //!< stops: the job in flight finishes its batch and is queued again

  //! Starts the runner: it takes the unfinished jobs of the database (a restart resumes them;
  //! a dead daemon's are taken over when their claim runs out, at once when it ran here).
  void start();
  //! Graceful stop: no new jobs start; the running one stops after its batch in flight (its
  //! records are stored) and goes back to "queued" for this or another daemon. Idempotent.
  void stop();

  //! POST /v1/tune: returns {"job": {...}, "created": bool}; identical active requests share a job.
  nlohmann::json submit(const nlohmann::json& request);
  //! POST /v1/models: the ONNX model's bytes and {"inputs": "x=1,3,224,224;...", "trials",
  //! "round", "scheduler", "strategy", "backend", "name"} (schema ModelRequest). The model is
  //! imported before anything is stored (a bad one is Error(InvalidInput)); its tasks become
  //! one job. Returns {"job", "created", "tasks", "skipped"}.
  nlohmann::json submit_model(const std::string& onnx_bytes, const nlohmann::json& request);
  //! GET /v1/models/{id}: the job and its assessment from the records.
  nlohmann::json model(const std::string& id);
  nlohmann::json job(const std::string& id);
  nlohmann::json jobs(const std::string& state, int limit);
  //! Cancels a queued or running job; Error(Conflict) for a finished one.
  nlohmann::json cancel(const std::string& id);

  //! The best kernel of a workload on a target (a same-family target as fallback), with source.
  nlohmann::json best(const std::string& workload_key, const std::string& target_key);
  //! The same for op text (or a library name) and sizes on a backend of this machine.
  nlohmann::json best_for(const nlohmann::json& request);

  //! A page of records with the workloads and targets they name (schemas: RecordBatch).
  nlohmann::json records(const std::string& workload_key, const std::string& target_key, std::int64_t after, int limit);
  //! Imports a RecordBatch; duplicates are merged. Returns {"imported": n, "duplicates": m}.
  nlohmann::json import_records(const nlohmann::json& batch);

  //! Remote workers: register a target (WorkerRegistration) -> {"worker_id"}; lease the oldest
  //! batch of the worker's target (nullopt: nothing to do); post its results (LeaseResults).
  nlohmann::json register_worker(const nlohmann::json& registration);
  std::optional<nlohmann::json> lease(const std::string& worker_id);
  nlohmann::json complete_lease(const std::string& lease_id, const nlohmann::json& results);

  nlohmann::json ops();
  nlohmann::json targets();
  //! GET /v1/dashboard: dashboard::overview of the database, with the newest jobs and this
  //! daemon's measurement rate.
  nlohmann::json dashboard();
  //! GET /v1/dashboard/workload: dashboard::workload.
  nlohmann::json dashboard_workload(const dashboard::WorkloadQuery& query);
  //! GET /v1/dashboard/model: dashboard::model_view.
  nlohmann::json dashboard_model(const std::string& target, const std::string& kind, const std::string& workload);
  //! Prometheus text exposition: jobs by state, measurements, errors by class, requests.
  std::string metrics();
  //! Called by the HTTP layer per request, for the latency histogram.
  void observe_request(const std::string& route, int status, double seconds);

 private:
  nlohmann::json best_uncached(const std::string& workload_key, const std::string& target_key);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tiletune::server
