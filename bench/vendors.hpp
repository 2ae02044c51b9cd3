// bench/vendors.hpp — the vendor libraries a tuned kernel is compared with
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/workload.hpp"

namespace tiletune::bench {

//! A vendor's implementation of a workload, bound to the same tensors as tiletune's kernel
//! (inputs then outputs, row-major f32). Empty `run` if the vendor has none for this op.
struct VendorCall {
  std::string name;
  std::function<void()> run;
};

//! oneDNN for every library op it covers; `tensors` stay owned by the caller.
VendorCall onednn_call(const ir::Workload& w, const std::vector<float*>& tensors, int threads);
//! OpenBLAS cblas_sgemm for the matmul-shaped ops.
VendorCall openblas_call(const ir::Workload& w, const std::vector<float*>& tensors, int threads);

//! FMA peak of this machine, GFLOP/s: independent AVX-512 (or AVX2) FMA chains on every thread.
double measure_fma_peak_gflops(int threads);
//! A copy of `bytes` between two buffers on `threads` threads: the memory roof of a
//! memory-bound op, timed in the same rounds as the kernels (GB/s = 2 * bytes / time).
std::function<void()> copy_call(std::size_t bytes, int threads);

}  // namespace tiletune::bench
