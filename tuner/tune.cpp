#include "tuner/tune.hpp"

#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <set>
#include <nlohmann/json.hpp>

#include "db/retry.hpp"
#include "support/error.hpp"
#include "support/version.hpp"
#include "tuner/dataset.hpp"
#include "tuner/pretrained.hpp"
#include "tuner/search.hpp"

namespace tiletune::tuner {

db::WorkloadRow workload_row(const ir::Workload& w) {
  return {w.key, w.op.name, w.canonical_text, nlohmann::json(w.sizes).dump(), w.source_text};
}

db::TargetRow target_row(const codegen::TargetInfo& t) {
  return {t.key, t.backend, t.family, t.fingerprint_json, codegen::traits_to_json(t.traits)};
}

void check_memory(const ir::Workload& w, double share) {
  double bytes = 0;
  for (auto& b : w.buffers) bytes += 4.0 * static_cast<double>(b.elements());
  double machine = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (machine <= 0 || bytes <= share * machine) return;
  char text[200];
  std::snprintf(text, sizeof text, "its tensors need %.2f GiB, over %.0f %% of this machine's %.2f GiB of memory",
                bytes / (1 << 30), share * 100, machine / (1 << 30));
  throw_error(ErrorKind::InvalidInput, w.op.name + " with " + w.sizes_text() + ": " + text);
}

codegen::TargetInfo target_info(const db::TargetRow& row) {
  return {row.backend,  row.key, row.family, row.fingerprint_json, codegen::traits_from_json(row.traits_json),
          /*device=*/""};
}

db::Record to_record(const measure::MeasureResult& r, const ir::Workload& w, const std::string& target_key,
                     const std::string& measure_params_json) {
  db::Record rec;
  rec.workload_key = w.key;
  rec.target_key = target_key;
  rec.config_key = r.config_key;
  rec.config_json = r.config_json;
  rec.times_s = r.times_s;
  rec.error_class = r.error_class;
  rec.error_message = r.error_message;
  rec.measure_params_json = measure_params_json;
  rec.tool_version = kToolVersion;
  rec.created_unix_ms = db::now_unix_ms();
  return rec;
}

std::vector<db::Record> measure_and_store(const ir::Workload& w, const codegen::Backend& backend,
                                          db::RecordStore& store, const std::vector<ir::Schedule>& configs,
                                          const measure::MeasureOptions& options) {
  store.put_workload(workload_row(w));
  store.put_target(target_row(backend.target()));
  measure::Measurer measurer(backend, w, options);
  std::vector<db::Record> out;
  for (auto& r : measurer.measure(configs)) {
    out.push_back(to_record(r, w, backend.target().key, measurer.params_json()));
    store.add_record(out.back());
  }
  return out;
}

namespace {
//! Side-by-side rounds of retime_finalists: the first, and one for records it leaves faster.
constexpr int kFinalistRounds = 2;
//! The measuring parameter of records timed in turns: with how many records.
constexpr const char* kSideBySideParam = "side_by_side";

//! Stores a record's new times and parameters, waiting out a store that is briefly unavailable.
void store_retime(db::RecordStore& store, const TuneOptions& options, std::int64_t id, const std::vector<double>& times,
                  const std::string& params) {
  db::retry_unavailable(
      options.store_patience_s, [&] { return store.retime(id, times, params); },
      [](const std::string& why) { std::cerr << "tiletune: " << why << "; retrying\n"; });
}

//! The note on a record whose config failed when timed again: the record keeps what it had.
std::string failed_again(const db::Record& r, const measure::MeasureResult& result) {
  return "config " + r.config_key + " failed when timed again (" + result.error_class + ": " + result.error_message +
         "); its record stands";
}
}  // namespace

int retime_finalists(const ir::Workload& w, const std::string& target_key, measure::BatchMeasurer& measurer,
                     db::RecordStore& store, const TuneOptions& options, std::vector<std::string>& notes) {
  // A round can leave a record it did not time faster than all it did: one whose lone time was
  // lucky (Q * K^T, 12 x 128 x 128 x 64: 70 us alone in the search, 85 us in every later run)
  // became the best after a round had timed the 8 before it at 74-80 us. Such records join the
  // rivals and all of them are timed again, until the fastest record was timed in the last
  // round. Not the fastest `finalists`: records timed alone in a fast phase of the machine keep
  // coming in while it is slow (16 rivals in 4 rounds and still some left, on the op above), so
  // one more round at most (kFinalistRounds), of twice `finalists` rivals at most.
  std::vector<db::Record> finalists;
  std::vector<ir::Schedule> rivals;
  std::set<std::int64_t> rival_ids;
  nlohmann::json params_json = nlohmann::json::parse(measurer.params_json());
  int retimed = 0;
  for (int round = 0; round < kFinalistRounds; ++round) {
    std::size_t before = rivals.size();
    for (db::Record& r : store.top_k(w.key, target_key, options.finalists)) {
      if (rival_ids.count(r.id)) break;  // the records after it are slower than a rival
      if (static_cast<int>(rivals.size()) >= 2 * options.finalists) break;
      try {
        rivals.push_back(ir::Schedule::from_json(r.config_json));
        rival_ids.insert(r.id);
        finalists.push_back(std::move(r));
      } catch (const Error&) {
        // A config this version cannot read is not timed again.
      }
    }
    if (rivals.size() < 2 || (round > 0 && rivals.size() == before)) break;
    std::vector<measure::MeasureResult> results = measurer.side_by_side(rivals);
    if (results.size() != rivals.size()) break;
    params_json[kSideBySideParam] = rivals.size();
    const std::string params = params_json.dump();
    retimed = 0;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].ok()) {
        notes.push_back(failed_again(finalists[i], results[i]));
        continue;
      }
      store_retime(store, options, finalists[i].id, results[i].times_s, params);
      ++retimed;
    }
  }
  return retimed;
}

