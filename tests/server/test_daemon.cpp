// The daemon as a process: killed mid-job, stopped by SIGTERM, sharing a database with another
// daemon and with the CLI. Loopback only, bounded in time.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/client.hpp"
#include "daemon_process.hpp"
#include "codegen/backend.hpp"
#include "db/store.hpp"
#include "helpers.hpp"
#include "support/subprocess.hpp"
#include "tuner/tune.hpp"

using namespace tiletune;
using test::DaemonProcess;
using test::TempDir;
using test::wait_for;

namespace {

std::int64_t count_records(const std::string& db) {
  auto store = db::open_sqlite_store(db);
  return static_cast<std::int64_t>(store->records({"", "", 0, 1000000}).size());
}

}  // namespace

TEST_CASE("daemon: SIGKILL in the middle of a job loses no committed record; a restart finishes the job") {
  TempDir dir;
  std::string db = dir.file("d.db");
  std::string id;
  std::int64_t before_kill = 0;
  {
    DaemonProcess d(db, dir.file("log1"));
    client::Client c(d.url(), "tok");
    id = c.tune("matmul", "M=40,N=24,K=32", 40, "random").id;
    auto j = wait_for(
        c, id, [](auto& j) { return j.done >= 16; }, 120);  // a batch or more stored
    REQUIRE(j.done >= 16);
    before_kill = count_records(db);
    d.kill_hard();
  }
  auto store = db::open_sqlite_store(db);
  CHECK(store->integrity_check() == "ok");
  CHECK(count_records(db) >= before_kill);
  DaemonProcess again(db, dir.file("log2"));
  client::Client c(again.url(), "tok");
  auto j = wait_for(
      c, id, [](auto& j) { return j.finished(); }, 180);
  CHECK(j.state == "done");
  CHECK(j.done == 40);
  CHECK(count_records(db) == 40);
  CHECK(store->integrity_check() == "ok");
}

TEST_CASE("daemon: SIGTERM lets the batch in flight finish, queues the job again and exits 0") {
  TempDir dir;
  std::string db = dir.file("d.db");
  DaemonProcess d(db, dir.file("log"));
  client::Client c(d.url(), "tok");
  auto id = c.tune("matmul", "M=40,N=24,K=16", 200, "random").id;
  REQUIRE(wait_for(
              c, id, [](auto& j) { return j.state == "running" && j.done > 0; }, 120)
              .done > 0);
  CHECK(d.terminate(120) == 0);
  auto store = db::open_sqlite_store(db);
  auto job = store->job(id);
  REQUIRE(job);
  CHECK(job->state == "queued");
  CHECK(job->done == count_records(db));  // every measured batch was stored and counted
  CHECK(store->integrity_check() == "ok");
}

TEST_CASE("daemon: two daemons and the CLI on one database file lose nothing") {
  TempDir dir;
  std::string db = dir.file("d.db");
  DaemonProcess a(db, dir.file("a")), b(db, dir.file("b"));
  client::Client ca(a.url(), "tok"), cb(b.url(), "tok");
  auto ja = ca.tune("matmul", "M=16,N=16,K=16", 8, "random");
  auto jb = cb.tune("matmul", "M=16,N=24,K=16", 8, "random");
  auto cli = run_process(
      {std::string(TILETUNE_BINARY_DIR) + "/tiletune", "tune", "matmul", "--sizes", "M=24,N=16,K=16", "--trials", "8",
       "--strategy", "random", "--min-time", "0.002", "--db", db, "--cache", test::kernel_cache()},
      300);
  CHECK(cli.ok());
  CHECK(wait_for(
            ca, ja.id, [](auto& j) { return j.finished(); }, 300)
            .state == "done");
  CHECK(wait_for(
            cb, jb.id, [](auto& j) { return j.finished(); }, 300)
            .state == "done");
  CHECK(count_records(db) == 24);
  // Each daemon sees the other's job and records.
  CHECK(ca.job(jb.id).state == "done");
  CHECK(cb.best("matmul", "M=16,N=16,K=16").has_value());
  CHECK(db::open_sqlite_store(db)->integrity_check() == "ok");
}

TEST_CASE("daemon: a remote worker measures its target's jobs; a vanished worker's lease goes to another") {
  TempDir dir;
  std::string db = dir.file("d.db");
  DaemonProcess d(db, dir.file("log"), "2");
  client::Client c(d.url(), "tok");
  // One thread makes another target than the daemon's own (the fingerprint counts threads).
  codegen::BackendOptions one;
  one.threads = 1;
  db::TargetRow t = tuner::target_row(codegen::make_backend("cpu", one)->target());
  nlohmann::json target = {{"key", t.key},
                           {"backend", t.backend},
                           {"family", t.family},
                           {"fingerprint_json", t.fingerprint_json},
                           {"traits_json", t.traits_json}};
  std::string ghost = c.call("POST", "/v1/workers", {{"name", "ghost"}, {"target", target}})["worker_id"];
  auto job = c.call(
      "POST", "/v1/tune",
      {{"op", "matmul"}, {"sizes", "M=16,N=32,K=8"}, {"trials", 8}, {"strategy", "random"}, {"target", t.key}})["job"];
  std::string id = job["id"];
  CHECK(job["target_key"] == t.key);
  // The ghost takes the first batch and is never heard of again.
  nlohmann::json task;
  for (int i = 0; i < 100 && task.is_null(); ++i) {
    task = c.call("POST", "/v1/workers/" + ghost + "/lease");
    if (task.is_null()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(!task.is_null());
  CHECK(task["configs"].size() == 4);
  // A real worker on the same target picks it up once the lease runs out, and the rest.
  pid_t worker = fork();
  REQUIRE(worker >= 0);
  if (worker == 0) {
    int fd = open(dir.file("worker.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::string exe = std::string(TILETUNE_BINARY_DIR) + "/tiletune";
    std::string url = d.url();
    execl(exe.c_str(), exe.c_str(), "worker", "--server", url.c_str(), "--token", "tok", "--threads", "1", "--cache",
          test::kernel_cache().c_str(), "--poll", "0.2", static_cast<char*>(nullptr));
    _exit(127);
  }
  auto done = wait_for(
      c, id, [](auto& j) { return j.finished(); }, 240);
  kill(worker, SIGTERM);
  waitpid(worker, nullptr, 0);
  CHECK(done.state == "done");
  CHECK(done.done == 8);
  auto store = db::open_sqlite_store(db);
  CHECK(store->records({"", t.key, 0, 100}).size() == 8);
  // The ghost's late answer is refused: the lease is gone.
  ErrorKind kind{};
  std::string why = test::error_of(
      [&] {
        c.call("POST", "/v1/leases/" + task["lease_id"].get<std::string>(),
               {{"worker_id", ghost}, {"results", nlohmann::json::array()}});
      },
      &kind);
  CHECK_MESSAGE(kind == ErrorKind::NotFound, why);
  CHECK_MESSAGE(why.find("no open lease") != std::string::npos, why);
}
