// The PostgreSQL store: the same interfaces as the SQLite store, in SQL, for a team's database that
// several daemons, CLIs and workers write at once. One connection per store (db/postgres_connection):
// a lost connection is reopened and the interrupted call run again once, so every call here is
// idempotent (inserts ignore what is stored, updates set values). A server that cannot be reached
// is Error(Unavailable): exit 4 on the CLI, 503 over REST, and the tuner retries its writes.
#include <memory>
#include <nlohmann/json.hpp>

#include "db/postgres_connection.hpp"
#include "db/postgres_schema.hpp"
#include "db/store.hpp"
#include "db/store_url.hpp"
#include "support/error.hpp"

namespace tiletune::db {
namespace {

// Column lists, in the order the readers expect.
const char* const kRecordColumns =
    "id, workload_key, target_key, config_key, config_json, times_json, error_class, "
    "error_message, measure_params_json, tool_version, created_unix_ms";
const char* const kJobColumns =
    "id, request_key, request_json, workload_key, target_key, state, done, total, best_s, error, "
    "created_unix_ms, updated_unix_ms, owner, lease_until_unix_ms, spent_s";
const char* const kBatchColumns =
    "id, job_id, target_key, task_json, worker_id, deadline_unix_ms, posted_unix_ms, results_json";
const char* const kWorkerColumns = "id, name, target_key, registered_unix_ms, last_seen_unix_ms";
// Empty filters match everything; median_s is NULL exactly for failures, which never rank.
const char* const kRecordFilter =
    "($1 = '' OR workload_key = $1) AND ($2 = '' OR target_key = $2) AND ($3 = '' OR config_key = $3) AND id > $4 "
    "AND ($5 = 0 OR median_s IS NOT NULL)";

Record read_record(const Rows& rows, int i) {
  Record r;
  r.id = rows.integer(i, 0);
  r.workload_key = rows.text(i, 1);
  r.target_key = rows.text(i, 2);
  r.config_key = rows.text(i, 3);
  r.config_json = rows.text(i, 4);
  try {
    r.times_s = nlohmann::json::parse(rows.text(i, 5)).get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::Database, "record " + std::to_string(r.id) + " has corrupt times_json: " + e.what());
  }
  r.error_class = rows.is_null(i, 6) ? "" : rows.text(i, 6);
  r.error_message = rows.text(i, 7);
  r.measure_params_json = rows.text(i, 8);
  r.tool_version = rows.text(i, 9);
  r.created_unix_ms = rows.integer(i, 10);
  return r;
}

JobRow read_job(const Rows& rows, int i) {
  JobRow j{rows.text(i, 0), rows.text(i, 1), rows.text(i, 2),     rows.text(i, 3),
           rows.text(i, 4), rows.text(i, 5), rows.integer(i, 6),  rows.integer(i, 7),
           std::nullopt,    rows.text(i, 9), rows.integer(i, 10), rows.integer(i, 11),
           rows.text(i, 12), rows.integer(i, 13), rows.real(i, 14)};
  if (!rows.is_null(i, 8)) j.best_s = rows.real(i, 8);
  return j;
}

BatchRow read_batch(const Rows& rows, int i) {
  BatchRow b{rows.text(i, 0),    rows.text(i, 1),    rows.text(i, 2), rows.text(i, 3),
             rows.text(i, 4),    rows.integer(i, 5), rows.integer(i, 6), std::nullopt};
  if (!rows.is_null(i, 7)) b.results_json = rows.text(i, 7);
  return b;
}

WorkerRow read_worker(const Rows& rows, int i) {
  return {rows.text(i, 0), rows.text(i, 1), rows.text(i, 2), rows.integer(i, 3), rows.integer(i, 4)};
}

class PostgresStore final : public Store {
 public:
  PostgresStore(const std::string& url, bool create) : db_(url, describe_store_url(url)) { migrate(db_, create); }

