// ir/loop_nest.hpp
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/schedule.hpp"

namespace tiletune::ir {

//! One loop of a lowered stage. Loop `axis.level` steps by `step` inside its parent block of
//! `block` points (the parent level's step, or the axis extent for level 0).
struct Loop {
  std::string axis;
  int level = 0;
  std::int64_t step = 1;
  std::int64_t block = 1;
  std::int64_t extent = 1;  //!< the axis extent
  bool reduce = false;
  bool parallel = false;
  std::int64_t trips() const { return (block + step - 1) / step; }
};

//! An input copied, before the stage runs, into panels of `block` consecutive points of
//! `axis` (its dimension `dim`): packed[panel][other dims in order][block], zero-padded. Full
//! register tiles then read it contiguously; edge tiles read the original.
//! On a work-group device (TargetTraits::groups) a pack is instead the tile of the input that
//! one work-group reads in one step of its reduction loops, staged in local memory: `box`
//! holds its extent per dimension and `offset` its place in local memory.
struct Pack {
  int buffer = -1;
  int dim = -1;
  std::string axis;
  std::int64_t block = 1;
  std::int64_t panels = 1;
  std::int64_t others = 1;  //!< product of the other dimensions (the grouped one rounded up)
  //! > 1: the operand of a dot-product micro-kernel (StageNest::dot_group). The last other
  //! dimension (the reduction axis of the dot) goes in groups of this many consecutive
  //! points, interleaved per column: packed[panel][outer dims][k / group][block][k % group],
  //! zero past its end.
  int group = 1;
  std::int64_t offset = 0;  //!< in the workspace, floats
  std::vector<std::int64_t> box;
  std::int64_t elements() const;
  //! The dimension that goes in groups: the last one other than the panels' (`rank` dims).
  int group_dim(size_t rank) const { return dim == static_cast<int>(rank) - 1 ? dim - 1 : static_cast<int>(rank) - 1; }
  //! An extent rounded up to whole groups.
  std::int64_t grouped(std::int64_t extent) const { return (extent + group - 1) / group * group; }
};

//! A stage after scheduling: what the code generators emit and the cost model reads.
struct StageNest {
  int stage = -1;
  Expr body;                       //!< right side with inlined stages substituted
  std::vector<Loop> outer;         //!< tile loops, outermost first
  std::vector<Loop> reduce_inner;  //!< the micro-kernel's reduction loops (innermost level)
  std::vector<Loop> reg;           //!< the register tile: innermost level of each spatial axis
  std::string vector_axis;         //!< "" if scalar
  bool vector_reduce = false;      //!< the vector axis is a reduction axis
  int lanes = 1;
  int unroll = 0;
  int prefetch = 0;    //!< see StageSchedule::prefetch
  int epilogue = -1;   //!< stage fused at the store (its output receives the results)
  Expr epilogue_body;  //!< its right side in this stage's axis names
  int store = -1;      //!< buffer written: the stage's own, or the epilogue's when fused
  //! Where the partial results of a blocked reduction collect when the stored type cannot hold
  //! them exactly (a u8 output of i32 sums, a bf16 one of f32 sums): a workspace buffer of the
  //! accumulator's type and the store's shape, in floats from the workspace start; -1 if none.
  std::int64_t partials = -1;
  std::vector<Pack> packs;
  //! > 1: full register tiles run a dot-product instruction over this many consecutive points
  //! of the innermost reduction axis (2 for bf16 pairs into f32, 4 for u8 x i8 quads into i32):
  //! the broadcast operand's group is read as one 32-bit lane, the vector operand from its
  //! grouped pack.
  int dot_group = 1;
  //! Accumulators of the register tile: one vector per `lanes` points along a spatial SIMD
  //! axis, else one per point (a vector each when the SIMD axis is a reduction axis).
  double accumulators() const;
};

//! A workload lowered under a schedule: stages to run in order and the temp buffers they need.
struct LoopNest {
  std::vector<StageNest> stages;
  std::int64_t fuse_rows = 0;                  //!< rows per block of the loop around all stages; 0: none
  std::int64_t rows = 0;                       //!< extent of the shared first axis when fused
  std::vector<std::int64_t> workspace_offset;  //!< per buffer, in floats; -1 if not in the workspace
  std::int64_t workspace_floats = 0;
};

//! Checks a schedule against a workload and target; returns "" if valid, else why not.
std::string check_schedule(const Workload& w, const Schedule& s, const TargetTraits& t);

//! Lowers; throws Error(InvalidInput) with check_schedule's reason for an invalid schedule.
LoopNest lower(const Workload& w, const Schedule& s, const TargetTraits& t);

}  // namespace tiletune::ir
