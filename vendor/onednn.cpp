// oneDNN at its best for a layer: convolutions and matmul weights in the layouts it picks
// (reordered once, outside the timed calls), pooling in its blocked layout, bias and the
// epilogue as its post-ops (eltwise, sum for a residual, binary for a broadcast operand).
#include <omp.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <oneapi/dnnl/dnnl.hpp>

#include "support/error.hpp"
#include "vendor/vendor.hpp"

namespace tiletune::vendor {

namespace {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;

[[noreturn]] void bad(const std::string& m) { throw_error(ErrorKind::InvalidInput, "vendor layer: " + m); }

std::int64_t count(const dims& d) {
  return std::accumulate(d.begin(), d.end(), std::int64_t(1), std::multiplies<std::int64_t>());
}

//! The plain row-major tag of a rank.
tag plain(size_t rank) {
  static const tag tags[] = {tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
  if (rank < 1 || rank > 6) bad("rank " + std::to_string(rank) + " is out of range");
  return tags[rank - 1];
}

using dtype = dnnl::memory::data_type;
dnnl::memory::desc md(const dims& d, tag t, dtype ty = dtype::f32) { return dnnl::memory::desc(d, ty, t); }

//! The element type of a role ("src", "weights", "bias", "dst") from the layer's optional
//! "types" ({"src": "bf16", ...}, tiletune's type names); f32 where it says none.
dtype type_of(const nlohmann::json& layer, const char* role) {
  if (!layer.contains("types") || !layer["types"].contains(role)) return dtype::f32;
  static const std::map<std::string, dtype> names = {{"f32", dtype::f32}, {"bf16", dtype::bf16}, {"f16", dtype::f16},
                                                     {"i32", dtype::s32}, {"i8", dtype::s8},     {"u8", dtype::u8}};
  auto it = names.find(layer["types"][role].get<std::string>());
  if (it == names.end()) bad("unknown element type " + layer["types"][role].dump() + " for " + role);
  return it->second;
}

dims ints(const nlohmann::json& layer, const char* key) {
  if (!layer.contains(key) || !layer[key].is_array()) bad(std::string("'") + key + "' must be a list of integers");
  dims d;
  for (auto& v : layer[key]) {
    if (!v.is_number_integer()) bad(std::string("'") + key + "' must hold integers");
    d.push_back(v.get<std::int64_t>());
  }
  return d;
}

//! A primitive with its memories and the buffers it owns.
struct Runner {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
  std::vector<std::vector<float>> owned;
  void operator()() {
    prim.execute(stream, args);
    stream.wait();
  }
  //! A plain memory on a caller's tensor, or on a buffer of its own.
  dnnl::memory plain_memory(const dims& d, float* data, dtype ty = dtype::f32) {
    if (!data) {
      owned.emplace_back(count(d), 0.5f);  // as many floats as elements: room for any type
      data = owned.back().data();
    }
    return dnnl::memory(md(d, plain(d.size()), ty), engine, data);
  }
  //! `from` reordered once into the layout `want`, if it differs.
  dnnl::memory in_layout(const dnnl::memory& from, const dnnl::memory::desc& want) {
    if (from.get_desc() == want) return from;
    dnnl::memory to(want, engine);
    dnnl::reorder(from, to).execute(stream, const_cast<dnnl::memory&>(from), to);
    stream.wait();
    return to;
  }
};

//! A binary post-op's operand: its position in the post-op chain, and its dimensions.
struct BinaryOperand {
  int position;
  dims shape;
};

//! The post-ops oneDNN fuses, from the layer's "post_ops"; what it cannot goes to `unfused`.
//! Its fast paths want the bias as the bias argument and a residual as the first post-op
//! (sum): a leading add that broadcasts along `channel` of `dst` becomes the bias when the
//! layer has none (`bias` set), and a full-size add is moved first (addition commutes with
//! the bias, which oneDNN applies before any post-op).
//! The epilogue steps the layer itself says no vendor fuses ("unfused"), as text; with
//! `post_ops_too`, its post-ops as well (for primitives that take none).
std::vector<std::string> unfused_steps(const nlohmann::json& layer, bool post_ops_too) {
  std::vector<std::string> out;
  if (post_ops_too && layer.contains("post_ops"))
    for (auto& p : layer["post_ops"]) out.push_back(p.dump());
  if (layer.contains("unfused"))
    for (auto& u : layer["unfused"]) out.push_back(u.is_string() ? u.get<std::string>() : u.dump());
  return out;
}

dnnl::post_ops post_ops(const nlohmann::json& layer, const dims& dst, size_t channel, bool& bias,
                        std::vector<BinaryOperand>& binary_operands, std::vector<std::string>& unfused) {
  dnnl::post_ops post;
  unfused = unfused_steps(layer, false);
  if (!layer.contains("post_ops")) return post;
  nlohmann::json steps = layer["post_ops"];
  auto operand_of = [](const nlohmann::json& p) {
    dims d;
    if (p.contains("binary") && p.contains("dims"))
      for (auto& v : p["dims"]) d.push_back(v.get<std::int64_t>());
    return d;
  };
  auto is_add = [](const nlohmann::json& p) { return p.contains("binary") && p["binary"] == "add"; };
  if (!bias && !steps.empty() && is_add(steps[0])) {
    dims d = operand_of(steps[0]);
    bool per_channel = d.size() == dst.size();
    for (size_t a = 0; a < d.size() && per_channel; ++a) per_channel = d[a] == (a == channel ? dst[a] : 1);
    if (per_channel) {
      bias = true;
      steps.erase(steps.begin());
    }
  }
  // A residual first, when only other adds come before it.
  for (size_t k = 0; k < steps.size(); ++k) {
    if (!is_add(steps[k])) break;
    if (operand_of(steps[k]) == dst) {
      auto residual = steps[k];
      steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(k));
      steps.insert(steps.begin(), residual);
      break;
    }
  }
  static const std::map<std::string, dnnl::algorithm> eltwise = {
      {"relu", dnnl::algorithm::eltwise_relu},           {"clip", dnnl::algorithm::eltwise_clip},
      {"logistic", dnnl::algorithm::eltwise_logistic},   {"tanh", dnnl::algorithm::eltwise_tanh},
      {"hardswish", dnnl::algorithm::eltwise_hardswish}, {"gelu_erf", dnnl::algorithm::eltwise_gelu_erf},
      {"linear", dnnl::algorithm::eltwise_linear},       {"swish", dnnl::algorithm::eltwise_swish},
      {"square", dnnl::algorithm::eltwise_square}};
  for (auto& p : steps) {
    if (p.contains("eltwise") && eltwise.count(p["eltwise"].get<std::string>())) {
      float alpha = p.value("alpha", p["eltwise"] == "swish" ? 1.0f : 0.0f);
      post.append_eltwise(1.0f, eltwise.at(p["eltwise"]), alpha, p.value("beta", 0.0f));
    } else if (p.contains("binary") && p.contains("dims")) {
      dims operand;
      for (auto& v : p["dims"]) operand.push_back(v.get<std::int64_t>());
      if (operand == dst && p["binary"] == "add") {
        post.append_sum(1.0f);  // a residual: accumulated into the output
      } else if (operand.size() == dst.size()) {
        binary_operands.push_back({post.len(), operand});
        post.append_binary(p["binary"] == "add" ? dnnl::algorithm::binary_add : dnnl::algorithm::binary_mul,
                           md(operand, plain(operand.size())));
      } else {
        unfused.push_back(p.dump());
      }
    } else {
      unfused.push_back(p.dump());
    }
  }
  return post;
}

//! Binds the binary post-ops' operands (after src, weights and bias in `tensors`).
void bind_binary(Runner& r, const std::vector<BinaryOperand>& operands, const std::vector<float*>& tensors,
                 size_t first) {
  for (size_t k = 0; k < operands.size(); ++k)
    r.args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(operands[k].position) | DNNL_ARG_SRC_1] =
        r.plain_memory(operands[k].shape, first + k < tensors.size() ? tensors[first + k] : nullptr);
}

float* at(const std::vector<float*>& t, size_t k) { return k < t.size() ? t[k] : nullptr; }

Layer convolution(const nlohmann::json& l, const std::vector<float*>& t) {
  auto r = std::make_shared<Runner>();
  dims src = ints(l, "src"), w = ints(l, "weights"), st = ints(l, "strides"), dil = ints(l, "dilations"),
       pb = ints(l, "pads_begin"), pe = ints(l, "pads_end");
  std::int64_t G = l.value("groups", std::int64_t(1));
  size_t sp = src.size() - 2;
  if (src.size() < 3 || w.size() != src.size() || st.size() != sp || dil.size() != sp || pb.size() != sp ||
      pe.size() != sp || G < 1 || w[0] % G)
    bad("convolution geometry does not fit together");
  dims dst = {src[0], w[0]};
  for (size_t a = 0; a < sp; ++a) {
    dst.push_back((src[2 + a] + pb[a] + pe[a] - dil[a] * (w[2 + a] - 1) - 1) / st[a] + 1);
    dil[a] -= 1;  // oneDNN counts the gaps
  }
  dims wd = w;
  if (G > 1) {
    wd = {G, w[0] / G};
    wd.insert(wd.end(), w.begin() + 1, w.end());
  }
  bool bias = l.value("bias", false);
  Layer layer;
  std::vector<BinaryOperand> binary;
  dnnl::primitive_attr attr;
  attr.set_post_ops(post_ops(l, dst, 1, bias, binary, layer.unfused));
  const dtype ts = type_of(l, "src"), tw = type_of(l, "weights"), tbias = type_of(l, "bias"), td = type_of(l, "dst");
  auto bias_md = bias ? md({w[0]}, tag::a, tbias) : dnnl::memory::desc();
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                    md(src, tag::any, ts), md(wd, tag::any, tw), bias_md, md(dst, tag::any, td), st,
                                    dil, pb, pe);
  dnnl::convolution_forward::primitive_desc pd(d, attr, r->engine);
  r->prim = dnnl::convolution_forward(pd);
  size_t k = 0;
  r->args[DNNL_ARG_SRC] = r->in_layout(r->plain_memory(src, at(t, k++), ts), pd.src_desc());
  r->args[DNNL_ARG_WEIGHTS] = r->in_layout(r->plain_memory(wd, at(t, k++), tw), pd.weights_desc());
  if (bias) r->args[DNNL_ARG_BIAS] = r->plain_memory({w[0]}, at(t, k++), tbias);
  bind_binary(*r, binary, t, k);
  r->args[DNNL_ARG_DST] = dnnl::memory(pd.dst_desc(), r->engine);  // its layout, left there
  layer.name = "oneDNN convolution (its layout)";
  layer.run = [r] { (*r)(); };
  return layer;
}

