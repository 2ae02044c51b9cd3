#include "ops/library.hpp"

#include <map>

#include "ir/parse.hpp"
#include "support/error.hpp"
#include "support/files.hpp"

namespace tiletune::ops {

// Generated from ops/ by CMake (cmake/embed_ops.cmake): relative path -> file text.
extern const std::map<std::string, std::string>& embedded_files();

namespace {

std::vector<std::string> names_in(const std::string& folder, const std::string& ext) {
  std::vector<std::string> out;
  for (auto& [path, text] : embedded_files()) {
    if (path.size() <= ext.size() || path.compare(path.size() - ext.size(), ext.size(), ext) != 0) continue;
    std::string rest = path.substr(0, path.size() - ext.size());
    if (folder.empty() ? rest.find('/') == std::string::npos : rest.rfind(folder + "/", 0) == 0)
      out.push_back(folder.empty() ? rest : rest.substr(folder.size() + 1));
  }
  return out;
}

std::string lookup(const std::string& path, const std::string& what, const std::vector<std::string>& names,
                   const std::string& name) {
  auto it = embedded_files().find(path);
  if (it != embedded_files().end()) return it->second;
  std::string known;
  for (auto& n : names) known += (known.empty() ? "" : ", ") + n;
  throw_error(ErrorKind::NotFound, "no library " + what + " named '" + name + "'; the library has: " + known);
}

}  // namespace

std::vector<std::string> op_names() { return names_in("", ".tile"); }
std::vector<std::string> suite_names() { return names_in("suites", ".json"); }
std::string op_text(const std::string& name) { return lookup(name + ".tile", "op", op_names(), name); }
std::string suite_text(const std::string& name) {
  return lookup("suites/" + name + ".json", "suite", suite_names(), name);
}

std::vector<std::string> corpus_names() { return names_in("corpus", ".json"); }
std::string corpus_text(const std::string& name) {
  return lookup("corpus/" + name + ".json", "corpus recipe", corpus_names(), name);
}

std::string op_origin(const std::string& op) { return (is_file(op) ? op : "library op " + op) + ":"; }

LoadedOp load_op(const std::string& op, const std::string& op_name) {
  LoadedOp out;
  out.text = is_file(op) ? read_text_file(op) : op_text(op);
  std::vector<ir::OpDef> defs;
  try {
    defs = ir::parse_ops(out.text);
  } catch (const Error& e) {
    throw_error(e.kind(), op_origin(op) + e.what());
  }
  out.def = ir::select_op(std::move(defs), op_name, op);
  return out;
}

}  // namespace tiletune::ops