  void put_workload(const WorkloadRow& w) override {
    write([&] { insert_workload(w); });
  }

  void put_target(const TargetRow& t) override {
    write([&] { insert_target(t); });
  }

  std::optional<WorkloadRow> workload(const std::string& key) override {
    return read([&]() -> std::optional<WorkloadRow> {
      Rows r =
          exec("SELECT key, op_name, canonical_text, sizes_json, op_text FROM workloads WHERE key = $1", Params(key));
      if (!r.size()) return std::nullopt;
      return WorkloadRow{r.text(0, 0), r.text(0, 1), r.text(0, 2), r.text(0, 3), r.text(0, 4)};
    });
  }

  std::optional<TargetRow> target(const std::string& key) override {
    return read([&]() -> std::optional<TargetRow> {
      Rows r =
          exec("SELECT key, backend, family, fingerprint_json, traits_json FROM targets WHERE key = $1", Params(key));
      if (!r.size()) return std::nullopt;
      return TargetRow{r.text(0, 0), r.text(0, 1), r.text(0, 2), r.text(0, 3), r.text(0, 4)};
    });
  }

  std::vector<WorkloadRow> workloads() override {
    return read([&] {
      Rows r = exec("SELECT key, op_name, canonical_text, sizes_json, op_text FROM workloads ORDER BY created, key",
                    Params());
      std::vector<WorkloadRow> out;
      for (int i = 0; i < r.size(); ++i)
        out.push_back({r.text(i, 0), r.text(i, 1), r.text(i, 2), r.text(i, 3), r.text(i, 4)});
      return out;
    });
  }

  std::vector<TargetRow> targets() override {
    return read([&] {
      Rows r = exec("SELECT key, backend, family, fingerprint_json, traits_json FROM targets ORDER BY created, key",
                    Params());
      std::vector<TargetRow> out;
      for (int i = 0; i < r.size(); ++i)
        out.push_back({r.text(i, 0), r.text(i, 1), r.text(i, 2), r.text(i, 3), r.text(i, 4)});
      return out;
    });
  }

  std::int64_t add_record(const Record& r) override {
    check_record(r);
    return write([&] { return insert_record(r).first; });
  }

  MergeCounts merge(const RecordBatch& batch) override {
    for (auto& r : batch.records) check_record(r);
    return write([&] {
      for (auto& w : batch.workloads) insert_workload(w);
      for (auto& t : batch.targets) insert_target(t);
      MergeCounts counts;
      for (auto& r : batch.records) ++(insert_record(r).second ? counts.imported : counts.duplicates);
      return counts;
    });
  }

  bool retime(std::int64_t id, const std::vector<double>& times_s, const std::string& measure_params_json) override {
    check_times(times_s);
    return write([&] {
      return exec("UPDATE records SET times_json = $1, median_s = $2, measure_params_json = $3 "
                  "WHERE id = $4 AND error_class IS NULL",
                  Params(nlohmann::json(times_s).dump(), time_of(times_s, measure_params_json), measure_params_json, id))
                 .affected() > 0;
    });
  }

  std::vector<Record> records(const RecordQuery& q) override {
    const std::string sql = std::string("SELECT ") + kRecordColumns + " FROM records WHERE " + kRecordFilter +
                            (q.fastest_first ? " AND median_s IS NOT NULL ORDER BY median_s, id" : " ORDER BY id") +
                            " LIMIT $6";
    return read([&] {
      Rows r = exec(sql.c_str(), Params(q.workload_key, q.target_key, q.config_key, q.after_id, q.ok_only ? 1 : 0,
                                        q.limit < 0 ? 0 : q.limit));
      std::vector<Record> out;
      for (int i = 0; i < r.size(); ++i) out.push_back(read_record(r, i));
      return out;
    });
  }

