// ir/dtype.hpp
#pragma once
#include <cstdint>
#include <string>

namespace tiletune::ir {

//! The element types of tensors. Arithmetic runs in one of two compute types: f32 for the
//! floating types (bf16 and f16 are widened on load and rounded to nearest even on store) and
//! i32 for the integer ones, exactly. So a reduction accumulates in f32 over bf16 or f16
//! inputs and in i32 over i8 or u8 inputs: the accumulation type follows the operands.
enum class DType { F32, BF16, F16, I32, I8, U8 };

//! "f32", "bf16", ...: the name op text writes.
const char* dtype_name(DType t);
//! The type a name denotes; false if the name is not a type.
bool parse_dtype(const std::string& name, DType& out);
//! Bytes one element takes in memory.
int dtype_bytes(DType t);
bool is_integer(DType t);
//! f32 or i32: the type arithmetic on this type's values runs in.
DType compute_type(DType t);
//! The type of a binary operation on values of compute types a and b: i32 only if both are.
DType promote(DType a, DType b);
//! The unit roundoff of storing into this type (2^-24 for f32, 2^-8 for bf16, 0 for integers).
double unit_roundoff(DType t);
//! The range an integer type saturates to when stored into.
double dtype_min(DType t);
double dtype_max(DType t);
//! The C++ type a generated CPU kernel stores the elements in (see the CPU prelude).
const char* cpu_storage_type(DType t);

//! Element i of memory holding type t, as a number; and a number stored there with the
//! kernels' rounding (nearest even; integers saturate, NaN stores 0). For hosts: test data,
//! the measuring worker's inputs and checks, benchmarks.
double load_element(DType t, const void* data, std::int64_t i);
void store_element(DType t, void* data, std::int64_t i, double v);

}  // namespace tiletune::ir
