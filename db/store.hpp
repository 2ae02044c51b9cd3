// db/store.hpp
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "db/job_store.hpp"
#include "db/model_store.hpp"
#include "db/worker_store.hpp"

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
  std::string config_key;       //!< hash of config_json
  std::string config_json;      //!< canonical (sorted keys) JSON
  std::vector<double> times_s;  //!< every timed repeat, seconds; empty on failure
  std::string error_class;      //!< "" | "build_error" | "runtime_error" | "timeout" | "wrong_result" | ...
  std::string error_message;
  std::string measure_params_json;  //!< repeats, min duration, threads, tolerance
  std::string tool_version;
  std::int64_t created_unix_ms = 0;

  bool ok() const { return error_class.empty(); }
  //! The record's time (time_of): the median of times_s, or where they come from several
  //! side-by-side sessions the geometric mean of the sessions' medians; +infinity for a failure.
  double median_s() const;
  //! Interquartile range of times_s over their median; 0 with fewer than two repeats.
  double spread() const;
};

//! The measuring parameter (in Record::measure_params_json) that splits a record's times into
//! the side-by-side sessions they came from: each session's count of times, in order.
inline constexpr const char* kSessionsParam = "sessions";

//! A record's time from its repeats and measuring parameters: Record::median_s, and what the
//! stores keep and order by. Where the times come from several side-by-side sessions
//! (kSessionsParam), the geometric mean of the sessions' medians: each session times all of a
//! workload's records in turns, so it orders them under one condition of the machine, but a
//! session on a slower machine shifts all of them alike (the median record of a workload by 1.04x
//! between two sessions of the corpus, by 1.18x at the 90th percentile),
//! and each one lays the kernels and their data out anew. The median of all times would fall
//! into the gap between two sessions' times; the geometric mean keeps each session's order and
//! takes a shift of all alike out of it. Otherwise the median of the times.
double time_of(const std::vector<double>& times_s, const std::string& measure_params_json);

//! Filters of RecordStore::records; empty strings match everything. Pages go by id: pass the
//! last id seen as after_id.
struct RecordQuery {
  std::string workload_key;
  std::string target_key;
  std::int64_t after_id = 0;
  int limit = 1000;
  bool ok_only = false;         //!< successful records only
  std::string config_key = {};  //!< one config; "" for all
  bool fastest_first = false;   //!< by median, ties to the older record (successful records only); else by id
};

//! Rows moved between databases together (tiletune db push/pull, POST /v1/records): the
//! workloads and targets its records name come with them.
struct RecordBatch {
  std::vector<WorkloadRow> workloads;
  std::vector<TargetRow> targets;
  std::vector<Record> records;
};

//! What merging a batch did: records new to the store, and those it already had (by config).
struct MergeCounts {
  std::int64_t imported = 0, duplicates = 0;
};

//! Where measurements live: the workloads and targets they name, and the records. The one
//! interface every store implements (SQLite, PostgreSQL, in memory for tests); they must be safe to call
//! from several threads, and a database-backed one from several processes.
class RecordStore {
 public:
  virtual ~RecordStore() = default;

  virtual void put_workload(const WorkloadRow& w) = 0;  //!< insert or ignore (keys are content hashes)
  //! Insert or ignore; a stored target without traits (written before they existed) takes them.
  virtual void put_target(const TargetRow& t) = 0;
  virtual std::optional<WorkloadRow> workload(const std::string& key) = 0;
  virtual std::optional<TargetRow> target(const std::string& key) = 0;
  virtual std::vector<WorkloadRow> workloads() = 0;  //!< oldest first
  virtual std::vector<TargetRow> targets() = 0;      //!< oldest first