SearchContext search_context(const ir::Workload& w, const codegen::TargetInfo& target, db::RecordStore& store,
                             const TuneOptions& options, std::vector<std::string>& notes) {
  SearchContext context;
  if (std::string kind = model_of_strategy(options.strategy); !kind.empty()) {
    context.prior = load_dataset(store, target.key, target.traits, w.key, options.prior_records).samples;
    if (auto row = options.models ? options.models->model(kind, target.key) : std::nullopt) {
      try {
        costmodel::ModelMeta meta;
        auto saved = costmodel::load_model(row->blob, &meta);
        // One fine-tuned from a shipped model keeps what that one learned: it is fine-tuned further.
        (meta.base.empty() ? context.pretrained : context.base) = std::move(saved);
      } catch (const Error& e) {
        notes.push_back(std::string("ignored the saved ") + kind + " model (" + e.what() +
                        "); training on the records instead");
      }
    }
    if (!context.pretrained && !context.base && options.shipped_model) {
      try {
        context.base = shipped_model(kind, target);
      } catch (const Error& e) {
        notes.push_back(std::string("ignored the shipped model (") + e.what() + ")");
      }
    }
  }
  return context;
}

namespace {

//! How many side-by-side sessions a record's times come from: its kSessionsParam's count, one
//! where it was timed side by side with `rivals` records, else none.
std::size_t sessions_of(const db::Record& r, std::size_t rivals) {
  const nlohmann::json params = nlohmann::json::parse(r.measure_params_json, nullptr, false);
  if (!params.is_object()) return 0;
  const auto n = params.find(kSideBySideParam);
  if (n == params.end() || !n->is_number_unsigned() || n->get<std::size_t>() != rivals) return 0;
  const auto sessions = params.find(db::kSessionsParam);
  return sessions != params.end() && sessions->is_array() ? std::max<std::size_t>(1, sessions->size()) : 1;
}

//! One more side-by-side session of all of `records` (each timed in every session before):
//! its times are added to each record's, and its count to their kSessionsParam. Returns the
//! records timed; a record that fails now keeps its times, and `notes` says so.
int add_session(const std::vector<db::Record>& records, measure::BatchMeasurer& measurer, db::RecordStore& store,
                const TuneOptions& options, std::vector<std::string>& notes) {
  std::vector<ir::Schedule> rivals;
  std::vector<const db::Record*> timed;
  for (const db::Record& r : records) {
    try {
      rivals.push_back(ir::Schedule::from_json(r.config_json));
      timed.push_back(&r);
    } catch (const Error&) {
      // A config this version cannot read is not timed again.
    }
  }
  if (rivals.size() < 2) return 0;
  std::vector<measure::MeasureResult> results = measurer.side_by_side(rivals);
  if (results.size() != rivals.size()) return 0;
  nlohmann::json params = nlohmann::json::parse(measurer.params_json());
  params[kSideBySideParam] = rivals.size();
  int added = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const db::Record& r = *timed[i];
    if (!results[i].ok()) {
      notes.push_back(failed_again(r, results[i]));
      continue;
    }
    const nlohmann::json before = nlohmann::json::parse(r.measure_params_json, nullptr, false);
    nlohmann::json counts = before.is_object() && before.contains(db::kSessionsParam)
                                ? before[db::kSessionsParam]
                                : nlohmann::json::array({r.times_s.size()});
    counts.push_back(results[i].times_s.size());
    params[db::kSessionsParam] = counts;
    std::vector<double> times = r.times_s;
    times.insert(times.end(), results[i].times_s.begin(), results[i].times_s.end());
    store_retime(store, options, r.id, times, params.dump());
    ++added;
  }
  return added;
}

}  // namespace

