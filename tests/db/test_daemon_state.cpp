// The daemon's state in the database, against SQLite and PostgreSQL alike: jobs claimed by one
// daemon at a time and taken over when a claim runs out; remote workers and the batches they
// lease; batches of records merged all or nothing.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "db/store.hpp"
#include "helpers.hpp"
#include "postgres.hpp"
#include "support/hash.hpp"

using namespace tiletune;
using namespace tiletune::db;

namespace {

JobRow job(const std::string& id, const std::string& request_key) {
  JobRow j;
  j.id = id;
  j.request_key = request_key;
  j.request_json = "{}";
  j.workload_key = "w";
  j.target_key = "t";
  j.state = "queued";
  return j;
}

//! Every store engine, each a fresh database; `body` gets a function opening another connection.
void for_each_engine(const std::function<void(const std::function<std::unique_ptr<Store>()>&)>& body) {
  SUBCASE("sqlite") {
    test::TempDir dir;
    std::string path = dir.file("s.db");
    body([path] { return open_sqlite_store(path); });
  }
  SUBCASE("postgresql") {
    test::PostgresDb db;
    std::string url = db.url();
    body([url] { return open_store(url); });
  }
}

void check_claims(Store& a, Store& b) {
  a.put_job(job("j1", "r1"));
  b.put_job(job("j2", "r2"));
  const std::int64_t t0 = 1'000'000;
  // Oldest turn first; each job to one daemon.
  auto first = a.claim_job("daemon-a", t0, 1000);
  REQUIRE(first);
  CHECK(first->id == "j1");
  CHECK(first->state == "running");
  CHECK(first->owner == "daemon-a");
  CHECK(first->lease_until_unix_ms == t0 + 1000);
  auto second = b.claim_job("daemon-b", t0, 1000);
  REQUIRE(second);
  CHECK(second->id == "j2");
  CHECK_FALSE(a.claim_job("daemon-a", t0 + 500, 1000));  // both held

  // Progress is written by the owner only.
  JobRow progress = *first;
  progress.done = 4;
  progress.spent_s = 1.5;
  CHECK(a.update_job(progress));
  JobRow intruder = progress;
  intruder.owner = "daemon-b";
  intruder.done = 99;
  CHECK_FALSE(b.update_job(intruder));
  CHECK(b.job("j1")->done == 4);
  CHECK(b.job("j1")->spent_s == doctest::Approx(1.5));

  // A renewed claim holds; one that ran out goes to the next daemon that asks.
  CHECK(a.renew_job("j1", "daemon-a", t0 + 900, 1000));  // now until t0 + 1900
  CHECK_FALSE(b.renew_job("j1", "daemon-b", t0 + 900, 1000));
  auto taken = b.claim_job("daemon-b", t0 + 1500, 1000);  // j2's claim ran out at t0 + 1000
  REQUIRE(taken);
  CHECK(taken->id == "j2");
  auto over = b.claim_job("daemon-c", t0 + 2000, 1000);  // j1's ran out at t0 + 1900
  REQUIRE(over);
  CHECK(over->id == "j1");
  CHECK(over->done == 4);  // where the dead daemon left it
  // The old owner has lost it: its writes and renewals are refused.
  CHECK_FALSE(a.renew_job("j1", "daemon-a", t0 + 2100, 1000));
  progress.state = "queued";
  CHECK_FALSE(a.update_job(progress));
  CHECK(a.job("j1")->owner == "daemon-c");

  // The end of a turn releases the job; it goes behind the jobs that waited longer.
  a.put_job(job("j3", "r3"));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // j3 waits longer than j1 will
  JobRow turn = *over;
  turn.state = "queued";
  CHECK(b.update_job(turn));
  CHECK(a.job("j1")->owner.empty());
  auto next = a.claim_job("daemon-a", t0 + 2200, 1000);
  REQUIRE(next);
  CHECK(next->id == "j3");

  // A cancel of a running job releases it: the owner finds out at its next renewal.
  CHECK(b.set_job_state_if("j3", "running", "cancelled"));
  CHECK_FALSE(a.renew_job("j3", "daemon-a", t0 + 2300, 1000));
  CHECK(a.job("j3")->owner.empty());
  CHECK(a.job("j3")->state == "cancelled");
  CHECK(a.integrity_check() == "ok");
}

void check_batches(Store& a, Store& b) {
  b.put_worker({"w1", "gpu box", "t", 10, 10});
  REQUIRE(a.worker("w1"));
  CHECK(a.worker("w1")->target_key == "t");
  CHECK(a.touch_worker("w1", 20));
  CHECK(b.worker("w1")->last_seen_unix_ms == 20);
  CHECK_FALSE(a.touch_worker("nobody", 20));
  CHECK(a.workers().size() == 1);

  a.post_batch({"L1", "j1", "t", R"({"configs":[1]})", "", 0, 100, std::nullopt});
  a.post_batch({"L2", "j1", "t", R"({"configs":[2]})", "", 0, 200, std::nullopt});
  a.post_batch({"L3", "j2", "other", "{}", "", 0, 50, std::nullopt});
  const std::int64_t t0 = 1'000'000;
  auto l1 = b.lease_batch("w1", "t", t0, 1000);  // oldest of its target, posted by another connection
  REQUIRE(l1);
  CHECK(l1->id == "L1");
  CHECK(l1->task_json == R"({"configs":[1]})");
  auto l2 = b.lease_batch("w2", "t", t0, 1000);
  REQUIRE(l2);
  CHECK(l2->id == "L2");
  CHECK_FALSE(b.lease_batch("w3", "t", t0 + 10, 1000));
  // w1 vanishes; its batch goes to w3 once the lease runs out, and w1's late answer is refused.
  auto again = b.lease_batch("w3", "t", t0 + 1001, 1000);
  REQUIRE(again);
  CHECK(again->id == "L1");
  CHECK(a.complete_batch("L1", "w1", "[]") == Completion::TakenOver);
  CHECK(a.complete_batch("L1", "w3", R"([{"r":1}])") == Completion::Accepted);
  CHECK(b.batch("L1")->results_json == R"([{"r":1}])");
  CHECK(a.complete_batch("L1", "w3", "[]") == Completion::Unknown);  // already complete
  auto late = b.lease_batch("w4", "t", t0 + 5000, 1000);  // w2's lease ran out too; L1 is complete
  REQUIRE(late);
  CHECK(late->id == "L2");
  a.remove_batch("L1");
  CHECK_FALSE(b.batch("L1"));
  CHECK(a.complete_batch("L1", "w3", "[]") == Completion::Unknown);
  // A job taken over drops the batches its dead owner posted.
  b.remove_job_batches("j1");
  CHECK_FALSE(a.batch("L2"));
  CHECK(a.batch("L3"));
}

void check_merge(Store& store) {
  WorkloadRow w{hash_hex("mw"), "op", "text", "{}", "op text"};
  TargetRow t{hash_hex("mt"), "cpu", "cpu-x", "{}", ""};
  RecordBatch batch;
  batch.workloads = {w};
  batch.targets = {t};
  for (int i = 0; i < 3; ++i) {
    Record r;
    r.workload_key = w.key;
    r.target_key = t.key;
    r.config_json = std::to_string(i);
    r.config_key = hash_hex(r.config_json);
    r.times_s = {0.1 * (i + 1)};
    batch.records.push_back(r);
  }
  MergeCounts first = store.merge(batch);
  CHECK(first.imported == 3);
  CHECK(first.duplicates == 0);
  MergeCounts second = store.merge(batch);
  CHECK(second.imported == 0);
  CHECK(second.duplicates == 3);
  // A batch with one record the store cannot hold writes none of it.
  RecordBatch bad;
  Record fine = batch.records[0];
  fine.config_json = "new";
  fine.config_key = hash_hex("new");
  Record orphan = fine;
  orphan.config_key = hash_hex("orphan");
  orphan.target_key = "nowhere";
  bad.records = {fine, orphan};
  CHECK_THROWS(store.merge(bad));
  CHECK(store.count(RecordQuery{}) == 3);
  CHECK_FALSE(store.has_config(w.key, t.key, fine.config_key));
}

}  // namespace

