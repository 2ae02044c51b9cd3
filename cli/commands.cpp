#include "cli/commands.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/exit_codes.hpp"
#include "cli/inputs.hpp"
#include "cli/table.hpp"
#include "codegen/backend.hpp"
#include "db/store.hpp"
#include "ir/parse.hpp"
#include "ops/library.hpp"
#include "support/error.hpp"
#include "support/files.hpp"
#include "tuner/lookup.hpp"
#include "tuner/model_eval.hpp"
#include "tuner/pretrained.hpp"
#include "tuner/tune.hpp"

namespace tiletune::cli {

//! The command line's tuning options with what the common options add.
tuner::TuneOptions tune_options(const CommonOptions& c, const tuner::TuneOptions& t, db::ModelStore* models) {
  tuner::TuneOptions o = t;
  o.measure.cache_dir = c.cache_dir;
  o.models = models;
  return o;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (auto& p : parts) s += (s.empty() ? "" : sep) + p;
  return s;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string ms(double seconds) { return std::isfinite(seconds) ? fmt("%.3f", seconds * 1e3) : "-"; }

namespace {

//! Interquartile range of the repeat times relative to their median, as a percentage.
std::string spread(const db::Record& r) { return r.times_s.size() < 2 ? "-" : fmt("%.1f%%", 100.0 * r.spread()); }

//! A progress bar on a terminal, one line per batch otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string label) : label_(std::move(label)), tty_(isatty(STDERR_FILENO)) {}
  ~ProgressPrinter() {
    if (tty_ && drawn_) std::cerr << "\n";
  }
  void operator()(const tuner::Progress& p) {
    std::string stats = std::to_string(p.done) + "/" + std::to_string(p.total) + "  best " + ms(p.best_s) +
                        " ms  failed " + std::to_string(p.failed);
    if (tty_) {
      int width = 30, filled = p.total ? std::min(width, width * p.done / p.total) : width;
      std::cerr << "\r" << label_ << " [" << std::string(filled, '#') << std::string(width - filled, '.') << "] "
                << stats << "   " << std::flush;
      drawn_ = true;
    } else {
      std::cerr << label_ << ": " << stats << "\n";
    }
  }

 private:
  std::string label_;
  bool tty_;
  bool drawn_ = false;
};

}  // namespace

void print_table(const std::vector<std::string>& header, const std::vector<Row>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (auto& r : rows)
    for (size_t i = 0; i < r.cells.size(); ++i) width[i] = std::max(width[i], r.cells[i].size());
  auto print = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      std::string cell = cells[i];
      bool left = header[i] == "op" || header[i] == "sizes" || header[i] == "config" || header[i] == "split" ||
                  header[i] == "model" || header[i] == "node" || header[i] == "type" || header[i] == "why" ||
                  header[i] == "onnx nodes";
      std::string pad(width[i] - cell.size(), ' ');
      line += (i ? "  " : "") + (left ? cell + pad : pad + cell);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
  };
  print(header);
  for (auto& r : rows) print(r.cells);
}

namespace {

const std::vector<std::string> kTuneHeader = {"op",      "sizes", "records", "new",  "failed", "naive ms",
                                              "best ms", "IQR",   "GFLOP/s", "GB/s", "speedup"};

Row tune_row(const ir::Workload& w, const tuner::TuneSummary& s) {
  double best = s.best ? s.best->median_s() : INFINITY;
  double naive = s.naive ? s.naive->median_s() : INFINITY;
  return {{w.op.name, w.sizes_text(), std::to_string(s.already + s.measured), std::to_string(s.measured),
           std::to_string(s.failed), ms(naive), ms(best), s.best ? spread(*s.best) : "-",
           std::isfinite(best) ? fmt("%.1f", w.flops() / best / 1e9) : "-",
           std::isfinite(best) ? fmt("%.1f", w.io_bytes() / best / 1e9) : "-",
           std::isfinite(best) && std::isfinite(naive) ? fmt("%.1fx", naive / best) : "-"}};
}

tuner::TuneSummary tune_one(const ir::Workload& w, const codegen::Backend& backend, db::Store& store,
                            const tuner::TuneOptions& o) {
  tuner::TuneSummary s;
  {
    ProgressPrinter progress(w.op.name + " " + w.sizes_text());
    s = tuner::tune(w, backend, store, o, [&](const tuner::Progress& p) { progress(p); });
  }
  for (auto& note : s.notes) std::cerr << "tiletune: note: " << note << "\n";
  return s;
}

}  // namespace

