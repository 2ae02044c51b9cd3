// ir/knobs.hpp
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/schedule.hpp"

namespace tiletune::ir {

//! A value a knob may take and its relative weight when the space draws it.
struct Choice {
  std::int64_t value = 0;
  double weight = 1;
};

//! One knob of the schedule space, declared once: sampling and mutation (tuner/space) draw from
//! `choices`, the checker accepts [min, max], the config JSON and its schema use `name`, and the
//! cost model reads it through `feature`. A knob whose value is a list or an axis name (tile,
//! order, vectorize, pack) declares its parts as knobs of their own ("tile.rows": the register
//! block of a spatial axis), each with the choices the space draws that part from.
struct Knob {
  const char* name;  //!< the config's JSON key; "key.part" for a part of a structured knob
  const char* doc;
  std::int64_t default_value;   //!< the naive schedule's value
  std::int64_t min, max;        //!< what the checker accepts
  std::vector<Choice> choices;  //!< what the space draws (a knob of two choices {1, 0} is a coin)
  const char* feature;          //!< the cost-model feature (costmodel::feature_docs) it enters
  //! The StageSchedule field of an integer knob of a stage (unroll, prefetch, parallel):
  //! the config JSON, the checker and "has no knobs" iterate over these.
  int StageSchedule::*field = nullptr;
  //! An integer knob absent from the JSON at its default, so that configs written before it
  //! existed keep their keys (and records their config keys).
  bool omit_default = false;

  //! The choices in [lo, hi], with their weights.
  std::vector<Choice> choices_in(std::int64_t lo, std::int64_t hi) const;
};

namespace knobs {
// Integer knobs of a stage.
extern const Knob unroll;    //!< unroll factor of the micro-kernel's reduction loop
extern const Knob prefetch;  //!< iterations ahead its vector loads are prefetched (CPU)
extern const Knob parallel;  //!< leading loops of the order run in parallel (collapsed)
// Structure of a stage.
extern const Knob inline_stage;   //!< elementwise temp stage substituted into its readers
extern const Knob fuse_epilogue;  //!< reduction stage applies the next elementwise stage at its store
extern const Knob vectorize;      //!< some axis in SIMD lanes (a coin; which axis: uniform)
extern const Knob pack;           //!< each optional input packed into panels (a coin per input)
extern const Knob order;          //!< the shape of a sampled loop order (see tuner::Space)
// Tile sizes of a stage, by the role of the axis (CPU).
extern const Knob tile_levels;   //!< tile levels of an axis (the checker's range); draws levels added above the block
extern const Knob tile_factor;   //!< each level above the block: a multiple of the next
extern const Knob tile_rows;     //!< register block of a spatial axis not in SIMD lanes
extern const Knob tile_vectors;  //!< register block of the SIMD axis, in vectors
extern const Knob tile_reduce;   //!< the micro-kernel's block of a reduction axis
// Tile sizes on a work-group device (OpenCL, CUDA).
extern const Knob group_item;    //!< points per work-item along a spatial axis
extern const Knob group_items;   //!< work-items per group along a spatial axis
extern const Knob group_reduce;  //!< step of a reduction axis (what a staged input holds)
// Of the whole program.
extern const Knob fuse_rows;  //!< all stages in one loop over row blocks: a multiple of the stages' row tiles (0: off)
}  // namespace knobs

//! Every knob, in documentation order.
const std::vector<const Knob*>& all_knobs();
//! The integer knobs of a stage (those with a StageSchedule field).
const std::vector<const Knob*>& stage_int_knobs();

//! "" if `value` is in the knob's range, else "<name> must be in [min, max]".
std::string knob_range_problem(const Knob& k, std::int64_t value);

}  // namespace tiletune::ir
