// Reads an ONNX model with Debian's libonnx (protobuf), binds its inputs' dimensions and runs
// ONNX's own shape inference; the mapping to tile ops (tasks.cpp) sees only models::detail::Graph.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <onnx/defs/schema.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ir/dtype.hpp"
#include "models/graph.hpp"
#include "support/error.hpp"

namespace tiletune::models {

namespace {
[[noreturn]] void invalid(const std::string& m) { throw_error(ErrorKind::InvalidInput, m); }
}  // namespace

namespace detail {

namespace {

//! Constants up to this many elements keep their values (clip bounds, scalars of Add/Mul).
constexpr std::int64_t kKeptConstant = 4096;

Dims tensor_dims(const onnx::TensorProto& t) { return Dims(t.dims().begin(), t.dims().end()); }

//! A tensor's values as floats: f32 as stored; f64 and the integer types that carry shapes,
//! axes and exponents (int32, int64) converted, and the quantized (u8, i8) and half (f16, bf16)
//! types' values. Empty for other types.
std::vector<float> tensor_floats(const onnx::TensorProto& t) {
  auto from = [&](auto element, const auto& typed) {
    using E = decltype(element);
    std::vector<float> v;
    if (t.has_raw_data()) {
      const std::string& raw = t.raw_data();
      v.resize(raw.size() / sizeof(E));
      for (size_t i = 0; i < v.size(); ++i) {
        E e;
        std::memcpy(&e, raw.data() + i * sizeof(E), sizeof(E));
        v[i] = static_cast<float>(e);
      }
    } else {
      for (auto e : typed) v.push_back(static_cast<float>(e));
    }
    return v;
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      return from(float(), t.float_data());
    case onnx::TensorProto::DOUBLE:
      return from(double(), t.double_data());
    case onnx::TensorProto::INT64:
      return from(std::int64_t(), t.int64_data());
    case onnx::TensorProto::INT32:
      return from(std::int32_t(), t.int32_data());
    // The quantized and half types (int32_data holds them, one per element, if not raw).
    case onnx::TensorProto::UINT8:
      return from(std::uint8_t(), t.int32_data());
    case onnx::TensorProto::INT8:
      return from(std::int8_t(), t.int32_data());
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: {
      ir::DType half = t.data_type() == onnx::TensorProto::FLOAT16 ? ir::DType::F16 : ir::DType::BF16;
      std::vector<std::uint16_t> bits;
      if (t.has_raw_data()) {
        bits.resize(t.raw_data().size() / 2);
        std::memcpy(bits.data(), t.raw_data().data(), bits.size() * 2);
      } else {
        for (auto b : t.int32_data()) bits.push_back(static_cast<std::uint16_t>(b));
      }
      std::vector<float> v(bits.size());
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(ir::load_element(half, bits.data(), i));
      return v;
    }
    default:
      return {};
  }
}

void keep_constant(Graph& g, const onnx::TensorProto& t, const std::string& name) {
  g.constants.insert(name);
  g.types[name] = t.data_type();
  Dims d = tensor_dims(t);
  g.shapes[name] = d;
  std::int64_t n = 1;
  for (auto x : d) n *= x;
  if (n <= kKeptConstant) g.values[name] = tensor_floats(t);
}

//! The shape of a value, if every dimension is known.
bool known_shape(const onnx::ValueInfoProto& v, Dims& out) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return false;
  out.clear();
  for (auto& d : v.type().tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return false;
    out.push_back(d.dim_value());
  }
  return true;
}

//! Attribute values ONNX's own shape inference divides by (or counts with) must be in range
//! before it runs: it does not check them (a stride of 0 stopped a fuzzed import with SIGFPE).
void check_attributes(const onnx::NodeProto& n, const std::string& path) {
  static const std::set<std::string> positive = {"strides", "dilations", "kernel_shape", "group", "blocksize"};
  for (auto& a : n.attribute()) {
    bool at_least_one = positive.count(a.name()) > 0, non_negative = a.name() == "pads";
    if (!at_least_one && !non_negative) continue;
    auto bad = [&](std::int64_t v) { return at_least_one ? v < 1 : v < 0; };
    bool wrong = a.type() == onnx::AttributeProto::INT ? bad(a.i()) : false;
    for (auto v : a.ints()) wrong |= bad(v);
    if (wrong)
      invalid(path + ": node '" + n.name() + "' (" + n.op_type() + ") has " + a.name() + " out of range (" +
              (at_least_one ? "each at least 1" : "none negative") + ")");
  }
}

//! ONNX requires nodes in topological order: every input is a graph input, an initializer or
//! the output of an earlier node. A cycle breaks that too.
void check_topological(const onnx::GraphProto& graph, const std::string& path) {
  std::set<std::string> available;
  for (auto& in : graph.input()) available.insert(in.name());
  for (auto& t : graph.initializer()) available.insert(t.name());
  for (auto& n : graph.node()) {
    check_attributes(n, path);
    for (auto& in : n.input())
      if (!in.empty() && !available.count(in))
        invalid(path + ": node '" + n.name() + "' (" + n.op_type() + ") reads '" + in +
                "' before any node computes it: the graph is not in topological order, or has a cycle");
    for (auto& out : n.output()) available.insert(out);
  }
}

//! ONNX's shape inference, in a child process: it trusts the model it reads, and libonnx's own
//! crashes on malformed models (fuzzing found several) must not take the daemon or the CLI
//! down. The child gets the model without the data of large initializers (shapes need their
//! dimensions only) and sends back the inferred model, or ONNX's error.
void infer_shapes_isolated(onnx::ModelProto& model, const std::string& path) {
  for (auto& t : *model.mutable_graph()->mutable_initializer()) {
    std::int64_t n = 1;
    for (auto d : t.dims()) n *= std::max<std::int64_t>(d, 1);
    if (n > kKeptConstant) {
      t.clear_raw_data();
      t.clear_float_data();
      t.clear_double_data();
      t.clear_int32_data();
      t.clear_int64_data();
    }
  }
  std::string request = model.SerializeAsString();
  int fds[2];
  if (pipe(fds) != 0) throw_error(ErrorKind::Io, "cannot make a pipe for ONNX's shape inference");
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw_error(ErrorKind::Io, "cannot fork for ONNX's shape inference");
  }
  if (pid == 0) {
    close(fds[0]);
    onnx::ModelProto m;
    std::string answer;
    try {
      m.ParseFromString(request);
      onnx::ShapeInferenceOptions options{true, 1, false};  // check types, fail on errors, no data propagation
      onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), options);
      answer = "1" + m.SerializeAsString();
    } catch (const std::exception& e) {
      answer = std::string("0") + e.what();
    }
    for (size_t at = 0; at < answer.size();) {
      ssize_t n = write(fds[1], answer.data() + at, answer.size() - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string answer;
  char buf[1 << 16];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    invalid("ONNX's shape inference crashed on " + path + " (signal " + std::to_string(WTERMSIG(status)) +
            "): the model is malformed");
  if (answer.empty()) invalid("ONNX's shape inference gave no answer on " + path);
  if (answer[0] == '0') invalid("ONNX shape inference failed on " + path + ": " + answer.substr(1));
  if (!model.ParseFromString(answer.substr(1))) invalid("ONNX's shape inference answered garbage on " + path);
}

}  // namespace

Graph read_onnx(const std::string& path, const std::map<std::string, Dims>& inputs) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw_error(ErrorKind::Io, "cannot read " + path);
  f.seekg(0, std::ios::end);
  std::string bytes(static_cast<size_t>(std::max<std::streamoff>(f.tellg(), 0)), '\0');
  f.seekg(0);
  if (!f.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw_error(ErrorKind::Io, "cannot read " + path);
  return read_onnx_bytes(bytes, path, inputs);
}

Graph read_onnx_bytes(const std::string& bytes, const std::string& path, const std::map<std::string, Dims>& inputs) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes) || !model.has_graph())
    invalid(path + " is not an ONNX model (its protobuf does not parse as a ModelProto with a graph)");
  // Operator sets newer than the ONNX library knows would be read with the wrong semantics.
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  for (auto& o : model.opset_import()) {
    std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
    auto range = known.find(domain);
    if (range == known.end()) {
      if (domain.empty()) continue;
      bool used = false;
      for (auto& n : model.graph().node()) used |= n.domain() == o.domain();
      if (used) invalid(path + " uses the operator set domain '" + o.domain() + "', which ONNX import does not know");
      continue;
    }
    if (o.version() > range->second.second || o.version() < range->second.first)
      invalid(path + ": opset " + std::to_string(o.version()) + (domain.empty() ? "" : " of '" + domain + "'") +
              " is outside the versions this ONNX library knows (" + std::to_string(range->second.first) + " to " +
              std::to_string(range->second.second) + ")");
  }
  check_topological(model.graph(), path);
  // ONNX's own checker on each node (against its operator's schema: inputs, attributes, types)
  // before its shape inference, which trusts what it reads (a node short of an input crashed
  // it). The graph-level checks are left out: they refuse outputs declared without a shape,
  // which exporters write and the import does not need.
  {
    onnx::checker::CheckerContext context;
    context.set_ir_version(static_cast<int>(model.ir_version()));
    std::unordered_map<std::string, int> opsets;
    for (auto& o : model.opset_import()) opsets[o.domain()] = static_cast<int>(o.version());
    context.set_opset_imports(opsets);
    context.set_schema_registry(onnx::OpSchemaRegistry::Instance());
    onnx::checker::LexicalScopeContext scope;
    for (auto& in : model.graph().input()) scope.add(in.name());
    for (auto& t : model.graph().initializer()) scope.add(t.name());
    for (auto& n : model.graph().node()) {
      try {
        onnx::checker::check_node(n, context, scope);
      } catch (const std::exception& e) {
        invalid(path + ": node '" + n.name() + "' (" + n.op_type() + ") fails ONNX's checker: " + e.what());
      }
      for (auto& out : n.output()) scope.add(out);
    }
  }
  onnx::GraphProto* graph = model.mutable_graph();
  Graph g;
  g.name = graph->name().empty() ? path : graph->name();
  for (auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") g.opset = o.version();
  std::set<std::string> initializers;
  for (auto& t : graph->initializer()) initializers.insert(t.name());
  std::set<std::string> seen;
  for (auto& in : *graph->mutable_input()) {
    if (initializers.count(in.name())) continue;
    seen.insert(in.name());
    g.inputs.push_back(in.name());
    auto given = inputs.find(in.name());
    if (given == inputs.end() && !in.type().tensor_type().has_shape())
      invalid("input '" + in.name() + "' has no shape in the model: give its dimensions (--input " + in.name() +
              "=... on the command line, inputs=" + in.name() + "=... over REST)");
    auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (given == inputs.end()) {
      for (int d = 0; d < shape->dim_size(); ++d)
        if (!shape->dim(d).has_dim_value())
          invalid("input '" + in.name() + "' has the dynamic dimension " + std::to_string(d) +
                  (shape->dim(d).dim_param().empty() ? "" : " ('" + shape->dim(d).dim_param() + "')") +
                  ": give its dimensions (--input " + in.name() + "=... on the command line, inputs=" + in.name() +
                  "=... over REST)");
      continue;
    }
    if (shape->dim_size() != 0 && shape->dim_size() != static_cast<int>(given->second.size()))
      invalid("input '" + in.name() + "' has " + std::to_string(shape->dim_size()) + " dimensions; --input gives " +
              std::to_string(given->second.size()));
    if (shape->dim_size() == 0)
      for (size_t d = 0; d < given->second.size(); ++d) shape->add_dim();
    for (int d = 0; d < shape->dim_size(); ++d) {
      auto* dim = shape->mutable_dim(d);
      std::int64_t want = given->second[d];
      if (want < 1) invalid("input '" + in.name() + "': dimension " + std::to_string(d) + " must be at least 1");
      if (dim->has_dim_value() && dim->dim_value() != want)
        invalid("input '" + in.name() + "' has dimension " + std::to_string(d) + " fixed to " +
                std::to_string(dim->dim_value()) + " in the model; --input gives " + std::to_string(want));
      dim->set_dim_value(want);
    }
  }
  for (auto& [name, dims] : inputs)
    if (!seen.count(name)) {
      std::string known;
      for (auto& s : seen) known += (known.empty() ? "" : ", ") + s;
      invalid("the model has no input '" + name + "'; its inputs are: " + known);
    }
  infer_shapes_isolated(model, path);
  graph = model.mutable_graph();
  for (auto& t : graph->initializer()) keep_constant(g, t, t.name());
  Dims d;
  for (auto* list : {&graph->input(), &graph->value_info(), &graph->output()})
    for (auto& v : *list) {
      if (known_shape(v, d)) {
        // Every later product of dimensions stays in range: no tensor past 2^48 elements.
        std::int64_t n = 1;
        for (auto x : d)
          if (x < 0 || (x > 0 && n > (std::int64_t(1) << 48) / x))
            invalid(path + ": the dimensions of '" + v.name() + "' are out of range (over 2^48 elements)");
          else
            n *= x;
        g.shapes[v.name()] = d;
      }
      if (v.type().has_tensor_type()) g.types[v.name()] = v.type().tensor_type().elem_type();
    }
  for (auto& out : graph->output()) g.outputs.push_back(out.name());
  for (auto& n : graph->node()) {
    Node node;
    node.name = n.name().empty() ? n.op_type() + "_" + std::to_string(g.nodes.size()) : n.name();
    node.type = n.op_type();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (auto& a : n.attribute()) {
      Attribute attr;
      attr.i = a.i();
      attr.f = a.f();
      attr.ints.assign(a.ints().begin(), a.ints().end());
      attr.s = a.s();
      node.attrs[a.name()] = attr;
      if (node.type == "Constant" && a.name() == "value" && a.has_t() && !node.outputs.empty())
        keep_constant(g, a.t(), node.outputs[0]);
    }
    g.nodes.push_back(std::move(node));
  }
  return g;
}

