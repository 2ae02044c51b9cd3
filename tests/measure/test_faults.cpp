// Kernels that crash, hang, compute wrong results or fail to build are recorded as such, and
// measuring goes on. Faults are injected by a backend that decorates the CPU backend.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>

#include "codegen/backend.hpp"
#include "db/store.hpp"
#include "faulty_backend.hpp"
#include "helpers.hpp"
#include "measure/measure.hpp"
#include "measure/protocol.hpp"
#include "support/hash.hpp"
#include "support/subprocess.hpp"
#include "tuner/tune.hpp"

using namespace tiletune;
using tiletune::test::FaultyBackend;
using tiletune::test::library_workload;
using tiletune::test::TempDir;

namespace {

measure::MeasureOptions quick_options() {
  measure::MeasureOptions o;
  o.cache_dir = test::kernel_cache();
  o.timeout_s = 2;
  o.min_seconds = 0.01;
  return o;
}

//! Matmul 64^3 on a backend whose configs with unroll 3 carry `fault`, measured with `min_seconds`
//! of repeats by a measurer that has timed the plain (naive) kernel and expects its time as the best.
struct SlowAtUnroll3 {
  ir::Workload w = library_workload("matmul", "M=64,N=64,K=64");
  FaultyBackend be;
  measure::Measurer m;
  measure::MeasureResult plain;

  SlowAtUnroll3(const std::string& fault, double min_seconds)
      : be([fault](const std::string& config) {
          return ir::Schedule::from_json(config).stages[0].unroll == 3 ? fault : std::string();
        }),
        m(be, w, options(min_seconds)) {
    auto results = m.measure({ir::naive_schedule(w)});
    REQUIRE(results[0].ok());
    plain = results[0];
    m.expect_best(plain.median_s());
  }
  //! The naive schedule with `unroll` (3: the faulty one), measured.
  measure::MeasureResult measure_unrolled(int unroll) {
    auto s = ir::naive_schedule(w);
    s.stages[0].unroll = unroll;
    auto results = m.measure({s});
    REQUIRE(results[0].ok());
    return results[0];
  }
  static measure::MeasureOptions options(double min_seconds) {
    auto o = quick_options();
    o.min_seconds = min_seconds;
    return o;
  }
};

}  // namespace

TEST_CASE("measure: crashing, aborting, hanging, wrong and unbuildable kernels are classified; good ones are timed") {
  auto w = library_workload("matmul", "M=19,N=23,K=7");
  const std::vector<std::string> faults = {"", "crash", "abort", "hang", "wrong", "build"};
  // The naive schedule with unroll 0..5: six distinct configs of the same kernel.
  FaultyBackend be([&](const std::string& config) {
    auto s = ir::Schedule::from_json(config);
    return faults[s.stages[0].unroll % faults.size()];
  });
  std::vector<ir::Schedule> batch;
  for (int u = 1; u <= 6; ++u) {
    batch.push_back(ir::naive_schedule(w));
    batch.back().stages[0].unroll = u % 6;
  }
  std::string bad_config = R"({"version":1,"stages":[{"stage":"C","tile":{"m":[0]}}]})";
  batch.push_back(ir::Schedule::from_json(bad_config));
  measure::Measurer m(be, w, quick_options());
  auto results = m.measure(batch);
  REQUIRE(results.size() == 7);
  CHECK(results[0].error_class == "runtime_error");  // crash
  CHECK(results[0].error_message.find("SIGSEGV") != std::string::npos);
  CHECK(results[1].error_class == "runtime_error");  // trap
  CHECK(results[1].error_message.find("SIGILL") != std::string::npos);
  CHECK(results[2].error_class == "timeout");
  CHECK(results[3].error_class == "wrong_result");
  CHECK(results[3].error_message.find("element 0") != std::string::npos);
  CHECK(results[4].error_class == "build_error");
  CHECK(results[4].error_message.find("error") != std::string::npos);
  CHECK(results[5].ok());
  CHECK(results[5].times_s.size() >= 3);
  CHECK(results[5].median_s() > 0);
  CHECK(results[6].error_class == "invalid_config");
}

