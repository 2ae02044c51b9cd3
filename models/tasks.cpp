// ONNX nodes to tile ops: each kernel node (Conv, Gemm, MatMul, pooling, Softmax, reductions,
// layer normalisation, elementwise) becomes an op written out in the tile-op language with the
// node's geometry as constants and its tensors' dimensions as sizes. The elementwise nodes
// after it (bias, folded batch norm, activations, residual adds, GELU, a layer norm's scale and
// shift) become its epilogue: any subgraph of elementwise nodes that reads the kernel's output,
// constants and tensors that broadcast over the output's groups, and has one output of its own.
// Tasks with one workload key are merged.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <set>

#include "ir/parse.hpp"
#include "ir/workload.hpp"
#include "models/draft.hpp"
#include "support/error.hpp"

namespace tiletune::models::detail {

namespace {

//! Nodes that only move or reinterpret data (or compute shapes): no kernel of their own.
const std::set<std::string>& layout_ops() {
  static const std::set<std::string> ops = {
      "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten",         "Concat", "Slice", "Shape", "Constant",
      "Cast",    "Identity",  "Dropout", "Gather",    "ConstantOfShape", "Expand", "Split", "Pad"};
  return ops;
}

constexpr size_t kGraphOutput = static_cast<size_t>(-1);
//! Epilogues longer than this stop growing (a chain that squares itself doubles each node).
constexpr size_t kLongestEpilogue = 4000;

//! `c * v + k` as index text (`2*y + r - 1`), as the language prints it.
std::string affine(const std::vector<std::pair<std::int64_t, std::string>>& terms, std::int64_t k) {
  ir::IndexExpr ix;
  for (auto& [c, v] : terms)
    if (c != 0) ix.terms.push_back({v, c});
  ix.constant = k;
  return ir::to_string(ix);
}

//! The output extent of a window along one axis as a size expression of its input extent
//! `in` and window extent `win`: (in + pads - dilation * (win - 1) - 1) / stride + 1.
std::string window_extent(const std::string& in, const std::string& win, std::int64_t pads, std::int64_t dilation,
                          std::int64_t stride) {
  std::int64_t k = pads - 1 + dilation;
  std::string e = in +
                  (k > 0   ? " + " + std::to_string(k)
                   : k < 0 ? " - " + std::to_string(-k)
                           : "") +
                  " - " + (dilation == 1 ? win : std::to_string(dilation) + " * " + win);
  return stride == 1 ? e + " + 1" : "(" + e + ") / " + std::to_string(stride) + " + 1";
}

std::string sizes_text(std::vector<std::pair<std::string, std::int64_t>> sizes) {
  std::sort(sizes.begin(), sizes.end());
  std::string s;
  for (auto& [k, v] : sizes) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

std::int64_t elements(const Dims& d) {
  return std::accumulate(d.begin(), d.end(), std::int64_t(1), std::multiplies<std::int64_t>());
}

//! Names of the spatial dimensions of a 1-, 2- or 3-D window op: output indices, input sizes,
//! window indices and window sizes.
struct Spatial {
  std::vector<std::string> out, in, win, win_size;
};
Spatial spatial_names(size_t rank) {
  if (rank == 1) return {{"x"}, {"W"}, {"s"}, {"S"}};
  if (rank == 2) return {{"y", "x"}, {"H", "W"}, {"r", "s"}, {"R", "S"}};
  return {{"z", "y", "x"}, {"D", "H", "W"}, {"q", "r", "s"}, {"Q", "R", "S"}};
}

std::string join(const std::vector<std::string>& parts, const std::string& sep = ", ") {
  std::string s;
  for (auto& p : parts) s += (s.empty() ? "" : sep) + p;
  return s;
}

//! A window node's pads as [begins..., ends...] over spatial extents `in` and window `k`: as
//! given for NOTSET, none for VALID, and for SAME_UPPER / SAME_LOWER those that make the output
//! ceil(in / stride), the odd one at the end (upper) or the start (lower).
std::optional<std::vector<std::int64_t>> window_pads(const Node& n, const Dims& in, const Dims& k,
                                                     const std::vector<std::int64_t>& st,
                                                     const std::vector<std::int64_t>& dil, std::string& why) {
  const size_t r = in.size();
  std::string mode = n.attrs.count("auto_pad") ? n.attrs.at("auto_pad").s : "NOTSET";
  if (mode == "NOTSET" || mode.empty()) {
    auto p = n.attr_ints("pads", std::vector<std::int64_t>(2 * r, 0));
    if (p.size() != 2 * r) why = "pads do not match the spatial rank";
    return p.size() == 2 * r ? std::optional(p) : std::nullopt;
  }
  if (mode == "VALID") return std::vector<std::int64_t>(2 * r, 0);
  if (mode != "SAME_UPPER" && mode != "SAME_LOWER") {
    why = "auto_pad " + mode + " is not an ONNX padding mode";
    return std::nullopt;
  }
  std::vector<std::int64_t> p(2 * r);
  for (size_t d = 0; d < r; ++d) {
    std::int64_t out = (in[d] + st[d] - 1) / st[d];
    std::int64_t total = std::max<std::int64_t>(0, (out - 1) * st[d] + (k[d] - 1) * dil[d] + 1 - in[d]);
    std::int64_t small = total / 2, big = total - small;
    p[d] = mode == "SAME_UPPER" ? small : big;
    p[d + r] = total - p[d];
  }
  return p;
}

//! The vendor's name for the step an epilogue node is, if it fuses it (oneDNN's post-ops).
//! `operand` is the vendor's shape of a tensor operand (empty for none).
nlohmann::json post_op(const Node& n, const std::vector<std::string>& args, const std::vector<std::int64_t>& operand) {
  auto literal = [&](size_t k, double& v) {
    if (k >= args.size() || args[k].empty()) return false;
    char* end = nullptr;
    v = std::strtod(args[k].c_str(), &end);
    return *end == 0;
  };
  double lo = -INFINITY, hi = INFINITY, v = 0;
  if (n.type == "Relu") return {{"eltwise", "relu"}};
  if (n.type == "Sigmoid") return {{"eltwise", "logistic"}};
  if (n.type == "Tanh") return {{"eltwise", "tanh"}};
  if (n.type == "HardSwish") return {{"eltwise", "hardswish"}};
  if (n.type == "Gelu") return {{"eltwise", "gelu_erf"}};
  if (n.type == "Clip") {
    if (n.attrs.count("min") || n.attrs.count("max")) {
      lo = n.attr_f("min", -INFINITY);
      hi = n.attr_f("max", INFINITY);
    } else {
      literal(1, lo);
      literal(2, hi);
    }
    if (std::isfinite(lo) && std::isfinite(hi)) return {{"eltwise", "clip"}, {"alpha", lo}, {"beta", hi}};
    return nullptr;
  }
  if ((n.type == "Add" || n.type == "Mul") && !operand.empty())
    return {{"binary", n.type == "Add" ? "add" : "mul"}, {"dims", operand}};
  if (!operand.empty()) return nullptr;
  if ((n.type == "Mul" || n.type == "Div") && (literal(1, v) || literal(0, v)))
    return {{"eltwise", "linear"}, {"alpha", n.type == "Mul" ? v : 1.0 / v}, {"beta", 0.0}};
  if ((n.type == "Add" || n.type == "Sub") && literal(1, v))
    return {{"eltwise", "linear"}, {"alpha", 1.0}, {"beta", n.type == "Add" ? v : -v}};
  return nullptr;
}

class Mapper {
 public:
  explicit Mapper(const Graph& g) : g_(g) {
    for (size_t j = 0; j < g.nodes.size(); ++j)
      for (auto& in : g.nodes[j].inputs)
        if (!in.empty()) consumers_[in].push_back(j);
    for (auto& out : g.outputs) consumers_[out].push_back(kGraphOutput);
  }

  Imported run() {
    Imported m;
    m.model = g_.name;
    std::map<std::string, size_t> by_key;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (fused_.count(i)) continue;
      if (layout_ops().count(n.type)) {
        m.skipped.push_back({n.name, n.type, "layout only: no kernel", true});
        continue;
      }
      std::string why;
      std::optional<Draft> d;
      pending_.clear();  // nodes the draft fuses: fused only if it maps and checks
      try {
        d = map_node(i, why);
      } catch (const Error& e) {
        why = e.what();
      }
      if (!d) {
        m.skipped.push_back({n.name, n.type, why.empty() ? "no mapping for ONNX op " + n.type : why, false});
        continue;
      }
      std::string text = fuse_epilogue(*d);
      std::string bind_error;
      ir::Workload w;
      try {
        w = ir::bind(ir::parse_op(text), ir::parse_sizes(sizes_text(d->sizes)));
      } catch (const Error& e) {
        bind_error = e.what();
      }
      if (bind_error.empty() && elements(d->output) != w.buffers[w.buffer_index(w.op.outputs[0].name)].elements())
        bind_error = "its tile op's output does not match the inferred shape";
      if (!bind_error.empty()) {
        // A mapping that does not check is a bug here, reported rather than dropped.
        m.skipped.push_back({n.name, n.type, "internal: " + bind_error + "\n" + text, false});
        continue;
      }
      fused_.insert(pending_.begin(), pending_.end());
      auto [it, added] = by_key.emplace(w.key, m.tasks.size());
      if (added)
        m.tasks.push_back({text, sizes_text(d->sizes), w.key, 0, {}, {}, d->vendor.is_null() ? "" : d->vendor.dump()});
      Task& t = m.tasks[it->second];
      ++t.weight;
      t.nodes.push_back(d->nodes);
      t.tensors.push_back(d->tensors);
    }
    return m;
  }

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
  std::optional<std::vector<std::int64_t>> reduce_axes(const Node& n, size_t rank) const {
    std::vector<std::int64_t> axes = n.attr_ints("axes", {});
    if (axes.empty() && n.inputs.size() > 1 && !n.inputs[1].empty()) {
      const auto* c = constant(n.inputs[1]);
      if (!c) return std::nullopt;
      for (float a : *c) axes.push_back(static_cast<std::int64_t>(a));
    }
    for (auto& a : axes) {
      if (a < 0) a += static_cast<std::int64_t>(rank);
      if (a < 0 || a >= static_cast<std::int64_t>(rank)) return std::nullopt;
    }
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    if (axes.empty()) {
      if (n.attr_i("noop_with_empty_axes", 0)) return std::nullopt;
      for (size_t a = 0; a < rank; ++a) axes.push_back(static_cast<std::int64_t>(a));
    }
    return axes;
  }

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
  void vendor_post_ops(Draft& d, const std::vector<Step>& steps) const {
    nlohmann::json post = nlohmann::json::array(), unfused = nlohmann::json::array();
    std::map<std::string, std::vector<size_t>> readers;  // value -> the steps that read it
    for (size_t k = 0; k < steps.size(); ++k)
      for (auto& in :
           std::set<std::string>(g_.nodes[steps[k].node].inputs.begin(), g_.nodes[steps[k].node].inputs.end()))
        readers[in].push_back(k);
    auto last_reader = [&](const std::string& v) { return readers.count(v) ? readers[v].back() : 0; };
    std::string prev = d.value;  // the value the chain carries
    for (size_t k = 0; k < steps.size();) {
      const Node& n = g_.nodes[steps[k].node];
      if (readers[prev].size() < 2 && std::count(n.inputs.begin(), n.inputs.end(), prev) < 2) {
        (steps[k].post.is_null() ? unfused : post)
            .push_back(steps[k].post.is_null() ? nlohmann::json(n.type) : steps[k].post);
        prev = n.outputs[0];
        ++k;
        continue;
      }
      // `prev` forks: the segment ends where every value made inside it is read only inside it.
      size_t end = std::max(k, last_reader(prev));
      for (size_t j = k; j < end; ++j) end = std::max(end, last_reader(g_.nodes[steps[j].node].outputs[0]));
      std::multiset<std::string> types;
      for (size_t j = k; j <= end; ++j) types.insert(g_.nodes[steps[j].node].type);
      using T = std::multiset<std::string>;
      std::string fn = types == T{"Div", "Erf", "Add", "Mul", "Mul"} || types == T{"Mul", "Erf", "Add", "Mul", "Mul"}
                           ? "gelu_erf"
                       : types == T{"Sigmoid", "Mul"}     ? "swish"
                       : types == T{"HardSigmoid", "Mul"} ? "hardswish"
                       : types == T{"Mul"}                ? "square"
                                                          : "";
      // x * (1 + erf(x / sqrt 2)) without the half is twice GELU.
      bool twice_gelu = types == T{"Div", "Erf", "Add", "Mul"} || types == T{"Mul", "Erf", "Add", "Mul"};
      if (twice_gelu) fn = "gelu_erf";
      if (fn.empty())
        for (size_t j = k; j <= end; ++j) unfused.push_back(g_.nodes[steps[j].node].type);
      else
        post.push_back({{"eltwise", fn}});
      if (twice_gelu) post.push_back({{"eltwise", "linear"}, {"alpha", 2.0}, {"beta", 0.0}});
      prev = g_.nodes[steps[end].node].outputs[0];
      k = end + 1;
    }
    d.vendor["post_ops"] = post;
    d.vendor["unfused"] = unfused;
  }

  //! A tensor operand of the epilogue as the vendor's primitive sees it: per output group (one
  //! dimension of the vendor's output each), its extent where the tensor has it, else 1.
  static std::vector<std::int64_t> vendor_dims(const Dims& shape, const Draft& d) {
    std::vector<bool> included;
    fit_operand(shape, d.output, d.groups, &included);
    std::vector<std::int64_t> dims;
    for (size_t k = 0; k < d.groups.size() && k < included.size(); ++k) {
      const Group& g = d.groups[k];
      if (g.axes.empty()) continue;
      std::int64_t extent = 1;
      for (size_t a = g.first; a < g.end; ++a) extent *= d.output[a];
      dims.push_back(included[k] ? extent : 1);
    }
    return dims;
  }

  //! Fuses the elementwise subgraph after the draft's kernel into its epilogue (see the top of
  //! the file) and returns the op text. The longest prefix, in graph order, of the elementwise
  //! nodes that read what the kernel computed is taken whose values all stay inside but one.
  std::string fuse_epilogue(Draft& d) {
    std::map<std::string, std::string> expr{{d.value, "@"}};
    std::set<size_t> region;
    std::vector<std::string> produced{d.value};
    std::vector<Step> steps;
    std::map<std::string, std::string> names;  // ONNX value -> its op tensor in the epilogue
    std::set<std::string> taken;
    for (auto& [t, v] : d.tensors) taken.insert(t);
    size_t best = 0;
    std::string best_value = d.value;
    for (size_t j = d.last + 1; j < g_.nodes.size(); ++j) {
      const Node& n = g_.nodes[j];
      if (fused_.count(j) || pending_.count(j) || !is_elementwise(n) || !non_float(n).empty()) continue;
      if (std::none_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& in) { return expr.count(in) > 0; }))
        continue;
      std::vector<std::string> args;
      Step step{j, {}, {}, nullptr};
      bool fits = true;
      std::vector<std::int64_t> operand;  // the tensor operand as the vendor sees it
      for (size_t k = 0; k < n.inputs.size() && fits; ++k) {
        const std::string& in = n.inputs[k];
        if (in.empty()) {
          args.push_back("");
        } else if (expr.count(in)) {
          args.push_back(expr[in]);
        } else if (auto s = scalar(in)) {
          args.push_back(ir::number_text(*s));
        } else if (const Dims* s = shape(in); s && names.count(in)) {
          args.push_back(names[in]);
          operand = vendor_dims(*s, d);
        } else if (auto f = s ? fit_operand(*s, d.output, d.groups) : std::nullopt) {
          operand = vendor_dims(*s, d);
          bool is_const = g_.constants.count(in) > 0;
          std::string base = !is_const ? "res" : n.type == "Add" || n.type == "Sub" ? "bias" : "scale";
          std::string name = base;
          for (int suffix = 2; taken.count(name); ++suffix) name = base + std::to_string(suffix);
          taken.insert(name);
          names[in] = name + "[" + (f->second.empty() ? "0" : f->second) + "]";
          step.decls.push_back(name + ": f32[" + (f->first.empty() ? "1" : f->first) + "]");
          step.tensors[name] = in;
          args.push_back(names[in]);
        } else {
          fits = false;
        }
      }
      if (!fits) continue;
      auto e = elementwise_expr(n, args);
      if (!e || e->size() > kLongestEpilogue) continue;
      step.post = post_op(n, args, operand);
      expr[n.outputs[0]] = *e;
      region.insert(j);
      produced.push_back(n.outputs[0]);
      steps.push_back(std::move(step));
      // The values read outside the region: exactly one (the last) for the prefix to fuse.
      std::vector<std::string> escaping;
      for (auto& v : produced) {
        auto c = consumers_.find(v);
        if (c != consumers_.end() &&
            std::any_of(c->second.begin(), c->second.end(), [&](size_t r) { return !region.count(r); }))
          escaping.push_back(v);
      }
      if (escaping.size() == 1 && escaping[0] == n.outputs[0]) {
        best = steps.size();
        best_value = n.outputs[0];
      }
    }
    std::string epilogue = expr[best_value];
    for (size_t s = 0; s < best; ++s) {
      const Step& step = steps[s];
      pending_.insert(step.node);
      d.nodes.push_back(g_.nodes[step.node].name);
      d.inputs.insert(d.inputs.end(), step.decls.begin(), step.decls.end());
      d.tensors.insert(step.tensors.begin(), step.tensors.end());
    }
    if (!d.vendor.is_null()) vendor_post_ops(d, std::vector<Step>(steps.begin(), steps.begin() + best));
    d.tensors["Y"] = best_value;
    if (const Dims* s = shape(best_value)) d.output = *s;
    return d.text(epilogue);
  }

