// ONNX nodes to tile ops: each kernel node (Conv, Gemm, MatMul, pooling, Softmax, elementwise)
// becomes an op written out in the tile-op language with the node's geometry as constants and
// its tensors' dimensions as sizes; the elementwise chain after it (bias, folded batch norm,
// activations) becomes its epilogue. Tasks with one workload key are merged.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <optional>
#include <set>

#include "ir/parse.hpp"
#include "ir/workload.hpp"
#include "models/graph.hpp"
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

std::string sizes_text(const std::vector<std::pair<std::string, std::int64_t>>& sizes) {
  std::string s;
  for (auto& [k, v] : sizes) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

std::int64_t elements(const Dims& d) {
  return std::accumulate(d.begin(), d.end(), std::int64_t(1), std::multiplies<std::int64_t>());
}

//! A task before binding: its op text, sizes and the nodes it covers.
struct Draft {
  std::string text, sizes;
  std::vector<std::string> nodes;
  std::map<std::string, std::string> tensors;  //!< op tensor -> ONNX value
  Dims output;                                 //!< the ONNX output's shape, checked against the bound op's
};

class Mapper {
 public:
  explicit Mapper(const Graph& g) : g_(g) {
    for (auto& n : g.nodes)
      for (auto& in : n.inputs)
        if (!in.empty()) ++uses_[in];
    for (auto& out : g.outputs) ++uses_[out];
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
      std::string bind_error;
      ir::Workload w;
      try {
        w = ir::bind(ir::parse_op(d->text), ir::parse_sizes(d->sizes));
      } catch (const Error& e) {
        bind_error = e.what();
      }
      if (bind_error.empty() && elements(d->output) != w.buffers[w.buffer_index(w.op.outputs[0].name)].elements())
        bind_error = "its tile op's output does not match the inferred shape";
      if (!bind_error.empty()) {
        // A mapping that does not check is a bug here, reported rather than dropped.
        m.skipped.push_back({n.name, n.type, "internal: " + bind_error, false});
        continue;
      }
      fused_.insert(pending_.begin(), pending_.end());
      auto [it, added] = by_key.emplace(w.key, m.tasks.size());
      if (added) m.tasks.push_back({d->text, d->sizes, w.key, 0, {}, {}});
      Task& t = m.tasks[it->second];
      ++t.weight;
      t.nodes.push_back(d->nodes);
      t.tensors.push_back(d->tensors);
    }
    return m;
  }

 private:
  const Graph& g_;
  std::map<std::string, int> uses_;
  std::set<size_t> fused_;
  std::set<size_t> pending_;

  const Dims* shape(const std::string& v) const {
    auto it = g_.shapes.find(v);
    return it == g_.shapes.end() ? nullptr : &it->second;
  }
  const std::vector<float>* constant(const std::string& v) const {
    auto it = g_.values.find(v);
    return it == g_.values.end() ? nullptr : &it->second;
  }

  //! The one node that reads `value`, if exactly one does and it is not a graph output.
  std::optional<size_t> only_consumer(const std::string& value, size_t after) const {
    auto u = uses_.find(value);
    if (u == uses_.end() || u->second != 1) return std::nullopt;
    for (size_t j = after + 1; j < g_.nodes.size(); ++j)
      for (auto& in : g_.nodes[j].inputs)
        if (in == value) return j;
    return std::nullopt;
  }

  //! The elementwise function of an activation node as an expression of `v`; nullopt if the
  //! node is not one.
  std::optional<std::string> activation(const Node& n) const {
    if (n.type == "Relu") return "max(@, 0.0)";
    if (n.type == "Sigmoid") return "sigmoid(@)";
    if (n.type == "Tanh") return "tanh(@)";
    if (n.type == "Erf") return "erf(@)";
    if (n.type == "Abs") return "abs(@)";
    if (n.type == "Exp") return "exp(@)";
    if (n.type == "Sqrt") return "sqrt(@)";
    if (n.type == "Neg") return "(-@)";
    if (n.type == "LeakyRelu") return "select(@ > 0.0, @, @ * " + ir::number_text(n.attr_f("alpha", 0.01f)) + ")";
    if (n.type == "HardSigmoid")
      return "min(max(@ * " + ir::number_text(n.attr_f("alpha", 0.2f)) + " + " +
             ir::number_text(n.attr_f("beta", 0.5f)) + ", 0.0), 1.0)";
    if (n.type == "HardSwish") return "@ * min(max(@ * 0.16666667 + 0.5, 0.0), 1.0)";
    if (n.type == "Clip") {
      // opset 11+: min and max are optional constant inputs; before: attributes.
      auto bound = [&](size_t input, const char* attr, float otherwise) -> std::optional<float> {
        if (n.inputs.size() > input && !n.inputs[input].empty()) {
          const auto* c = constant(n.inputs[input]);
          if (!c || c->size() != 1) return std::nullopt;
          return (*c)[0];
        }
        return n.attr_f(attr, otherwise);
      };
      auto lo = bound(1, "min", -INFINITY), hi = bound(2, "max", INFINITY);
      if (!lo || !hi) return std::nullopt;
      std::string e = "@";
      if (std::isfinite(*lo)) e = "max(" + e + ", " + ir::number_text(*lo) + ")";
      if (std::isfinite(*hi)) e = "min(" + e + ", " + ir::number_text(*hi) + ")";
      return e;
    }
    return std::nullopt;
  }

  //! `f` (an expression of @) applied to `x`.
  static std::string apply(const std::string& f, const std::string& x) {
    std::string out;
    bool simple = x.find(' ') == std::string::npos;  // "@", "X[i]": no parentheses needed
    for (char ch : f) out += ch == '@' ? (simple ? x : "(" + x + ")") : std::string(1, ch);
    return out;
  }

  //! Follows the chain of activations after node `i` (each the only reader of the one before),
  //! marking them fused. Returns the expression of `@`, and moves `value` to the last value.
  std::string activations_after(size_t& i, std::string& value, std::vector<std::string>& nodes) {
    std::string f = "@";
    for (;;) {
      auto next = only_consumer(value, i);
      if (!next) break;
      const Node& n = g_.nodes[*next];
      auto a = activation(n);
      if (!a || n.inputs[0] != value) break;
      f = apply(*a, f);
      pending_.insert(*next);
      nodes.push_back(n.name);
      value = n.outputs[0];
      i = *next;
    }
    return f;
  }
  //! A per-channel bias after a kernel: Add of a constant that broadcasts along `axis` of the
  //! kernel's output of rank `rank` (channels of NCHW: [K, 1, 1]; columns of a matmul: [N]).
  //! Marks it fused and names the constant in `bias_name`.
  bool bias_after(size_t& i, std::string& value, size_t rank, size_t axis, std::int64_t channels,
                  std::vector<std::string>& nodes, std::string& bias_name) {
    auto next = only_consumer(value, i);
    if (!next) return false;
    const Node& n = g_.nodes[*next];
    if (n.type != "Add" || n.inputs.size() != 2) return false;
    const std::string& other = n.inputs[0] == value ? n.inputs[1] : n.inputs[0];
    const Dims* s = shape(other);
    if (!s || !g_.constants.count(other) || s->size() > rank) return false;
    Dims padded(rank - s->size(), 1);  // numpy broadcasting aligns the last dimensions
    padded.insert(padded.end(), s->begin(), s->end());
    for (size_t d = 0; d < rank; ++d)
      if (padded[d] != (d == axis ? channels : 1)) return false;
    pending_.insert(*next);
    nodes.push_back(n.name);
    value = n.outputs[0];
    bias_name = other;
    i = *next;
    return true;
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
      if (!n.outputs[k].empty() && uses_.count(n.outputs[k])) return false;  // running statistics in use
    return true;
  }

  std::optional<Draft> map_node(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    if (n.type == "Conv") return conv(i, why);
    if (n.type == "Gemm" || n.type == "MatMul") return matmul(i, why);
    if (n.type == "MaxPool" || n.type == "AveragePool") return pool(i, why);
    if (n.type == "GlobalAveragePool" || n.type == "GlobalMaxPool") return global_pool(i, why);
    if (n.type == "Softmax") return softmax(i, why);
    if (activation(n) || n.type == "Add" || n.type == "Sub" || n.type == "Mul" || n.type == "Div")
      return elementwise(i, why);
    return std::nullopt;
  }

  std::optional<Draft> conv(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims *x = shape(n.inputs[0]), *f = shape(n.inputs[1]), *y = shape(n.outputs[0]);
    if (!x || !f || !y || x->size() != 4 || f->size() != 4) {
      why = "only 2-D convolutions with known shapes are mapped";
      return std::nullopt;
    }
    if (n.attrs.count("auto_pad") && n.attrs.at("auto_pad").s != "NOTSET" && n.attrs.at("auto_pad").s != "VALID") {
      why = "auto_pad " + n.attrs.at("auto_pad").s + " is not mapped (explicit pads are)";
      return std::nullopt;
    }
    std::int64_t N = (*x)[0], C = (*x)[1], H = (*x)[2], W = (*x)[3], K = (*f)[0], R = (*f)[2], S = (*f)[3];
    std::int64_t G = n.attr_i("group", 1);
    auto st = n.attr_ints("strides", {1, 1}), dil = n.attr_ints("dilations", {1, 1}),
         p = n.attr_ints("pads", {0, 0, 0, 0});
    if (st.size() != 2 || dil.size() != 2 || p.size() != 4 || G < 1 || C % G || K % G) {
      why = "conv attributes out of the mapped forms";
      return std::nullopt;
    }
    Draft d;
    d.nodes = {n.name};
    std::string value = n.outputs[0];
    size_t last = i;
    std::string bias;
    bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (has_bias) bias = n.inputs[2];
    // BatchNormalization for inference folds into the filter and a bias: same kernel.
    if (auto next = only_consumer(value, last); next && foldable_batch_norm(g_.nodes[*next], value)) {
      pending_.insert(*next);
      d.nodes.push_back(g_.nodes[*next].name);
      value = g_.nodes[*next].outputs[0];
      last = *next;
      bias = "folded:" + g_.nodes[*next].name;  // the shift the folding computes (with the conv's bias)
      has_bias = true;
    }
    std::string bias_from_add;
    if (!has_bias && bias_after(last, value, 4, 1, K, d.nodes, bias_from_add)) {
      has_bias = true;
      bias = bias_from_add;
    }
    std::string act = activations_after(last, value, d.nodes);
    d.output = shape(value) ? *shape(value) : *y;
    bool epilogue = has_bias || act != "@";
    bool pads = std::any_of(p.begin(), p.end(), [](std::int64_t v) { return v != 0; });
    std::string name = "onnx_conv";
    std::vector<std::pair<std::string, std::int64_t>> sizes;
    std::string in_decl, f_decl, out_decl, in_ix, f_ix, out_ix, bias_decl, bias_ix, where, reduce_shape;
    std::string iy = affine({{st[0], "y"}, {dil[0], "r"}}, -p[0]), ix = affine({{st[1], "x"}, {dil[1], "s"}}, -p[1]);
    std::string oh = window_extent("H", "R", p[0] + p[2], dil[0], st[0]),
                ow = window_extent("W", "S", p[1] + p[3], dil[1], st[1]);
    bool pointwise = R == 1 && S == 1 && !pads && st[0] == 1 && st[1] == 1 && G == 1;
    if (pointwise) {
      // A 1x1 convolution is a matmul over the flattened plane (the same memory as NCHW).
      name = "onnx_conv1x1";
      sizes = {{"C", C}, {"H", H}, {"K", K}, {"N", N}, {"W", W}};
      in_decl = "I: f32[N, C, H * W]";
      f_decl = "F: f32[K, C]";
      out_decl = "O: f32[N, K, H * W]";
      in_ix = "I[n, c, p]";
      f_ix = "F[k, c]";
      out_ix = "[n, k, p]";
      bias_decl = "bias: f32[K]";
      bias_ix = "bias[k]";
    } else {
      // Channel g * CG + c is [g, c] of the same memory seen with a group dimension.
      bool grouped = G > 1;
      std::string gd = grouped ? "G, " : "", gv = grouped ? "g, " : "", cg = grouped ? "CG" : "C",
                  kg = grouped ? "KG" : "K";
      if (grouped) {
        name = C == G ? "onnx_depthwise_conv" : "onnx_grouped_conv";
        sizes = {{"CG", C / G}, {"G", G}, {"H", H}, {"KG", K / G}, {"N", N}, {"R", R}, {"S", S}, {"W", W}};
      } else {
        sizes = {{"C", C}, {"H", H}, {"K", K}, {"N", N}, {"R", R}, {"S", S}, {"W", W}};
      }
      in_decl = "I: f32[N, " + gd + cg + ", H, W]" + std::string(pads ? " pad 0" : "");
      f_decl = "F: f32[" + gd + kg + ", " + cg + ", R, S]";
      out_decl = "O: f32[N, " + gd + kg + ", " + oh + ", " + ow + "]";
      in_ix = "I[n, " + gv + "c, " + iy + ", " + ix + "]";
      f_ix = "F[" + gv + "k, c, r, s]";
      out_ix = "[n, " + gv + "k, y, x]";
      bias_decl = "bias: f32[" + gd + kg + "]";
      bias_ix = "bias[" + gv + "k]";
      where = " where y < " + oh + ", x < " + ow;
    }
    std::string text =
        "op " + name + "(" + in_decl + ", " + f_decl + (has_bias ? ", " + bias_decl : "") + ") -> " + out_decl + " {\n";
    if (!epilogue) {
      text += "  O" + out_ix + " += " + in_ix + " * " + f_ix + "\n}\n";
    } else {
      text += "  acc" + out_ix + " += " + in_ix + " * " + f_ix + (pointwise ? "" : where) + "\n";
      std::string v = "acc" + out_ix + (has_bias ? " + " + bias_ix : "");
      text += "  O" + out_ix + " = " + apply(act, v) + "\n}\n";
    }
    d.text = text;
    d.sizes = sizes_text(sizes);
    d.tensors = {{"I", n.inputs[0]}, {"F", n.inputs[1]}, {"O", value}};
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
    d.nodes = {n.name};
    std::int64_t M, K, N, G = 1;
    std::string a_decl, b_decl, a_ix, b_ix, out_decl, out_ix;
    if (a->size() == 2 && b->size() == 2) {
      M = ta ? (*a)[1] : (*a)[0];
      K = ta ? (*a)[0] : (*a)[1];
      N = tb ? (*b)[0] : (*b)[1];
    } else if (a->size() >= 2 && b->size() == 2 && !gemm) {
      // [..., M, K] x [K, N]: the leading dimensions of A are rows too (row-major memory).
      M = elements(*a) / a->back();
      K = a->back();
      N = (*b)[1];
    } else if (a->size() == b->size() && a->size() >= 3 && !gemm && std::equal(a->begin(), a->end() - 2, b->begin())) {
      G = elements(*a) / ((*a)[a->size() - 2] * a->back());
      M = (*a)[a->size() - 2];
      K = a->back();
      N = b->back();
    } else {
      why = "MatMul with broadcast batch dimensions is not mapped";
      return std::nullopt;
    }
    bool batched = G > 1 || (a->size() == b->size() && a->size() >= 3);
    std::string gv = batched ? "g, " : "", gd = batched ? "G, " : "";
    a_decl = "A: f32[" + gd + (ta ? "K, M" : "M, K") + "]";
    a_ix = "A[" + gv + (ta ? "k, m" : "m, k") + "]";
    b_decl = "B: f32[" + gd + (tb ? "N, K" : "K, N") + "]";
    b_ix = "B[" + gv + (tb ? "n, k" : "k, n") + "]";
    out_decl = "Y: f32[" + gd + "M, N]";
    out_ix = "[" + gv + "m, n]";
    std::string value = n.outputs[0];
    size_t last = i;
    std::string bias, bias_decl, bias_ix;
    bool has_c = gemm && n.inputs.size() > 2 && !n.inputs[2].empty() && beta != 0.0f;
    if (has_c) {
      const Dims* c = shape(n.inputs[2]);
      if (!c) {
        why = "Gemm's C has no known shape";
        return std::nullopt;
      }
      bias = n.inputs[2];
      if (elements(*c) == N && !c->empty() && c->back() == N) {
        bias_decl = "bias: f32[N]";
        bias_ix = "bias[n]";
      } else if (c->size() == 2 && (*c)[0] == M && (*c)[1] == N) {
        bias_decl = "bias: f32[M, N]";
        bias_ix = "bias[m, n]";
      } else if (elements(*c) == 1) {
        bias_decl = "bias: f32[1]";
        bias_ix = "bias[0]";
      } else {
        why = "Gemm's C broadcast from shape other than [N], [M, N] or a scalar";
        return std::nullopt;
      }
    } else if (!batched && y->size() == 2 && bias_after(last, value, 2, 1, N, d.nodes, bias)) {
      bias_decl = "bias: f32[N]";
      bias_ix = "bias[n]";
    }
    std::string act = activations_after(last, value, d.nodes);
    d.output = shape(value) ? *shape(value) : *y;
    bool epilogue = !bias.empty() || act != "@" || alpha != 1.0f;
    std::string text = std::string("op ") +
                       (gemm      ? "onnx_gemm"
                        : batched ? "onnx_batch_matmul"
                                  : "onnx_matmul") +
                       "(" + a_decl + ", " + b_decl + (bias.empty() ? "" : ", " + bias_decl) + ") -> " + out_decl +
                       " {\n";
    if (!epilogue) {
      text += "  Y" + out_ix + " += " + a_ix + " * " + b_ix + "\n}\n";
    } else {
      text += "  acc" + out_ix + " += " + a_ix + " * " + b_ix + "\n";
      std::string v = (alpha != 1.0f ? ir::number_text(alpha) + " * " : "") + "acc" + out_ix;
      if (!bias.empty()) v += " + " + (beta != 1.0f ? ir::number_text(beta) + " * " : "") + bias_ix;
      text += "  Y" + out_ix + " = " + apply(act, v) + "\n}\n";
    }
    d.text = text;
    std::vector<std::pair<std::string, std::int64_t>> sizes = {{"K", K}, {"M", M}, {"N", N}};
    if (batched) sizes.insert(sizes.begin(), {"G", G});
    d.sizes = sizes_text(sizes);
    d.tensors = {{"A", n.inputs[0]}, {"B", n.inputs[1]}, {"Y", value}};
    if (!bias.empty()) d.tensors["bias"] = bias;
    return d;
  }

  std::optional<Draft> pool(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims *x = shape(n.inputs[0]), *y = shape(n.outputs[0]);
    auto k = n.attr_ints("kernel_shape", {});
    if (!x || !y || x->size() != 4 || k.size() != 2) {
      why = "only 2-D pooling with known shapes is mapped";
      return std::nullopt;
    }
    auto st = n.attr_ints("strides", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0}),
         dil = n.attr_ints("dilations", {1, 1});
    if (n.attrs.count("auto_pad") && n.attrs.at("auto_pad").s != "NOTSET" && n.attrs.at("auto_pad").s != "VALID") {
      why = "auto_pad " + n.attrs.at("auto_pad").s + " is not mapped (explicit pads are)";
      return std::nullopt;
    }
    if (st.size() != 2 || p.size() != 4 || dil.size() != 2) {
      why = "pooling attributes out of the mapped forms";
      return std::nullopt;
    }
    bool pads = std::any_of(p.begin(), p.end(), [](std::int64_t v) { return v != 0; });
    bool max = n.type == "MaxPool";
    if (n.attr_i("ceil_mode", 0) != 0) {
      why = "ceil_mode 1 is not mapped";
      return std::nullopt;
    }
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
    Draft d;
    d.nodes = {n.name};
    d.output = *y;
    std::string oh = window_extent("H", std::to_string(k[0]), p[0] + p[2], dil[0], st[0]),
                ow = window_extent("W", std::to_string(k[1]), p[1] + p[3], dil[1], st[1]);
    std::string iy = affine({{st[0], "y"}, {dil[0], "r"}}, -p[0]), ix = affine({{st[1], "x"}, {dil[1], "s"}}, -p[1]);
    std::string text = std::string("op ") + (max ? "onnx_max_pool" : "onnx_avg_pool") + "(X: f32[N, C, H, W]" +
                       (pads ? (max ? " pad -inf" : " pad 0") : "") + ") -> Y: f32[N, C, " + oh + ", " + ow +
                       "] {\n  Y[n, c, y, x] " + (max ? "max= " : "+= ") + "X[n, c, " + iy + ", " + ix + "]" +
                       (max ? "" : " * " + ir::number_text(1.0 / double(k[0] * k[1]))) + " where r < " +
                       std::to_string(k[0]) + ", s < " + std::to_string(k[1]) + "\n}\n";
    d.text = text;
    d.sizes = sizes_text({{"C", (*x)[1]}, {"H", (*x)[2]}, {"N", (*x)[0]}, {"W", (*x)[3]}});
    d.tensors = {{"X", n.inputs[0]}, {"Y", n.outputs[0]}};
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
    d.nodes = {n.name};
    d.output = *y;
    // [N, C, 1, 1] is [N, C] in memory.
    d.text = max ? "op onnx_global_max_pool(X: f32[N, C, H, W]) -> Y: f32[N, C] {\n  Y[n, c] max= X[n, c, h, w]\n}\n"
                 : "op onnx_global_avg_pool(X: f32[N, C, H, W]) -> Y: f32[N, C] {\n  sum[n, c] += X[n, c, h, w]\n"
                   "  Y[n, c] = sum[n, c] / (H * W)\n}\n";
    d.sizes = sizes_text({{"C", (*x)[1]}, {"H", (*x)[2]}, {"N", (*x)[0]}, {"W", (*x)[3]}});
    d.tensors = {{"X", n.inputs[0]}, {"Y", n.outputs[0]}};
    return d;
  }

  std::optional<Draft> softmax(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims* x = shape(n.inputs[0]);
    if (!x || x->empty()) {
      why = "input shape unknown";
      return std::nullopt;
    }
    // Before opset 13 Softmax flattens the input at `axis` (default 1) into rows; from 13 on
    // it normalises along `axis` (default -1), which maps when it is the last.
    bool flattens = g_.opset < 13;
    std::int64_t rank = static_cast<std::int64_t>(x->size());
    std::int64_t axis = n.attr_i("axis", flattens ? 1 : -1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || (!flattens && axis != rank - 1)) {
      why = "Softmax over an axis other than the last is not mapped";
      return std::nullopt;
    }
    std::int64_t D = 1;
    for (std::int64_t k = axis; k < rank; ++k) D *= (*x)[k];
    Draft d;
    d.nodes = {n.name};
    d.output = *x;
    d.text =
        "op onnx_softmax(X: f32[N, D]) -> Y: f32[N, D] {\n  mx[n] max= X[n, d]\n  e[n, d] = exp(X[n, d] - mx[n])\n"
        "  s[n] += e[n, d]\n  Y[n, d] = e[n, d] / s[n]\n}\n";
    d.sizes = sizes_text({{"D", D}, {"N", elements(*x) / D}});
    d.tensors = {{"X", n.inputs[0]}, {"Y", n.outputs[0]}};
    return d;
  }

  //! Elementwise nodes on their own (not fused into a kernel): one op over the flattened
  //! tensor. Binary ones take a tensor of the same shape or a one-element constant.
  std::optional<Draft> elementwise(size_t i, std::string& why) {
    const Node& n = g_.nodes[i];
    const Dims* y = shape(n.outputs[0]);
    if (!y) {
      why = "output shape unknown";
      return std::nullopt;
    }
    Draft d;
    d.nodes = {n.name};
    std::string decls = "X: f32[E]", body;
    if (auto a = activation(n)) {
      body = apply(*a, "X[i]");
    } else {
      const Dims *a0 = shape(n.inputs[0]), *a1 = shape(n.inputs[1]);
      if (!a0 || !a1) {
        why = "operand shapes unknown";
        return std::nullopt;
      }
      auto operand = [&](size_t k, const Dims& s, const char* name) -> std::optional<std::string> {
        if (s == *y) return std::string(name) + "[i]";
        if (elements(s) == 1)
          if (const auto* c = constant(n.inputs[k]); c && c->size() == 1) return ir::number_text((*c)[0]);
        return std::nullopt;
      };
      auto l = operand(0, *a0, "X"), r = operand(1, *a1, "Z");
      if (!l || !r) {
        why = n.type + " with broadcasting other than a scalar constant is not mapped";
        return std::nullopt;
      }
      if (l->find('[') == std::string::npos)
        decls = "Z: f32[E]";
      else if (r->find('[') != std::string::npos)
        decls += ", Z: f32[E]";
      const char* op = n.type == "Add" ? " + " : n.type == "Sub" ? " - " : n.type == "Mul" ? " * " : " / ";
      body = *l + op + *r;
    }
    std::string value = n.outputs[0];
    size_t last = i;
    std::string act = activations_after(last, value, d.nodes);
    d.output = shape(value) ? *shape(value) : *y;
    d.text =
        "op onnx_" +
        std::string(n.type == "Add" || n.type == "Sub" || n.type == "Mul" || n.type == "Div" ? "binary" : "unary") +
        "(" + decls + ") -> Y: f32[E] {\n  Y[i] = " + apply(act, body) + "\n}\n";
    d.sizes = sizes_text({{"E", elements(*y)}});
    d.tensors["Y"] = value;
    if (decls.find("X:") != std::string::npos) d.tensors["X"] = n.inputs[0];
    if (decls.find("Z:") != std::string::npos) d.tensors["Z"] = n.inputs.size() > 1 ? n.inputs[1] : n.inputs[0];
    return d;
  }
};

}  // namespace

Imported map_graph(const Graph& g) { return Mapper(g).run(); }

}  // namespace tiletune::models::detail
