// The PostgreSQL store against a real server (tests/postgres.hpp): what the shared contract does
// not cover — URLs and credentials, schema versions, several connections and processes, and a
// server that goes away and comes back.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "db/store.hpp"
#include "db/store_url.hpp"
#include "helpers.hpp"
#include "postgres.hpp"
#include "support/hash.hpp"

using namespace tiletune;
using namespace tiletune::db;
using nlohmann::json;

namespace {

const WorkloadRow kWorkload{hash_hex("w pg"), "matmul", "op matmul ... M=64", R"({"M":64})", "op text"};
const TargetRow kTarget{hash_hex("t pg"), "cpu", "cpu-x", R"({"cpu":"x"})", ""};

Record record(int n, double t) {
  Record r;
  r.workload_key = kWorkload.key;
  r.target_key = kTarget.key;
  r.config_json = json{{"version", 1}, {"n", n}}.dump();
  r.config_key = hash_hex(r.config_json);
  if (n % 5)
    r.times_s = {t, t * 1.5, t * 0.75};
  else
    r.error_class = "timeout";
  r.tool_version = "test";
  return r;
}

std::unique_ptr<Store> open_with_keys(const std::string& url) {
  auto s = open_store(url);
  s->put_workload(kWorkload);
  s->put_target(kTarget);
  return s;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("postgres store: URLs name the engine; a password in the URL is refused, a bad URL is a database error") {
  CHECK(is_postgres_url("postgresql://u@h/db"));
  CHECK(is_postgres_url("postgres://h/db"));
  CHECK_FALSE(is_postgres_url("tiletune.db"));
  CHECK_FALSE(is_postgres_url("/data/postgresql://x.db"));
  ErrorKind kind{};
  auto msg = test::error_of([] { open_store("postgresql://alice:hunter2@localhost/team"); }, &kind);
  CHECK(kind == ErrorKind::InvalidInput);
  CHECK(contains(msg, "PGPASSWORD"));
  CHECK_FALSE(contains(msg, "hunter2"));
  test::error_of([] { open_store("postgresql://alice@localhost/team?password=hunter2"); }, &kind);
  CHECK(kind == ErrorKind::InvalidInput);
  msg = test::error_of([] { open_store("postgresql://alice@localhost/team?no_such_option=1"); }, &kind);
  CHECK(kind == ErrorKind::Database);
  CHECK(contains(msg, "bad PostgreSQL URL"));
  CHECK(describe_store_url("postgresql://alice@db.example:5433/team") ==
        "PostgreSQL database 'team' on db.example:5433");
}

TEST_CASE("postgres store: no server is Unavailable; refused credentials and missing databases are database errors") {
  test::TempDir dir;  // a socket folder where no server listens
  ErrorKind kind{};
  auto msg = test::error_of([&] { open_store(test::postgres_url(dir.path.string(), "team")); }, &kind);
  CHECK(kind == ErrorKind::Unavailable);
  CHECK(contains(msg, "cannot connect to PostgreSQL database 'team'"));

  const std::string host = test::shared_postgres_host();
  msg = test::error_of([&] { open_store(test::postgres_url(host, "no_such_db")); }, &kind);
  CHECK(kind == ErrorKind::Database);
  CHECK(contains(msg, "no_such_db"));
  msg = test::error_of([&] { open_store(test::postgres_url(host, "postgres", "nobody_here")); }, &kind);
  CHECK(kind == ErrorKind::Database);

  // The password role: a wrong PGPASSWORD is refused, the right one (from the environment,
  // as libpq reads it) connects.
  test::PostgresDb db(host);
  test::postgres_admin(host, "GRANT ALL ON DATABASE " + db.name() + " TO tiletune_pw");
  test::postgres_admin(host, "ALTER DATABASE " + db.name() + " OWNER TO tiletune_pw");
  const std::string url = test::postgres_url(host, db.name(), "tiletune_pw");
  ::setenv("PGPASSWORD", "wrong", 1);
  msg = test::error_of([&] { open_store(url); }, &kind);
  CHECK(kind == ErrorKind::Database);
  CHECK(contains(msg, "password authentication failed"));
  ::setenv("PGPASSWORD", "secret", 1);
  CHECK(open_store(url)->integrity_check() == "ok");
  ::unsetenv("PGPASSWORD");
  // A password file named in the URL is the other way to give it.
  test::TempDir pass;
  std::string passfile = pass.file("pgpass");
  {
    std::ofstream out(passfile);
    out << "*:*:*:tiletune_pw:secret\n";
  }
  std::filesystem::permissions(passfile, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  CHECK(open_store(url + "&passfile=" + passfile)->integrity_check() == "ok");
}

TEST_CASE("postgres store: schema versions; a newer one and a foreign database are refused; reads need a database") {
  test::PostgresDb db;
  ErrorKind kind{};
  auto msg = test::error_of([&] { open_store(db.url(), /*create=*/false); }, &kind);
  CHECK(kind == ErrorKind::NotFound);
  CHECK(contains(msg, "holds no tiletune database"));
  open_store(db.url());
  CHECK(open_store(db.url(), false)->integrity_check() == "ok");

  PGconn* c = PQconnectdb(("host=" + db.host() + " user=tiletune dbname=" + db.name()).c_str());
  REQUIRE(PQstatus(c) == CONNECTION_OK);
  PQclear(PQexec(c, "UPDATE schema_meta SET value = 99 WHERE key = 'schema_version'"));
  PQfinish(c);
  msg = test::error_of([&] { open_store(db.url()); }, &kind);
  CHECK(kind == ErrorKind::Database);
  CHECK(contains(msg, "schema version 99"));
  CHECK(contains(msg, "upgrade tiletune"));

  test::PostgresDb other;
  c = PQconnectdb(("host=" + other.host() + " user=tiletune dbname=" + other.name()).c_str());
  PQclear(PQexec(c, "CREATE TABLE records (id INTEGER)"));
  PQfinish(c);
  msg = test::error_of([&] { open_store(other.url()); }, &kind);
  CHECK(kind == ErrorKind::Database);
  CHECK(contains(msg, "not a tiletune database"));
}

TEST_CASE("postgres store: models keep their bytes; jobs of one request are shared across connections") {
  test::PostgresDb db;
  auto a = open_with_keys(db.url());
  auto b = open_store(db.url());
  std::string blob("header\n\0\x01\xff binary", 17);
  a->put_model({"xgb", kTarget.key, 3, 42, R"({"top5":0.97})", blob, 0});
  REQUIRE(b->model("xgb", kTarget.key));
  CHECK(b->model("xgb", kTarget.key)->blob == blob);
  b->put_model({"xgb", kTarget.key, 3, 43, "{}", "newer", 0});
  CHECK(a->model("xgb", kTarget.key)->blob == "newer");

  JobRow j;
  j.id = "job1";
  j.request_key = "req";
  j.request_json = "{}";
  j.workload_key = kWorkload.key;
  j.target_key = kTarget.key;
  j.state = "queued";
  CHECK(a->put_job(j).id == "job1");
  j.id = "job2";
  CHECK(b->put_job(j).id == "job1");  // the same request while job1 is active
  CHECK(b->set_job_state_if("job1", "queued", "running"));
  CHECK_FALSE(a->set_job_state_if("job1", "queued", "running"));
  JobRow done = *a->job("job1");
  done.state = "done";
  done.best_s = 1.25e-4;
  done.done = done.total = 8;
  a->update_job(done);
  CHECK(b->job("job1")->best_s == doctest::Approx(1.25e-4));
  CHECK(b->put_job(j).id == "job2");  // job1 is finished: a new job
  CHECK(a->jobs("", 10).size() == 2);
  CHECK(a->jobs("queued", 10).size() == 1);
  CHECK(a->integrity_check() == "ok");
}

TEST_CASE("postgres store: the change stamp moves with another connection's commits") {
  test::PostgresDb db;
  auto a = open_with_keys(db.url());
  auto b = open_store(db.url());
  auto s0 = a->change_stamp();
  CHECK(a->change_stamp() == s0);  // reading changes nothing
  b->add_record(record(1, 0.1));
  // The notification travels from b's commit to a's socket: give it a moment.
  bool moved = false;
  for (int i = 0; i < 200 && !moved; ++i) {
    moved = a->change_stamp() != s0;
    if (!moved) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(moved);
  auto s1 = a->change_stamp();
  a->add_record(record(2, 0.1));
  CHECK(a->change_stamp() != s1);  // its own commit, at once
}

TEST_CASE("postgres store: four processes creating and writing one database lose nothing") {
  test::PostgresDb db;
  const std::string url = db.url();
  // The children migrate the empty database together, then write 150 records each.
  pid_t children[4];
  for (int c = 0; c < 4; ++c) {
    children[c] = fork();
    REQUIRE(children[c] >= 0);
    if (children[c] == 0) {
      int code = 1;
      try {
        auto s = open_with_keys(url);
        for (int i = 0; i < 150; ++i) s->add_record(record(1000 * (c + 1) + i, 1e-3 * (i + 1)));
        // Half of them also write records the others write: stored once.
        for (int i = 0; i < 20; ++i) s->add_record(record(i + 1, 1e-3));
        code = 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", c, e.what());
      }
      _exit(code);
    }
  }
  for (pid_t child : children) {
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  auto s = open_store(url);
  CHECK(s->count_records(kWorkload.key, kTarget.key) == 4 * 150 + 20);
  CHECK(s->integrity_check() == "ok");
}

TEST_CASE("postgres store: a stopped server is Unavailable; the store reconnects when it returns") {
  test::PostgresServer server;
  test::PostgresDb db(server.socket_dir());
  auto s = open_with_keys(db.url());
  s->add_record(record(1, 0.1));
  auto stamp = s->change_stamp();
  server.stop();
  ErrorKind kind{};
  auto msg = test::error_of([&] { s->add_record(record(2, 0.1)); }, &kind);
  CHECK(kind == ErrorKind::Unavailable);
  CHECK(contains(msg, db.name()));
  test::error_of([&] { s->records({}); }, &kind);
  CHECK(kind == ErrorKind::Unavailable);
  server.start();
  // The next call reconnects: nothing written before the stop is lost, writing goes on.
  CHECK(s->add_record(record(2, 0.1)) > 0);
  CHECK(s->count_records(kWorkload.key, kTarget.key) == 2);
  CHECK(s->change_stamp() != stamp);  // a new connection may have missed notifications
}
