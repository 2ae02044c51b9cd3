// ir/workload.hpp
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/op.hpp"

namespace tiletune::ir {

using Sizes = std::map<std::string, std::int64_t>;

//! A tensor of a bound op with its concrete shape (row-major).
struct Buffer {
  enum class Role { Input, Output, Temp };
  std::string name;
  Role role = Role::Input;
  //! The shape the stages index: the declared one, with adjacent dimensions that every access
  //! reads as one run merged into one (see bind).
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> declared_shape;  //!< as the op declares it (what callers pass)
  std::optional<double> pad;                 //!< what reads outside the shape yield (TensorDecl::pad)
  DType dtype = DType::F32;
  bool constant = false;  //!< the same from call to call (TensorDecl::constant): packed once
  std::int64_t elements() const;
  std::int64_t bytes() const { return elements() * dtype_bytes(dtype); }
};

//! An index variable of a stage with its concrete extent.
struct Axis {
  std::string name;
  std::int64_t extent = 1;
  bool reduce = false;
};

//! One statement of a bound op: computes buffer `output` over `axes`.
struct Stage {
  std::string name;        //!< the tensor it assigns
  int output = -1;         //!< index into Workload::buffers
  std::vector<Axis> axes;  //!< left-hand axes in order, then reduction axes
  Combine combine = Combine::Assign;
  Expr rhs;

  bool is_reduction() const;
  std::int64_t points() const;  //!< product of all extents
};

//! An op bound to sizes: what the tuner tunes and the database keys.
struct Workload {
  OpDef op;
  Sizes sizes;
  std::vector<Buffer> buffers;  //!< inputs, then outputs, then intermediates
  std::vector<Stage> stages;
  std::string canonical_text;  //!< index names normalised, sizes appended
  std::string key;             //!< hash of canonical_text
  std::string source_text;     //!< like canonical_text with the op's own index names, which configs use

  int buffer_index(const std::string& name) const;  //!< -1 if absent
  double flops() const;                             //!< arithmetic operations of one call
  //! Whether index `ix` of `tensor` (dimension `dim`) can fall outside the tensor in stage
  //! `stage`: only a padded input's can (bind refuses the rest).
  bool may_read_outside(int stage, const std::string& tensor, size_t dim, const IndexExpr& ix) const;
  std::int64_t io_bytes() const;  //!< bytes of inputs plus outputs
  //! The compute type of an expression over this workload's tensors (ir::value_type).
  ValueType value_type(const Expr& e) const;
  //! The type argument `i` of `e` computes in when `e` computes in `t` (ir::operand_type).
  DType operand_type(const Expr& e, size_t i, DType t) const;
  //! The type stage `i`'s body value is converted to and its reduction runs in: its output's
  //! compute type (f32 over bf16, i32 over i8 and u8).
  DType accumulator_type(int i) const;
  //! The type stage `i`'s value has when it is fused as an epilogue: its own, weak literals
  //! taking its accumulator's; it is rounded into the stored type from there.
  DType epilogue_type(int i) const;
  //! Whether every value the stages compute has compute type `t` (literals taking it).
  bool computes_in(DType t) const;
  //! Whether every tensor is f32 and every value computed is too: what backends without
  //! typed kernels can run.
  bool f32_only() const;
  std::string sizes_text() const;  //!< "K=512,M=512,N=512"
};

//! A read of a padded input that can fall outside it: the access and the dimension.
struct OutsideRead {
  const Expr* access = nullptr;  //!< into the expressions given to reads_outside
  size_t dim = 0;
};
//! The reads in `bodies` (right sides in stage `stage`'s axis names: its body, a fused
//! epilogue) that can fall outside their tensors (Workload::may_read_outside).
std::vector<OutsideRead> reads_outside(const Workload& w, int stage, std::initializer_list<const Expr*> bodies);

//! The range [lo, hi] an index expression runs over when each variable runs over [0, extent)
//! of its axis in `axes` (exact: coefficients and extents are below 2^31).
std::pair<__int128, __int128> index_range(const IndexExpr& ix, const std::vector<Axis>& axes);

//! Parses "M=512,N=512,K=512" (spaces allowed). Throws Error(InvalidInput) on malformed text,
//! a repeated name or a value outside [1, 2^31).
Sizes parse_sizes(const std::string& text);

//! Binds an op to sizes, checking that every size is given and used, every dimension is
//! positive, index ranges agree and every access stays in bounds. Throws Error(InvalidInput).
//! Two reduction indices of a stage that every access reads as one contiguous run (X[.., h, w]
//! with w over the whole last dimension) become one index over the run, named "h_w", and the
//! tensors they read see the two dimensions as one: a global pool over 7 x 7 sums runs of 49.
//! The key and the texts stay the op's.
Workload bind(const OpDef& op, const Sizes& sizes);

}  // namespace tiletune::ir