TEST_CASE("daemon state: jobs are claimed by one daemon at a time and taken over when a claim runs out") {
  for_each_engine([](auto open) {
    auto a = open();
    auto b = open();
    check_claims(*a, *b);
  });
}

TEST_CASE("daemon state: remote workers and their batches are shared by every connection") {
  for_each_engine([](auto open) {
    auto a = open();
    auto b = open();
    check_batches(*a, *b);
  });
}

TEST_CASE("daemon state: a batch of records merges all or nothing") {
  for_each_engine([](auto open) { check_merge(*open()); });
}

TEST_CASE("daemon state: four processes claiming one queue run each job exactly once") {
  for_each_engine([](auto open) {
    const int kJobs = 40, kProcs = 4;
    {
      auto store = open();
      for (int i = 0; i < kJobs; ++i) store->put_job(job("job" + std::to_string(100 + i), "r" + std::to_string(i)));
    }
    std::vector<pid_t> children;
    for (int p = 0; p < kProcs; ++p) {
      pid_t pid = fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        int code = 0;
        try {
          auto store = open();
          std::string me = "daemon-" + std::to_string(p);
          const std::int64_t far = 4'000'000'000'000;  // claims that never run out in this test
          while (auto j = store->claim_job(me, far, 1000)) {
            JobRow done = *j;
            done.state = "done";
            done.error = me;  // who ran it
            done.done = j->done + 1;
            if (!store->update_job(done)) code = 3;
          }
        } catch (...) {
          code = 2;
        }
        _exit(code);
      }
      children.push_back(pid);
    }
    for (pid_t pid : children) {
      int status = 0;
      waitpid(pid, &status, 0);
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
    }
    auto store = open();
    auto all = store->jobs("", 1000);
    CHECK(all.size() == kJobs);
    std::set<std::string> runners;
    for (auto& j : all) {
      CHECK(j.state == "done");
      CHECK(j.done == 1);  // run once
      runners.insert(j.error);
    }
    MESSAGE("jobs spread over " << runners.size() << " processes");
    CHECK(store->integrity_check() == "ok");
  });
}

