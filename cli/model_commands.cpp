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
#include "ir/schedule.hpp"
#include "models/onnx_import.hpp"
#include "support/error.hpp"
#include "support/files.hpp"
#include "tuner/task_scheduler.hpp"
#include "vendor/vendor.hpp"

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

//! The assessment after tuning: per task its weight, FLOPs, bytes, naive and best latency,
//! GFLOP/s, the share of this machine's roof it reaches (FMA peak or copy bandwidth, measured
//! now), and with --compare-vendor oneDNN's time for the same layer; the model's estimated
//! latency (sum of weight x best) against oneDNN's sum over the layers it has.
int report_model(const CommonOptions& c, const ModelTuneOptions& m, const std::string& name,
                 const std::vector<tuner::WeightedTask>& tasks, const std::vector<std::string>& labels,
                 const std::vector<nlohmann::json>& layers, const std::vector<tuner::TaskStatus>& status,
                 const codegen::Backend& backend, db::RecordStore& store) {
  const std::string& target = backend.target().key;
  const int threads = backend.target().traits.threads;
  if (m.compare_vendor && !vendor::available())
    throw_error(ErrorKind::NotFound, "--compare-vendor: this tiletune was built without oneDNN (libdnnl-dev)");
  // The roofs and oneDNN's layers, measured in this run (vendor::judge_layers).
  std::vector<vendor::Judged> judged;
  for (size_t i = 0; i < tasks.size(); ++i)
    judged.push_back({tasks[i].workload.flops(), tasks[i].workload.io_bytes(), status[i].best_s, &layers[i]});
  const nlohmann::json judgement = vendor::judge_layers(judged, threads, m.compare_vendor);
  const double peak_flops = judgement["fma_gflops"].get<double>() * 1e9;
  double total = tuner::estimated_latency(tasks, status);
  double vendor_total = 0, ours_on_vendor_layers = 0;
  int vendor_layers = 0;
  std::vector<Row> rows;
  nlohmann::json report = nlohmann::json::array();
  for (size_t i = 0; i < tasks.size(); ++i) {
    const ir::Workload& w = tasks[i].workload;
    const auto& s = status[i];
    const int weight = tasks[i].weight;
    bool measured = std::isfinite(s.best_s);
    double share = std::isfinite(total) && measured ? weight * s.best_s / total : NAN;
    const nlohmann::json& judged_task = judgement["tasks"][i];
    double copy_s = judged_task["copy_s"].get<double>();
    double roof_s = judged_task["roof_s"].get<double>();
    bool compute_bound = judged_task["roof"] == "fma peak";
    db::RecordQuery naive_query{w.key, target, 0, 1, true, ir::naive_schedule(w).key()};
    auto naive = store.records(naive_query);
    double naive_s = naive.empty() ? NAN : naive[0].median_s();
    const nlohmann::json& vendor_json = judged_task["vendor"];
    double vendor_s = !vendor_json.is_null() && vendor_json.contains("seconds") ? vendor_json["seconds"].get<double>() : NAN;
    if (std::isfinite(vendor_s) && measured) {
      vendor_total += weight * vendor_s;
      ours_on_vendor_layers += weight * s.best_s;
      ++vendor_layers;
    }
    auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
    rows.push_back({{std::to_string(i + 1), w.op.name, w.sizes_text(), std::to_string(weight), std::to_string(s.trials),
                     fmt("%.3f", w.flops() / 1e9), fmt("%.2f", w.io_bytes() / 1e6), ms(naive_s), ms(s.best_s),
                     measured ? fmt("%.1f", w.flops() / s.best_s / 1e9) : "-",
                     measured ? fmt("%.0f%%", 100 * roof_s / s.best_s) + (compute_bound ? " peak" : " copy") : "-",
                     ms(vendor_s), std::isfinite(vendor_s) && measured ? fmt("%.2f", vendor_s / s.best_s) : "-",
                     std::isfinite(share) ? fmt("%.1f%%", 100 * share) : "-", labels[i]}});
    nlohmann::json line = tuner::task_report(tasks[i], s, total);
    line.update({{"naive_s", number(naive_s)},
                 {"roof_s", roof_s},
                 {"copy_s", copy_s},
                 {"roof", compute_bound ? "fma peak" : "copy bandwidth"},
                 {"roof_fraction", measured ? number(roof_s / s.best_s) : nlohmann::json(nullptr)},
                 {"vendor", vendor_json},
                 {"first_node", labels[i]}});
    report.push_back(line);
  }
  nlohmann::json summary = {
      {"model", name},
      {"target_key", target},
      {"estimated_latency_s", std::isfinite(total) ? nlohmann::json(total) : nlohmann::json(nullptr)},
      {"roofs", {{"fma_gflops", peak_flops / 1e9}}},
      {"tasks", report}};
  if (m.compare_vendor)
    summary["vendor"] = {
        {"name", "oneDNN"},
        {"layers", vendor_layers},
        {"tasks_without_vendor_layer", static_cast<int>(tasks.size()) - vendor_layers},
        {"vendor_latency_s", vendor_total},
        {"tiletune_latency_on_those_layers_s", ours_on_vendor_layers},
        {"tiletune_over_vendor",
         vendor_total > 0 ? nlohmann::json(ours_on_vendor_layers / vendor_total) : nlohmann::json(nullptr)}};
  if (m.json) {
    std::cout << summary.dump(2) << "\n";
  } else {
    print_table({"task", "op", "sizes", "weight", "trials", "GFLOP", "MB", "naive ms", "best ms", "GFLOP/s", "of roof",
                 "oneDNN ms", "x oneDNN", "share", "first node"},
                rows);
    std::cout << "estimated model latency " << ms(total)
              << " ms (sum of weight x best); roofs measured now: " << fmt("%.1f", peak_flops / 1e9)
              << " GFLOP/s FMA peak, and per task a copy of its bytes; database " << c.db << "\n";
    if (m.compare_vendor)
      std::cout << "oneDNN on the " << vendor_layers << " layers it has: " << ms(vendor_total)
                << " ms; tiletune on them " << ms(ours_on_vendor_layers) << " ms ("
                << (vendor_total > 0 ? fmt("%.2f", ours_on_vendor_layers / vendor_total) : "-") << "x oneDNN's time); "
                << tasks.size() - vendor_layers << " tasks have no oneDNN layer\n";
  }
  return std::isfinite(total) ? kOk : kNoResult;
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
  std::vector<nlohmann::json> layers;  // per task: the layer as the vendor has it (null: none)
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
      layers.push_back(task.vendor.empty() ? nlohmann::json() : nlohmann::json::parse(task.vendor));
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
      layers.push_back(cs.contains("vendor") && cs["vendor"].is_object() ? cs["vendor"] : nlohmann::json());
    }
  }
  if (tasks.empty()) throw_error(ErrorKind::InvalidInput, m.model + " has no task to tune");
  auto backend = backend_for(c);
  auto store = db::open_store(c.db);
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
  return report_model(c, m, name, tasks, labels, layers, status, *backend, *store);
}

}  // namespace tiletune::cli
