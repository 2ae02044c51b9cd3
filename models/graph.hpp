// models/graph.hpp — internal to models/: an ONNX graph after shape inference, in plain C++ (the
// mapping to tile ops needs no protobuf).
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "models/onnx_import.hpp"

namespace tiletune::models::detail {

struct Attribute {
  std::int64_t i = 0;
  float f = 0;
  std::vector<std::int64_t> ints;
  std::string s;
};

struct Node {
  std::string name, type;
  std::vector<std::string> inputs, outputs;  //!< "" for an omitted optional input
  std::map<std::string, Attribute> attrs;
  std::int64_t attr_i(const std::string& k, std::int64_t otherwise) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? otherwise : it->second.i;
  }
  float attr_f(const std::string& k, float otherwise) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? otherwise : it->second.f;
  }
  std::vector<std::int64_t> attr_ints(const std::string& k, std::vector<std::int64_t> otherwise) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? otherwise : it->second.ints;
  }
};

struct Graph {
  std::string name;
  std::int64_t opset = 13;                           //!< of the default (ai.onnx) domain
  std::vector<Node> nodes;                           //!< in topological order, as ONNX requires
  std::map<std::string, Dims> shapes;                //!< every value whose shape is known
  std::set<std::string> constants;                   //!< initializers and Constant outputs
  std::map<std::string, int> types;                  //!< ONNX element type (TensorProto::DataType) where known
  std::map<std::string, std::vector<float>> values;  //!< float data of the small constants
  std::vector<std::string> inputs;                   //!< the graph's inputs that are not initializers
  std::vector<std::string> outputs;                  //!< the graph's outputs
};

//! Reads the file and runs shape inference with the inputs bound (see import_onnx).
Graph read_onnx(const std::string& path, const std::map<std::string, Dims>& inputs);
//! The same for a model's bytes; `name` stands for the file in messages.
Graph read_onnx_bytes(const std::string& bytes, const std::string& name, const std::map<std::string, Dims>& inputs);

//! A tensor stored as an ONNX TensorProto file (the inputs and outputs of ONNX's node tests):
//! its dimensions and, for float tensors, its values.
std::pair<Dims, std::vector<float>> read_tensor_pb(const std::string& path);

//! Maps the graph's nodes to tasks (models/tasks.cpp).
Imported map_graph(const Graph& g);

}  // namespace tiletune::models::detail