  std::int64_t count(const RecordQuery& q) override {
    const std::string sql = std::string("SELECT COUNT(*) FROM records WHERE ") + kRecordFilter;
    return read([&] {
      return exec(sql.c_str(), Params(q.workload_key, q.target_key, q.config_key, std::int64_t(0),
                                      q.ok_only || q.fastest_first ? 1 : 0))
          .integer(0, 0);
    });
  }

  void put_model(const ModelRow& m) override {
    write([&] {
      try {
        exec(
            "INSERT INTO models (kind, target_key, feature_version, records, metrics_json, blob, created_unix_ms) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (kind, target_key) DO UPDATE SET "
            "feature_version = excluded.feature_version, records = excluded.records, "
            "metrics_json = excluded.metrics_json, blob = excluded.blob, created_unix_ms = excluded.created_unix_ms",
            Params(m.kind, m.target_key, m.feature_version, m.records, m.metrics_json, Bytes{m.blob},
                   m.created_unix_ms ? m.created_unix_ms : now_unix_ms()));
        exec(
            "INSERT INTO model_history (kind, target_key, feature_version, records, metrics_json, created_unix_ms) "
            "VALUES ($1, $2, $3, $4, $5, $6)",
            Params(m.kind, m.target_key, m.feature_version, m.records, m.metrics_json,
                   m.created_unix_ms ? m.created_unix_ms : now_unix_ms()));
      } catch (const StatementError& e) {
        if (e.sqlstate == "23503")
          throw_error(ErrorKind::Database, "put_model: target '" + m.target_key + "' is not in the database");
        throw;
      }
    });
  }

  std::optional<ModelRow> model(const std::string& kind, const std::string& target_key) override {
    return read([&]() -> std::optional<ModelRow> {
      Rows r = exec(
          "SELECT kind, target_key, feature_version, records, metrics_json, blob, created_unix_ms "
          "FROM models WHERE kind = $1 AND target_key = $2",
          Params(kind, target_key));
      if (!r.size()) return std::nullopt;
      return ModelRow{r.text(0, 0),  r.text(0, 1),   static_cast<int>(r.integer(0, 2)), r.integer(0, 3), r.text(0, 4),
                      r.bytes(0, 5), r.integer(0, 6)};
    });
  }

  void put_job_result(const std::string& id, const std::string& result_json) override {
    write([&] {
      exec(
          "INSERT INTO job_results (job_id, result_json, created_unix_ms) VALUES ($1, $2, $3) ON CONFLICT (job_id) "
          "DO UPDATE SET result_json = excluded.result_json, created_unix_ms = excluded.created_unix_ms",
          Params(id, result_json, now_unix_ms()));
    });
  }

  std::optional<std::string> job_result(const std::string& id) override {
    return read([&]() -> std::optional<std::string> {
      Rows r = exec("SELECT result_json FROM job_results WHERE job_id = $1", Params(id));
      if (!r.size()) return std::nullopt;
      return r.text(0, 0);
    });
  }

  std::vector<ModelRow> model_history(const std::string& target_key) override {
    return read([&] {
      Rows r = exec(
          "SELECT kind, target_key, feature_version, records, metrics_json, created_unix_ms "
          "FROM model_history WHERE target_key = $1 ORDER BY created_unix_ms, ctid",
          Params(target_key));
      std::vector<ModelRow> out;
      for (int i = 0; i < r.size(); ++i)
        out.push_back({r.text(i, 0), r.text(i, 1), static_cast<int>(r.integer(i, 2)), r.integer(i, 3), r.text(i, 4), "",
                       r.integer(i, 5)});
      return out;
    });
  }

