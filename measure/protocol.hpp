// measure/protocol.hpp — internal to measure/: what the tuner's process and a measuring
// worker (tiletune-runner) say to each other, as JSON files and lines.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "measure/timing.hpp"

namespace tiletune::measure {

struct RunRequest : Timing {
  enum class Mode { Reference, Measure };
  Mode mode = Mode::Measure;
  std::string runtime;  //!< backend whose load() opens the artifact
  std::string plugin;   //!< the plug-in that registers `runtime`; "" for an in-tree backend
  std::string device;   //!< BackendOptions::device of the tuning backend
  std::string artifact;
  std::vector<std::vector<std::int64_t>> inputs, outputs;  //!< shapes, in argument order
  std::int64_t workspace_floats = 0;
  std::string reference_path;  //!< raw f32 outputs, concatenated
  double tolerance = 0;        //!< relative, see tolerance_for
  //! > 0: a checked first run at least this long is the only timing (a far slower loser)
  double single_run_s = 0;

  std::string to_json() const;
  static RunRequest from_json(const std::string& text);
};

//! The worker prints one JSON line: {"times_s": [...]} or {"error_class": ..., "message": ...}.
struct RunReply {
  std::vector<double> times_s;
  std::string error_class;
  std::string message;
  std::string to_json() const;
  static RunReply from_json(const std::string& text);  //!< throws on malformed text
};

//! Deterministic inputs: uniform in [-1, 1], from (seed, tensor index).
void fill_input(float* data, std::int64_t n, std::uint64_t seed, int tensor);

//! Relative tolerance of the result check for a reduction of `length` terms: float rounding
//! error grows about with its square root.
double tolerance_for(std::int64_t reduction_length);

//! Compares outputs with the reference; "" when equal within tolerance, else where not.
//! NaN matches NaN; `scale` (mean magnitude of the reference) keeps near-zero values fair.
std::string compare(const float* got, const float* want, std::int64_t n, double tolerance);

}  // namespace tiletune::measure
