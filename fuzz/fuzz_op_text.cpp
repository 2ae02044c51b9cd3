// libFuzzer harness: op text through the parser, the checker and binding to sizes. Every
// outcome is a bound workload or a tiletune::Error of kind InvalidInput; anything else (another
// exception, a crash, an ASan report) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/parse.hpp"
#include "ir/workload.hpp"
#include "support/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  // "OP TEXT\n---\nSIZES": sizes after a separator line, else a fixed set.
  std::string sizes = "M=7,N=5,K=3,N2=2,C=3,H=6,W=6,R=3,S=3,D=4,G=2,E=8";
  if (auto at = text.find("\n---\n"); at != std::string::npos) {
    sizes = text.substr(at + 5);
    text.resize(at);
  }
  try {
    auto ops = tiletune::ir::parse_ops(text);
    for (auto& op : ops) {
      try {
        tiletune::ir::Workload w = tiletune::ir::bind(op, tiletune::ir::parse_sizes(sizes));
        (void)w.flops();
        (void)w.io_bytes();
      } catch (const tiletune::Error& e) {
        if (e.kind() != tiletune::ErrorKind::InvalidInput) __builtin_trap();
      }
    }
  } catch (const tiletune::Error& e) {
    if (e.kind() != tiletune::ErrorKind::InvalidInput) __builtin_trap();
  }
  return 0;
}
