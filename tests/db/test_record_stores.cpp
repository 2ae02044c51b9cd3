// The RecordStore contract, run against every implementation (SQLite, in memory), and the JSON
// forms of workload and target rows.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "db/store.hpp"
#include "helpers.hpp"
#include "postgres.hpp"
#include "support/hash.hpp"
#include "tuner/search.hpp"
#include "tuner/tune.hpp"

using namespace tiletune;
using namespace tiletune::db;
using nlohmann::json;

namespace {

const WorkloadRow kWorkload{hash_hex("w"), "matmul", "op matmul ... M=64", R"({"M":64})", "op text"};
const TargetRow kTarget{hash_hex("t"), "cpu", "cpu-x", R"({"cpu":"x"})", ""};

Record record(int n, std::vector<double> times, const std::string& error_class = "") {
  Record r;
  r.workload_key = kWorkload.key;
  r.target_key = kTarget.key;
  r.config_json = json{{"version", 1}, {"n", n}}.dump();
  r.config_key = hash_hex(r.config_json);
  r.times_s = std::move(times);
  r.error_class = error_class;
  r.tool_version = "test";
  r.created_unix_ms = 1 + n;
  return r;
}

//! The behaviour every record store shares.
void check_contract(RecordStore& store) {
  std::int64_t stamp = store.change_stamp();
  store.put_workload(kWorkload);
  store.put_target(kTarget);
  CHECK(store.change_stamp() != stamp);
  REQUIRE(store.workload(kWorkload.key));
  CHECK(store.workload(kWorkload.key)->op_text == "op text");
  CHECK_FALSE(store.workload("nope"));
  // A target stored without traits takes them later; one with traits keeps them.
  TargetRow with_traits = kTarget;
  with_traits.traits_json = R"({"lanes":8})";
  store.put_target(with_traits);
  CHECK(store.target(kTarget.key)->traits_json == R"({"lanes":8})");
  with_traits.traits_json = R"({"lanes":16})";
  store.put_target(with_traits);
  CHECK(store.target(kTarget.key)->traits_json == R"({"lanes":8})");
  CHECK(store.targets().size() == 1);
  CHECK(store.workloads().size() == 1);

  std::int64_t a = store.add_record(record(1, {0.3, 0.1, 0.2}));  // median 0.2
  std::int64_t b = store.add_record(record(2, {}, "timeout"));
  std::int64_t c = store.add_record(record(3, {0.05}));
  CHECK(a < b);
  CHECK(b < c);
  CHECK(store.add_record(record(1, {9.0})) == a);  // the same config is not doubled
  CHECK(store.count_records(kWorkload.key, kTarget.key) == 3);

  auto best = store.best(kWorkload.key, kTarget.key);
  REQUIRE(best);
  CHECK(best->id == c);
  auto top = store.top_k(kWorkload.key, kTarget.key, 5);
  REQUIRE(top.size() == 2);  // the failure never ranks
  CHECK(top[0].id == c);
  CHECK(top[1].id == a);
  CHECK(top[1].median_s() == doctest::Approx(0.2));
  auto history = store.history(kWorkload.key, kTarget.key);
  REQUIRE(history.size() == 3);
  CHECK(history[1].error_class == "timeout");
  CHECK(store.has_config(kWorkload.key, kTarget.key, record(2, {}).config_key));
  CHECK_FALSE(store.has_config(kWorkload.key, kTarget.key, record(4, {}).config_key));

  RecordQuery page{"", "", a, 1};
  auto after_a = store.records(page);
  REQUIRE(after_a.size() == 1);
  CHECK(after_a[0].id == b);
  RecordQuery ok_only{kWorkload.key, kTarget.key};
  ok_only.ok_only = true;
  CHECK(store.count(ok_only) == 2);
  CHECK(store.records(ok_only).size() == 2);

  Record orphan = record(5, {0.1});
  orphan.target_key = "unknown";
  ErrorKind kind{};
  CHECK(test::error_of([&] { store.add_record(orphan); }, &kind).find("is not in the database") != std::string::npos);
  CHECK(kind == ErrorKind::Database);
  CHECK(test::error_of([&] { store.add_record(record(6, {})); }, &kind).find("at least one time") != std::string::npos);

  // Timed again (the tuner's side-by-side round), a record takes the new times and parameters,
  // and the ranking follows them; a failure or an unknown id is not retimed.
  stamp = store.change_stamp();
  CHECK(store.retime(a, {0.01, 0.03, 0.02, 0.04}, R"({"side_by_side":2})"));
  CHECK(store.change_stamp() != stamp);
  auto retimed = store.records(RecordQuery{"", "", a - 1, 1});
  REQUIRE(retimed.size() == 1);
  CHECK(retimed[0].times_s == std::vector<double>{0.01, 0.03, 0.02, 0.04});
  CHECK(retimed[0].median_s() == doctest::Approx(0.025));
  CHECK(retimed[0].measure_params_json == R"({"side_by_side":2})");
  CHECK(retimed[0].config_key == record(1, {}).config_key);
  CHECK(store.best(kWorkload.key, kTarget.key)->id == a);
  CHECK_FALSE(store.retime(b, {0.01}, "{}"));  // a failure stays one
  CHECK_FALSE(store.retime(c + 100, {0.01}, "{}"));
  CHECK(test::error_of([&] { store.retime(c, {}, "{}"); }, &kind).find("at least one time") != std::string::npos);
  CHECK(kind == ErrorKind::InvalidInput);
  CHECK(test::error_of([&] { store.retime(c, {0.1, -1}, "{}"); }, &kind).find("not positive") != std::string::npos);
  CHECK(test::error_of([&] { store.retime(c, {NAN}, "{}"); }, &kind).find("not positive") != std::string::npos);
  CHECK(store.best(kWorkload.key, kTarget.key)->id == a);
  // Times from two side-by-side sessions rank by the geometric mean of the sessions' medians
  // (sqrt(0.011 * 0.05) = 0.0235, before a's 0.025), not by the median of all six (0.026).
  CHECK(store.retime(c, {0.01, 0.012, 0.011, 0.04, 0.06, 0.05}, R"({"side_by_side":2,"sessions":[3,3]})"));
  REQUIRE(store.best(kWorkload.key, kTarget.key)->id == c);
  CHECK(store.best(kWorkload.key, kTarget.key)->median_s() == doctest::Approx(std::sqrt(0.011 * 0.05)));
  CHECK(store.top_k(kWorkload.key, kTarget.key, 2)[1].id == a);
  CHECK(store.retime(c, {0.05}, "{}"));
  CHECK(store.best(kWorkload.key, kTarget.key)->id == a);
  CHECK(store.history(kWorkload.key, kTarget.key)[1].error_class == "timeout");
  CHECK(store.integrity_check() == "ok");
}

}  // namespace

