// ONNX import: ONNX's own node tests (Debian's libonnx-testdata) run through the imported tile
// ops must give the outputs ONNX recorded; a model built here checks fusion, merging, the
// layout-only and unmapped nodes, dynamic inputs and the errors.
#include <onnx/onnx_pb.h>

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "ir/loop_nest.hpp"
#include "ir/parse.hpp"
#include "models/graph.hpp"
#include "models/onnx_models.hpp"
#include "support/subprocess.hpp"

using namespace tiletune;
using tiletune::test::error_of;
using tiletune::test::TempDir;
using namespace tiletune::test;

namespace {

const std::string kTestData = "/usr/share/libonnx-testdata/data/";

//! Runs ONNX's node test through the imported tasks on the test's inputs and returns the
//! largest difference to the output ONNX recorded.
double largest_error(const std::string& test, const TempDir& dir, bool absolute = false) {
  std::string folder = kTestData + test + "/";
  auto g = models::detail::read_onnx(folder + "model.onnx", {});
  auto m = models::detail::map_graph(g);
  REQUIRE_MESSAGE(!m.tasks.empty(), test);
  std::map<std::string, std::vector<float>> values;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    values[g.inputs[i]] =
        models::detail::read_tensor_pb(folder + "test_data_set_0/input_" + std::to_string(i) + ".pb").second;
  run_model(g, m, values, dir);
  REQUIRE(values.count(g.outputs.at(0)));
  const auto& got = values.at(g.outputs.at(0));
  auto want = models::detail::read_tensor_pb(folder + "test_data_set_0/output_0.pb").second;
  REQUIRE(want.size() == got.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (absolute ? 1 : 1 + std::fabs(want[i])));
  return worst;
}

}  // namespace

TEST_CASE("onnx import: ResNet-50 becomes its distinct layers with their counts, nothing unmapped") {
  TempDir dir;
  std::string path = write_resnet50(dir);
  auto t0 = std::chrono::steady_clock::now();
  auto m = models::import_onnx(path, {{"data", {1, 3, 224, 224}}});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t nodes = m.skipped.size();
  for (auto& t : m.tasks)
    for (auto& occurrence : t.nodes) nodes += occurrence.size();
  CHECK(nodes == 53 * 2 + 49 + 16 + 4);  // conv + BN, the ReLUs, the Adds, pool, pool, flatten, fc
  MESSAGE("ResNet-50 (" << nodes << " nodes) imported in " << seconds << " s into " << m.tasks.size() << " tasks");
  CHECK(seconds < 5);
  // Only Flatten gets no kernel; every compute node is in a task.
  REQUIRE(m.skipped.size() == 1);
  CHECK(m.skipped[0].op_type == "Flatten");
  std::map<std::string, int> occurrences;  // op name -> sum of weights
  int residual = 0;
  for (auto& t : m.tasks) {
    auto w = ir::bind(ir::parse_op(t.op_text), ir::parse_sizes(t.sizes));
    occurrences[w.op.name] += t.weight;
    if (t.op_text.find("res[n, k, p]") != std::string::npos) residual += t.weight;
  }
  CHECK(occurrences["onnx_conv"] + occurrences["onnx_conv1x1"] == 53);  // 49 in the blocks, 4 projections
  CHECK(occurrences["onnx_conv1x1"] == 33);  // two per block, and stage 1's projection (stride 1)
  // Each block's residual Add and Relu are the expanding 1x1's epilogue: no kernel of their own.
  CHECK(residual == 16);
  CHECK(occurrences["onnx_elementwise"] == 0);
  CHECK(occurrences["onnx_max_pool"] == 1);
  CHECK(occurrences["onnx_global_avg_pool"] == 1);
  CHECK(occurrences["onnx_gemm"] == 1);
  // Repeated blocks share tasks. Per stage: the first block's 1x1 and 3x3 (another input), the
  // others', the expanding 1x1 with the residual epilogue, the projection: 6 per stage but
  // stage 1's 3x3s, which are one task (no stride). With the stem, its pool, the global pool
  // and the classifier: 27.
  CHECK(m.tasks.size() == 27);
}

TEST_CASE("onnx import: ONNX's node tests give the outputs ONNX recorded through the imported tile ops") {
  if (!std::filesystem::exists(kTestData)) TT_SKIP("libonnx-testdata is not installed");
  TempDir dir;
  for (const char* test : {"node/test_conv_with_strides_padding",
                           "node/test_conv_with_strides_no_padding",
                           "pytorch-converted/test_Conv2d",
                           "pytorch-converted/test_Conv2d_padding",
                           "pytorch-converted/test_Conv2d_strided",
                           "pytorch-converted/test_Conv2d_dilated",
                           "pytorch-converted/test_Conv2d_groups",
                           "pytorch-converted/test_Conv2d_depthwise_padded",
                           "pytorch-converted/test_Conv2d_depthwise_with_multiplier",
                           "pytorch-converted/test_Conv2d_no_bias",
                           "node/test_maxpool_2d_pads",
                           "node/test_maxpool_2d_strides",
                           "pytorch-converted/test_MaxPool2d",
                           "node/test_averagepool_2d_strides",
                           "node/test_globalaveragepool",
                           "node/test_gemm_default_vector_bias",
                           "node/test_gemm_transposeA",
                           "node/test_gemm_transposeB",
                           "node/test_gemm_alpha",
                           "node/test_matmul_2d",
                           "node/test_matmul_3d",
                           "node/test_matmul_4d",
                           "pytorch-converted/test_Linear",
                           "pytorch-converted/test_Softmax",
                           "node/test_softmax_axis_2",
                           "node/test_relu",
                           "node/test_sigmoid",
                           "node/test_add",
                           "node/test_hardswish",
                           "node/test_hardsigmoid",
                           "node/test_leakyrelu"}) {
    CAPTURE(test);
    CHECK(largest_error(test, dir) < 1e-4);
  }
}