std::unique_ptr<codegen::Backend> backend_for(const CommonOptions& c) {
  return codegen::make_backend(c.backend, c.backend_options);
}

int run_tune(const CommonOptions& c, const tuner::TuneOptions& t) {
  ir::Workload w = load_workload(c.op, c.op_name, c.sizes);
  auto backend = backend_for(c);
  auto store = db::open_store(c.db);
  tuner::TuneSummary s = tune_one(w, *backend, *store, tune_options(c, t, store.get()));
  print_table(kTuneHeader, {tune_row(w, s)});
  if (!s.best) {
    std::cerr << "tiletune: no candidate of " << w.op.name << " passed the correctness check\n";
    return kNoResult;
  }
  std::cout << "workload " << w.key << "  target " << backend->target().key << "  database " << c.db << "\n";
  return kOk;
}

int run_suite(const CommonOptions& c, const tuner::TuneOptions& t, const std::string& suite, bool trials_given) {
  Suite loaded = load_suite(suite);
  const nlohmann::json& j = loaded.json;
  tuner::TuneOptions opts = t;
  if (!trials_given && j.contains("trials") && j["trials"].is_number_integer()) opts.trials = j["trials"].get<int>();
  std::vector<ir::Workload>& workloads = loaded.workloads;
  auto backend = backend_for(c);
  auto store = db::open_store(c.db);
  std::vector<Row> rows;
  bool all_ok = true;
  for (auto& w : workloads) {
    tuner::TuneSummary s = tune_one(w, *backend, *store, tune_options(c, opts, store.get()));
    all_ok = all_ok && s.best.has_value();
    rows.push_back(tune_row(w, s));
  }
  print_table(kTuneHeader, rows);
  std::cout << "database " << c.db << "  target " << backend->target().key << "\n";
  return all_ok ? kOk : kNoResult;
}

int run_best(const CommonOptions& c, int top, bool json) {
  ir::Workload w = load_workload(c.op, c.op_name, c.sizes);
  auto backend = backend_for(c);
  auto store = db::open_store(c.db, /*create=*/false);
  auto found = tuner::find_best(*store, w.key, backend->target());
  if (!found)
    throw_error(ErrorKind::NotFound, "no measured kernel of " + w.op.name + " with " + w.sizes_text() + " in " + c.db +
                                         "; run `tiletune tune` first");
  if (!found->exact_target)
    std::cerr << "tiletune: warning: no record for this exact target; using one measured on the same device "
                 "with another toolchain\n";
  auto records = store->top_k(w.key, found->record.target_key, top);
  if (json) {
    for (auto& r : records)
      std::cout << db::record_to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return kOk;
  }
  std::vector<Row> rows;
  int rank = 1;
  for (auto& r : records)
    rows.push_back({{std::to_string(rank++), ms(r.median_s()), spread(r), fmt("%.1f", w.flops() / r.median_s() / 1e9),
                     std::to_string(r.times_s.size()), r.config_json}});
  print_table({"rank", "median ms", "IQR", "GFLOP/s", "repeats", "config"}, rows);
  return kOk;
}

