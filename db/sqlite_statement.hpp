// db/sqlite_statement.hpp — prepared statements and write transactions over sqlite3 (internal
// to db/: the SQLite store's plumbing).
#pragma once
#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "support/error.hpp"

namespace tiletune::db::sqlite {

[[noreturn]] inline void fail(sqlite3* db, const std::string& what) {
  throw_error(ErrorKind::Database, what + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

struct CloseDb {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbPtr = std::unique_ptr<sqlite3, CloseDb>;

struct Blob {
  const std::string& bytes;
};

//! A prepared statement: bind by position (1-based), step, read columns (0-based).
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail(db, "preparing a statement");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  template <class... Args>
  Statement& bind(const Args&... args) {
    int i = 0;
    (bind_one(++i, args), ...);
    return *this;
  }

  //! True when a row is ready; false when done.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, std::string("running \"") + first_line() + "\"");
  }

  std::string text(int col) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }
  std::int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string blob(int col) const {
    auto p = static_cast<const char*>(sqlite3_column_blob(stmt_, col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) fail(db_, "binding a parameter");
  }
  void bind_one(int i, const std::string& s) {
    check(sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT));
  }
  void bind_one(int i, const Blob& b) {
    check(sqlite3_bind_blob64(stmt_, i, b.bytes.data(), b.bytes.size(), SQLITE_TRANSIENT));
  }
  void bind_one(int i, const char* s) { check(sqlite3_bind_text(stmt_, i, s, -1, SQLITE_TRANSIENT)); }
  void bind_one(int i, std::int64_t v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind_one(int i, int v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind_one(int i, double v) { check(sqlite3_bind_double(stmt_, i, v)); }
  void bind_one(int i, const std::optional<double>& v) {
    check(v ? sqlite3_bind_double(stmt_, i, *v) : sqlite3_bind_null(stmt_, i));
  }
  void bind_one(int i, const std::optional<std::string>& v) {
    if (v)
      bind_one(i, *v);
    else
      check(sqlite3_bind_null(stmt_, i));
  }

  std::string first_line() const {
    std::string sql = sqlite3_sql(stmt_);
    auto start = sql.find_first_not_of(" \n");
    sql = sql.substr(start == std::string::npos ? 0 : start);
    return sql.substr(0, sql.find('\n'));
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

inline void exec(sqlite3* db, const char* sql, const std::string& what) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(db, what);
}

//! A write transaction. BEGIN IMMEDIATE takes the write lock up front, so a concurrent writer
//! waits in the busy handler instead of failing later with SQLITE_BUSY on lock upgrade.
class WriteTransaction {
 public:
  explicit WriteTransaction(sqlite3* db) : db_(db) { exec(db, "BEGIN IMMEDIATE", "starting a write transaction"); }
  ~WriteTransaction() {
    if (db_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, "COMMIT", "committing");
    db_ = nullptr;
    ++commits_;
  }
  //! Commits through this process's connections (PRAGMA data_version sees only the others').
  static inline std::atomic<std::int64_t> commits_{0};

 private:
  sqlite3* db_;
};

}  // namespace tiletune::db::sqlite
