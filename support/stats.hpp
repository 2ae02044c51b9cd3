// support/stats.hpp — the summary statistics that records, measurements and stores share.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

namespace tiletune {

//! The median (the mean of the middle two for an even count); NaN for none.
inline double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace tiletune
