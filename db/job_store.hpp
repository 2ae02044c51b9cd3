// db/job_store.hpp
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tiletune::db {

//! A tuning job of the daemon: persisted so that a restarted daemon resumes it.
struct JobRow {
  std::string id;
  std::string request_key;   //!< identical active requests share one job
  std::string request_json;  //!< the validated request
  std::string workload_key;
  std::string target_key;
  std::string state;  //!< "queued" | "running" | "done" | "failed" | "cancelled"
  std::int64_t done = 0, total = 0;
  std::optional<double> best_s;
  std::string error;
  std::int64_t created_unix_ms = 0, updated_unix_ms = 0;
};

//! The daemon's jobs, persisted so that a restarted daemon resumes them.
class JobStore {
 public:
  virtual ~JobStore() = default;
  //! Inserts a job, unless an active (queued or running) job has the same request_key: then
  //! that job is returned and nothing is inserted. Atomic across processes.
  virtual JobRow put_job(const JobRow& j) = 0;
  //! Updates state, progress, best and error of a job (by id).
  virtual void update_job(const JobRow& j) = 0;
  //! Moves a job from one state to another only if it is in `from`; returns whether it did.
  virtual bool set_job_state_if(const std::string& id, const std::string& from, const std::string& to) = 0;
  virtual std::optional<JobRow> job(const std::string& id) = 0;
  //! Jobs, newest first, optionally of one state.
  virtual std::vector<JobRow> jobs(const std::string& state, int limit) = 0;
};

}  // namespace tiletune::db
