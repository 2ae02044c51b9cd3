// tuner/pretrained.hpp — cost models shipped with tiletune (costmodel/pretrained/, compiled
// in), trained on the corpus (ops/corpus/) of one machine kind: what guides a model-guided
// search on a target that has no model and no records of its own yet.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/backend.hpp"
#include "costmodel/model.hpp"

namespace tiletune::tuner {

//! What a shipped model is for: the backend and its SIMD width, "cpu-simd16" (features count
//! lanes and registers, so a model transfers between machines of one kind).
std::string machine_kind(const codegen::TargetInfo& t);

//! The name a shipped model of `kind` has for a machine kind: "xgb-cpu-simd16.model".
std::string shipped_model_name(const std::string& kind, const std::string& machine_kind);

//! The names of the shipped models.
std::vector<std::string> shipped_models();

//! The shipped model file that shipped_model(kind, t) starts from: its own, else, for a kind
//! that builds on another (costmodel::built_on_kind: xgb-pairs on xgb), that kind's; "" if none.
std::string shipped_model_file(const std::string& kind, const codegen::TargetInfo& t);

//! The shipped model of `kind` for the target's machine kind, built from shipped_model_file, or
//! nullptr where there is none. A shipped model of another feature version is refused with
//! Error(InvalidInput) saying so.
std::unique_ptr<costmodel::CostModel> shipped_model(const std::string& kind, const codegen::TargetInfo& t,
                                                    costmodel::ModelMeta* meta = nullptr);

}  // namespace tiletune::tuner
