// tiletune-search-bench: how many measured trials each search strategy needs to reach 95 % of
// the best latency a long random search finds, per workload and seed, with medians.
//
//   build/tiletune-search-bench [--trials 64] [--reference 256] [--seeds 3] [--db search.db]
//
// Every distinct config of a workload is measured once and its record reused by every strategy
// and seed that proposes it again (the database is the memo), so strategies are compared on
// the same measurements and a rerun measures nothing new. Model-guided strategies learn, as in
// real use, from the records of the other workloads in the database (not from this one's).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>

#include "codegen/backend.hpp"
#include "costmodel/model.hpp"
#include "ir/parse.hpp"
#include "ops/library.hpp"
#include "support/error.hpp"
#include "tuner/dataset.hpp"
#include "tuner/search.hpp"
#include "tuner/tune.hpp"

using namespace tiletune;

namespace {

struct Case {
  std::string op, sizes;
};

const std::vector<Case> kCases = {
    {"matmul", "M=512,N=512,K=512"},
    {"conv2d", "N=1,C=64,H=30,W=30,K=64,R=3,S=3"},
    {"batch_matmul", "G=12,M=128,N=128,K=64"},
    {"softmax", "N=1024,D=1024"},
};

//! Measures through the database: known configs cost nothing.
class MemoMeasurer {
 public:
  MemoMeasurer(const ir::Workload& w, const codegen::Backend& b, db::Store& store, measure::MeasureOptions o)
      : w_(w), backend_(b), store_(store), options_(std::move(o)) {
    for (auto& r : store_.history(w.key, b.target().key)) latency_[r.config_key] = r.median_s();
  }
  std::vector<double> operator()(const std::vector<ir::Schedule>& configs) {
    std::vector<ir::Schedule> fresh;
    for (auto& c : configs)
      if (!latency_.count(c.key())) fresh.push_back(c);
    if (!fresh.empty())
      for (auto& r : tuner::measure_and_store(w_, backend_, store_, fresh, options_))
        latency_[r.config_key] = r.median_s();
    std::vector<double> out;
    for (auto& c : configs) out.push_back(latency_.at(c.key()));
    return out;
  }
  std::size_t known() const { return latency_.size(); }

