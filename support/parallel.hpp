// support/parallel.hpp — splitting a batch of independent items over the cores.
#pragma once
#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace tiletune {

//! Calls fn(begin, end) on contiguous slices of [0, n), one per core (at most 8), on plain
//! threads that end with the call (no pool left spinning beside measurements); with fewer than
//! `serial_below` items, once on the calling thread. `fn` must not throw.
template <typename Fn>
void for_slices(std::size_t n, std::size_t serial_below, Fn fn) {
  const std::size_t threads = n < serial_below ? 1 : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  const std::size_t chunk = (n + threads - 1) / std::max<std::size_t>(threads, 1);
  std::vector<std::thread> pool;
  for (std::size_t k = 1; k < threads && k * chunk < n; ++k)
    pool.emplace_back(fn, k * chunk, std::min(n, (k + 1) * chunk));
  fn(std::size_t{0}, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

}  // namespace tiletune