  JobRow put_job(const JobRow& j) override {
    return write([&] {
      // Serializes inserts of one request key across connections: two daemons given the same
      // request at once share one job.
      exec("SELECT pg_advisory_xact_lock(hashtext($1))", Params(j.request_key));
      Rows active = exec((std::string("SELECT ") + kJobColumns +
                          " FROM jobs WHERE request_key = $1 AND state IN ('queued', 'running') "
                          "ORDER BY created_unix_ms LIMIT 1")
                             .c_str(),
                         Params(j.request_key));
      if (active.size()) return read_job(active, 0);
      std::int64_t now = now_unix_ms();
      exec(
          "INSERT INTO jobs (id, request_key, request_json, workload_key, target_key, state, done, total, best_s, "
          "error, created_unix_ms, updated_unix_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) "
          "ON CONFLICT (id) DO NOTHING",
          Params(j.id, j.request_key, j.request_json, j.workload_key, j.target_key, j.state, j.done, j.total, j.best_s,
                 j.error, now, now));
      JobRow out = j;
      out.created_unix_ms = out.updated_unix_ms = now;
      return out;
    });
  }

  bool update_job(const JobRow& j) override {
    return write([&] {
      return exec(
                 "UPDATE jobs SET state = $1, done = $2, total = $3, best_s = $4, error = $5, spent_s = $6, "
                 "updated_unix_ms = $7, owner = CASE WHEN $1 = 'running' THEN owner ELSE '' END "
                 "WHERE id = $8 AND owner = $9 AND ($9 = '' OR state = 'running')",
                 Params(j.state, j.done, j.total, j.best_s, j.error, j.spent_s, now_unix_ms(), j.id, j.owner))
                 .affected() > 0;
    });
  }

  bool set_job_state_if(const std::string& id, const std::string& from, const std::string& to) override {
    return write([&] {
      return exec(
                 "UPDATE jobs SET state = $1, updated_unix_ms = $2, owner = CASE WHEN $1 = 'running' THEN owner "
                 "ELSE '' END WHERE id = $3 AND state = $4",
                 Params(to, now_unix_ms(), id, from))
                 .affected() > 0;
    });
  }

  std::optional<JobRow> claim_job(const std::string& owner, std::int64_t now, std::int64_t lease_ms) override {
    return write([&]() -> std::optional<JobRow> {
      // SKIP LOCKED: daemons claiming at once each get another job instead of waiting in line.
      Rows r = exec((std::string("UPDATE jobs SET state = 'running', owner = $1, lease_until_unix_ms = $2, "
                                 "updated_unix_ms = $3 WHERE id = (SELECT id FROM jobs WHERE state = 'queued' OR "
                                 "(state = 'running' AND lease_until_unix_ms < $3) ORDER BY updated_unix_ms, id "
                                 "LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING ") +
                     kJobColumns)
                        .c_str(),
                    Params(owner, now + lease_ms, now));
      if (!r.size()) return std::nullopt;
      return read_job(r, 0);
    });
  }

  bool renew_job(const std::string& id, const std::string& owner, std::int64_t now, std::int64_t lease_ms) override {
    return write([&] {
      return exec("UPDATE jobs SET lease_until_unix_ms = $1 WHERE id = $2 AND owner = $3 AND state = 'running'",
                  Params(now + lease_ms, id, owner))
                 .affected() > 0;
    });
  }

  void put_worker(const WorkerRow& w) override {
    write([&] {
      exec("INSERT INTO workers (id, name, target_key, registered_unix_ms, last_seen_unix_ms) "
           "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET name = excluded.name, "
           "target_key = excluded.target_key",
           Params(w.id, w.name, w.target_key, w.registered_unix_ms, w.last_seen_unix_ms));
    });
  }

  std::optional<WorkerRow> worker(const std::string& id) override {
    return read([&]() -> std::optional<WorkerRow> {
      Rows r = exec((std::string("SELECT ") + kWorkerColumns + " FROM workers WHERE id = $1").c_str(), Params(id));
      if (!r.size()) return std::nullopt;
      return read_worker(r, 0);
    });
  }

  bool touch_worker(const std::string& id, std::int64_t now) override {
    return write([&] {
      return exec("UPDATE workers SET last_seen_unix_ms = $1 WHERE id = $2", Params(now, id)).affected() > 0;
    });
  }

