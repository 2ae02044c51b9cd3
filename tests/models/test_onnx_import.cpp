// ONNX import: ONNX's own node tests (Debian's libonnx-testdata) run through the imported tile
// ops must give the outputs ONNX recorded; a model built here checks fusion, merging, the
// layout-only and unmapped nodes, dynamic inputs and the errors.
#include <onnx/onnx_pb.h>

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "ir/loop_nest.hpp"
#include "ir/parse.hpp"
#include "models/graph.hpp"
#include "support/subprocess.hpp"

using namespace tiletune;
using tiletune::test::error_of;
using tiletune::test::TempDir;

namespace {

const std::string kTestData = "/usr/share/libonnx-testdata/data/";

//! Runs the naive kernel of a task on the test's inputs (graph inputs from the test data set,
//! weights from the model) and returns the difference to the output ONNX recorded.
double largest_error(const std::string& test, const TempDir& dir) {
  std::string folder = kTestData + test + "/";
  auto g = models::detail::read_onnx(folder + "model.onnx", {});
  auto m = models::detail::map_graph(g);
  REQUIRE_MESSAGE(m.tasks.size() == 1, test);
  const auto& task = m.tasks[0];
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
  for (auto& b : w.buffers) {
    if (b.role == ir::Buffer::Role::Temp) continue;
    shape.tensor_floats.push_back(b.elements());
    std::vector<float> v(b.elements(), NAN);
    if (b.role == ir::Buffer::Role::Input) {
      const std::string& value = task.tensors[0].at(b.name);
      auto in = std::find(g.inputs.begin(), g.inputs.end(), value);
      if (in != g.inputs.end()) {
        v = models::detail::read_tensor_pb(folder + "test_data_set_0/input_" + std::to_string(in - g.inputs.begin()) +
                                           ".pb")
                .second;
      } else {
        REQUIRE_MESSAGE(g.values.count(value), test << ": no data for " << value);
        v = g.values.at(value);
      }
      REQUIRE(static_cast<std::int64_t>(v.size()) == b.elements());
    }
    data.push_back(v);
  }
  shape.workspace_floats = nest.workspace_floats;
  auto kernel = be->load(lib, shape);
  std::vector<float*> args;
  for (auto& v : data) args.push_back(v.data());
  std::vector<float> workspace(nest.workspace_floats + 16);
  kernel->run(args.data(), workspace.data(), codegen::Kernel::kUpload | codegen::Kernel::kDownload);
  auto want = models::detail::read_tensor_pb(folder + "test_data_set_0/output_0.pb").second;
  REQUIRE(want.size() == data.back().size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(double(data.back()[i]) - want[i]) / (1 + std::fabs(want[i])));
  return worst;
}

// A small network written with ONNX's protobuf API: two residual blocks of
// Conv+BatchNorm+Relu, Conv+BatchNorm, Add, Relu, then pooling, Flatten and Gemm.
void add_tensor(onnx::GraphProto* g, const std::string& name, const std::vector<std::int64_t>& dims, float value) {
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
onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& type, const std::string& name,
                          std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(type);
  n->set_name(name);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}
void set_ints(onnx::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

//! A model of one opset whose graph is named `name`.
onnx::GraphProto* new_graph(onnx::ModelProto& model, const std::string& name, int opset) {
  model.set_ir_version(7);
  model.add_opset_import()->set_version(opset);
  model.mutable_graph()->set_name(name);
  return model.mutable_graph();
}
//! A float graph input; with `dynamic_first`, its first dimension is that named, unbound one.
void add_input(onnx::GraphProto* g, const std::string& name, const std::vector<std::int64_t>& dims,
               const std::string& dynamic_first = "") {
  auto* tt = g->add_input();
  tt->set_name(name);
  auto* type = tt->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  if (!dynamic_first.empty()) type->mutable_shape()->add_dim()->set_dim_param(dynamic_first);
  for (auto d : dims) type->mutable_shape()->add_dim()->set_dim_value(d);
}
std::string save(const onnx::ModelProto& model, const std::string& path) {
  std::ofstream f(path, std::ios::binary);
  model.SerializeToOstream(&f);
  return path;
}

std::string write_resnet_blocks(const TempDir& dir) {
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
std::string write_resnet50(const TempDir& dir) {
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
  for (auto& t : m.tasks) {
    auto w = ir::bind(ir::parse_op(t.op_text), ir::parse_sizes(t.sizes));
    occurrences[w.op.name] += t.weight;
  }
  CHECK(occurrences["onnx_conv"] + occurrences["onnx_conv1x1"] == 53);  // 49 in the blocks, 4 projections
  CHECK(occurrences["onnx_conv1x1"] == 33);  // two per block, and stage 1's projection (stride 1)
  CHECK(occurrences["onnx_binary"] == 16);   // the residual Add + Relu of each block
  CHECK(occurrences["onnx_max_pool"] == 1);
  CHECK(occurrences["onnx_global_avg_pool"] == 1);
  CHECK(occurrences["onnx_gemm"] == 1);
  // Repeated blocks share tasks. Per stage: the first block's 1x1 and 3x3 (another input), the
  // others', the expanding 1x1, the projection, Add + Relu: 7; stage 1 has 5 (its first 3x3 has
  // no stride, and its projection is the expanding 1x1's twin). With the stem, its pool, the
  // global pool and the classifier: 30.
  CHECK(m.tasks.size() == 30);
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

TEST_CASE("onnx import: a network's kernels with their epilogues fused, merged, the rest listed with why") {
  TempDir dir;
  std::string path = write_resnet_blocks(dir);
  // The batch is dynamic: it must be given.
  CHECK(error_of([&] { models::import_onnx(path, {}); }).find("input 'image' has the dynamic dimension 0 ('batch')") !=
        std::string::npos);
  auto m = models::import_onnx(path, {{"image", {1, 8, 10, 10}}});
  CHECK(m.model == "two_blocks");
  // conv+bn+relu (2x), conv+bn (2x, a bias epilogue), add+relu (2x), pool, gemm+erf.
  REQUIRE(m.tasks.size() == 5);
  const models::Task* first = nullptr;
  for (auto& t : m.tasks)
    if (!t.nodes.empty() && t.nodes[0] == std::vector<std::string>{"b0_0conv", "b0_0bn", "b0_0relu"}) first = &t;
  REQUIRE(first);
  CHECK(first->weight == 2);
  CHECK(first->nodes[1] == std::vector<std::string>{"b1_0conv", "b1_0bn", "b1_0relu"});
  CHECK(first->op_text.find("I: f32[N, C, H, W] pad 0") != std::string::npos);
  CHECK_MESSAGE(first->op_text.find("max((acc[n, k, y, x] + bias[k]), 0.0)") != std::string::npos, first->op_text);
  CHECK(first->tensors[0].at("bias") == "folded:b0_0bn");
  CHECK(first->tensors[1].at("I") == "b0_out");
  bool add_relu = false, gemm_erf = false;
  for (auto& t : m.tasks) {
    add_relu |= t.nodes[0] == std::vector<std::string>{"b0_add", "b0_relu"} && t.weight == 2;
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
  CHECK(suite["cases"].size() == 5);
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
  auto json = run_process({bin, "tune-model", suite, "--trials", "3", "--db", dir.file("t.db"), "--json"}, 300);
  CHECK_MESSAGE(json.exit_code == 0, json.output);
  auto report = nlohmann::json::parse(json.output.substr(json.output.find("\n{") + 1));
  CHECK(report["tasks"].size() == 1);
  CHECK(report["tasks"][0]["weight"] == 1);
  CHECK(report["estimated_latency_s"].get<double>() > 0);
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
  // A batch norm whose statistics are graph inputs (not constants) is not folded into the conv.
  auto unfolded = model_with(13, [](onnx::GraphProto* g) {
    add_tensor(g, "w", {5, 3, 1, 1}, 1.0f);
    for (auto* p : {"scale", "bias", "mean"}) add_tensor(g, p, {5}, 1.0f);
    add_input(g, "var", {5});
    add_node(g, "Conv", "conv", {"x", "w"}, {"c"});
    add_node(g, "BatchNormalization", "bn", {"c", "scale", "bias", "mean", "var"}, {"y"});
    g->add_output()->set_name("y");
  });
  REQUIRE(unfolded.tasks.size() == 1);
  CHECK(unfolded.tasks[0].nodes[0] == std::vector<std::string>{"conv"});
  REQUIRE(unfolded.skipped.size() == 1);
  CHECK(unfolded.skipped[0].op_type == "BatchNormalization");
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