  //! Appends a record and returns its id. A record with the same (workload, target, config_key)
  //! already present is not doubled: the existing id is returned. Error(Database) when its
  //! workload or target is not stored.
  virtual std::int64_t add_record(const Record& r) = 0;
  //! Stores a batch: its workloads and targets (insert or ignore), then each record whose config
  //! the store does not have yet (ids are the store's own). Every record passes check_record
  //! before anything is written; a database-backed store writes it in one transaction.
  virtual MergeCounts merge(const RecordBatch& batch);
  //! Replaces a successful record's times, and the parameters they were taken with, by a later
  //! measurement of its config (the tuner's side-by-side round): false when no successful
  //! record has that id. Error(InvalidInput) without times or with a time that is not positive.
  virtual bool retime(std::int64_t id, const std::vector<double>& times_s, const std::string& measure_params_json) = 0;
  //! Records matching the query, at most query.limit.
  virtual std::vector<Record> records(const RecordQuery& query) = 0;
  //! How many records match the query (its limit and after_id ignored).
  virtual std::int64_t count(const RecordQuery& query) = 0;

  //! Changes whenever anything is committed, by this store or any other connection: answers
  //! cached under an equal stamp are still current.
  virtual std::int64_t change_stamp() = 0;
  //! "ok", or what the store's own consistency check reports.
  virtual std::string integrity_check() = 0;

  // Conveniences over records() and count().
  //! The fastest successful record, if any.
  std::optional<Record> best(const std::string& workload_key, const std::string& target_key);
  //! Successful records, fastest first, at most k.
  std::vector<Record> top_k(const std::string& workload_key, const std::string& target_key, int k);
  //! All records (failures too) in insertion order.
  std::vector<Record> history(const std::string& workload_key, const std::string& target_key);
  bool has_config(const std::string& workload_key, const std::string& target_key, const std::string& config_key);
  std::int64_t count_records(const std::string& workload_key, const std::string& target_key);
};

//! A database that holds it all: what the CLI and the daemon open.
class Store : public RecordStore, public ModelStore, public JobStore, public WorkerStore {};

//! Opens (creating if needed) an SQLite database file: WAL, busy timeout, migrations applied.
//! Throws tiletune::Error(Database) if the file is not a tiletune database or is from a newer
//! schema version.
//! With `create` false, a file that does not exist is Error(NotFound) and nothing is created
//! (commands that only read).
std::unique_ptr<Store> open_sqlite_store(const std::string& path, bool create = true);

//! Opens (creating its schema if needed) a PostgreSQL database named by a URL
//! (postgresql://user@host:port/dbname, parameters as libpq takes them). Error(Unavailable) when
//! the server cannot be reached, Error(Database) when it refuses the credentials or the schema
//! is from a newer tiletune, Error(InvalidInput) for a URL with a password in it. With `create`
//! false, a database without tiletune's schema is Error(NotFound).
std::unique_ptr<Store> open_postgres_store(const std::string& url, bool create = true);

//! Where `--db` points: a PostgreSQL URL (db/store_url.hpp) or else an SQLite file path.
std::unique_ptr<Store> open_store(const std::string& where, bool create = true);

//! A record store in memory, for tests and tools that need no file (change_stamp counts writes).
std::unique_ptr<RecordStore> make_memory_record_store();

//! Error(InvalidInput) for a record no store may hold (a success without times).
void check_record(const Record& r);
//! Error(InvalidInput) for times no successful record may hold (none, or one not positive).
void check_times(const std::vector<double>& times_s);

//! Wall-clock milliseconds since 1970: the time stamps every store writes, and the time base of
//! the claims and leases that the daemons and workers on one database share.
std::int64_t now_unix_ms();

// The exported JSON forms (schemas/record.schema.json, schemas/api.schema.json WorkloadRow and
// TargetRow); the *_from_json functions throw Error(InvalidInput) naming what is wrong.
nlohmann::json record_to_json(const Record& r);
Record record_from_json(const nlohmann::json& j);
Record record_from_text(const std::string& text);  //!< parses, then record_from_json
nlohmann::json workload_to_json(const WorkloadRow& w);
WorkloadRow workload_from_json(const nlohmann::json& j);
nlohmann::json target_to_json(const TargetRow& t);
TargetRow target_from_json(const nlohmann::json& j);

}  // namespace tiletune::db