  std::vector<WorkerRow> workers() override {
    return read([&] {
      Rows r = exec((std::string("SELECT ") + kWorkerColumns + " FROM workers ORDER BY registered_unix_ms, id").c_str(),
                    Params());
      std::vector<WorkerRow> out;
      for (int i = 0; i < r.size(); ++i) out.push_back(read_worker(r, i));
      return out;
    });
  }

  void post_batch(const BatchRow& b) override {
    write([&] {
      exec("INSERT INTO batches (id, job_id, target_key, task_json, worker_id, deadline_unix_ms, posted_unix_ms, "
           "results_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
           Params(b.id, b.job_id, b.target_key, b.task_json, b.worker_id, b.deadline_unix_ms, b.posted_unix_ms,
                  b.results_json));
    });
  }

  std::optional<BatchRow> lease_batch(const std::string& worker_id, const std::string& target_key, std::int64_t now,
                                      std::int64_t lease_ms) override {
    return write([&]() -> std::optional<BatchRow> {
      Rows r = exec((std::string("UPDATE batches SET worker_id = $1, deadline_unix_ms = $2 WHERE id = (SELECT id "
                                 "FROM batches WHERE target_key = $3 AND results_json IS NULL AND (worker_id = '' OR "
                                 "deadline_unix_ms < $4) ORDER BY posted_unix_ms, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
                                 "RETURNING ") +
                     kBatchColumns)
                        .c_str(),
                    Params(worker_id, now + lease_ms, target_key, now));
      if (!r.size()) return std::nullopt;
      return read_batch(r, 0);
    });
  }

  Completion complete_batch(const std::string& id, const std::string& worker_id,
                            const std::string& results_json) override {
    return write([&] {
      Rows r = exec("SELECT worker_id, results_json IS NOT NULL FROM batches WHERE id = $1 FOR UPDATE", Params(id));
      if (!r.size() || r.text(0, 1) == "t") return Completion::Unknown;
      if (r.text(0, 0) != worker_id) return Completion::TakenOver;
      exec("UPDATE batches SET results_json = $1 WHERE id = $2", Params(results_json, id));
      return Completion::Accepted;
    });
  }

  std::optional<BatchRow> batch(const std::string& id) override {
    return read([&]() -> std::optional<BatchRow> {
      Rows r = exec((std::string("SELECT ") + kBatchColumns + " FROM batches WHERE id = $1").c_str(), Params(id));
      if (!r.size()) return std::nullopt;
      return read_batch(r, 0);
    });
  }

  void remove_batch(const std::string& id) override {
    write([&] { exec("DELETE FROM batches WHERE id = $1", Params(id)); });
  }

  void remove_job_batches(const std::string& job_id) override {
    write([&] { exec("DELETE FROM batches WHERE job_id = $1", Params(job_id)); });
  }

