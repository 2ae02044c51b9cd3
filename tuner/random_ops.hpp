// tuner/random_ops.hpp — ops nobody wrote by hand, for the cost model's corpus: each built from
// the language's constructs (contractions with any operand layout, batch axes and epilogues,
// elementwise expressions over the builtins, row reductions with a normalising stage, windows
// with strides and padding, and blocks of several such stages) and bound to sizes whose work stays within a budget.
#pragma once
#include <cstdint>
#include <string>

namespace tiletune::tuner {

struct GeneratedOp {
  std::string text;   //!< op text holding one op
  std::string name;   //!< the op's name, unique per (seed, index)
  std::string sizes;  //!< "M=..,N=.."
  std::string kind;   //!< "contraction", "elementwise", "reduction", "window" or "composite"
};

//! The `index`th op of the sequence that `seed` draws: deterministic across runs and machines
//! of one standard library. Its arithmetic stays at most `max_flops` (and at least a thousandth
//! of it, so that timings are not all launch overhead). The text parses and binds.
GeneratedOp random_op(std::uint64_t seed, int index, double max_flops);

//! The same for ops of several stages (a network block: projections, gated or chained, row
//! normalisations and elementwise functions in sequence), from a stream of their own so that
//! a recipe adding them keeps its single-stage draws.
GeneratedOp random_composite_op(std::uint64_t seed, int index, double max_flops);

}  // namespace tiletune::tuner
