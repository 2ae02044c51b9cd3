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

std::string shipped_model_file(const std::string& kind, const codegen::TargetInfo& t) {
  const std::string name = shipped_model_name(kind, machine_kind(t));
  if (embedded_models().count(name)) return name;
  // None of its own: a kind that builds on another starts from that kind's shipped model.
  const std::string on = costmodel::built_on_kind(kind);
  return on.empty() ? "" : shipped_model_file(on, t);
}

std::unique_ptr<costmodel::CostModel> shipped_model(const std::string& kind, const codegen::TargetInfo& t,
                                                    costmodel::ModelMeta* meta) {
  const std::string file = shipped_model_file(kind, t);
  if (file.empty()) return nullptr;
  std::unique_ptr<costmodel::CostModel> model;
  try {
    model = costmodel::load_model(embedded_models().at(file), meta);
  } catch (const Error& e) {
    throw_error(e.kind(), "the shipped model " + file + ": " + e.what());
  }
  if (model->kind() == kind) return model;
  if (meta) meta->kind = kind;
  return costmodel::make_model_on(kind, std::move(model));
}

}  // namespace tiletune::tuner