  //! A BatchNormalization of `value` for inference whose parameters are constants: it folds
  //! into the filter (scaled) and a bias (the shift).
  bool foldable_batch_norm(const Node& n, const std::string& value) const {
    if (n.type != "BatchNormalization" || n.inputs.size() != 5 || n.inputs[0] != value ||
        n.attr_i("training_mode", 0) != 0)
      return false;
    for (size_t k = 1; k < 5; ++k)
      if (!g_.constants.count(n.inputs[k])) return false;
    for (size_t k = 1; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty() && consumers_.count(n.outputs[k])) return false;  // running statistics in use
    return true;
  }

  //! The ONNX name of a tensor type other than f32 that the node reads or writes, "" if none.
  std::string non_float(const Node& n) const {
    static const char* names[] = {"undefined", "float",  "uint8",     "int8",       "uint16",  "int16",
                                  "int32",     "int64",  "string",    "bool",       "float16", "double",
                                  "uint32",    "uint64", "complex64", "complex128", "bfloat16"};
    auto type_of = [&](const std::string& v) {
      auto t = g_.types.find(v);
      return t == g_.types.end() ? 1 : t->second;
    };
    for (auto* list : {&n.inputs, &n.outputs})
      for (auto& v : *list) {
        int t = v.empty() ? 1 : type_of(v);
        // Integer constants that are attributes in disguise are allowed: the axes of a
        // reduction, and scalars (an exponent) that the op text writes as numbers.
        bool int_constant = g_.constants.count(v) && (t == 6 || t == 7);
        if (t == 1 || (int_constant && (scalar(v) || n.type.rfind("Reduce", 0) == 0))) continue;
        return t >= 0 && t < 17 ? names[t] : "type " + std::to_string(t);
      }
    return "";
  }

