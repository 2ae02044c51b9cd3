#include "cli/inputs.hpp"

#include <cctype>

#include "ir/parse.hpp"
#include "ops/library.hpp"
#include "support/error.hpp"

namespace tiletune::cli {

ir::Workload load_workload(const std::string& op, const std::string& op_name, const std::string& sizes) {
  ir::OpDef def = ops::load_op(op, op_name).def;
  try {
    return ir::bind(def, ir::parse_sizes(sizes));
  } catch (const Error& e) {
    // Binding errors point into the op text by line:column (an access out of bounds) too.
    std::string what = e.what();
    bool located = !what.empty() && std::isdigit(static_cast<unsigned char>(what[0]));
    throw_error(e.kind(), located ? ops::op_origin(op) + what : what);
  }
}

Suite load_suite(const std::string& suite) {
  std::string text = is_file(suite) ? read_text_file(suite) : ops::suite_text(suite);
  Suite s;
  s.json = nlohmann::json::parse(text, nullptr, false);
  if (s.json.is_discarded() || !s.json.is_object() || !s.json.contains("cases") || !s.json["cases"].is_array())
    throw_error(ErrorKind::InvalidInput, "suite " + suite + ": expected a JSON object with a \"cases\" array");
  for (auto& cs : s.json["cases"]) {
    // A case names a library op or a .tile file ("op"), or carries its op text ("op_text", as
    // `tiletune import` writes them).
    bool inline_text = cs.is_object() && cs.contains("op_text") && cs["op_text"].is_string();
    if (!cs.is_object() || (!inline_text && (!cs.contains("op") || !cs["op"].is_string())) || !cs.contains("sizes") ||
        !cs["sizes"].is_string() || (cs.contains("op_name") && !cs["op_name"].is_string()))
      throw_error(ErrorKind::InvalidInput, "suite " + suite +
                                               ": each case needs string fields \"op\" (or \"op_text\") and "
                                               "\"sizes\" (and \"op_name\" a string)");
    if (inline_text) {
      std::string text = cs["op_text"].get<std::string>();
      try {
        s.workloads.push_back(ir::bind(ir::select_op(ir::parse_ops(text), cs.value("op_name", ""), "op_text"),
                                       ir::parse_sizes(cs["sizes"].get<std::string>())));
      } catch (const Error& e) {
        throw_error(e.kind(), "suite " + suite + ", case " + std::to_string(s.cases.size() + 1) + ": " + e.what());
      }
    } else {
      s.workloads.push_back(
          load_workload(cs["op"].get<std::string>(), cs.value("op_name", ""), cs["sizes"].get<std::string>()));
    }
    s.cases.push_back(cs);
  }
  return s;
}

}  // namespace tiletune::cli
