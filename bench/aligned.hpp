// bench/aligned.hpp — the benchmarks' tensors: 64-byte aligned and zeroed, as the measuring
// worker's are aligned (vector loads across two cache lines slow memory-bound kernels: a
// depthwise convolution ran 150 us unaligned, 72-93 us aligned).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace tiletune::bench {

struct Aligned {
  float* p;
  explicit Aligned(std::int64_t n)
      : p(static_cast<float*>(std::aligned_alloc(64, (std::max<std::int64_t>(n, 1) * 4 + 63) / 64 * 64))) {
    if (!p) throw std::bad_alloc();
    std::fill(p, p + n, 0.0f);
  }
  ~Aligned() { std::free(p); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
};

}  // namespace tiletune::bench