  std::optional<Draft> map_node(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    if (auto t = non_float(n); !t.empty()) {
      why = "tensors of type " + t + " are not mapped: tiletune's ops are f32";
      return std::nullopt;
    }
    std::optional<Draft> d;
    if (n.type == "Conv") d = conv(i, why);
    if (n.type == "Gemm" || n.type == "MatMul") d = matmul(i, why);
    if (n.type == "MaxPool" || n.type == "AveragePool") d = pool(i, why);
    if (n.type == "GlobalAveragePool" || n.type == "GlobalMaxPool") d = global_pool(i, why);
    if (n.type == "Softmax" || n.type == "LogSoftmax") d = softmax(i, why);
    if (n.type == "BatchNormalization") d = batch_norm(i, why);
    if (n.type == "LayerNormalization") d = layer_norm(i, why);
    if (n.type == "ReduceMean") d = layer_norm_pattern(i);
    if (!d && n.type.rfind("Reduce", 0) == 0) d = reduce(i, why);
    if (is_elementwise(n)) d = elementwise(i, why);
    if (d) {
      d->nodes.insert(d->nodes.begin(), n.name);
      if (d->value.empty()) d->value = n.outputs[0];
      if (d->last == 0) d->last = i;
      if (d->output.empty() && shape(d->value)) d->output = *shape(d->value);
      if (d->output.empty()) {
        why = "output shape unknown";
        return std::nullopt;
      }
    }
    return d;
  }

