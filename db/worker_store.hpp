// db/worker_store.hpp
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tiletune::db {

//! A remote worker registered with a daemon; any daemon on the database knows it.
struct WorkerRow {
  std::string id, name, target_key;
  std::int64_t registered_unix_ms = 0, last_seen_unix_ms = 0;
};

//! Candidates a job posted for the remote workers of a target, and what became of them.
struct BatchRow {
  std::string id;  //!< the lease id workers see
  std::string job_id, target_key;
  std::string task_json;   //!< workload, configs, measuring parameters
  std::string worker_id;   //!< "" while nobody has leased it
  std::int64_t deadline_unix_ms = 0, posted_unix_ms = 0;
  std::optional<std::string> results_json;  //!< set once a worker completes it
};

//! What completing a batch did.
enum class Completion { Accepted, Unknown, TakenOver };

//! The remote workers and their batches, shared by every daemon on the database: a worker may
//! lease from any daemon a batch that any daemon's job posted, and a restarted daemon still
//! knows its workers. Every call is atomic across processes.
class WorkerStore {
 public:
  virtual ~WorkerStore() = default;
  virtual void put_worker(const WorkerRow& w) = 0;
  virtual std::optional<WorkerRow> worker(const std::string& id) = 0;
  //! Records that the worker was heard from; false for an unknown worker.
  virtual bool touch_worker(const std::string& id, std::int64_t now_unix_ms) = 0;
  virtual std::vector<WorkerRow> workers() = 0;  //!< oldest first

  virtual void post_batch(const BatchRow& b) = 0;
  //! The oldest batch of the target without results that no lease holds at `now_unix_ms` (never
  //! leased, or its lease ran out), now leased to the worker until now + lease_ms.
  virtual std::optional<BatchRow> lease_batch(const std::string& worker_id, const std::string& target_key,
                                              std::int64_t now_unix_ms, std::int64_t lease_ms) = 0;
  //! Stores a worker's results: Unknown for a batch that is gone or complete, TakenOver when
  //! its lease now belongs to another worker.
  virtual Completion complete_batch(const std::string& id, const std::string& worker_id,
                                    const std::string& results_json) = 0;
  virtual std::optional<BatchRow> batch(const std::string& id) = 0;
  //! Withdraws a batch (its results taken, or its job stopped waiting).
  virtual void remove_batch(const std::string& id) = 0;
  //! Withdraws every batch of a job: those a dead daemon's turn left are measured anew by the
  //! daemon that takes the job over, not by a worker for nobody.
  virtual void remove_job_batches(const std::string& job_id) = 0;
};

}  // namespace tiletune::db