  std::optional<JobRow> job(const std::string& id) override {
    return read([&]() -> std::optional<JobRow> {
      Rows r = exec((std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = $1").c_str(), Params(id));
      if (!r.size()) return std::nullopt;
      return read_job(r, 0);
    });
  }

  std::vector<JobRow> jobs(const std::string& state, int limit) override {
    return read([&] {
      Rows r = exec((std::string("SELECT ") + kJobColumns +
                     " FROM jobs WHERE ($1 = '' OR state = $1) ORDER BY created_unix_ms DESC, id LIMIT $2")
                        .c_str(),
                    Params(state, limit < 0 ? 0 : limit));
      std::vector<JobRow> out;
      for (int i = 0; i < r.size(); ++i) out.push_back(read_job(r, i));
      return out;
    });
  }

  std::int64_t change_stamp() override { return db_.change_stamp(); }

  std::string integrity_check() override {
    return read([&] {
      std::string out;
      auto check = [&](const char* sql, const std::string& what) {
        std::int64_t n = exec(sql, Params()).integer(0, 0);
        if (n) out += (out.empty() ? "" : "; ") + std::to_string(n) + " " + what;
      };
      check("SELECT COUNT(*) FROM records WHERE (error_class IS NULL) <> (median_s IS NOT NULL)",
            "records whose median and error class disagree");
      check("SELECT COUNT(*) FROM records WHERE error_class IS NULL AND times_json = '[]'",
            "successful records without times");
      check("SELECT COUNT(*) FROM jobs WHERE state NOT IN ('queued', 'running', 'done', 'failed', 'cancelled')",
            "jobs in an unknown state");
      check(
          "SELECT COUNT(*) FROM (SELECT request_key FROM jobs WHERE state IN ('queued', 'running') "
          "GROUP BY request_key HAVING COUNT(*) > 1) AS doubled",
          "requests with more than one active job");
      return out.empty() ? std::string("ok") : out;
    });
  }

 private:
  // Inserts inside write().
  void insert_workload(const WorkloadRow& w) {
    exec("INSERT INTO workloads (key, op_name, canonical_text, sizes_json, op_text, created) "
         "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
         Params(w.key, w.op_name, w.canonical_text, w.sizes_json, w.op_text, now_unix_ms()));
  }

  void insert_target(const TargetRow& t) {
    exec("INSERT INTO targets (key, backend, family, fingerprint_json, traits_json, created) "
         "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key) DO UPDATE SET traits_json = excluded.traits_json "
         "WHERE targets.traits_json = ''",
         Params(t.key, t.backend, t.family, t.fingerprint_json, t.traits_json, now_unix_ms()));
  }

  //! The record's id, and whether it is new (else the earlier record of its config).
  std::pair<std::int64_t, bool> insert_record(const Record& r) {
    std::optional<double> median;
    if (r.ok()) median = r.median_s();
    std::optional<std::string> error_class;
    if (!r.ok()) error_class = r.error_class;
    const std::string times = nlohmann::json(r.times_s).dump();
    const std::int64_t created = r.created_unix_ms ? r.created_unix_ms : now_unix_ms();
    try {
      Rows ins = exec(
          "INSERT INTO records (workload_key, target_key, config_key, config_json, times_json, median_s, "
          "error_class, error_message, measure_params_json, tool_version, created_unix_ms) "
          "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING RETURNING id",
          Params(r.workload_key, r.target_key, r.config_key, r.config_json, times, median, error_class,
                 r.error_message, r.measure_params_json, r.tool_version, created));
      if (ins.size()) return {ins.integer(0, 0), true};
    } catch (const StatementError& e) {
      if (e.sqlstate == "23503")  // foreign_key_violation
        throw_error(ErrorKind::Database, "add_record: workload '" + r.workload_key + "' or target '" + r.target_key +
                                             "' is not in the database (put it first)");
      throw;
    }
    Rows st = exec("SELECT id FROM records WHERE workload_key = $1 AND target_key = $2 AND config_key = $3",
                   Params(r.workload_key, r.target_key, r.config_key));
    if (!st.size()) throw_error(ErrorKind::Internal, "add_record: the duplicate record is not found");
    return {st.integer(0, 0), false};
  }

  // Statements inside read() and write(), on the store's one connection.
  Rows exec(const char* sql, const Params& p) { return db_.exec(sql, p); }
  template <class F>
  auto read(F&& body) -> decltype(body()) {
    return db_.read(std::forward<F>(body));
  }
  template <class F>
  auto write(F&& body) -> decltype(body()) {
    return db_.write(std::forward<F>(body));
  }

  PgConnection db_;
};

}  // namespace

std::unique_ptr<Store> open_postgres_store(const std::string& url, bool create) {
  check_store_url(url);
  return std::make_unique<PostgresStore>(url, create);
}

}  // namespace tiletune::db
