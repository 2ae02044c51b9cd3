#include "costmodel/work_split.hpp"

#include <algorithm>

namespace tiletune::costmodel {

double even_share(const ParallelLoops& loops, int threads) {
  threads = std::max(1, threads);
  if (loops.empty()) return 1.0 / threads;
  // inner[k]: the points of the loops inside loop k, their blocks whole.
  boost::container::small_vector<double, 8> inner(loops.size() + 1, 1.0);
  double count = 1;
  for (size_t k = loops.size(); k-- > 0;) {
    inner[k] = inner[k + 1] * static_cast<double>(loops[k].points);
    count *= static_cast<double>(loops[k].trips);
  }
  const double total = inner[0];
  if (count > 1e15) return 1;  // more iterations than any split leaves uneven
  const auto n = static_cast<std::int64_t>(count);
  // The points of the iterations before the i-th: per loop, its whole steps before its digit,
  // times the points of the outer loops' current tiles and of the inner loops' whole blocks.
  boost::container::small_vector<std::int64_t, 8> digit(loops.size());
  auto before = [&](std::int64_t i) {
    if (i >= n) return total;
    for (size_t k = loops.size(); k-- > 0;) {
      digit[k] = i % loops[k].trips;
      i /= loops[k].trips;
    }
    double outer = 1, sum = 0;
    for (size_t k = 0; k < loops.size(); ++k) {
      sum += outer * static_cast<double>(digit[k] * loops[k].step) * inner[k + 1];
      outer *= static_cast<double>(digit[k] == loops[k].trips - 1 ? loops[k].last() : loops[k].step);
    }
    return sum;
  };
  // Thread t runs the t-th of `threads` runs, the first n % threads of them one longer.
  const std::int64_t q = n / threads, r = n % threads;
  double largest = 0, start = 0;
  for (std::int64_t t = 0, end = 0; t < threads; ++t) {
    end += q + (t < r ? 1 : 0);
    const double stop = before(end);
    largest = std::max(largest, stop - start);
    start = stop;
  }
  return total / threads / std::max(1.0, largest);
}

}  // namespace tiletune::costmodel