int label_side_by_side(const ir::Workload& w, const codegen::Backend& backend, db::RecordStore& store,
                       const TuneOptions& options, int sessions, std::vector<std::string>& notes) {
  const std::string target_key = backend.target().key;
  auto correct_records = [&] {
    return store.top_k(w.key, target_key, static_cast<int>(store.count_records(w.key, target_key)));
  };
  std::vector<db::Record> correct = correct_records();
  if (correct.size() < 2) return 0;
  // Sessions so far: none unless every correct record was timed in the same turns as all the
  // others; then the most any record has (one that failed in a later session has fewer).
  std::vector<std::size_t> had;
  for (const db::Record& r : correct) had.push_back(sessions_of(r, correct.size()));
  std::size_t done = *std::min_element(had.begin(), had.end()) == 0 ? 0 : *std::max_element(had.begin(), had.end());
  if (done >= static_cast<std::size_t>(std::max(sessions, 1))) return 0;
  measure::Measurer measurer(backend, w, options.measure);
  int timed = 0;
  if (done == 0) {
    TuneOptions all = options;
    all.finalists = static_cast<int>(correct.size());
    timed = retime_finalists(w, target_key, measurer, store, all, notes);
    correct = correct_records();
    done = 1;
  }
  for (; done < static_cast<std::size_t>(sessions); ++done) {
    const int added = add_session(correct, measurer, store, options, notes);
    if (added == 0) break;
    timed += added;
    correct = correct_records();
  }
  return timed;
}

TuneSummary tune(const ir::Workload& w, const codegen::Backend& backend, db::RecordStore& store,
                 const TuneOptions& options, const std::function<void(const Progress&)>& on_progress) {
  measure::Measurer measurer(backend, w, options.measure);
  return tune(w, backend.target(), measurer, store, options, on_progress);
}