Layer matmul(const nlohmann::json& l, const std::vector<float*>& t) {
  auto r = std::make_shared<Runner>();
  dims a = ints(l, "a"), b = ints(l, "b");
  if (a.size() != b.size() || a.size() < 2 || a.size() > 3 || a.back() != b[b.size() - 2])
    bad("matmul operands do not fit together");
  bool ta = l.value("trans_a", false), tb = l.value("trans_b", false), bias = l.value("bias", false);
  bool batched = a.size() == 3;
  dims dst = a;
  dst.back() = b.back();
  // A transposed operand is its logical shape stored with the last two dimensions swapped.
  auto stored = [&](bool trans) { return trans ? (batched ? tag::acb : tag::ba) : plain(a.size()); };
  dims bias_dims = batched ? dims{1, 1, b.back()} : dims{1, b.back()};
  Layer layer;
  std::vector<BinaryOperand> binary;
  dnnl::primitive_attr attr;
  // "alpha" scales the result (an int8 layer's requantization scale); "dst_zero_point" shifts it.
  float alpha = l.value("alpha", 1.0f);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (int zp = l.value("dst_zero_point", 0)) attr.set_zero_points(DNNL_ARG_DST, 0, {zp});
  const dtype ts = type_of(l, "src"), tw = type_of(l, "weights"), tbias = type_of(l, "bias"), td = type_of(l, "dst");
  attr.set_post_ops(post_ops(l, dst, dst.size() - 1, bias, binary, layer.unfused));
  // Weights of a layer (not batched: constants of the model) in the layout oneDNN picks.
  auto b_want = batched ? md(b, stored(tb), tw) : md(b, tag::any, tw);
  dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(md(a, stored(ta), ts), b_want,
                         bias ? md(bias_dims, plain(bias_dims.size()), tbias) : dnnl::memory::desc(),
                         md(dst, plain(dst.size()), td)),
      attr, r->engine);
  r->prim = dnnl::matmul(pd);
  size_t k = 0;
  // Plain buffers of the operands' element counts, seen in their stored layouts.
  auto a_mem = r->plain_memory(a, at(t, k++), ts);
  r->args[DNNL_ARG_SRC] = dnnl::memory(md(a, stored(ta), ts), r->engine, a_mem.get_data_handle());
  auto b_mem = r->plain_memory(b, at(t, k++), tw);
  r->args[DNNL_ARG_WEIGHTS] =
      r->in_layout(dnnl::memory(md(b, stored(tb), tw), r->engine, b_mem.get_data_handle()), pd.weights_desc());
  if (bias) r->args[DNNL_ARG_BIAS] = r->plain_memory(bias_dims, at(t, k++), tbias);
  bind_binary(*r, binary, t, k);
  k += binary.size();
  r->args[DNNL_ARG_DST] = r->plain_memory(dst, at(t, k), td);
  layer.name = std::string("oneDNN matmul") + (l.contains("types") ? " " + l["types"].dump() : "") +
               (bias ? " + bias" : "") + (l.value("post_ops", nlohmann::json::array()).empty() ? "" : " + post-ops");
  layer.run = [r] { (*r)(); };
  return layer;
}

