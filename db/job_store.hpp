// db/job_store.hpp
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tiletune::db {

//! A tuning job of the daemon: persisted so that a restarted daemon resumes it, and so that
//! several daemons on one database share one queue.
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
  //! The daemon running it ("" unless running) and until when its claim holds: a daemon that
  //! dies stops renewing, and another takes the job over once the claim has run out.
  std::string owner;
  std::int64_t lease_until_unix_ms = 0;
  double spent_s = 0;  //!< time its turns have taken so far (a "seconds" budget spans them)
};

//! The daemon's jobs. Every call is atomic across processes.
class JobStore {
 public:
  virtual ~JobStore() = default;
  //! Inserts a job, unless an active (queued or running) job has the same request_key: then
  //! that job is returned and nothing is inserted.
  virtual JobRow put_job(const JobRow& j) = 0;
  //! Writes state, progress, best, error and spent time of a job that `j.owner` holds (for an
  //! empty owner: a job nobody holds); a state other than "running" releases it. Returns false,
  //! writing nothing, when the job is not held so (it was cancelled, or another daemon took it
  //! over after this one's claim ran out).
  virtual bool update_job(const JobRow& j) = 0;
  //! Moves a job from one state to another only if it is in `from`; returns whether it did. A
  //! new state other than "running" releases the job: its owner finds out at its next renewal.
  virtual bool set_job_state_if(const std::string& id, const std::string& from, const std::string& to) = 0;
  //! The job that has waited longest for a turn (by updated time: a job whose turn ended goes
  //! behind those waiting), queued or running under a claim that ran out before `now_unix_ms`,
  //! now running for `owner` until now + lease_ms. nullopt when no job waits.
  virtual std::optional<JobRow> claim_job(const std::string& owner, std::int64_t now_unix_ms,
                                          std::int64_t lease_ms) = 0;
  //! Extends the owner's claim to now + lease_ms; false when the owner no longer holds the job.
  virtual bool renew_job(const std::string& id, const std::string& owner, std::int64_t now_unix_ms,
                         std::int64_t lease_ms) = 0;
  virtual std::optional<JobRow> job(const std::string& id) = 0;
  //! What a job measured beside its records (JSON text), replacing an earlier one; and reading it
  //! back (nullopt: none stored).
  virtual void put_job_result(const std::string& id, const std::string& result_json) = 0;
  virtual std::optional<std::string> job_result(const std::string& id) = 0;
  //! Jobs, newest first, optionally of one state.
  virtual std::vector<JobRow> jobs(const std::string& state, int limit) = 0;
};

}  // namespace tiletune::db