int run_show(const CommonOptions& c, const std::string& config_json, bool naive, bool json) {
  ir::Workload w = load_workload(c.op, c.op_name, c.sizes);
  auto backend = backend_for(c);
  nlohmann::json answer;
  if (naive || !config_json.empty()) {
    ir::Schedule s = naive ? ir::naive_schedule(w) : ir::Schedule::from_json(config_json);
    tuner::RecordKernel k = tuner::schedule_kernel(*backend, w, s, backend->target().traits);
    answer = {{"workload_key", w.key},
              {"target_key", backend->target().key},
              {"config", nlohmann::json::parse(s.to_json())},
              {"source", k.source},
              {"abi", k.abi}};
  } else {
    auto store = db::open_store(c.db, /*create=*/false);
    auto found = tuner::find_best(*store, w.key, backend->target());
    if (!found)
      throw_error(ErrorKind::NotFound, "no measured kernel of " + w.op.name + " with " + w.sizes_text() + " in " +
                                           c.db + "; run `tiletune tune` first, or pass --naive or --config");
    // Measured on another toolchain of this device: the source its target ran.
    answer = tuner::kernel_json(*found, w, tuner::record_kernel(*store, *backend, w, found->record), *backend);
  }
  if (json)
    std::cout << answer.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else
    std::cout << answer["source"].get<std::string>();
  return kOk;
}

int run_measure(const CommonOptions& c, const tuner::TuneOptions& t, const std::vector<std::string>& configs) {
  ir::Workload w = load_workload(c.op, c.op_name, c.sizes);
  auto backend = backend_for(c);
  auto store = db::open_store(c.db);
  std::vector<ir::Schedule> batch;
  for (auto& text : configs) batch.push_back(ir::Schedule::from_json(text));
  auto records = tuner::measure_and_store(w, *backend, *store, batch, tune_options(c, t, nullptr).measure);
  std::vector<Row> rows;
  bool any_ok = false;
  for (auto& r : records) {
    any_ok = any_ok || r.ok();
    rows.push_back(
        {{r.ok() ? ms(r.median_s()) : r.error_class, r.ok() ? spread(r) : "-",
          r.ok() ? fmt("%.1f", w.flops() / r.median_s() / 1e9) : r.error_message.substr(0, 60), r.config_json}});
  }
  print_table({"median ms", "IQR", "GFLOP/s", "config"}, rows);
  return any_ok ? kOk : kNoResult;
}

namespace {

//! The target a model command works on: this machine's, or `key`, a target the database holds
//! (records of another machine, or of this one under an earlier code generator).
codegen::TargetInfo model_target(const CommonOptions& c, db::Store& store, const std::string& key) {
  if (key.empty()) return backend_for(c)->target();
  auto row = store.target(key);
  if (!row) {
    std::string known;
    for (auto& t : store.targets()) known += (known.empty() ? "" : ", ") + t.key;
    throw_error(ErrorKind::NotFound, "no target " + key + " in " + c.db + (known.empty() ? "" : "; it has " + known));
  }
  return tuner::target_info(*row);
}

tuner::Dataset target_dataset(const CommonOptions& c, db::Store& store, const codegen::TargetInfo& target) {
  auto data = tuner::load_dataset(store, target.key, target.traits);
  std::cerr << "tiletune: " << data.samples.size() << " records of " << data.workloads.size() << " workloads on target "
            << target.key;
  if (data.skipped) std::cerr << " (" << data.skipped << " this version cannot read, skipped)";
  std::cerr << "\n";
  if (data.samples.empty())
    throw_error(ErrorKind::NotFound, "no records for target " + target.key + " in " + c.db +
                                         "; tune some ops first (for example `tiletune suite costmodel`)");
  return data;
}

//! The model of `kind` shipped for the target's machine kind, named as a model's base is
//! ("xgb-cpu-simd16.model"); Error(NotFound) where none is.
std::pair<std::string, std::unique_ptr<costmodel::CostModel>> shipped_base(const std::string& kind,
                                                                           const codegen::TargetInfo& target) {
  auto model = tuner::shipped_model(kind, target);
  if (!model) throw_error(ErrorKind::NotFound, "no " + kind + " model is shipped for " + tuner::machine_kind(target));
  return {tuner::shipped_model_file(kind, target), std::move(model)};
}

}  // namespace

