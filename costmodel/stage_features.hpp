// costmodel/stage_features.hpp: one loop nest's features, internal to costmodel/. The
// access analysis (each read's terms, its bytes and cache lines at every tile depth, the
// micro-kernel's loads and stores) is in stage_access.cpp; the feature row is assembled from it
// in features.cpp.
#pragma once
#include <array>
#include <boost/container/small_vector.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/loop_nest.hpp"
#include "ir/schedule.hpp"

namespace tiletune::costmodel::detail {

using ir::Expr;
using ir::Loop;
using ir::StageNest;

inline double log2p(double x) { return std::log2(1.0 + std::max(0.0, x)); }

//! The features' working lists, held inline up to the size of a typical stage: they are built
//! for every candidate the search ranks, where a heap allocation each cost about a quarter of
//! the time (callgrind). Larger stages spill to the heap.
template <class T, std::size_t N = 8>
using Small = boost::container::small_vector<T, N>;

//! Elements of a one-byte type in a cache line: addresses are taken modulo this for where a
//! vector starts in its line (every type's count of elements per line divides it).
constexpr int kResidues = static_cast<int>(ir::kCacheLineBytes);

//! One read or write of a buffer by a stage: per dimension, the stage axes (by index) that
//! move it and their coefficients. Built once per stage so that the features, asked for at
//! every tile depth, compare no names.
struct Use {
  struct Term {
    int axis;
    std::int64_t coeff;
  };
  const std::string* name = nullptr;
  int buffer = -1;
  double element = 0;         //!< bytes
  std::int64_t offset = 0;    //!< elements its indices' constants move it by, modulo kResidues
  Small<Term> terms;          //!< all dimensions', in order
  Small<std::uint32_t> ends;  //!< dimension d's terms end at terms[ends[d]]
  bool depends(int axis) const {
    for (auto& term : terms)
      if (term.axis == axis) return true;
    return false;
  }
};

//! The features of one loop nest (a stage, with what is fused into it) of a lowered candidate.
struct StageFeatures {
  const ir::Workload& w;
  const ir::LoopNest& nest;
  const StageNest& sn;
  const ir::TargetTraits& t;
  const ir::Stage& st;
  const size_t axes;    //!< of the stage
  const size_t depths;  //!< tile depths 0 (the whole stage) .. sn.outer.size() (the micro-kernel)
  std::vector<const Expr*> accesses;
  Small<Use, 6> reads;         //!< one per access, in the order of `accesses`
  std::size_t body_reads = 0;  //!< the first of `reads` are the body's, the fused epilogue's follow
  Use output;                  //!< the buffer the stage stores
  //! The buffers the stage reads (not its own accumulator) and the one it stores.
  Small<const Use*> uses;
  Small<int, 16> outer_axis, reg_axis, reduce_axis;  //!< axis index of each loop of sn.outer, .reg, .reduce_inner
  int simd_axis = -1;                                //!< axis index of the SIMD axis; -1 if none
  Small<std::int64_t, 64> span;       //!< span of axis a inside the first d tile loops: span[d * axes + a]
  Small<double, 16> points;           //!< iteration points inside the first d tile loops
  Small<double, 16> footprints;       //!< bytes touched inside the first d tile loops
  Small<double, 16> line_footprints;  //!< bytes of the cache lines touched inside the first d tile loops
  int ops_per_point;                  //!< operations of the body per point, the combine included

  // The access analysis (stage_access.cpp).

  //! Collects the reads, and the bytes and cache lines touched at every tile depth.
  StageFeatures(const ir::Workload& w_, const ir::LoopNest& n, const StageNest& s, const ir::TargetTraits& t_);
  int axis_index(const std::string& name) const;
  Use use_of(const std::string& name, const std::vector<ir::IndexExpr>& indices) const;

  //! Coefficient of `axis` in dimension d of a use.
  static std::int64_t coeff(const Use& u, size_t d, int axis) {
    for (std::uint32_t i = d == 0 ? 0 : u.ends[d - 1]; i < u.ends[d]; ++i)
      if (u.terms[i].axis == axis) return u.terms[i].coeff;
    return 0;
  }
  //! Points of dimension d of a use that the first `depth` tile loops' box spans, before the
  //! clamp to the buffer's shape.
  std::int64_t range_in(const Use& u, size_t d, size_t depth) const {
    const std::int64_t* sp = &span[depth * axes];
    std::int64_t range = 1;
    for (std::uint32_t i = d == 0 ? 0 : u.ends[d - 1]; i < u.ends[d]; ++i)
      range += std::abs(u.terms[i].coeff) * (sp[u.terms[i].axis] - 1);
    return range;
  }
  //! What one use touches inside the first `depth` tile loops.
  struct Box {
    double bytes;
    double lines;  //!< cache lines, counting those of the innermost dimension's rows
    //! Bytes of the cache lines: the box as runs of contiguous memory (the innermost dimension,
    //! joined by the next ones out while the box covers them whole), each rounded up to lines.
    double line_bytes;
  };
  Box box_of(const Use& u, size_t depth) const;
  //! The outermost tile depth whose cache lines fit `capacity` bytes; the micro-kernel's if none.
  size_t depth_fitting(double capacity) const;
  //! Bytes touched over the bytes of their cache lines at a depth.
  double line_use(size_t depth) const { return footprints[depth] / std::max(1.0, line_footprints[depth]); }
  double points_in(size_t depth) const { return points[std::min(depth, depths - 1)]; }
  double footprint(size_t depth) const { return footprints[std::min(depth, depths - 1)]; }
  //! Elements of a use's buffer between two neighbouring points of `axis` (its row-major stride).
  double elements_between(const Use& u, int axis) const;
  //! The axis of the micro-kernel's innermost loop: the SIMD axis, else the innermost
  //! reduction or register loop; -1 if none.
  int innermost_axis() const;