TEST_CASE("measure: the result check takes f32's denormals kept or flushed as equal, and still finds wrong values") {
  const double tol = measure::tolerance_for(329);
  const float tiny = std::numeric_limits<float>::denorm_min();
  // An output that underflows to zeros (exp of a large negative): its scale is 0, so only the
  // denormal floor keeps a kernel that did not flush from failing on 1.4e-45 against 0.
  const std::vector<float> zeros(8, 0.0f);
  std::vector<float> got = zeros;
  got[3] = tiny;
  CHECK(measure::compare(got.data(), zeros.data(), 8, tol) == "");
  got[3] = std::nextafter(std::numeric_limits<float>::min(), 0.0f);  // the largest denormal too
  CHECK(measure::compare(got.data(), zeros.data(), 8, tol) == "");
  got[3] = 1e-30f;  // a normal value where zeros are expected is wrong
  CHECK(measure::compare(got.data(), zeros.data(), 8, tol).find("element 3") != std::string::npos);
  // The relative bound is unchanged where values are normal.
  const std::vector<float> want = {1, 2, 3, 4};
  std::vector<float> close = want, far = want;
  close[2] = 3.0f * (1 + 0.5f * static_cast<float>(tol));
  far[2] = 3.0f * (1 + 4 * static_cast<float>(tol));
  CHECK(measure::compare(close.data(), want.data(), 4, tol) == "");
  CHECK(measure::compare(far.data(), want.data(), 4, tol).find("element 2") != std::string::npos);
  // In a narrower stored type too (bf16 holds f32's exponent range).
  std::vector<std::uint16_t> bf_zero(4, 0), bf_got(4, 0);
  ir::store_element(ir::DType::BF16, bf_got.data(), 1, 1e-39);
  REQUIRE(ir::load_element(ir::DType::BF16, bf_got.data(), 1) != 0);
  CHECK(measure::compare(ir::DType::BF16, bf_got.data(), bf_zero.data(), 4,
                         measure::tolerance_for(1, ir::DType::BF16)) == "");
}

TEST_CASE("measure: side by side, rivals are checked again and timed in turns; a failing one gets its error") {
  auto w = library_workload("matmul", "M=19,N=23,K=7");
  // The naive schedule with unroll 1..4: plain, 2 ms slower per call, wrong, plain again.
  const std::vector<std::string> faults = {"", "", "slow", "wrong", "", "crash"};
  FaultyBackend be([&](const std::string& config) { return faults[ir::Schedule::from_json(config).stages[0].unroll]; });
  auto unrolled = [&](int u) {
    auto s = ir::naive_schedule(w);
    s.stages[0].unroll = u;
    return s;
  };
  auto o = quick_options();
  o.min_seconds = 0.02;
  measure::Measurer m(be, w, o);
  std::string bad_config = R"({"version":1,"stages":[{"stage":"C","tile":{"m":[0]}}]})";
  auto results =
      m.side_by_side({unrolled(1), unrolled(2), unrolled(3), ir::Schedule::from_json(bad_config), unrolled(4)});
  REQUIRE(results.size() == 5);
  REQUIRE(results[0].ok());
  REQUIRE(results[1].ok());
  CHECK(results[2].error_class == "wrong_result");
  CHECK(results[2].times_s.empty());
  CHECK(results[3].error_class == "invalid_config");
  REQUIRE(results[4].ok());
  // Ten turns at least, one call at least in each; the slow rival's calls are each over 2 ms.
  CHECK(results[0].times_s.size() >= measure::Measurer::kSideBySideMinTurns);
  CHECK(results[1].times_s.size() >= measure::Measurer::kSideBySideMinTurns);
  CHECK(*std::min_element(results[1].times_s.begin(), results[1].times_s.end()) >= 0.002);
  CHECK(results[1].median_s() > results[0].median_s());
  CHECK(results[0].config_key == unrolled(1).key());
  // A rival that kills the worker takes the others' times with it: each gets the error.
  auto crashed = m.side_by_side({unrolled(1), unrolled(5)});
  REQUIRE(crashed.size() == 2);
  CHECK(crashed[0].error_class == "runtime_error");
  CHECK(crashed[1].error_class == "runtime_error");
  CHECK(crashed[1].error_message.find("SIGSEGV") != std::string::npos);
}