Layer pooling(const nlohmann::json& l, const std::vector<float*>& t) {
  auto r = std::make_shared<Runner>();
  dims src = ints(l, "src"), k = ints(l, "kernel"), st = ints(l, "strides"), pb = ints(l, "pads_begin"),
       pe = ints(l, "pads_end");
  dims dil = l.contains("dilations") ? ints(l, "dilations") : dims(k.size(), 1);
  size_t sp = src.size() - 2;
  if (src.size() < 3 || src.size() > 5 || k.size() != sp || st.size() != sp || pb.size() != sp || pe.size() != sp)
    bad("pooling geometry does not fit together");
  Layer layer;
  if (std::any_of(dil.begin(), dil.end(), [](std::int64_t v) { return v != 1; })) return layer;  // not timed
  dims dst = {src[0], src[1]};
  for (size_t a = 0; a < sp; ++a) dst.push_back((src[2 + a] + pb[a] + pe[a] - k[a]) / st[a] + 1);
  auto alg = l.value("algorithm", "max") == "max" ? dnnl::algorithm::pooling_max
                                                  : dnnl::algorithm::pooling_avg_include_padding;
  // Its blocked layout (plain pooling is a slow reference path): channels in vector blocks.
#if defined(__AVX512F__)
  const tag blocked[] = {tag::nCw16c, tag::nChw16c, tag::nCdhw16c};
#else
  const tag blocked[] = {tag::nCw8c, tag::nChw8c, tag::nCdhw8c};
#endif
  dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, md(src, blocked[sp - 1]),
                                md(dst, blocked[sp - 1]), st, k, pb, pe);
  dnnl::pooling_forward::primitive_desc pd(d, r->engine);
  r->prim = dnnl::pooling_forward(pd);
  r->args[DNNL_ARG_SRC] = r->in_layout(r->plain_memory(src, at(t, 0)), pd.src_desc());
  r->args[DNNL_ARG_DST] = dnnl::memory(pd.dst_desc(), r->engine);
  layer.name = "oneDNN pooling (blocked)";
  layer.run = [r] { (*r)(); };
  layer.unfused = unfused_steps(l, true);
  return layer;
}