 private:
  const ir::Workload& w_;
  const codegen::Backend& backend_;
  db::Store& store_;
  measure::MeasureOptions options_;
  std::map<std::string, double> latency_;
};

//! Latency of the best config after each trial of one search run.
std::vector<double> run_search(const std::string& strategy, const ir::Workload& w, const codegen::Backend& b,
                               db::Store& store, MemoMeasurer& measure, int trials, int batch, std::uint64_t seed,
                               const std::vector<costmodel::Sample>& extra_prior = {}) {
  tuner::Space space(w, b.target().traits);
  tuner::SearchContext context;
  if (!tuner::model_of_strategy(strategy).empty()) {
    context.prior = tuner::load_dataset(store, b.target().key, b.target().traits, w.key).samples;
    for (auto& s : extra_prior)
      if (s.group != w.key) context.prior.push_back(s);
  }
  auto search = tuner::make_search(strategy, space, seed, std::move(context));
  std::set<std::string> seen;
  std::vector<double> best_after;
  double best = INFINITY;
  while (static_cast<int>(best_after.size()) < trials) {
    auto configs = search->propose(std::min(batch, trials - static_cast<int>(best_after.size())), seen);
    if (configs.empty()) break;
    auto latency = measure(configs);
    for (std::size_t i = 0; i < configs.size(); ++i) {
      seen.insert(configs[i].key());
      best = std::min(best, latency[i]);
      best_after.push_back(best);
    }
    search->notify(configs, latency);
  }
  return best_after;
}

//! Time to rank 10,000 candidates of matmul 1024^3: lowering, features and one batch prediction.
void ranking_speed(const codegen::Backend& b, const std::vector<costmodel::Sample>& train) {
  ir::Workload w = ir::bind(ir::parse_op(ops::op_text("matmul")), ir::parse_sizes("M=1024,N=1024,K=1024"));
  tuner::Space space(w, b.target().traits);
  tuner::Rng rng(1);
  std::vector<ir::Schedule> configs;
  for (int i = 0; i < 10000; ++i) configs.push_back(space.sample(rng));
  std::cout << "ranking 10,000 candidates of matmul 1024^3 (median of 5):\n";
  for (auto& kind : costmodel::model_kinds()) {
    auto model = costmodel::make_model(kind);
    model->fit(train);
    std::vector<double> feat, pred;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      std::vector<costmodel::Features> x;
      x.reserve(configs.size());
      for (auto& f : costmodel::featurize_all(w, configs, b.target().traits))
        if (f) x.push_back(std::move(*f));
      auto t1 = std::chrono::steady_clock::now();
      auto scores = model->predict(x);
      auto t2 = std::chrono::steady_clock::now();
      feat.push_back(std::chrono::duration<double>(t1 - t0).count());
      pred.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    std::sort(feat.begin(), feat.end());
    std::sort(pred.begin(), pred.end());
    std::printf("  %-4s features %.1f ms + prediction %.1f ms = %.1f ms\n", kind.c_str(), feat[2] * 1e3, pred[2] * 1e3,
                (feat[2] + pred[2]) * 1e3);
  }
  std::cout << "\n";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return NAN;
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string cell(double v, const char* f = "%.0f") {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tiletune-search-bench: trials each search strategy needs to reach 95% of a long random search's best"};
  int trials = 64, reference = 256, seeds = 3, batch = 16;
  std::string db_path = "search.db", cache, only, prior_db;
  bool speed_only = false;
  std::vector<std::string> strategies = tuner::search_names();
  app.add_option("--trials", trials, "trial budget of each search run")->capture_default_str();
  app.add_option("--reference", reference, "trials of the long random search that sets the target")
      ->capture_default_str();
  app.add_option("--seeds", seeds, "runs per strategy and workload")->capture_default_str();
  app.add_option("--batch", batch, "candidates per round")->capture_default_str();
  app.add_option("--strategies", strategies, "strategies to compare")->capture_default_str();
  app.add_option("--only", only, "run only workloads whose op contains this");
  app.add_option("--db", db_path, "database of measurements (the memo; reused across runs)")->capture_default_str();
  app.add_option("--cache", cache, "kernel cache folder");
  app.add_option("--prior-db", prior_db,
                 "another database whose records (other workloads, this target) model-guided search also learns from");
  app.add_flag("--speed-only", speed_only, "only time the ranking of 10,000 candidates");
  CLI11_PARSE(app, argc, argv);

  try {
    auto backend = codegen::make_backend("cpu");
    auto store = db::open_store(db_path);
    measure::MeasureOptions mo;
    mo.cache_dir = cache;
    std::vector<costmodel::Sample> extra_prior;
    if (!prior_db.empty()) {
      auto other = db::open_store(prior_db);
      extra_prior = tuner::load_dataset(*other, backend->target().key, backend->target().traits).samples;
      std::cout << "prior: " << extra_prior.size() << " records of " << prior_db << "\n";
    }
    {
      auto train = extra_prior;
      if (train.empty()) train = tuner::load_dataset(*store, backend->target().key, backend->target().traits).samples;
      if (!train.empty()) ranking_speed(*backend, train);
      if (speed_only) return 0;
    }
    std::map<std::string, std::vector<double>> needed;  // strategy -> trials to 95 %, every run
    std::cout << "trials to reach 95% of the best of " << reference << " random trials (budget " << trials
              << "; '-' = not reached)\n\n";
    std::vector<std::string> header = {"workload", "reference ms"};
    for (auto& s : strategies) header.push_back(s);
    std::vector<std::vector<std::string>> rows;
    for (auto& c : kCases) {
      if (!only.empty() && c.op.find(only) == std::string::npos) continue;
      ir::Workload w = ir::bind(ir::parse_op(ops::op_text(c.op)), ir::parse_sizes(c.sizes));
      store->put_workload(tuner::workload_row(w));
      store->put_target(tuner::target_row(backend->target()));
      MemoMeasurer measure(w, *backend, *store, mo);
      auto ref = run_search("random", w, *backend, *store, measure, reference, 32, 1000);
      double goal = ref.back() / 0.95;
      std::vector<std::string> row = {c.op + " " + c.sizes, cell(ref.back() * 1e3, "%.3f")};
      for (auto& strategy : strategies) {
        std::vector<double> runs;
        for (int seed = 1; seed <= seeds; ++seed) {
          auto t0 = std::chrono::steady_clock::now();
          auto curve = run_search(strategy, w, *backend, *store, measure, trials, batch,
                                  static_cast<std::uint64_t>(seed), extra_prior);
          auto hit = std::find_if(curve.begin(), curve.end(), [&](double l) { return l <= goal; });
          // Runs that never reach the goal count as needing more than the budget: 2x it.
          double n = hit == curve.end() ? 2.0 * trials : static_cast<double>(hit - curve.begin() + 1);
          runs.push_back(n);
          needed[strategy].push_back(n);
          std::cerr << c.op << " " << strategy << " seed " << seed << ": "
                    << (hit == curve.end() ? std::string("not reached") : cell(n)) << " (best "
                    << cell(curve.back() * 1e3, "%.3f") << " ms, "
                    << cell(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), "%.0f")
                    << " s)\n";
        }
        std::string text;
        for (double n : runs) text += (text.empty() ? "" : ",") + (n > trials ? std::string("-") : cell(n));
        row.push_back(text + " (med " + (median(runs) > trials ? std::string("-") : cell(median(runs))) + ")");
      }
      rows.push_back(row);
    }
    std::vector<std::string> summary = {"median over all runs", ""};
    for (auto& s : strategies) {
      double m = median(needed[s]);
      summary.push_back((m > trials ? "-" : cell(m)) + " = " + cell(m / median(needed["random"]), "%.2f") + "x random");
    }
    rows.push_back(summary);
    std::vector<std::size_t> width(header.size());
    for (std::size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
    for (auto& r : rows)
      for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    for (auto* r : {&header}) {
      for (std::size_t i = 0; i < r->size(); ++i)
        std::cout << (i ? "  " : "") << (*r)[i] << std::string(width[i] - (*r)[i].size(), ' ');
      std::cout << "\n";
    }
    for (auto& r : rows) {
      for (std::size_t i = 0; i < r.size(); ++i)
        std::cout << (i ? "  " : "") << r[i] << std::string(width[i] - r[i].size(), ' ');
      std::cout << "\n";
    }
    std::cout << "(runs that miss the goal count as 2x the budget in medians; database " << db_path << ")\n";
  } catch (const Error& e) {
    std::cerr << "tiletune-search-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
