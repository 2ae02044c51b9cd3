// tuner/random_ops.hpp — ops nobody wrote by hand, for the cost model's corpus: each built from
// the language's constructs (contractions with any operand layout, batch axes and epilogues,
// elementwise expressions over the builtins, row reductions with a normalising stage, windows
// with strides and padding, blocks of several such stages, and the constructs those leave out:
// reductions over any axes, channels-last and causal windows, parts of a tensor at constant
// indices and several outputs, narrow element types, operands broadcast against each other)
// and bound to sizes whose work stays within a budget.
#pragma once
#include <cstdint>
#include <string>

namespace tiletune::tuner {

struct GeneratedOp {
  std::string text;   //!< op text holding one op
  std::string name;   //!< the op's name, unique per (seed, index)
  std::string sizes;  //!< "M=..,N=.."
  std::string kind;   //!< "contraction", "elementwise", "reduction", "window", "composite", or a
                      //!< construct: "axes", "channels_last", "parts", "narrow", "broadcast"
};

//! The `index`th op of the sequence that `seed` draws: deterministic across runs and machines
//! of one standard library. Its arithmetic stays at most `max_flops` (and at least a thousandth
//! of it, so that timings are not all launch overhead). The text parses and binds.
GeneratedOp random_op(std::uint64_t seed, int index, double max_flops);

//! The same for ops of several stages (a network block: projections, gated or chained, row
//! normalisations and elementwise functions in sequence), from a stream of their own so that
//! a recipe adding them keeps its single-stage draws.
GeneratedOp random_composite_op(std::uint64_t seed, int index, double max_flops);

//! The same for ops of the constructs the two above leave out, in turn: a reduction over any set
//! of axes (the leading ones too, a Gram matrix, several statistics as several outputs); a
//! window over a channels-last tensor, in one dimension or two, causal ones too; a small axis of
//! parts read at constant indices into one output or several (a rotation, a split, a gate);
//! narrow element types (i8, u8, bf16, f16) with casts, constant weights and scales; operands
//! of different ranks broadcast against each other. From a stream of its own.
GeneratedOp random_construct_op(std::uint64_t seed, int index, double max_flops);

}  // namespace tiletune::tuner
