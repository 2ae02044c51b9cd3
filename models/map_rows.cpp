// Matmul, softmax, normalisations, reductions and elementwise ops as tile ops: rows and the
// axes they reduce or broadcast along become the op's groups.
#include <algorithm>
#include <cctype>
#include <optional>

#include "ir/op.hpp"
#include "models/mapper.hpp"

namespace tiletune::models::detail {

std::optional<Draft> Mapper::quantized_matmul(size_t i, std::string& why) {
  const Node& n = g_.nodes[i];
  const bool qlinear = n.type == "QLinearMatMul";
  const size_t b_at = qlinear ? 3 : 1;
  if (n.inputs.size() <= b_at) {
    why = n.type + " without its operands";
    return std::nullopt;
  }
  const Dims *a = shape(n.inputs[0]), *b = shape(n.inputs[b_at]), *y = shape(n.outputs[0]);
  // [..., M, K] x [K, N], or a batch of the same leading dimensions on both sides.
  const bool batched =
      a && b && a->size() == b->size() && a->size() >= 3 && std::equal(a->begin(), a->end() - 2, b->begin());
  if (!a || !b || !y || a->size() < 2 || (b->size() != 2 && !batched)) {
    why = n.type + " is mapped for [..., M, K] x [K, N] and same-batch operands of known shapes";
    return std::nullopt;
  }
  Draft d;
  const size_t rank = y->size();
  std::int64_t K = a->back(), N = b->back();
  std::int64_t M = batched ? (*a)[a->size() - 2] : elements(*a) / K, G = batched ? elements(*a) / (M * K) : 1;
  std::string gv = batched ? "g, " : "", gd = batched ? "G, " : "";
  if (batched)
    d.groups = {{0, rank - 2, {{"g", "G"}}}, {rank - 2, rank - 1, {{"m", "M"}}}, {rank - 1, rank, {{"n", "N"}}}};
  else
    d.groups = {{0, rank - 1, {{"m", "M"}}}, {rank - 1, rank, {{"n", "N"}}}};
  d.name = qlinear ? "onnx_qlinear_matmul" : "onnx_matmul_integer";
  d.inputs = {"A: " + tile_type(n.inputs[0]) + "[" + gd + "M, K]",
              "B: " + tile_type(n.inputs[b_at]) + "[" + gd + "K, N]"};
  d.tensors = {{"A", n.inputs[0]}, {"B", n.inputs[b_at]}};
  auto zero = [&](size_t k, const char* name) {
    return k < n.inputs.size() && !n.inputs[k].empty() ? " - " + scalar_operand(d, n.inputs[k], name) : "";
  };
  std::string za = zero(2, "a_zero"), zb = zero(qlinear ? 5 : 3, "b_zero");
  auto operand = [](const std::string& x, const std::string& z) { return z.empty() ? x : "(" + x + z + ")"; };
  d.reduce = "+= " + operand("A[" + gv + "m, k]", za) + " * " + operand("B[" + gv + "k, n]", zb);
  d.result = "acc" + d.index();
  if (qlinear) {
    std::string sa = scalar_operand(d, n.inputs[1], "a_scale"), sb = scalar_operand(d, n.inputs[4], "b_scale");
    std::string sy = scalar_operand(d, n.inputs[6], "y_scale"), zy = scalar_operand(d, n.inputs[7], "y_zero");
    // Stored into u8 or i8: rounded to nearest even and saturated, as QLinearMatMul does.
    d.result = "f32(acc" + d.index() + ") * (" + sa + " * " + sb + " / " + sy + ") + " + zy;
  }
  d.sizes = {{"M", M}, {"K", K}, {"N", N}};
  if (batched) d.sizes.push_back({"G", G});
  return d;
}

std::optional<Draft> Mapper::matmul(size_t i, std::string& why) {
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

std::optional<Draft> Mapper::softmax(size_t i, std::string& why) {
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

std::optional<Draft> Mapper::batch_norm(size_t i, std::string& why) {
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

Draft Mapper::layer_norm_draft(const Dims& x, size_t axis, float epsilon) {
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

std::optional<Draft> Mapper::layer_norm(size_t i, std::string& why) {
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

std::optional<Draft> Mapper::layer_norm_pattern(size_t i) {
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

std::optional<Draft> Mapper::reduce(size_t i, std::string& why) {
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

std::optional<Draft> Mapper::elementwise(size_t i, std::string& why) {
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

}  // namespace tiletune::models::detail