TEST_CASE("daemon state: a job's result and the model history are kept, on every engine") {
  for_each_engine([](auto open) {
    auto a = open();
    auto b = open();
    a->put_job(job("j1", "r1"));
    CHECK(!b->job_result("j1"));
    a->put_job_result("j1", R"({"fma_gflops":100})");
    CHECK(b->job_result("j1") == std::optional<std::string>(R"({"fma_gflops":100})"));
    b->put_job_result("j1", R"({"fma_gflops":200})");  // a second judgement replaces the first
    CHECK(a->job_result("j1") == std::optional<std::string>(R"({"fma_gflops":200})"));
    // Models: the latest per kind and target, and every one in the history, oldest first.
    a->put_target({"t1", "cpu", "cpu-x", "{}", ""});
    for (int i = 1; i <= 3; ++i)
      (i % 2 ? a : b)->put_model({"xgb", "t1", 2, 100 * i, "{\"n\":" + std::to_string(i) + "}", "blob", 1000 + i});
    CHECK(a->model("xgb", "t1")->records == 300);
    auto history = b->model_history("t1");
    REQUIRE(history.size() == 3);
    for (int i = 0; i < 3; ++i) CHECK(history[i].records == 100 * (i + 1));
    CHECK(history[0].blob.empty());
    CHECK(a->model_history("t2").empty());
  });
}
