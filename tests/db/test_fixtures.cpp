// Stored data written by earlier versions (tests/fixtures/) keeps loading, or is refused with a
// clear message: an old database, configs written before the knob table, a model of the
// previous feature version.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "codegen/backend.hpp"
#include "costmodel/model.hpp"
#include "db/store.hpp"
#include "helpers.hpp"
#include "ir/loop_nest.hpp"
#include "tuner/tune.hpp"

using namespace tiletune;
using nlohmann::json;

namespace {

std::string fixture(const std::string& name) { return test::source_file("tests/fixtures/" + name); }

std::int64_t schema_version(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT value FROM schema_meta WHERE key = 'schema_version'", -1, &st, nullptr);
  std::int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

//! A database file in `dir` made by a fixture's SQL dump.
std::string database_from(const test::TempDir& dir, const std::string& dump) {
  std::string path = dir.file(dump + ".db");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  int rc = sqlite3_exec(db, fixture(dump).c_str(), nullptr, nullptr, &error);
  CHECK_MESSAGE(rc == SQLITE_OK, (error ? error : ""));
  sqlite3_free(error);
  sqlite3_close(db);
  return path;
}

}  // namespace

TEST_CASE("fixtures: a schema-version-1 database migrates with its records intact") {
  test::TempDir dir;
  std::string path = database_from(dir, "store_schema_v1.sql");
  REQUIRE(schema_version(path) == 1);
  auto store = db::open_sqlite_store(path);
  CHECK(schema_version(path) == 6);
  REQUIRE(store->workloads().size() == 1);
  db::WorkloadRow w = store->workloads().front();
  CHECK(w.op_text == "");  // written before op_text: the workload is rebuilt from its canonical text
  ir::Workload bound = tuner::workload_from_row(w);
  CHECK(bound.key == w.key);
  auto targets = store->targets();
  REQUIRE(targets.size() == 1);
  CHECK(targets[0].traits_json == "");
  auto history = store->history(w.key, targets[0].key);
  CHECK(history.size() == 6);
  auto best = store->best(w.key, targets[0].key);
  REQUIRE(best);
  CHECK(best->median_s() == doctest::Approx(1.5e-07));
  // Every stored config still reads, under its stored key.
  for (auto& r : history) CHECK(ir::Schedule::from_json(r.config_json).key() == r.config_key);
  // The tables added since work on the migrated file.
  db::TargetRow with_traits = targets[0];
  with_traits.traits_json = codegen::traits_to_json(ir::TargetTraits{});
  store->put_target(with_traits);
  CHECK(store->target(with_traits.key)->traits_json == with_traits.traits_json);
  db::JobRow job;
  job.id = "j1";
  job.request_key = "k";
  job.request_json = "{}";
  job.workload_key = w.key;
  job.target_key = targets[0].key;
  job.state = "queued";
  CHECK(store->put_job(job).id == "j1");
  CHECK(store->integrity_check() == "ok");
}

TEST_CASE("fixtures: a schema-version-4 database migrates; the jobs its daemon left are claimed in turn") {
  test::TempDir dir;
  std::string path = database_from(dir, "store_schema_v4.sql");
  REQUIRE(schema_version(path) == 4);
  auto store = db::open_sqlite_store(path);
  CHECK(schema_version(path) == 6);
  CHECK(store->jobs("", 10).size() == 3);
  CHECK(store->history(store->workloads().at(0).key, store->targets().at(0).key).size() == 6);
  // The job an old daemon left running has no claim: it is taken first (it waited longest),
  // with its progress; then the queued one; never the finished one.
  const std::int64_t now = 1800000000000;
  auto first = store->claim_job("new-daemon", now, 60000);
  REQUIRE(first);
  CHECK(first->id == "a1");
  CHECK(first->done == 3);
  CHECK(first->best_s == doctest::Approx(1.5e-7));
  auto second = store->claim_job("new-daemon", now, 60000);
  REQUIRE(second);
  CHECK(second->id == "b2");
  CHECK_FALSE(store->claim_job("new-daemon", now, 60000));
  // Workers and batches have their tables.
  store->put_worker({"w1", "box", store->targets().at(0).key, now, now});
  CHECK(store->workers().size() == 1);
  CHECK(store->integrity_check() == "ok");
}

TEST_CASE("fixtures: configs written before the knob table keep their text, keys and validity") {
  json fx = json::parse(fixture("configs_before_knob_table.json"));
  ir::TargetTraits traits = codegen::traits_from_json(fx["target_traits"].dump());
  REQUIRE(fx["configs"].size() >= 5);
  for (auto& c : fx["configs"]) {
    CAPTURE(c["config"].dump());
    std::string sizes;
    for (auto& [name, value] : c["sizes"].items()) sizes += (sizes.empty() ? "" : ",") + name + "=" + value.dump();
    ir::Workload w = test::library_workload(c["op"], sizes);
    CHECK(w.key == c["workload_key"]);  // workload keys are stable too
    ir::Schedule s = ir::Schedule::from_json_value(c["config"]);
    CHECK(s.to_json() == c["config"].dump());
    CHECK(s.key() == c["config_key"]);
    CHECK(ir::check_schedule(w, s, traits) == "");
  }
}

TEST_CASE("fixtures: a model of a feature version this build cannot read is refused with the reason") {
  std::string blob = fixture("model_nn_feature_version_1.bin");
  ErrorKind kind{};
  std::string why = test::error_of([&] { costmodel::load_model(blob); }, &kind);
  CHECK(kind == ErrorKind::InvalidInput);
  CHECK(why.find("trained with feature version 1 (31 features), which this build (version " +
                 std::to_string(costmodel::kFeatureVersion) + ") cannot read: retrain it") != std::string::npos);
}

TEST_CASE("fixtures: a schema-version-5 database migrates; its stored model starts the model history") {
  test::TempDir dir;
  std::string path = database_from(dir, "store_schema_v5.sql");
  REQUIRE(schema_version(path) == 5);
  auto store = db::open_sqlite_store(path);
  CHECK(schema_version(path) == 6);
  const std::string target = store->targets().at(0).key;
  auto history = store->model_history(target);
  REQUIRE(history.size() == 1);
  CHECK(history[0].kind == "xgb");
  CHECK(history[0].records == 12);
  CHECK(history[0].metrics_json.find("0.61") != std::string::npos);
  CHECK(history[0].blob.empty());  // the history keeps metrics, not models
  // A retrain replaces the model and adds to its history.
  auto m = *store->model("xgb", target);
  m.records = 40;
  m.metrics_json = R"({"held_out":{"pairwise":0.7}})";
  m.created_unix_ms = history[0].created_unix_ms + 1000;
  store->put_model(m);
  CHECK(store->model("xgb", target)->records == 40);
  history = store->model_history(target);
  REQUIRE(history.size() == 2);
  CHECK(history[1].records == 40);
  CHECK(store->model_history("0000000000000000").empty());
  CHECK(store->integrity_check() == "ok");
}
