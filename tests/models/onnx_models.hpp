// tests/models/onnx_models.hpp — for the import tests: ONNX graphs written with ONNX's protobuf
// API (small models, and the layer structure of ResNet-50, MobileNetV2 and a BERT-base encoder
// layer: shapes are what import reads; weights are constant initializers), and a runner of an
// imported model's tasks through their naive kernels.
#pragma once
#include <onnx/onnx_pb.h>

#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "ir/loop_nest.hpp"
#include "ir/parse.hpp"
#include "models/graph.hpp"

namespace tiletune::test {

inline void add_tensor(onnx::GraphProto* g, const std::string& name, const std::vector<std::int64_t>& dims,
                       float value) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  std::int64_t n = 1;
  for (auto d : dims) {
    t->add_dims(d);
    n *= d;
  }
  for (std::int64_t i = 0; i < n; ++i) t->add_float_data(value);
}
//! An int64 initializer (the shapes of Reshape, the axes of reductions).
inline void add_ints_tensor(onnx::GraphProto* g, const std::string& name, const std::vector<std::int64_t>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<std::int64_t>(values.size()));
  for (auto v : values) t->add_int64_data(v);
}
inline onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& type, const std::string& name,
                                 std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(type);
  n->set_name(name);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}
inline void set_ints(onnx::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

inline void set_int(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void add_output(onnx::GraphProto* g, const std::string& name) {
  auto* out = g->add_output();
  out->set_name(name);
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

//! A model of one opset whose graph is named `name`.
inline onnx::GraphProto* new_graph(onnx::ModelProto& model, const std::string& name, int opset) {
  model.set_ir_version(7);
  model.add_opset_import()->set_version(opset);
  model.mutable_graph()->set_name(name);
  return model.mutable_graph();
}
//! A float graph input; with `dynamic_first`, its first dimension is that named, unbound one.
inline void add_input(onnx::GraphProto* g, const std::string& name, const std::vector<std::int64_t>& dims,
                      const std::string& dynamic_first = "") {
  auto* tt = g->add_input();
  tt->set_name(name);
  auto* type = tt->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  if (!dynamic_first.empty()) type->mutable_shape()->add_dim()->set_dim_param(dynamic_first);
  for (auto d : dims) type->mutable_shape()->add_dim()->set_dim_value(d);
}
inline std::string save(const onnx::ModelProto& model, const std::string& path) {
  std::ofstream f(path, std::ios::binary);
  model.SerializeToOstream(&f);
  return path;
}

//! Two residual blocks of Conv+BatchNorm+Relu, Conv+BatchNorm, Add, Relu, then pooling,
//! Flatten and Gemm, with an Erf and an unmapped Sin after it.
inline std::string write_resnet_blocks(const TempDir& dir) {
  onnx::ModelProto model;
  auto* g = new_graph(model, "two_blocks", 13);
  add_input(g, "image", {8, 10, 10}, "batch");
  std::string x = "image";
  for (int b = 0; b < 2; ++b) {
    std::string p = "b" + std::to_string(b) + "_";
    for (int c = 0; c < 2; ++c) {
      std::string q = p + std::to_string(c);
      add_tensor(g, q + "w", {8, 8, 3, 3}, 0.01f);
      for (auto* s : {"scale", "bias", "mean", "var"}) add_tensor(g, q + s, {8}, 1.0f);
      auto* conv = add_node(g, "Conv", q + "conv", {c ? p + "r0" : x, q + "w"}, {q + "c"});
      set_ints(conv, "pads", {1, 1, 1, 1});
      add_node(g, "BatchNormalization", q + "bn", {q + "c", q + "scale", q + "bias", q + "mean", q + "var"},
               {c ? p + "n1" : q + "n"});
      if (!c) add_node(g, "Relu", q + "relu", {q + "n"}, {p + "r0"});
    }
    add_node(g, "Add", p + "add", {p + "n1", x}, {p + "sum"});
    add_node(g, "Relu", p + "relu", {p + "sum"}, {p + "out"});
    x = p + "out";
  }
  add_node(g, "GlobalAveragePool", "pool", {x}, {"pooled"});
  add_node(g, "Flatten", "flatten", {"pooled"}, {"flat"});
  add_tensor(g, "fc_w", {8, 5}, 0.1f);
  add_tensor(g, "fc_b", {5}, 0.0f);
  add_node(g, "Gemm", "fc", {"flat", "fc_w", "fc_b"}, {"logits"});
  add_node(g, "Erf", "odd", {"logits"}, {"odd_out"});
  add_node(g, "Sin", "unmapped", {"odd_out"}, {"sin_out"});
  auto* out = g->add_output();
  out->set_name("sin_out");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return save(model, dir.file("blocks.onnx"));
}

//! ResNet-50 v1.5 (torchvision's: the stride on the 3x3 of a bottleneck) as an ONNX graph for
//! a dynamic batch; weights are initializers of zeros (shapes are what import reads).
inline std::string write_resnet50(const TempDir& dir) {
  onnx::ModelProto model;
  auto* g = new_graph(model, "resnet50", 13);
  add_input(g, "data", {3, 224, 224}, "N");
  int counter = 0;
  auto conv_bn = [&](const std::string& x, int cin, int cout, int k, int stride, bool relu) {
    std::string q = "l" + std::to_string(counter++) + "_";
    add_tensor(g, q + "w", {cout, cin, k, k}, 0.0f);
    for (auto* s : {"scale", "bias", "mean", "var"}) add_tensor(g, q + s, {cout}, 1.0f);
    auto* conv = add_node(g, "Conv", q + "conv", {x, q + "w"}, {q + "c"});
    set_ints(conv, "strides", {stride, stride});
    set_ints(conv, "pads", {k / 2, k / 2, k / 2, k / 2});
    add_node(g, "BatchNormalization", q + "bn", {q + "c", q + "scale", q + "bias", q + "mean", q + "var"}, {q + "n"});
    if (!relu) return q + "n";
    add_node(g, "Relu", q + "relu", {q + "n"}, {q + "r"});
    return q + "r";
  };
  std::string x = conv_bn("data", 3, 64, 7, 2, true);
  auto* pool = add_node(g, "MaxPool", "pool0", {x}, {"pooled0"});
  set_ints(pool, "kernel_shape", {3, 3});
  set_ints(pool, "strides", {2, 2});
  set_ints(pool, "pads", {1, 1, 1, 1});
  x = "pooled0";
  int cin = 64;
  const int blocks[] = {3, 4, 6, 3}, widths[] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage)
    for (int b = 0; b < blocks[stage]; ++b) {
      int w = widths[stage], stride = b == 0 && stage > 0 ? 2 : 1;
      std::string y = conv_bn(x, cin, w, 1, 1, true);
      y = conv_bn(y, w, w, 3, stride, true);
      y = conv_bn(y, w, 4 * w, 1, 1, false);
      std::string skip = b == 0 ? conv_bn(x, cin, 4 * w, 1, stride, false) : x;
      std::string q = "s" + std::to_string(stage) + "b" + std::to_string(b);
      add_node(g, "Add", q + "add", {y, skip}, {q + "sum"});
      add_node(g, "Relu", q + "relu", {q + "sum"}, {q + "out"});
      x = q + "out";
      cin = 4 * w;
    }
  add_node(g, "GlobalAveragePool", "gap", {x}, {"gap_out"});
  add_node(g, "Flatten", "flatten", {"gap_out"}, {"flat"});
  add_tensor(g, "fc_w", {1000, 2048}, 0.0f);
  add_tensor(g, "fc_b", {1000}, 0.0f);
  auto* fc = add_node(g, "Gemm", "fc", {"flat", "fc_w", "fc_b"}, {"logits"});
  auto* tb = fc->add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  auto* out = g->add_output();
  out->set_name("logits");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return save(model, dir.file("resnet50.onnx"));
}

//! torchvision's MobileNetV2 (width 1.0) as exported: Conv + BatchNorm + Clip(0, 6) (ReLU6, its
//! bounds constant inputs), inverted residual blocks of expanding 1x1, depthwise 3x3 and
//! projecting 1x1, residual Adds where the stride is 1 and the width stays, then 1x1 to 1280,
//! global pooling, Flatten and the classifier. For a dynamic batch.
inline std::string write_mobilenet_v2(const TempDir& dir) {
  onnx::ModelProto model;
  auto* g = new_graph(model, "mobilenet_v2", 13);
  add_input(g, "input", {3, 224, 224}, "N");
  add_tensor(g, "zero", {}, 0.0f);
  add_tensor(g, "six", {}, 6.0f);
  int counter = 0;
  auto conv_bn = [&](const std::string& x, int cin, int cout, int k, int stride, int groups, bool relu6) {
    std::string q = "l" + std::to_string(counter++) + "_";
    add_tensor(g, q + "w", {cout, cin / groups, k, k}, 0.0f);
    for (auto* s : {"scale", "bias", "mean", "var"}) add_tensor(g, q + s, {cout}, 1.0f);
    auto* conv = add_node(g, "Conv", q + "conv", {x, q + "w"}, {q + "c"});
    set_ints(conv, "strides", {stride, stride});
    set_ints(conv, "pads", {k / 2, k / 2, k / 2, k / 2});
    set_int(conv, "group", groups);
    add_node(g, "BatchNormalization", q + "bn", {q + "c", q + "scale", q + "bias", q + "mean", q + "var"}, {q + "n"});
    if (!relu6) return q + "n";
    add_node(g, "Clip", q + "relu6", {q + "n", "zero", "six"}, {q + "r"});
    return q + "r";
  };
  std::string x = conv_bn("input", 3, 32, 3, 2, 1, true);
  int cin = 32;
  const int settings[][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                             {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int block = 0;
  for (auto& s : settings)
    for (int r = 0; r < s[2]; ++r) {
      int stride = r == 0 ? s[3] : 1, hidden = cin * s[0];
      std::string y = s[0] == 1 ? x : conv_bn(x, cin, hidden, 1, 1, 1, true);
      y = conv_bn(y, hidden, hidden, 3, stride, hidden, true);
      y = conv_bn(y, hidden, s[1], 1, 1, 1, false);
      if (stride == 1 && cin == s[1]) {
        std::string sum = "b" + std::to_string(block) + "_sum";
        add_node(g, "Add", "b" + std::to_string(block) + "_add", {x, y}, {sum});
        y = sum;
      }
      x = y;
      cin = s[1];
      ++block;
    }
  x = conv_bn(x, 320, 1280, 1, 1, 1, true);
  add_node(g, "GlobalAveragePool", "gap", {x}, {"gap_out"});
  add_node(g, "Flatten", "flatten", {"gap_out"}, {"flat"});
  add_tensor(g, "fc_w", {1000, 1280}, 0.0f);
  add_tensor(g, "fc_b", {1000}, 0.0f);
  auto* fc = add_node(g, "Gemm", "fc", {"flat", "fc_w", "fc_b"}, {"logits"});
  set_int(fc, "transB", 1);
  add_output(g, "logits");
  return save(model, dir.file("mobilenet_v2.onnx"));
}

//! A BERT-base encoder layer as PyTorch exports it at opset 13: Q, K, V projections (MatMul +
//! Add), Reshape/Transpose into 12 heads, Q*K^T / 8 + mask, Softmax, P*V, the output projection
//! with its residual Add, LayerNorm written out (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt,
//! Div, Mul, Add), the feed-forward layer with exact GELU written out (Div, Erf, Add, Mul, Mul),
//! its residual Add and the second LayerNorm. Inputs `x` [B, S, 768] and `mask` [B, 1, 1, S],
//! both dynamic. With `layers` > 1, that many layers in a row (BERT-base has 12), the later ones'
//! nodes prefixed "l<i>_", and the weights graph inputs (shapes only) to keep the file small.
inline std::string write_bert_layer(const TempDir& dir, int layers = 1) {
  const std::int64_t hidden = 768, heads = 12, head = 64, ffn = 3072;
  onnx::ModelProto model;
  auto* g = new_graph(model, layers == 1 ? "bert_layer" : "bert_" + std::to_string(layers) + "_layers", 13);
  auto weight = [&](const std::string& name, const std::vector<std::int64_t>& dims, float value) {
    if (layers == 1)
      add_tensor(g, name, dims, value);
    else
      add_input(g, name, dims);
  };
  {
    auto* tt = g->add_input();
    tt->set_name("x");
    auto* type = tt->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::FLOAT);
    type->mutable_shape()->add_dim()->set_dim_param("B");
    type->mutable_shape()->add_dim()->set_dim_param("S");
    type->mutable_shape()->add_dim()->set_dim_value(hidden);
    auto* mask = g->add_input();
    mask->set_name("mask");
    auto* mt = mask->mutable_type()->mutable_tensor_type();
    mt->set_elem_type(onnx::TensorProto::FLOAT);
    mt->mutable_shape()->add_dim()->set_dim_param("B");
    mt->mutable_shape()->add_dim()->set_dim_value(1);
    mt->mutable_shape()->add_dim()->set_dim_value(1);
    mt->mutable_shape()->add_dim()->set_dim_param("S");
  }
  add_ints_tensor(g, "heads_shape", {0, 0, heads, head});
  add_ints_tensor(g, "merged_shape", {0, 0, hidden});
  add_ints_tensor(g, "last_axis", {-1});
  add_tensor(g, "scale_div", {}, 8.0f);
  add_tensor(g, "two", {}, 2.0f);
  add_tensor(g, "eps", {}, 1e-12f);
  add_tensor(g, "sqrt2", {}, 1.4142135f);
  add_tensor(g, "one", {}, 1.0f);
  add_tensor(g, "half", {}, 0.5f);
  auto linear = [&](const std::string& name, const std::string& x, std::int64_t in, std::int64_t out) {
    weight(name + "_w", {in, out}, 0.0f);
    weight(name + "_b", {out}, 0.0f);
    add_node(g, "MatMul", name + "_mm", {x, name + "_w"}, {name + "_mm_out"});
    add_node(g, "Add", name + "_bias", {name + "_mm_out", name + "_b"}, {name + "_out"});
    return name + "_out";
  };
  auto split_heads = [&](const std::string& name, const std::string& x, std::vector<std::int64_t> perm) {
    add_node(g, "Reshape", name + "_reshape", {x, "heads_shape"}, {name + "_4d"});
    set_ints(add_node(g, "Transpose", name + "_transpose", {name + "_4d"}, {name + "_heads"}), "perm", perm);
    return name + "_heads";
  };
  auto layer_norm = [&](const std::string& name, const std::string& x) {
    weight(name + "_gamma", {hidden}, 1.0f);
    weight(name + "_beta", {hidden}, 0.0f);
    set_ints(add_node(g, "ReduceMean", name + "_mean", {x}, {name + "_mu"}), "axes", {-1});
    add_node(g, "Sub", name + "_sub", {x, name + "_mu"}, {name + "_centred"});
    add_node(g, "Pow", name + "_pow", {name + "_centred", "two"}, {name + "_sq"});
    set_ints(add_node(g, "ReduceMean", name + "_var", {name + "_sq"}, {name + "_v"}), "axes", {-1});
    add_node(g, "Add", name + "_eps", {name + "_v", "eps"}, {name + "_ve"});
    add_node(g, "Sqrt", name + "_sqrt", {name + "_ve"}, {name + "_sd"});
    add_node(g, "Div", name + "_div", {name + "_centred", name + "_sd"}, {name + "_normed"});
    add_node(g, "Mul", name + "_scale", {name + "_normed", name + "_gamma"}, {name + "_scaled"});
    add_node(g, "Add", name + "_shift", {name + "_scaled", name + "_beta"}, {name + "_out"});
    return name + "_out";
  };
  std::string x = "x";
  for (int layer = 0; layer < layers; ++layer) {
    const std::string p = layer == 0 ? "" : "l" + std::to_string(layer) + "_";
    std::string q = split_heads(p + "q", linear(p + "q", x, hidden, hidden), {0, 2, 1, 3});
    std::string k = split_heads(p + "k", linear(p + "k", x, hidden, hidden), {0, 2, 3, 1});
    std::string v = split_heads(p + "v", linear(p + "v", x, hidden, hidden), {0, 2, 1, 3});
    add_node(g, "MatMul", p + "scores", {q, k}, {p + "scores_out"});
    add_node(g, "Div", p + "scores_scale", {p + "scores_out", "scale_div"}, {p + "scores_scaled"});
    add_node(g, "Add", p + "scores_mask", {p + "scores_scaled", "mask"}, {p + "scores_masked"});
    set_int(add_node(g, "Softmax", p + "probs", {p + "scores_masked"}, {p + "probs_out"}), "axis", -1);
    add_node(g, "MatMul", p + "context", {p + "probs_out", v}, {p + "context_out"});
    set_ints(add_node(g, "Transpose", p + "context_transpose", {p + "context_out"}, {p + "context_t"}), "perm",
             {0, 2, 1, 3});
    add_node(g, "Reshape", p + "context_reshape", {p + "context_t", "merged_shape"}, {p + "context_merged"});
    std::string attn = linear(p + "attn_out", p + "context_merged", hidden, hidden);
    add_node(g, "Add", p + "attn_residual", {attn, x}, {p + "attn_sum"});
    std::string h = layer_norm(p + "ln1", p + "attn_sum");
    std::string f = linear(p + "ffn1", h, hidden, ffn);
    add_node(g, "Div", p + "gelu_div", {f, "sqrt2"}, {p + "gelu_scaled"});
    add_node(g, "Erf", p + "gelu_erf", {p + "gelu_scaled"}, {p + "gelu_e"});
    add_node(g, "Add", p + "gelu_add", {p + "gelu_e", "one"}, {p + "gelu_e1"});
    add_node(g, "Mul", p + "gelu_mul", {f, p + "gelu_e1"}, {p + "gelu_m"});
    add_node(g, "Mul", p + "gelu_half", {p + "gelu_m", "half"}, {p + "gelu_out"});
    std::string f2 = linear(p + "ffn2", p + "gelu_out", ffn, hidden);
    add_node(g, "Add", p + "ffn_residual", {f2, h}, {p + "ffn_sum"});
    x = layer_norm(p + "ln2", p + "ffn_sum");
  }
  add_output(g, x);
  return save(model, dir.file(layers == 1 ? "bert_layer.onnx" : "bert_" + std::to_string(layers) + "_layers.onnx"));
}

//! Runs the naive kernel of one occurrence of a task: its inputs are the ONNX values named by
//! the occurrence's tensors, looked up in `values`; its output is stored there.
inline void run_task(const models::Task& task, size_t occurrence, std::map<std::string, std::vector<float>>& values,
                     const TempDir& dir) {
  ir::Workload w = ir::bind(ir::parse_op(task.op_text), ir::parse_sizes(task.sizes));
  auto be = codegen::make_backend("cpu");
  ir::Schedule s = ir::naive_schedule(w);
  ir::LoopNest nest = ir::lower(w, s, be->target().traits);
  std::string src = dir.file(w.key + ".cpp"), lib = dir.file(w.key + ".so");
  std::ofstream(src) << be->emit(w, nest, s.to_json());
  std::string log = be->build(src, lib);
  REQUIRE_MESSAGE(log.empty(), log);
  codegen::KernelShape shape;
  std::vector<std::vector<float>> data;
  const auto& tensors = task.tensors.at(occurrence);
  for (auto& b : w.buffers) {
    if (b.role == ir::Buffer::Role::Temp) continue;
    shape.tensor_floats.push_back(b.elements());
    std::vector<float> v(b.elements(), NAN);
    if (b.role == ir::Buffer::Role::Input) {
      const std::string& value = tensors.at(b.name);
      REQUIRE_MESSAGE(values.count(value), "no data for " << value);
      const auto& given = values.at(value);
      REQUIRE(static_cast<std::int64_t>(given.size()) == b.elements());
      // Values as numbers, stored in the tensor's element type (exact for the ONNX data's).
      for (std::int64_t e = 0; e < b.elements(); ++e) ir::store_element(b.dtype, v.data(), e, given[e]);
    }
    data.push_back(v);
  }
  shape.workspace_floats = nest.workspace_floats;
  auto kernel = be->load(lib, shape);
  std::vector<float*> args;
  for (auto& v : data) args.push_back(v.data());
  std::vector<float> workspace(nest.workspace_floats + 16);
  kernel->run(args.data(), workspace.data(), codegen::Kernel::kUpload | codegen::Kernel::kDownload);
  const ir::Buffer& y = w.buffers[w.buffer_index("Y")];
  std::vector<float> out(y.elements());
  for (std::int64_t e = 0; e < y.elements(); ++e)
    out[e] = static_cast<float>(ir::load_element(y.dtype, data.back().data(), e));
  values[tensors.at("Y")] = out;
}

//! Runs a model's tasks in graph order (a graph without layout-only nodes between kernels),
//! from `values` holding its inputs; the model's constants are added.
inline void run_model(const models::detail::Graph& g, const models::Imported& m,
                      std::map<std::string, std::vector<float>>& values, const TempDir& dir) {
  for (auto& [name, v] : g.values) values.emplace(name, v);
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < g.nodes.size(); ++i) position[g.nodes[i].name] = i;
  std::vector<std::tuple<size_t, size_t, size_t>> order;  // first node, task, occurrence
  for (size_t t = 0; t < m.tasks.size(); ++t)
    for (size_t o = 0; o < m.tasks[t].nodes.size(); ++o) order.emplace_back(position.at(m.tasks[t].nodes[o][0]), t, o);
  std::sort(order.begin(), order.end());
  for (auto& [at, t, o] : order) run_task(m.tasks[t], o, values, dir);
}

}  // namespace tiletune::test
