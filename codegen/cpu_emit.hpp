// codegen/cpu_emit.hpp — internal to the CPU emitter: the class its three parts define.
//   cpu_emitter.cpp    the kernel, its stages' loops, the micro-kernel, tiles cut by borders, stores
//   cpu_emit_pack.cpp  copies of inputs into panels, and the dot-product tiles that read them
//   cpu_emit_expr.cpp  addresses, guarded loads and values at a register point
#pragma once
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "codegen/c_text.hpp"
#include "codegen/cpu_emitter.hpp"

namespace tiletune::codegen::cpu_emit {

using ir::Combine;
using ir::Expr;
using ir::Loop;
using ir::StageNest;

enum class Mode { Scalar, VecSpatial, VecReduce };

//! Where an axis stands at one register point: a C++ variable plus a constant offset.
struct AxisValue {
  std::string var;
  std::int64_t offset = 0;
};
using Point = std::map<std::string, AxisValue>;

using ir::DType;

//! A constant as C++ text of compute type `t` (f32 or i32).
std::string literal(double v, DType t);
const char* scalar_type(DType t);
const char* vector_type(DType t);
const char* splat(DType t);
//! `code`, a value of type `from`, as type `to` (rounded to nearest even and saturated into i32).
std::string convert(const std::string& code, DType from, DType to, bool vec);

std::string combine(Combine c, bool vec, const std::string& a, const std::string& b);

const char* horizontal(Combine c);

class Emitter {
 public:
  Emitter(const ir::Workload& w, const ir::LoopNest& nest, const ir::TargetTraits& traits)
      : w_(w), nest_(nest), traits_(traits) {}

  std::string run(const std::string& config_json);

 private:
  const ir::Workload& w_;
  const ir::LoopNest& nest_;
  const ir::TargetTraits& traits_;
  std::ostringstream out_;
  bool prepares_ = false;  // cpu_prepares(w_, nest_)
  LocalNames names_;
  std::map<std::string, std::string> tensor_;

  // Per stage:
  const StageNest* sn_ = nullptr;
  const ir::Stage* st_ = nullptr;
  std::map<std::pair<std::string, int>, std::string> loop_var_;
  std::map<std::string, std::string> packed_names_;  // tensor -> its panels' pointer
  std::string row_var_;                              // the row-block loop around all stages (fuse_rows)
  std::string slot_var_;                             // first row of this thread's slot in each temporary (fuse_rows)
  std::string partial_;                              // lanes in use when emitting a vector cut by the end of its axis
  std::string partials_;                             // the stage's partials buffer (StageNest::partials), "" if none
  DType acc_t_ = DType::F32;                         // the stage's accumulator (compute) type
  std::int64_t out_stride_ = 1;                      // the output's stride along the vector axis (gathered if not 1)
  bool strided_vector_ = false;                      // vectors need panels or gathers: cut vectors go lane by lane
  int base_ = 1;                                     // indentation of a stage
  //! Packed inputs the code being emitted reads through their panels (full tiles only).
  std::map<std::string, std::pair<const ir::Pack*, std::string>> packed_;
  std::string first_, last_;  // C++ conditions ("" when always true)
  //! Reads of padded inputs that can fall outside them in this stage: (tensor, dimension) ->
  //! index. Tiles that reach past a border read them through guards (see micro_kernel).
  std::vector<ir::OutsideRead> outside_;
  bool guarded_ = false;  // emitting a border tile: padded reads are guarded

  std::string fresh(const std::string& base) { return names_.fresh(base); }
  static std::string block_end(const std::string& start, std::int64_t block, std::int64_t extent);

  void line(int depth, const std::string& text) { out_ << std::string(2 * depth, ' ') << text << "\n"; }
  //! The C++ type buffer b's elements are stored as, and a float pointer cast to it.
  std::string storage(size_t b) const { return ir::cpu_storage_type(w_.buffers[b].dtype); }
  std::string as_storage(size_t b, const std::string& ptr) const;
  std::string dtype_note(size_t b) const;
  DType compute(size_t b) const { return ir::compute_type(w_.buffers[b].dtype); }
  //! A scalar element read as its compute type (plain for f32: a storage struct would make
  //! `c ? x : 0` ambiguous).
  std::string read(size_t b, const std::string& addr) const;
  std::string shape(size_t b) const;
  const std::string& var(const std::string& axis, int level);

  //! `tensor[flat offset]` at a point; a packed input in a full register tile reads its panels.
  std::string element(const std::string& tensor, const std::vector<ir::IndexExpr>& indices, const Point& p);

  //! The loop variable a register tile of `axis` starts at.
  std::string register_base(const std::string& axis);

  // A kernel that packs constant inputs does so in a prepare entry point of its own
  // (cpu_prepares): a mode then says what one call does, packing them or computing.
  static constexpr const char* kPrepareMode = "(tt_mode & 1)";  // pack the constant inputs
  static constexpr const char* kComputeMode = "(tt_mode & 2)";  // everything else

