// The SQLite store's schema: the steps from an empty file to this build's version.
#include "db/sqlite_schema.hpp"

#include <optional>

#include "db/schema_steps.hpp"
#include "db/sqlite_statement.hpp"
#include "support/error.hpp"

namespace tiletune::db::sqlite {
namespace {

// Each step moves the schema from version i to i + 1; append steps, never edit shipped ones.
const char* const kMigrations[] = {
    // 1: workloads, targets, records.
    R"sql(
    CREATE TABLE workloads (
      key            TEXT PRIMARY KEY,
      op_name        TEXT NOT NULL,
      canonical_text TEXT NOT NULL,
      sizes_json     TEXT NOT NULL,
      created        INTEGER NOT NULL
    );
    CREATE TABLE targets (
      key              TEXT PRIMARY KEY,
      backend          TEXT NOT NULL,
      family           TEXT NOT NULL,
      fingerprint_json TEXT NOT NULL,
      created          INTEGER NOT NULL
    );
    CREATE TABLE records (
      id                  INTEGER PRIMARY KEY,
      workload_key        TEXT NOT NULL REFERENCES workloads(key),
      target_key          TEXT NOT NULL REFERENCES targets(key),
      config_key          TEXT NOT NULL,
      config_json         TEXT NOT NULL,
      times_json          TEXT NOT NULL,
      median_s            REAL,
      error_class         TEXT,
      error_message       TEXT NOT NULL,
      measure_params_json TEXT NOT NULL,
      tool_version        TEXT NOT NULL,
      created_unix_ms     INTEGER NOT NULL,
      UNIQUE (workload_key, target_key, config_key)
    );
    CREATE INDEX records_by_speed ON records (workload_key, target_key, median_s);
    )sql",
    // 2: trained cost models, one per kind and target.
    R"sql(
    CREATE TABLE models (
      kind            TEXT NOT NULL,
      target_key      TEXT NOT NULL REFERENCES targets(key),
      feature_version INTEGER NOT NULL,
      records         INTEGER NOT NULL,
      metrics_json    TEXT NOT NULL,
      blob            BLOB NOT NULL,
      created_unix_ms INTEGER NOT NULL,
      PRIMARY KEY (kind, target_key)
    );
    CREATE INDEX records_by_target ON records (target_key, id);
    ALTER TABLE workloads ADD COLUMN op_text TEXT NOT NULL DEFAULT '';
    )sql",
    // 3: the daemon's tuning jobs.
    R"sql(
    CREATE TABLE jobs (
      id              TEXT PRIMARY KEY,
      request_key     TEXT NOT NULL,
      request_json    TEXT NOT NULL,
      workload_key    TEXT NOT NULL,
      target_key      TEXT NOT NULL,
      state           TEXT NOT NULL,
      done            INTEGER NOT NULL,
      total           INTEGER NOT NULL,
      best_s          REAL,
      error           TEXT NOT NULL,
      created_unix_ms INTEGER NOT NULL,
      updated_unix_ms INTEGER NOT NULL
    );
    CREATE INDEX jobs_by_request ON jobs (request_key, state);
    CREATE INDEX jobs_by_created ON jobs (created_unix_ms);
    )sql",
    // 4: targets keep their traits, so that a remote worker's target can be searched here.
    R"sql(
    ALTER TABLE targets ADD COLUMN traits_json TEXT NOT NULL DEFAULT '';
    )sql",
    // 5: the daemon's state shared by daemons on one database (db/schema_steps.hpp).
    kDaemonStateStep,
    // 6: every stored model's metrics (db/schema_steps.hpp).
    kModelHistoryStep,
};
constexpr std::int64_t kSchemaVersion = sizeof kMigrations / sizeof kMigrations[0];

std::optional<std::int64_t> stored_version(sqlite3* db, const std::string& path) {
  Statement meta(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_meta'");
  if (!meta.step()) return std::nullopt;
  Statement st(db, "SELECT value FROM schema_meta WHERE key = 'schema_version'");
  if (!st.step()) throw_error(ErrorKind::Database, "database '" + path + "' has no schema version");
  return st.integer(0);
}

}  // namespace

void migrate(sqlite3* db, const std::string& path) {
  if (stored_version(db, path) == kSchemaVersion) return;  // the common case takes no write lock
  WriteTransaction tx(db);
  auto version = stored_version(db, path);
  if (!version) {
    Statement other(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
    if (other.step())
      throw_error(ErrorKind::Database, "database '" + path +
                                           "' is an SQLite file but not a tiletune "
                                           "database (it has table '" +
                                           other.text(0) + "' and no schema_meta)");
    exec(db,
         "CREATE TABLE schema_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
         "INSERT INTO schema_meta VALUES ('schema_version', 0)",
         "creating schema_meta");
    version = 0;
  }
  if (*version > kSchemaVersion)
    throw_error(ErrorKind::Database, "database '" + path + "' has schema version " + std::to_string(*version) +
                                         " but this tiletune supports up to version " + std::to_string(kSchemaVersion) +
                                         ": upgrade tiletune");
  for (auto v = *version; v < kSchemaVersion; ++v) {
    exec(db, kMigrations[v], "migrating '" + path + "' to schema version " + std::to_string(v + 1));
    Statement(db, "UPDATE schema_meta SET value = ? WHERE key = 'schema_version'").bind(v + 1).step();
  }
  tx.commit();
}

}  // namespace tiletune::db::sqlite
