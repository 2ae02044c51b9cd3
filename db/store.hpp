// db/store.hpp
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tiletune::db {

//! A bound op: its key is the hash of `canonical_text` (which includes the sizes).
struct WorkloadRow {
  std::string key;
  std::string op_name;
  std::string canonical_text;
  std::string sizes_json;  //!< {"M":512,...}
  std::string op_text;     //!< the op with its own index names (configs name them); "" in old rows
};

//! A backend on a device with a toolchain: the key hashes the fingerprint.
struct TargetRow {
  std::string key;
  std::string backend;           //!< "cpu", ...
  std::string family;            //!< same device family, other toolchain: lookup fallback
  std::string fingerprint_json;  //!< CPU model, ISA flags, cores, compiler, flags, codegen version
  std::string traits_json;       //!< what the schedule space needs of it (codegen::traits_to_json); "" in old rows
};

//! One measurement of one config. Failures are records too: error_class is empty for success.
struct Record {
  std::int64_t id = 0;  //!< assigned by the store
  std::string workload_key;
  std::string target_key;
  std::string config_key;   //!< hash of config_json
  std::string config_json;  //!< canonical (sorted keys) JSON
  std::vector<double> times_s;  //!< every timed repeat, seconds; empty on failure
  std::string error_class;      //!< "" | "build_error" | "runtime_error" | "timeout" | "wrong_result" | ...
  std::string error_message;
  std::string measure_params_json;  //!< repeats, min duration, threads, tolerance
  std::string tool_version;
  std::int64_t created_unix_ms = 0;

  bool ok() const { return error_class.empty(); }
  //! Median of times_s; +infinity for a failure.
  double median_s() const;
};

//! Filters of Store::records; empty strings match everything. Pages go by id: pass the last
//! id seen as after_id.
struct RecordQuery {
  std::string workload_key;
  std::string target_key;
  std::int64_t after_id = 0;
  int limit = 1000;
  bool ok_only = false;  //!< successful records only
};

//! A trained cost model of one kind for one target, with what it was trained on.
struct ModelRow {
  std::string kind;        //!< "xgb", "nn"
  std::string target_key;
  int feature_version = 0;
  std::int64_t records = 0;  //!< training records
  std::string metrics_json;  //!< held-out metrics at training time
  std::string blob;          //!< costmodel::save_model's bytes
  std::int64_t created_unix_ms = 0;
};

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

//! Where records live. One implementation today (SQLite); the server shares it across threads,
//! so implementations must be safe to call from several threads and several processes.
class Store {
 public:
  virtual ~Store() = default;

  virtual void put_workload(const WorkloadRow& w) = 0;  //!< insert or ignore (keys are content hashes)
  virtual void put_target(const TargetRow& t) = 0;      //!< insert or ignore
  virtual std::optional<WorkloadRow> workload(const std::string& key) = 0;
  virtual std::optional<TargetRow> target(const std::string& key) = 0;
  virtual std::vector<TargetRow> targets() = 0;

  //! Appends a record and returns its id. A record with the same (workload, target, config_key)
  //! already present is not doubled: the existing id is returned.
  virtual std::int64_t add_record(const Record& r) = 0;

  //! The fastest successful record, if any.
  virtual std::optional<Record> best(const std::string& workload_key, const std::string& target_key) = 0;
  //! Successful records, fastest first, at most k.
  virtual std::vector<Record> top_k(const std::string& workload_key, const std::string& target_key, int k) = 0;
  //! All records (failures too) in insertion order.
  virtual std::vector<Record> history(const std::string& workload_key, const std::string& target_key) = 0;
  virtual bool has_config(const std::string& workload_key, const std::string& target_key,
                          const std::string& config_key) = 0;
  virtual std::int64_t count_records(const std::string& workload_key, const std::string& target_key) = 0;
  //! Records by id, filtered, at most query.limit.
  virtual std::vector<Record> records(const RecordQuery& query) = 0;
  virtual std::vector<WorkloadRow> workloads() = 0;

  //! Stores a model, replacing the one of the same kind and target.
  virtual void put_model(const ModelRow& m) = 0;
  virtual std::optional<ModelRow> model(const std::string& kind, const std::string& target_key) = 0;

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
  //! Changes whenever anything is committed to the database, by this store or any other
  //! connection: answers cached under an equal stamp are still current.
  virtual std::int64_t change_stamp() = 0;
  //! "ok", or what SQLite's integrity_check reports.
  virtual std::string integrity_check() = 0;
};

//! Opens (creating if needed) an SQLite database file: WAL, busy timeout, migrations applied.
//! Throws tiletune::Error(Database) if the file is not a tiletune database or is from a newer
//! schema version.
std::unique_ptr<Store> open_sqlite_store(const std::string& path);

//! Record <-> JSON in the exported form described by schemas/record.schema.json.
std::string record_to_json(const Record& r);
Record record_from_json(const std::string& json);  //!< throws Error(InvalidInput) on bad input

}  // namespace tiletune::db
