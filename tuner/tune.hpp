// tuner/tune.hpp
#pragma once
#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "codegen/backend.hpp"
#include "db/store.hpp"
#include "measure/measure.hpp"
#include "tuner/dataset.hpp"

namespace tiletune::tuner {

//! The largest trial budget of one request (the API schema's TuneRequest.trials maximum).
inline constexpr int kMaxTrials = 100000;
//! The largest batch: a remote worker posts a batch's results at once (LeaseResults.results).
inline constexpr int kMaxBatch = 4096;

struct TuneOptions {
  int trials = 64;  //!< records wanted for (workload, target), counting those already stored
  int batch_size = 16;
  std::string strategy = "xgb";  // model-guided: reached the goal most often in tiletune-search-bench
  std::uint64_t seed = 1;
  double max_seconds = 0;  //!< stop after the batch that passes this many seconds; 0: no limit
  //! Set by another thread to stop after the batch in flight (its records are stored).
  const std::atomic<bool>* cancel = nullptr;
  int prior_records = kPriorRecords;  //!< model-guided strategies: most recent records of other workloads learned from
  bool seeds = true;                  //!< measure Space::seeds() in the first batch
  //! The most of this machine's memory a workload's tensors may take (measuring holds them and
  //! the reference outputs at once); a larger workload is refused before anything runs.
  double max_memory_share = 0.5;
  //! Where a model-guided strategy looks for a saved cost model of the target; none: it trains
  //! on the records alone.
  db::ModelStore* models = nullptr;
  //! Without a saved model of the target, fine-tune the model shipped for its machine kind
  //! (tuner/pretrained.hpp) instead of training on its records alone.
  bool shipped_model = true;
  //! A batch measured while the database server is away is kept and written when it returns,
  //! for up to this many seconds; then the run fails with Error(Unavailable).
  double store_patience_s = 600;
  //! After a run that measured something, the fastest this many records are timed again side
  //! by side (BatchMeasurer::side_by_side) and keep those times, so that the best is picked
  //! among times taken together; 0 or 1: off. A remote worker keeps its records as they are.
  int finalists = 8;
  measure::MeasureOptions measure;
};

struct Progress {
  int done = 0;       //!< records stored so far, earlier runs included
  int total = 0;      //!< the trial budget
  int failed = 0;     //!< failed measurements in this run
  double best_s = 0;  //!< best median so far; +inf if none
};

struct TuneSummary {
  std::string workload_key, target_key;
  int already = 0;   //!< records found in the database before this run
  int measured = 0;  //!< measured by this run
  int failed = 0;    //!< of those, failures (kept as records)
  std::optional<db::Record> best;
  std::optional<db::Record> naive;  //!< the reference schedule's record, if measured
  std::vector<std::string> notes;   //!< what the user should know (a saved model that could not be used)
  bool stopped = false;             //!< cancelled or out of time before the trial budget was spent
  int retimed = 0;                  //!< records timed again side by side (TuneOptions::finalists)
};

//! Tunes one workload on one backend: proposes batches with the chosen strategy, measures
//! them and stores every result before proposing the next. Resumes from the records already
//! in the store; a budget they already fill measures nothing.
TuneSummary tune(const ir::Workload& w, const codegen::Backend& backend, db::RecordStore& store,
                 const TuneOptions& options, const std::function<void(const Progress&)>& on_progress = {});

//! The same for a target measured elsewhere (a remote worker): `measurer` measures the batches
//! and options.measure is not used.
TuneSummary tune(const ir::Workload& w, const codegen::TargetInfo& target, measure::BatchMeasurer& measurer,
                 db::RecordStore& store, const TuneOptions& options,
                 const std::function<void(const Progress&)>& on_progress = {});

struct SearchContext;  // tuner/search.hpp
//! What the search of `options.strategy` starts from, if model-guided: the target's records of
//! other workloads (transfer), its saved model, else the model shipped for its machine kind.
//! Models that cannot be used are left out, and `notes` says why.
SearchContext search_context(const ir::Workload& w, const codegen::TargetInfo& target, db::RecordStore& store,
                             const TuneOptions& options, std::vector<std::string>& notes);

//! The fastest options.finalists records of the workload timed again in turns
//! (BatchMeasurer::side_by_side), each keeping its new times: records taken minutes apart on a
//! shared machine differ by up to 1.6x for the machine's sake, and the fastest of many is the
//! luckiest as often as the best. Where that leaves records timed alone faster than every
//! rival, they join the rivals and all are timed again, once (twice options.finalists rivals
//! at most), so that the fastest record was timed with the others. Returns how many were timed
//! in the last round (0 where the measurer cannot); a rival that fails now keeps its record,
//! and `notes` says so.
int retime_finalists(const ir::Workload& w, const std::string& target_key, measure::BatchMeasurer& measurer,
                     db::RecordStore& store, const TuneOptions& options, std::vector<std::string>& notes);

//! Training labels: every correct record of the workload timed again side by side
//! (retime_finalists over all of them), unless each already was with all the others. Labels
//! taken one after another agree with a second such measurement on 0.74 of their pairs, labels
//! taken in turns on 0.95 (10 corpus workloads, 16 records each). A rerun relabels a workload
//! whose timing was cut short, and a corpus collected before. Then, up to `sessions` sessions,
//! all of them are timed in turns again, each session's times added to the records' with their
//! count (db::kSessionsParam), so that a record's time is over several sessions (db::time_of):
//! a rerun with more sessions adds only those. Returns how many times records were timed.
int label_side_by_side(const ir::Workload& w, const codegen::Backend& backend, db::RecordStore& store,
                       const TuneOptions& options, int sessions, std::vector<std::string>& notes);

//! Measures given configs and stores each result (already measured configs are measured again
//! and keep their first record). Returns the records in the order of the configs.
std::vector<db::Record> measure_and_store(const ir::Workload& w, const codegen::Backend& backend,
                                          db::RecordStore& store, const std::vector<ir::Schedule>& configs,
                                          const measure::MeasureOptions& options);

//! The record of a measurement of a workload on a target.
db::Record to_record(const measure::MeasureResult& r, const ir::Workload& w, const std::string& target_key,
                     const std::string& measure_params_json);

//! Error(InvalidInput), with the figures, when the workload's tensors (inputs, outputs and
//! temporaries, f32) take more than `share` of this machine's memory.
void check_memory(const ir::Workload& w, double share);

//! The database rows that identify a workload and a target.
db::WorkloadRow workload_row(const ir::Workload& w);
db::TargetRow target_row(const codegen::TargetInfo& t);
//! A stored target as the schedule space and lookups see it (measured elsewhere: no device).
codegen::TargetInfo target_info(const db::TargetRow& row);

}  // namespace tiletune::tuner
