// costmodel/kinds.hpp: the model implementations, for model.cpp's factory only.
#pragma once
#include <memory>

#include "costmodel/model.hpp"

namespace tiletune::costmodel {

std::unique_ptr<CostModel> make_xgb_model(std::uint64_t seed);
std::unique_ptr<CostModel> make_nn_model(std::uint64_t seed);

//! Samples in group order with their labels (costmodel/ranking.hpp relative_speed): what both
//! models train on.
struct Grouped {
  std::vector<const Sample*> samples;
  std::vector<float> labels;
  std::vector<unsigned> group_sizes;
};
Grouped group_samples(const std::vector<Sample>& samples);

//! Error(InvalidInput) unless a loaded payload's `width` is the feature count of a version this
//! build reads (feature_count(version)); `model` names it in the message.
void check_payload_width(std::size_t width, const std::string& model);

//! What a training pair of xgb's loss weighs when its faster candidate is `ratio` (>= 1) times
//! as fast as the other: 1 - exp(-ln(ratio) / 0.3), from 0 at a tie through 0.27 at 1.1x and
//! 0.9 at 2x, to 1 against a failure (ratio infinite). Near ties weigh little: their order
//! often flips when the same kernels are timed again (a third of the pairs within 5 %, README,
//! Cost models), so they teach noise, and the search gains little from them.
double pair_weight(double ratio);

}  // namespace tiletune::costmodel