  //! Conv over 1, 2 or 3 spatial dimensions, with pads (explicit or auto), strides, dilations
  //! and groups; a pointwise one is a matmul over the flattened spatial extent.
  std::optional<Draft> conv(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims *x = shape(n.inputs[0]), *f = shape(n.inputs[1]), *y = shape(n.outputs[0]);
    if (!x || !f || !y || x->size() < 3 || x->size() > 5 || f->size() != x->size()) {
      why = "only 1-, 2- and 3-D convolutions with known shapes are mapped";
      return std::nullopt;
    }
    const size_t r = x->size() - 2;
    const Spatial sp = spatial_names(r);
    Dims in(x->begin() + 2, x->end()), k(f->begin() + 2, f->end());
    std::int64_t N = (*x)[0], C = (*x)[1], K = (*f)[0];
    std::int64_t G = n.attr_i("group", 1);
    auto st = n.attr_ints("strides", std::vector<std::int64_t>(r, 1)),
         dil = n.attr_ints("dilations", std::vector<std::int64_t>(r, 1));
    if (st.size() != r || dil.size() != r || G < 1 || C % G || K % G || (*f)[1] * G != C) {
      why = "conv attributes out of the mapped forms";
      return std::nullopt;
    }
    auto p = window_pads(n, in, k, st, dil, why);
    if (!p) return std::nullopt;
    Draft d;
    d.value = n.outputs[0];
    d.last = i;
    d.output = *y;
    std::string bias;
    bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (has_bias) bias = n.inputs[2];
    // BatchNormalization for inference folds into the filter and a bias: same kernel.
    if (auto next = only_consumer(d.value); next && foldable_batch_norm(g_.nodes[*next], d.value)) {
      pending_.insert(*next);
      d.nodes.push_back(g_.nodes[*next].name);
      d.value = g_.nodes[*next].outputs[0];
      d.last = *next;
      bias = "folded:" + g_.nodes[*next].name;  // the shift the folding computes (with the conv's bias)
      has_bias = true;
    }
    bool pads = std::any_of(p->begin(), p->end(), [](std::int64_t v) { return v != 0; });
    bool unit = std::all_of(k.begin(), k.end(), [](std::int64_t v) { return v == 1; }) &&
                std::all_of(st.begin(), st.end(), [](std::int64_t v) { return v == 1; });
    d.vendor = {{"primitive", "convolution"},
                {"src", *x},
                {"weights", *f},
                {"groups", G},
                {"strides", st},
                {"dilations", dil},
                {"pads_begin", std::vector<std::int64_t>(p->begin(), p->begin() + r)},
                {"pads_end", std::vector<std::int64_t>(p->begin() + r, p->end())},
                {"bias", has_bias}};
    d.sizes = {{"N", N}};
    for (size_t a = 0; a < r; ++a) d.sizes.push_back({sp.in[a], in[a]});
    std::string bias_ix;
    if (unit && !pads && G == 1) {
      // A pointwise convolution is a matmul over the flattened extent (the same memory as NCHW).
      d.name = r == 2 ? "onnx_conv1x1" : "onnx_conv_pointwise";
      d.sizes.push_back({"C", C});
      d.sizes.push_back({"K", K});
      std::string plane = join(sp.in, " * ");
      d.inputs = {"I: f32[N, C, " + plane + "]", "F: f32[K, C]"};
      d.groups = {{0, 1, {{"n", "N"}}}, {1, 2, {{"k", "K"}}}, {2, 2 + r, {{"p", plane}}}};
      d.reduce = "+= I[n, c, p] * F[k, c]";
      bias_ix = "[k]";
      if (has_bias) d.inputs.push_back("bias: f32[K]");
    } else {
      // Channel g * CG + c is [g, c] of the same memory seen with a group dimension.
      bool grouped = G > 1;
      std::string gd = grouped ? "G, " : "", gv = grouped ? "g, " : "", cg = grouped ? "CG" : "C",
                  kg = grouped ? "KG" : "K";
      d.name = !grouped ? "onnx_conv" : C == G ? "onnx_depthwise_conv" : "onnx_grouped_conv";
      if (r != 2) d.name += std::to_string(r) + "d";
      if (grouped) {
        d.sizes.insert(d.sizes.end(), {{"CG", C / G}, {"G", G}, {"KG", K / G}});
        d.groups = {{0, 1, {{"n", "N"}}}, {1, 2, {{"g", "G"}, {"k", "KG"}}}};
      } else {
        d.sizes.insert(d.sizes.end(), {{"C", C}, {"K", K}});
        d.groups = {{0, 1, {{"n", "N"}}}, {1, 2, {{"k", "K"}}}};
      }
      std::vector<std::string> in_ix, ranges;
      for (size_t a = 0; a < r; ++a) {
        d.sizes.push_back({sp.win_size[a], k[a]});
        std::string extent = window_extent(sp.in[a], sp.win_size[a], (*p)[a] + (*p)[a + r], dil[a], st[a]);
        d.groups.push_back({2 + a, 3 + a, {{sp.out[a], extent}}});
        in_ix.push_back(affine({{st[a], sp.out[a]}, {dil[a], sp.win[a]}}, -(*p)[a]));
        ranges.push_back(sp.out[a] + " < " + extent);
      }
      d.inputs = {"I: f32[N, " + gd + cg + ", " + join(sp.in) + "]" + std::string(pads ? " pad 0" : ""),
                  "F: f32[" + gd + kg + ", " + cg + ", " + join(sp.win_size) + "]"};
      if (has_bias) d.inputs.push_back("bias: f32[" + gd + kg + "]");
      d.reduce = "+= I[n, " + gv + "c, " + join(in_ix) + "] * F[" + gv + "k, c, " + join(sp.win) + "]";
      d.where = join(ranges);
      bias_ix = "[" + gv + "k]";
    }
    d.result = "acc" + d.index() + (has_bias ? " + bias" + bias_ix : "");
    d.tensors = {{"I", n.inputs[0]}, {"F", n.inputs[1]}};
    if (has_bias) d.tensors["bias"] = bias;
    return d;
  }

