// ir/schedule.hpp
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ir/workload.hpp"

namespace tiletune::ir {

//! How one stage is computed (each knob is declared, with its range and choices, in ir/knobs.hpp). Loop structure of a
//! stage with `tile[a] = {s1, ..., sL}`: axis `a` gets loops a.0 (step s1 over the whole extent), a.1 (step s2 inside
//! s1), ..., a.L (unit steps inside sL). The loops a.0 .. a.(L-1) of all axes nest in `order`; inside them sits the
//! micro-kernel: the innermost loop a.L of each reduction axis, around a register tile that holds sL points of each
//! spatial axis in registers, fully unrolled.
struct StageSchedule {
  std::string stage;
  std::map<std::string, std::vector<std::int64_t>> tile;  //!< per axis, decreasing, each divides the previous
  std::vector<std::string> order;  //!< "axis.level" for every non-innermost loop, outermost first
  std::string vectorize;           //!< an axis computed in SIMD lanes inside the micro-kernel; "" for none
  int unroll = 0;                  //!< unroll factor of the micro-kernel's reduction loop (0: compiler decides)
  int prefetch = 0;                //!< iterations of that loop ahead that its vector loads are prefetched (0: none)
  int parallel = 0;                //!< how many leading loops of `order` run in parallel (collapsed)
  bool inline_stage = false;       //!< elementwise temp stage: substitute into its consumers
  bool fuse_epilogue = false;      //!< reduction stage: apply the next elementwise stage at its store
  std::vector<std::string> pack;   //!< inputs copied into register-tile panels first (see ir::Pack)

  //! Clears every knob, keeping the stage's name.
  void reset();
  //! Whether any knob of its own loops is set (all but `inline_stage`): an inlined stage or a
  //! fused epilogue has none.
  bool has_loop_knobs() const;
};

//! An entry of StageSchedule::order, "axis.level", split at its last dot (views into the entry).
struct OrderEntry {
  std::string_view axis;
  std::string_view level;  //!< the digits after the dot
  bool ok = false;         //!< false when the entry has no dot
  //! Whether `level` is `n` written as the order writes it (decimal, no leading zeros).
  bool is_level(int n) const;
  //! The level as a number; -1 if it is not one.
  int number() const;
};
OrderEntry split_order_entry(std::string_view entry);

//! A config: one StageSchedule per stage of the workload, in stage order.
struct Schedule {
  int version = 1;
  std::vector<StageSchedule> stages;
  //! When > 0, every stage runs inside one parallel loop over blocks of `fuse_rows` points of
  //! the stages' shared first axis, so that a row's intermediates are still in cache when the
  //! next stage reads them (one pass over memory for softmax and layernorm).
  std::int64_t fuse_rows = 0;

  std::string to_json() const;  //!< canonical: sorted keys, no whitespace
  nlohmann::json to_json_value() const;
  //! Throws Error(InvalidInput) if the text is not a config of this shape.
  static Schedule from_json(const std::string& text);
  static Schedule from_json_value(const nlohmann::json& j);
  std::string key() const;  //!< hash of to_json()
};

//! Bytes of a cache line on x86-64 and most AArch64 cores (Apple's have 128: what is sized in
//! whole lines of 64 is then in half-lines there).
inline constexpr std::int64_t kCacheLineBytes = 64;

//! What the target offers the schedule: SIMD width in f32 lanes, registers, threads and the
//! cache sizes read from the machine; for GPU-style devices the work-group limits.
struct TargetTraits {
  int vector_lanes = 16;  //!< 16 on AVX-512, 8 on AVX2, 4 on SSE/NEON, 1 for scalar
  int vector_registers = 32;
  int threads = 2;
  std::int64_t l1_bytes = 32 * 1024;  //!< per core, data
  std::int64_t l2_bytes = 1024 * 1024;
  std::int64_t l3_bytes = 32 * 1024 * 1024;
  //! > 0 on a device that runs work-groups (OpenCL, CUDA) of at most this many work-items:
  //! a stage's spatial tiles then map to work-groups and work-items (see check_schedule).
  int max_group_size = 0;
  std::int64_t local_bytes = 0;  //!< work-group shared memory for staged inputs (`pack`)
  bool groups() const { return max_group_size > 0; }
};

//! The reference schedule: one loop per axis in statement order, nothing tiled, vectorized,
//! fused or parallel. Its results define correctness.
Schedule naive_schedule(const Workload& w);

//! Axes of a stage along which every access is unit-stride or invariant, the last left-hand
//! axis first: the candidates for `vectorize`.
std::vector<std::string> vectorizable_axes(const Workload& w, int stage);

//! True if every access in `body` is unit-stride in its last dimension along `axis`, or
//! does not depend on it: the condition for computing `axis` in SIMD lanes.
bool unit_stride_or_invariant(const Expr& body, const std::string& axis);
//! The tensors `body` reads neither unit-stride nor invariantly along `axis`: on a CPU a
//! spatial axis is still vectorized when these are inputs packed into panels along it.
std::vector<std::string> strided_reads(const Expr& body, const std::string& axis);
//! The tensors of strided_reads that `body` reads along `axis` only in their last dimension,
//! at a constant stride of 2 or more (I[..., 2 * x + s - 1] of a strided convolution or
//! pooling window): a CPU loads their vectors strided, two loads and a shuffle at stride 2,
//! with no panels.
std::vector<std::string> strided_row_reads(const Expr& body, const std::string& axis);
//! strided_reads less strided_row_reads: what a CPU packs into panels to vectorize `axis`.
std::vector<std::string> panel_reads(const Expr& body, const std::string& axis);
//! Why panels of `tensor` along `axis` cannot feed vectors along `axis`; "" if they can:
//! every access indexes each dimension by one plain axis, and `axis` indexes exactly one
//! (not A[i, i], whose lanes move along two dimensions).
std::string vector_panels_problem(const Expr& body, const std::string& tensor, const std::string& axis);

//! Whether a stage may be inlined into its consumers / fuse its consumer as an epilogue.
bool can_inline(const Workload& w, int stage);
bool can_fuse_epilogue(const Workload& w, int stage);

}  // namespace tiletune::ir
