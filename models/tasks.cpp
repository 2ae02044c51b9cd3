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
#include "models/mapper.hpp"
#include "support/error.hpp"

namespace tiletune::models::detail {

std::int64_t elements(const Dims& d) {
  return std::accumulate(d.begin(), d.end(), std::int64_t(1), std::multiplies<std::int64_t>());
}

namespace {

//! Nodes that only move or reinterpret data (or compute shapes): no kernel of their own.
const std::set<std::string>& layout_ops() {
  static const std::set<std::string> ops = {
      "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten",         "Concat", "Slice", "Shape", "Constant",
      "Cast",    "Identity",  "Dropout", "Gather",    "ConstantOfShape", "Expand", "Split", "Pad"};
  return ops;
}

//! Epilogues longer than this stop growing (a chain that squares itself doubles each node).
constexpr size_t kLongestEpilogue = 4000;

std::string sizes_text(std::vector<std::pair<std::string, std::int64_t>> sizes) {
  std::sort(sizes.begin(), sizes.end());
  std::string s;
  for (auto& [k, v] : sizes) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
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

}  // namespace

Imported Mapper::run() {
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

std::optional<std::vector<std::int64_t>> Mapper::reduce_axes(const Node& n, size_t rank) const {
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

void Mapper::vendor_post_ops(Draft& d, const std::vector<Step>& steps) const {
  nlohmann::json post = nlohmann::json::array(), unfused = nlohmann::json::array();
  std::map<std::string, std::vector<size_t>> readers;  // value -> the steps that read it
  for (size_t k = 0; k < steps.size(); ++k)
    for (auto& in : std::set<std::string>(g_.nodes[steps[k].node].inputs.begin(), g_.nodes[steps[k].node].inputs.end()))
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

std::vector<std::int64_t> Mapper::vendor_dims(const std::vector<bool>& included, const Draft& d) {
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

std::string Mapper::fuse_epilogue(Draft& d) {
  std::map<std::string, std::string> expr{{d.value, "@"}};
  std::set<size_t> region;
  std::vector<std::string> produced{d.value};
  std::vector<Step> steps;
  struct Fitted {
    std::string access;                //!< its element in the op ("bias[k]")
    std::vector<std::int64_t> vendor;  //!< its shape as the vendor's primitive sees it
  };
  std::map<std::string, Fitted> fitted;  // ONNX value -> the op tensor it is in the epilogue
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
      } else if (auto known = fitted.find(in); known != fitted.end()) {
        args.push_back(known->second.access);
        operand = known->second.vendor;
      } else {
        const Dims* s = shape(in);
        std::vector<bool> included;
        auto f = s ? fit_operand(*s, d.output, d.groups, &included) : std::nullopt;
        if (!f) {
          fits = false;
          continue;
        }
        operand = vendor_dims(included, d);
        bool is_const = g_.constants.count(in) > 0;
        std::string base = !is_const ? "res" : n.type == "Add" || n.type == "Sub" ? "bias" : "scale";
        std::string name = base;
        for (int suffix = 2; taken.count(name); ++suffix) name = base + std::to_string(suffix);
        taken.insert(name);
        std::string access = name + "[" + (f->second.empty() ? "0" : f->second) + "]";
        fitted[in] = {access, operand};
        step.decls.push_back(name + ": f32[" + (f->first.empty() ? "1" : f->first) + "]");
        step.tensors[name] = in;
        args.push_back(access);
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

bool Mapper::foldable_batch_norm(const Node& n, const std::string& value) const {
  if (n.type != "BatchNormalization" || n.inputs.size() != 5 || n.inputs[0] != value ||
      n.attr_i("training_mode", 0) != 0)
    return false;
  for (size_t k = 1; k < 5; ++k)
    if (!g_.constants.count(n.inputs[k])) return false;
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (!n.outputs[k].empty() && consumers_.count(n.outputs[k])) return false;  // running statistics in use
  return true;
}

namespace {
//! The ONNX name of an element type (TensorProto::DataType).
std::string onnx_type_name(int t) {
  static const char* names[] = {"undefined", "float",  "uint8",     "int8",       "uint16",  "int16",
                                "int32",     "int64",  "string",    "bool",       "float16", "double",
                                "uint32",    "uint64", "complex64", "complex128", "bfloat16"};
  return t >= 0 && t < 17 ? names[t] : "type " + std::to_string(t);
}
}  // namespace

int Mapper::onnx_type(const std::string& value) const {
  auto t = g_.types.find(value);
  return t == g_.types.end() ? 1 : t->second;  // unknown: float, as the graph's own tensors are
}

std::string Mapper::non_float(const Node& n, bool halves_too) const {
  for (auto* list : {&n.inputs, &n.outputs})
    for (auto& v : *list) {
      int t = v.empty() ? 1 : onnx_type(v);
      // Integer constants that are attributes in disguise are allowed: the axes of a
      // reduction, and scalars (an exponent) that the op text writes as numbers.
      bool int_constant = g_.constants.count(v) && (t == 6 || t == 7);
      if (t == 1 || (halves_too && (t == 10 || t == 16)) ||
          (int_constant && (scalar(v) || n.type.rfind("Reduce", 0) == 0)))
        continue;
      return onnx_type_name(t);
    }
  return "";
}

std::string Mapper::tile_type(const std::string& value) const {
  switch (onnx_type(value)) {  // TensorProto::DataType
    case 1:
      return ir::dtype_name(ir::DType::F32);
    case 2:
      return ir::dtype_name(ir::DType::U8);
    case 3:
      return ir::dtype_name(ir::DType::I8);
    case 6:
      return ir::dtype_name(ir::DType::I32);
    case 10:
      return ir::dtype_name(ir::DType::F16);
    case 16:
      return ir::dtype_name(ir::DType::BF16);
    default:
      return "";
  }
}

namespace {
bool quantized_node(const Node& n) {
  return n.type == "QuantizeLinear" || n.type == "DequantizeLinear" || n.type == "QLinearMatMul" ||
         n.type == "MatMulInteger" || n.type == "QLinearConv" || n.type == "ConvInteger";
}
}  // namespace

std::string Mapper::unmapped_quantized(const Node& n) const {
  for (auto* list : {&n.inputs, &n.outputs})
    for (auto& v : *list)
      if (!v.empty() && tile_type(v).empty())
        return "tensors of type " + onnx_type_name(onnx_type(v)) + " are not mapped";
  // The scales and zero points: every input but the data operands.
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    bool data = n.type == "QLinearMatMul" || n.type == "QLinearConv"
                    ? k == 0 || k == 3 || k == 8
                    : k < (n.type == "MatMulInteger" || n.type == "ConvInteger" ? 2u : 1u);
    if (data || n.inputs[k].empty()) continue;
    const Dims* s = shape(n.inputs[k]);
    if (!s || elements(*s) != 1)
      return n.type + " with a scale or zero point per channel (" + n.inputs[k] + ") is not mapped";
  }
  return "";
}

std::string Mapper::scalar_operand(Draft& d, const std::string& value, const std::string& name) const {
  if (auto v = scalar(value)) return ir::number_text(*v);
  d.inputs.push_back(name + ": " + tile_type(value) + "[1]");
  d.tensors[name] = value;
  return name + "[0]";
}

std::optional<Draft> Mapper::map_node(size_t i, std::string& why) {
  const Node& n = g_.nodes[i];
  if (quantized_node(n)) {
    why = unmapped_quantized(n);
    if (!why.empty()) return std::nullopt;
  } else if (auto t = non_float(n, true); !t.empty()) {
    why = "tensors of type " + t + " are not mapped: tiletune maps the floating types, and integers in quantized nodes";
    return std::nullopt;
  }
  std::optional<Draft> d;
  if (n.type == "Conv" || n.type == "QLinearConv" || n.type == "ConvInteger") d = conv(i, why);
  if (n.type == "Gemm" || n.type == "MatMul") d = matmul(i, why);
  if (n.type == "QLinearMatMul" || n.type == "MatMulInteger") d = quantized_matmul(i, why);
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
    d->out_type = tile_type(d->value);
    // Every mapping declares f32: each input takes its ONNX value's type (f16, bf16, u8, ...),
    // and one that is a graph constant (an initializer: the layer's weights) is `const`, so
    // that its kernel packs it once instead of on every call.
    for (auto& decl : d->inputs) {
      auto colon = decl.find(':');
      auto it = d->tensors.find(decl.substr(0, colon));
      std::string type = it == d->tensors.end() ? "f32" : tile_type(it->second);
      if (colon != std::string::npos && decl.compare(colon + 2, 4, "f32[") == 0) decl.replace(colon + 2, 3, type);
      if (it != d->tensors.end() && g_.constants.count(it->second)) decl += " const";
    }
    if (d->last == 0) d->last = i;
    if (d->output.empty() && shape(d->value)) d->output = *shape(d->value);
    if (d->output.empty()) {
      why = "output shape unknown";
      return std::nullopt;
    }
  }
  return d;
}

Imported map_graph(const Graph& g) { return Mapper(g).run(); }

}  // namespace tiletune::models::detail
