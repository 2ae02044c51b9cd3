// codegen/gpu_dialect.hpp: what OpenCL C and CUDA C spell differently, for the work-group
// emitter (gpu_emitter.cpp).
#pragma once
#include <map>
#include <string>

#include "codegen/gpu_kernel.hpp"

namespace tiletune::codegen {

//! What differs between the two dialects.
struct Dialect {
  const char* kernel;      //!< before the return type
  const char* global_ptr;  //!< pointer qualifier of tensors
  const char* restrict_kw;
  const char* local_decl;  //!< qualifier of a staged tile
  const char* group_id;
  const char* local_id;
  const char* barrier;
  std::string prelude;
  std::map<std::string, std::string> functions;  //!< language builtin -> dialect function
};

//! The dialect's spellings, preamble (macros and the bf16 / f16 conversions) and builtins.
const Dialect& dialect_of(GpuDialect d);

}  // namespace tiletune::codegen