TEST_CASE("measure: side by side, a sub-microsecond kernel's turns are bounded, and so is its reply") {
  // One element: each call takes well under a microsecond. Turns used to end after max_repeats
  // calls, which made hundreds of thousands of one-call times per rival, a reply too long for
  // the worker's output: every rival failed.
  auto w = library_workload("gelu", "N=1,D=1");
  auto be = codegen::make_backend("cpu");
  auto o = quick_options();
  o.min_seconds = 0.05;
  o.min_repeats = 1;
  o.max_repeats = 1;
  measure::Measurer m(*be, w, o);
  auto results = m.side_by_side(std::vector<ir::Schedule>(3, ir::naive_schedule(w)));
  REQUIRE(results.size() == 3);
  for (auto& r : results) {
    INFO(r.error_message);
    REQUIRE(r.ok());
    CHECK(r.times_s.size() >= measure::Measurer::kSideBySideMinTurns);
    CHECK(r.times_s.size() <= measure::Measurer::kSideBySideMaxTurns);
    CHECK(r.median_s() < 1e-4);
  }
}

TEST_CASE("tune: the fastest records are timed again side by side and keep those times") {
  TempDir dir;
  auto store = db::open_sqlite_store(dir.file("t.db"));
  auto be = codegen::make_backend("cpu");
  auto w = library_workload("matmul", "M=24,N=20,K=16");
  tuner::TuneOptions o = test::quick_tune_options(12, 6);
  o.finalists = 4;
  auto summary = tuner::tune(w, *be, *store, o);
  // The 4 fastest, and any record a round left faster than them, were timed in the last round.
  CHECK(summary.retimed >= 4);
  auto top = store->top_k(w.key, be->target().key, 12);
  const std::string last_round = "\"side_by_side\":" + std::to_string(summary.retimed);
  int side_by_side = 0;
  for (auto& r : top) side_by_side += r.measure_params_json.find(last_round) != std::string::npos;
  CHECK(side_by_side == summary.retimed);
  CHECK(top[0].measure_params_json.find(last_round) != std::string::npos);
  REQUIRE(summary.best);
  CHECK(summary.best->id == top[0].id);
  // A run that measures nothing times nothing again; finalists 0 is off.
  CHECK(tuner::tune(w, *be, *store, o).retimed == 0);
  o.trials = 14;
  o.finalists = 0;
  CHECK(tuner::tune(w, *be, *store, o).retimed == 0);
}

namespace {
//! A measurer whose side-by-side rounds give each config its time in turns (`in_turns`), which
//! differs from the lone time its record holds, and which records each round's rivals.
struct TurnsMeasurer final : measure::BatchMeasurer {
  std::map<std::string, double> in_turns;  // by config key
  std::vector<std::size_t> rounds;         // rivals of each side-by-side round
  std::vector<measure::MeasureResult> measure(const std::vector<ir::Schedule>&) override { return {}; }
  std::string params_json() const override { return "{}"; }
  std::vector<measure::MeasureResult> side_by_side(const std::vector<ir::Schedule>& rivals) override {
    rounds.push_back(rivals.size());
    std::vector<measure::MeasureResult> out(rivals.size());
    for (std::size_t i = 0; i < rivals.size(); ++i) out[i].times_s = {in_turns.at(rivals[i].key())};
    return out;
  }
};
}  // namespace