TuneSummary tune(const ir::Workload& w, const codegen::TargetInfo& target, measure::BatchMeasurer& measurer,
                 db::RecordStore& store, const TuneOptions& options,
                 const std::function<void(const Progress&)>& on_progress) {
  check_memory(w, options.max_memory_share);
  store.put_workload(workload_row(w));
  store.put_target(target_row(target));
  Space space(w, target.traits);
  TuneSummary summary;

  summary.workload_key = w.key;
  summary.target_key = target.key;
  std::set<std::string> measured;
  std::vector<ir::Schedule> known;
  std::vector<double> known_latency;
  const std::string naive_key = ir::naive_schedule(w).key();
  for (auto& rec : store.history(w.key, target.key)) {
    if (rec.config_key == naive_key) summary.naive = rec;
    measured.insert(rec.config_key);
    try {
      known.push_back(ir::Schedule::from_json(rec.config_json));
      known_latency.push_back(rec.median_s());
    } catch (const Error&) {
      // A config this version cannot read still counts against the budget, but teaches nothing.
    }
  }
  summary.already = static_cast<int>(measured.size());
  // The search (and the model it trains on the target's other records, seconds on a large
  // database) is built only where trials are left: a resumed corpus or suite passes over its
  // finished workloads at once.
  std::unique_ptr<SearchStrategy> search;
  if (summary.already < options.trials) {
    search =
        make_search(options.strategy, space, options.seed, search_context(w, target, store, options, summary.notes));
    search->notify(known, known_latency);
  }

  Progress progress;
  progress.total = options.trials;
  progress.done = summary.already;
  auto best = store.best(w.key, target.key);
  progress.best_s = best ? best->median_s() : INFINITY;
  if (on_progress) on_progress(progress);

  ir::Schedule naive = ir::naive_schedule(w);
  std::vector<ir::Schedule> seeds;
  if (options.seeds) seeds = space.seeds();
  auto start = std::chrono::steady_clock::now();
  auto out_of_time = [&] {
    return options.max_seconds > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= options.max_seconds;
  };
  while (progress.done < options.trials) {
    if ((options.cancel && options.cancel->load()) || out_of_time()) {
      summary.stopped = true;
      break;
    }
    int n = std::min(options.batch_size, options.trials - progress.done);
    std::vector<ir::Schedule> batch;
    std::set<std::string> taken = measured;
    if (!measured.count(naive.key())) {
      batch.push_back(naive);  // the baseline every speedup is against
      taken.insert(naive.key());
    }
    for (auto& s : seeds)
      if (static_cast<int>(batch.size()) < n && taken.insert(s.key()).second) batch.push_back(s);
    auto proposed = search->propose(n - static_cast<int>(batch.size()), taken);
    batch.insert(batch.end(), proposed.begin(), proposed.end());
    if (batch.empty()) break;  // the space is exhausted
    if (std::isfinite(progress.best_s)) measurer.expect_best(progress.best_s);
    auto results = measurer.measure(batch);
    db::RecordBatch stored;
    for (auto& r : results) stored.records.push_back(to_record(r, w, target.key, measurer.params_json()));
    // The batch in one transaction; a database that is away gets it when it comes back.
    db::retry_unavailable(
        options.store_patience_s, [&] { return store.merge(stored); },
        [](const std::string& why) { std::cerr << "tiletune: " << why << "; keeping the batch and retrying\n"; });
    std::vector<double> latency;
    for (size_t i = 0; i < results.size(); ++i) {
      const measure::MeasureResult& r = results[i];
      if (r.config_key == naive_key) summary.naive = stored.records[i];
      measured.insert(r.config_key);
      latency.push_back(r.median_s());
      ++summary.measured;
      ++progress.done;
      if (!r.ok()) {
        ++summary.failed;
        ++progress.failed;
      }
      progress.best_s = std::min(progress.best_s, r.median_s());
    }
    search->notify(batch, latency);
    if (on_progress) on_progress(progress);
  }
  if (summary.measured > 0 && options.finalists > 1 && !summary.stopped)
    summary.retimed = retime_finalists(w, target.key, measurer, store, options, summary.notes);
  if (summary.retimed > 0 && summary.naive)  // the reference may be a finalist: its record as it now stands
    for (auto& rec : store.history(w.key, target.key))
      if (rec.config_key == naive_key) summary.naive = rec;
  summary.best = store.best(w.key, target.key);
  return summary;
}

}  // namespace tiletune::tuner
