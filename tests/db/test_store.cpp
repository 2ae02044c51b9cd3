#include <doctest/doctest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "db/store.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "support/json_schema.hpp"

namespace fs = std::filesystem;
using namespace tiletune;
using namespace tiletune::db;
using nlohmann::json;

namespace {

//! A fresh directory per test, removed afterwards (with the -wal and -shm files).
struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() / ("tiletune-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const char* name) const { return (path / name).string(); }
};

const WorkloadRow kWorkload{hash_hex("matmul M=64"), "matmul", "op matmul ... M=64", R"({"K":64,"M":64,"N":64})"};
const TargetRow kTarget{hash_hex("cpu zen5 g++12"), "cpu", "cpu-zen5", R"({"cores":2,"cpu":"zen5"})"};

Record success(int n, std::vector<double> times) {
  Record r;
  r.workload_key = kWorkload.key;
  r.target_key = kTarget.key;
  r.config_json = json{{"version", 1}, {"stages", {{{"stage", "C"}, {"unroll", n}}}}}.dump();
  r.config_key = hash_hex(r.config_json);
  r.times_s = std::move(times);
  r.measure_params_json = R"({"repeats":3,"threads":2})";
  r.tool_version = "0.1.0";
  r.created_unix_ms = 1700000000000 + n;
  return r;
}

Record failure(int n, const char* error_class) {
  Record r = success(n, {});
  r.error_class = error_class;
  r.error_message = "kernel.cpp:3: error: expected ';'";
  return r;
}

std::unique_ptr<Store> open_with_keys(const std::string& path) {
  auto store = open_sqlite_store(path);
  store->put_workload(kWorkload);
  store->put_target(kTarget);
  return store;
}

// The message of the tiletune::Error that f throws, after checking its kind.
template <class F>
std::string error_message(ErrorKind kind, F f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    return e.what();
  }
  FAIL("no tiletune::Error thrown");
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void sql(const std::string& path, const char* statement) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK_MESSAGE(sqlite3_exec(db, statement, nullptr, nullptr, nullptr) == SQLITE_OK, sqlite3_errmsg(db));
  sqlite3_close(db);
}

json load_schema(const char* name) {
  std::ifstream in(std::string(TILETUNE_SOURCE_DIR) + "/schemas/" + name);
  REQUIRE_MESSAGE(in.good(), "cannot read schemas/" << name);
  return json::parse(in);
}

// Writes n distinct records (configs first..first+n-1); returns how many failed to write.
int write_records(const std::string& path, int first, int n) {
  int failures = 0;
  auto store = open_with_keys(path);
  for (int i = first; i < first + n; ++i) {
    try {
      store->add_record(i % 5 ? success(i, {1e-3 * i}) : failure(i, "timeout"));
    } catch (const std::exception&) {
      ++failures;
    }
  }
  return failures;
}

}  // namespace

TEST_CASE("store: creates a database that keeps its data when reopened") {
  TempDir dir;
  auto path = dir.file("t.db");
  std::int64_t id = 0;
  {
    auto store = open_with_keys(path);
    id = store->add_record(success(1, {0.5}));
    CHECK(id > 0);
  }
  auto store = open_sqlite_store(path);
  CHECK(store->count_records(kWorkload.key, kTarget.key) == 1);
  CHECK(store->history(kWorkload.key, kTarget.key).at(0).id == id);
  CHECK(store->workload(kWorkload.key).has_value());
}

TEST_CASE("store: stores its schema version and refuses a newer one") {
  TempDir dir;
  auto path = dir.file("t.db");
  open_sqlite_store(path);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT value FROM schema_meta WHERE key = 'schema_version'", -1, &st, nullptr) ==
          SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  std::int64_t version = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  CHECK(version == 6);  // a new schema version gets a fixture under tests/fixtures and a test

  sql(path, "UPDATE schema_meta SET value = 999 WHERE key = 'schema_version'");
  auto msg = error_message(ErrorKind::Database, [&] { open_sqlite_store(path); });
  CHECK(contains(msg, "999"));
  CHECK(contains(msg, "supports up to version 6"));
}

TEST_CASE("store: refuses files that are not tiletune databases") {
  TempDir dir;
  auto garbage = dir.file("garbage.db");
  std::ofstream(garbage) << std::string(4096, 'x');
  auto msg = error_message(ErrorKind::Database, [&] { open_sqlite_store(garbage); });
  CHECK(contains(msg, garbage));
  CHECK(contains(msg, "not a database"));

  auto other = dir.file("other.db");
  sql(other, "CREATE TABLE photos (id INTEGER)");
  msg = error_message(ErrorKind::Database, [&] { open_sqlite_store(other); });
  CHECK(contains(msg, "not a tiletune database"));

  error_message(ErrorKind::Database, [&] { open_sqlite_store(dir.file("no/such/dir/t.db")); });
}

