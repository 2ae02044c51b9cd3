// tuner/task_scheduler.hpp — one trial budget shared across the tasks of a model.
#pragma once
#include <functional>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "tuner/tune.hpp"

namespace tiletune::tuner {

//! A workload and how many times a model runs it.
struct WeightedTask {
  ir::Workload workload;
  int weight = 1;
};

struct TaskScheduleOptions {
  int trials = 0;  //!< records wanted over all tasks, counting those already stored
  int round = 8;   //!< trials a task gets each time it is chosen
  //! "gradient": after a warm-up round each, the task whose next round promises the largest
  //! drop of sum(weight x best latency) (Ansor's task scheduler); "round-robin": in turn.
  std::string policy = "gradient";
  double alpha = 0.2;  //!< weight of the observed drop against the optimistic 1/rounds forecast
  int window = 3;      //!< rounds over which the observed drop is measured
};

struct TaskStatus {
  int trials = 0;  //!< records stored
  double best_s = std::numeric_limits<double>::infinity();
  std::vector<double> best_after_round;  //!< best latency after each of this run's rounds
  bool exhausted = false;                //!< a round measured nothing new: not chosen again
};

//! Σ weight × best latency; +inf while a task has no correct kernel.
double estimated_latency(const std::vector<WeightedTask>& tasks, const std::vector<TaskStatus>& status);

//! Where the tasks stand in the store: records and best latency of each on the target.
std::vector<TaskStatus> stored_status(const std::vector<WeightedTask>& tasks, db::RecordStore& store,
                                      const std::string& target_key);

//! A task's line of a model's assessment: op, sizes, workload key, weight, trials, flops, bytes,
//! best_s, gflops and share (of `total`, the model's estimated latency); null where unknown.
nlohmann::json task_report(const WeightedTask& task, const TaskStatus& status, double total);

//! The task the policy runs next; -1 when none can run.
int next_task(const std::vector<WeightedTask>& tasks, const std::vector<TaskStatus>& status,
              const TaskScheduleOptions& options, int step);

struct ModelProgress {
  int step = 0;
  int task = -1;   //!< the task just tuned
  int trials = 0;  //!< over all tasks
  double estimate_s = 0;
  const std::vector<TaskStatus>* status = nullptr;
};

//! Tunes the tasks under one budget; resumes from the records in the store (their counts and
//! best latencies). `base` gives the per-task options (strategy, measuring); its trials are
//! not used.
std::vector<TaskStatus> tune_tasks(const std::vector<WeightedTask>& tasks, const codegen::Backend& backend,
                                   db::RecordStore& store, const TuneOptions& base, const TaskScheduleOptions& options,
                                   const std::function<void(const ModelProgress&)>& on_step = {});

}  // namespace tiletune::tuner