  //! The micro-kernel's loads of a reduction step, per register tile: distinct (buffer, index)
  //! pairs at distinct register offsets among the reads `which` names.
  struct Loads {
    double count = 0;
    double issue = 0;  //!< a gathered vector as its lanes
    double split = 0;  //!< vectors that straddle one more cache line than they need (LoadsOf::Body only)
  };
  //! Which reads loads_of counts.
  enum class LoadsOf {
    All,       //!< every read, the stage's own value too (version 3's count)
    Body,      //!< the body's, the stage's own value (in registers) left out; with `split`
    Epilogue,  //!< the fused epilogue's, the stage's own value left out
  };
  Loads loads_of(LoadsOf which) const;
  //! The share of the micro-kernel's vectors of a read that straddle one more cache line than
  //! their bytes need, from where they start in a line: its index terms and constants move its
  //! address by elements, each axis over its extent (a window's x + s - 1 starts off a 64-byte
  //! vector's width two times in three). Broadcasts, gathers and panels (laid out along the SIMD
  //! axis) start on it.
  double straddle_share(const Use& u) const;
  //! Whether the micro-kernel loads a read's vectors lane by lane: a strided window's row, read
  //! at a stride of 2 or more along a spatial SIMD axis in its last dimension only (strided in
  //! another dimension, it is packed into panels first).
  bool gathered(const Use& u) const;
  //! Stores of output points: each once per reduction block outside the register tile.
  double output_stores() const;
  //! Elements between the output's neighbouring lanes along a spatial SIMD axis; 0 if the SIMD
  //! axis is a reduction axis or there is none.
  double output_lane_stride() const;
  //! Store instructions the stage issues: a vector per `lanes` output stores where the SIMD axis
  //! is the output's contiguous one, else one by one (stored lane by lane, or a vectorized
  //! reduction's result).
  double store_issue() const;

  // The feature row (features.cpp).

  //! The stage's roofline estimates in cycles (add_roofline's, before they are made ratios),
  //! which add up over a program's nests.
  struct Cycles {
    double work = 0, steps = 0, bound = 0;
    Cycles& operator+=(const Cycles& o) {
      work += o.work, steps += o.steps, bound += o.bound;
      return *this;
    }
  };
  //! Adds the stage's features to row `f` (feature_layout.hpp's slots).
  Cycles add_to(std::vector<float>& f) const;
  //! The cache levels data moves into, innermost first: each one's capacity, and the bytes per
  //! cycle it receives from the level beyond (per core; memory's, shared by all cores).
  struct Level {
    double capacity;
    double bandwidth;
    bool shared;
  };
  std::array<Level, 3> levels() const;
  //! Estimated cycles moving data into L1, L2 and L3: per level, the executions of the largest
  //! block whose footprint (by `fps`, bytes per tile depth) fits it, times those bytes, over
  //! the level's bandwidth in bytes per cycle and core (L2 to L1 64, L3 to L2 32, memory to L3
  //! 8 shared by all cores).
  double memory_cycles(const Small<double, 16>& fps, double active) const;
  //! Cycles to move the stage's unique bytes once, from the smallest level that holds them all:
  //! the memory-side half of the stage's bound.
  double data_cycles() const;
  //! The roofline estimates, relative to the stage's ideal so that they compare across ops.
  //! `par`: the parallel loops' trips; `busy`: threads' worth of work the busiest thread has to
  //! itself (threads × parallel_work, even_share); `step_loads`: load issue slots per
  //! accumulator of the body's reduction step (version 7).
  Cycles add_roofline(std::vector<float>& f, double flops, double par, double packed_bytes, double busy,
                      double step_loads) const;
  //! How the SIMD axis meets memory, as the code generators classify it (ir/schedule.hpp).
  void add_vector_access(std::vector<float>& f) const;
  //! Per buffer (the kTopBuffers largest), its bytes, lines, reuse and strides.
  void add_buffer_features(std::vector<float>& f) const;
};

}  // namespace tiletune::costmodel::detail
