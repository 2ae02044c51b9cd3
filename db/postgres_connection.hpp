// db/postgres_connection.hpp — one libpq connection (internal to db/): statements with
// parameters, transactions that ride out a dropped connection, and the change stamp that moves
// with any connection's commits.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

struct pg_conn;
struct pg_result;

namespace tiletune::db {

//! A bytea parameter (sent in binary).
struct Bytes {
  const std::string& bytes;
};

//! Positional parameters ($1, $2, ...) of one statement, as text (bytea as binary); a null
//! optional is SQL NULL.
class Params {
 public:
  template <class... Args>
  explicit Params(const Args&... args) {
    (add(args), ...);
  }
  int size() const { return static_cast<int>(values_.size()); }
  std::vector<const char*> pointers() const {
    std::vector<const char*> p;
    for (auto& v : values_) p.push_back(v ? v->c_str() : nullptr);
    return p;
  }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  void push(std::optional<std::string> v, int format) {
    lengths_.push_back(v ? static_cast<int>(v->size()) : 0);
    formats_.push_back(format);
    values_.push_back(std::move(v));
  }
  void add(const std::string& s) { push(s, 0); }
  void add(const char* s) { push(std::string(s), 0); }
  void add(std::int64_t v) { push(std::to_string(v), 0); }
  void add(int v) { push(std::to_string(v), 0); }
  void add(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    push(std::string(buf), 0);
  }
  void add(const std::optional<double>& v) {
    if (v)
      add(*v);
    else
      push(std::nullopt, 0);
  }
  void add(const std::optional<std::string>& v) { push(v, 0); }
  void add(const Bytes& b) { push(b.bytes, 1); }

  std::vector<std::optional<std::string>> values_;
  std::vector<int> lengths_, formats_;
};

//! The rows of a statement's result; columns by 0-based index.
class Rows {
 public:
  explicit Rows(pg_result* r);
  int size() const;
  bool is_null(int row, int col) const;
  std::string text(int row, int col) const;
  std::int64_t integer(int row, int col) const;
  double real(int row, int col) const;
  std::string bytes(int row, int col) const;
  //! Rows changed by an INSERT, UPDATE or DELETE.
  std::int64_t affected() const;

 private:
  std::shared_ptr<pg_result> r_;
};

//! Why a statement failed, sorted by what the connection does about it.
enum class Failure { Connection, Retry, Other };

//! A failed statement: carries the SQLSTATE so that callers can tell a foreign key from the rest.
struct StatementError {
  Failure failure;
  std::string sqlstate, message;
};

//! One connection, used by one thread at a time (its calls take its lock).
class PgConnection {
 public:
  //! Connects to `url` (named `where` in messages: no password) and listens for changes.
  //! Error(Unavailable) when the server cannot be reached, Error(Database) when it refuses us
  //! (credentials, no such database).
  PgConnection(std::string url, std::string where);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  const std::string& where() const { return where_; }

  //! Runs `body` (statements through exec) under the lock, in a transaction for write(). A lost
  //! connection is reopened and the body run once more (bodies must be safe to run again); a
  //! deadlock or serialization failure is retried a few times. Then Error(Unavailable) for a
  //! server that is away, Error(Database) for the rest.
  template <class F>
  auto read(F&& body) -> decltype(body()) {
    return run_returning(false, body);
  }
  template <class F>
  auto write(F&& body) -> decltype(body()) {
    return run_returning(true, body);
  }

  //! One statement, inside a body or a migration; throws StatementError.
  Rows exec(const char* sql, const Params& p);
  //! Several statements without parameters (a migration step); throws StatementError.
  void exec_script(const char* sql);
  // A transaction by hand, for the migration (the constructor's caller, before anyone shares it).
  void begin();
  void commit();  //!< notifies the other connections
  //! ROLLBACK, then `then` if given, when the connection is up; errors are ignored.
  void abort(const char* then = nullptr) noexcept;
  //! Error(Unavailable) or Error(Database) for a statement that failed while `doing`.
  [[noreturn]] void fail(const StatementError& e, const std::string& doing = "") const;

  //! Moves whenever anything is committed on the database, read without a round trip.
  std::int64_t change_stamp();

 private:
  void run(bool transaction, const std::function<void()>& body);
  template <class F>
  auto run_returning(bool transaction, F& body) -> decltype(body()) {
    if constexpr (std::is_void_v<decltype(body())>) {
      run(transaction, body);
    } else {
      std::optional<decltype(body())> out;
      run(transaction, [&] { out.emplace(body()); });
      return std::move(*out);
    }
  }
  void connect();
  void drain_notifications();
  Rows run_statement(const char* sql, const Params& p, bool script = false);

  const std::string url_, where_;
  std::unique_ptr<pg_conn, void (*)(pg_conn*)> conn_;
  std::int64_t connects_ = 0, changes_ = 0;
  std::mutex mu_;
};

}  // namespace tiletune::db
