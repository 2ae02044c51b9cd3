// measure/measure.hpp
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/backend.hpp"
#include "ir/schedule.hpp"
#include "measure/timing.hpp"

namespace tiletune::measure {

//! How candidates are built and timed (the Timing, recorded with every measurement, and where).
struct MeasureOptions : Timing {
  double timeout_s = 10;  //!< one candidate's whole run (warm-up, check, repeats)
  double reference_timeout_s = 600;
  int build_jobs = 0;       //!< parallel compiler processes; 0: one per core
  std::string cache_dir;    //!< built artifacts and reference outputs (content-addressed)
  std::string runner_path;  //!< the tiletune-runner executable; "": beside this executable

  //! The timing and the timeout: what a record keeps and a daemon sends a remote worker.
  nlohmann::json to_json() const;
  //! to_json's form; other fields keep their defaults. Error(InvalidInput) when out of range.
  static MeasureOptions from_json(const nlohmann::json& j);
};

//! Error classes of a failed measurement (empty string for success).
namespace error_class {
inline constexpr const char* kInvalidConfig = "invalid_config";
inline constexpr const char* kBuild = "build_error";
inline constexpr const char* kRuntime = "runtime_error";  //!< crashed: signal or abnormal exit
inline constexpr const char* kTimeout = "timeout";
inline constexpr const char* kWrongResult = "wrong_result";
}  // namespace error_class

struct MeasureResult {
  std::string config_json;
  std::string config_key;
  std::vector<double> times_s;  //!< every timed repeat
  std::string error_class;      //!< "" on success
  std::string error_message;
  double build_s = 0;  //!< compile time (0 when the artifact was cached)
  double run_s = 0;    //!< wall time of the measuring worker
  bool ok() const { return error_class.empty(); }
  double median_s() const;  //!< +inf on failure
};

//! A result as JSON (what a remote worker sends back) and back; Error(InvalidInput) on bad input.
nlohmann::json result_to_json(const MeasureResult& r);
MeasureResult result_from_json(const nlohmann::json& j);

//! Whatever measures batches of one workload: here (Measurer) or on a remote worker.
class BatchMeasurer {
 public:
  virtual ~BatchMeasurer() = default;
  //! One result per config, in order; failures are results, not exceptions.
  virtual std::vector<MeasureResult> measure(const std::vector<ir::Schedule>& batch) = 0;
  //! The measuring parameters, recorded with every result.
  virtual std::string params_json() const = 0;
  //! The best time known for this workload: a measurer may time a candidate whose checked
  //! first run is many times slower by that run alone (see Measurer).
  virtual void expect_best(double /*seconds*/) {}
  //! Times the configs in turns in one session, so that their times compare (see Measurer);
  //! empty where this measurer cannot (a remote worker).
  virtual std::vector<MeasureResult> side_by_side(const std::vector<ir::Schedule>& /*rivals*/) { return {}; }
};

//! Builds candidates of one workload in parallel, then times them one at a time, each in a
//! fresh worker process, checking every result against the naive schedule's. The naive
//! schedule itself, where its reference run took longer than the timeout, gets that run's time.
class Measurer : public BatchMeasurer {
 public:
  Measurer(const codegen::Backend& backend, const ir::Workload& workload, MeasureOptions options);
  ~Measurer() override;

  //! Measures a batch; failures come back as results, never as exceptions. Throws only when
  //! measuring itself is impossible (no reference, no runner, no cache folder).
  std::vector<MeasureResult> measure(const std::vector<ir::Schedule>& batch) override;
  std::string params_json() const override;
  //! Checks the configs again and times them in turns in one worker: rounds in which each runs
  //! for kSideBySideTurnS after an untimed call (one timed call at least; the turn's mean per
  //! timed call is one time, the kernel's steady speed, as a lone measurement's median), at least
  //! kSideBySideMinTurns of them, until each has run kSideBySideShare times min_seconds, or
  //! max_seconds each have passed; kSideBySideMaxTurns at most, with longer turns where the
  //! share needs more (a turn ends by its kernel time or by the wall clock, not by max_repeats),
  //! so that a sub-microsecond kernel's times stay a short reply. Records taken at different
  //! times on a shared machine differ by up to 1.6x for the machine's sake alone, and its speed
  //! holds for tenths of a second: fine turns over a longer time compare the rivals under the
  //! same conditions.
  std::vector<MeasureResult> side_by_side(const std::vector<ir::Schedule>& rivals) override;
  static constexpr double kSideBySideTurnS = 0.001;
  static constexpr int kSideBySideMinTurns = 10;
  static constexpr int kSideBySideMaxTurns = 400;
  static constexpr double kSideBySideShare = 3.0;
  //! Candidates whose checked first run and up to kWarmRuns warm runs all take kFarSlower
  //! times this or longer are timed by the fastest of those runs alone
  //! (RunRequest::single_run_s): repeats would only make a loser's time more exact, and on a
  //! large workload cost seconds each. Others are repeated as the options say.
  void expect_best(double seconds) override { best_s_ = seconds; }
  static constexpr double kFarSlower = 4.0;
  static constexpr int kWarmRuns = 3;

  //! The source the backend emits for a schedule (what `tiletune show` prints).
  std::string source(const ir::Schedule& schedule) const;

  const MeasureOptions& options() const { return options_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  MeasureOptions options_;
  double best_s_ = 0;  // 0: unknown
};

//! Removes what a killed process left in a cache folder: half-built artifacts and request files
//! (named with their writer's pid) whose writer is no longer running. Returns how many.
int remove_orphans(const std::string& cache_dir);

//! The default cache folder: $XDG_CACHE_HOME/tiletune or ~/.cache/tiletune.
std::string default_cache_dir();

}  // namespace tiletune::measure
