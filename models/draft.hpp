// models/draft.hpp — internal to models/: a kernel mapped from an ONNX node, before the
// elementwise nodes after it are fused into its epilogue, and the op text it becomes.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/graph.hpp"

namespace tiletune::models::detail {

//! One index of an op's output, and its size (a size name or expression of sizes).
struct Axis {
  std::string index, size;
};

//! ONNX output dimensions [first, end) are these op axes: several dimensions may be one
//! flattened axis (a matmul's rows), one dimension may split into several (a channel into
//! group and channel-in-group), and dimensions of extent 1 may have none.
struct Group {
  size_t first = 0, end = 0;
  std::vector<Axis> axes;
};

//! A kernel node's op before its epilogue.
struct Draft {
  std::string name;                 //!< op name
  std::vector<std::string> inputs;  //!< input declarations ("I: f32[N, C, H, W] pad 0")
  std::vector<std::string> lines;   //!< statements before the output's
  std::string reduce;               //!< a reduction into the output ("+= A[m, k] * B[k, n]"); empty for none
  std::string window;               //!< ranges the reduction always needs ("r < 3, s < 3": a pooling window)
  std::string where;                //!< ranges it needs when it fills an intermediate ("y < OH, x < OW")
  //! The output element before the epilogue: for a reduction, an expression of its
  //! accumulator (`acc` + index(), with a bias); otherwise of the inputs.
  std::string result;
  std::vector<Group> groups;  //!< the output, against the ONNX output's dimensions
  std::vector<std::pair<std::string, std::int64_t>> sizes;
  std::vector<std::string> nodes;              //!< the ONNX nodes it computes
  std::map<std::string, std::string> tensors;  //!< op tensor -> ONNX value
  std::string value;                           //!< the ONNX value it computes
  std::string out_type = "f32";                //!< the element type of Y (the value's)
  Dims output;                                 //!< that value's shape
  size_t last = 0;                             //!< the last node of the kernel's pattern
  nlohmann::json vendor;                       //!< the layer as a vendor library names it (models/onnx_import.hpp)

  //! "[n, k, y, x]": the output's index.
  std::string index() const;
  //! "N, K, OH, OW": the output's dimensions.
  std::string dims() const;
  //! The op text with `epilogue` (an expression of `@`, the output element) applied.
  std::string text(const std::string& epilogue) const;
};

//! `f` (an expression of @) applied to `x`, parenthesised where it is not a single term.
std::string apply(const std::string& f, const std::string& x);

//! A tensor of shape `shape` broadcast (numpy rules) to `out`, seen through `groups`: its op
//! dimensions and index ("K", "k" for a per-channel bias of NCHW), both empty for one element;
//! nullopt when it does not broadcast whole groups.
//! `included`, when given, gets per group whether the tensor has it.
std::optional<std::pair<std::string, std::string>> fit_operand(const Dims& shape, const Dims& out,
                                                               const std::vector<Group>& groups,
                                                               std::vector<bool>* included = nullptr);

//! Groups for an elementwise op over `out` whose operands have `shapes`: neighbouring
//! dimensions that every operand either has whole or broadcasts share one flattened axis.
std::vector<Group> elementwise_groups(const Dims& out, const std::vector<Dims>& shapes,
                                      std::vector<std::pair<std::string, std::int64_t>>& sizes);

//! The elementwise function of a node as an expression of its inputs' expressions; nullopt if
//! the node is not elementwise (or has a form not mapped).
std::optional<std::string> elementwise_expr(const Node& n, const std::vector<std::string>& args);

//! Whether the node may be elementwise (its arity and type), before its operands are known.
bool is_elementwise(const Node& n);

}  // namespace tiletune::models::detail