TEST_CASE("onnx import: quantized and f16 nodes become typed ops that give ONNX's recorded outputs") {
  TempDir dir;
  // Integer outputs exactly but for a value that f32 arithmetic rounds the other way at a half;
  // the dequantized f32 values to rounding.
  for (auto [test, integer] : std::vector<std::pair<const char*, bool>>{{"node/test_quantizelinear", true},
                                                                        {"node/test_dequantizelinear", false},
                                                                        {"node/test_qlinearmatmul_2D", true},
                                                                        {"node/test_qlinearmatmul_3D", true},
                                                                        {"node/test_matmulinteger", true},
                                                                        {"node/test_qlinearconv", true},
                                                                        {"node/test_basic_convinteger", true},
                                                                        {"node/test_convinteger_without_padding", true},
                                                                        {"node/test_max_float16", false},
                                                                        {"node/test_min_float16", false}}) {
    CAPTURE(test);
    auto g = models::detail::read_onnx(kTestData + test + "/model.onnx", {});
    auto m = models::detail::map_graph(g);
    REQUIRE_MESSAGE(m.skipped.empty(), m.skipped.front().reason);
    REQUIRE(m.tasks.size() == 1);
    const std::string& text = m.tasks[0].op_text;
    CHECK_MESSAGE((text.find("u8[") != std::string::npos || text.find("i8[") != std::string::npos ||
                   text.find("f16[") != std::string::npos),
                  text);
    CHECK(largest_error(test, dir, integer) <= (integer ? 1.0 : 1e-6));
  }
  // A scale per channel is reported, not mapped wrong.
  auto g = models::detail::read_onnx(kTestData + "node/test_dequantizelinear_axis/model.onnx", {});
  auto m = models::detail::map_graph(g);
  REQUIRE(m.skipped.size() == 1);
  CHECK(m.skipped[0].reason.find("per channel") != std::string::npos);
  // Padding reads as the input's zero point: a zero point given at run time cannot be a pad.
  auto padded = models::detail::map_graph(
      models::detail::read_onnx(kTestData + "node/test_convinteger_with_padding/model.onnx", {}));
  REQUIRE(padded.skipped.size() == 1);
  CHECK(padded.skipped[0].reason.find("padding and a zero point that is not a constant") != std::string::npos);
}

TEST_CASE("onnx import: a padded QLinearConv reads its input's constant zero point outside it") {
  TempDir dir;
  onnx::ModelProto model;
  auto* g = new_graph(model, "qconv", 13);
  auto* in = g->add_input();
  in->set_name("x");
  auto* type = in->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::UINT8);
  for (auto d : {1, 2, 5, 5}) type->mutable_shape()->add_dim()->set_dim_value(d);
  auto constant = [&](const std::string& name, int data_type, std::vector<std::int64_t> dims, std::vector<int> values) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(data_type);
    for (auto d : dims) t->add_dims(d);
    for (int v : values) t->add_int32_data(v);
  };
  std::vector<int> w(3 * 2 * 3 * 3);
  for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<int>(k * 7 % 23) - 11;
  constant("w", onnx::TensorProto::INT8, {3, 2, 3, 3}, w);
  constant("x_zero", onnx::TensorProto::UINT8, {}, {100});
  constant("w_zero", onnx::TensorProto::INT8, {}, {2});
  constant("y_zero", onnx::TensorProto::UINT8, {}, {128});
  auto scale = [&](const std::string& name, float v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(v);
  };
  scale("x_scale", 0.05f);
  scale("w_scale", 0.1f);
  scale("y_scale", 0.2f);
  auto* n = add_node(g, "QLinearConv", "qconv",
                     {"x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero"}, {"y"});
  set_ints(n, "pads", {1, 1, 1, 1});
  set_ints(n, "kernel_shape", {3, 3});
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::UINT8);
  std::string path = save(model, dir.file("qconv.onnx"));
  auto graph = models::detail::read_onnx(path, {});
  auto m = models::detail::map_graph(graph);
  REQUIRE_MESSAGE(m.skipped.empty(), m.skipped.front().reason);
  REQUIRE(m.tasks.size() == 1);
  CHECK(m.tasks[0].op_text.find("I: u8[N, C, H, W] pad 100") != std::string::npos);
  std::vector<float> x(2 * 5 * 5);
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k * 37 % 256);
  std::map<std::string, std::vector<float>> values{{"x", x}};
  run_model(graph, m, values, dir);
  const auto& y = values.at("y");
  REQUIRE(y.size() == 3 * 5 * 5);
  for (int k = 0; k < 3; ++k)
    for (int oy = 0; oy < 5; ++oy)
      for (int ox = 0; ox < 5; ++ox) {
        long long acc = 0;
        for (int c = 0; c < 2; ++c)
          for (int r = 0; r < 3; ++r)
            for (int q = 0; q < 3; ++q) {
              int iy = oy + r - 1, ix = ox + q - 1;
              int xv = iy < 0 || iy >= 5 || ix < 0 || ix >= 5 ? 100 : static_cast<int>(x[(c * 5 + iy) * 5 + ix]);
              acc += static_cast<long long>(xv - 100) * (w[((k * 2 + c) * 3 + r) * 3 + q] - 2);
            }
        double want = std::nearbyint(std::fmin(std::fmax(acc * (0.05 * 0.1 / 0.2) + 128, 0.0), 255.0));
        CHECK(std::fabs(y[(k * 5 + oy) * 5 + ox] - want) <= 1);
      }
}