TEST_CASE("store: workloads and targets") {
  TempDir dir;
  auto store = open_with_keys(dir.file("t.db"));
  store->put_workload(kWorkload);  // a second put is ignored
  auto w = store->workload(kWorkload.key);
  REQUIRE(w);
  CHECK(w->op_name == "matmul");
  CHECK(w->canonical_text == kWorkload.canonical_text);
  CHECK(w->sizes_json == kWorkload.sizes_json);
  CHECK_FALSE(store->workload("0000000000000000"));

  auto t = store->target(kTarget.key);
  REQUIRE(t);
  CHECK(t->backend == "cpu");
  CHECK(t->family == "cpu-zen5");
  CHECK(t->fingerprint_json == kTarget.fingerprint_json);
  CHECK_FALSE(store->target("0000000000000000"));
  TargetRow other{hash_hex("cpu other"), "cpu", "cpu-zen5", "{}"};
  store->put_target(other);
  auto all = store->targets();
  REQUIRE(all.size() == 2);
  CHECK(all[0].key == kTarget.key);
  CHECK(all[1].key == other.key);
}

TEST_CASE("store: add_record does not double a config and needs known keys") {
  TempDir dir;
  auto store = open_with_keys(dir.file("t.db"));
  auto a = store->add_record(success(1, {0.2}));
  auto b = store->add_record(success(2, {0.3}));
  CHECK(a != b);
  CHECK(store->add_record(success(1, {0.1})) == a);  // same config: first measurement kept
  CHECK(store->count_records(kWorkload.key, kTarget.key) == 2);
  CHECK(store->history(kWorkload.key, kTarget.key).at(0).times_s == std::vector<double>{0.2});

  Record stray = success(3, {0.1});
  stray.workload_key = "00000000000000ff";
  auto msg = error_message(ErrorKind::Database, [&] { store->add_record(stray); });
  CHECK(contains(msg, "00000000000000ff"));
  error_message(ErrorKind::InvalidInput, [&] { store->add_record(success(4, {})); });
  CHECK(store->count_records(kWorkload.key, kTarget.key) == 2);
}

TEST_CASE("store: best, top_k, history, has_config, count_records") {
  TempDir dir;
  auto store = open_with_keys(dir.file("t.db"));
  CHECK_FALSE(store->best(kWorkload.key, kTarget.key));
  store->add_record(success(1, {0.30, 0.10, 0.20}));  // median 0.20
  store->add_record(failure(2, "build_error"));
  store->add_record(success(3, {0.05, 0.07}));  // median 0.06
  store->add_record(failure(4, "timeout"));
  store->add_record(success(5, {0.50}));

  auto best = store->best(kWorkload.key, kTarget.key);
  REQUIRE(best);
  CHECK(best->config_key == success(3, {}).config_key);
  CHECK(best->median_s() == doctest::Approx(0.06));

  auto top = store->top_k(kWorkload.key, kTarget.key, 10);
  REQUIRE(top.size() == 3);  // failures never rank
  CHECK(top[0].median_s() < top[1].median_s());
  CHECK(top[1].median_s() < top[2].median_s());
  CHECK(store->top_k(kWorkload.key, kTarget.key, 2).size() == 2);
  CHECK(store->top_k(kWorkload.key, kTarget.key, 0).empty());

  auto hist = store->history(kWorkload.key, kTarget.key);
  REQUIRE(hist.size() == 5);
  for (int i = 0; i < 5; ++i) CHECK(hist[i].config_key == success(i + 1, {}).config_key);
  CHECK(hist[1].error_class == "build_error");
  CHECK(hist[1].error_message == failure(2, "build_error").error_message);
  CHECK(hist[1].times_s.empty());
  CHECK(std::isinf(hist[1].median_s()));
  CHECK(hist[0].times_s == std::vector<double>{0.30, 0.10, 0.20});
  CHECK(hist[0].created_unix_ms == success(1, {}).created_unix_ms);

  CHECK(store->has_config(kWorkload.key, kTarget.key, success(2, {}).config_key));
  CHECK_FALSE(store->has_config(kWorkload.key, kTarget.key, success(9, {}).config_key));
  CHECK(store->count_records(kWorkload.key, kTarget.key) == 5);
  CHECK(store->count_records(kWorkload.key, "0000000000000000") == 0);
}

