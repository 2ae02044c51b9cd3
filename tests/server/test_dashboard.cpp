// The dashboard's aggregates (server/dashboard.hpp) on a database of known records: the
// best-so-far line, thinned points that keep the fastest, knobs and their heatmap, filters,
// and the errors for unknown keys and bad knobs. The same filler writes the database the
// browser test (tests/browser/dashboard.test.mjs) serves: TT_DASHBOARD_DB=PATH
// [TT_DASHBOARD_RECORDS=N] build/tiletune_tests -tc="*dashboard database*".
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>

#include "codegen/backend.hpp"
#include "db/store.hpp"
#include "daemon_harness.hpp"
#include "helpers.hpp"
#include "server/dashboard.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "support/json_schema.hpp"
#include "support/subprocess.hpp"
#include "tuner/dataset.hpp"
#include "tuner/model_eval.hpp"
#include "tuner/space.hpp"
#include "tuner/tune.hpp"

using namespace tiletune;
using nlohmann::json;

namespace {

const char* kSizes = "M=96,N=80,K=64";

//! Distinct valid configs of matmul (so that /v1/best can show their source), with times that
//! depend on the unroll knob (unroll 4 is twice as fast) and every 17th a failure, classes in turn.
struct Filled {
  std::string workload, target;
  int records = 0, failures = 0;
  double best_s = INFINITY;
};

Filled fill(db::Store& store, int n, int threads = 0) {
  auto w = test::library_workload("matmul", kSizes);
  codegen::BackendOptions options;
  options.threads = threads;  // another thread count is another target
  auto be = codegen::make_backend("cpu", options);
  store.put_workload(tuner::workload_row(w));
  store.put_target(tuner::target_row(be->target()));
  tuner::Space space(w, be->target().traits);
  tuner::Rng rng(7);
  Filled f{w.key, be->target().key};
  std::set<std::string> seen;
  const char* classes[] = {"build_error", "timeout", "wrong_result"};
  std::vector<db::Record> page;
  auto flush = [&] {
    db::RecordBatch batch;
    batch.records = std::move(page);
    store.merge(batch);
    page.clear();
  };
  for (int tries = 0; f.records < n && tries < 50 * n; ++tries) {
    ir::Schedule s = space.sample(rng);
    std::string config = s.to_json();
    if (!seen.insert(config).second) continue;
    db::Record r;
    r.workload_key = f.workload;
    r.target_key = f.target;
    r.config_json = config;
    r.config_key = hash_hex(config);
    r.measure_params_json = R"({"repeats":3})";
    r.tool_version = "test";
    r.created_unix_ms = db::now_unix_ms() - (n - f.records);
    ++f.records;
    if (f.records % 17 == 0) {
      r.error_class = classes[(f.records / 17) % 3];
      r.error_message = "injected";
      ++f.failures;
    } else {
      double base = 1e-3 * (1.0 + static_cast<double>(std::hash<std::string>{}(config) % 1000) / 250.0);
      if (s.stages[0].unroll == 4) base /= 2;
      r.times_s = {base, base * 1.02, base * 0.99};
      f.best_s = std::min(f.best_s, r.median_s());
    }
    page.push_back(std::move(r));
    if (page.size() == 2000) flush();
  }
  flush();
  return f;
}

//! fill() on a database file of its own, closed afterwards (a daemon or the CLI opens it next).
Filled fill_file(const std::string& path, int n) {
  auto store = db::open_store(path);
  return fill(*store, n);
}

//! A query of a workload's records on a target, every other field its default.
server::dashboard::WorkloadQuery query(const std::string& workload, const std::string& target) {
  server::dashboard::WorkloadQuery q;
  q.workload = workload;
  q.target = target;
  return q;
}

}  // namespace