std::pair<Dims, std::vector<float>> read_tensor_pb(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw_error(ErrorKind::Io, "cannot read " + path);
  onnx::TensorProto t;
  if (!t.ParseFromIstream(&f)) invalid(path + " is not an ONNX TensorProto");
  return {tensor_dims(t), tensor_floats(t)};
}

}  // namespace detail

std::pair<std::string, Dims> parse_input_shape(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    invalid("--input wants NAME=D1,D2,... (like data=1,3,224,224), got '" + text + "'");
  Dims dims;
  std::string rest = text.substr(eq + 1);
  size_t at = 0;
  while (at <= rest.size()) {
    size_t comma = rest.find(',', at);
    std::string part = rest.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (part.empty() || part.size() > 10 || part.find_first_not_of("0123456789") != std::string::npos)
      invalid("--input " + text + ": '" + part + "' is not a dimension (a positive integer)");
    std::int64_t v = std::stoll(part);
    if (v < 1 || v >= (std::int64_t(1) << 31)) invalid("--input " + text + ": dimension " + part + " is out of range");
    dims.push_back(v);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return {text.substr(0, eq), dims};
}

Imported import_onnx(const std::string& path, const std::map<std::string, Dims>& inputs) {
  return detail::map_graph(detail::read_onnx(path, inputs));
}

Imported import_onnx_bytes(const std::string& bytes, const std::string& name,
                           const std::map<std::string, Dims>& inputs) {
  return detail::map_graph(detail::read_onnx_bytes(bytes, name, inputs));
}

nlohmann::json suite_json(const Imported& m, int trials) {
  nlohmann::json cases = nlohmann::json::array(), skipped = nlohmann::json::array();
  for (auto& t : m.tasks) {
    cases.push_back({{"op_text", t.op_text},
                     {"sizes", t.sizes},
                     {"weight", t.weight},
                     {"onnx_nodes", t.nodes},
                     {"onnx_tensors", t.tensors}});
    if (!t.vendor.empty()) cases.back()["vendor"] = nlohmann::json::parse(t.vendor);
  }
  for (auto& s : m.skipped)
    skipped.push_back({{"node", s.node}, {"op_type", s.op_type}, {"reason", s.reason}, {"layout_only", s.layout_only}});
  return {{"name", m.model},
          {"description", "imported from ONNX: " + std::to_string(m.tasks.size()) + " tasks"},
          {"trials", trials},
          {"cases", cases},
          {"skipped_nodes", skipped}};
}

}  // namespace tiletune::models