int run_model_train(const CommonOptions& c, const ModelEvalOptions& o, const std::string& out) {
  if (!out.empty() && o.kinds.size() != 1)
    throw_error(ErrorKind::InvalidInput, "--out writes one model: give one --kind");
  auto store = db::open_store(c.db, /*create=*/false);
  const codegen::TargetInfo target = model_target(c, *store, o.target_key);
  auto data = target_dataset(c, *store, target);
  std::vector<Row> rows;
  for (auto& kind : o.kinds) {
    std::optional<std::pair<std::string, std::unique_ptr<costmodel::CostModel>>> shipped;
    if (o.from_shipped) {
      try {
        shipped = shipped_base(kind, target);
      } catch (const Error& e) {  // none shipped for this machine kind, or of a version this build cannot read
        std::cerr << "tiletune: " << e.what() << ": the " << kind << " model is trained from nothing\n";
      }
    }
    const tuner::Base base = shipped ? tuner::Base{shipped->first, shipped->second.get()} : tuner::Base{};
    db::ModelRow m = tuner::train_model(data, kind, target.key, o.seed, shipped ? &base : nullptr);
    store->put_model(m);
    if (!out.empty()) write_file_atomically(out, m.blob);
    auto metrics = nlohmann::json::parse(m.metrics_json);
    auto held = metrics.value("held-out sizes", nlohmann::json::object());
    auto get = [&](const char* k) { return held.contains(k) ? fmt("%.3f", held[k].get<double>()) : "-"; };
    rows.push_back({{kind, shipped ? shipped->first : "nothing", std::to_string(m.records), get("pairwise_accuracy"),
                     get("top5"), fmt("%.0f", m.blob.size() / 1024.0)}});
  }
  print_table({"model", "from", "records", "pairwise (held-out sizes)", "top-5", "KiB"}, rows);
  std::cout << "stored in " << c.db << " for target " << target.key << (out.empty() ? "" : " and written to " + out)
            << "\n";
  return kOk;
}

