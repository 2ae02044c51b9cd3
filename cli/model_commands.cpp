// `tiletune import` and `tiletune tune-model`: a model (ONNX, or a suite of weighted tasks) in,
// its tasks tuned under one budget by the task scheduler, and where it stands.
#include <cmath>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/inputs.hpp"
#include "cli/table.hpp"
#include "db/store.hpp"
#include "ir/parse.hpp"
#include "models/onnx_import.hpp"
#include "support/error.hpp"
#include "support/files.hpp"
#include "tuner/task_scheduler.hpp"

namespace tiletune::cli {

namespace {

std::map<std::string, models::Dims> parse_inputs(const std::vector<std::string>& input_shapes) {
  std::map<std::string, models::Dims> inputs;
  for (auto& text : input_shapes) {
    auto [name, dims] = models::parse_input_shape(text);
    if (!inputs.emplace(name, dims).second) throw_error(ErrorKind::InvalidInput, "--input " + name + " is given twice");
  }
  return inputs;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

int run_import(const std::string& model, const std::vector<std::string>& input_shapes, const std::string& out,
               int trials) {
  models::Imported m = models::import_onnx(model, parse_inputs(input_shapes));
  std::vector<Row> rows;
  double total = 0;
  for (size_t i = 0; i < m.tasks.size(); ++i) {
    const auto& t = m.tasks[i];
    ir::Workload w = ir::bind(ir::parse_op(t.op_text), ir::parse_sizes(t.sizes));
    total += t.weight * w.flops();
    std::string nodes;
    for (auto& occurrence : t.nodes) nodes += (nodes.empty() ? "" : "; ") + join(occurrence, "+");
    rows.push_back({{std::to_string(i + 1), w.op.name, t.sizes, std::to_string(t.weight), fmt("%.3f", w.flops() / 1e9),
                     nodes.size() > 60 ? nodes.substr(0, 57) + "..." : nodes}});
  }
  std::cout << "model " << m.model << ": " << m.tasks.size() << " tasks, " << fmt("%.2f", total / 1e9)
            << " GFLOP per inference\n";
  print_table({"task", "op", "sizes", "weight", "GFLOP", "onnx nodes"}, rows);
  int layout = 0;
  std::vector<Row> unmapped;
  for (auto& s : m.skipped) {
    if (s.layout_only)
      ++layout;
    else
      unmapped.push_back({{s.node, s.op_type, s.reason}});
  }
  std::cout << layout << " layout-only nodes (no kernel)";
  if (!unmapped.empty()) {
    std::cout << "; " << unmapped.size() << " nodes not mapped:\n";
    print_table({"node", "type", "why"}, unmapped);
  } else {
    std::cout << "; every other node is in a task\n";
  }
  if (!out.empty()) {
    write_file_atomically(out, models::suite_json(m, trials).dump(2) + "\n");
    std::cout << "suite written to " << out << " (tune it with `tiletune suite " << out << "`)\n";
  }
  return kOk;
}

int run_tune_model(const CommonOptions& c, const tuner::TuneOptions& t, const ModelTuneOptions& m) {
  // The tasks: an ONNX model imported now, or a suite whose cases carry weights (an import's).
  std::vector<tuner::WeightedTask> tasks;
  std::vector<std::string> labels;
  std::string name = m.model;
  if (ends_with(m.model, ".onnx")) {
    models::Imported imported = models::import_onnx(m.model, parse_inputs(m.input_shapes));
    name = imported.model;
    int unmapped = 0;
    for (auto& s : imported.skipped) unmapped += s.layout_only ? 0 : 1;
    if (unmapped > 0)
      std::cerr << "tiletune: note: " << unmapped << " nodes of the model are not mapped (see `tiletune import`)\n";
    for (auto& task : imported.tasks) {
      tasks.push_back({ir::bind(ir::parse_op(task.op_text), ir::parse_sizes(task.sizes)), task.weight});
      labels.push_back(task.nodes.empty() || task.nodes[0].empty() ? "" : task.nodes[0][0]);
    }
  } else {
    if (!m.input_shapes.empty()) throw_error(ErrorKind::InvalidInput, "--input applies to an ONNX model, not a suite");
    Suite suite = load_suite(m.model);
    std::map<std::string, size_t> by_key;  // cases of one workload are one task: their weights add
    for (size_t i = 0; i < suite.workloads.size(); ++i) {
      const auto& cs = suite.cases[i];
      std::int64_t weight = 1;
      if (cs.contains("weight")) {
        if (!cs["weight"].is_number_integer() || cs["weight"].get<std::int64_t>() < 1 ||
            cs["weight"].get<std::int64_t>() > 1000000)
          throw_error(ErrorKind::InvalidInput, "suite " + m.model + ", case " + std::to_string(i + 1) +
                                                   ": \"weight\" must be an integer in [1, 10^6]");
        weight = cs["weight"].get<std::int64_t>();
      }
      auto [at, added] = by_key.emplace(suite.workloads[i].key, tasks.size());
      if (!added) {
        tasks[at->second].weight += static_cast<int>(weight);
        continue;
      }
      tasks.push_back({suite.workloads[i], static_cast<int>(weight)});
      labels.push_back(suite.workloads[i].op.name);
    }
  }
  if (tasks.empty()) throw_error(ErrorKind::InvalidInput, m.model + " has no task to tune");
  auto backend = backend_for(c);
  auto store = db::open_sqlite_store(c.db);
  tuner::TaskScheduleOptions so;
  so.trials = m.trials;
  so.round = m.round;
  so.policy = m.scheduler;
  std::cout << "model " << name << ": " << tasks.size() << " tasks, " << m.trials << " trials, " << m.scheduler
            << " scheduler\n";
  if (m.trials < static_cast<int>(tasks.size()) * m.round)
    std::cerr << "tiletune: note: " << m.trials << " trials cannot give each of the " << tasks.size()
              << " tasks a round of " << m.round << ": tasks past trial " << m.trials
              << " stay unmeasured and the model has no estimate (use --trials " << tasks.size() * m.round
              << " or more, or a smaller --round)\n";
  auto status = tuner::tune_tasks(
      tasks, *backend, *store, tune_options(c, t, store.get()), so, [&](const tuner::ModelProgress& p) {
        const auto& s = (*p.status)[p.task];
        std::cout << "  round " << p.step + 1 << ": task " << p.task + 1 << " (" << tasks[p.task].workload.op.name
                  << ") " << s.trials << " trials, best " << ms(s.best_s) << " ms; model " << ms(p.estimate_s)
                  << " ms after " << p.trials << " trials\n"
                  << std::flush;
      });
  // The assessment: per task, and the model's estimated latency.
  double total = tuner::estimated_latency(tasks, status);
  std::vector<Row> rows;
  nlohmann::json report = nlohmann::json::array();
  for (size_t i = 0; i < tasks.size(); ++i) {
    const ir::Workload& w = tasks[i].workload;
    const auto& s = status[i];
    double share = std::isfinite(total) && std::isfinite(s.best_s) ? tasks[i].weight * s.best_s / total : NAN;
    rows.push_back({{std::to_string(i + 1), w.op.name, w.sizes_text(), std::to_string(tasks[i].weight),
                     std::to_string(s.trials), fmt("%.3f", w.flops() / 1e9), fmt("%.2f", w.io_bytes() / 1e6),
                     ms(s.best_s), std::isfinite(s.best_s) ? fmt("%.1f", w.flops() / s.best_s / 1e9) : "-",
                     std::isfinite(s.best_s) ? fmt("%.1f", w.io_bytes() / s.best_s / 1e9) : "-",
                     std::isfinite(share) ? fmt("%.1f%%", 100 * share) : "-", labels[i]}});
    report.push_back({{"op", w.op.name},
                      {"sizes", w.sizes_text()},
                      {"workload_key", w.key},
                      {"weight", tasks[i].weight},
                      {"trials", s.trials},
                      {"flops", w.flops()},
                      {"bytes", w.io_bytes()},
                      {"best_s", std::isfinite(s.best_s) ? nlohmann::json(s.best_s) : nlohmann::json(nullptr)},
                      {"share", std::isfinite(share) ? nlohmann::json(share) : nlohmann::json(nullptr)}});
  }
  if (m.json) {
    std::cout << nlohmann::json{{"model", name},
                                {"target_key", backend->target().key},
                                {"estimated_latency_s",
                                 std::isfinite(total) ? nlohmann::json(total) : nlohmann::json(nullptr)},
                                {"tasks", report}}
                     .dump(2)
              << "\n";
  } else {
    print_table(
        {"task", "op", "sizes", "weight", "trials", "GFLOP", "MB", "best ms", "GFLOP/s", "GB/s", "share", "first node"},
        rows);
    std::cout << "estimated model latency " << ms(total) << " ms (sum of weight x best)  database " << c.db << "\n";
  }
  return std::isfinite(total) ? kOk : kNoResult;
}

}  // namespace tiletune::cli