TEST_CASE("dashboard: a workload's line, points, top configs, knobs and heatmap follow its records") {
  test::TempDir dir;
  auto store = db::open_store(dir.file("d.db"));
  Filled f = fill(*store, 300);
  REQUIRE(f.records == 300);

  server::dashboard::WorkloadQuery q = query(f.workload, f.target);
  json d = server::dashboard::workload(*store, q);
  CHECK(d["records"] == 300);
  CHECK(d["shown"] == 300);
  CHECK(d["failures_by_class"]["timeout"].get<int>() + d["failures_by_class"]["build_error"].get<int>() +
            d["failures_by_class"]["wrong_result"].get<int>() ==
        f.failures);
  // The line only falls, ends at the last trial and at the best record.
  auto& line = d["progress"];
  REQUIRE(line.size() >= 2);
  for (size_t i = 1; i < line.size(); ++i) CHECK(line[i][1].get<double>() <= line[i - 1][1].get<double>());
  CHECK(line.back()[0] == 300);
  CHECK(line.back()[1].get<double>() == doctest::Approx(f.best_s));
  CHECK(d["top"][0]["median_s"].get<double>() == doctest::Approx(f.best_s));
  CHECK(d["top"].size() == 10);
  // Every record a point; failures have no latency.
  CHECK(d["points"]["trial"].size() == 300);
  int nulls = 0;
  for (auto& v : d["points"]["median_s"]) nulls += v.is_null();
  CHECK(nulls == f.failures);
  // unroll 4 halves the time: the knob that matters most, and its best value.
  REQUIRE(!d["knobs"].empty());
  json unroll;
  for (auto& k : d["knobs"])
    if (k["name"] == "C.unroll") unroll = k;
  REQUIRE(unroll.is_object());
  CHECK(unroll["importance"].get<double>() > 0.5);
  double best4 = 0, best_other = 0;
  for (auto& v : unroll["values"])
    (v["value"] == "4" ? best4 : best_other) = std::max(v["value"] == "4" ? best4 : best_other, v["best_gflops"].get<double>());
  CHECK(best4 > 1.5 * best_other);
  // The heatmap's cells cover the records that have both knobs, at most one per value pair.
  auto& h = d["heatmap"];
  CHECK(!h["x"].get<std::string>().empty());
  CHECK(h["x"] != h["y"]);
  std::int64_t counted = 0;
  for (auto& c : h["cells"]) {
    CHECK(c[0].get<size_t>() < h["xs"].size());
    CHECK(c[1].get<size_t>() < h["ys"].size());
    counted += c[3].get<std::int64_t>();
  }
  CHECK(counted > 0);
  CHECK(counted <= 300);

  SUBCASE("a filter keeps only its records, everywhere") {
    q.filters = {{"C.unroll", "4"}};
    json g = server::dashboard::workload(*store, q);
    CHECK(g["records"] == 300);
    CHECK(g["shown"].get<int>() < 300);
    CHECK(g["points"]["trial"].size() == g["shown"].get<size_t>());
    for (auto& t : g["top"]) CHECK(t["config"]["stages"][0]["unroll"] == 4);
    CHECK(g["progress"].back()[1].get<double>() == doctest::Approx(f.best_s));
  }
  SUBCASE("a chosen pair of knobs") {
    q.x = "C.unroll";
    q.y = "C.vectorize";
    json g = server::dashboard::workload(*store, q);
    CHECK(g["heatmap"]["x"] == "C.unroll");
    CHECK(g["heatmap"]["y"] == "C.vectorize");
    CHECK(!g["heatmap"]["cells"].empty());
  }
  SUBCASE("thinned points keep the fastest") {
    for (int most : {1, 2, 50, 101}) {
      q.max_points = most;
      CHECK(server::dashboard::workload(*store, q)["points"]["trial"].size() <= static_cast<size_t>(most));
    }
    q.max_points = 150;
    json g = server::dashboard::workload(*store, q);
    CHECK(g["points"]["trial"].size() == 150);
    double fastest = INFINITY;
    for (auto& v : g["points"]["median_s"])
      if (!v.is_null()) fastest = std::min(fastest, v.get<double>());
    CHECK(fastest == doctest::Approx(f.best_s));
  }
  SUBCASE("bad requests") {
    CHECK_THROWS_WITH_AS(server::dashboard::workload(*store, query("nope", f.target)), doctest::Contains("no workload 'nope'"),
                         Error);
    CHECK_THROWS_WITH_AS(server::dashboard::workload(*store, query(f.workload, "nope")), doctest::Contains("no target 'nope'"),
                         Error);
    q.x = "C.unroll";
    q.y = "no.such.knob";
    CHECK_THROWS_WITH_AS(server::dashboard::workload(*store, q), doctest::Contains("not both knobs"), Error);
    CHECK_THROWS_WITH_AS(server::dashboard::parse_filters("C.unroll"), doctest::Contains("is not KNOB=VALUE"), Error);
    CHECK(server::dashboard::parse_filters("a=1;b=[2,3]") == std::map<std::string, std::string>{{"a", "1"}, {"b", "[2,3]"}});
  }

  json o = server::dashboard::overview(*store);
  REQUIRE(o["workloads"].size() == 1);
  CHECK(o["workloads"][0]["records"] == 300);
  CHECK(o["workloads"][0]["failures"] == f.failures);
  CHECK(o["workloads"][0]["best_s"].get<double>() == doctest::Approx(f.best_s));
  CHECK(o["measurements_last_minute"] == 300);
  CHECK(o["targets"][0]["fingerprint"]["backend"] == "cpu");
}

