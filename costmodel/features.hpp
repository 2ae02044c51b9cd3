// costmodel/features.hpp
#pragma once
#include <string>
#include <vector>

#include "ir/loop_nest.hpp"

namespace tiletune::costmodel {

//! Version of the feature set: models record it and refuse to load against another.
inline constexpr int kFeatureVersion = 1;

//! Names of the features, one line of documentation each, in vector order.
const std::vector<std::pair<std::string, std::string>>& feature_docs();
std::size_t feature_count();

//! Fixed-length features of one lowered candidate: per-stage features summed over stages
//! (stages are few; the sum keeps the length fixed). Footprints are compared with the
//! target's cache sizes. Deterministic; changes with the schedule.
std::vector<float> extract_features(const ir::Workload& w, const ir::LoopNest& nest, const ir::TargetTraits& t);

}  // namespace tiletune::costmodel
