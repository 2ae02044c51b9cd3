// Convolution and pooling over 1, 2 or 3 spatial dimensions as tile ops: the window's
// geometry (pads, strides, dilations) becomes affine input indices, padding a `pad` value.
#include <algorithm>
#include <optional>

#include "ir/op.hpp"
#include "models/mapper.hpp"

namespace tiletune::models::detail {

namespace {

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

}  // namespace

std::optional<Draft> Mapper::conv(size_t i, std::string& why) {
  const Node& n = g_.nodes[i];
  // QLinearConv: x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias; ConvInteger:
  // x, w, x_zero, w_zero. The same convolution of the data operands, then see `quantized` below.
  const bool qlinear = n.type == "QLinearConv", integer = n.type == "ConvInteger";
  const size_t w_at = qlinear ? 3 : 1, bias_at = qlinear ? 8 : integer ? n.inputs.size() : 2;
  if (n.inputs.size() <= w_at) {
    why = n.type + " without its operands";
    return std::nullopt;
  }
  const Dims *x = shape(n.inputs[0]), *f = shape(n.inputs[w_at]), *y = shape(n.outputs[0]);
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
  bool has_bias = n.inputs.size() > bias_at && !n.inputs[bias_at].empty();
  if (has_bias) bias = n.inputs[bias_at];
  // BatchNormalization for inference folds into the filter and a bias: same kernel.
  if (auto next = only_consumer(d.value);
      next && !qlinear && !integer && foldable_batch_norm(g_.nodes[*next], d.value)) {
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
  d.tensors = {{"I", n.inputs[0]}, {"F", n.inputs[w_at]}};
  if (has_bias) d.tensors["bias"] = bias;
  if (qlinear || integer) {
    // The zero points are subtracted in i32 before the product; the input's padding must read
    // as its zero point, so padding needs the zero point as a constant.
    d.vendor = nullptr;
    d.name = std::string(qlinear ? "onnx_qlinear_" : "onnx_integer_") + d.name.substr(5);
    const std::string x_zero = n.inputs.size() > 2 && !n.inputs[2].empty() ? n.inputs[2] : "";
    const std::string w_zero = qlinear ? n.inputs[5] : n.inputs.size() > 3 ? n.inputs[3] : "";
    if (pads) {
      auto z = x_zero.empty() ? std::optional<float>(0.0f) : scalar(x_zero);
      if (!z) {
        why = n.type + " with padding and a zero point that is not a constant is not mapped";
        return std::nullopt;
      }
      d.inputs[0].replace(d.inputs[0].rfind(" pad 0"), 6, " pad " + ir::number_text(*z));
    }
    auto star = d.reduce.find("] * ");
    std::string xi = d.reduce.substr(3, star + 1 - 3), wi = d.reduce.substr(star + 4);
    std::string zx = x_zero.empty() ? "" : scalar_operand(d, x_zero, "x_zero"),
                zw = w_zero.empty() ? "" : scalar_operand(d, w_zero, "w_zero");
    d.reduce = "+= " + (zx.empty() ? xi : "(" + xi + " - " + zx + ")") + " * " +
               (zw.empty() ? wi : "(" + wi + " - " + zw + ")");
    if (qlinear) {
      std::string sx = scalar_operand(d, n.inputs[1], "x_scale"), sw = scalar_operand(d, n.inputs[4], "w_scale"),
                  sy = scalar_operand(d, n.inputs[6], "y_scale"), zy = scalar_operand(d, n.inputs[7], "y_zero");
      d.result = "f32(" + d.result + ") * (" + sx + " * " + sw + " / " + sy + ") + " + zy;
    }
  }
  return d;
}

std::optional<Draft> Mapper::pool(size_t i, std::string& why) {
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

std::optional<Draft> Mapper::global_pool(size_t i, std::string& why) {
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

}  // namespace tiletune::models::detail