  std::optional<Draft> matmul(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims *a = shape(n.inputs[0]), *b = shape(n.inputs[1]), *y = shape(n.outputs[0]);
    if (!a || !b || !y) {
      why = "operand shapes unknown";
      return std::nullopt;
    }
    bool gemm = n.type == "Gemm";
    bool ta = gemm && n.attr_i("transA", 0), tb = gemm && n.attr_i("transB", 0);
    float alpha = gemm ? n.attr_f("alpha", 1.0f) : 1.0f, beta = gemm ? n.attr_f("beta", 1.0f) : 1.0f;
    Draft d;
    std::int64_t M, K, N, G = 1;
    bool batched = false;
    size_t rank = y->size();
    if (a->size() == 2 && b->size() == 2) {
      M = ta ? (*a)[1] : (*a)[0];
      K = ta ? (*a)[0] : (*a)[1];
      N = tb ? (*b)[0] : (*b)[1];
      d.groups = {{0, 1, {{"m", "M"}}}, {1, 2, {{"n", "N"}}}};
    } else if (a->size() >= 2 && b->size() == 2 && !gemm) {
      // [..., M, K] x [K, N]: the leading dimensions of A are rows too (row-major memory).
      M = elements(*a) / a->back();
      K = a->back();
      N = (*b)[1];
      d.groups = {{0, rank - 1, {{"m", "M"}}}, {rank - 1, rank, {{"n", "N"}}}};
    } else if (a->size() == b->size() && a->size() >= 3 && !gemm && std::equal(a->begin(), a->end() - 2, b->begin())) {
      batched = true;
      G = elements(*a) / ((*a)[a->size() - 2] * a->back());
      M = (*a)[a->size() - 2];
      K = a->back();
      N = b->back();
      d.groups = {{0, rank - 2, {{"g", "G"}}}, {rank - 2, rank - 1, {{"m", "M"}}}, {rank - 1, rank, {{"n", "N"}}}};
    } else {
      why = "MatMul with broadcast batch dimensions is not mapped";
      return std::nullopt;
    }
    std::string gv = batched ? "g, " : "", gd = batched ? "G, " : "";
    d.name = gemm ? "onnx_gemm" : batched ? "onnx_batch_matmul" : "onnx_matmul";
    d.inputs = {"A: f32[" + gd + (ta ? "K, M" : "M, K") + "]", "B: f32[" + gd + (tb ? "N, K" : "K, N") + "]"};
    d.reduce = "+= A[" + gv + (ta ? "k, m" : "m, k") + "] * B[" + gv + (tb ? "n, k" : "k, n") + "]";
    d.result = (alpha != 1.0f ? ir::number_text(alpha) + " * " : "") + "acc" + d.index();
    bool has_c = gemm && n.inputs.size() > 2 && !n.inputs[2].empty() && beta != 0.0f;
    if (has_c) {
      const Dims* c = shape(n.inputs[2]);
      if (!c) {
        why = "Gemm's C has no known shape";
        return std::nullopt;
      }
      std::string c_ix;
      if (elements(*c) == N && !c->empty() && c->back() == N) {
        d.inputs.push_back("bias: f32[N]");
        c_ix = "bias[n]";
      } else if (c->size() == 2 && (*c)[0] == M && (*c)[1] == N) {
        d.inputs.push_back("bias: f32[M, N]");
        c_ix = "bias[m, n]";
      } else if (elements(*c) == 1) {
        d.inputs.push_back("bias: f32[1]");
        c_ix = "bias[0]";
      } else {
        why = "Gemm's C broadcast from shape other than [N], [M, N] or a scalar";
        return std::nullopt;
      }
      d.result += " + " + (beta != 1.0f ? ir::number_text(beta) + " * " : "") + c_ix;
      d.tensors["bias"] = n.inputs[2];
    }
    d.sizes = {{"K", K}, {"M", M}, {"N", N}};
    if (batched) d.sizes.push_back({"G", G});
    d.tensors["A"] = n.inputs[0];
    d.tensors["B"] = n.inputs[1];
    nlohmann::json av = batched ? nlohmann::json{G, M, K} : nlohmann::json{M, K},
                   bv = batched ? nlohmann::json{G, K, N} : nlohmann::json{K, N};
    d.vendor = {{"primitive", "matmul"},
                {"a", av},
                {"b", bv},
                {"trans_a", ta},
                {"trans_b", tb},
                {"alpha", alpha},
                {"bias", has_c && elements(*shape(n.inputs[2])) == N}};
    return d;
  }

  //! MaxPool and AveragePool over 1, 2 or 3 spatial dimensions: the window's range is given in
  //! the op (`where r < 3, s < 3`); padding reads -inf for max and 0 for an average that counts
  //! the padding.
  std::optional<Draft> pool(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims *x = shape(n.inputs[0]), *y = shape(n.outputs[0]);
    auto k = n.attr_ints("kernel_shape", {});
    if (!x || !y || x->size() < 3 || x->size() > 5 || k.size() != x->size() - 2) {
      why = "only 1-, 2- and 3-D pooling with known shapes is mapped";
      return std::nullopt;
    }
    const size_t r = k.size();
    const Spatial sp = spatial_names(r);
    Dims in(x->begin() + 2, x->end());
    auto st = n.attr_ints("strides", std::vector<std::int64_t>(r, 1)),
         dil = n.attr_ints("dilations", std::vector<std::int64_t>(r, 1));
    if (st.size() != r || dil.size() != r) {
      why = "pooling attributes out of the mapped forms";
      return std::nullopt;
    }
    auto p = window_pads(n, in, k, st, dil, why);
    if (!p) return std::nullopt;
    bool pads = std::any_of(p->begin(), p->end(), [](std::int64_t v) { return v != 0; });
    bool max = n.type == "MaxPool";
    if (!max && pads && n.attr_i("count_include_pad", 0) == 0) {
      why =
          "average pooling over padding that divides by the inside points only (count_include_pad 0) has no "
          "tile-op form yet";
      return std::nullopt;
    }
    if (n.outputs.size() > 1 && !n.outputs[1].empty()) {
      why = "MaxPool's Indices output is not mapped";
      return std::nullopt;
    }
    // ceil_mode rounds the output extent up: the last window may reach past the padding, which
    // reads as padding; an average would then divide by fewer points, which is not mapped.
    bool ceil = n.attr_i("ceil_mode", 0) != 0;
    std::vector<std::string> extents, in_ix, ranges;
    for (size_t a = 0; a < r; ++a) {
      std::int64_t span = in[a] + (*p)[a] + (*p)[a + r] - dil[a] * (k[a] - 1) - 1;
      std::int64_t floor_out = span / st[a] + 1, ceil_out = (span + st[a] - 1) / st[a] + 1;
      if (ceil && (ceil_out - 1) * st[a] >= in[a] + (*p)[a]) --ceil_out;  // ONNX: no window starts in the end pad
      if (ceil && ceil_out != floor_out && !max) {
        why = "AveragePool with ceil_mode windows that reach past the padding is not mapped";
        return std::nullopt;
      }
      std::string extent =
          window_extent(sp.in[a], std::to_string(k[a]),
                        (*p)[a] + (*p)[a + r] + (ceil ? (ceil_out - floor_out) * st[a] : 0), dil[a], st[a]);
      extents.push_back(extent);
      in_ix.push_back(affine({{st[a], sp.out[a]}, {dil[a], sp.win[a]}}, -(*p)[a]));
      ranges.push_back(sp.out[a] + " < " + extent);
    }
    bool reads_outside = pads || ceil;
    Draft d;
    d.output = *y;
    d.name = max ? "onnx_max_pool" : "onnx_avg_pool";
    if (r != 2) d.name += std::to_string(r) + "d";
    d.inputs = {"X: f32[N, C, " + join(sp.in) + "]" + std::string(reads_outside ? (max ? " pad -inf" : " pad 0") : "")};
    d.groups = {{0, 1, {{"n", "N"}}}, {1, 2, {{"c", "C"}}}};
    std::int64_t window = 1;
    std::vector<std::string> window_ranges;
    for (size_t a = 0; a < r; ++a) {
      d.groups.push_back({2 + a, 3 + a, {{sp.out[a], extents[a]}}});
      window *= k[a];
      window_ranges.push_back(sp.win[a] + " < " + std::to_string(k[a]));
    }
    d.reduce = std::string(max ? "max= " : "+= ") + "X[n, c, " + join(in_ix) + "]" +
               (max ? "" : " * " + ir::number_text(1.0 / double(window)));
    d.window = join(window_ranges);
    d.where = join(ranges);
    d.result = "acc" + d.index();
    d.sizes = {{"C", (*x)[1]}, {"N", (*x)[0]}};
    for (size_t a = 0; a < r; ++a) d.sizes.push_back({sp.in[a], in[a]});
    d.tensors = {{"X", n.inputs[0]}};
    if (!ceil)
      d.vendor = {{"primitive", "pooling"},
                  {"algorithm", max ? "max" : "avg_include_padding"},
                  {"src", *x},
                  {"kernel", k},
                  {"strides", st},
                  {"dilations", dil},
                  {"pads_begin", std::vector<std::int64_t>(p->begin(), p->begin() + r)},
                  {"pads_end", std::vector<std::int64_t>(p->begin() + r, p->end())}};
    return d;
  }

