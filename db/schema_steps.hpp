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

}  // namespace tiletune::db