TEST_CASE("tune: a record whose lone time was lucky cannot win by missing the side-by-side round") {
  auto w = library_workload("matmul", "M=24,N=20,K=16");
  auto store = db::make_memory_record_store();
  store->put_workload(tuner::workload_row(w));
  store->put_target({"t", "cpu", "cpu-x", "{}", ""});
  TurnsMeasurer m;
  // Configs 1..6: alone 1.00, 1.01, ... ms; in turns 10 % slower. Config 7 was timed alone at
  // 1.05 ms by luck (outside the 4 fastest), but takes 1.30 ms in turns: the first round times
  // 1..4 at 1.10-1.13, which leaves 7 (and 5, 6) the fastest on paper.
  for (int i = 1; i <= 7; ++i) {
    auto s = ir::naive_schedule(w);
    s.stages[0].unroll = i;
    db::Record r;
    r.workload_key = w.key;
    r.target_key = "t";
    r.config_json = s.to_json();
    r.config_key = s.key();
    r.times_s = {i == 7 ? 1.05e-3 : (1 + 0.01 * (i - 1)) * 1e-3};
    r.measure_params_json = "{}";
    store->add_record(r);
    m.in_turns[s.key()] = i == 7 ? 1.30e-3 : 1.1 * r.times_s[0];
  }
  tuner::TuneOptions o;
  o.finalists = 4;
  std::vector<std::string> notes;
  const int retimed = tuner::retime_finalists(w, "t", m, *store, o, notes);
  // Round 1: 1..4; round 2 adds 5, 6, 7 (below 1.10 alone), and then the best is config 1.
  REQUIRE(m.rounds == std::vector<std::size_t>{4, 7});
  CHECK(retimed == 7);
  auto top = store->top_k(w.key, "t", 7);
  REQUIRE(top.size() == 7);
  CHECK(top[0].median_s() == doctest::Approx(1.10e-3));
  auto first = ir::naive_schedule(w);
  first.stages[0].unroll = 1;
  CHECK(top[0].config_key == first.key());
  CHECK(top.back().median_s() == doctest::Approx(1.30e-3));
  for (auto& r : top) CHECK(r.measure_params_json == R"({"side_by_side":7})");
  CHECK(notes.empty());
}

TEST_CASE("measure: a candidate far slower than the best known is timed once") {
  auto w = library_workload("matmul", "M=64,N=64,K=64");
  auto be = codegen::make_backend("cpu");
  auto o = quick_options();
  o.min_seconds = 0;  // three repeats, however fast
  measure::Measurer m(*be, w, o);
  auto naive = ir::naive_schedule(w);
  auto timed = m.measure({naive});
  REQUIRE(timed[0].ok());
  CHECK(timed[0].times_s.size() >= 3);
  // Told that the best takes a hundredth of its time, it gets the one run.
  m.expect_best(timed[0].median_s() / 100);
  naive.stages[0].unroll = 2;  // another config of the same kernel, not a cached result
  auto once = m.measure({naive});
  REQUIRE(once[0].ok());
  CHECK(once[0].times_s.size() == 1);
  // Not far from the best it is repeated as before. The best here is a second, so that a cold
  // first run on a loaded machine (many times the median of warm runs) still counts as near.
  m.expect_best(1.0);
  naive.stages[0].unroll = 4;
  auto again = m.measure({naive});
  REQUIRE(again[0].ok());
  CHECK(again[0].times_s.size() >= 3);
}

TEST_CASE("measure: a candidate whose first run alone is far slower is judged by a warm run and repeated") {
  // unroll 3: the first call in the measuring process spins for 200 ms (a cold start, or a core
  // taken away by a build), the calls after it are the plain kernel. The slow first run is far
  // over 4x the plain kernel's time, the best expected.
  SlowAtUnroll3 t("slow_first", 0);
  // The best expected 5 ms: the 200 ms spin stays far over 4x it, and the plain kernel's warm
  // runs stay under it also when a neighbouring test loads the cores (CI runs two at a time; at
  // 4x the plain kernel's quiet median, its warm runs were all judged far slower once).
  t.m.expect_best(0.005);
  auto cold = t.measure_unrolled(3);
  CHECK(cold.times_s.size() >= 3);
  CHECK(cold.median_s() < 0.1);
}