Layer rows(const nlohmann::json& l, const std::vector<float*>& t, bool softmax) {
  auto r = std::make_shared<Runner>();
  dims src = ints(l, "src");
  if (src.size() != 2) bad("softmax and layer normalisation take [rows, D]");
  Layer layer;
  if (softmax) {
    dnnl::softmax_forward::primitive_desc pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, md(src, tag::ab), 1), r->engine);
    r->prim = dnnl::softmax_forward(pd);
    r->args = {{DNNL_ARG_SRC, r->plain_memory(src, at(t, 0))}, {DNNL_ARG_DST, r->plain_memory(src, at(t, 1))}};
    layer.name = "oneDNN softmax";
  } else {
    bool scale_shift = l.value("scale_shift", false);
    auto flags = scale_shift ? dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift
                             : dnnl::normalization_flags::none;
    dnnl::layer_normalization_forward::primitive_desc pd(
        dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, md(src, tag::ab),
                                                l.value("epsilon", 1e-5f), flags),
        r->engine);
    r->prim = dnnl::layer_normalization_forward(pd);
    size_t k = 0;
    r->args[DNNL_ARG_SRC] = r->plain_memory(src, at(t, k++));
    if (scale_shift) {
      r->args[DNNL_ARG_SCALE] = r->plain_memory({src[1]}, at(t, k++));
      r->args[DNNL_ARG_SHIFT] = r->plain_memory({src[1]}, at(t, k++));
    }
    r->args[DNNL_ARG_DST] = r->plain_memory(src, at(t, k));
    layer.name = "oneDNN layer_normalization";
  }
  layer.run = [r] { (*r)(); };
  layer.unfused = unfused_steps(l, true);
  return layer;
}

}  // namespace

bool available() { return true; }

Layer onednn_layer(const nlohmann::json& layer, int threads, const std::vector<float*>& tensors) {
  if (!layer.is_object() || !layer.contains("primitive") || !layer["primitive"].is_string())
    bad("a JSON object with \"primitive\" is wanted");
  omp_set_num_threads(threads);
  const std::string p = layer["primitive"];
  try {
    if (p == "convolution") return convolution(layer, tensors);
    if (p == "matmul") return matmul(layer, tensors);
    if (p == "pooling") return pooling(layer, tensors);
    if (p == "softmax") return rows(layer, tensors, true);
    if (p == "layer_normalization") return rows(layer, tensors, false);
  } catch (const dnnl::error& e) {
    // oneDNN refusing a geometry (it has no implementation for it) is not timed.
    return {"oneDNN has no " + p + " for this layer: " + e.what(), {}, {}};
  } catch (const nlohmann::json::exception& e) {
    bad(e.what());
  }
  return {};
}

}  // namespace tiletune::vendor