  //! The parallel loop over a pack's panels. In a kernel with a prepare entry point it runs in
  //! one mode only, and in the other opens no threads (OpenMP's if clause) and no iterations.
  void open_panel_loop(int depth, const ir::Pack& pack, const std::string& panel);

  //! Copies an input into its panels before the stage's loops (see ir::Pack).
  void emit_pack(int depth, const ir::Pack& pack);

  //! Copies the vector operand of a dot-product stage into panels whose reduction dimension
  //! goes in interleaved groups (ir::Pack::group): element (k, j) of a panel at
  //! [k / g][j][k % g], so that one vector holds `g` consecutive k of TT_LANES columns.
  void emit_grouped_pack(int depth, const ir::Pack& pack);

  //! The address of a dot-product stage's vector operand at a register point in its grouped
  //! pack: the point's group of the reduction axis (at a multiple of the group) in its column.
  std::string grouped_element(const Expr& access, const ir::Pack& pack, const Point& p);

  //! Whether a border tile can run the dot product: the broadcast operand's group axis (its
  //! last dimension) never reads outside it, so a group is wholly inside or wholly pad. (The
  //! packed vector operand is never padded: ir::lower.)
  bool dot_guardable() const;

  //! The innermost reduction loop of a dot-product tile (StageNest::dot_group): whole groups,
  //! then the last few points of the axis as a group whose missing points read as 0 (the pack
  //! holds zeros there).
  void dot_loop(int depth, const std::vector<Point>& pts, const std::vector<std::string>& acc);

  //! True if `e` has the same value in every SIMD lane (no access moves along the vector axis
  //! and it does not read the accumulator).
  bool lane_invariant(const Expr& e) const;

  std::int64_t vector_coeff(const Expr& access) const;

  //! State of one block of straight-line code: its loads, deduplicated by address.
  struct Block {
    std::vector<std::string> loads;
    std::map<std::string, std::string> load_names;
    std::map<std::string, int> per_tensor;
    std::vector<std::string> vector_addresses;  //!< of the vector loads, in order (prefetch)
  };

  //! An index of an access at a register point, as C++ text.
  static std::string index_at(const ir::IndexExpr& ix, const Point& p);

  //! `load` of a padded input on a border tile: the pad value where the point is outside it.
  //! Along a vector in the tensor's last dimension the lanes are checked one by one.
  std::string guarded_load(const Expr& e, const Point& p, bool vec, const std::string& addr, const std::string& load);

  //! The condition under which a register tile's reads of padded inputs all fall inside them
  //! (its tile loops and reduction loops at their bounds); "" when no read can fall outside.
  std::string interior_condition();

  //! C++ text of `e`'s value at a point as type `want`: computed in its own compute type
  //! (ir::value_type; literals take their context's) and converted once at the end.
  std::string value(const Expr& e, const Point& p, bool vec, Block& blk, const std::string& acc_value, DType want);
  std::string node(const Expr& e, DType t, const Point& p, bool vec, Block& blk, const std::string& acc_value);

  void flush(int depth, Block& blk);

  //! Output location of a point: the stage's own buffer, or the epilogue's (same shape); or,
  //! for the partial results of a blocked reduction, the partials buffer when there is one.
  std::string out_addr(const Point& p, bool partial = false);
  //! The stored result of the earlier reduction blocks at a point (vector or scalar).
  std::string previous(const Point& p, bool vec);

  //! Stores each point's result, through the fused epilogue once the reduction is complete.
  void store_all(int depth, const std::vector<Point>& pts, bool vec, const std::vector<std::string>& results);

  //! The reduction loops of the micro-kernel around `body`; returns the depth inside them.
  int open_reduce_loops(int depth, bool vector_reduce_axis_too, bool but_innermost = false);
  void close_to(int from, int to);

  //! Computes a set of register points. Scalar and VecSpatial points hold one accumulator
  //! each (a float or a vector of lanes); VecReduce points a vector of partial results.
  void points(int depth, const std::vector<Point>& pts, Mode mode);

  void points_body(int depth, const std::vector<Point>& pts, Mode mode);

  void micro_kernel(int depth);

  //! A register tile cut by the end of an axis. Along an axis other than the SIMD one the rows
  //! left (extent % block) form one register tile (one point at a time in fused row blocks,
  //! which start anywhere); the SIMD axis keeps whole vectors where they fit, then one masked.
  void edge_tile(int depth, Mode mode);
  //! An edge tile's points (`rows`: its points off the SIMD axis) along the SIMD axis: whole
  //! vectors, or those of a cut block and its masked last one. `rows_cut`: some row axis is
  //! cut (else the whole vectors are the full tile, emitted elsewhere).
  void edge_points(int depth, Mode mode, const std::vector<Point>& rows, const Loop* vector_loop, bool rows_cut);

  void stage(const StageNest& sn);

  void stage_body(const StageNest& sn);
};

}  // namespace tiletune::codegen::cpu_emit
