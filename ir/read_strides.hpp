// ir/read_strides.hpp: how one dimension of a read moves along the SIMD axis, by the
// coefficient of that axis in its index. The rules behind strided_reads and strided_row_reads
// (ir/schedule.hpp), shared with the cost model's features, which apply them to reads it has
// already resolved to axis indices.
#pragma once
#include <cstdint>

namespace tiletune::ir {

//! Whether a dimension whose index has coefficient `c` of the axis makes the read strided
//! along it: any move in an outer dimension, a move other than unit stride in the last.
inline bool strided_dimension(std::int64_t c, bool last) { return last ? c != 0 && c != 1 : c != 0; }

//! Whether the dimension keeps a strided read a row read: no move in an outer dimension, a
//! constant stride of 2 or more (or none) in the last.
inline bool row_dimension(std::int64_t c, bool last) { return last ? c == 0 || c >= 2 : c == 0; }

}  // namespace tiletune::ir
