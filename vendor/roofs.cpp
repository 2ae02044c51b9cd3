// This machine's roofs and the timing of a vendor call, measured in the caller's run.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "vendor/vendor.hpp"

namespace tiletune::vendor {

double median_seconds(const std::function<void()>& run, double min_time) {
  using clock = std::chrono::steady_clock;
  run();  // warm-up: first-touch pages, caches, the thread pool
  std::vector<double> times;
  auto start = clock::now();
  while (times.size() < 5 || std::chrono::duration<double>(clock::now() - start).count() < min_time) {
    auto t0 = clock::now();
    run();
    times.push_back(std::chrono::duration<double>(clock::now() - t0).count());
    if (times.size() >= 10000) break;
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

double fma_peak_gflops(int threads) {
#if defined(__AVX512F__)
  constexpr int kLanes = 16;
#elif defined(__AVX2__)
  constexpr int kLanes = 8;
#else
  constexpr int kLanes = 4;
#endif
  typedef float vf __attribute__((vector_size(kLanes * 4)));
  const long iterations = 10'000'000;
  double best = 0;
  for (int trial = 0; trial < 3; ++trial) {
    auto t0 = std::chrono::steady_clock::now();
    float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      // 12 independent FMA chains: enough to cover the FMA latency on both pipes.
      vf a = vf{} + 0.999f, b = vf{} + 0.001f;
      vf c0 = a, c1 = a, c2 = a, c3 = a, c4 = a, c5 = a, c6 = a, c7 = a, c8 = a, c9 = a, c10 = a, c11 = a;
      for (long i = 0; i < iterations; ++i) {
        c0 = c0 * a + b, c1 = c1 * a + b, c2 = c2 * a + b, c3 = c3 * a + b, c4 = c4 * a + b, c5 = c5 * a + b;
        c6 = c6 * a + b, c7 = c7 * a + b, c8 = c8 * a + b, c9 = c9 * a + b, c10 = c10 * a + b, c11 = c11 * a + b;
        __asm__ volatile(""
                         : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7), "+v"(c8),
                           "+v"(c9), "+v"(c10), "+v"(c11));
      }
      vf sum = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11;
      sink += sum[0];
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * kLanes * 12 * double(iterations) * threads / s / 1e9);
    if (sink == 12345.0f) best += 0;  // keeps the chains alive
  }
  return best;
}

std::function<void()> copy_call(std::size_t bytes, int threads) {
  std::size_t n = bytes / 4;
  auto src = std::make_shared<std::vector<float>>(n, 1.0f);
  auto dst = std::make_shared<std::vector<float>>(n, 0.0f);
  return [src, dst, n, threads] {
    const float* s = src->data();
    float* d = dst->data();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
  };
}

}  // namespace tiletune::vendor
