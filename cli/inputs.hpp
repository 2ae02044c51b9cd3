// cli/inputs.hpp: what the subcommands read from the command line's names: op files or library
// ops, suites, text files.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir/workload.hpp"
#include "support/files.hpp"  // is_file, read_text_file

namespace tiletune::cli {

//! A library op name or .tile file (`op_name` picks one of several) bound to sizes; errors point
//! into the file.
ir::Workload load_workload(const std::string& op, const std::string& op_name, const std::string& sizes);

//! A suite (library name or JSON file): its cases bound to workloads, in order, and the JSON case
//! each came from (op, sizes, op_name, and whatever else a case carries, such as ONNX nodes).
struct Suite {
  nlohmann::json json;
  std::vector<ir::Workload> workloads;
  std::vector<nlohmann::json> cases;
};
Suite load_suite(const std::string& suite);

}  // namespace tiletune::cli
