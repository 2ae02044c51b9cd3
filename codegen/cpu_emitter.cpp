#include "codegen/cpu_emitter.hpp"

#include "codegen/c_text.hpp"
#include "support/hash.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace tiletune::codegen {

extern const char* const kCpuPrelude;

namespace {

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

//! Reduction loops of the micro-kernel with at most this many trips are unrolled fully.
constexpr std::int64_t kFullUnrollTrips = 8;
//! At most this many statements (accumulators times the trips unrolling copies) of the
//! micro-kernel's reduction run straight (see open_reduce_loops).
constexpr double kStraightStatements = 512;

using ir::DType;

//! A constant as C++ text of compute type `t` (f32 or i32).
std::string literal(double v, DType t) {
  if (t == DType::F32) return float_literal(v);
  if (v <= -2147483648.0) return "(-2147483647 - 1)";
  if (v >= 2147483647.0) return "2147483647";
  std::string s = std::to_string(static_cast<long long>(v));
  return v < 0 ? "(" + s + ")" : s;
}
const char* scalar_type(DType t) { return t == DType::I32 ? "int" : "float"; }
const char* vector_type(DType t) { return t == DType::I32 ? "tt_vi" : "tt_vf"; }
const char* splat(DType t) { return t == DType::I32 ? "tt_splati(" : "tt_splat("; }
//! `code`, a value of type `from`, as type `to` (rounded to nearest even and saturated into i32).
std::string convert(const std::string& code, DType from, DType to, bool vec) {
  if (from == to) return code;
  if (to == DType::F32) return std::string(vec ? "tt_vto_f32(" : "tt_to_f32(") + code + ")";
  return std::string(vec ? "tt_vto_i32(" : "tt_to_i32(") + code + ")";
}

double identity(Combine c) {
  switch (c) {
    case Combine::Add:
      return 0.0;
    case Combine::Mul:
      return 1.0;
    case Combine::Max:
      return -INFINITY;
    case Combine::Min:
      return INFINITY;
    case Combine::Assign:
      return 0.0;
  }
  return 0.0;
}

std::string combine(Combine c, bool vec, const std::string& a, const std::string& b) {
  switch (c) {
    case Combine::Add:
      return a + " + " + b;
    case Combine::Mul:
      return a + " * " + b;
    case Combine::Max:
      return std::string(vec ? "tt_vmax(" : "tt_max(") + a + ", " + b + ")";
    case Combine::Min:
      return std::string(vec ? "tt_vmin(" : "tt_min(") + a + ", " + b + ")";
    case Combine::Assign:
      return b;
  }
  return b;
}

const char* horizontal(Combine c) {
  switch (c) {
    case Combine::Mul:
      return "tt_hprod";
    case Combine::Max:
      return "tt_hmax";
    case Combine::Min:
      return "tt_hmin";
    default:
      return "tt_hsum";
  }
}

class Emitter {
 public:
  Emitter(const ir::Workload& w, const ir::LoopNest& nest, const ir::TargetTraits& traits)
      : w_(w), nest_(nest), traits_(traits) {}

  std::string run(const std::string& config_json) {
    out_ << "// tiletune CPU kernel for op " << w_.op.name << " with " << w_.sizes_text() << "\n";
    out_ << "// workload " << w_.key << "\n// config " << config_json << "\n";
    out_ << "#define TT_LANES " << std::max(traits_.vector_lanes, 1) << "\n" << kCpuPrelude << "\n";
    const std::string entry = cpu_entry_point(w_, config_json);
    const std::string measured = std::to_string(std::max(traits_.threads, 1));
    // The caller chooses the thread count (the threading contract in the README): every
    // parallel loop runs with tt_threads, which the plain entry point sets to the count the
    // record was measured with. Nested in a caller's own parallel region it still runs right:
    // the regions are always opened, so omp_get_thread_num() is this kernel's own.
    prepares_ = cpu_prepares(w_, nest_);
    if (prepares_)
      // Constant inputs are packed by ENTRY_prepare, once, into the workspace the calls keep:
      // one body, run in the mode that packs them or in the one that computes.
      out_ << "static void " << entry
           << "_run(float* const* tt_tensors, float* tt_workspace, int tt_threads, int tt_mode) {\n";
    else
      out_ << "extern \"C\" void " << entry
           << "_threads(float* const* tt_tensors, float* tt_workspace, int tt_threads) {\n";
    line(1, "if (tt_threads < 1) tt_threads = " + measured + ";");
    int arg = 0;
    for (size_t b = 0; b < w_.buffers.size(); ++b) {
      const auto& buf = w_.buffers[b];
      std::string name = fresh(buf.name);
      tensor_[buf.name] = name;
      // Typed tensors come as float pointers too (the kernel ABI) and are cast to their storage.
      if (buf.role != ir::Buffer::Role::Temp) {
        line(1, storage(b) + "* __restrict " + name + " = " +
                    as_storage(b, "tt_tensors[" + std::to_string(arg++) + "]") + ";  // " + dtype_note(b) + shape(b));
      } else if (nest_.workspace_offset[b] >= 0) {
        line(1, storage(b) + "* __restrict " + name + " = " +
                    as_storage(b, "tt_workspace + " + std::to_string(nest_.workspace_offset[b])) + ";  // temporary " +
                    dtype_note(b) + shape(b));
      }
    }
    if (nest_.fuse_rows > 0) {
      // All stages in one parallel loop over blocks of rows: a block's intermediates are
      // still in cache when the next stage reads them.
      row_var_ = fresh("row");
      line(1, "#pragma omp parallel for schedule(static) num_threads(tt_threads)");
      line(1, "for (std::int64_t " + row_var_ + " = 0; " + row_var_ + " < " + std::to_string(nest_.rows) + "; " +
                  row_var_ + " += " + std::to_string(nest_.fuse_rows) + ") {");
      // Temporaries hold only the rows of the current block, in a slot of the thread's own,
      // so they stay in cache instead of streaming the whole tensor through memory. Slot t
      // is rows [t * block, (t + 1) * block) of the full-size buffer. A block uses rows
      // slot .. slot + (its rows) - 1, inside the buffer because thread t's blocks start at
      // row t * block or later (schedule(static) hands chunks out in thread order in libgomp,
      // the OpenMP this is built with). check_fuse_rows makes every stage index a temporary's
      // first dimension by the shared row axis and allows no packs or parallel loops inside.
      slot_var_ = fresh("slot");
      line(2, "const std::int64_t " + slot_var_ + " = omp_get_thread_num() * " + std::to_string(nest_.fuse_rows) + ";");
      base_ = 2;
    }
    for (auto& sn : nest_.stages) stage(sn);
    if (nest_.fuse_rows > 0) line(1, "}");
    out_ << "}\n";
    if (prepares_) {
      for (auto [suffix, mode] : {std::pair{"_threads", "2"}, std::pair{"_prepare", "1"}})
        out_ << "extern \"C\" void " << entry << suffix
             << "(float* const* tt_tensors, float* tt_workspace, int tt_threads) {\n  " << entry
             << "_run(tt_tensors, tt_workspace, tt_threads, " << mode << ");\n}\n";
      out_ << "extern \"C\" void tt_prepare(float* const*, float*, int) __attribute__((weak, alias(\"" << entry
           << "_prepare\")));\n";
    }
    out_ << "extern \"C\" void " << entry << "(float* const* tt_tensors, float* tt_workspace) {\n";
    line(1, entry + "_threads(tt_tensors, tt_workspace, " + measured + ");");
    out_ << "}\n";
    // The generic name too, weak: any number of kernels still link into one program.
    out_ << "extern \"C\" void tt_kernel(float* const*, float*) __attribute__((weak, alias(\"" << entry << "\")));\n";
    return out_.str();
  }

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
  static std::string block_end(const std::string& start, std::int64_t block, std::int64_t extent) {
    return codegen::block_end(start, block, extent, "tt_imin");
  }

