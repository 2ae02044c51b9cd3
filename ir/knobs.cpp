#include "ir/knobs.hpp"

#include <limits>

namespace tiletune::ir {

namespace {
constexpr std::int64_t kUnbounded = std::numeric_limits<std::int64_t>::max();
}  // namespace

namespace knobs {

// One knob per entry, read as a table: name, doc, default, min, max, {value, weight} choices,
// feature[, StageSchedule field[, omit_default]].
// clang-format off
const Knob unroll{"unroll", "unroll factor of the micro-kernel's reduction loop (0: the compiler decides)",
    0, 0, 64, {{0, 2}, {2, 1}, {4, 1}, {8, 1}, {16, 1}}, "unroll", &StageSchedule::unroll};
const Knob prefetch{"prefetch", "iterations of the micro-kernel's reduction loop ahead that its vector loads are "
    "prefetched (0: none; a CPU reduction stage only)",
    0, 0, 64, {{0, 3}, {2, 1}, {4, 1}, {8, 1}, {16, 1}, {32, 1}}, "prefetch", &StageSchedule::prefetch,
    /*omit_default=*/true};
const Knob parallel{"parallel", "how many leading loops of the order run in parallel, collapsed (level-0 spatial loops)",
    0, 0, 8, {{0, 1}, {1, 2}, {2, 2}}, "parallel_loops", &StageSchedule::parallel};

const Knob inline_stage{"inline", "an elementwise stage writing a temporary is substituted into its readers",
    0, 0, 1, {{1, 1}, {0, 1}}, "inlined"};
const Knob fuse_epilogue{"fuse_epilogue", "a reduction stage applies the next elementwise stage at its store",
    0, 0, 1, {{1, 0.7}, {0, 0.3}}, "epilogue"};
const Knob vectorize{"vectorize", "an axis computed in SIMD lanes, or none (drawn: whether; the axis: uniform)",
    0, 0, 1, {{1, 0.85}, {0, 0.15}}, "vector_lanes_log"};
const Knob pack{"pack", "inputs copied into panels first (drawn: each optional input, a coin)",
    0, 0, 1, {{1, 1}, {0, 1}}, "packed"};
const Knob order{"order", "loop order, outermost first (drawn: its shape: 0 spatial blocks, then reduction blocks, "
    "then the rest, as a BLAS; 1 every spatial loop outside the reductions; 2 any interleaving)",
    0, 0, 2, {{0, 0.4}, {1, 0.3}, {2, 0.3}}, "loop_trips_by_depth"};

const Knob tile_levels{"tile.levels", "tile levels of an axis, the register or micro-kernel block included",
    1, 1, 4, {{1, 1}, {2, 1}, {3, 1}}, "outer_loops"};
const Knob tile_factor{"tile.factor", "a tile level above the block: this multiple of the level inside it",
    1, 1, kUnbounded, {{2, 1}, {4, 1}, {8, 1}, {16, 1}, {32, 1}, {64, 1}}, "fit_l2"};
const Knob tile_rows{"tile.rows", "register block of a spatial axis not in SIMD lanes, in points",
    1, 1, kUnbounded, {{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}, {8, 1}, {10, 1}, {12, 1}, {14, 1},
                       {16, 0.5}, {32, 0.5}, {64, 0.5}, {128, 0.5}}, "reg_points"};
const Knob tile_vectors{"tile.vectors", "register block of the SIMD axis, in vectors of the target's lanes",
    1, 1, kUnbounded, {{1, 1}, {2, 2}, {3, 1}, {4, 2}}, "accumulators"};
const Knob tile_reduce{"tile.reduce", "the micro-kernel's block of a reduction axis, in points (0: the whole axis)",
    0, 1, kUnbounded, {{0, 1}, {4, 1}, {8, 1}, {16, 1}, {32, 1}, {64, 1}, {128, 2}, {256, 2}, {512, 1}},
    "reduce_inner_log"};

const Knob group_item{"tile.group_item", "points per work-item along a spatial axis (in vectors along the SIMD axis)",
    1, 1, kUnbounded, {{1, 2}, {2, 1}, {4, 1}, {8, 1}}, "reg_points"};
const Knob group_items{"tile.group_items", "work-items per work-group along a spatial axis",
    1, 1, kUnbounded, {{1, 1}, {2, 1}, {4, 1}, {8, 1}, {16, 1}, {32, 1}, {64, 1}, {128, 1}, {256, 1}},
    "parallel_log"};
const Knob group_reduce{"tile.group_reduce", "step of a reduction axis on a work-group device (0: the whole axis)",
    0, 1, kUnbounded, {{0, 1}, {1, 1}, {2, 1}, {4, 1}, {8, 1}, {16, 1}, {32, 1}, {64, 1}}, "reduce_inner_log"};

const Knob fuse_rows{"fuse_rows", "rows per block of one parallel loop around all stages (0: none); drawn as a "
    "multiple of the stages' outer row tiles",
    0, 0, kUnbounded, {{0, 5}, {1, 1}, {2, 1}, {4, 1}, {8, 1}, {16, 1}}, "fuse_rows_log"};
// clang-format on

}  // namespace knobs

std::vector<Choice> Knob::choices_in(std::int64_t lo, std::int64_t hi) const {
  std::vector<Choice> out;
  for (auto& c : choices)
    if (c.value >= lo && c.value <= hi) out.push_back(c);
  return out;
}

const std::vector<const Knob*>& all_knobs() {
  using namespace knobs;
  static const std::vector<const Knob*> all = {
      &unroll,      &prefetch,   &parallel,    &inline_stage, &fuse_epilogue, &vectorize,
      &pack,        &order,      &tile_levels, &tile_factor,  &tile_rows,     &tile_vectors,
      &tile_reduce, &group_item, &group_items, &group_reduce, &fuse_rows};
  return all;
}

const std::vector<const Knob*>& stage_int_knobs() {
  static const std::vector<const Knob*> ints = [] {
    std::vector<const Knob*> out;
    for (const Knob* k : all_knobs())
      if (k->field) out.push_back(k);
    return out;
  }();
  return ints;
}

std::string knob_range_problem(const Knob& k, std::int64_t value) {
  if (value >= k.min && value <= k.max) return "";
  std::string hi = k.max == kUnbounded ? "..." : std::to_string(k.max);
  return std::string(k.name) + " must be in [" + std::to_string(k.min) + ", " + hi + "]";
}

}  // namespace tiletune::ir
