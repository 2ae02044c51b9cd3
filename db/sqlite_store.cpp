// The SQLite store: one machine's database file (the default), behind the same interfaces as
// the PostgreSQL store; several processes may share the file (WAL, BEGIN IMMEDIATE writes).
#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "db/sqlite_schema.hpp"
#include "db/sqlite_statement.hpp"
#include "db/store.hpp"
#include "support/error.hpp"

namespace tiletune::db {
namespace {

using namespace sqlite;  // Statement, WriteTransaction, exec, fail

// Column list shared by every record query, in the order read_record expects.
const std::string kRecordColumns =
    "id, workload_key, target_key, config_key, config_json, times_json, error_class, "
    "error_message, measure_params_json, tool_version, created_unix_ms";

Record read_record(const Statement& st) {
  Record r;
  r.id = st.integer(0);
  r.workload_key = st.text(1);
  r.target_key = st.text(2);
  r.config_key = st.text(3);
  r.config_json = st.text(4);
  try {
    r.times_s = nlohmann::json::parse(st.text(5)).get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::Database, "record " + std::to_string(r.id) + " has corrupt times_json: " + e.what());
  }
  r.error_class = st.text(6);  // NULL (success) reads as ""
  r.error_message = st.text(7);
  r.measure_params_json = st.text(8);
  r.tool_version = st.text(9);
  r.created_unix_ms = st.integer(10);
  return r;
}

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(const std::string& path) : path_(path) {
    sqlite3* raw = nullptr;
    int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    db_.reset(raw);
    if (rc != SQLITE_OK) fail(raw, "cannot open database '" + path + "'");
    sqlite3_extended_result_codes(raw, 1);
    sqlite3_busy_timeout(raw, 10000);
    // The first statement that reads the file: a file that is not SQLite fails here.
    exec(raw, "PRAGMA journal_mode=WAL", "cannot open database '" + path + "'");
    exec(raw, "PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL", "configuring database '" + path + "'");
    migrate(raw, path);
  }

