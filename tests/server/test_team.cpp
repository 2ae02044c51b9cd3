// A team's database: daemons and CLIs on one PostgreSQL server (a throwaway one the tests start),
// daemons SIGKILLed mid-job, the server stopped mid-job. Loopback and Unix sockets only, bounded.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <map>
#include <set>

#include "client/client.hpp"
#include "daemon_process.hpp"
#include "db/store.hpp"
#include "helpers.hpp"
#include "postgres.hpp"
#include "support/subprocess.hpp"

using namespace tiletune;
using test::DaemonProcess;
using test::TempDir;
using test::wait_for;

namespace {

ProcessResult cli(const std::vector<std::string>& args, double timeout_s = 300) {
  std::vector<std::string> argv = {std::string(TILETUNE_BINARY_DIR) + "/tiletune"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, timeout_s);
}

//! Records per workload key.
std::map<std::string, std::int64_t> records_by_workload(db::Store& store) {
  std::map<std::string, std::int64_t> out;
  for (auto& r : store.records({"", "", 0, 1000000})) ++out[r.workload_key];
  return out;
}

}  // namespace

TEST_CASE(
    "team: daemons and a CLI on one PostgreSQL share the queue; a SIGKILLed daemon's jobs finish elsewhere, "
    "each once, no record lost or doubled") {
  test::PostgresDb pg;
  TempDir dir;
  const std::vector<std::string> fast_claims = {"--job-lease", "3"};
  auto a = std::make_unique<DaemonProcess>(pg.url(), dir.file("a.log"), "120", fast_claims);
  DaemonProcess b(pg.url(), dir.file("b.log"), "120", fast_claims);
  DaemonProcess c(pg.url(), dir.file("c.log"), "120", fast_claims);
  client::Client ca(a->url(), "tok"), cb(b.url(), "tok"), cc(c.url(), "tok");
  // Six jobs through three daemons; the same request twice shares one job.
  std::vector<std::string> ids;
  std::vector<std::string> sizes = {"M=16,N=16,K=16", "M=16,N=24,K=16", "M=24,N=16,K=16",
                                    "M=24,N=24,K=8",  "M=8,N=24,K=16",  "M=16,N=8,K=24"};
  for (size_t i = 0; i < sizes.size(); ++i) {
    client::Client& via = i % 3 == 0 ? ca : i % 3 == 1 ? cb : cc;
    ids.push_back(via.tune("matmul", sizes[i], 12, "random").id);
  }
  CHECK(cb.tune("matmul", sizes[0], 12, "random").id == ids[0]);
  // A CLI tunes on the same database meanwhile.
  std::thread tuner([&] {
    auto r = cli({"tune", "matmul", "--sizes", "M=12,N=12,K=12", "--trials", "8", "--strategy", "random", "--min-time",
                  "0.002", "--db", pg.url(), "--cache", test::kernel_cache()});
    CHECK_MESSAGE(r.ok(), r.describe() << "\n" << r.output);
  });
  // Kill daemon a while it runs a job with records stored.
  std::string victim;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  while (victim.empty() && std::chrono::steady_clock::now() < end) {
    for (auto& id : ids) {
      auto j = cb.call("GET", "/v1/jobs/" + id);
      if (j["state"] == "running" && j["done"].get<int>() > 0 &&
          j["owner"].get<std::string>().find(":" + std::to_string(a->pid()) + ":") != std::string::npos)
        victim = id;
    }
    if (victim.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE_MESSAGE(!victim.empty(), "daemon a never ran a job");
  a->kill_hard();
  a.reset();
  for (auto& id : ids) {
    auto j = wait_for(
        cb, id, [](auto& j) { return j.finished(); }, 300);
    CHECK(j.state == "done");
    CHECK(j.done == 12);
  }
  tuner.join();
  auto store = db::open_store(pg.url());
  CHECK(store->jobs("", 100).size() == ids.size());
  // Every workload has exactly its budget of records: none lost with the killed daemon, none
  // measured twice by the daemon that took the job over.
  auto counts = records_by_workload(*store);
  CHECK(counts.size() == ids.size() + 1);
  std::int64_t total = 0;
  for (auto& [key, n] : counts) total += n;
  CHECK(total == 12 * static_cast<std::int64_t>(ids.size()) + 8);
  for (auto& id : ids) CHECK(counts[store->job(id)->workload_key] == 12);
  auto check = cli({"db", "check", "--db", pg.url()});
  CHECK_MESSAGE(check.ok(), check.output);
  CHECK(check.output.find("integrity: ok") != std::string::npos);

  // A cancel through one daemon stops the job another daemon runs: its claim is gone, so it
  // stops after the batch in flight and writes nothing more.
  std::string long_id = cc.tune("matmul", "M=40,N=40,K=40", 400, "random").id;
  nlohmann::json running;
  for (int i = 0; i < 1200; ++i) {
    running = cb.call("GET", "/v1/jobs/" + long_id);
    if (running["state"] == "running" && running["done"].get<int>() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(running["state"] == "running");
  const bool on_b = running["owner"].get<std::string>().find(":" + std::to_string(b.pid()) + ":") != std::string::npos;
  client::Client& other = on_b ? cc : cb;
  DaemonProcess& owner = on_b ? b : c;
  auto long_key = store->job(long_id)->workload_key;
  auto records_of_long = [&] { return db::open_store(pg.url())->count(db::RecordQuery{long_key, ""}); };
  const std::int64_t before_cancel = records_of_long();
  CHECK(other.cancel(long_id).state == "cancelled");
  // The owner finds its claim gone at its next write or renewal and ends its turn after the batch
  // in flight; how long that takes depends on the machine, so the test waits for the owner to say so.
  REQUIRE_MESSAGE(owner.wait_for_log("event=turn_ended job=" + long_id + " claim=lost", 300),
                  "the owner of the cancelled job never ended its turn");
  std::int64_t settled = records_of_long();
  // At most the batch it had started when the count was read and the one in flight at the cancel
  // (batches of 4: DaemonProcess passes --batch 4).
  CHECK(settled <= before_cancel + 2 * 4);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  CHECK(records_of_long() == settled);  // it stopped
  auto cancelled = store->job(long_id);
  CHECK(cancelled->state == "cancelled");
  CHECK(cancelled->owner.empty());
  CHECK(cancelled->done < 400);
}

TEST_CASE(
    "team: PostgreSQL stopped in the middle of a job: 503 meanwhile, and the job completes when it returns "
    "with no measurement lost") {
  test::PostgresServer server;
  test::PostgresDb pg(server.socket_dir());
  TempDir dir;
  DaemonProcess d(pg.url(), dir.file("d.log"));
  client::Client c(d.url(), "tok");
  std::string id = c.tune("matmul", "M=16,N=40,K=24", 24, "random").id;
  REQUIRE(wait_for(
              c, id, [](auto& j) { return j.done >= 4; }, 180)
              .done >= 4);
  server.stop();
  // While it is away, reads that need it are 503 with the reason; the daemon stays up.
  ErrorKind kind{};
  std::string why = test::error_of([&] { c.job(id); }, &kind);
  CHECK_MESSAGE(kind == ErrorKind::Unavailable, why);
  std::this_thread::sleep_for(std::chrono::seconds(4));
  server.start();
  auto j = wait_for(
      c, id, [](auto& j) { return j.finished(); }, 300);
  CHECK(j.state == "done");
  CHECK(j.done == 24);
  auto store = db::open_store(pg.url());
  CHECK(store->records({"", "", 0, 1000}).size() == 24);
  CHECK(store->integrity_check() == "ok");
  // The CLI keeps its batch through an outage too.
  std::thread outage([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    server.stop();
    std::this_thread::sleep_for(std::chrono::seconds(4));
    server.start();
  });
  auto r = cli({"tune", "matmul", "--sizes", "M=16,N=16,K=40", "--trials", "24", "--strategy", "random", "--min-time",
                "0.002", "--db", pg.url(), "--cache", test::kernel_cache()});
  outage.join();
  CHECK_MESSAGE(r.ok(), r.describe() << "\n" << r.output);
  auto after = db::open_store(pg.url());
  CHECK(after->count(db::RecordQuery{}) == 48);
}

TEST_CASE("team: db push merges a machine's records into the team's, pull brings them back; checked before writing") {
  test::PostgresDb pg;
  TempDir dir;
  std::string local = dir.file("mine.db"), other = dir.file("other.db");
  auto tune = [&](const std::string& db, const std::string& sizes, const std::string& threads) {
    auto r = cli({"tune", "matmul", "--sizes", sizes, "--trials", "6", "--strategy", "random", "--min-time", "0.002",
                  "--threads", threads, "--db", db, "--cache", test::kernel_cache()});
    REQUIRE_MESSAGE(r.ok(), r.output);
  };
  tune(local, "M=16,N=16,K=8", "2");
  tune(local, "M=8,N=16,K=8", "1");  // another target (the fingerprint counts threads)
  auto push = cli({"db", "push", "--from", local, "--to", pg.url()});
  REQUIRE_MESSAGE(push.ok(), push.output);
  CHECK(push.output.find("copied 12 records (0 were there already)") != std::string::npos);
  auto again = cli({"db", "push", "--from", local, "--to", pg.url()});
  CHECK(again.output.find("copied 0 records (12 were there already)") != std::string::npos);
  auto team = db::open_store(pg.url());
  CHECK(team->count(db::RecordQuery{}) == 12);
  CHECK(team->targets().size() == 2);
  // Pull one target's records into a fresh file: the other target's stay out.
  std::string target = db::open_sqlite_store(local)->targets().front().key;
  auto pull = cli({"db", "pull", "--from", pg.url(), "--to", other, "--target", target});
  REQUIRE_MESSAGE(pull.ok(), pull.output);
  auto mine = db::open_sqlite_store(other);
  CHECK(mine->count(db::RecordQuery{}) == 6);
  REQUIRE(mine->targets().size() == 1);
  CHECK(mine->targets()[0].key == target);
  // A database with one record whose config key was tampered with: nothing of it is written.
  tune(local, "M=24,N=16,K=8", "2");
  {
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(local.c_str(), &raw) == SQLITE_OK);
    REQUIRE(sqlite3_exec(raw, "UPDATE records SET config_key = 'f00d' WHERE id = (SELECT MAX(id) FROM records)",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  auto tampered = cli({"db", "push", "--from", local, "--to", pg.url()});
  CHECK(tampered.exit_code == 2);
  CHECK_MESSAGE(tampered.output.find("config_key does not match its config") != std::string::npos, tampered.output);
  CHECK(team->count(db::RecordQuery{}) == 12);
  auto check = cli({"db", "check", "--db", other});
  CHECK_MESSAGE(check.ok(), check.output);
  CHECK(check.output.find("6 records") != std::string::npos);
  // A database whose logical checks fail: db check says what and exits 5.
  db::JobRow odd;
  odd.id = "odd";
  odd.request_key = "odd";
  odd.request_json = "{}";
  odd.state = "queued";
  team->put_job(odd);
  REQUIRE(team->set_job_state_if("odd", "queued", "misplaced"));
  auto failing = cli({"db", "check", "--db", pg.url()});
  CHECK(failing.exit_code == 5);
  CHECK_MESSAGE(failing.output.find("1 jobs in an unknown state") != std::string::npos, failing.output);
  // Bad places: exit 2 for the same database twice, 3 for a missing file, 4 for no server, 5 for
  // refused credentials.
  CHECK(cli({"db", "push", "--from", local, "--to", local}).exit_code == 2);
  CHECK(cli({"db", "check", "--db", dir.file("missing.db")}).exit_code == 3);
  CHECK(
      cli({"db", "push", "--from", local, "--to", "postgresql://tiletune@/x?host=/nonexistent-socket-dir"}).exit_code ==
      4);
  CHECK(cli({"db", "push", "--from", local, "--to", test::postgres_url(pg.host(), pg.name(), "no_such_role")})
            .exit_code == 5);
  CHECK(team->count(db::RecordQuery{}) == 12);
}