TEST_CASE("dashboard: knob names flatten a config's stages") {
  auto k = server::dashboard::knob_values(
      R"({"version":1,"fuse_rows":16,"stages":[{"stage":"C","tile":{"m":[96,6],"n":[32]},"order":["m.0","n.0"],)"
      R"("vectorize":"n","unroll":4,"parallel":2,"pack":["B","A"]},{"stage":"Y","inline":true}]})");
  CHECK(k.at("fuse_rows") == "16");
  CHECK(k.at("C.tile.m") == "[96,6]");
  CHECK(k.at("C.reg.m") == "6");
  CHECK(k.at("C.reg.n") == "32");
  CHECK(k.at("C.vectorize") == "n");
  CHECK(k.at("C.unroll") == "4");
  CHECK(k.at("C.pack") == "A+B");
  CHECK(k.at("Y.inline") == "true");
  CHECK(k.count("C.order") == 0);
  CHECK(server::dashboard::knob_values("not json").empty());
}

TEST_CASE("dashboard database: written for the browser test when TT_DASHBOARD_DB names a file") {
  const char* path = std::getenv("TT_DASHBOARD_DB");
  if (!path) TT_SKIP("TT_DASHBOARD_DB is not set");
  const char* n = std::getenv("TT_DASHBOARD_RECORDS");
  auto store = db::open_store(path);
  auto t0 = std::chrono::steady_clock::now();
  Filled f = fill(*store, n ? std::atoi(n) : 400);
  // A second target (one thread) with a fifth of the records: a team's database.
  if (std::getenv("TT_DASHBOARD_TWO_TARGETS")) fill(*store, (n ? std::atoi(n) : 400) / 5, 1);
  MESSAGE("wrote " << f.records << " records of workload " << f.workload << " on target " << f.target << " in "
                   << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");
  CHECK(f.records > 0);
}

TEST_CASE("dashboard: tiletune report --html writes the pages as one file that needs no daemon") {
  test::TempDir dir;
  std::string db = dir.file("r.db");
  Filled f = fill_file(db, 60);
  std::string bin = std::string(TILETUNE_BINARY_DIR) + "/tiletune", out = dir.file("report.html");
  auto written = run_process({bin, "report", "--db", db, "--html", out}, 120);
  REQUIRE_MESSAGE(written.ok(), written.output);
  CHECK(written.output.find("1 workloads, 60 records") != std::string::npos);
  std::ifstream in(out, std::ios::binary);
  std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(page.find("window.TT_REPORT = ") != std::string::npos);
  CHECK(page.find("/v1/dashboard/workload?workload=" + f.workload + "&target=" + f.target) != std::string::npos);
  CHECK(page.find("uPlot") != std::string::npos);
  // Self-contained: nothing loaded from the daemon, and the embedded JSON closes no element.
  CHECK(page.find("src=\"/ui/") == std::string::npos);
  CHECK(page.find("href=\"/ui/") == std::string::npos);
  auto count = [&](const std::string& s) {
    size_t n = 0;
    for (size_t at = page.find(s); at != std::string::npos; at = page.find(s, at + 1)) ++n;
    return n;
  };
  CHECK(count("<script>") == count("</script>"));

  auto missing = run_process({bin, "report", "--db", dir.file("none.db"), "--html", out}, 60);
  CHECK(missing.exit_code == 3);
  CHECK(missing.output.find("no database") != std::string::npos);
  auto unwritable = run_process({bin, "report", "--db", db, "--html", dir.file("no/such/dir/r.html")}, 60);
  CHECK(unwritable.exit_code == 4);
  CHECK(unwritable.output.find("cannot write") != std::string::npos);
}

TEST_CASE("dashboard: the routes answer what the schemas say, follow the token rules and refuse bad queries") {
  test::TempDir dir;
  std::string db = dir.file("h.db");
  Filled f = fill_file(db, 80);
  test::InProcessDaemon d(db, {"tok", false, 1 << 20, false});
  auto none = d.client(""), good = d.client();
  const json api = test::schema("api.schema.json");
  auto valid = [&](const std::string& def, const json& body) {
    auto problems = JsonSchema(json{{"$defs", api["$defs"]}, {"$ref", "#/$defs/" + def}}).validate(body);
    for (auto& p : problems) MESSAGE(p);
    return problems.empty();
  };
  // The page and its files are open; the data is not.
  auto page = none.Get("/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->get_header_value("Content-Type").find("text/html") == 0);
  CHECK(page->body.find("/ui/app.js") != std::string::npos);
  auto script = none.Get("/ui/vendor/uplot/uPlot.iife.min.js");
  CHECK(script->status == 200);
  CHECK(script->get_header_value("Content-Type").find("text/javascript") == 0);
  CHECK(none.Get("/ui/vendor/uplot/LICENSE")->body.find("MIT") != std::string::npos);
  CHECK(none.Get("/ui/nope.js")->status == 404);
  CHECK(none.Get("/ui/../schemas/api.schema.json")->status == 404);
  CHECK(none.Get("/v1/dashboard")->status == 401);
  std::string keys = "workload=" + f.workload + "&target=" + f.target;
  CHECK(none.Get("/v1/dashboard/workload?" + keys)->status == 401);

  auto overview = good.Get("/v1/dashboard");
  REQUIRE(overview->status == 200);
  CHECK(valid("DashboardOverview", json::parse(overview->body)));
  auto w = good.Get("/v1/dashboard/workload?" + keys + "&filter=C.unroll%3D4&points=50");
  REQUIRE(w->status == 200);
  json wj = json::parse(w->body);
  CHECK(valid("DashboardWorkload", wj));
  CHECK(wj["filters"]["C.unroll"] == "4");
  CHECK(wj["points"]["trial"].size() <= wj["shown"].get<size_t>());

  CHECK(good.Get("/v1/dashboard/workload?workload=" + f.workload)->status == 400);
  CHECK(good.Get("/v1/dashboard/workload?" + keys + "&filter=oops")->status == 400);
  CHECK(good.Get("/v1/dashboard/workload?" + keys + "&x=C.unroll&y=nope")->status == 400);
  CHECK(good.Get("/v1/dashboard/workload?workload=0000000000000000&target=" + f.target)->status == 404);
  CHECK(good.Get("/v1/dashboard/workload?" + keys + "&points=x")->status == 400);
  CHECK(good.Get("/v1/dashboard/model")->status == 400);
  CHECK(good.Get("/v1/dashboard/model?target=0000000000000000")->status == 404);
  CHECK(none.Get("/v1/dashboard/model?target=" + f.target)->status == 401);
  CHECK(good.Get("/v1/dashboard/model?target=" + f.target)->status == 200);
}

TEST_CASE("dashboard: a target's cost model against measured records, and its metrics after each retrain") {
  test::TempDir dir;
  std::string db = dir.file("m.db");
  Filled f = fill_file(db, 200);
  auto store = db::open_store(db);
  // No model yet: the view says so and lists no retrains.
  json none = server::dashboard::model_view(*store, f.target, "", "");
  CHECK(none["model"].is_null());
  CHECK(none["history"].empty());
  CHECK_THROWS_WITH_AS(server::dashboard::model_view(*store, "nope", "", ""), doctest::Contains("no target 'nope'"), Error);

  auto be = codegen::make_backend("cpu");
  auto data = tuner::load_dataset(*store, f.target, be->target().traits);
  for (int retrain = 0; retrain < 2; ++retrain) store->put_model(tuner::train_model(data, "xgb", f.target, 1 + retrain));
  json m = server::dashboard::model_view(*store, f.target, "", "", 50);
  CHECK(m["kind"] == "xgb");
  CHECK(m["history"].size() == 2);
  CHECK(m["model"]["records"] == 200);  // failures train it too (as the slowest)
  CHECK(m["workload"]["key"] == f.workload);
  const auto n = m["points"]["score"].size();
  CHECK(n >= 40);
  CHECK(n <= 50);
  CHECK(m["points"]["gflops"].size() == n);
  CHECK(m["ranking"]["samples"] == n);
  // Trained on these very records, it ranks them far better than chance.
  CHECK(m["ranking"]["pairwise_accuracy"].get<double>() > 0.7);
  const json api = test::schema("api.schema.json");
  CHECK(JsonSchema(json{{"$defs", api["$defs"]}, {"$ref", "#/$defs/DashboardModel"}}).validate(m).empty());
  CHECK(server::dashboard::model_view(*store, f.target, "nn", "")["model"].is_null());
  CHECK_THROWS_WITH_AS(server::dashboard::model_view(*store, f.target, "xgb", "nope"), doctest::Contains("no workload"),
                       Error);

  // A stored model this build cannot load is reported, not a failure of the page.
  auto row = *store->model("xgb", f.target);
  row.blob = "not a model";
  store->put_model(row);
  json broken = server::dashboard::model_view(*store, f.target, "xgb", "");
  CHECK(broken["model"]["unusable"].get<std::string>().size() > 0);
  CHECK(broken["history"].size() == 3);
}

TEST_CASE("dashboard: the best-so-far line splits by the job that measured each record") {
  test::TempDir dir;
  const std::string path = dir.file("j.db");
  auto store = db::open_store(path);
  Filled f = fill(*store, 300);
  // The records' times in trial order: two jobs cover the first and the second hundred.
  db::RecordQuery q{f.workload, f.target};
  auto records = store->records(q);
  REQUIRE(records.size() == 300);
  auto job = [&](const std::string& id, const std::string& strategy, size_t first, size_t last) {
    db::JobRow j;
    j.id = id;
    j.request_key = id;
    j.request_json = json{{"op", "matmul"}, {"sizes", kSizes}, {"strategy", strategy}}.dump();
    j.workload_key = f.workload;
    j.target_key = f.target;
    j.state = "done";
    j.done = j.total = static_cast<std::int64_t>(last - first + 1);
    store->put_job(j);
    // put_job stamps the time of the call: the job is dated back to its records' times.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    std::string sql = "UPDATE jobs SET created_unix_ms = " + std::to_string(records[first].created_unix_ms) +
                      ", updated_unix_ms = " + std::to_string(records[last].created_unix_ms) + " WHERE id = '" + id + "'";
    CHECK(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  };
  job("aaaaaaaaaaaaaaaa", "random", 0, 99);
  job("bbbbbbbbbbbbbbbb", "xgb", 100, 199);
  json d = server::dashboard::workload(*store, query(f.workload, f.target));
  REQUIRE(d["lines"].size() == 3);
  CHECK(d["lines"][0]["label"] == "job aaaaaaaa (random)");
  CHECK(d["lines"][1]["label"] == "job bbbbbbbb (xgb)");
  CHECK(d["lines"][2]["label"] == "without a job");
  std::int64_t trials = 0;
  double best = INFINITY;
  for (auto& line : d["lines"]) {
    trials += line["trials"].get<std::int64_t>();
    auto& pts = line["points"];
    REQUIRE(!pts.empty());
    for (size_t i = 1; i < pts.size(); ++i) CHECK(pts[i][1].get<double>() <= pts[i - 1][1].get<double>());
    CHECK(pts.back()[0] == line["trials"]);
    best = std::min(best, pts.back()[1].get<double>());
  }
  CHECK(trials == 300);
  CHECK(best == doctest::Approx(f.best_s));
  // Without jobs there is one line, the progress.
  test::TempDir other;
  auto plain = db::open_store(other.file("p.db"));
  Filled g = fill(*plain, 20);
  CHECK(server::dashboard::workload(*plain, query(g.workload, g.target))["lines"].empty());
}

TEST_CASE("dashboard: warming the largest workloads ahead changes no answer, and stops when told") {
  test::TempDir dir;
  auto store = db::open_store(dir.file("w.db"));
  Filled f = fill(*store, 120);
  std::atomic<bool> stop{true};
  server::dashboard::warm(*store, stop, 1);  // told to stop: returns at once
  stop = false;
  server::dashboard::warm(*store, stop, 1);
  json warmed = server::dashboard::workload(*store, query(f.workload, f.target));
  CHECK(warmed["records"] == 120);
  // Records added after the warm-up are read on the next call.
  fill(*store, 140);  // the same configs again (merged) and 20 new ones
  json later = server::dashboard::workload(*store, query(f.workload, f.target));
  CHECK(later["records"] == 140);
  CHECK(later["points"]["trial"].size() == 140);
  CHECK(later["progress"].back()[0] == 140);
}
