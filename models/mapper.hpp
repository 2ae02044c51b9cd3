// models/mapper.hpp — internal to models/: the ONNX graph walker that turns nodes into tile
// ops. Its parts: tasks.cpp (the walk, merging, the epilogue fusion), map_windows.cpp
// (convolution and pooling), map_rows.cpp (matmul, softmax, normalisations, reductions,
// elementwise ops).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "models/draft.hpp"

namespace tiletune::models::detail {

//! The consumer of a value that is a graph output.
constexpr size_t kGraphOutput = static_cast<size_t>(-1);

std::int64_t elements(const Dims& d);

class Mapper {
 public:
  explicit Mapper(const Graph& g) : g_(g) {
    for (size_t j = 0; j < g.nodes.size(); ++j)
      for (auto& in : g.nodes[j].inputs)
        if (!in.empty()) consumers_[in].push_back(j);
    for (auto& out : g.outputs) consumers_[out].push_back(kGraphOutput);
  }

  Imported run();

 private:
  const Graph& g_;
  std::map<std::string, std::vector<size_t>> consumers_;  //!< value -> reading nodes (kGraphOutput: an output)
  std::set<size_t> fused_;
  std::set<size_t> pending_;

  //! The shape of a value, if known and not empty: a tensor with a dimension of 0 has no work
  //! to tune (and every extent the mapping divides by is then at least 1).
  const Dims* shape(const std::string& v) const {
    auto it = g_.shapes.find(v);
    if (it == g_.shapes.end()) return nullptr;
    for (auto d : it->second)
      if (d < 1) return nullptr;
    return &it->second;
  }
  const std::vector<float>* constant(const std::string& v) const {
    auto it = g_.values.find(v);
    return it == g_.values.end() ? nullptr : &it->second;
  }
  std::optional<float> scalar(const std::string& v) const {
    const auto* c = constant(v);
    if (!c || c->size() != 1) return std::nullopt;
    return (*c)[0];
  }

  //! The one node that reads `value`, if exactly one does (once) and it is not a graph output.
  std::optional<size_t> only_consumer(const std::string& value) const {
    auto u = consumers_.find(value);
    if (u == consumers_.end() || u->second.size() != 1 || u->second[0] == kGraphOutput) return std::nullopt;
    return u->second[0];
  }
  const Node* only_consumer_of_type(const std::string& value, const std::string& type, size_t& at) const {
    auto j = only_consumer(value);
    if (!j || g_.nodes[*j].type != type) return nullptr;
    at = *j;
    return &g_.nodes[*j];
  }

  //! Reduction axes of a ReduceX node (attribute before opset 18, input after), normalised and
  //! sorted; empty means every axis.
  std::optional<std::vector<std::int64_t>> reduce_axes(const Node& n, size_t rank) const;

  //! One node of an epilogue: the op tensors it adds and its vendor post-op (null: none).
  struct Step {
    size_t node;
    std::vector<std::string> decls;
    std::map<std::string, std::string> tensors;
    nlohmann::json post;
  };

  //! The epilogue as the vendor's post-ops: a chain of nodes is a chain of post-ops; where it
  //! forks (GELU reads x twice) the nodes from the fork to the join are one function, named
  //! by the vendor (gelu_erf, swish, hardswish, square) or left unfused.
  void vendor_post_ops(Draft& d, const std::vector<Step>& steps) const;

  //! A tensor operand of the epilogue as the vendor's primitive sees it: per output group (one
  //! dimension of the vendor's output each), its extent where the tensor has it, else 1.
  //! `included`: per group, whether the tensor has it (fit_operand's answer).
  static std::vector<std::int64_t> vendor_dims(const std::vector<bool>& included, const Draft& d);

  //! Fuses the elementwise subgraph after the draft's kernel into its epilogue (see the top of
  //! the file) and returns the op text. The longest prefix, in graph order, of the elementwise
  //! nodes that read what the kernel computed is taken whose values all stay inside but one.
  std::string fuse_epilogue(Draft& d);