TEST_CASE("store: records pages by id with filters; workloads are listed") {
  TempDir dir;
  auto store = open_with_keys(dir.file("t.db"));
  for (int i = 1; i <= 7; ++i) store->add_record(i % 3 ? success(i, {1e-3 * i}) : failure(i, "timeout"));
  std::vector<std::int64_t> ids;
  for (RecordQuery q{"", "", 0, 3};;) {
    auto page = store->records(q);
    if (page.empty()) break;
    CHECK(page.size() <= 3);
    for (auto& r : page) ids.push_back(r.id);
    q.after_id = page.back().id;
  }
  CHECK(ids.size() == 7);
  CHECK(std::is_sorted(ids.begin(), ids.end()));
  CHECK(store->records({kWorkload.key, kTarget.key, 0, 100, true}).size() == 5);
  CHECK(store->records({"0000000000000000", "", 0, 100}).empty());
  CHECK(store->records({"", kTarget.key, ids[4], 100}).size() == 2);
  auto ws = store->workloads();
  REQUIRE(ws.size() == 1);
  CHECK(ws[0].canonical_text == kWorkload.canonical_text);
}

TEST_CASE("store: a model per kind and target, replaced by the next, blob bytes intact") {
  TempDir dir;
  auto store = open_with_keys(dir.file("t.db"));
  CHECK_FALSE(store->model("xgb", kTarget.key));
  std::string blob("header\n\0\x01\xff binary", 17);
  store->put_model({"xgb", kTarget.key, 1, 42, R"({"top5":0.97})", blob, 0});
  store->put_model({"nn", kTarget.key, 1, 7, "{}", "other", 0});
  auto m = store->model("xgb", kTarget.key);
  REQUIRE(m);
  CHECK(m->blob == blob);
  CHECK(m->records == 42);
  CHECK(m->metrics_json == R"({"top5":0.97})");
  CHECK(m->created_unix_ms > 0);
  store->put_model({"xgb", kTarget.key, 1, 43, "{}", "newer", 0});
  CHECK(store->model("xgb", kTarget.key)->blob == "newer");
  CHECK(store->model("nn", kTarget.key)->records == 7);
  error_message(ErrorKind::Database, [&] { store->put_model({"xgb", "00000000000000ff", 1, 1, "{}", "x", 0}); });
}

TEST_CASE("store: the change stamp moves with commits of this store and of other connections") {
  TempDir dir;
  auto a = open_with_keys(dir.file("t.db"));
  auto b = open_sqlite_store(dir.file("t.db"));
  auto s0 = a->change_stamp();
  CHECK(a->change_stamp() == s0);  // reading changes nothing
  b->add_record(success(1, {0.1}));
  auto s1 = a->change_stamp();
  CHECK(s1 != s0);
  a->add_record(success(2, {0.1}));
  CHECK(a->change_stamp() != s1);
}

