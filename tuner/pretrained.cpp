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
  if (it == embedded_models().end()) {
    // None of its own: a kind that builds on another starts from that kind's shipped model.
    const std::string on = costmodel::built_on_kind(kind);
    auto base = on.empty() ? nullptr : shipped_model(on, t, meta);
    if (!base) return nullptr;
    if (meta) meta->kind = kind;
    return costmodel::make_model_on(kind, std::move(base));
  }
  try {
    return costmodel::load_model(it->second, meta);
  } catch (const Error& e) {
    throw_error(e.kind(), "the shipped model " + name + ": " + e.what());
  }
}

}  // namespace tiletune::tuner
