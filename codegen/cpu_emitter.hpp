// codegen/cpu_emitter.hpp — internal to codegen/
#pragma once
#include <string>
#include <vector>

#include "codegen/backend.hpp"
#include "ir/loop_nest.hpp"

namespace tiletune::codegen {

//! The entry point of a workload's kernel under a config: `tt_kernel_` and a hash of both, so
//! that any number of kernels link into one program.
std::string cpu_entry_point(const ir::Workload& w, const std::string& config_json);
//! Its symbols and declarations: ENTRY(tensors, workspace) and ENTRY_threads(..., threads),
//! and ENTRY_prepare(..., threads) where the lowered config packs a constant input.
CallAbi cpu_call_abi(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config_json);
//! Whether a lowered kernel packs a constant input (ir::Buffer::constant), which its prepare
//! entry point then does once instead of every call.
bool cpu_prepares(const ir::Workload& w, const ir::LoopNest& nest);

//! The system headers a generated kernel includes (its prelude's), in order: "cmath", ...
std::vector<std::string> cpu_kernel_headers();

//! C++ source of `extern "C" void ENTRY(float* const* tensors, float* workspace)` (ENTRY from
//! cpu_entry_point, with `tt_kernel` as a weak alias) and of `ENTRY_threads(tensors, workspace,
//! int threads)`, which runs on the caller's thread count, for a lowered workload: tile loops, an
//! unrolled register tile in GCC vector types, a scalar edge tile for tails, and OpenMP for
//! parallel loops.
std::string emit_cpu_kernel(const ir::Workload& w, const ir::LoopNest& nest, const ir::TargetTraits& traits,
                            const std::string& config_json);

}  // namespace tiletune::codegen