  void line(int depth, const std::string& text) { out_ << std::string(2 * depth, ' ') << text << "\n"; }
  //! The C++ type buffer b's elements are stored as, and a float pointer cast to it.
  std::string storage(size_t b) const { return ir::cpu_storage_type(w_.buffers[b].dtype); }
  std::string as_storage(size_t b, const std::string& ptr) const {
    return w_.buffers[b].dtype == DType::F32 ? ptr : "(" + storage(b) + "*)(" + ptr + ")";
  }
  std::string dtype_note(size_t b) const {
    return w_.buffers[b].dtype == DType::F32 ? "" : std::string(ir::dtype_name(w_.buffers[b].dtype)) + " ";
  }
  DType compute(size_t b) const { return ir::compute_type(w_.buffers[b].dtype); }
  //! A scalar element read as its compute type (plain for f32: a storage struct would make
  //! `c ? x : 0` ambiguous).
  std::string read(size_t b, const std::string& addr) const {
    return w_.buffers[b].dtype == DType::F32 ? addr : "(" + std::string(scalar_type(compute(b))) + ")" + addr;
  }
  std::string shape(size_t b) const {
    std::string s = "[";
    for (size_t i = 0; i < w_.buffers[b].shape.size(); ++i)
      s += (i ? ", " : "") + std::to_string(w_.buffers[b].shape[i]);
    return s + "]";
  }
  const std::string& var(const std::string& axis, int level) {
    auto key = std::make_pair(axis, level);
    auto it = loop_var_.find(key);
    if (it == loop_var_.end()) it = loop_var_.emplace(key, fresh(axis + std::to_string(level))).first;
    return it->second;
  }

  //! `tensor[flat offset]` at a point; a packed input in a full register tile reads its panels.
  std::string element(const std::string& tensor, const std::vector<ir::IndexExpr>& indices, const Point& p) {
    const auto& buf = w_.buffers[w_.buffer_index(tensor)];
    Linear lin;
    auto add_value = [&](const AxisValue& v, std::int64_t stride) {
      lin.add(v.var, stride);
      lin.constant += stride * v.offset;
    };
    auto pk = packed_.find(tensor);
    if (pk != packed_.end() && indices.size() > static_cast<size_t>(pk->second.first->dim) &&
        indices[pk->second.first->dim].plain_var() == pk->second.first->axis &&
        p.at(pk->second.first->axis).var == register_base(pk->second.first->axis)) {
      // packed[panel][other dims][block]: the register base is a multiple of the block, so
      // panel * others * block == base * others.
      const ir::Pack& pack = *pk->second.first;
      std::int64_t stride = pack.block;
      for (size_t d = indices.size(); d-- > 0;) {
        const AxisValue& v = p.at(indices[d].terms[0].var);
        if (static_cast<int>(d) == pack.dim) continue;
        add_value(v, stride);
        stride *= buf.shape[d];
      }
      const AxisValue& v = p.at(pack.axis);
      lin.add(v.var, pack.others);
      lin.constant += v.offset;
      return pk->second.second + "[" + lin.str() + "]";
    }
    std::int64_t stride = 1;
    for (size_t d = indices.size(); d-- > 0;) {
      lin.constant += stride * indices[d].constant;
      for (auto& t : indices[d].terms) {
        const AxisValue& v = p.at(t.var);
        lin.add(v.var, stride * t.coeff);
        lin.constant += stride * t.coeff * v.offset;
      }
      if (d > 0) stride *= buf.shape[d];
    }
    if (!slot_var_.empty() && buf.role == ir::Buffer::Role::Temp) {
      // Row n of a block lives at row n - block start of the thread's slot (see run()); the
      // stages index a temporary's first dimension by the shared row axis (check_fuse_rows).
      lin.add(row_var_, -stride);
      lin.add(slot_var_, stride);
    }
    return tensor_.at(tensor) + "[" + lin.str() + "]";
  }

  //! The loop variable a register tile of `axis` starts at.
  std::string register_base(const std::string& axis) {
    for (auto& l : sn_->reg)
      if (l.axis == axis) return var(l.axis, l.level - 1);
    return "";
  }

  // A kernel that packs constant inputs does so in a prepare entry point of its own
  // (cpu_prepares): a mode then says what one call does, packing them or computing.
  static constexpr const char* kPrepareMode = "(tt_mode & 1)";  // pack the constant inputs
  static constexpr const char* kComputeMode = "(tt_mode & 2)";  // everything else

  //! The parallel loop over a pack's panels. In a kernel with a prepare entry point it runs in
  //! one mode only, and in the other opens no threads (OpenMP's if clause) and no iterations.
  void open_panel_loop(int depth, const ir::Pack& pack, const std::string& panel) {
    std::string n = std::to_string(pack.panels), parallel;
    if (prepares_) {
      const char* mode = w_.buffers[pack.buffer].constant ? kPrepareMode : kComputeMode;
      n = std::string("(") + mode + " ? " + n + " : 0)";
      parallel = std::string(" if") + mode;
    }
    line(depth, "#pragma omp parallel for schedule(static) num_threads(tt_threads)" + parallel);
    line(depth, "for (std::int64_t " + panel + " = 0; " + panel + " < " + n + "; ++" + panel + ") {");
  }