TEST_CASE("onnx import: a network's kernels with their epilogues fused, merged, the rest listed with why") {
  TempDir dir;
  std::string path = write_resnet_blocks(dir);
  // The batch is dynamic: it must be given.
  CHECK(error_of([&] { models::import_onnx(path, {}); }).find("input 'image' has the dynamic dimension 0 ('batch')") !=
        std::string::npos);
  auto m = models::import_onnx(path, {{"image", {1, 8, 10, 10}}});
  CHECK(m.model == "two_blocks");
  // conv+bn+relu (2x), conv+bn+add+relu (2x: the residual in its epilogue), pool, gemm+erf.
  REQUIRE(m.tasks.size() == 4);
  const models::Task* first = nullptr;
  for (auto& t : m.tasks)
    if (!t.nodes.empty() && t.nodes[0] == std::vector<std::string>{"b0_0conv", "b0_0bn", "b0_0relu"}) first = &t;
  REQUIRE(first);
  CHECK(first->weight == 2);
  CHECK(first->nodes[1] == std::vector<std::string>{"b1_0conv", "b1_0bn", "b1_0relu"});
  CHECK(first->op_text.find("I: f32[N, C, H, W] pad 0,") != std::string::npos);  // activations change per call
  // The filter is an initializer: const, so its kernel packs it once (the prepare entry point).
  CHECK_MESSAGE(first->op_text.find("F: f32[K, C, R, S] const") != std::string::npos, first->op_text);
  CHECK_MESSAGE(first->op_text.find("max(acc[n, k, y, x] + bias[k], 0.0)") != std::string::npos, first->op_text);
  CHECK(first->tensors[0].at("bias") == "folded:b0_0bn");
  CHECK(first->tensors[1].at("I") == "b0_out");
  bool add_relu = false, gemm_erf = false;
  for (auto& t : m.tasks) {
    add_relu |= t.nodes[0] == std::vector<std::string>{"b0_1conv", "b0_1bn", "b0_add", "b0_relu"} && t.weight == 2 &&
                t.tensors[1].at("res") == "b0_out" &&
                t.op_text.find("max((acc[n, k, y, x] + bias[k]) + res[n, k, y, x], 0.0)") != std::string::npos;
    gemm_erf |= t.nodes[0] == std::vector<std::string>{"fc", "odd"} && t.op_text.find("erf(") != std::string::npos;
  }
  CHECK(add_relu);
  CHECK(gemm_erf);
  // Flatten has no kernel; Sin is not mapped, and says so. Nothing is dropped silently.
  REQUIRE(m.skipped.size() == 2);
  CHECK(m.skipped[0].node == "flatten");
  CHECK(m.skipped[0].layout_only);
  CHECK(m.skipped[1].op_type == "Sin");
  CHECK(m.skipped[1].reason == "no mapping for ONNX op Sin");
  // The suite holds the tasks, their weights and nodes, and what was left out.
  auto suite = models::suite_json(m, 16);
  CHECK(suite["cases"].size() == 4);
  CHECK(suite["skipped_nodes"].size() == 2);
  CHECK(suite["trials"] == 16);
}

