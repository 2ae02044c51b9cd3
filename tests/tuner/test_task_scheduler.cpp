// The task scheduler: warm-up, the gradient rule against round-robin, and a budget shared over
// real tuning that resumes from the database.
#include <doctest/doctest.h>

#include "helpers.hpp"
#include "tuner/task_scheduler.hpp"

using namespace tiletune;
using tiletune::test::library_workload;
using tiletune::test::TempDir;

TEST_CASE("task scheduler: warm-up first, then the task whose next round promises the most") {
  std::vector<tuner::WeightedTask> tasks = {{library_workload("matmul", "M=8,N=8,K=8"), 1},
                                            {library_workload("softmax", "N=4,D=8"), 10},
                                            {library_workload("row_sum", "N=4,D=8"), 1}};
  tuner::TaskScheduleOptions o;
  o.round = 8;
  std::vector<tuner::TaskStatus> s(3);
  // Warm-up in order; a task with no correct kernel after it gets one more round, no more.
  CHECK(tuner::next_task(tasks, s, o, 0) == 0);
  s[0].trials = 8;
  CHECK(tuner::next_task(tasks, s, o, 0) == 1);
  s[1].trials = 8;
  s[1].best_s = 1e-3;
  s[2].trials = 8;
  s[2].best_s = 1e-3;
  CHECK(tuner::next_task(tasks, s, o, 0) == 0);
  s[0].trials = 16;
  CHECK(tuner::next_task(tasks, s, o, 0) == 1);
  CHECK(std::isinf(tuner::estimated_latency(tasks, s)));
  s[0].best_s = 1e-3;
  CHECK(std::isfinite(tuner::estimated_latency(tasks, s)));
  CHECK(tuner::estimated_latency(tasks, s) == doctest::Approx(12e-3));
  // Same latencies and rounds: the weight decides.
  CHECK(tuner::next_task(tasks, s, o, 0) == 1);
  // A task that already had many rounds forecasts less; one still dropping fast gains.
  s[1].trials = 800;
  s[2].best_after_round = {4e-3, 3e-3, 2e-3, 1e-3};
  CHECK(tuner::next_task(tasks, s, o, 0) == 2);
  // Round-robin goes in turn; exhausted tasks are skipped by both.
  o.policy = "round-robin";
  CHECK(tuner::next_task(tasks, s, o, 4) == 1);
  s[1].exhausted = true;
  CHECK(tuner::next_task(tasks, s, o, 4) == 2);
  for (auto& t : s) t.exhausted = true;
  CHECK(tuner::next_task(tasks, s, o, 0) == -1);
}

TEST_CASE("task scheduler: one budget over real tuning, resumed from the database") {
  TempDir dir;
  auto store = db::open_sqlite_store(dir.file("t.db"));
  auto be = codegen::make_backend("cpu");
  std::vector<tuner::WeightedTask> tasks = {{library_workload("matmul", "M=16,N=16,K=16"), 2},
                                            {library_workload("row_sum", "N=8,D=16"), 1}};
  tuner::TuneOptions base;
  base.strategy = "random";
  base.batch_size = 4;
  base.measure.min_seconds = 0.005;
  base.measure.cache_dir = test::kernel_cache();
  tuner::TaskScheduleOptions o;
  o.trials = 12;
  o.round = 4;
  int steps = 0;
  auto status = tuner::tune_tasks(tasks, *be, *store, base, o, [&](const tuner::ModelProgress& p) {
    ++steps;
    CHECK(p.trials <= 12);
  });
  CHECK(steps == 3);
  CHECK(status[0].trials + status[1].trials == 12);
  CHECK(status[0].trials >= 4);
  CHECK(status[1].trials >= 4);
  CHECK(std::isfinite(tuner::estimated_latency(tasks, status)));
  // Once every round is done, each task's fastest records have been timed again side by side,
  // and the status reports the best of those times.
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto top = store->top_k(tasks[i].workload.key, be->target().key, 100);
    // (the finalists, and records a round left faster than them: tuner::retime_finalists)
    int side_by_side = 0;
    for (auto& r : top) side_by_side += r.measure_params_json.find("side_by_side") != std::string::npos;
    CHECK(side_by_side >= std::min<int>(base.finalists, static_cast<int>(top.size())));
    CHECK(top[0].measure_params_json.find("side_by_side") != std::string::npos);
    CHECK(status[i].best_s == top[0].median_s());
  }
  // A rerun with the same budget measures nothing; a larger one continues from there.
  steps = 0;
  tuner::tune_tasks(tasks, *be, *store, base, o, [&](const tuner::ModelProgress&) { ++steps; });
  CHECK(steps == 0);
  o.trials = 16;
  auto more = tuner::tune_tasks(tasks, *be, *store, base, o);
  CHECK(more[0].trials + more[1].trials == 16);
  o.policy = "fastest-first";
  CHECK(test::error_of([&] { tuner::tune_tasks(tasks, *be, *store, base, o); }).find("use gradient or round-robin") !=
        std::string::npos);
}