  //! Copies an input into its panels before the stage's loops (see ir::Pack).
  void emit_pack(int depth, const ir::Pack& pack) {
    if (pack.group > 1) return emit_grouped_pack(depth, pack);
    const auto& buf = w_.buffers[pack.buffer];
    std::string src = tensor_.at(buf.name);
    std::string dst = fresh(buf.name + "_packed");
    packed_names_[buf.name] = dst;
    std::string blk = std::to_string(pack.block);
    line(depth, "// pack " + buf.name + " into panels of " + blk + " along " + pack.axis + ": " + dst + "[panel]" +
                    std::string(buf.shape.size() > 1 ? "[...]" : "") + "[" + blk + "], zero-padded");
    line(depth, storage(pack.buffer) + "* __restrict " + dst + " = " +
                    as_storage(pack.buffer, "tt_workspace + " + std::to_string(pack.offset)) + ";");
    std::string panel = fresh("panel");
    open_panel_loop(depth, pack, panel);
    int d = depth + 1;
    std::vector<std::string> idx(buf.shape.size());
    Linear dst_lin, src_lin;
    dst_lin.add(panel, pack.others * pack.block);
    std::int64_t dst_stride = pack.block, src_stride = 1;
    std::vector<std::int64_t> src_strides(buf.shape.size());
    for (size_t k = buf.shape.size(); k-- > 0;) {
      src_strides[k] = src_stride;
      src_stride *= buf.shape[k];
    }
    // Panels across the contiguous dimension (B[n, k] along n) are filled by transposing
    // square tiles of lanes in registers; the last dimension then gets no loop of its own here.
    const size_t last = buf.shape.size() - 1;
    const std::int64_t lanes = traits_.vector_lanes;
    const bool transpose =
        static_cast<int>(last) != pack.dim && lanes > 1 && pack.block % lanes == 0 && buf.dtype == DType::F32;
    const std::string zero = buf.dtype == DType::F32 ? "0.0f" : storage(pack.buffer) + "(0)";
    std::vector<std::string> opened;
    for (size_t k = 0; k < buf.shape.size(); ++k) {
      if (static_cast<int>(k) == pack.dim || (transpose && k == last)) continue;
      idx[k] = fresh("i" + std::to_string(k));
      line(d++, "for (std::int64_t " + idx[k] + " = 0; " + idx[k] + " < " + std::to_string(buf.shape[k]) + "; ++" +
                    idx[k] + ") {");
      opened.push_back(idx[k]);
      src_lin.add(idx[k], src_strides[k]);
    }
    for (size_t k = buf.shape.size(); k-- > 0;) {
      if (static_cast<int>(k) == pack.dim) continue;
      if (!idx[k].empty()) dst_lin.add(idx[k], dst_stride);
      dst_stride *= buf.shape[k];
    }
    std::string j = fresh("j");
    std::string first = fresh("first");
    std::string extent = std::to_string(buf.shape[pack.dim]);
    std::string pack_stride = std::to_string(src_strides[pack.dim]);
    line(d, "const std::int64_t " + first + " = " + panel + " * " + blk + ";");
    std::string to = fresh("to"), from = fresh("from");
    line(d, storage(pack.buffer) + "* __restrict " + to + " = " + dst + " + " + dst_lin.str() + ";");
    line(d, "const " + storage(pack.buffer) + "* __restrict " + from + " = " + src + " + " + src_lin.str() + " + " +
                first + " * " + pack_stride + ";");
    if (transpose) {
      // to[k][j] = from[j][k] over the row (k < n) and the panel (j < block): whole tiles,
      // then the row's last columns one by one; a panel cut by the tensor's end is zero-padded.
      std::int64_t n = buf.shape[last];
      std::string k = fresh("k"), kk = fresh("kk"), jj = fresh("jj");
      std::string ln = std::to_string(lanes), ns = std::to_string(n);
      auto scalar = [&](int at, const std::string& from_k, bool guard) {
        line(at, "for (std::int64_t " + k + " = " + from_k + "; " + k + " < " + ns + "; ++" + k + ")");
        line(at + 1, "for (std::int64_t " + j + " = 0; " + j + " < " + blk + "; ++" + j + ") " + to + "[" + k + " * " +
                         blk + " + " + j + "] = " + (guard ? first + " + " + j + " < " + extent + " ? " : "") + from +
                         "[" + j + " * " + pack_stride + " + " + k + "]" + (guard ? " : " + zero + ";" : ";"));
      };
      bool cut = buf.shape[pack.dim] % pack.block != 0;
      int at = d;
      if (cut) line(at++, "if (" + first + " + " + blk + " <= " + extent + ") {");
      line(at, "for (std::int64_t " + kk + " = 0; " + kk + " + " + ln + " <= " + ns + "; " + kk + " += " + ln + ")");
      line(at + 1, "for (std::int64_t " + jj + " = 0; " + jj + " < " + blk + "; " + jj + " += " + ln + ")");
      line(at + 2, "tt_transpose_tile(" + from + " + " + jj + " * " + pack_stride + " + " + kk + ", " + pack_stride +
                       ", " + to + " + " + kk + " * " + blk + " + " + jj + ", " + blk + ");");
      if (n % lanes != 0) scalar(at, std::to_string(n - n % lanes), false);
      if (cut) {
        line(d, "} else {");
        scalar(d + 1, "0", true);
        line(d, "}");
      }
    } else if (buf.shape[pack.dim] % pack.block == 0) {
      line(d, "for (std::int64_t " + j + " = 0; " + j + " < " + blk + "; ++" + j + ") " + to + "[" + j + "] = " + from +
                  "[" + j + " * " + pack_stride + "];");
    } else {
      line(d, "for (std::int64_t " + j + " = 0; " + j + " < " + blk + "; ++" + j + ") " + to + "[" + j +
                  "] = " + first + " + " + j + " < " + extent + " ? " + from + "[" + j + " * " + pack_stride +
                  "] : " + zero + ";");
    }
    for (size_t k = 0; k < opened.size(); ++k) line(--d, "}");
    line(depth, "}");
  }

  //! Copies the vector operand of a dot-product stage into panels whose reduction dimension
  //! goes in interleaved groups (ir::Pack::group): element (k, j) of a panel at
  //! [k / g][j][k % g], so that one vector holds `g` consecutive k of TT_LANES columns.
  void emit_grouped_pack(int depth, const ir::Pack& pack) {
    const auto& buf = w_.buffers[pack.buffer];
    const size_t rank = buf.shape.size();
    const int gd = pack.group_dim(rank);
    const std::int64_t k_extent = buf.shape[gd], k_padded = pack.grouped(k_extent);
    std::string dst = fresh(buf.name + "_packed");
    packed_names_[buf.name] = dst;
    std::string blk = std::to_string(pack.block), g = std::to_string(pack.group);
    line(depth, "// pack " + buf.name + " into panels of " + blk + " along " + pack.axis + " with " + g +
                    " consecutive points of dimension " + std::to_string(gd) + " interleaved: " + dst +
                    "[panel][...][k / " + g + "][" + blk + "][k % " + g + "], zero-padded");
    line(depth, storage(pack.buffer) + "* __restrict " + dst + " = " +
                    as_storage(pack.buffer, "tt_workspace + " + std::to_string(pack.offset)) + ";");
    std::vector<std::int64_t> src_strides(rank);
    std::int64_t st = 1;
    for (size_t d = rank; d-- > 0;) {
      src_strides[d] = st;
      st *= buf.shape[d];
    }
    std::string panel = fresh("panel");
    open_panel_loop(depth, pack, panel);
    int d = depth + 1;
    Linear dst_lin, src_lin;
    dst_lin.add(panel, pack.others * pack.block);
    std::vector<std::string> opened;
    std::int64_t dst_stride = pack.block * k_padded;
    std::vector<std::string> idx(rank);
    for (size_t k = 0; k < rank; ++k) {
      if (static_cast<int>(k) == pack.dim || static_cast<int>(k) == gd) continue;
      idx[k] = fresh("i" + std::to_string(k));
      line(d++, "for (std::int64_t " + idx[k] + " = 0; " + idx[k] + " < " + std::to_string(buf.shape[k]) + "; ++" +
                    idx[k] + ") {");
      opened.push_back(idx[k]);
      src_lin.add(idx[k], src_strides[k]);
    }
    for (size_t k = rank; k-- > 0;) {
      if (idx[k].empty()) continue;
      dst_lin.add(idx[k], dst_stride);
      dst_stride *= buf.shape[k];
    }
    std::string to = fresh("to"), from = fresh("from"), kk = fresh("k"), j = fresh("j"), col = fresh("col");
    line(d, storage(pack.buffer) + "* __restrict " + to + " = " + dst + " + " + dst_lin.str() + ";");
    line(d, "const " + storage(pack.buffer) + "* __restrict " + from + " = " + tensor_.at(buf.name) + " + " +
                src_lin.str() + ";");
    // Whole groups of whole panels copy without tests, one statement per point of a group
    // (GCC vectorizes the interleaving); the panel at the end of the tensor and the group cut
    // by the axis's end test each element.
    const std::string ks = std::to_string(src_strides[gd]), ps = std::to_string(src_strides[pack.dim]);
    const std::string n = std::to_string(buf.shape[pack.dim]), zero = storage(pack.buffer) + "(0)";
    std::string kg = fresh("kg"), t = fresh("t"), f = fresh("f");
    line(d, "for (std::int64_t " + kg + " = 0; " + kg + " < " + std::to_string(k_padded / pack.group) + "; ++" + kg +
                ") {");
    line(d + 1, storage(pack.buffer) + "* __restrict " + t + " = " + to + " + " + kg + " * " +
                    std::to_string(pack.block * pack.group) + ";");
    line(d + 1, "const " + storage(pack.buffer) + "* __restrict " + f + " = " + from + " + " + kg + " * " +
                    std::to_string(pack.group * src_strides[gd]) + " + " + panel + " * " + blk + " * " + ps + ";");
    line(d + 1, "if (" + panel + " * " + blk + " + " + blk + " <= " + n + " && " + kg + " * " + g + " + " + g +
                    " <= " + std::to_string(k_extent) + ") {");
    line(d + 2, "for (std::int64_t " + j + " = 0; " + j + " < " + blk + "; ++" + j + ") {");
    for (int r = 0; r < pack.group; ++r)
      line(d + 3, t + "[" + j + " * " + g + " + " + std::to_string(r) + "] = " + f + "[" + j + " * " + ps + " + " +
                      std::to_string(r * src_strides[gd]) + "];");
    line(d + 2, "}");
    line(d + 1, "} else {");
    line(d + 2, "for (std::int64_t " + j + " = 0; " + j + " < " + blk + "; ++" + j + ") {");
    line(d + 3, "const std::int64_t " + col + " = " + panel + " * " + blk + " + " + j + ";");
    line(d + 3, "for (std::int64_t " + kk + " = 0; " + kk + " < " + g + "; ++" + kk + ")");
    line(d + 4, t + "[" + j + " * " + g + " + " + kk + "] = " + col + " < " + n + " && " + kg + " * " + g + " + " + kk +
                    " < " + std::to_string(k_extent) + " ? " + f + "[" + j + " * " + ps + " + " + kk + " * " + ks +
                    "] : " + zero + ";");
    line(d + 2, "}");
    line(d + 1, "}");
    line(d, "}");
    for (size_t k = 0; k < opened.size(); ++k) line(--d, "}");
    line(depth, "}");
  }

