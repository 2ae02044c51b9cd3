// models/onnx_import.hpp — ONNX models in: a network becomes tuning tasks (tile ops with sizes).
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace tiletune::models {

using Dims = std::vector<std::int64_t>;

//! One tuning task of a model: a tile op with its sizes, run `weight` times per inference.
struct Task {
  std::string op_text;  //!< readable tile-op text
  std::string sizes;    //!< "C=64,H=56,..."
  std::string key;      //!< its workload key: tasks with one key are merged
  int weight = 1;
  //! The ONNX nodes it computes, per occurrence: the kernel's node and the nodes fused into it.
  std::vector<std::vector<std::string>> nodes;
  //! Per occurrence, the ONNX value each tensor of the op is (a folded batch norm's shift is
  //! named "folded:" + its node).
  std::vector<std::map<std::string, std::string>> tensors;
  //! The layer as a vendor library has it, JSON ("" where none has it): {"primitive":
  //! "convolution" | "matmul" | "pooling" | "softmax" | "layer_normalization", its geometry,
  //! "post_ops": the fused epilogue's steps a vendor can fuse, "unfused": those it cannot}.
  std::string vendor;
};

//! A node that gets no kernel of its own, and why: layout only (reshape, transpose, ...), or not
//! mapped. Nodes fused into a task's epilogue are not listed here.
struct Skipped {
  std::string node, op_type, reason;
  bool layout_only = false;
};

struct Imported {
  std::string model;  //!< the graph's name, or the file's
  std::vector<Task> tasks;
  std::vector<Skipped> skipped;
};

//! Parses `NAME=1,3,224,224`; throws Error(InvalidInput) on malformed text.
std::pair<std::string, Dims> parse_input_shape(const std::string& text);

//! Reads an ONNX model, gives its inputs the dimensions in `inputs` (name -> dims; needed for
//! every dynamic dimension), runs ONNX's shape inference and maps its nodes to tasks. Throws
//! Error(InvalidInput) for a file that is not an ONNX model, an unknown input name, dimensions
//! that do not fit the model or a dynamic dimension left unbound; Error(Io) if unreadable.
//! Also Error(InvalidInput) for an opset the ONNX library does not know, a graph out of
//! topological order (or cyclic), and dimensions whose product is out of range.
Imported import_onnx(const std::string& path, const std::map<std::string, Dims>& inputs);
//! The same for a model's bytes (a REST upload); `name` stands for the file in messages.
Imported import_onnx_bytes(const std::string& bytes, const std::string& name,
                           const std::map<std::string, Dims>& inputs);

//! The imported model as a suite (ops/suites format: cases with "op_text", "sizes", "weight" and
//! "onnx_nodes"), plus the skipped nodes.
nlohmann::json suite_json(const Imported& m, int trials);

}  // namespace tiletune::models
