// tests/postgres.hpp — PostgreSQL servers and databases for the tests (scripts/pg_server.sh).
#pragma once
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

#include "helpers.hpp"
#include "support/subprocess.hpp"

namespace tiletune::test {

//! A throwaway server on a Unix socket in its own folder under /tmp; removed at scope exit.
class PostgresServer {
 public:
  PostgresServer() : dir_(next_dir()) { run("start"); }
  ~PostgresServer() {
    ProcessResult r = run_process({script(), "remove", dir_}, 120);
    (void)r;
  }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  const std::string& socket_dir() const { return dir_; }
  //! A fast shutdown, as an administrator's: connections are closed, the data kept.
  void stop() { run("stop"); }
  void start() { run("start"); }

 private:
  static std::string script() { return std::string(TILETUNE_SOURCE_DIR) + "/scripts/pg_server.sh"; }
  static std::string next_dir() {
    static std::atomic<int> counter{0};
    return "/tmp/tiletune-pg-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }
  void run(const char* what) {
    ProcessResult r = run_process({script(), what, dir_}, 120);
    REQUIRE_MESSAGE(r.ok(), "scripts/pg_server.sh " << what << " failed: " << r.describe() << "\n" << r.output);
  }
  std::string dir_;
};

//! The socket folder of the server the tests share: TILETUNE_TEST_PG_HOST when the test
//! command started one (scripts/test.sh), else one this process starts on first use.
inline std::string shared_postgres_host() {
  if (const char* host = std::getenv("TILETUNE_TEST_PG_HOST"); host && *host) return host;
  static PostgresServer server;  // stopped when the test process exits
  return server.socket_dir();
}

//! The URL of database `name` on the server at `host` as `user` (no password in it).
inline std::string postgres_url(const std::string& host, const std::string& name,
                                const std::string& user = "tiletune") {
  return "postgresql://" + user + "@/" + name + "?host=" + host;
}

//! Runs one statement as the superuser on the server's `postgres` database.
inline void postgres_admin(const std::string& host, const std::string& sql) {
  PGconn* c = PQconnectdb(("host=" + host + " user=tiletune dbname=postgres").c_str());
  REQUIRE_MESSAGE(PQstatus(c) == CONNECTION_OK, "admin connection: " << PQerrorMessage(c));
  PGresult* r = PQexec(c, sql.c_str());
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  std::string why = PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
  REQUIRE_MESSAGE(ok, sql << ": " << why);
}

//! A new empty database on a server (the shared one by default), dropped at scope exit.
class PostgresDb {
 public:
  explicit PostgresDb(std::string host = shared_postgres_host()) : host_(std::move(host)) {
    static std::atomic<int> counter{0};
    name_ = "tt_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    postgres_admin(host_, "CREATE DATABASE " + name_);
  }
  ~PostgresDb() {
    PGconn* c = PQconnectdb(("host=" + host_ + " user=tiletune dbname=postgres").c_str());
    if (PQstatus(c) == CONNECTION_OK)
      PQclear(PQexec(c, ("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)").c_str()));
    PQfinish(c);
  }
  PostgresDb(const PostgresDb&) = delete;
  PostgresDb& operator=(const PostgresDb&) = delete;

  std::string url() const { return postgres_url(host_, name_); }
  const std::string& name() const { return name_; }
  const std::string& host() const { return host_; }

 private:
  std::string host_, name_;
};

}  // namespace tiletune::test