  //! The address of a dot-product stage's vector operand at a register point in its grouped
  //! pack: the point's group of the reduction axis (at a multiple of the group) in its column.
  std::string grouped_element(const Expr& access, const ir::Pack& pack, const Point& p) {
    const auto& buf = w_.buffers[pack.buffer];
    const int gd = pack.group_dim(buf.shape.size());
    Linear lin;
    const AxisValue& col = p.at(pack.axis);  // at the register base: panel * block
    lin.add(col.var, pack.others);
    lin.constant += col.offset * pack.group;
    const AxisValue& k = p.at(access.indices[gd].plain_var());
    lin.add(k.var, pack.block);  // (k / g) * block * g, k a multiple of g
    lin.constant += k.offset * pack.block;
    std::int64_t stride = pack.block * pack.grouped(buf.shape[gd]);
    for (size_t d = buf.shape.size(); d-- > 0;) {
      if (static_cast<int>(d) == pack.dim || static_cast<int>(d) == gd) continue;
      const AxisValue& v = p.at(access.indices[d].plain_var());
      lin.add(v.var, stride);
      lin.constant += v.offset * stride;
      stride *= buf.shape[d];
    }
    return packed_names_.at(buf.name) + "[" + lin.str() + "]";
  }

  //! Whether a border tile can run the dot product: the broadcast operand's group axis (its
  //! last dimension) never reads outside it, so a group is wholly inside or wholly pad. (The
  //! packed vector operand is never padded: ir::lower.)
  bool dot_guardable() const {
    for (auto* e : {&sn_->body.args[0], &sn_->body.args[1]})
      if (w_.may_read_outside(sn_->stage, e->name, e->indices.size() - 1, e->indices.back())) return false;
    return true;
  }

  //! The innermost reduction loop of a dot-product tile (StageNest::dot_group): whole groups,
  //! then the last few points of the axis as a group whose missing points read as 0 (the pack
  //! holds zeros there).
  void dot_loop(int depth, const std::vector<Point>& pts, const std::vector<std::string>& acc) {
    const Loop& l = sn_->reduce_inner.back();
    const std::string g = std::to_string(sn_->dot_group);
    std::string parent = var(l.axis, l.level - 1);
    std::string end = block_end(parent, l.block, l.extent);
    const std::string& v = var(l.axis, l.level);
    const Expr& body = sn_->body;
    int vi = 0;  // which operand is the vector one (packed)
    const ir::Pack* pack = nullptr;
    for (auto& pk : sn_->packs)
      if (pk.group > 1) pack = &pk;
    if (body.args[1].name == w_.buffers[pack->buffer].name) vi = 1;
    const Expr& vec = body.args[vi];
    const Expr& bcast = body.args[1 - vi];
    const auto& sb = w_.buffers[w_.buffer_index(bcast.name)];
    const bool u8_vector = w_.buffers[pack->buffer].dtype == DType::U8;
    // A group of the broadcast operand outside it (border tiles) is its pad value in each place.
    std::int32_t pad_group = 0;
    {
      unsigned char group[4] = {0, 0, 0, 0};
      for (int e = 0; e < sn_->dot_group; ++e) ir::store_element(sb.dtype, group, e, sb.pad.value_or(0.0));
      std::memcpy(&pad_group, group, 4);
    }
    auto body_at = [&](int d, bool tail) {
      Block blk;
      // A load's variable, declared on its first use in this block.
      auto named = [&](const std::string& load, const std::string& base) {
        auto it = blk.load_names.find(load);
        if (it != blk.load_names.end()) return it->second;
        std::string name = names_.candidate(base + "_" + std::to_string(blk.per_tensor[base]++));
        blk.load_names[load] = name;
        line(d, "const tt_vi " + name + " = " + load + ";");
        return name;
      };
      // One row of vectors, then each row's broadcast right before its updates.
      std::vector<std::string> vs;
      for (auto& p : pts) vs.push_back(named("tt_load_raw(&" + grouped_element(vec, *pack, p) + ")", vec.name));
      for (size_t i = 0; i < pts.size(); ++i) {
        std::string addr = element(bcast.name, bcast.indices, pts[i]);
        std::string load = tail ? "tt_bcast_part(&" + addr + ", (" + end + " - " + v + ") * " +
                                      std::to_string(ir::dtype_bytes(sb.dtype)) + ")"
                                : "tt_bcast32(&" + addr + ")";
        if (guarded_) {  // the group's own axis never leaves the tensor (dot_guardable)
          std::string cond;
          for (size_t dim = 0; dim + 1 < bcast.indices.size(); ++dim)
            if (w_.may_read_outside(sn_->stage, bcast.name, dim, bcast.indices[dim]))
              cond += (cond.empty() ? "" : " && ") + std::string("tt_in(") + index_at(bcast.indices[dim], pts[i]) +
                      ", " + std::to_string(sb.shape[dim]) + ")";
          if (!cond.empty()) load = "(" + cond + " ? " + load + " : tt_splati(" + std::to_string(pad_group) + "))";
        }
        std::string s_name = named(load, bcast.name);
        std::string dot = sn_->dot_group == 2 ? "tt_dot_bf16(" + acc[i] + ", " + s_name + ", " + vs[i] + ")"
                          : u8_vector         ? "tt_dot_u8s8(" + acc[i] + ", " + vs[i] + ", " + s_name + ")"
                                              : "tt_dot_u8s8(" + acc[i] + ", " + s_name + ", " + vs[i] + ")";
        line(d, acc[i] + " = " + dot + ";");
      }
    };
    line(depth, "std::int64_t " + v + " = " + parent + ";");
    if (sn_->unroll > 0) line(depth, "#pragma GCC unroll " + std::to_string(sn_->unroll));
    line(depth, "for (; " + v + " + " + g + " <= " + end + "; " + v + " += " + g + ") {");
    body_at(depth + 1, false);
    line(depth, "}");
    if (l.extent % sn_->dot_group != 0) {
      line(depth, "if (" + v + " < " + end + ") {  // the axis ends inside a group");
      body_at(depth + 1, true);
      line(depth, "}");
    }
  }

  //! True if `e` has the same value in every SIMD lane (no access moves along the vector axis
  //! and it does not read the accumulator).
  bool lane_invariant(const Expr& e) const {
    if (e.kind == Expr::Kind::Access) return e.name != st_->name && vector_coeff(e) == 0;
    for (auto& a : e.args)
      if (!lane_invariant(a)) return false;
    return true;
  }

  std::int64_t vector_coeff(const Expr& access) const {
    for (auto& ix : access.indices)
      if (std::int64_t c = ix.coeff_of(sn_->vector_axis)) return c;
    return 0;
  }

  //! State of one block of straight-line code: its loads, deduplicated by address.
  struct Block {
    std::vector<std::string> loads;
    std::map<std::string, std::string> load_names;
    std::map<std::string, int> per_tensor;
    std::vector<std::string> vector_addresses;  //!< of the vector loads, in order (prefetch)
  };

