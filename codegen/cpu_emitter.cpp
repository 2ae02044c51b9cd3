// The CPU kernel: its entry points, each stage's tile loops, the micro-kernel and its reduction
// loops, tiles cut by the tensor's borders, and the stores (with a fused epilogue). Packs are
// emitted in cpu_emit_pack.cpp, tiles cut by the tensor's ends in cpu_emit_edge.cpp, values and
// loads in cpu_emit_expr.cpp.
#include "codegen/cpu_emitter.hpp"

#include "codegen/cpu_emit.hpp"
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

namespace cpu_emit {

//! Reduction loops of the micro-kernel with at most this many trips are unrolled fully.
constexpr std::int64_t kFullUnrollTrips = 8;
//! At most this many statements (accumulators times the trips unrolling copies) of the
//! micro-kernel's reduction run straight (see open_reduce_loops).
constexpr double kStraightStatements = 512;

std::string Emitter::run(const std::string& config_json) {
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
      line(1, storage(b) + "* __restrict " + name + " = " + as_storage(b, "tt_tensors[" + std::to_string(arg++) + "]") +
                  ";  // " + dtype_note(b) + shape(b));
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

std::string Emitter::out_addr(const Point& p, bool partial) {
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

std::string Emitter::previous(const Point& p, bool vec) {
  std::string addr = out_addr(p, true);
  if (!vec) return partials_.empty() ? read(sn_->store, addr) : acc_t_ == DType::F32 ? addr : "(int)" + addr;
  return out_stride_ != 1   ? "tt_load_s(&" + addr + ", " + std::to_string(out_stride_) + ")"
         : partial_.empty() ? "tt_load(&" + addr + ")"
                            : "tt_load_n(&" + addr + ", " + partial_ + ")";
}

void Emitter::store_all(int depth, const std::vector<Point>& pts, bool vec, const std::vector<std::string>& results) {
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

int Emitter::open_reduce_loops(int depth, bool vector_reduce_axis_too, bool but_innermost) {
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

void Emitter::close_to(int from, int to) {
  while (from > to) line(--from, "}");
}

void Emitter::points(int depth, const std::vector<Point>& pts, Mode mode) {
  // Accumulator names are local to this block: release them when it is done.
  auto outer_names = names_.snapshot();
  points_body(depth, pts, mode);
  names_.restore(std::move(outer_names));
}

void Emitter::points_body(int depth, const std::vector<Point>& pts, Mode mode) {
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
    std::string id = literal(ir::combine_identity(c), acc_t_);
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
  // The updates run row by row, the SIMD axis fastest, whatever the order of the op's axes: a
  // broadcast is then dead after its row's vectors. In the axes' order an NCHW conv's tile
  // (k in lanes before its x rows) kept every row's broadcast live beside the accumulators.
  // A row is the points that share their broadcasts: the axes of the broadcast reads (those
  // that do not move along the SIMD axis) order the points first, the others (columns: vectors
  // of other channel blocks, read by vector inputs only) after them. Columns first kept every
  // row's broadcast live instead: a stride-2 nChw8c conv's 6 x 2 tile spilled three
  // accumulators (2.6 ms against 1.6 ms for 3 x 4).
  std::vector<std::string> row_axes;
  if (vec) {
    std::vector<const ir::Expr*> reads;
    ir::collect_accesses(sn_->body, reads);
    auto broadcast_reads_use = [&](const std::string& axis) {
      return std::any_of(reads.begin(), reads.end(), [&](const ir::Expr* r) {
        return ir::access_uses(*r, axis) && !ir::access_uses(*r, sn_->vector_axis);
      });
    };
    for (bool broadcast : {true, false})
      for (auto& l : sn_->reg)
        if (l.axis != sn_->vector_axis && broadcast_reads_use(l.axis) == broadcast) row_axes.push_back(l.axis);
  }
  std::vector<size_t> row_major(pts.size());
  for (size_t i = 0; i < pts.size(); ++i) row_major[i] = i;
  std::stable_sort(row_major.begin(), row_major.end(), [&](size_t a, size_t b) {
    for (auto& axis : row_axes) {
      std::int64_t x = pts[a].at(axis).offset, y = pts[b].at(axis).offset;
      if (x != y) return x < y;
    }
    return false;
  });
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
    for (size_t i : row_major) {
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

void Emitter::micro_kernel(int depth) {
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

void Emitter::stage(const StageNest& sn) {
  // Each stage is a block of its own: its loop variables can be reused by the next.
  auto outer_names = names_.snapshot();
  stage_body(sn);
  names_.restore(std::move(outer_names));
}

void Emitter::stage_body(const StageNest& sn) {
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
  strided_vector_ = out_stride_ != 1 || (!sn.vector_axis.empty() && !ir::panel_reads(sn.body, sn.vector_axis).empty());
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
    last_ += (last_.empty() ? "" : " && ") + base + " + " + std::to_string(l.block) + " >= " + std::to_string(l.extent);
  }
  micro_kernel(depth);
  close_to(depth, body_depth);
  if (prepares_) line(body_depth - 1, "}");
  line(base_, "}");
}

}  // namespace cpu_emit

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
  return cpu_emit::Emitter(w, nest, traits).run(config_json);
}

}  // namespace tiletune::codegen
