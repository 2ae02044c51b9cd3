// measure/protocol.hpp — internal to measure/: what the tuner's process and a measuring
// worker (tiletune-runner) say to each other, as JSON files and lines.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.hpp"
#include "measure/timing.hpp"

namespace tiletune::measure {

struct RunRequest : Timing {
  //! SideBySide: the rivals are checked, then timed in turns (see Measurer::side_by_side).
  enum class Mode { Reference, Measure, SideBySide };
  Mode mode = Mode::Measure;
  std::string runtime;  //!< backend whose load() opens the artifact
  std::string plugin;   //!< the plug-in that registers `runtime`; "" for an in-tree backend
  std::string device;   //!< BackendOptions::device of the tuning backend
  std::string artifact;
  std::vector<std::vector<std::int64_t>> inputs, outputs;  //!< shapes, in argument order
  std::vector<ir::DType> input_types, output_types;        //!< element types (f32 where absent)
  std::int64_t workspace_floats = 0;
  std::string reference_path;  //!< raw outputs in their types, concatenated
  double tolerance = 0;        //!< relative, see tolerance_for
  //! Integer outputs computed through f32 may round the other way at a half: by this much.
  double integer_slack = 0;
  //! > 0: a checked first run at least this long, with warm runs that all are too (see
  //! Measurer::expect_best), is timed by the fastest of them alone (a far slower loser)
  double single_run_s = 0;
  //! Mode::SideBySide: the kernels timed in turns, each with its own workspace (artifact and
  //! workspace_floats are not used then).
  struct Rival {
    std::string artifact;
    std::int64_t workspace_floats = 0;
  };
  std::vector<Rival> rivals;

  std::string to_json() const;
  static RunRequest from_json(const std::string& text);
};

//! The worker prints one JSON line: {"times_s": [...]} or {"error_class": ..., "message": ...};
//! for Mode::SideBySide {"rivals": [{"times_s": [...]} or {"error_class": ..., "message": ...}]}.
struct RunReply {
  std::vector<double> times_s;
  std::string error_class;
  std::string message;
  std::vector<RunReply> rivals;  //!< Mode::SideBySide: one per rival, in order
  std::string to_json() const;
  static RunReply from_json(const std::string& text);  //!< throws on malformed text
};

//! Deterministic inputs from (seed, tensor index): floating types uniform in [-1, 1] (rounded
//! to the type), integer types uniform over their range (i32 over [-1000, 1000]).
void fill_input(ir::DType t, void* data, std::int64_t n, std::uint64_t seed, int tensor);
inline void fill_input(float* data, std::int64_t n, std::uint64_t seed, int tensor) {
  fill_input(ir::DType::F32, data, n, seed, tensor);
}

//! Relative tolerance of the result check for a reduction of `length` terms stored as
//! `output`: f32 rounding error grows about with the reduction's square root, and a result
//! stored in a narrower type may round one unit the other way (bf16, f16). Integer outputs
//! are compared exactly (see RunRequest::integer_slack).
double tolerance_for(std::int64_t reduction_length, ir::DType output = ir::DType::F32);

//! Compares outputs with the reference; "" when equal within tolerance, else where not.
//! NaN matches NaN; `scale` (mean magnitude of the reference) keeps near-zero values fair, and a
//! difference below f32's smallest normal (denormals kept or flushed) is no difference.
//! Integer types match within `slack` (absolute).
std::string compare(ir::DType t, const void* got, const void* want, std::int64_t n, double tolerance, double slack = 0);
inline std::string compare(const float* got, const float* want, std::int64_t n, double tolerance) {
  return compare(ir::DType::F32, got, want, n, tolerance);
}

}  // namespace tiletune::measure