  //! An index of an access at a register point, as C++ text.
  static std::string index_at(const ir::IndexExpr& ix, const Point& p) {
    Linear lin;
    lin.constant = ix.constant;
    for (auto& t : ix.terms) {
      const AxisValue& v = p.at(t.var);
      lin.add(v.var, t.coeff);
      lin.constant += t.coeff * v.offset;
    }
    return lin.str();
  }

  //! `load` of a padded input on a border tile: the pad value where the point is outside it.
  //! Along a vector in the tensor's last dimension the lanes are checked one by one.
  std::string guarded_load(const Expr& e, const Point& p, bool vec, const std::string& addr, const std::string& load) {
    const auto& buf = w_.buffers[w_.buffer_index(e.name)];
    const DType t = ir::compute_type(buf.dtype);
    std::string cond, row_start, pad = literal(buf.pad.value_or(0.0), t);
    for (size_t d = 0; d < e.indices.size(); ++d) {
      if (!w_.may_read_outside(sn_->stage, e.name, d, e.indices[d])) continue;
      std::string n = std::to_string(buf.shape[d]);
      if (vec && d + 1 == e.indices.size() && e.indices[d].coeff_of(sn_->vector_axis) != 0)
        row_start = index_at(e.indices[d], p);
      else
        cond += (cond.empty() ? "" : " && ") + std::string("tt_in(") + index_at(e.indices[d], p) + ", " + n + ")";
    }
    if (cond.empty() && row_start.empty()) return load;
    std::int64_t stride = vec ? vector_coeff(e) : 0;
    std::string inside = row_start.empty() ? load
                         : stride == 1     ? "tt_load_pad(&" + addr + ", " + row_start + ", " +
                                             std::to_string(buf.shape.back()) + ", " + pad + ")"
                                       : "tt_load_rows_pad(&" + addr + ", " + std::to_string(stride) + ", " +
                                             row_start + ", " + std::to_string(buf.shape.back()) + ", " + pad + ")";
    if (cond.empty()) return inside;
    return "(" + cond + " ? " + inside + " : " + (vec ? splat(t) + pad + ")" : pad) + ")";
  }

  //! The condition under which a register tile's reads of padded inputs all fall inside them
  //! (its tile loops and reduction loops at their bounds); "" when no read can fall outside.
  std::string interior_condition() {
    std::map<std::string, std::pair<std::string, std::string>> range;  // axis -> C++ [lo, hi]
    for (auto* loops : {&sn_->reg, &sn_->reduce_inner})
      for (auto& l : *loops) {
        std::string base = var(l.axis, l.level - 1);
        std::string hi = l.extent % l.block == 0 ? base + " + " + std::to_string(l.block - 1)
                                                 : "tt_imin(" + base + " + " + std::to_string(l.block) + ", " +
                                                       std::to_string(l.extent) + ") - 1";
        range[l.axis] = {base, hi};
      }
    std::string cond;
    std::set<std::string> seen;
    for (auto [access, d] : outside_) {
      const ir::IndexExpr& ix = access->indices[d];
      std::int64_t n = w_.buffers[w_.buffer_index(access->name)].shape[d];
      std::string lo, hi;
      auto [glo, ghi] = ir::index_range(ix, st_->axes);  // over the whole stage: which side can fail
      for (auto& t : ix.terms) {
        auto& [a_lo, a_hi] = range.at(t.var);
        std::string c = t.coeff == 1 ? "" : std::to_string(t.coeff) + " * ";
        lo += (lo.empty() ? "" : " + ") + c + "(" + (t.coeff > 0 ? a_lo : a_hi) + ")";
        hi += (hi.empty() ? "" : " + ") + c + "(" + (t.coeff > 0 ? a_hi : a_lo) + ")";
      }
      if (ix.constant != 0) {
        std::string k = (ix.constant > 0 ? " + " : " - ") + std::to_string(std::abs(ix.constant));
        lo += k;
        hi += k;
      }
      for (std::string c : {glo < 0 ? lo + " >= 0" : "", ghi >= n ? hi + " < " + std::to_string(n) : ""})
        if (!c.empty() && seen.insert(c).second) cond += (cond.empty() ? "" : " && ") + std::string("(") + c + ")";
    }
    return cond;
  }

