// tests/helpers.hpp — shared by the test files
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

#include "ir/parse.hpp"
#include "ir/workload.hpp"
#include "ops/library.hpp"
#include "support/error.hpp"

namespace tiletune::test {

//! A fresh folder removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("tiletune-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

//! Built kernels are content-addressed, so tests share one cache across runs.
inline std::string kernel_cache() { return TILETUNE_TEST_CACHE; }

inline ir::Workload library_workload(const std::string& op, const std::string& sizes) {
  return ir::bind(ir::parse_op(ops::op_text(op)), ir::parse_sizes(sizes));
}

//! The message of the tiletune::Error that `f` throws, or "" if it throws none.
template <typename F>
std::string error_of(F&& f, ErrorKind* kind = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "";
}

}  // namespace tiletune::test