  std::optional<Draft> global_pool(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims *x = shape(n.inputs[0]), *y = shape(n.outputs[0]);
    if (!x || !y || x->size() != 4) {
      why = "only NCHW global pooling with known shapes is mapped";
      return std::nullopt;
    }
    bool max = n.type == "GlobalMaxPool";
    Draft d;
    d.output = *y;
    d.name = max ? "onnx_global_max_pool" : "onnx_global_avg_pool";
    d.inputs = {"X: f32[N, C, H, W]"};
    d.groups = {{0, 1, {{"n", "N"}}}, {1, 2, {{"c", "C"}}}, {2, 3, {}}, {3, 4, {}}};  // [N, C, 1, 1] is [N, C]
    if (max) {
      d.reduce = "max= X[n, c, h, w]";
      d.result = "acc[n, c]";
    } else {
      d.lines = {"sum[n, c] += X[n, c, h, w]"};
      d.result = "sum[n, c] / (H * W)";
    }
    d.sizes = {{"C", (*x)[1]}, {"H", (*x)[2]}, {"N", (*x)[0]}, {"W", (*x)[3]}};
    d.tensors = {{"X", n.inputs[0]}};
    d.vendor = {{"primitive", "pooling"},
                {"algorithm", max ? "max" : "avg_include_padding"},
                {"src", *x},
                {"kernel", {(*x)[2], (*x)[3]}},
                {"strides", {1, 1}},
                {"dilations", {1, 1}},
                {"pads_begin", {0, 0}},
                {"pads_end", {0, 0}}};
    return d;
  }

  //! Rows and the trailing `D` elements of [..., dims from `axis` on], as output groups.
  static std::vector<Group> rows_groups(size_t axis, size_t rank) {
    return {{0, axis, {{"n", "N"}}}, {axis, rank, {{"d", "D"}}}};
  }

  //! Softmax and LogSoftmax. Before opset 13 they flatten the input at `axis` (default 1) into
  //! rows; from 13 on they normalise along `axis` (default -1): [A, D, B] with the axis in the
  //! middle, [N, D] when it is the last.
  std::optional<Draft> softmax(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims* x = shape(n.inputs[0]);
    if (!x || x->empty()) {
      why = "input shape unknown";
      return std::nullopt;
    }
    bool flattens = g_.opset < 13, log = n.type == "LogSoftmax";
    std::int64_t rank = static_cast<std::int64_t>(x->size());
    std::int64_t axis = n.attr_i("axis", flattens ? 1 : -1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) {
      why = "axis out of range";
      return std::nullopt;
    }
    size_t a = static_cast<size_t>(axis), r = static_cast<size_t>(rank);
    Draft d;
    d.output = *x;
    d.name = log ? "onnx_log_softmax" : "onnx_softmax";
    d.tensors = {{"X", n.inputs[0]}};
    if (flattens || a == r - 1) {
      std::int64_t D = 1;
      for (size_t k = a; k < r; ++k) D *= (*x)[k];
      d.inputs = {"X: f32[N, D]"};
      d.lines = {"mx[n] max= X[n, d]", "e[n, d] = exp(X[n, d] - mx[n])", "s[n] += e[n, d]"};
      d.result = log ? "X[n, d] - mx[n] - log(s[n])" : "e[n, d] / s[n]";
      d.groups = rows_groups(a, r);
      d.sizes = {{"D", D}, {"N", elements(*x) / D}};
      if (!log) d.vendor = {{"primitive", "softmax"}, {"src", {elements(*x) / D, D}}};
      return d;
    }
    std::int64_t A = 1, B = 1;
    for (size_t k = 0; k < a; ++k) A *= (*x)[k];
    for (size_t k = a + 1; k < r; ++k) B *= (*x)[k];
    d.inputs = {"X: f32[A, D, B]"};
    d.lines = {"mx[a, b] max= X[a, d, b]", "e[a, d, b] = exp(X[a, d, b] - mx[a, b])", "s[a, b] += e[a, d, b]"};
    d.result = log ? "X[a, d, b] - mx[a, b] - log(s[a, b])" : "e[a, d, b] / s[a, b]";
    d.groups = {{0, a, {{"a", "A"}}}, {a, a + 1, {{"d", "D"}}}, {a + 1, r, {{"b", "B"}}}};
    d.sizes = {{"A", A}, {"B", B}, {"D", (*x)[a]}};
    return d;
  }