  //! C++ text of `e`'s value at a point as type `want`: computed in its own compute type
  //! (ir::value_type; literals take their context's) and converted once at the end.
  std::string value(const Expr& e, const Point& p, bool vec, Block& blk, const std::string& acc_value, DType want) {
    ir::ValueType vt = w_.value_type(e);
    DType t = vt.in(want);
    return convert(node(e, t, p, vec, blk, acc_value), t, want, vec);
  }
  std::string node(const Expr& e, DType t, const Point& p, bool vec, Block& blk, const std::string& acc_value) {
    auto arg = [&](size_t i) { return value(e.args[i], p, vec, blk, acc_value, w_.operand_type(e, i, t)); };
    switch (e.kind) {
      case Expr::Kind::Const:
        return vec ? splat(t) + literal(e.value, t) + ")" : literal(e.value, t);
      case Expr::Kind::Access: {
        if (!acc_value.empty() && e.name == st_->name) return acc_value;
        const size_t b = static_cast<size_t>(w_.buffer_index(e.name));
        std::string addr = element(e.name, e.indices, p);
        std::int64_t stride = vec ? vector_coeff(e) : 0;  // > 1: a strided window's row (ir::strided_row_reads)
        std::string load =
            !vec          ? read(b, addr)
            : !stride     ? splat(t) + read(b, addr) + ")"
            : stride == 1 ? (partial_.empty() ? "tt_load(&" + addr + ")" : "tt_load_n(&" + addr + ", " + partial_ + ")")
            : partial_.empty() ? "tt_load_rows(&" + addr + ", " + std::to_string(stride) + ")"
                               : "tt_load_rows_n(&" + addr + ", " + std::to_string(stride) + ", " + partial_ + ")";
        if (guarded_) load = guarded_load(e, p, vec, addr, load);
        auto it = blk.load_names.find(load);
        if (it != blk.load_names.end()) return it->second;
        // Block-local names (A_0, A_1, ...) that avoid the kernel-wide ones.
        std::string name = names_.candidate(e.name + "_" + std::to_string(blk.per_tensor[e.name]++));
        if (vec && vector_coeff(e)) blk.vector_addresses.push_back(addr);
        blk.loads.push_back(std::string("const ") + (vec ? vector_type(t) : scalar_type(t)) + " " + name + " = " +
                            load + ";");
        blk.load_names[load] = name;
        return name;
      }
      case Expr::Kind::Neg:
        return "(-" + arg(0) + ")";
      case Expr::Kind::Add:
      case Expr::Kind::Sub:
      case Expr::Kind::Mul:
        return "(" + arg(0) + c_operator(e.kind) + arg(1) + ")";
      case Expr::Kind::Div:
        // A divisor that is the same in every lane is inverted once: a SIMD division costs
        // several multiplications (x / s[n] in softmax).
        if (vec && lane_invariant(e.args[1]))
          return "(" + arg(0) + " * tt_splat(1.0f / " + value(e.args[1], p, false, blk, acc_value, t) + "))";
        return "(" + arg(0) + " / " + arg(1) + ")";
      case Expr::Kind::Call: {
        if (ir::is_cast(e)) return convert(arg(0), w_.operand_type(e, 0, t), t, vec);
        // abs, max, min and select compute in the node's type; the other builtins in f32.
        std::string s = std::string(vec ? "tt_v" : "tt_") + e.name + "(";
        for (size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + arg(i);
        return s + ")";
      }
      default: {
        // Comparisons compare in the operands' joint type and give 1 or 0 as f32.
        std::string cmp = "(" + arg(0) + c_operator(e.kind) + arg(1) + ")";
        return vec ? "tt_vbool" + cmp : "(" + cmp + " ? 1.0f : 0.0f)";
      }
    }
  }

  void flush(int depth, Block& blk) {
    for (auto& l : blk.loads) line(depth, l);
    blk.loads.clear();
  }

  //! Output location of a point: the stage's own buffer, or the epilogue's (same shape); or,
  //! for the partial results of a blocked reduction, the partials buffer when there is one.
  std::string out_addr(const Point& p, bool partial = false) {
    std::vector<ir::IndexExpr> idx;
    for (auto& a : st_->axes)
      if (!a.reduce) {
        ir::IndexExpr ix;
        ix.terms.push_back({a.name, 1});
        idx.push_back(ix);
      }
    std::string addr = element(w_.buffers[sn_->store].name, idx, p);
    if (!partial || partials_.empty()) return addr;
    return partials_ + addr.substr(tensor_.at(w_.buffers[sn_->store].name).size());  // same index
  }
  //! The stored result of the earlier reduction blocks at a point (vector or scalar).
  std::string previous(const Point& p, bool vec) {
    std::string addr = out_addr(p, true);
    if (!vec) return partials_.empty() ? read(sn_->store, addr) : acc_t_ == DType::F32 ? addr : "(int)" + addr;
    return out_stride_ != 1   ? "tt_load_s(&" + addr + ", " + std::to_string(out_stride_) + ")"
           : partial_.empty() ? "tt_load(&" + addr + ")"
                              : "tt_load_n(&" + addr + ", " + partial_ + ")";
  }

  //! Stores each point's result, through the fused epilogue once the reduction is complete.
  void store_all(int depth, const std::vector<Point>& pts, bool vec, const std::vector<std::string>& results) {
    auto put = [&](int d, const Point& p, const std::string& v, bool partial = false) {
      std::string addr = out_addr(p, partial);
      if (!vec)
        line(d, addr + " = " + v + ";");
      else if (out_stride_ != 1)
        line(d, "tt_store_s(&" + addr + ", " + v + ", " + std::to_string(out_stride_) + ");");
      else if (partial_.empty())
        line(d, "tt_store(&" + addr + ", " + v + ");");
      else
        line(d, "tt_store_n(&" + addr + ", " + v + ", " + partial_ + ");");
    };
    if (sn_->epilogue < 0 && (partials_.empty() || last_.empty())) {
      for (size_t i = 0; i < pts.size(); ++i) put(depth, pts[i], results[i]);
      return;
    }
    Block blk;
    std::vector<std::string> finals = results;
    if (sn_->epilogue >= 0) {
      const ir::Stage& e = w_.stages[sn_->epilogue];
      DType want = w_.epilogue_type(sn_->epilogue);
      for (size_t i = 0; i < pts.size(); ++i) finals[i] = value(sn_->epilogue_body, pts[i], vec, blk, results[i], want);
    }
    // The epilogue's loads get a scope of their own: the body's loads may share their names.
    line(depth, last_.empty() ? "{" : "if (" + last_ + ") {");
    flush(depth + 1, blk);
    for (size_t i = 0; i < pts.size(); ++i) put(depth + 1, pts[i], finals[i]);
    if (!last_.empty()) {
      line(depth, "} else {");
      for (size_t i = 0; i < pts.size(); ++i) put(depth + 1, pts[i], results[i], true);
    }
    line(depth, "}");
  }

  //! The reduction loops of the micro-kernel around `body`; returns the depth inside them.
  int open_reduce_loops(int depth, bool vector_reduce_axis_too, bool but_innermost = false) {
    const auto& loops = sn_->reduce_inner;
    const bool scalar = sn_->vector_axis.empty();
    // Which loops run straight (fully unrolled), innermost first. A window's few taps (r, s < 3)
    // do: as loops their overhead outweighed the work (depthwise 3 x 3 over C144 56 x 56: 0.40 ms
    // looped, 0.12 ms unrolled). But compile time grows faster than the code: the unrolled code
    // (accumulators times the trips it copies) stays within kStraightStatements, past which a
    // loop costs nothing next to its body (28 vector sums over c < 4, r < 3, s < 3 of a padded
    // conv compiled in 25 s straight, 5.6 s with c a loop). In a scalar tile, whose straight code
    // GCC's vectorizers work on, a loop also runs straight only when everything inside it does:
    // 64 scalar sums over h < 4 around a w < 14 loop took 30-40 s to compile unrolled, 2 s not.
    const double accumulators = sn_->accumulators();
    const bool innermost_pragma = sn_->unroll > 0;  // the unroll knob's loop
    double copies = 1;                              // of the innermost body, inside loop i
    bool inside_straight = true;                    // every loop inside loop i runs straight
    std::vector<bool> unrolled(loops.size(), false);
    for (size_t i = loops.size(); i-- > 0;) {
      const std::int64_t trips = loops[i].block;
      if (innermost_pragma && i + 1 == loops.size()) {
        copies *= static_cast<double>(std::min<std::int64_t>(sn_->unroll, trips));
        inside_straight = sn_->unroll >= trips;
        continue;
      }
      unrolled[i] = trips <= kFullUnrollTrips && (!scalar || inside_straight) &&
                    accumulators * copies * static_cast<double>(trips) <= kStraightStatements;
      if (unrolled[i]) copies *= static_cast<double>(trips);
      inside_straight = inside_straight && unrolled[i];
    }
    for (size_t i = 0; i < loops.size(); ++i) {
      const Loop& l = loops[i];
      if (!vector_reduce_axis_too && sn_->vector_reduce && l.axis == sn_->vector_axis) continue;
      if (but_innermost && i + 1 == loops.size()) continue;
      std::string parent = var(l.axis, l.level - 1);
      std::string end = block_end(parent, l.block, l.extent);
      if (innermost_pragma && i + 1 == loops.size())
        line(depth, "#pragma GCC unroll " + std::to_string(sn_->unroll));
      else if (unrolled[i])
        line(depth, "#pragma GCC unroll " + std::to_string(l.block));
      const std::string& v = var(l.axis, l.level);
      line(depth, "for (std::int64_t " + v + " = " + parent + "; " + v + " < " + end + "; ++" + v + ") {");
      ++depth;
    }
    return depth;
  }
  void close_to(int from, int to) {
    while (from > to) line(--from, "}");
  }

  //! Computes a set of register points. Scalar and VecSpatial points hold one accumulator
  //! each (a float or a vector of lanes); VecReduce points a vector of partial results.
  void points(int depth, const std::vector<Point>& pts, Mode mode) {
    // Accumulator names are local to this block: release them when it is done.
    auto outer_names = names_.snapshot();
    points_body(depth, pts, mode);
    names_.restore(std::move(outer_names));
  }

  void points_body(int depth, const std::vector<Point>& pts, Mode mode) {
    bool vec = mode == Mode::VecSpatial;
    bool reduction = !sn_->reduce_inner.empty();
    Combine c = st_->combine;
    std::vector<std::string> acc;
    if (!reduction) {
      Block blk;
      std::vector<std::string> vals;
      DType t = sn_->epilogue >= 0 ? acc_t_ : w_.value_type(sn_->body).in(acc_t_);
      for (auto& p : pts) vals.push_back(value(sn_->body, p, vec, blk, "", t));
      flush(depth, blk);
      store_all(depth, pts, vec, vals);
      return;
    }
    for (size_t i = 0; i < pts.size(); ++i) {
      acc.push_back(fresh("acc" + std::to_string(i)));
      std::string id = literal(identity(c), acc_t_);
      if (mode == Mode::VecReduce) {
        line(depth, std::string(vector_type(acc_t_)) + " " + acc.back() + " = " + splat(acc_t_) + id + ");");
        line(depth, std::string(scalar_type(acc_t_)) + " " + acc.back() + "_tail = " + id + ";");
      } else {
        std::string init = vec ? splat(acc_t_) + id + ")" : id;
        std::string prev = previous(pts[i], vec);
        line(depth, std::string(vec ? vector_type(acc_t_) : scalar_type(acc_t_)) + " " + acc.back() + " = " +
                        (first_.empty() ? init : "(" + first_ + ") ? " + init + " : " + prev) + ";");
      }
    }
    // Dot-product tiles wherever the SIMD axis stands at its panels (full tiles, and the rows
    // of edge tiles cut along another axis): whole vectors there read the grouped pack.
    bool dot = sn_->dot_group > 1 && mode == Mode::VecSpatial && partial_.empty() && (!guarded_ || dot_guardable());
    for (auto& p : pts) dot = dot && p.at(sn_->vector_axis).var == register_base(sn_->vector_axis);
    int inner = open_reduce_loops(depth, mode != Mode::VecReduce, dot);
    auto update = [&](int d, bool v, const std::string& suffix, const Point* override_axis) {
      // Each point's loads come right before its update: a broadcast is dead after its row's
      // updates, so the tile needs accumulators + one row of vectors + one broadcast registers
      // (GCC keeps this order; all loads first spills accumulators of large tiles).
      if (v && sn_->prefetch > 0 && !sn_->reduce_inner.empty()) {
        // The vector loads `prefetch` iterations of the innermost reduction loop ahead: one
        // prefetch per vector (a cache line of AVX-512 floats). Prefetches never fault, so
        // those past the end of a tensor need no guard.
        Block ahead;
        const std::string& axis = sn_->reduce_inner.back().axis;
        for (auto& p : pts) {
          Point q = p;
          if (override_axis) q[sn_->vector_axis] = override_axis->at(sn_->vector_axis);
          q[axis].offset += sn_->prefetch;
          value(sn_->body, q, v, ahead, "", acc_t_);
        }
        for (auto& addr : ahead.vector_addresses) line(d, "__builtin_prefetch(&" + addr + ");");
      }
      Block blk;
      for (size_t i = 0; i < pts.size(); ++i) {
        Point q = pts[i];
        if (override_axis) q[sn_->vector_axis] = override_axis->at(sn_->vector_axis);
        std::string val = value(sn_->body, q, v, blk, "", acc_t_);
        flush(d, blk);
        line(d, acc[i] + suffix + " = " + combine(c, v, acc[i] + suffix, val) + ";");
      }
    };
    if (dot) {
      dot_loop(inner, pts, acc);
    } else if (mode != Mode::VecReduce) {
      update(inner, vec, "", nullptr);
    } else {
      const Loop& l = sn_->reduce_inner.back();
      std::string parent = var(l.axis, l.level - 1);
      std::string end = block_end(parent, l.block, l.extent);
      const std::string& v = var(l.axis, l.level);
      std::string lanes = std::to_string(sn_->lanes);
      line(inner, "std::int64_t " + v + " = " + parent + ";");
      if (sn_->unroll > 0) line(inner, "#pragma GCC unroll " + std::to_string(sn_->unroll));
      line(inner, "for (; " + v + " + " + lanes + " <= " + end + "; " + v + " += " + lanes + ") {");
      Point at;
      at[l.axis] = {v, 0};
      update(inner + 1, true, "", &at);
      line(inner, "}");
      line(inner, "for (; " + v + " < " + end + "; ++" + v + ") {");
      update(inner + 1, false, "_tail", &at);
      line(inner, "}");
    }
    close_to(inner, depth);
    std::vector<std::string> results;
    for (size_t i = 0; i < pts.size(); ++i) {
      std::string result = acc[i];
      if (mode == Mode::VecReduce) {
        result = fresh("res" + std::to_string(i));
        line(depth, std::string(scalar_type(acc_t_)) + " " + result + " = " +
                        combine(c, false, std::string(horizontal(c)) + "(" + acc[i] + ")", acc[i] + "_tail") + ";");
        if (!first_.empty()) {
          std::string prev = previous(pts[i], false);
          line(depth, "if (!(" + first_ + ")) " + result + " = " + combine(c, false, prev, result) + ";");
        }
      }
      results.push_back(result);
    }
    store_all(depth, pts, vec, results);
  }

  void micro_kernel(int depth) {
    // Register points of the full tile: every combination of spatial offsets, stepping the
    // vectorized spatial axis by whole vectors.
    Mode mode = sn_->vector_axis.empty() ? Mode::Scalar : sn_->vector_reduce ? Mode::VecReduce : Mode::VecSpatial;
    std::vector<Point> pts(1);
    for (auto& l : sn_->reg) {
      std::int64_t step = (mode == Mode::VecSpatial && l.axis == sn_->vector_axis) ? sn_->lanes : 1;
      std::vector<Point> next;
      for (auto& p : pts)
        for (std::int64_t r = 0; r < l.block; r += step) {
          Point q = p;
          q[l.axis] = {var(l.axis, l.level - 1), r};
          next.push_back(q);
        }
      pts = next;
    }
    for (auto& p : pts)
      for (auto& l : sn_->reduce_inner) p[l.axis] = {var(l.axis, l.level), 0};

    std::string full;
    for (auto& l : sn_->reg)
      if (l.extent % l.block != 0)
        full += (full.empty() ? "" : " && ") + var(l.axis, l.level - 1) + " + " + std::to_string(l.block) +
                " <= " + std::to_string(l.extent);
    // Packed inputs are read through their panels wherever their pack axis stands at its
    // register base (see element()); elsewhere from the original tensor.
    packed_.clear();
    for (auto& pack : sn_->packs)
      if (pack.group == 1)  // a grouped pack is read by the dot-product tiles alone
        packed_[w_.buffers[pack.buffer].name] = {&pack, packed_names_.at(w_.buffers[pack.buffer].name)};
    auto tile = [&](int d) {
      if (full.empty()) {
        points(d, pts, mode);
        return;
      }
      line(d, "if (" + full + ") {");
      points(d + 1, pts, mode);
      line(d, "} else {  // edge tile: the same computation on the points inside the tensor");
      edge_tile(d + 1, mode);
      line(d, "}");
    };
    std::string interior = interior_condition();
    if (interior.empty()) {
      tile(depth);
      return;
    }
    // Reads of a padded input are checked only on the tiles that reach past its border: one
    // test per tile, none per element inside.
    line(depth, "if (" + interior + ") {");
    tile(depth + 1);
    line(depth, "} else {  // border tile: reads outside the padded inputs give their pad value");
    guarded_ = true;
    tile(depth + 1);
    guarded_ = false;
    line(depth, "}");
  }

  //! A register tile cut by the end of an axis. Axes other than the SIMD one go one point at
  //! a time; the SIMD axis keeps whole vectors where they fit, then single lanes.
  void edge_tile(int depth, Mode mode) {
    int d = depth;
    Point p;
    const Loop* vector_loop = nullptr;
    for (auto& l : sn_->reg) {
      if (mode == Mode::VecSpatial && l.axis == sn_->vector_axis) {
        vector_loop = &l;
        continue;
      }
      std::string parent = var(l.axis, l.level - 1);
      const std::string& v = var(l.axis, l.level);
      line(d++, "for (std::int64_t " + v + " = " + parent + "; " + v + " < " + block_end(parent, l.block, l.extent) +
                    "; ++" + v + ") {");
      p[l.axis] = {v, 0};
    }
    for (auto& l : sn_->reduce_inner) p[l.axis] = {var(l.axis, l.level), 0};
    if (!vector_loop) {
      points(d, {p}, mode == Mode::VecReduce ? Mode::VecReduce : Mode::Scalar);
      close_to(d, depth);
      return;
    }
    const Loop& l = *vector_loop;
    std::string base = var(l.axis, l.level - 1);
    std::string block = std::to_string(l.block), extent = std::to_string(l.extent);
    std::string lanes = std::to_string(sn_->lanes);
    std::vector<Point> row;
    for (std::int64_t r = 0; r < l.block; r += sn_->lanes) {
      Point q = p;
      q[l.axis] = {base, r};
      row.push_back(q);
    }
    if (l.extent % l.block == 0) {
      points(d, row, Mode::VecSpatial);
    } else if (strided_vector_) {
      // Only whole panels are contiguous: the points past the last one go one at a time.
      line(d, "if (" + base + " + " + block + " <= " + extent + ") {");
      points(d + 1, row, Mode::VecSpatial);
      line(d, "} else {");
      const std::string& v = var(l.axis, l.level);
      line(d + 1, "for (std::int64_t " + v + " = " + base + "; " + v + " < " + extent + "; ++" + v + ") {");
      Point q = p;
      q[l.axis] = {v, 0};
      points(d + 2, {q}, Mode::Scalar);
      line(d + 1, "}");
      line(d, "}");
    } else {
      line(d, "if (" + base + " + " + block + " <= " + extent + ") {");
      points(d + 1, row, Mode::VecSpatial);
      line(d, "} else {");
      const std::string& v = var(l.axis, l.level);
      std::string end = "tt_imin(" + base + " + " + block + ", " + extent + ")";
      line(d + 1, "std::int64_t " + v + " = " + base + ";");
      line(d + 1, "for (; " + v + " + " + lanes + " <= " + end + "; " + v + " += " + lanes + ") {");
      Point q = p;
      q[l.axis] = {v, 0};
      points(d + 2, {q}, Mode::VecSpatial);
      line(d + 1, "}");
      // The last lanes: one vector with its end masked off.
      line(d + 1, "if (" + v + " < " + end + ") {");
      std::string left = fresh("lanes_left");
      line(d + 2, "const std::int64_t " + left + " = " + end + " - " + v + ";");
      partial_ = left;
      points(d + 2, {q}, Mode::VecSpatial);
      partial_.clear();
      names_.release(left);
      line(d + 1, "}");
      line(d, "}");
    }
    close_to(d, depth);
  }

  void stage(const StageNest& sn) {
    // Each stage is a block of its own: its loop variables can be reused by the next.
    auto outer_names = names_.snapshot();
    stage_body(sn);
    names_.restore(std::move(outer_names));
  }

  void stage_body(const StageNest& sn) {
    sn_ = &sn;
    st_ = &w_.stages[sn.stage];
    loop_var_.clear();
    out_stride_ = 1;
    acc_t_ = w_.accumulator_type(sn.stage);
    if (!sn.vector_axis.empty() && !sn.vector_reduce) {
      // Output dimensions follow the stage's spatial axes in order.
      const auto& shape = w_.buffers[sn.store].shape;
      size_t d = 0;
      for (auto& a : st_->axes)
        if (!a.reduce && a.name != sn.vector_axis)
          ++d;
        else if (!a.reduce)
          break;
      for (size_t k = d + 1; k < shape.size(); ++k) out_stride_ *= shape[k];
    }
    outside_ = ir::reads_outside(w_, sn.stage, {&sn.body, sn.epilogue >= 0 ? &sn.epilogue_body : nullptr});
    strided_vector_ =
        out_stride_ != 1 || (!sn.vector_axis.empty() && !ir::panel_reads(sn.body, sn.vector_axis).empty());
    const auto& stmt = w_.op.stmts[sn.stage];
    std::string text = stmt.tensor + "[";
    for (size_t i = 0; i < stmt.lhs_vars.size(); ++i) text += (i ? ", " : "") + stmt.lhs_vars[i];
    text += std::string("] ") + ir::combine_token(stmt.combine) + " " + ir::to_string(stmt.rhs);
    line(base_, "// stage " + st_->name + ": " + text);
    if (sn.epilogue >= 0)
      line(base_, "// with the epilogue of stage " + w_.stages[sn.epilogue].name + " fused at the store");
    line(base_, "{");
    int depth = base_ + 1;
    partials_.clear();
    if (sn.partials >= 0) {
      // The output's type cannot hold the sums of the reduction blocks exactly: they collect
      // in a buffer of the accumulator's type, and the last block stores the final values.
      partials_ = fresh("partials");
      std::string type = acc_t_ == DType::F32 ? "float" : "tt_i32";
      line(depth, type + "* __restrict " + partials_ + " = " + (acc_t_ == DType::F32 ? "" : "(tt_i32*)") +
                      "(tt_workspace + " + std::to_string(sn.partials) + ");");
    }
    for (auto& pack : sn.packs) emit_pack(depth, pack);
    if (prepares_) line(depth++, std::string("if ") + kComputeMode + " {");
    const int body_depth = depth;
    int parallel = 0;
    for (auto& l : sn.outer) parallel += l.parallel ? 1 : 0;
    if (parallel > 0)
      line(depth, "#pragma omp parallel for" +
                      (parallel > 1 ? " collapse(" + std::to_string(parallel) + ")" : std::string()) +
                      " schedule(static) num_threads(tt_threads)");
    for (auto& l : sn.outer) {
      const std::string& v = var(l.axis, l.level);
      std::string step = std::to_string(l.step);
      if (l.level == 0 && !row_var_.empty() && l.axis == st_->axes[0].name) {
        std::int64_t rows = nest_.fuse_rows;
        std::string end = block_end(row_var_, rows, l.extent);
        line(depth++,
             "for (std::int64_t " + v + " = " + row_var_ + "; " + v + " < " + end + "; " + v + " += " + step + ") {");
      } else if (l.level == 0) {
        line(depth++, "for (std::int64_t " + v + " = 0; " + v + " < " + std::to_string(l.extent) + "; " + v +
                          " += " + step + ") {");
      } else {
        std::string parent = var(l.axis, l.level - 1);
        std::string end = block_end(parent, l.block, l.extent);
        line(depth++,
             "for (std::int64_t " + v + " = " + parent + "; " + v + " < " + end + "; " + v + " += " + step + ") {");
      }
    }
    // A register tile starts from the identity on the first block of every reduction axis
    // and applies a fused epilogue on the last.
    first_.clear();
    last_.clear();
    for (auto& l : sn.reduce_inner) {
      if (l.block >= l.extent) continue;
      std::string base = var(l.axis, l.level - 1);
      first_ += (first_.empty() ? "" : " && ") + base + " == 0";
      last_ +=
          (last_.empty() ? "" : " && ") + base + " + " + std::to_string(l.block) + " >= " + std::to_string(l.extent);
    }
    micro_kernel(depth);
    close_to(depth, body_depth);
    if (prepares_) line(body_depth - 1, "}");
    line(base_, "}");
  }
};

}  // namespace

std::string cpu_entry_point(const ir::Workload& w, const std::string& config_json) {
  return "tt_kernel_" + hash_hex(w.key + "\n" + config_json);
}

bool cpu_prepares(const ir::Workload& w, const ir::LoopNest& nest) {
  for (auto& sn : nest.stages)
    for (auto& p : sn.packs)
      if (w.buffers[p.buffer].constant) return true;
  return false;
}

CallAbi cpu_call_abi(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config_json) {
  auto declare = [](const std::string& name, const char* threads) {
    return "extern \"C\" void " + name + "(float* const* tensors, float* workspace" + threads + ")";
  };
  CallAbi abi;
  abi.entry_point = cpu_entry_point(w, config_json);
  abi.signature = declare(abi.entry_point, "");
  abi.threads_entry_point = abi.entry_point + "_threads";
  abi.threads_signature = declare(abi.threads_entry_point, ", int threads");
  if (cpu_prepares(w, nest)) {
    abi.prepare_entry_point = abi.entry_point + "_prepare";
    abi.prepare_signature = declare(abi.prepare_entry_point, ", int threads");
  }
  return abi;
}

std::string emit_cpu_kernel(const ir::Workload& w, const ir::LoopNest& nest, const ir::TargetTraits& traits,
                            const std::string& config_json) {
  return Emitter(w, nest, traits).run(config_json);
}

}  // namespace tiletune::codegen