TEST_CASE("store: two stores on one file in two threads lose nothing") {
  TempDir dir;
  auto path = dir.file("t.db");
  open_with_keys(path);
  int failures[2] = {0, 0};
  std::exception_ptr errors[2];
  std::thread threads[2];
  for (int t = 0; t < 2; ++t)
    threads[t] = std::thread([&, t] {
      try {
        failures[t] = write_records(path, 1000 * (t + 1), 200);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& th : threads) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  CHECK(failures[0] == 0);
  CHECK(failures[1] == 0);
  CHECK(open_sqlite_store(path)->count_records(kWorkload.key, kTarget.key) == 400);
}

TEST_CASE("store: two processes on one file lose nothing") {
  TempDir dir;
  auto path = dir.file("t.db");
  // The children create the file together, so creation and migration race too. The parent opens
  // nothing before fork(): SQLite forbids carrying an open connection into a child.
  pid_t children[2];
  for (int c = 0; c < 2; ++c) {
    children[c] = fork();
    REQUIRE(children[c] >= 0);
    if (children[c] == 0) {
      int code = 1;
      try {
        code = write_records(path, 1000 * (c + 1), 200) == 0 ? 0 : 2;
      } catch (...) {
      }
      _exit(code);  // skip the test runner's exit handlers
    }
  }
  for (pid_t child : children) {
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  auto store = open_sqlite_store(path);
  CHECK(store->count_records(kWorkload.key, kTarget.key) == 400);
  CHECK(store->top_k(kWorkload.key, kTarget.key, 1000).size() == 320);  // every fifth is a failure
}

TEST_CASE("record json: round trip of a success and a failure") {
  Record ok = success(7, {1.5e-4, 1.25e-4, 0.1 + 0.2});
  ok.id = 42;
  Record back = record_from_json(record_to_json(ok));
  CHECK(back.id == 42);
  CHECK(back.workload_key == ok.workload_key);
  CHECK(back.target_key == ok.target_key);
  CHECK(back.config_key == ok.config_key);
  CHECK(back.config_json == ok.config_json);
  CHECK(back.times_s == ok.times_s);  // exact: doubles are written with enough digits
  CHECK(back.error_class.empty());
  CHECK(back.measure_params_json == ok.measure_params_json);
  CHECK(back.tool_version == ok.tool_version);
  CHECK(back.created_unix_ms == ok.created_unix_ms);

  json j = (record_to_json(ok));
  CHECK(j["result"]["median_s"].get<double>() == doctest::Approx(1.5e-4));
  CHECK(j["result"]["error_class"].is_null());
  CHECK(j["config"].is_object());

  Record bad = failure(8, "wrong_result");
  Record bad_back = record_from_json(record_to_json(bad));
  CHECK(bad_back.error_class == "wrong_result");
  CHECK(bad_back.error_message == bad.error_message);
  CHECK(bad_back.times_s.empty());
  CHECK((record_to_json(bad))["result"]["median_s"].is_null());
}

TEST_CASE("record time: the median of its times, or the geometric mean of its sessions' medians") {
  CHECK(time_of({0.3, 0.1, 0.2}, R"({"min_seconds":0.1})") == doctest::Approx(0.2));
  CHECK(time_of({0.3, 0.1, 0.2}, "") == doctest::Approx(0.2));
  // Sessions of 2, 3 and 1 times: medians 0.15, 0.4, 0.1; their geometric mean 0.1817.
  const std::vector<double> times = {0.1, 0.2, 0.4, 0.5, 0.3, 0.1};
  CHECK(time_of(times, R"({"side_by_side":2,"sessions":[2,3,1]})") == doctest::Approx(std::cbrt(0.15 * 0.4 * 0.1)));
  // Counts that do not split the times, or are not counts: the median of all of them.
  for (const char* params : {R"({"sessions":[2,3]})", R"({"sessions":[2,3,2]})", R"({"sessions":[2,"3",1]})",
                             R"({"sessions":[0,5,1]})", R"({"sessions":[]})", R"({"sessions":6})", "not json"})
    CHECK_MESSAGE(time_of(times, params) == doctest::Approx(0.25), params);
  Record r = success(1, times);
  r.measure_params_json = R"({"sessions":[2,3,1]})";
  CHECK(r.median_s() == doctest::Approx(std::cbrt(0.15 * 0.4 * 0.1)));
  CHECK(record_to_json(r)["result"]["median_s"].get<double>() == doctest::Approx(r.median_s()));
}

TEST_CASE("record json: malformed input is refused with what is wrong") {
  json good = (record_to_json(success(1, {0.1})));
  auto refuse = [](const std::string& text, const std::string& expected) {
    auto msg = error_message(ErrorKind::InvalidInput, [&] { record_from_text(text); });
    CHECK_MESSAGE(msg.rfind("record: ", 0) == 0, msg);
    CHECK_MESSAGE(contains(msg, expected), msg);
  };
  refuse("{not json", "not valid JSON");
  refuse("[1, 2]", "expected a JSON object");
  auto without = [&](const char* key) {
    json j = good;
    j.erase(key);
    return j.dump();
  };
  auto with = [&](const char* pointer, json value) {
    json j = good;
    j[json::json_pointer(pointer)] = std::move(value);
    return j.dump();
  };
  refuse(without("workload_key"), "missing field \"workload_key\"");
  refuse(without("config"), "missing field \"config\"");
  refuse(with("/id", "42"), "\"id\" must be an integer");
  refuse(with("/config", "{}"), "\"config\" must be an object");
  refuse(with("/created_unix_ms", 1.5), "\"created_unix_ms\" must be an integer");
  refuse(with("/result/times_s", "0.1"), "\"result.times_s\" must be an array");
  refuse(with("/result/times_s", {0.1, "x"}), "result.times_s must hold non-negative numbers");
  refuse(with("/result/error_class", 3), "\"result.error_class\" must be a string or null");
  refuse(with("/result/error_class", ""), "must be null for success");
  refuse(with("/result/times_s", json::array()), "needs at least one time");
  json j = good;
  j["result"].erase("error_message");
  refuse(j.dump(), "missing field \"result.error_message\"");
}

TEST_CASE("record json: exported records validate against schemas/record.schema.json") {
  json schema = load_schema("record.schema.json");
  TempDir dir;
  auto store = open_with_keys(dir.file("t.db"));
  store->add_record(success(1, {0.2, 0.1}));
  store->add_record(failure(2, "runtime_error"));
  for (const auto& r : store->history(kWorkload.key, kTarget.key)) {
    auto errors = validate_json(schema, (record_to_json(r)));
    std::string all;
    for (const auto& e : errors) all += e + "\n";
    CHECK_MESSAGE(errors.empty(), all);
  }
  json tampered = (record_to_json(success(3, {0.1})));
  tampered["result"]["error_class"] = "timeout";  // a failure must not have a median
  CHECK_FALSE(validate_json(schema, tampered).empty());
  tampered = (record_to_json(success(3, {0.1})));
  tampered["workload_key"] = "not-a-key";
  CHECK_FALSE(validate_json(schema, tampered).empty());
}
