// server/remote.hpp
#pragma once
#include <atomic>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "db/store.hpp"
#include "measure/measure.hpp"

namespace tiletune::server {

//! Batches of candidates waiting for remote workers of a target, kept in the database so that a
//! worker of any daemon on it may take them. A job posts a batch and waits; a worker leases the
//! oldest batch of its target for lease_seconds; results complete it. A lease that runs out goes
//! back to the board for another worker, so a vanished worker loses nothing.
class LeaseBoard {
 public:
  //! A batch no worker has taken after unclaimed_seconds fails its job (no worker of its target).
  LeaseBoard(db::WorkerStore& store, double lease_seconds, double unclaimed_seconds)
      : store_(store), lease_seconds_(lease_seconds), unclaimed_seconds_(unclaimed_seconds) {}

  //! Posts `task` (workload, configs, measuring parameters) of a job for workers of the target
  //! and waits for its results; nullopt when `stop` becomes true first (the batch is withdrawn);
  //! Error(Unavailable) when no worker takes it within unclaimed_seconds.
  std::optional<std::vector<measure::MeasureResult>> run(const std::string& job_id, const std::string& target_key,
                                                         nlohmann::json task, const std::atomic<bool>& stop);
  //! The oldest batch for the target that is not leased (or whose lease ran out), now leased to
  //! the worker: the task plus "lease_id" and "lease_seconds". nullopt if there is none.
  std::optional<nlohmann::json> lease(const std::string& worker_id, const std::string& target_key);
  //! Results of a lease. Error(NotFound) for an unknown (finished or withdrawn) lease,
  //! Error(Conflict) if it is now leased to another worker.
  void complete(const std::string& lease_id, const std::string& worker_id,
                const std::vector<measure::MeasureResult>& results);

 private:
  db::WorkerStore& store_;
  double lease_seconds_, unclaimed_seconds_;
};

//! Measures a job's batches through the board (a BatchMeasurer for tuner::tune). Results are
//! matched to configs by key; a config the worker did not report fails as a runtime error.
class RemoteMeasurer : public measure::BatchMeasurer {
 public:
  RemoteMeasurer(LeaseBoard& board, std::string job_id, std::string target_key, db::WorkloadRow workload,
                 measure::MeasureOptions options, const std::atomic<bool>& stop)
      : board_(board),
        job_id_(std::move(job_id)),
        target_key_(std::move(target_key)),
        workload_(std::move(workload)),
        options_(options),
        stop_(stop) {}
  //! Throws Error(Unavailable) when stopped while waiting (nothing of the batch is stored).
  std::vector<measure::MeasureResult> measure(const std::vector<ir::Schedule>& batch) override;
  std::string params_json() const override { return options_.to_json().dump(); }

 private:
  LeaseBoard& board_;
  std::string job_id_, target_key_;
  db::WorkloadRow workload_;
  measure::MeasureOptions options_;
  const std::atomic<bool>& stop_;
};

}  // namespace tiletune::server