  //! BatchNormalization on its own (not after a Conv it folds into), for inference: per channel
  //! of [N, C, ...], (x - mean) * scale / sqrt(var + eps) + bias.
  std::optional<Draft> batch_norm(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims* x = shape(n.inputs[0]);
    if (!x || x->size() < 2 || n.inputs.size() != 5 || n.attr_i("training_mode", 0) != 0) {
      why = "BatchNormalization in training mode, or without a known shape of rank 2 or more, is not mapped";
      return std::nullopt;
    }
    for (size_t k = 1; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty() && consumers_.count(n.outputs[k])) {
        why = "BatchNormalization's running statistics are in use";
        return std::nullopt;
      }
    std::int64_t C = (*x)[1];
    for (size_t k = 1; k < 5; ++k) {
      const Dims* s = shape(n.inputs[k]);
      if (!s || elements(*s) != C) {
        why = "BatchNormalization's parameters must have one value per channel";
        return std::nullopt;
      }
    }
    Draft d;
    d.output = *x;
    d.name = "onnx_batch_norm";
    d.inputs = {"X: f32[N, C, P]", "scale: f32[C]", "bias: f32[C]", "mean: f32[C]", "var: f32[C]"};
    d.groups = {{0, 1, {{"n", "N"}}}, {1, 2, {{"c", "C"}}}, {2, x->size(), {{"p", "P"}}}};
    d.result = "(X[n, c, p] - mean[c]) * scale[c] / sqrt(var[c] + " + ir::number_text(n.attr_f("epsilon", 1e-5f)) +
               ") + bias[c]";
    d.sizes = {{"C", C}, {"N", (*x)[0]}, {"P", elements(*x) / ((*x)[0] * C)}};
    d.tensors = {
        {"X", n.inputs[0]}, {"scale", n.inputs[1]}, {"bias", n.inputs[2]}, {"mean", n.inputs[3]}, {"var", n.inputs[4]}};
    return d;
  }

  //! Normalisation of the rows of [..., D]: (x - mean) / sqrt(var + eps), with scale and shift
  //! when given.
  Draft layer_norm_draft(const Dims& x, size_t axis, float epsilon) {
    std::int64_t D = 1;
    for (size_t k = axis; k < x.size(); ++k) D *= x[k];
    Draft d;
    d.output = x;
    d.name = "onnx_layernorm";
    d.inputs = {"X: f32[N, D]"};
    d.lines = {"sum[n] += X[n, d]", "mean[n] = sum[n] / D", "xc[n, d] = X[n, d] - mean[n]",
               "sq[n] += xc[n, d] * xc[n, d]", "rstd[n] = 1.0 / sqrt(sq[n] / D + " + ir::number_text(epsilon) + ")"};
    d.result = "xc[n, d] * rstd[n]";
    d.groups = rows_groups(axis, x.size());
    d.sizes = {{"D", D}, {"N", elements(x) / D}};
    d.vendor = {{"primitive", "layer_normalization"}, {"src", {elements(x) / D, D}}, {"epsilon", epsilon}};
    return d;
  }

  std::optional<Draft> layer_norm(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims* x = shape(n.inputs[0]);
    if (!x || x->empty()) {
      why = "LayerNormalization needs a known shape";
      return std::nullopt;
    }
    std::int64_t axis = n.attr_i("axis", -1);
    if (axis < 0) axis += static_cast<std::int64_t>(x->size());
    if (axis < 0 || axis >= static_cast<std::int64_t>(x->size()) || n.attr_i("stash_type", 1) != 1 ||
        (n.outputs.size() > 1 && consumers_.count(n.outputs[1])) ||
        (n.outputs.size() > 2 && consumers_.count(n.outputs[2]))) {
      why = "LayerNormalization with its mean or inverse deviation in use (or stash_type other than 1) is not mapped";
      return std::nullopt;
    }
    Draft d = layer_norm_draft(*x, static_cast<size_t>(axis), n.attr_f("epsilon", 1e-5f));
    d.tensors["X"] = n.inputs[0];
    for (auto [k, name] : {std::pair<size_t, const char*>{1, "gamma"}, {2, "beta"}}) {
      if (n.inputs.size() <= k || n.inputs[k].empty()) continue;
      const Dims* s = shape(n.inputs[k]);
      if (!s || elements(*s) != d.sizes[0].second) {
        why = "LayerNormalization's scale and bias must have the normalised shape";
        return std::nullopt;
      }
      d.inputs.push_back(std::string(name) + ": f32[D]");
      d.result += std::string(k == 1 ? " * " : " + ") + name + "[d]";
      d.tensors[name] = n.inputs[k];
    }
    if (d.inputs.size() == 3) d.vendor["scale_shift"] = true;
    return d;
  }

  //! The layer norm exporters write before opset 17: ReduceMean over trailing axes, Sub,
  //! Pow 2 (or Mul by itself), ReduceMean, Add epsilon, Sqrt, Div. Its scale and shift follow
  //! as Mul and Add, fused as the epilogue.
  std::optional<Draft> layer_norm_pattern(size_t i) {
    const Node& n = g_.nodes[i];
    const Dims* x = shape(n.inputs[0]);
    if (!x || x->empty() || n.attr_i("keepdims", 1) != 1) return std::nullopt;
    auto axes = reduce_axes(n, x->size());
    if (!axes || axes->back() != static_cast<std::int64_t>(x->size()) - 1 ||
        axes->size() != x->size() - static_cast<size_t>(axes->front()))
      return std::nullopt;
    size_t sub_at, sq_at = 0, mean2_at, add_at, sqrt_at, div_at = 0;
    const Node* sub = only_consumer_of_type(n.outputs[0], "Sub", sub_at);
    if (!sub || sub->inputs[0] != n.inputs[0] || sub->inputs[1] != n.outputs[0]) return std::nullopt;
    const std::string& centred = sub->outputs[0];
    auto c = consumers_.find(centred);
    if (c == consumers_.end()) return std::nullopt;
    std::set<size_t> readers(c->second.begin(), c->second.end());
    if (readers.size() != 2 || readers.count(kGraphOutput)) return std::nullopt;
    for (size_t r : readers) {
      const Node& m = g_.nodes[r];
      bool squares = (m.type == "Pow" && m.inputs[0] == centred && scalar(m.inputs[1]) == 2.0f) ||
                     (m.type == "Mul" && m.inputs[0] == centred && m.inputs[1] == centred);
      if (squares)
        sq_at = r;
      else if (m.type == "Div" && m.inputs[0] == centred)
        div_at = r;
    }
    if (!sq_at || !div_at) return std::nullopt;
    const Node* mean2 = only_consumer_of_type(g_.nodes[sq_at].outputs[0], "ReduceMean", mean2_at);
    if (!mean2 || mean2->attr_i("keepdims", 1) != 1 || reduce_axes(*mean2, x->size()) != axes) return std::nullopt;
    const Node* add = only_consumer_of_type(mean2->outputs[0], "Add", add_at);
    if (!add || add->inputs[0] != mean2->outputs[0] || !scalar(add->inputs[1])) return std::nullopt;
    const Node* root = only_consumer_of_type(add->outputs[0], "Sqrt", sqrt_at);
    if (!root || only_consumer(root->outputs[0]) != div_at || g_.nodes[div_at].inputs[1] != root->outputs[0])
      return std::nullopt;
    Draft d = layer_norm_draft(*x, static_cast<size_t>(axes->front()), *scalar(add->inputs[1]));
    for (size_t k : {sub_at, sq_at, mean2_at, add_at, sqrt_at, div_at}) {
      pending_.insert(k);
      d.nodes.push_back(g_.nodes[k].name);
    }
    d.tensors["X"] = n.inputs[0];
    d.value = g_.nodes[div_at].outputs[0];
    d.last = div_at;
    return d;
  }