TEST_CASE("measure: a candidate whose first warm run is still far slower is judged by the warm runs after it") {
  // unroll 3: the checked run and the first warm run spin for 200 ms each (threads and pages
  // not yet warm: a 0.007 ms kernel's first warm run took 0.29 ms in a corpus run). The warm
  // runs' budget of 1 s leaves room for two spins.
  SlowAtUnroll3 t("slow_start", 1);
  t.m.expect_best(0.005);  // as in the test before
  auto cold = t.measure_unrolled(3);
  CHECK(cold.times_s.size() >= 3);
  CHECK(cold.median_s() < 0.1);
  // A kernel far slower in every run gets one time, the fastest of its runs.
  t.m.expect_best(t.plain.median_s() / 100);
  auto slow = t.measure_unrolled(2);
  CHECK(slow.times_s.size() == 1);
}

TEST_CASE("measure: the warm runs of a far slower candidate stop once they pass the repeats' budget") {
  // unroll 3: the checked run and the first warm run spin for 200 ms each, the third call is
  // the plain kernel. A budget of 50 ms is spent by the first warm run, so the third call is
  // never made and the candidate keeps one slow time (with no budget cut it would be repeated).
  SlowAtUnroll3 t("slow_start", 0.05);
  auto cut = t.measure_unrolled(3);
  CHECK(cut.times_s.size() == 1);
  CHECK(cut.median_s() >= 0.15);
}

TEST_CASE("measure: a naive kernel slower than the timeout is timed by its reference run") {
  auto w = library_workload("matmul", "M=512,N=512,K=512");
  auto be = codegen::make_backend("cpu");
  auto o = quick_options();
  TempDir dir;
  o.cache_dir = dir.file("cache");  // the reference runs here, and its time is kept beside it
  o.timeout_s = 0.05;               // the naive 512^3 kernel takes longer than this
  measure::Measurer m(*be, w, o);
  auto naive = ir::naive_schedule(w);
  auto other = naive;
  other.stages[0].unroll = 1;  // the same loops in another config: timed as usual, so it times out
  auto results = m.measure({naive, other});
  REQUIRE(results[0].ok());
  CHECK(results[0].times_s.size() == 1);
  CHECK(results[0].median_s() >= o.timeout_s);
  CHECK(results[1].error_class == "timeout");
}

TEST_CASE("run_process: a program that cannot start is an I/O error, not an exit code") {
  ErrorKind kind{};
  const std::string message = test::error_of([] { run_process({"/nonexistent/program", "x"}, 5); }, &kind);
  CHECK(kind == ErrorKind::Io);
  CHECK(message.find("cannot run /nonexistent/program: No such file or directory") != std::string::npos);
  auto r = run_process({"sh", "-c", "exit 127"}, 5);  // a program's own 127 stays its result
  CHECK(r.exit_code == 127);
}

TEST_CASE("measure: a worker that cannot start fails the measuring, not the candidates") {
  auto w = library_workload("matmul", "M=4,N=4,K=4");
  auto be = codegen::make_backend("cpu");
  auto o = quick_options();
  TempDir dir;
  o.cache_dir = dir.file("cache");  // a fresh cache, so the reference must run through the worker
  const std::string good_runner = o.runner_path;
  o.runner_path = "/nonexistent/tiletune-runner";
  ErrorKind kind{};
  std::string message = test::error_of([&] { measure::Measurer(*be, w, o).measure({ir::naive_schedule(w)}); }, &kind);
  CHECK(kind == ErrorKind::Io);
  CHECK(message.find("cannot run /nonexistent/tiletune-runner") != std::string::npos);

  // With the reference already in the cache, only the candidates' runs need the worker: each
  // would have been stored as a runtime error of its config (how 10,358 configs of a benchmark's
  // database came to be marked failed when its binary was copied away from the runner).
  o.runner_path = good_runner;
  auto naive = ir::naive_schedule(w);
  REQUIRE(measure::Measurer(*be, w, o).measure({naive})[0].ok());
  o.runner_path = "/nonexistent/tiletune-runner";
  auto other = naive;
  other.stages[0].unroll = 2;
  message = test::error_of([&] { measure::Measurer(*be, w, o).measure({other}); }, &kind);
  CHECK(kind == ErrorKind::Io);
  CHECK(message.find("cannot run /nonexistent/tiletune-runner") != std::string::npos);
  message = test::error_of([&] { measure::Measurer(*be, w, o).side_by_side({naive, other}); }, &kind);
  CHECK(kind == ErrorKind::Io);

  // Tuning stops with the error and stores no record of a config it could not run.
  auto store = db::open_sqlite_store(dir.file("t.db"));
  tuner::TuneOptions to;
  to.trials = 4;
  to.batch_size = 4;
  to.strategy = "random";
  to.measure = o;
  message = test::error_of([&] { tuner::tune(w, *be, *store, to); }, &kind);
  CHECK(kind == ErrorKind::Io);
  CHECK(store->history(w.key, be->target().key).empty());
}

