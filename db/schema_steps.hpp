// db/schema_steps.hpp — migration steps whose SQL both engines run as written (internal to db/).
#pragma once

namespace tiletune::db {

//! The daemon's state shared by daemons on one database: who runs a job and until when, the time
//! its turns took; remote workers and the batches they lease. SQLite's step 5, PostgreSQL's 2.
//! SQLite reads BIGINT and DOUBLE PRECISION as its INTEGER and REAL.
inline constexpr const char* kDaemonStateStep = R"sql(
    ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE jobs ADD COLUMN lease_until_unix_ms BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN spent_s DOUBLE PRECISION NOT NULL DEFAULT 0;
    CREATE INDEX jobs_by_turn ON jobs (state, updated_unix_ms);
    CREATE TABLE workers (
      id                 TEXT PRIMARY KEY,
      name               TEXT NOT NULL,
      target_key         TEXT NOT NULL,
      registered_unix_ms BIGINT NOT NULL,
      last_seen_unix_ms  BIGINT NOT NULL
    );
    CREATE TABLE batches (
      id               TEXT PRIMARY KEY,
      job_id           TEXT NOT NULL,
      target_key       TEXT NOT NULL,
      task_json        TEXT NOT NULL,
      worker_id        TEXT NOT NULL,
      deadline_unix_ms BIGINT NOT NULL,
      posted_unix_ms   BIGINT NOT NULL,
      results_json     TEXT
    );
    CREATE INDEX batches_by_target ON batches (target_key, posted_unix_ms);
    )sql";

//! Every stored model's training and held-out metrics, not only the latest per kind and target
//! (the dashboard draws how a target's model improved retrain after retrain; the models stored
//! before it become the first entries); and what a finished job measured beside its records (a
//! model job's roofs and vendor times). SQLite's step 6, PostgreSQL's 3.
inline constexpr const char* kModelHistoryStep = R"sql(
    CREATE TABLE model_history (
      kind            TEXT NOT NULL,
      target_key      TEXT NOT NULL,
      feature_version INTEGER NOT NULL,
      records         BIGINT NOT NULL,
      metrics_json    TEXT NOT NULL,
      created_unix_ms BIGINT NOT NULL
    );
    CREATE INDEX model_history_by_target ON model_history (target_key, created_unix_ms);
    INSERT INTO model_history (kind, target_key, feature_version, records, metrics_json, created_unix_ms)
      SELECT kind, target_key, feature_version, records, metrics_json, created_unix_ms FROM models;
    CREATE TABLE job_results (
      job_id          TEXT PRIMARY KEY,
      result_json     TEXT NOT NULL,
      created_unix_ms BIGINT NOT NULL
    );
    )sql";

}  // namespace tiletune::db
