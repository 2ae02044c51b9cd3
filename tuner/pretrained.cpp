#include "tuner/pretrained.hpp"

#include <map>

#include "support/error.hpp"

namespace tiletune::tuner {

// Generated from costmodel/pretrained/ by CMake (cmake/embed_files.cmake, binary).
extern const std::map<std::string, std::string>& embedded_models();

std::string machine_kind(const codegen::TargetInfo& t) {
  return t.backend + "-simd" + std::to_string(t.traits.vector_lanes);
}

std::string shipped_model_name(const std::string& kind, const std::string& machine_kind) {
  return kind + "-" + machine_kind + ".model";
}

std::vector<std::string> shipped_models() {
  std::vector<std::string> out;
  for (auto& [name, blob] : embedded_models()) out.push_back(name);
  return out;
}

std::unique_ptr<costmodel::CostModel> shipped_model(const std::string& kind, const codegen::TargetInfo& t,
                                                    costmodel::ModelMeta* meta) {
  std::string name = shipped_model_name(kind, machine_kind(t));
  auto it = embedded_models().find(name);
  if (it == embedded_models().end()) return nullptr;
  try {
    return costmodel::load_model(it->second, meta);
  } catch (const Error& e) {
    throw_error(e.kind(), "the shipped model " + name + ": " + e.what());
  }
}

}  // namespace tiletune::tuner