int run_model_eval(const CommonOptions& c, const ModelEvalOptions& o) {
  auto store = db::open_store(c.db, /*create=*/false);
  const codegen::TargetInfo target = model_target(c, *store, o.target_key);
  auto data = target_dataset(c, *store, target);
  // Models given whole (shipped, or saved files) rank the records untrained on them; else each
  // kind is trained and tested fold by fold.
  std::vector<std::pair<std::string, std::unique_ptr<costmodel::CostModel>>> given;
  if (o.shipped)
    for (auto& kind : o.kinds) {
      auto [file, model] = shipped_base(kind, target);
      // A kind shipped for no machine starts from another's model: named, since it ranks as that
      // one does until it is fine-tuned (--transfer).
      given.emplace_back("shipped " + kind + (file == tuner::shipped_model_name(kind, tuner::machine_kind(target))
                                                  ? ""
                                                  : " (from " + file + ")"),
                         std::move(model));
    }
  tuner::EvalOptions eval{o.transfer, o.op_shares, {}};
  std::vector<std::unique_ptr<costmodel::CostModel>> bases;  // what eval.bases points to
  if (o.from_shipped)
    for (auto& kind : o.kinds) {
      auto [file, model] = shipped_base(kind, target);
      eval.bases[kind] = {file, model.get()};
      bases.push_back(std::move(model));
    }
  for (auto& path : o.model_files) {
    auto model = costmodel::load_model(read_text_file(path));
    given.emplace_back(path + " (" + model->kind() + ")", std::move(model));
  }
  std::vector<tuner::EvalRow> results;
  if (given.empty()) results = tuner::evaluate_models(data, o.kinds, o.seed, eval);
  for (auto& [name, model] : given)
    for (auto& row : tuner::evaluate_trained(data, *model, name, o.transfer, o.seed)) results.push_back(std::move(row));
  // One printed line per result and, with --by-op, per op of each result (worst ranked first):
  // its labels, then its metrics.
  struct Line {
    std::vector<std::pair<std::string, nlohmann::json>> labels;
    costmodel::RankingMetrics metrics;
    double faster_than_cold = NAN, slower_than_cold = NAN;  //!< the transfer test's (tuner::EvalRow)
  };
  std::vector<Line> summary, per_op;
  bool against_cold = false;  // any line has the transfer test's comparison with a cold start
  for (auto& r : results) {
    summary.push_back({{{"split", r.split}, {"model", r.model}, {"folds", r.folds}},
                       r.metrics,
                       r.faster_than_cold,
                       r.slower_than_cold});
    against_cold |= std::isfinite(r.faster_than_cold);
    if (!o.by_op) continue;
    std::vector<Line> ops;
    for (auto& [op, m] : r.by_op) ops.push_back({{{"split", r.split}, {"model", r.model}, {"op", op}}, m});
    std::stable_sort(ops.begin(), ops.end(), [](const Line& a, const Line& b) {
      return a.metrics.pairwise_accuracy < b.metrics.pairwise_accuracy;
    });
    per_op.insert(per_op.end(), ops.begin(), ops.end());
  }
  if (o.json) {
    for (auto* lines : {&summary, &per_op})
      for (auto& l : *lines) {
        const auto& m = l.metrics;
        nlohmann::json j = {
            {"workloads", m.groups},  {"samples", m.samples}, {"pairwise_accuracy", m.pairwise_accuracy},
            {"spearman", m.spearman}, {"top1", m.top1},       {"top5", m.top5}};
        for (auto& [name, value] : l.labels) j[name] = value;
        if (std::isfinite(l.faster_than_cold)) {
          j["faster_than_cold"] = l.faster_than_cold;
          j["slower_than_cold"] = l.slower_than_cold;
        }
        std::cout << j.dump() << "\n";
      }
    return kOk;
  }
  for (auto* lines : {&summary, &per_op}) {
    if (lines->empty()) continue;
    std::vector<std::string> header;
    for (auto& label : lines->front().labels) header.push_back(label.first);
    for (const char* name : {"workloads", "samples", "pairwise", "spearman", "top-1", "top-5"}) header.push_back(name);
    const bool cold_columns = against_cold && lines == &summary;
    if (cold_columns)  // the share of draws whose first 2K trials beat, or lose to, a cold start's
      for (const char* name : {"2K: faster than cold", "slower"}) header.push_back(name);
    std::vector<Row> rows;
    for (auto& l : *lines) {
      Row row;
      for (auto& label : l.labels)
        row.cells.push_back(label.second.is_string() ? label.second.get<std::string>() : label.second.dump());
      const auto& m = l.metrics;
      for (std::string cell : {std::to_string(m.groups), std::to_string(m.samples), fmt("%.3f", m.pairwise_accuracy),
                               fmt("%.3f", m.spearman), fmt("%.3f", m.top1), fmt("%.3f", m.top5)})
        row.cells.push_back(cell);
      if (cold_columns)
        for (double share : {l.faster_than_cold, l.slower_than_cold})
          row.cells.push_back(std::isfinite(share) ? fmt("%.0f %%", 100 * share) : "-");
      rows.push_back(row);
    }
    if (lines == &per_op) std::cout << "\n";
    print_table(header, rows);
  }
  return kOk;
}

int run_ops() {
  for (auto& name : ops::op_names()) {
    ir::OpDef op = ir::parse_op(ops::op_text(name));
    auto list = [](const std::vector<ir::TensorDecl>& tensors) {
      std::string text;
      for (size_t i = 0; i < tensors.size(); ++i) {
        text += (i ? ", " : "") + tensors[i].name + "[";
        for (size_t d = 0; d < tensors[i].dims.size(); ++d) text += (d ? ", " : "") + ir::to_string(tensors[i].dims[d]);
        text += "]";
      }
      return text;
    };
    std::string sig = op.name + "(" + list(op.inputs) + ") -> " + list(op.outputs);
    std::cout << sig << "\n";
  }
  std::cout << "\nsuites:";
  for (auto& s : ops::suite_names()) std::cout << " " << s;
  std::cout << "\n";
  return kOk;
}

}  // namespace tiletune::cli
