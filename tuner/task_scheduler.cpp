// Sharing a trial budget across a model's tasks. The gradient rule follows Ansor's task
// scheduler (python/tvm/auto_scheduler/task_scheduler.py): a task's next round is worth
// weight x (alpha x the drop of its best latency per round over the last `window` rounds +
// (1 - alpha) x best / rounds so far, the drop a 1/t curve forecasts).
#include "tuner/task_scheduler.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "support/error.hpp"

namespace tiletune::tuner {

double estimated_latency(const std::vector<WeightedTask>& tasks, const std::vector<TaskStatus>& status) {
  double total = 0;
  for (size_t i = 0; i < tasks.size(); ++i) total += tasks[i].weight * status[i].best_s;
  return total;
}

std::vector<TaskStatus> stored_status(const std::vector<WeightedTask>& tasks, db::RecordStore& store,
                                      const std::string& target_key) {
  std::vector<TaskStatus> status(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    status[i].trials = static_cast<int>(store.count_records(tasks[i].workload.key, target_key));
    if (auto b = store.best(tasks[i].workload.key, target_key)) status[i].best_s = b->median_s();
    if (std::isfinite(status[i].best_s)) status[i].best_after_round.push_back(status[i].best_s);
  }
  return status;
}

nlohmann::json task_report(const WeightedTask& task, const TaskStatus& status, double total) {
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  const ir::Workload& w = task.workload;
  return {{"op", w.op.name},
          {"sizes", w.sizes_text()},
          {"workload_key", w.key},
          {"weight", task.weight},
          {"trials", status.trials},
          {"flops", w.flops()},
          {"bytes", w.io_bytes()},
          {"best_s", number(status.best_s)},
          {"gflops", number(w.flops() / status.best_s / 1e9)},
          {"share", number(std::isfinite(total) ? task.weight * status.best_s / total : NAN)}};
}

int next_task(const std::vector<WeightedTask>& tasks, const std::vector<TaskStatus>& status,
              const TaskScheduleOptions& options, int step) {
  const int n = static_cast<int>(tasks.size());
  // Warm-up, in either policy: every task gets a round before any gets a second; a task with
  // no correct kernel after it gets one more, and then no more (its kernels all fail).
  for (int i = 0; i < n; ++i)
    if (!status[i].exhausted && status[i].trials < options.round) return i;
  for (int i = 0; i < n; ++i)
    if (!status[i].exhausted && !std::isfinite(status[i].best_s) && status[i].trials < 2 * options.round) return i;
  if (options.policy == "round-robin") {
    for (int k = 0; k < n; ++k) {
      int i = (step + k) % n;
      if (!status[i].exhausted && std::isfinite(status[i].best_s)) return i;
    }
    return -1;
  }
  int best = -1;
  double best_gain = -1;
  for (int i = 0; i < n; ++i) {
    const TaskStatus& s = status[i];
    if (s.exhausted || !std::isfinite(s.best_s)) continue;
    double rounds = std::max(1.0, double(s.trials) / options.round);
    const auto& h = s.best_after_round;
    double observed = 0;
    if (static_cast<int>(h.size()) > options.window)
      observed = (h[h.size() - 1 - options.window] - h.back()) / options.window;
    double forecast = s.best_s / rounds;
    double gain = tasks[i].weight * (options.alpha * observed + (1 - options.alpha) * forecast);
    if (gain > best_gain) {
      best_gain = gain;
      best = i;
    }
  }
  return best;
}

std::vector<TaskStatus> tune_tasks(const std::vector<WeightedTask>& tasks, const codegen::Backend& backend,
                                   db::RecordStore& store, const TuneOptions& base, const TaskScheduleOptions& options,
                                   const std::function<void(const ModelProgress&)>& on_step) {
  if (options.policy != "gradient" && options.policy != "round-robin")
    throw_error(ErrorKind::InvalidInput, "task scheduler '" + options.policy + "': use gradient or round-robin");
  if (options.round < 1) throw_error(ErrorKind::InvalidInput, "a round needs at least 1 trial");
  std::vector<TaskStatus> status = stored_status(tasks, store, backend.target().key);
  int used = 0;
  for (auto& s : status) used += s.trials;
  std::vector<bool> measured(tasks.size(), false);
  for (int step = 0; used < options.trials; ++step) {
    int i = next_task(tasks, status, options, step);
    if (i < 0) break;
    TaskStatus& s = status[i];
    TuneOptions o = base;
    o.finalists = 0;  // once per task, after the last round
    o.trials = s.trials + std::min(options.round, options.trials - used);
    TuneSummary r = tune(tasks[i].workload, backend, store, o);
    if (r.measured > 0) measured[i] = true;
    int before = s.trials;
    s.trials = r.already + r.measured;
    if (r.best) s.best_s = std::min(s.best_s, r.best->median_s());
    if (std::isfinite(s.best_s)) s.best_after_round.push_back(s.best_s);
    if (s.trials <= before) s.exhausted = true;  // the space has nothing new to measure
    used += s.trials - before;
    if (on_step) on_step({step, i, used, estimated_latency(tasks, status), &status});
    if (r.stopped) break;
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!measured[i] || base.finalists < 2) continue;
    measure::Measurer measurer(backend, tasks[i].workload, base.measure);
    std::vector<std::string> notes;
    if (retime_finalists(tasks[i].workload, backend.target().key, measurer, store, base, notes) > 0)
      if (auto best = store.best(tasks[i].workload.key, backend.target().key)) status[i].best_s = best->median_s();
  }
  return status;
}

}  // namespace tiletune::tuner