TEST_CASE("record stores: SQLite, PostgreSQL and the in-memory store keep one contract") {
  SUBCASE("sqlite") {
    test::TempDir dir;
    auto store = open_sqlite_store(dir.file("r.db"));
    check_contract(*store);
  }
  SUBCASE("postgresql") {
    test::PostgresDb db;
    auto store = open_store(db.url());
    check_contract(*store);
  }
  SUBCASE("memory") {
    auto store = make_memory_record_store();
    check_contract(*store);
  }
}

TEST_CASE("record stores: a tuning run works on the in-memory store") {
  auto store = make_memory_record_store();
  auto be = codegen::make_backend("cpu");
  tuner::TuneOptions o = test::quick_tune_options(4, 4);
  auto w = test::library_workload("matmul", "M=8,N=12,K=5");
  auto summary = tuner::tune(w, *be, *store, o);
  CHECK(summary.measured == 4);
  CHECK(store->count_records(w.key, be->target().key) == 4);
  REQUIRE(summary.best);
  CHECK(store->best(w.key, be->target().key)->id == summary.best->id);
}

TEST_CASE("rows json: workload and target rows round trip, and bad rows are refused with what is wrong") {
  CHECK(workload_from_json(workload_to_json(kWorkload)).op_text == kWorkload.op_text);
  CHECK(workload_from_json(workload_to_json(kWorkload)).sizes_json == kWorkload.sizes_json);
  TargetRow t = kTarget;
  t.traits_json = "{}";
  CHECK(target_from_json(target_to_json(t)).traits_json == "{}");
  CHECK(target_from_json(target_to_json(t)).family == t.family);
  // Rows written before op_text and traits_json existed still read.
  json old = workload_to_json(kWorkload);
  old.erase("op_text");
  CHECK(workload_from_json(old).op_text == "");
  ErrorKind kind{};
  json missing = workload_to_json(kWorkload);
  missing.erase("canonical_text");
  CHECK(test::error_of([&] { workload_from_json(missing); }, &kind) == "workload: missing field \"canonical_text\"");
  CHECK(kind == ErrorKind::InvalidInput);
  json wrong = target_to_json(t);
  wrong["family"] = 3;
  CHECK(test::error_of([&] { target_from_json(wrong); }, &kind) ==
        "target: field \"family\" must be a string, got number");
  CHECK(test::error_of([&] { target_from_json(json::array()); }, &kind) == "target: expected a JSON object, got array");
}

TEST_CASE("options: the API schema's limits are the tuner's") {
  json api = test::schema("api.schema.json");
  CHECK(api["$defs"]["TuneRequest"]["properties"]["trials"]["maximum"].get<int>() == tuner::kMaxTrials);
  CHECK(api["$defs"]["LeaseResults"]["properties"]["results"]["maxItems"].get<int>() == tuner::kMaxBatch);
  for (const char* request : {"TuneRequest", "ModelRequest"}) {
    INFO(request);
    std::vector<std::string> strategies = api["$defs"][request]["properties"]["strategy"]["enum"];
    CHECK(strategies == tuner::search_names());
  }
}