  void put_workload(const WorkloadRow& w) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    insert_workload(w);
    tx.commit();
  }

  void put_target(const TargetRow& t) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    insert_target(t);
    tx.commit();
  }

  std::optional<WorkloadRow> workload(const std::string& key) override {
    std::lock_guard lock(mu_);
    Statement st(db(), "SELECT key, op_name, canonical_text, sizes_json, op_text FROM workloads WHERE key = ?");
    if (!st.bind(key).step()) return std::nullopt;
    return WorkloadRow{st.text(0), st.text(1), st.text(2), st.text(3), st.text(4)};
  }

  std::optional<TargetRow> target(const std::string& key) override {
    std::lock_guard lock(mu_);
    Statement st(db(), "SELECT key, backend, family, fingerprint_json, traits_json FROM targets WHERE key = ?");
    if (!st.bind(key).step()) return std::nullopt;
    return TargetRow{st.text(0), st.text(1), st.text(2), st.text(3), st.text(4)};
  }

  std::vector<TargetRow> targets() override {
    std::lock_guard lock(mu_);
    Statement st(db(), "SELECT key, backend, family, fingerprint_json, traits_json FROM targets ORDER BY created, key");
    std::vector<TargetRow> out;
    while (st.step()) out.push_back({st.text(0), st.text(1), st.text(2), st.text(3), st.text(4)});
    return out;
  }

  std::int64_t add_record(const Record& r) override {
    check_record(r);
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    std::int64_t id = insert_record(r).first;
    tx.commit();
    return id;
  }

  MergeCounts merge(const RecordBatch& batch) override {
    for (auto& r : batch.records) check_record(r);
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    for (auto& w : batch.workloads) insert_workload(w);
    for (auto& t : batch.targets) insert_target(t);
    MergeCounts counts;
    for (auto& r : batch.records) ++(insert_record(r).second ? counts.imported : counts.duplicates);
    tx.commit();
    return counts;
  }

  bool retime(std::int64_t id, const std::vector<double>& times_s, const std::string& measure_params_json) override {
    check_times(times_s);
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    Statement(db(),
              "UPDATE records SET times_json = ?, median_s = ?, measure_params_json = ? "
              "WHERE id = ? AND error_class IS NULL")
        .bind(nlohmann::json(times_s).dump(), time_of(times_s, measure_params_json), measure_params_json, id)
        .step();
    bool changed = sqlite3_changes(db()) > 0;
    tx.commit();
    return changed;
  }

  std::vector<Record> records(const RecordQuery& q) override {
    // Empty filters match everything: "? = ''" short-circuits the comparison. median_s is NULL
    // exactly for failures, which never rank.
    return query("SELECT " + kRecordColumns + " FROM records WHERE " + kRecordFilter +
                     (q.fastest_first ? " AND median_s IS NOT NULL ORDER BY median_s, id" : " ORDER BY id") +
                     " LIMIT ?",
                 q.workload_key, q.workload_key, q.target_key, q.target_key, q.config_key, q.config_key, q.after_id,
                 q.ok_only ? 1 : 0, q.limit < 0 ? 0 : q.limit);
  }

  std::int64_t count(const RecordQuery& q) override {
    std::lock_guard lock(mu_);
    Statement st(db(), ("SELECT COUNT(*) FROM records WHERE " + kRecordFilter).c_str());
    st.bind(q.workload_key, q.workload_key, q.target_key, q.target_key, q.config_key, q.config_key, std::int64_t(0),
            q.ok_only || q.fastest_first ? 1 : 0)
        .step();
    return st.integer(0);
  }

  std::vector<WorkloadRow> workloads() override {
    std::lock_guard lock(mu_);
    Statement st(db(), "SELECT key, op_name, canonical_text, sizes_json, op_text FROM workloads ORDER BY created, key");
    std::vector<WorkloadRow> out;
    while (st.step()) out.push_back({st.text(0), st.text(1), st.text(2), st.text(3), st.text(4)});
    return out;
  }

  void put_model(const ModelRow& m) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    try {
      Statement(db(),
                "INSERT OR REPLACE INTO models (kind, target_key, feature_version, records, metrics_json, blob, "
                "created_unix_ms) VALUES (?, ?, ?, ?, ?, ?, ?)")
          .bind(m.kind, m.target_key, m.feature_version, m.records, m.metrics_json, Blob{m.blob},
                m.created_unix_ms ? m.created_unix_ms : now_unix_ms())
          .step();
      Statement(db(),
                "INSERT INTO model_history (kind, target_key, feature_version, records, metrics_json, "
                "created_unix_ms) VALUES (?, ?, ?, ?, ?, ?)")
          .bind(m.kind, m.target_key, m.feature_version, m.records, m.metrics_json,
                m.created_unix_ms ? m.created_unix_ms : now_unix_ms())
          .step();
    } catch (const Error&) {
      if (sqlite3_extended_errcode(db()) == SQLITE_CONSTRAINT_FOREIGNKEY)
        throw_error(ErrorKind::Database, "put_model: target '" + m.target_key + "' is not in the database");
      throw;
    }
    tx.commit();
  }

  std::optional<ModelRow> model(const std::string& kind, const std::string& target_key) override {
    std::lock_guard lock(mu_);
    Statement st(db(),
                 "SELECT kind, target_key, feature_version, records, metrics_json, blob, created_unix_ms "
                 "FROM models WHERE kind = ? AND target_key = ?");
    if (!st.bind(kind, target_key).step()) return std::nullopt;
    return ModelRow{st.text(0), st.text(1),   static_cast<int>(st.integer(2)), st.integer(3), st.text(4),
                    st.blob(5), st.integer(6)};
  }

  void put_job_result(const std::string& id, const std::string& result_json) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    Statement(db(), "INSERT OR REPLACE INTO job_results (job_id, result_json, created_unix_ms) VALUES (?, ?, ?)")
        .bind(id, result_json, now_unix_ms())
        .step();
    tx.commit();
  }

  std::optional<std::string> job_result(const std::string& id) override {
    std::lock_guard lock(mu_);
    Statement st(db(), "SELECT result_json FROM job_results WHERE job_id = ?");
    if (!st.bind(id).step()) return std::nullopt;
    return st.text(0);
  }

  std::vector<ModelRow> model_history(const std::string& target_key) override {
    std::lock_guard lock(mu_);
    Statement st(db(),
                 "SELECT kind, target_key, feature_version, records, metrics_json, created_unix_ms "
                 "FROM model_history WHERE target_key = ? ORDER BY created_unix_ms, rowid");
    st.bind(target_key);
    std::vector<ModelRow> out;
    while (st.step())
      out.push_back({st.text(0), st.text(1), static_cast<int>(st.integer(2)), st.integer(3), st.text(4), "",
                     st.integer(5)});
    return out;
  }

  JobRow put_job(const JobRow& j) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    {
      Statement st(db(), ("SELECT " + kJobColumns +
                          " FROM jobs WHERE request_key = ? AND state IN ('queued', "
                          "'running') ORDER BY created_unix_ms LIMIT 1")
                             .c_str());
      if (st.bind(j.request_key).step()) return read_job(st);  // the transaction rolls back: nothing written
    }
    std::int64_t now = now_unix_ms();
    Statement(db(),
              "INSERT INTO jobs (id, request_key, request_json, workload_key, target_key, state, done, total, "
              "best_s, error, created_unix_ms, updated_unix_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(j.id, j.request_key, j.request_json, j.workload_key, j.target_key, j.state, j.done, j.total, j.best_s,
              j.error, now, now)
        .step();
    tx.commit();
    JobRow out = j;
    out.created_unix_ms = out.updated_unix_ms = now;
    return out;
  }

  bool update_job(const JobRow& j) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    Statement(db(),
              "UPDATE jobs SET state = ?, done = ?, total = ?, best_s = ?, error = ?, spent_s = ?, updated_unix_ms = ?, "
              "owner = CASE WHEN ? = 'running' THEN owner ELSE '' END "
              "WHERE id = ? AND owner = ? AND (? = '' OR state = 'running')")
        .bind(j.state, j.done, j.total, j.best_s, j.error, j.spent_s, now_unix_ms(), j.state, j.id, j.owner, j.owner)
        .step();
    bool changed = sqlite3_changes(db()) > 0;
    tx.commit();
    return changed;
  }

  bool set_job_state_if(const std::string& id, const std::string& from, const std::string& to) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    Statement(db(),
              "UPDATE jobs SET state = ?, updated_unix_ms = ?, owner = CASE WHEN ? = 'running' THEN owner ELSE '' END "
              "WHERE id = ? AND state = ?")
        .bind(to, now_unix_ms(), to, id, from)
        .step();
    bool changed = sqlite3_changes(db()) > 0;
    tx.commit();
    return changed;
  }

  std::optional<JobRow> claim_job(const std::string& owner, std::int64_t now, std::int64_t lease_ms) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());  // BEGIN IMMEDIATE: one claimant at a time across processes
    Statement st(db(), ("UPDATE jobs SET state = 'running', owner = ?, lease_until_unix_ms = ?, updated_unix_ms = ? "
                        "WHERE id = (SELECT id FROM jobs WHERE state = 'queued' OR (state = 'running' AND "
                        "lease_until_unix_ms < ?) ORDER BY updated_unix_ms, id LIMIT 1) RETURNING " +
                        kJobColumns)
                           .c_str());
    if (!st.bind(owner, now + lease_ms, now, now).step()) return std::nullopt;
    JobRow out = read_job(st);
    st.step();  // the statement completes before the commit
    tx.commit();
    return out;
  }

  bool renew_job(const std::string& id, const std::string& owner, std::int64_t now, std::int64_t lease_ms) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    Statement(db(), "UPDATE jobs SET lease_until_unix_ms = ? WHERE id = ? AND owner = ? AND state = 'running'")
        .bind(now + lease_ms, id, owner)
        .step();
    bool held = sqlite3_changes(db()) > 0;
    tx.commit();
    return held;
  }

  std::optional<JobRow> job(const std::string& id) override {
    std::lock_guard lock(mu_);
    Statement st(db(), ("SELECT " + kJobColumns + " FROM jobs WHERE id = ?").c_str());
    if (!st.bind(id).step()) return std::nullopt;
    return read_job(st);
  }

  std::vector<JobRow> jobs(const std::string& state, int limit) override {
    std::lock_guard lock(mu_);
    Statement st(db(), ("SELECT " + kJobColumns +
                        " FROM jobs WHERE (? = '' OR state = ?) "
                        "ORDER BY created_unix_ms DESC, id LIMIT ?")
                           .c_str());
    st.bind(state, state, limit < 0 ? 0 : limit);
    std::vector<JobRow> out;
    while (st.step()) out.push_back(read_job(st));
    return out;
  }

  void put_worker(const WorkerRow& w) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    Statement(db(),
              "INSERT INTO workers (id, name, target_key, registered_unix_ms, last_seen_unix_ms) VALUES (?, ?, ?, ?, ?) "
              "ON CONFLICT (id) DO UPDATE SET name = excluded.name, target_key = excluded.target_key")
        .bind(w.id, w.name, w.target_key, w.registered_unix_ms, w.last_seen_unix_ms)
        .step();
    tx.commit();
  }

  std::optional<WorkerRow> worker(const std::string& id) override {
    std::lock_guard lock(mu_);
    Statement st(db(), "SELECT id, name, target_key, registered_unix_ms, last_seen_unix_ms FROM workers WHERE id = ?");
    if (!st.bind(id).step()) return std::nullopt;
    return WorkerRow{st.text(0), st.text(1), st.text(2), st.integer(3), st.integer(4)};
  }

  bool touch_worker(const std::string& id, std::int64_t now) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    Statement(db(), "UPDATE workers SET last_seen_unix_ms = ? WHERE id = ?").bind(now, id).step();
    bool known = sqlite3_changes(db()) > 0;
    tx.commit();
    return known;
  }

  std::vector<WorkerRow> workers() override {
    std::lock_guard lock(mu_);
    Statement st(db(),
                 "SELECT id, name, target_key, registered_unix_ms, last_seen_unix_ms FROM workers "
                 "ORDER BY registered_unix_ms, id");
    std::vector<WorkerRow> out;
    while (st.step()) out.push_back({st.text(0), st.text(1), st.text(2), st.integer(3), st.integer(4)});
    return out;
  }

  void post_batch(const BatchRow& b) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    Statement(db(),
              "INSERT INTO batches (id, job_id, target_key, task_json, worker_id, deadline_unix_ms, posted_unix_ms, "
              "results_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(b.id, b.job_id, b.target_key, b.task_json, b.worker_id, b.deadline_unix_ms, b.posted_unix_ms,
              b.results_json)
        .step();
    tx.commit();
  }

  std::optional<BatchRow> lease_batch(const std::string& worker_id, const std::string& target_key, std::int64_t now,
                                      std::int64_t lease_ms) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    Statement st(db(), ("UPDATE batches SET worker_id = ?, deadline_unix_ms = ? WHERE id = (SELECT id FROM batches "
                        "WHERE target_key = ? AND results_json IS NULL AND (worker_id = '' OR deadline_unix_ms < ?) "
                        "ORDER BY posted_unix_ms, id LIMIT 1) RETURNING " +
                        kBatchColumns)
                           .c_str());
    if (!st.bind(worker_id, now + lease_ms, target_key, now).step()) return std::nullopt;
    BatchRow out = read_batch(st);
    st.step();
    tx.commit();
    return out;
  }

  Completion complete_batch(const std::string& id, const std::string& worker_id,
                            const std::string& results_json) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    auto b = find_batch(id);
    if (!b || b->results_json) return Completion::Unknown;
    if (b->worker_id != worker_id) return Completion::TakenOver;
    Statement(db(), "UPDATE batches SET results_json = ? WHERE id = ?").bind(results_json, id).step();
    tx.commit();
    return Completion::Accepted;
  }

  std::optional<BatchRow> batch(const std::string& id) override {
    std::lock_guard lock(mu_);
    return find_batch(id);
  }

  void remove_batch(const std::string& id) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    Statement(db(), "DELETE FROM batches WHERE id = ?").bind(id).step();
    tx.commit();
  }

  void remove_job_batches(const std::string& job_id) override {
    std::lock_guard lock(mu_);
    WriteTransaction tx(db());
    Statement(db(), "DELETE FROM batches WHERE job_id = ?").bind(job_id).step();
    tx.commit();
  }

  std::int64_t change_stamp() override {
    std::lock_guard lock(mu_);
    Statement st(db(), "PRAGMA data_version");  // moves with other connections' commits
    st.step();
    return (st.integer(0) << 32) + WriteTransaction::commits_.load();
  }

  std::string integrity_check() override {
    std::lock_guard lock(mu_);
    Statement st(db(), "PRAGMA integrity_check");
    std::string out;
    while (st.step()) out += (out.empty() ? "" : "; ") + st.text(0);
    return out;
  }

 private:
  sqlite3* db() const { return db_.get(); }

  // Inserts inside a caller's write transaction.
  void insert_workload(const WorkloadRow& w) {
    Statement(db(),
              "INSERT INTO workloads (key, op_name, canonical_text, sizes_json, op_text, created) "
              "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")
        .bind(w.key, w.op_name, w.canonical_text, w.sizes_json, w.op_text, now_unix_ms())
        .step();
  }

  void insert_target(const TargetRow& t) {
    Statement(db(),
              "INSERT INTO targets (key, backend, family, fingerprint_json, traits_json, created) "
              "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET traits_json = excluded.traits_json "
              "WHERE targets.traits_json = ''")
        .bind(t.key, t.backend, t.family, t.fingerprint_json, t.traits_json, now_unix_ms())
        .step();
  }

  //! The record's id, and whether it is new (else the earlier record of its config).
  std::pair<std::int64_t, bool> insert_record(const Record& r) {
    std::optional<double> median;
    if (r.ok()) median = r.median_s();
    std::optional<std::string> error_class;
    if (!r.ok()) error_class = r.error_class;
    std::string times = nlohmann::json(r.times_s).dump();
    std::int64_t created = r.created_unix_ms ? r.created_unix_ms : now_unix_ms();
    try {
      Statement(db(),
                "INSERT INTO records (workload_key, target_key, config_key, config_json, times_json, "
                "median_s, error_class, error_message, measure_params_json, tool_version, created_unix_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")
          .bind(r.workload_key, r.target_key, r.config_key, r.config_json, times, median, error_class, r.error_message,
                r.measure_params_json, r.tool_version, created)
          .step();
    } catch (const Error&) {
      if (sqlite3_extended_errcode(db()) == SQLITE_CONSTRAINT_FOREIGNKEY)
        throw_error(ErrorKind::Database, "add_record: workload '" + r.workload_key + "' or target '" + r.target_key +
                                             "' is not in the database (put it first)");
      throw;
    }
    bool inserted = sqlite3_changes(db()) > 0;
    // The row is either the one just inserted or the earlier duplicate: one query serves both.
    Statement st(db(), "SELECT id FROM records WHERE workload_key = ? AND target_key = ? AND config_key = ?");
    if (!st.bind(r.workload_key, r.target_key, r.config_key).step())
      throw_error(ErrorKind::Internal, "add_record: inserted record not found");
    return {st.integer(0), inserted};
  }

  static inline const std::string kRecordFilter =
      "(? = '' OR workload_key = ?) AND (? = '' OR target_key = ?) AND (? = '' OR config_key = ?) AND id > ? AND "
      "(? = 0 OR median_s IS NOT NULL)";
  static inline const std::string kJobColumns =
      "id, request_key, request_json, workload_key, target_key, state, done, total, best_s, error, "
      "created_unix_ms, updated_unix_ms, owner, lease_until_unix_ms, spent_s";
  static JobRow read_job(const Statement& st) {
    JobRow j{st.text(0),    st.text(1),    st.text(2),   st.text(3), st.text(4),     st.text(5),
             st.integer(6), st.integer(7), std::nullopt, st.text(9), st.integer(10), st.integer(11),
             st.text(12),   st.integer(13), st.real(14)};
    if (!st.is_null(8)) j.best_s = st.real(8);
    return j;
  }

  static inline const std::string kBatchColumns =
      "id, job_id, target_key, task_json, worker_id, deadline_unix_ms, posted_unix_ms, results_json";
  static BatchRow read_batch(const Statement& st) {
    BatchRow b{st.text(0), st.text(1), st.text(2), st.text(3), st.text(4), st.integer(5), st.integer(6), std::nullopt};
    if (!st.is_null(7)) b.results_json = st.text(7);
    return b;
  }
  std::optional<BatchRow> find_batch(const std::string& id) {
    Statement st(db(), ("SELECT " + kBatchColumns + " FROM batches WHERE id = ?").c_str());
    if (!st.bind(id).step()) return std::nullopt;
    return read_batch(st);
  }

  template <class... Args>
  std::vector<Record> query(const std::string& sql, const Args&... args) {
    std::lock_guard lock(mu_);
    Statement st(db(), sql.c_str());
    st.bind(args...);
    std::vector<Record> out;
    while (st.step()) out.push_back(read_record(st));
    return out;
  }

  std::string path_;
  DbPtr db_;
  std::mutex mu_;  // one connection, used by one thread at a time
};

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const std::string& path, bool create) {
  std::error_code ec;
  if (!create && !std::filesystem::exists(path, ec))
    throw_error(ErrorKind::NotFound, "no database '" + path + "' (tune something first, or give --db)");
  return std::make_unique<SqliteStore>(path);
}

}  // namespace tiletune::db