  //! ReduceSum, ReduceMean and ReduceMax over any axes: neighbouring axes alike (both kept or
  //! both reduced) are one flattened axis of the op.
  std::optional<Draft> reduce(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims* x = shape(n.inputs[0]);
    std::optional<std::vector<std::int64_t>> axes;
    if (x) axes = reduce_axes(n, x->size());
    if (!x || !axes) {
      why = "reduction with an unknown shape or axes is not mapped";
      return std::nullopt;
    }
    std::vector<bool> reduced(x->size(), false);
    for (auto a : *axes) reduced[a] = true;
    bool keep = n.attr_i("keepdims", 1) != 0;
    Draft d;
    std::string x_dims, x_ix, acc_ix;
    std::int64_t count = 1;
    size_t out_dim = 0;
    for (size_t k = 0, run = 0; k < x->size(); ++run) {
      size_t end = k + 1;
      while (end < x->size() && reduced[end] == reduced[k]) ++end;
      std::int64_t extent = 1;
      for (size_t e = k; e < end; ++e) extent *= (*x)[e];
      std::string size = "D" + std::to_string(run), index = "i" + std::to_string(run);
      d.sizes.push_back({size, extent});
      x_dims += (x_dims.empty() ? "" : ", ") + size;
      x_ix += (x_ix.empty() ? "" : ", ") + index;
      if (reduced[k]) {
        count *= extent;
        if (keep) {
          d.groups.push_back({out_dim, out_dim + (end - k), {}});
          out_dim += end - k;
        }
      } else {
        d.groups.push_back({out_dim, out_dim + (end - k), {{index, size}}});
        out_dim += end - k;
      }
      k = end;
    }
    if (d.index() == "[]") {
      // A reduction to one value: an output axis of extent 1 that no input dimension has.
      d.groups.insert(d.groups.begin(), {0, 0, {{"o", "O"}}});
      d.sizes.push_back({"O", 1});
      x_dims = "O, " + x_dims;
      x_ix = "o, " + x_ix;
    }
    std::string x_at = "X[" + x_ix + "]", acc = "acc" + d.index();
    const std::string& t = n.type;
    static const std::map<std::string, std::pair<const char*, const char*>> forms = {
        // type -> (reduction with X for @, result with acc for @)
        {"ReduceSum", {"+= @", "@"}},          {"ReduceMean", {"+= @", "@"}},
        {"ReduceMax", {"max= @", "@"}},        {"ReduceMin", {"min= @", "@"}},
        {"ReduceProd", {"*= @", "@"}},         {"ReduceL1", {"+= abs(@)", "@"}},
        {"ReduceL2", {"+= @ * @", "sqrt(@)"}}, {"ReduceSumSquare", {"+= @ * @", "@"}},
        {"ReduceLogSum", {"+= @", "log(@)"}},  {"ReduceLogSumExp", {"", ""}}};  // written below
    auto form = forms.find(t);
    if (form == forms.end()) {
      why = "no mapping for ONNX op " + t;
      return std::nullopt;
    }
    d.name = "onnx_" + t.substr(6);
    std::transform(d.name.begin(), d.name.end(), d.name.begin(), [](unsigned char ch) { return std::tolower(ch); });
    d.inputs = {"X: f32[" + x_dims + "]"};
    std::string reduction = form->second.first, result = form->second.second;
    if (t == "ReduceLogSumExp") {
      // The largest element first, so that exp does not overflow.
      d.lines = {"mx" + d.index() + " max= " + x_at};
      reduction = "+= exp(" + x_at + " - mx" + d.index() + ")";
      result = "log(@) + mx" + d.index();
    }
    d.reduce = detail::apply(reduction, x_at);
    d.result = detail::apply(result, acc) + (t == "ReduceMean" ? " * " + ir::number_text(1.0 / double(count)) : "");
    d.tensors = {{"X", n.inputs[0]}};
    return d;
  }

  //! An elementwise node not fused into a kernel before it: an op over its output, whose
  //! operands (tensors that broadcast, or scalar constants written as numbers) share groups.
  std::optional<Draft> elementwise(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims* y = shape(n.outputs[0]);
    if (!y) {
      why = "output shape unknown";
      return std::nullopt;
    }
    Draft d;
    d.output = *y;
    std::vector<Dims> shapes;
    for (auto& in : n.inputs) {
      if (in.empty() || scalar(in)) continue;
      const Dims* s = shape(in);
      if (!s) {
        why = "operand shapes unknown";
        return std::nullopt;
      }
      shapes.push_back(*s);
    }
    d.groups = elementwise_groups(*y, shapes, d.sizes);
    if (d.index() == "[]") {  // one value: an axis of extent 1 that no tensor dimension has
      d.groups.insert(d.groups.begin(), {0, 0, {{"i", "E"}}});
      d.sizes.push_back({"E", 1});
    }
    std::vector<std::string> args;
    std::map<std::string, std::string> names;
    const char* tensor_names[] = {"X", "Z", "W", "V"};
    for (auto& in : n.inputs) {
      if (in.empty()) {
        args.push_back("");
      } else if (auto s = scalar(in)) {
        args.push_back(ir::number_text(*s));
      } else if (names.count(in)) {
        args.push_back(names[in]);
      } else {
        auto f = fit_operand(*shape(in), *y, d.groups);
        if (!f || names.size() >= 4) {
          why = n.type + " with broadcasting across grouped dimensions is not mapped";
          return std::nullopt;
        }
        std::string name = tensor_names[names.size()];
        names[in] = name + "[" + (f->second.empty() ? "0" : f->second) + "]";
        d.inputs.push_back(name + ": f32[" + (f->first.empty() ? "1" : f->first) + "]");
        d.tensors[name] = in;
        args.push_back(names[in]);
      }
    }
    auto e = elementwise_expr(n, args);
    if (!e) {
      why = n.type + " in a form that is not mapped";
      return std::nullopt;
    }
    d.name = "onnx_elementwise";
    d.result = *e;
    return d;
  }
};

}  // namespace

Imported map_graph(const Graph& g) { return Mapper(g).run(); }

}  // namespace tiletune::models::detail