TEST_CASE("measure: a compiler that cannot run fails the measuring, not the candidates") {
  namespace fs = std::filesystem;
  auto w = library_workload("matmul", "M=4,N=4,K=4");
  TempDir dir;
  const std::string compiler = dir.file("g++");  // g++ until it is removed
  std::ofstream(compiler) << "#!/bin/sh\nexec g++ \"$@\"\n";
  fs::permissions(compiler, fs::perms::owner_all);
  codegen::BackendOptions bo;
  bo.compiler = compiler;
  auto be = codegen::make_backend("cpu", bo);
  auto o = quick_options();
  o.cache_dir = dir.file("cache");
  auto naive = ir::naive_schedule(w);
  REQUIRE(measure::Measurer(*be, w, o).measure({naive})[0].ok());  // the reference is cached
  fs::remove(compiler);
  auto other = naive;
  other.stages[0].unroll = 2;
  ErrorKind kind{};
  const std::string message = test::error_of([&] { measure::Measurer(*be, w, o).measure({other}); }, &kind);
  CHECK(kind == ErrorKind::Io);
  CHECK(message.find("cannot run " + compiler) != std::string::npos);
}

TEST_CASE("measure: a worker whose output outgrows what is kept says so") {
  auto w = library_workload("matmul", "M=4,N=4,K=4");
  auto be = codegen::make_backend("cpu");
  auto o = quick_options();
  REQUIRE(measure::Measurer(*be, w, o).measure({ir::naive_schedule(w)})[0].ok());  // the reference is there
  TempDir dir;
  o.runner_path = dir.file("chatty-runner");
  {
    std::ofstream script(o.runner_path);
    script << "#!/bin/sh\nhead -c " << 2 * kDefaultMaxOutput << " /dev/zero | tr '\\0' 7\necho\n";
  }
  std::filesystem::permissions(o.runner_path, std::filesystem::perms::owner_all);
  auto results = measure::Measurer(*be, w, o).measure({ir::naive_schedule(w)});
  REQUIRE(results.size() == 1);
  CHECK(results[0].error_class == "runtime_error");
  CHECK(results[0].error_message.find("its output was cut at " + std::to_string(kDefaultMaxOutput) + " bytes") !=
        std::string::npos);
}

TEST_CASE("tune: tuning goes on past faulty candidates and keeps every failure as a record") {
  TempDir dir;
  auto w = library_workload("matmul", "M=24,N=40,K=16");
  std::string naive = ir::naive_schedule(w).to_json();
  FaultyBackend be([&](const std::string& config) -> std::string {
    if (config == naive) return "";
    switch (fnv1a64(config) % 4) {
      case 0:
        return "crash";
      case 1:
        return "wrong";
      default:
        return "";
    }
  });
  auto store = db::open_sqlite_store(dir.file("t.db"));
  tuner::TuneOptions o;
  o.trials = 12;
  o.batch_size = 6;
  o.strategy = "random";
  o.measure = quick_options();
  auto summary = tuner::tune(w, be, *store, o);
  CHECK(summary.measured == 12);
  CHECK(summary.failed > 0);
  CHECK(summary.failed < 12);
  REQUIRE(summary.best.has_value());
  CHECK(summary.best->ok());
  auto history = store->history(w.key, be.target().key);
  CHECK(history.size() == 12);
  int crashes = 0, wrong = 0;
  for (auto& r : history) {
    crashes += r.error_class == "runtime_error";
    wrong += r.error_class == "wrong_result";
  }
  CHECK(crashes + wrong == summary.failed);
}
