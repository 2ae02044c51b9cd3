// tuner/space.hpp
#pragma once
#include <random>
#include <string>
#include <vector>

#include "ir/loop_nest.hpp"

namespace tiletune::tuner {

using Rng = std::mt19937_64;

//! The schedule space of a workload on a target, derived from the op's loops (no per-op
//! templates): per stage, multi-level tile sizes for every axis, a loop order, the SIMD axis,
//! the unroll factor, parallel outer loops, inlining and epilogue fusion; on a work-group
//! device (OpenCL, CUDA) work-group and work-item tiles and inputs staged in local memory
//! instead. Every schedule it returns passes ir::check_schedule.
class Space {
 public:
  Space(const ir::Workload& w, const ir::TargetTraits& t);

  ir::Schedule sample(Rng& rng) const;
  //! Changes one knob of one stage.
  ir::Schedule mutate(const ir::Schedule& s, Rng& rng) const;
  //! Takes each stage's knobs from one parent or the other.
  ir::Schedule crossover(const ir::Schedule& a, const ir::Schedule& b, Rng& rng) const;
  //! "" if valid, else why not.
  std::string check(const ir::Schedule& s) const;
  //! A few configs derived from the target's registers and caches the way a BLAS blocks a
  //! GEMM (an outer-product register tile: rows of the input read by broadcast times vectors
  //! of the input read along the SIMD axis; a reduction block whose panel fits L1; parallel
  //! outer loops), for every stage that is such a reduction, the op's other stages in SIMD
  //! vectors and parallel loops; measured first, so that a short search starts from a good
  //! kernel. Ops of several row-wise stages get row_seeds(). Empty where no recipe applies.
  //! The recipes are in tuner/seeds.cpp.
  std::vector<ir::Schedule> seeds() const;
  //! seeds() of row-wise ops of several stages (softmax, layernorm): one pass over row blocks.
  std::vector<ir::Schedule> row_seeds() const;

  const ir::Workload& workload() const { return w_; }
  const ir::TargetTraits& traits() const { return t_; }

 private:
  const ir::Workload& w_;
  ir::TargetTraits t_;

  void sample_loops(ir::StageSchedule& ss, int stage, Rng& rng) const;
  //! Axes the stage can compute in SIMD lanes: ir::vectorizable_axes, and on a CPU also the
  //! spatial axes that only inputs read strided, where panels along the axis can hold them
  //! (they are then packed, see ir::Pack).
  std::vector<std::string> vector_axes(int stage) const;
  //! The SIMD axes the GEMM recipe of seeds() may take for a stage; empty where it does not apply.
  std::vector<std::string> gemm_axes(int stage) const;
  //! A variant of the GEMM recipe for one stage (the other stages naive but a fused epilogue),
  //! and the choices that name it across stages: its register tile and loop structure, its packing.
  struct GemmSeed {
    std::string blocking;
    int pack = 0;
    ir::Schedule schedule;
  };
  //! The GEMM recipe's variants for one stage with `v` as the SIMD axis, appended to `out`.
  void gemm_seeds(int stage, const std::string& v, std::vector<GemmSeed>& out) const;
  //! The row recipe's loops of a stage: SIMD vectors of `vectors` along its first vectorizable
  //! axis (a reduction along it in whole vectors), the other axes one point a tile.
  void vector_tiles(ir::StageSchedule& ss, int stage, std::int64_t vectors) const;
  //! In a GEMM seed, a stage no recipe covers: vector_tiles and its leading spatial loops in
  //! parallel, where valid (else vectors alone, else parallel loops alone, else the naive schedule).
  void vector_stage(ir::Schedule& s, int stage) const;
  //! sample_loops for a work-group device (TargetTraits::groups).
  void sample_group_loops(ir::StageSchedule& ss, int stage, Rng& rng) const;
  std::vector<std::int64_t> sample_tile(const ir::Axis& a, std::int64_t reg, Rng& rng) const;
  void sample_order(ir::StageSchedule& ss, int stage, Rng& rng) const;
  //! Packs the inputs read strided along the SIMD axis, and each other input of the stage
  //! with probability 1/2 where packing is valid.
  void sample_packs(ir::Schedule& s, int stage, Rng& rng) const;
  std::vector<std::string> inputs_of(int stage) const;
  //! Puts all stages in one loop over row blocks (ir::Schedule::fuse_rows) of `multiple` times
  //! their row tiles, where valid.
  void sample_fuse_rows(ir::Schedule& s, std::int64_t multiple) const;
  bool absorbed(const ir::Schedule& s, int stage) const;
};

}  // namespace tiletune::tuner