  //! A BatchNormalization of `value` for inference whose parameters are constants: it folds
  //! into the filter (scaled) and a bias (the shift).
  bool foldable_batch_norm(const Node& n, const std::string& value) const;

  //! The ONNX name of a tensor type other than f32 (other than the floating types, with
  //! `halves_too`) that the node reads or writes, "" if none.
  std::string non_float(const Node& n, bool halves_too = false) const;
  //! A value's ONNX element type (TensorProto::DataType; float where it is not known).
  int onnx_type(const std::string& value) const;
  //! The tile-op element type of a value ("f32" where its type is unknown), "" if it has none.
  std::string tile_type(const std::string& value) const;
  //! Why a quantized node (QuantizeLinear, DequantizeLinear, QLinearMatMul, MatMulInteger) is
  //! not mapped: a type with no tile equivalent or a scale per channel; "" if it is.
  std::string unmapped_quantized(const Node& n) const;
  //! A scalar operand of an op: its number where it is a constant, else a one-element input
  //! tensor `name` of its type, read at [0].
  std::string scalar_operand(Draft& d, const std::string& value, const std::string& name) const;

  //! QLinearMatMul and MatMulInteger: the zero points subtracted in i32, the product summed
  //! in i32 and, for QLinearMatMul, requantized by a_scale * b_scale / y_scale.
  std::optional<Draft> quantized_matmul(size_t i, std::string& why);

  std::optional<Draft> map_node(size_t i, std::string& why);

  //! Conv over 1, 2 or 3 spatial dimensions, with pads (explicit or auto), strides, dilations
  //! and groups; a pointwise one is a matmul over the flattened spatial extent.
  std::optional<Draft> conv(size_t i, std::string& why);

  std::optional<Draft> matmul(size_t i, std::string& why);

  //! MaxPool and AveragePool over 1, 2 or 3 spatial dimensions: the window's range is given in
  //! the op (`where r < 3, s < 3`); padding reads -inf for max and 0 for an average that counts
  //! the padding.
  std::optional<Draft> pool(size_t i, std::string& why);

  std::optional<Draft> global_pool(size_t i, std::string& why);

  //! Rows and the trailing `D` elements of [..., dims from `axis` on], as output groups.
  static std::vector<Group> rows_groups(size_t axis, size_t rank) {
    return {{0, axis, {{"n", "N"}}}, {axis, rank, {{"d", "D"}}}};
  }

  //! Softmax and LogSoftmax. Before opset 13 they flatten the input at `axis` (default 1) into
  //! rows; from 13 on they normalise along `axis` (default -1): [A, D, B] with the axis in the
  //! middle, [N, D] when it is the last.
  std::optional<Draft> softmax(size_t i, std::string& why);

  //! BatchNormalization on its own (not after a Conv it folds into), for inference: per channel
  //! of [N, C, ...], (x - mean) * scale / sqrt(var + eps) + bias.
  std::optional<Draft> batch_norm(size_t i, std::string& why);

  //! Normalisation of the rows of [..., D]: (x - mean) / sqrt(var + eps), with scale and shift
  //! when given.
  Draft layer_norm_draft(const Dims& x, size_t axis, float epsilon);

  std::optional<Draft> layer_norm(size_t i, std::string& why);

  //! The layer norm exporters write before opset 17: ReduceMean over trailing axes, Sub,
  //! Pow 2 (or Mul by itself), ReduceMean, Add epsilon, Sqrt, Div. Its scale and shift follow
  //! as Mul and Add, fused as the epilogue.
  std::optional<Draft> layer_norm_pattern(size_t i);

  //! ReduceSum, ReduceMean and ReduceMax over any axes: neighbouring axes alike (both kept or
  //! both reduced) are one flattened axis of the op.
  std::optional<Draft> reduce(size_t i, std::string& why);

  //! An elementwise node not fused into a kernel before it: an op over its output, whose
  //! operands (tensors that broadcast, or scalar constants written as numbers) share groups.
  std::optional<Draft> elementwise(size_t i, std::string& why);
};

}  // namespace tiletune::models::detail
