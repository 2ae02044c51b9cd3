// `tiletune corpus`: collects the cost models' training records unattended from a recipe
// (tuner/corpus.hpp). Every record goes to the database as it is measured, so a run that is
// stopped resumes where it was: workloads whose records are there measure nothing.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/inputs.hpp"
#include "cli/table.hpp"
#include "db/store.hpp"
#include "ops/library.hpp"
#include "support/error.hpp"
#include "tuner/corpus.hpp"
#include "tuner/tune.hpp"

namespace tiletune::cli {

int run_corpus(const CommonOptions& c, const tuner::TuneOptions& t, const CorpusOptions& o) {
  std::string text = is_file(o.recipe) ? read_text_file(o.recipe) : ops::corpus_text(o.recipe);
  tuner::CorpusRecipe recipe = tuner::parse_recipe(text, o.recipe);
  if (is_file(o.recipe)) recipe.dir = std::filesystem::path(o.recipe).parent_path().string();
  std::vector<std::string> notes;
  std::vector<tuner::CorpusCase> cases = tuner::corpus_cases(recipe, &notes);
  for (auto& n : notes) std::cerr << "tiletune: note: " << n << "\n";
  std::set<std::string> ops_seen;
  for (auto& cs : cases) ops_seen.insert(cs.op_name);
  std::string records;
  for (auto& p : recipe.phases)
    records += (records.empty() ? "" : ", then ") + std::to_string(p.trials) + " (" + std::to_string(p.guided) + " guided)";
  std::cout << "corpus " << recipe.name << " v" << recipe.version << ": " << cases.size() << " workloads of "
            << ops_seen.size() << " ops, records each: " << records << ", labels timed side by side in "
            << recipe.label_sessions << (recipe.label_sessions == 1 ? " session" : " sessions") << "\n";
  if (o.list) {
    for (auto& cs : cases) std::cout << cs.op_name << "  " << cs.sizes << "  " << cs.source << "\n";
    return kOk;
  }
  auto backend = backend_for(c);
  auto store = db::open_store(c.db);
  const auto start = std::chrono::steady_clock::now();
  int measured = 0, failed = 0;
  std::size_t end = o.limit > 0 ? std::min(cases.size(), static_cast<std::size_t>(o.limit)) : cases.size();
  // Brings workload i to the phase's records, then labels them; prints its line.
  auto collect = [&](std::size_t i, const tuner::CorpusPhase& phase, int label_sessions, const std::string& tag) {
    const auto& cs = cases[i];
    int got = 0, got_failed = 0;
    std::optional<db::Record> best;
    // Random configs (with the seed configs) first, then the model-guided search on top of
    // them: a corpus of only random kernels teaches little about the fast end.
    for (auto [strategy, trials] : {std::pair<std::string, int>{"random", phase.trials - phase.guided},
                                    std::pair<std::string, int>{"xgb", phase.trials}}) {
      if (trials <= 0) continue;
      tuner::TuneOptions opts = tune_options(c, t, nullptr);
      opts.strategy = strategy;
      opts.trials = trials;
      opts.seed = recipe.seed + i;
      opts.shipped_model = false;  // the corpus must not depend on the model trained from it
      opts.finalists = 0;          // labelled below, all records together
      tuner::TuneSummary s = tuner::tune(cs.workload, *backend, *store, opts);
      got += s.measured;
      got_failed += s.failed;
      if (s.best) best = s.best;
    }
    // Labels timed in turns, all of the workload's records together (a rerun relabels a
    // workload cut short, or a corpus collected before labels were).
    std::vector<std::string> notes;
    int relabelled =
        tuner::label_side_by_side(cs.workload, *backend, *store, tune_options(c, t, nullptr), label_sessions, notes);
    for (auto& n : notes) std::cerr << "tiletune: note: " << n << "\n";
    if (relabelled > 0) best = store->best(cs.workload.key, backend->target().key);
    measured += got;
    failed += got_failed;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double best_s = best ? best->median_s() : NAN;
    std::cout << tag << "[" << i + 1 << "/" << end << "] " << cs.op_name << " " << cs.sizes << ": " << got << " new ("
              << got_failed << " failed), " << relabelled << " timed side by side, best "
              << (std::isfinite(best_s) ? fmt("%.5f", best_s * 1e3) : "-")
              << " ms  (" << cs.source << ", " << fmt("%.0f", elapsed) << " s)" << std::endl;
  };
  // Phase by phase over all workloads, each labelled after each phase, so that a phase's guided
  // searches learn from every workload's labelled records of the phases before, as they did
  // where a corpus was grown. (A run in parts, with --limit or stopped midway, lets some
  // workloads into a phase before others finish the one before.)
  const std::size_t phases = recipe.phases.size();
  for (std::size_t p = 0; p < phases; ++p) {
    std::string tag = phases > 1 ? "phase " + std::to_string(p + 1) + "/" + std::to_string(phases) + " " : "";
    for (std::size_t i = 0; i < end; ++i)
      collect(i, recipe.phases[p], p + 1 == phases ? recipe.label_sessions : 1, tag);
  }
  std::cout << "corpus " << recipe.name << ": " << end << " workloads, " << measured << " records measured ("
            << failed << " failed), database " << c.db << "  target " << backend->target().key << "\n";
  return kOk;
}

}  // namespace tiletune::cli