TEST_CASE("onnx import: bad files, unknown inputs and wrong dimensions are clear errors") {
  TempDir dir;
  std::string text = dir.file("not.onnx");
  std::ofstream(text) << "op matmul is not a model\n";
  ErrorKind kind = ErrorKind::Internal;
  CHECK(error_of([&] { models::import_onnx(text, {}); }, &kind).find("is not an ONNX model") != std::string::npos);
  CHECK(kind == ErrorKind::InvalidInput);
  CHECK(error_of([&] { models::import_onnx(dir.file("missing.onnx"), {}); }, &kind).find("cannot read") !=
        std::string::npos);
  CHECK(kind == ErrorKind::Io);
  std::string path = write_resnet_blocks(dir);
  CHECK(error_of([&] {
          models::import_onnx(path, {{"data", {1, 8, 10, 10}}, {"image", {1, 8, 10, 10}}});
        }).find("the model has no input 'data'; its inputs are: image") != std::string::npos);
  CHECK(error_of([&] {
          models::import_onnx(path, {{"image", {1, 3, 10, 10}}});
        }).find("dimension 1 fixed to 8 in the model; --input gives 3") != std::string::npos);
  CHECK(error_of([&] {
          models::import_onnx(path, {{"image", {1, 8, 10}}});
        }).find("has 4 dimensions") != std::string::npos);
  // Truncated bytes, an opset from the future, a cycle, dimensions out of range: input errors.
  std::string whole;
  {
    std::ifstream f(path, std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  for (size_t cut : {whole.size() / 2, whole.size() - 3, size_t(7)}) {
    CHECK_MESSAGE(error_of(
                      [&] {
                        models::import_onnx_bytes(whole.substr(0, cut), "cut.onnx", {{"image", {1, 8, 10, 10}}});
                      },
                      &kind)
                          .find("cut.onnx") != std::string::npos,
                  cut);
    CHECK(kind == ErrorKind::InvalidInput);
  }
  auto small = [&](int opset, bool cyclic, std::int64_t dim) {
    onnx::ModelProto model;
    auto* g = new_graph(model, "small", opset);
    add_input(g, "x", {dim, dim, dim});
    add_node(g, "Relu", "a", {cyclic ? "b_out" : "x"}, {"a_out"});
    add_node(g, "Relu", "b", {"a_out"}, {"b_out"});
    add_output(g, "b_out");
    std::string bytes;
    model.SerializeToString(&bytes);
    return bytes;
  };
  // Found by fuzzing (fuzz/fuzz_onnx.cpp): a stride of 0 divided by zero inside ONNX's shape
  // inference. Attributes it divides by are checked first.
  for (auto [attr, value] : {std::pair<const char*, std::int64_t>{"strides", 0}, {"dilations", 0}, {"pads", -1}}) {
    onnx::ModelProto model;
    auto* g = new_graph(model, "zero_stride", 13);
    add_input(g, "x", {1, 2, 6, 6});
    add_tensor(g, "w", {2, 2, 3, 3}, 1.0f);
    std::vector<std::int64_t> values =
        std::string(attr) == "pads" ? std::vector<std::int64_t>(4, value) : std::vector<std::int64_t>{value, 1};
    set_ints(add_node(g, "Conv", "conv", {"x", "w"}, {"y"}), attr, values);
    add_output(g, "y");
    std::string bytes;
    model.SerializeToString(&bytes);
    CHECK(error_of([&] {
            models::import_onnx_bytes(bytes, "zero.onnx", {});
          }).find("node 'conv' (Conv) has " + std::string(attr) + " out of range") != std::string::npos);
  }
  {
    // Found by fuzzing too: a LayerNormalization short of its scale crashed ONNX's shape
    // inference. Nodes go through ONNX's checker first.
    onnx::ModelProto model;
    auto* g = new_graph(model, "short", 17);
    add_input(g, "x", {2, 4});
    add_node(g, "LayerNormalization", "ln", {"x"}, {"y"});
    add_output(g, "y");
    std::string bytes;
    model.SerializeToString(&bytes);
    CHECK(error_of([&] {
            models::import_onnx_bytes(bytes, "short.onnx", {});
          }).find("node 'ln' (LayerNormalization) fails ONNX's checker") != std::string::npos);
  }
  {
    // And a LayerNormalization of an input without a shape crashed it inside libonnx. An input
    // must have a shape (or be given one), and shape inference runs in a child process whose
    // crash is the model's error.
    onnx::ModelProto model;
    auto* g = new_graph(model, "shapeless", 17);
    auto* x = g->add_input();
    x->set_name("x");
    x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    add_input(g, "w", {4});
    add_node(g, "LayerNormalization", "ln", {"x", "w"}, {"y"});
    add_output(g, "y");
    std::string bytes;
    model.SerializeToString(&bytes);
    ErrorKind crashed = ErrorKind::Internal;
    auto message = error_of([&] { models::import_onnx_bytes(bytes, "shapeless.onnx", {}); }, &crashed);
    CHECK_MESSAGE(message.find("input 'x' has no shape in the model") != std::string::npos, message);
    CHECK(crashed == ErrorKind::InvalidInput);
  }
  {
    // Found by fuzzing: an empty tensor (a dimension of 0) divided by zero in the mapping of a
    // LayerNormalization. Empty tensors have nothing to tune: the node is listed, not mapped.
    onnx::ModelProto model;
    auto* g = new_graph(model, "empty", 17);
    add_input(g, "x", {3, 0});
    add_input(g, "w", {0});
    add_node(g, "LayerNormalization", "ln", {"x", "w"}, {"y"});
    add_output(g, "y");
    std::string bytes;
    model.SerializeToString(&bytes);
    auto m = models::import_onnx_bytes(bytes, "empty.onnx", {});
    CHECK(m.tasks.empty());
    REQUIRE(m.skipped.size() == 1);
    CHECK(m.skipped[0].op_type == "LayerNormalization");
  }
  CHECK(models::import_onnx_bytes(small(13, false, 4), "ok.onnx", {}).tasks.size() == 1);
  CHECK(error_of([&] {
          models::import_onnx_bytes(small(999, false, 4), "new.onnx", {});
        }).find("opset 999 is outside the versions this ONNX library knows") != std::string::npos);
  CHECK(error_of([&] {
          models::import_onnx_bytes(small(13, true, 4), "cycle.onnx", {});
        }).find("node 'a' (Relu) reads 'b_out' before any node computes it") != std::string::npos);
  CHECK(error_of([&] {
          models::import_onnx_bytes(small(13, false, 1 << 30), "huge.onnx", {});
        }).find("the dimensions of 'x' are out of range") != std::string::npos);
  CHECK(models::parse_input_shape("x=1,3,224,224").second == models::Dims{1, 3, 224, 224});
  for (const char* bad : {"x", "=1,2", "x=", "x=1,,2", "x=1,-2", "x=a"})
    CHECK(error_of([&] { models::parse_input_shape(bad); }).find("--input") != std::string::npos);
}

TEST_CASE("onnx import: the CLI writes a suite that `tiletune suite` tunes") {
  if (!std::filesystem::exists(kTestData)) TT_SKIP("libonnx-testdata is not installed");
  TempDir dir;
  std::string bin = std::string(TILETUNE_BINARY_DIR) + "/tiletune";
  std::string suite = dir.file("suite.json");
  auto imported = run_process({bin, "import", kTestData + "pytorch-converted/test_Conv2d_depthwise_padded/model.onnx",
                               "--out", suite, "--trials", "3"},
                              120);
  CHECK_MESSAGE(imported.exit_code == 0, imported.output);
  CHECK(imported.output.find("onnx_depthwise_conv  CG=1,G=4,H=6,KG=1,N=2,R=3,S=3,W=6") != std::string::npos);
  auto tuned = run_process(
      {bin, "suite", suite, "--db", dir.file("t.db"), "--cache", test::kernel_cache(), "--min-time", "0.01"}, 300);
  CHECK_MESSAGE(tuned.exit_code == 0, tuned.output);
  CHECK(tuned.output.find("onnx_depthwise_conv") != std::string::npos);
  // A model tuned under one budget: the ONNX file itself, then its suite, resumed.
  std::string model = kTestData + "pytorch-converted/test_Conv2d_groups/model.onnx";
  auto whole = run_process({bin, "tune-model", model, "--trials", "6", "--round", "3", "--db", dir.file("m.db"),
                            "--cache", test::kernel_cache(), "--min-time", "0.01", "--strategy", "random"},
                           300);
  CHECK_MESSAGE(whole.exit_code == 0, whole.output);
  CHECK(whole.output.find("round 2: task 1 (onnx_grouped_conv) 6 trials") != std::string::npos);
  CHECK(whole.output.find("estimated model latency") != std::string::npos);
  auto json = run_process(
      {bin, "tune-model", suite, "--trials", "3", "--db", dir.file("t.db"), "--json", "--compare-vendor"}, 300);
  CHECK_MESSAGE(json.exit_code == 0, json.output);
  auto report = nlohmann::json::parse(json.output.substr(json.output.find("\n{") + 1));
  CHECK(report["tasks"].size() == 1);
  CHECK(report["tasks"][0]["weight"] == 1);
  CHECK(report["estimated_latency_s"].get<double>() > 0);
  // The assessment: the naive kernel's time, the roof measured in this run, and oneDNN's layer.
  const auto& task = report["tasks"][0];
  CHECK(task["naive_s"].get<double>() >= task["best_s"].get<double>());
  CHECK(task["roof_fraction"].get<double>() > 0);
  CHECK(report["roofs"]["fma_gflops"].get<double>() > 1);
  CHECK(task["copy_s"].get<double>() > 0);
  CHECK_MESSAGE(task["vendor"]["seconds"].get<double>() > 0, task.dump());
  CHECK(report["vendor"]["layers"] == 1);
  CHECK(report["vendor"]["tiletune_over_vendor"].get<double>() > 0);
  // Usage errors of both commands: exit 2 with the reason.
  auto twice = run_process({bin, "import", model, "--input", "x=1", "--input", "x=2"}, 60);
  CHECK(twice.exit_code == 2);
  CHECK(twice.output.find("--input x is given twice") != std::string::npos);
  auto input_for_suite = run_process({bin, "tune-model", suite, "--trials", "3", "--input", "x=1"}, 60);
  CHECK(input_for_suite.exit_code == 2);
  CHECK(input_for_suite.output.find("--input applies to an ONNX model") != std::string::npos);
  std::string weighted = dir.file("weighted.json");
  std::ofstream(weighted) << R"({"cases": [{"op": "row_sum", "sizes": "N=4,D=8", "weight": 0}]})";
  auto bad_weight = run_process({bin, "tune-model", weighted, "--trials", "3", "--db", dir.file("w.db")}, 60);
  CHECK(bad_weight.exit_code == 2);
  CHECK(bad_weight.output.find("\"weight\" must be an integer in [1, 10^6]") != std::string::npos);
  auto bad = run_process({bin, "import", suite}, 60);
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("is not an ONNX model") != std::string::npos);
}

TEST_CASE("onnx import: opset rules and what may be folded") {
  TempDir dir;
  auto model_with = [&](int opset, const std::function<void(onnx::GraphProto*)>& build) {
    onnx::ModelProto model;
    auto* g = new_graph(model, "small", opset);
    add_input(g, "x", {2, 3, 4, 4});
    build(g);
    return models::import_onnx(
        save(model, dir.file("m" + std::to_string(opset) + std::to_string(g->node_size()) + ".onnx")), {});
  };
  // Before opset 13, Softmax flattens at axis 1 (its default): rows of 3 x 4 x 4.
  auto old = model_with(11, [](onnx::GraphProto* g) {
    add_node(g, "Softmax", "sm", {"x"}, {"y"});
    g->add_output()->set_name("y");
  });
  REQUIRE(old.tasks.size() == 1);
  CHECK(old.tasks[0].sizes == "D=48,N=2");
  auto now = model_with(13, [](onnx::GraphProto* g) {
    add_node(g, "Softmax", "sm", {"x"}, {"y"});
    g->add_output()->set_name("y");
  });
  REQUIRE(now.tasks.size() == 1);
  CHECK(now.tasks[0].sizes == "D=4,N=24");
  auto unfolded = model_with(13, [](onnx::GraphProto* g) {
    add_tensor(g, "w", {5, 3, 1, 1}, 1.0f);
    for (auto* p : {"scale", "bias", "mean"}) add_tensor(g, p, {5}, 1.0f);
    add_input(g, "var", {5});
    add_node(g, "Conv", "conv", {"x", "w"}, {"c"});
    add_node(g, "BatchNormalization", "bn", {"c", "scale", "bias", "mean", "var"}, {"y"});
    g->add_output()->set_name("y");
  });
  // A batch norm whose statistics are graph inputs (not constants) is not folded into the conv:
  // it is a kernel of its own, per channel.
  REQUIRE(unfolded.tasks.size() == 2);
  CHECK(unfolded.tasks[0].nodes[0] == std::vector<std::string>{"conv"});
  CHECK(ir::parse_op(unfolded.tasks[1].op_text).name == "onnx_batch_norm");
  CHECK(unfolded.tasks[1].tensors[0].at("var") == "var");
  CHECK(unfolded.skipped.empty());
  // A graph ONNX's shape inference refuses (Add of shapes that do not broadcast) is an input
  // error with ONNX's reason.
  CHECK(error_of([&] {
          model_with(13, [](onnx::GraphProto* g) {
            add_tensor(g, "other", {3, 5}, 1.0f);
            add_node(g, "Add", "add", {"x", "other"}, {"y"});
            g->add_output()->set_name("y");
          });
        }).find("ONNX shape inference failed") != std::string::npos);
  // A tensor file that is not a TensorProto.
  std::string junk = dir.file("junk.pb");
  std::ofstream(junk) << "\xff\xff\xff not protobuf";
  CHECK(error_of([&] { models::detail::read_tensor_pb(junk); }).find("is not an ONNX TensorProto") !=
        std::string::npos);
}

TEST_CASE("onnx import: a transformer block's patterns fuse and compute what ONNX means") {
  // x [2, 3, 8] -> MatMul + bias -> GELU (Div, Erf, Add, Mul, Mul) -> + x -> LayerNorm written
  // out, with scale and shift -> * t [3, 1] (broadcast over the batch and the features).
  TempDir dir;
  const std::int64_t B = 2, S = 3, D = 8;
  auto wave = [](std::int64_t n, double seed, double scale) {
    std::vector<float> v(n);
    for (std::int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(scale * std::sin(0.7 * i + seed));
    return v;
  };
  std::vector<float> x = wave(B * S * D, 0.1, 1.5), w = wave(D * D, 0.5, 0.4), b = wave(D, 1.0, 0.3),
                     gamma = wave(D, 2.0, 1.0), beta = wave(D, 3.0, 0.5), t = wave(S, 4.0, 2.0);
  onnx::ModelProto model;
  auto* g = new_graph(model, "block", 13);
  add_input(g, "x", {B, S, D});
  add_input(g, "t", {S, 1});
  auto values = [&](const std::string& name, const std::vector<std::int64_t>& dims, const std::vector<float>& v) {
    add_tensor(g, name, dims, 0.0f);
    auto* init = g->mutable_initializer(g->initializer_size() - 1);
    for (size_t i = 0; i < v.size(); ++i) init->set_float_data(static_cast<int>(i), v[i]);
  };
  values("w", {D, D}, w);
  values("b", {D}, b);
  values("gamma", {D}, gamma);
  values("beta", {D}, beta);
  for (auto [name, v] : {std::pair<const char*, float>{"sqrt2", 1.4142135f},
                         {"one", 1.0f},
                         {"half", 0.5f},
                         {"two", 2.0f},
                         {"eps", 1e-5f}})
    add_tensor(g, name, {}, v);
  add_node(g, "MatMul", "mm", {"x", "w"}, {"mm_out"});
  add_node(g, "Add", "bias", {"mm_out", "b"}, {"f"});
  add_node(g, "Div", "gelu_div", {"f", "sqrt2"}, {"f_s"});
  add_node(g, "Erf", "gelu_erf", {"f_s"}, {"f_e"});
  add_node(g, "Add", "gelu_add", {"f_e", "one"}, {"f_e1"});
  add_node(g, "Mul", "gelu_mul", {"f", "f_e1"}, {"f_m"});
  add_node(g, "Mul", "gelu_half", {"f_m", "half"}, {"gelu"});
  add_node(g, "Add", "residual", {"gelu", "x"}, {"sum"});
  set_ints(add_node(g, "ReduceMean", "mean", {"sum"}, {"mu"}), "axes", {-1});
  add_node(g, "Sub", "sub", {"sum", "mu"}, {"c"});
  add_node(g, "Pow", "pow", {"c", "two"}, {"c2"});
  set_ints(add_node(g, "ReduceMean", "var", {"c2"}, {"v"}), "axes", {-1});
  add_node(g, "Add", "add_eps", {"v", "eps"}, {"ve"});
  add_node(g, "Sqrt", "sqrt", {"ve"}, {"sd"});
  add_node(g, "Div", "div", {"c", "sd"}, {"n"});
  add_node(g, "Mul", "scale", {"n", "gamma"}, {"ns"});
  add_node(g, "Add", "shift", {"ns", "beta"}, {"ln"});
  add_node(g, "Mul", "broadcast", {"ln", "t"}, {"y"});
  add_output(g, "y");
  std::string path = save(model, dir.file("block.onnx"));

  auto graph = models::detail::read_onnx(path, {});
  auto m = models::detail::map_graph(graph);
  REQUIRE(m.skipped.empty());
  REQUIRE(m.tasks.size() == 3);
  CHECK(m.tasks[0].nodes[0] == std::vector<std::string>{"mm", "bias", "gelu_div", "gelu_erf", "gelu_add", "gelu_mul",
                                                        "gelu_half", "residual"});
  CHECK(m.tasks[1].nodes[0] ==
        std::vector<std::string>{"mean", "sub", "pow", "var", "add_eps", "sqrt", "div", "scale", "shift"});
  CHECK_MESSAGE(m.tasks[2].op_text.find("Z: f32[E1]") != std::string::npos, m.tasks[2].op_text);
  std::map<std::string, std::vector<float>> data{{"x", x}, {"t", t}};
  run_model(graph, m, data, dir);

  double worst = 0;
  for (std::int64_t r = 0; r < B * S; ++r) {
    std::vector<double> row(D);
    for (std::int64_t j = 0; j < D; ++j) {
      double f = b[j];
      for (std::int64_t k = 0; k < D; ++k) f += double(x[r * D + k]) * w[k * D + j];
      row[j] = 0.5 * f * (1 + std::erf(f / std::sqrt(2.0))) + x[r * D + j];
    }
    double mean = 0, var = 0;
    for (double v : row) mean += v / D;
    for (double v : row) var += (v - mean) * (v - mean) / D;
    for (std::int64_t j = 0; j < D; ++j) {
      double want = ((row[j] - mean) / std::sqrt(var + 1e-5) * gamma[j] + beta[j]) * t[r % S];
      worst = std::max(worst, std::fabs(data.at("y")[r * D + j] - want) / (1 + std::fabs(want)));
    }
  }
  CHECK(worst < 1e-4);
}

TEST_CASE("onnx import: MobileNetV2 and a BERT-base layer map with nothing left out") {
  TempDir dir;
  {
    auto t0 = std::chrono::steady_clock::now();
    auto m = models::import_onnx(write_mobilenet_v2(dir), {{"input", {1, 3, 224, 224}}});
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(m.skipped.size() == 1);  // Flatten
    CHECK(m.skipped[0].layout_only);
    std::map<std::string, int> occurrences;
    int residual = 0, relu6 = 0, nodes = 1;
    for (auto& t : m.tasks) {
      occurrences[ir::parse_op(t.op_text).name] += t.weight;
      if (t.op_text.find("res[n, k, p]") != std::string::npos) residual += t.weight;
      if (t.op_text.find(", 0.0), 6.0)") != std::string::npos) relu6 += t.weight;
      for (auto& o : t.nodes) nodes += static_cast<int>(o.size());
    }
    MESSAGE("MobileNetV2 (" << nodes << " nodes) imported in " << seconds << " s into " << m.tasks.size() << " tasks");
    CHECK(nodes == 52 * 2 + 35 + 10 + 3);  // conv + BN, ReLU6s, residual Adds, pool, flatten, fc
    CHECK(occurrences["onnx_depthwise_conv"] == 17);
    CHECK(occurrences["onnx_conv1x1"] == 34);  // 16 expanding, 17 projecting, the last 1x1
    CHECK(occurrences["onnx_conv"] == 1);      // the stem
    CHECK(residual == 10);
    CHECK(relu6 == 35);
    CHECK(occurrences["onnx_gemm"] == 1);
    CHECK(occurrences["onnx_global_avg_pool"] == 1);
  }
  {
    auto t0 = std::chrono::steady_clock::now();
    auto m = models::import_onnx(write_bert_layer(dir), {{"x", {1, 128, 768}}, {"mask", {1, 1, 1, 128}}});
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE("BERT-base layer imported in " << seconds << " s into " << m.tasks.size() << " tasks");
    // Only the head splits and merges have no kernel.
    CHECK(m.skipped.size() == 8);
    for (auto& s : m.skipped) CHECK_MESSAGE(s.layout_only, s.node << ": " << s.reason);
    std::map<std::string, const models::Task*> by_node;
    for (auto& t : m.tasks)
      for (auto& o : t.nodes) by_node[o[0]] = &t;
    REQUIRE(m.tasks.size() == 8);
    CHECK(by_node.at("q_mm") == by_node.at("k_mm"));
    CHECK(by_node.at("q_mm")->weight == 3);
    CHECK(by_node.at("ln1_mean") == by_node.at("ln2_mean"));
    CHECK(by_node.at("ln1_mean")->nodes[0].back() == "ln1_shift");
    CHECK(by_node.at("scores")->nodes[0] == std::vector<std::string>{"scores", "scores_scale", "scores_mask"});
    CHECK(by_node.at("scores")->sizes == "G=12,K=64,M=128,N=128");
    CHECK(by_node.at("ffn1_mm")->nodes[0].back() == "gelu_half");
    CHECK(by_node.at("ffn1_mm")->op_text.find("erf(") != std::string::npos);
    CHECK(by_node.at("ffn2_mm")->nodes[0].back() == "ffn_residual");
    CHECK(by_node.at("attn_out_mm")->nodes[0].back() == "attn_residual");
    CHECK(by_node.count("probs"));
    CHECK(by_node.count("context"));
    // The layers as oneDNN has them: the bias as a broadcast operand, GELU's five nodes as its
    // gelu_erf, a residual as an operand of the output's shape.
    auto ffn1 = nlohmann::json::parse(by_node.at("ffn1_mm")->vendor);
    CHECK(ffn1["primitive"] == "matmul");
    CHECK(ffn1["a"] == nlohmann::json{128, 768});
    CHECK_MESSAGE(ffn1["post_ops"][0] == nlohmann::json::parse(R"({"binary": "add", "dims": [1, 3072]})"), ffn1.dump());
    CHECK(ffn1["post_ops"][1]["eltwise"] == "gelu_erf");
    CHECK(ffn1["unfused"].empty());
    auto attn = nlohmann::json::parse(by_node.at("attn_out_mm")->vendor);
    CHECK(attn["post_ops"][1] == nlohmann::json::parse(R"({"binary": "add", "dims": [128, 768]})"));
    auto scores = nlohmann::json::parse(by_node.at("scores")->vendor);
    CHECK(scores["a"] == nlohmann::json{12, 128, 64});
    CHECK(scores["post_ops"][0]["eltwise"] == "linear");
    CHECK(scores["post_ops"][1] == nlohmann::json::parse(R"({"binary": "add", "dims": [1, 1, 128]})"));
  }
}

TEST_CASE("onnx import: a 12-layer BERT-base encoder (600 nodes) imports in well under a second") {
  TempDir dir;
  std::string path = write_bert_layer(dir, 12);
  auto t0 = std::chrono::steady_clock::now();
  auto m = models::import_onnx(path, {{"x", {1, 128, 768}}, {"mask", {1, 1, 1, 128}}});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t nodes = m.skipped.size();
  for (auto& t : m.tasks)
    for (auto& o : t.nodes) nodes += o.size();
  MESSAGE("BERT-base, 12 layers (" << nodes << " nodes) imported in " << seconds << " s into " << m.tasks.size()
                                   << " tasks");
  CHECK(nodes == 12 * 50);
  CHECK(seconds < 1.0);
  for (auto& s : m.skipped) CHECK_MESSAGE(s.layout_only, s.node << ": " << s.reason);
  // The layers repeat: the same 8 tasks, each run 12 times as often (Q, K, V 36).
  REQUIRE(m.tasks.size() == 8);
  int most = 0;
  for (auto& t : m.tasks) most = std::max(most, t.weight);
  CHECK(most == 36);
}

TEST_CASE("onnx import: the test networks are written out on request (TT_WRITE_MODELS=DIR)") {
  // For measuring by hand: `TT_WRITE_MODELS=/tmp/m build/tiletune_tests -tc="*written out*"` then
  // `tiletune tune-model /tmp/m/bert_layer.onnx --input x=1,128,768 --input mask=1,1,1,128 ...`.
  const char* out = std::getenv("TT_WRITE_MODELS");
  if (!out) TT_SKIP("TT_WRITE_MODELS is not set");
  TempDir dir;
  for (auto& written : {write_resnet50(dir), write_mobilenet_v2(dir), write_bert_layer(dir)}) {
    auto to = std::filesystem::path(out) / std::filesystem::path(written).filename();
    std::filesystem::copy_file(written, to, std::filesystem::copy_options::overwrite_existing);
    CHECK(std::filesystem::exists(to));
  }
}
