// One libpq connection: statements, transactions that survive a dropped connection, LISTEN/NOTIFY
// for the change stamp.
#include "db/postgres_connection.hpp"

#include <libpq-fe.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "support/error.hpp"

namespace tiletune::db {
namespace {

// Every write transaction notifies this channel; every connection listens, so its change stamp
// moves with any connection's commits without asking the server.
constexpr const char* kChangeChannel = "tiletune_changes";

struct ClearResult {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ClearResult>;

//! A refusal by the server (password, role or database) is the caller's to fix; anything else
//! (no route, refused, timed out, shutting down) may pass.
ErrorKind connect_failure_kind(const std::string& why) {
  for (const char* refusal : {"authentication failed", "password", "does not exist", "no pg_hba.conf entry",
                              "permission denied", "invalid", "unsupported"})
    if (why.find(refusal) != std::string::npos) return ErrorKind::Database;
  return ErrorKind::Unavailable;
}

}  // namespace

Rows::Rows(pg_result* r) : r_(r, PQclear) {}
int Rows::size() const { return PQntuples(r_.get()); }
bool Rows::is_null(int row, int col) const { return PQgetisnull(r_.get(), row, col); }
std::string Rows::text(int row, int col) const {
  return std::string(PQgetvalue(r_.get(), row, col), static_cast<std::size_t>(PQgetlength(r_.get(), row, col)));
}
std::int64_t Rows::integer(int row, int col) const { return std::strtoll(PQgetvalue(r_.get(), row, col), nullptr, 10); }
double Rows::real(int row, int col) const { return std::strtod(PQgetvalue(r_.get(), row, col), nullptr); }
std::string Rows::bytes(int row, int col) const {
  std::size_t n = 0;
  unsigned char* raw = PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r_.get(), row, col)), &n);
  if (!raw) throw_error(ErrorKind::Database, "cannot decode a bytea column");
  std::string out(reinterpret_cast<const char*>(raw), n);
  PQfreemem(raw);
  return out;
}
std::int64_t Rows::affected() const { return std::strtoll(PQcmdTuples(r_.get()), nullptr, 10); }

PgConnection::PgConnection(std::string url, std::string where)
    : url_(std::move(url)), where_(std::move(where)), conn_(nullptr, PQfinish) {
  std::lock_guard lock(mu_);
  connect();
}

PgConnection::~PgConnection() = default;

void PgConnection::connect() {
  conn_.reset();
  // The URL's own parameters come after these defaults and override them.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"10", "tiletune", url_.c_str(), nullptr};
  decltype(conn_) c(PQconnectdbParams(keys, values, /*expand_dbname=*/1), PQfinish);
  if (!c) throw_error(ErrorKind::Internal, "libpq could not allocate a connection");
  if (PQstatus(c.get()) != CONNECTION_OK) {
    std::string why = PQerrorMessage(c.get());
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    throw_error(connect_failure_kind(why), "cannot connect to " + where_ + ": " + why);
  }
  conn_ = std::move(c);
  ++connects_;
  // Notices (such as "relation already exists, skipping") are not errors: keep them off stderr.
  PQsetNoticeProcessor(
      conn_.get(), [](void*, const char*) {}, nullptr);
  run_statement((std::string("LISTEN ") + kChangeChannel).c_str(), Params());
}

void PgConnection::drain_notifications() {
  while (PGnotify* n = PQnotifies(conn_.get())) {
    ++changes_;
    PQfreemem(n);
  }
}

Rows PgConnection::run_statement(const char* sql, const Params& p, bool script) {
  auto values = p.pointers();
  ResultPtr r(script ? PQexec(conn_.get(), sql)
                     : PQexecParams(conn_.get(), sql, p.size(), nullptr, values.data(), p.lengths(), p.formats(), 0));
  ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return Rows(r.release());
  std::string sqlstate =
      r && PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : "";
  std::string message = r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_.get());
  while (!message.empty() && message.back() == '\n') message.pop_back();
  Failure f = Failure::Other;
  // Class 08: connection exceptions; 57P0x: the server is shutting down or starting.
  if (PQstatus(conn_.get()) == CONNECTION_BAD || sqlstate.rfind("08", 0) == 0 || sqlstate.rfind("57P", 0) == 0)
    f = Failure::Connection;
  else if (sqlstate == "40001" || sqlstate == "40P01")  // serialization failure, deadlock
    f = Failure::Retry;
  throw StatementError{f, sqlstate, message};
}

Rows PgConnection::exec(const char* sql, const Params& p) { return run_statement(sql, p); }

void PgConnection::exec_script(const char* sql) { run_statement(sql, Params(), /*script=*/true); }

void PgConnection::begin() { run_statement("BEGIN", Params()); }

void PgConnection::commit() {
  run_statement((std::string("NOTIFY ") + kChangeChannel).c_str(), Params());
  run_statement("COMMIT", Params());
  ++changes_;  // our own commit, whether or not its notification has been read yet
  drain_notifications();
}

void PgConnection::abort(const char* then) noexcept {
  if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK) return;
  ResultPtr rb(PQexec(conn_.get(), "ROLLBACK"));  // a no-op outside a transaction
  if (then) ResultPtr also(PQexec(conn_.get(), then));
}

void PgConnection::fail(const StatementError& e, const std::string& doing) const {
  throw_error(e.failure == Failure::Connection ? ErrorKind::Unavailable : ErrorKind::Database,
              doing + (doing.empty() ? "" : " ") + where_ + ": " + e.message);
}

void PgConnection::run(bool transaction, const std::function<void()>& body) {
  std::lock_guard lock(mu_);
  for (int attempt = 0;; ++attempt) {
    try {
      if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK) connect();
      if (!transaction) return body();
      begin();
      try {
        body();
        commit();
        return;
      } catch (...) {
        abort();
        throw;
      }
    } catch (const StatementError& e) {
      if (e.failure == Failure::Connection && attempt == 0) continue;  // reconnect and run it again
      if (e.failure == Failure::Retry && attempt < 5) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10 << attempt));
        continue;
      }
      fail(e);
    }
  }
}

std::int64_t PgConnection::change_stamp() {
  std::lock_guard lock(mu_);
  // Notifications that have arrived are read without a round trip to the server.
  if (conn_ && PQconsumeInput(conn_.get())) drain_notifications();
  return (connects_ << 40) + changes_;
}

}  // namespace tiletune::db
