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

}  // namespace tiletune::bench
