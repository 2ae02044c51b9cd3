// ir/op.hpp
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/dtype.hpp"

namespace tiletune::ir {

//! A place in op text, 1-based, for error messages.
struct SourceLoc {
  int line = 0;
  int column = 0;
};

//! Integer arithmetic over size symbols, as written in tensor shapes (`H - R + 1`).
struct SizeExpr {
  enum class Kind { Const, Symbol, Add, Sub, Mul, Div };
  Kind kind = Kind::Const;
  std::int64_t value = 0;      //!< Const
  std::string symbol;          //!< Symbol
  std::vector<SizeExpr> args;  //!< two operands for Add..Div
};

//! Every size symbol in `e`, added to `out`.
void collect_size_symbols(const SizeExpr& e, std::set<std::string>& out);

//! An affine index expression: sum(coefficient * index variable) + constant (`2*y + r`), in
//! op text also plus sizes (`t + r - R + 1`: a causal window, `T - 1 - t`: a reversal).
struct IndexExpr {
  struct Term {
    std::string var;
    std::int64_t coeff = 1;
  };
  std::vector<Term> terms;  //!< at most one term per variable, no zero coefficients
  std::int64_t constant = 0;
  //! Size symbols with their coefficients (Term::var names the size), as parsed; binding the
  //! sizes adds them to `constant` (ir::bind), so a workload's indices have none.
  std::vector<Term> sizes;

  //! The variable if this expression is exactly one variable (`k`), else empty. A reference
  //! (into terms, or to one empty string): checking and lowering ask it of every access.
  const std::string& plain_var() const;
  std::int64_t coeff_of(const std::string& var) const;
};

//! A scalar expression on the right of a statement.
struct Expr {
  enum class Kind { Const, Size, Access, Neg, Add, Sub, Mul, Div, Call, Lt, Le, Gt, Ge, Eq, Ne };
  Kind kind = Kind::Const;
  double value = 0;                //!< Const
  std::string name;                //!< tensor (Access), function (Call) or size symbol (Size)
  std::vector<IndexExpr> indices;  //!< Access
  std::vector<Expr> args;          //!< operands
  SourceLoc loc;
};

//! How a statement combines its right side into the left: `=` or a reduction.
enum class Combine { Assign, Add, Mul, Max, Min };

//! An index variable of a statement and the range the checker inferred for it.
struct IndexVar {
  std::string name;
  SizeExpr extent;      //!< the variable runs over [0, extent)
  bool reduce = false;  //!< appears on the right only
};

struct Stmt {
  std::string tensor;                 //!< left-hand tensor
  std::vector<std::string> lhs_vars;  //!< one plain index variable per dimension
  Combine combine = Combine::Assign;
  Expr rhs;
  //! `where r < 3, s < R`: ranges the op gives its reduction indices (windows), instead of
  //! borrowing them from a dimension the index reads alone.
  struct Range {
    std::string var;
    SizeExpr extent;
    SourceLoc loc;
  };
  std::vector<Range> ranges;
  SourceLoc loc;
  std::vector<IndexVar> vars;  //!< filled by the checker: left-hand vars, then reduction vars
};

struct TensorDecl {
  std::string name;
  DType dtype = DType::F32;
  std::vector<SizeExpr> dims;
  //! `X: f32[H, W] pad 0`: an input's reads outside its shape yield this value (zero padding
  //! for convolutions, -inf for max pooling) instead of being refused at binding.
  std::optional<double> pad;
  //! `W: f32[K, N] const`: an input that stays the same from call to call (a model's weights),
  //! so a kernel may pack it once, in its prepare entry point, instead of on every call.
  bool constant = false;
  SourceLoc loc;
};

struct OpDef {
  std::string name;
  std::vector<TensorDecl> inputs;
  std::vector<TensorDecl> outputs;
  std::vector<Stmt> stmts;
  SourceLoc loc;
  std::vector<TensorDecl> intermediates;  //!< filled by the checker, shapes inferred
};

//! The functions the language knows, with their arity.
int builtin_arity(const std::string& name);  //!< -1 if not a builtin

//! The compute type of an expression's value (f32 or i32) and whether it is weak: made of
//! literals only, so that it takes the type of what it is combined with (`x + 1` is i32 for
//! an i32 x, f32 for an f32 x). Accesses have their tensor's compute type; `+ - *`, max, min,
//! abs and select are i32 when all their strong operands are; `/`, comparisons and every
//! other builtin are f32; the casts `f32(x)` and `i32(x)` say the type outright.
struct ValueType {
  DType type = DType::F32;
  bool weak = false;
  //! The type once it meets `context`: a weak integer literal becomes the context's type.
  DType in(DType context) const { return weak && type == DType::I32 ? context : type; }
  DType own() const { return in(DType::F32); }  //!< with no context: literals are f32
};
//! Whether `e` is a cast, `f32(x)` or `i32(x)`: a conversion of its argument's value.
bool is_cast(const Expr& e);
//! The type of an operation on two values: what `a + b` has.
ValueType join(ValueType a, ValueType b);
ValueType value_type(const Expr& e, const std::function<DType(const std::string&)>& tensor_type);
//! The type argument `i` of `e` is computed in when `e` itself computes in `t` (so an
//! argument of another type is converted where it meets `e`): the node's type for arithmetic,
//! abs, max, min, select's values and the other builtins; its own type for a cast's argument
//! and select's condition; the operands' joint type for both sides of a comparison.
DType operand_type(const Expr& e, size_t i, DType t, const std::function<DType(const std::string&)>& tensor_type);

const char* combine_token(Combine c);
//! The value a reduction starts from: 0 for `+=` (and `=`), 1 for `*=`, -inf for `max=`, inf for `min=`.
double combine_identity(Combine c);

//! Calls `visit` with every tensor access in `e`, left to right: for the checks that run for
//! every candidate the search ranks, without building a list.
template <class Visit>
void for_each_access(const Expr& e, Visit&& visit) {
  if (e.kind == Expr::Kind::Access) visit(e);
  for (auto& a : e.args) for_each_access(a, visit);
}
//! Appends every tensor access in `e` to `out`, left to right. Pointers are into `e`.
void collect_accesses(const Expr& e, std::vector<const Expr*>& out);
//! Whether some index of the tensor access `access` moves with `axis`.
bool access_uses(const Expr& access, const std::string& axis);
//! Arithmetic operations in `e` (accesses and constants count none).
int count_ops(const Expr& e);  //!< "=", "+=", "*=", "max=", "min="

//! The size symbols of an op's input and output shapes.
std::set<std::string> size_symbols(const OpDef& op);

std::string to_string(const SizeExpr& e);
std::string to_string(const IndexExpr& e);
std::string to_string(const Expr& e);
//! A float constant as op text writes it: `0.5`, `2.0`, `1e-05`.
std::string number_text(double v);
//! A pad value as op text writes it: `0`, `-inf`, `0.5`.
std::string pad_text(double v);

}  // namespace tiletune::ir
