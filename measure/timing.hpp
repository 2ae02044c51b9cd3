// measure/timing.hpp
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>

namespace tiletune::measure {

//! How one candidate is timed: what MeasureOptions (the tuner's side) and RunRequest (what the
//! measuring worker is told) share, declared once.
struct Timing {
  double min_seconds = 0.1;  //!< keep repeating until the repeats add up to this
  double max_seconds = 2.0;  //!< but stop past this total once one repeat is timed (slow kernels)
  int min_repeats = 3;
  int max_repeats = 100;
  std::uint64_t seed = 1;  //!< inputs are uniform in [-1, 1] from this seed

  void to_json(nlohmann::json& j) const;  //!< adds the fields to `j`
  //! The fields present in `j` (others keep their values); nlohmann's exception on a wrong type.
  void read_json(const nlohmann::json& j);
};

//! The longest a candidate's run may be given (--timeout, a remote worker's options), seconds.
inline constexpr double kMaxTimeoutS = 3600;

}  // namespace tiletune::measure
