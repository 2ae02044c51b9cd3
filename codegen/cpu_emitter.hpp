// codegen/cpu_emitter.hpp — internal to codegen/
#pragma once
#include <string>

#include "ir/loop_nest.hpp"

namespace tiletune::codegen {

//! C++ source of `extern "C" void tt_kernel(float* const* tensors, float* workspace)` for a
//! lowered workload: tile loops, an unrolled register tile in GCC vector types, a scalar edge
//! tile for tails, and OpenMP for parallel loops.
std::string emit_cpu_kernel(const ir::Workload& w, const ir::LoopNest& nest, const ir::TargetTraits& traits,
                            const std::string& config_json);

}  // namespace tiletune::codegen
