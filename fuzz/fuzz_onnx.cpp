// libFuzzer harness: bytes as an ONNX model through the importer (protobuf parse, ONNX's shape
// inference, the mapping to tile ops). Every outcome is tasks or a tiletune::Error of kind
// InvalidInput; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/parse.hpp"
#include "ir/workload.hpp"
#include "models/onnx_import.hpp"
#include "support/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    auto m = tiletune::models::import_onnx_bytes(bytes, "fuzz.onnx", {});
    for (auto& t : m.tasks) {
      // What import hands on must bind: it checked it.
      auto w = tiletune::ir::bind(tiletune::ir::parse_op(t.op_text), tiletune::ir::parse_sizes(t.sizes));
      (void)w;
    }
  } catch (const tiletune::Error& e) {
    if (e.kind() != tiletune::ErrorKind::InvalidInput) __builtin_trap();
  }
  return 0;
}
