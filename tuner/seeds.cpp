// The BLAS-like seed configs of a Space (Space::seeds): derived from the target's registers and
// caches, measured first so that a short search starts from a good kernel.
#include <algorithm>
#include <set>

#include "tuner/space.hpp"
#include "tuner/space_util.hpp"

namespace tiletune::tuner {

namespace {

//! Which inputs a seed config packs.
enum class Packing { None, VectorInputs, All };

//! The tile sizes of an axis blocked by `reg` inside blocks of at most `most` points.
std::vector<std::int64_t> two_levels(std::int64_t extent, std::int64_t reg, std::int64_t most) {
  std::int64_t outer = std::min(round_up(extent, reg), most);
  return outer > reg ? std::vector<std::int64_t>{outer, reg} : std::vector<std::int64_t>{reg};
}

}  // namespace

void Space::vector_tiles(ir::StageSchedule& ss, int stage, std::int64_t vectors) const {
  auto axes = ir::vectorizable_axes(w_, stage);
  if (axes.empty()) return;
  ss.vectorize = axes.front();
  for (auto& a : w_.stages[stage].axes) {
    // A reduction along the row runs its whole length in one vector: one horizontal
    // combine per row instead of one per block (0.81 against 0.96 ms on softmax 4096x1024).
    std::int64_t whole = round_up(a.extent, t_.vector_lanes);
    std::int64_t reg = a.name != ss.vectorize ? 1
                       : a.reduce             ? whole
                                              : std::min(vectors * t_.vector_lanes, whole);
    ss.tile[a.name] = {reg};
  }
  ss.unroll = 0;
}

std::vector<ir::Schedule> Space::row_seeds() const {
  // Row-wise ops of several stages (softmax, layernorm): every stage in SIMD vectors along
  // its last axis, all of them inside one parallel loop over blocks of rows, so that a row
  // block is read from memory once. Elementwise stages are inlined (recomputed by each
  // reader) or materialized in a temporary that holds only the block's rows (softmax's exp
  // is worth computing once).
  std::vector<ir::Schedule> out;
  for (bool inline_stages : {true, false})
    for (std::int64_t vectors : {2, 4})
      for (std::int64_t rows : {16, 64}) {
        ir::Schedule s = ir::naive_schedule(w_);
        for (size_t i = 0; i < w_.stages.size(); ++i) {
          int stage = static_cast<int>(i);
          ir::StageSchedule& ss = s.stages[i];
          if (inline_stages && ir::can_inline(w_, stage)) {
            ss.reset();
            ss.inline_stage = true;
            continue;
          }
          vector_tiles(ss, stage, vectors);
        }
        s.fuse_rows = rows;
        if (check(s).empty()) out.push_back(s);
      }
  return out;
}

void Space::vector_stage(ir::Schedule& s, int stage) const {
  ir::StageSchedule& ss = s.stages[stage];
  const ir::StageSchedule naive = ss;
  vector_tiles(ss, stage, 2);
  // The leading spatial loops run in parallel, two at most as in the GEMM recipe.
  const auto& axes = w_.stages[stage].axes;
  int spatial = 0;
  for (auto& loop : ss.order) {
    const ir::OrderEntry e = ir::split_order_entry(loop);
    auto axis = std::find_if(axes.begin(), axes.end(), [&](const ir::Axis& a) { return a.name == e.axis; });
    if (spatial == 2 || axis == axes.end() || axis->reduce) break;
    ++spatial;
  }
  const int parallel = t_.threads > 1 ? spatial : 0;
  ss.parallel = parallel;
  if (check(s).empty()) return;
  ss.parallel = 0;  // vectors alone
  if (check(s).empty()) return;
  ss = naive;  // parallel loops alone
  ss.parallel = parallel;
  if (!check(s).empty()) ss = naive;
}

std::vector<std::string> Space::gemm_axes(int stage) const {
  const ir::Stage& st = w_.stages[stage];
  auto spatial = [&](const std::string& v) {
    for (auto& a : st.axes)
      if (a.name == v) return !a.reduce;
    return false;
  };
  // Every spatial axis the stage can compute in SIMD lanes: the contiguous one, and axes
  // read strided only by inputs, which get packed (the output channels of an NCHW conv, also
  // of a strided one, whose only contiguous axis is a filter tap).
  std::vector<std::string> axes;
  for (auto& v : vector_axes(stage))
    if (spatial(v)) axes.push_back(v);
  // A contraction (two or more inputs multiplied) gets the recipe on any such axis; a
  // reduction of one input only when it reduces into vectors of its output's last axis that
  // load without panels (a pooling window, also a strided one; a row reduction such as
  // softmax's max gets the row recipe instead).
  std::string last_lhs;
  for (auto& a : st.axes)
    if (!a.reduce) last_lhs = a.name;
  bool into_contiguous =
      std::find(axes.begin(), axes.end(), last_lhs) != axes.end() && ir::panel_reads(st.rhs, last_lhs).empty();
  if (!st.is_reduction() || (!into_contiguous && inputs_of(stage).size() < 2)) axes.clear();
  return axes;
}

std::vector<ir::Schedule> Space::seeds() const {
  std::vector<ir::Schedule> out;
  if (t_.groups() || t_.vector_lanes <= 1 || w_.stages.empty()) return out;
  // Each stage the GEMM recipe applies to has its variants; a seed takes, for every such
  // stage, its variant of the leading stage's blocking and packing (else of its blocking, else
  // its first), so that like stages (SwiGLU's two projections) are blocked alike. The stages no
  // recipe covers get SIMD vectors and parallel loops (vector_stage): left with the naive
  // schedule's serial scalar loops, a second projection held every seed of a SwiGLU layer at
  // 29 ms against 0.35 for the search's best. Ops with no such stage and several stages get the
  // row recipe.
  const std::size_t n = w_.stages.size();
  std::vector<std::vector<GemmSeed>> variants(n);
  std::size_t lead = 0;  // the stage of the most variants: one seed per variant of it
  for (std::size_t i = 0; i < n; ++i) {
    for (auto& v : gemm_axes(static_cast<int>(i))) gemm_seeds(static_cast<int>(i), v, variants[i]);
    if (variants[i].size() > variants[lead].size()) lead = i;
  }
  // The variant of stage i that goes with the lead's `led`.
  auto partner = [&](std::size_t i, const GemmSeed& led) -> const ir::Schedule& {
    if (i == lead) return led.schedule;
    auto like = [&](bool packing) {
      return std::find_if(variants[i].begin(), variants[i].end(), [&](const GemmSeed& g) {
        return g.blocking == led.blocking && (!packing || g.pack == led.pack);
      });
    };
    auto same = like(true);
    if (same == variants[i].end()) same = like(false);
    return (same == variants[i].end() ? variants[i].front() : *same).schedule;
  };
  std::set<std::string> seen;
  for (const GemmSeed& led : variants[lead]) {
    ir::Schedule s = ir::naive_schedule(w_);
    std::vector<bool> covered(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      if (variants[i].empty()) continue;
      const ir::Schedule& v = partner(i, led);
      s.stages[i] = v.stages[i];
      covered[i] = true;
      if (v.stages[i].fuse_epilogue) {
        s.stages[i + 1] = v.stages[i + 1];
        covered[i + 1] = true;
      }
    }
    for (std::size_t i = 0; i < n; ++i)
      if (!covered[i]) vector_stage(s, static_cast<int>(i));
    if (check(s).empty() && seen.insert(s.to_json()).second) out.push_back(std::move(s));
  }
  return out.empty() && n > 1 ? row_seeds() : out;  // no stage took the GEMM recipe, or no seed passed
}

void Space::gemm_seeds(int stage, const std::string& v, std::vector<GemmSeed>& out) const {
  const ir::Stage& st = w_.stages[stage];
  const auto needed = ir::panel_reads(st.rhs, v);  // packs vectorizing v needs (see vector_axes)
  const ir::Axis* vec = nullptr;
  std::string last_lhs;
  for (auto& a : st.axes) {
    if (a.name == v) vec = &a;
    if (!a.reduce) last_lhs = a.name;
  }
  // Rows: the largest other spatial axis that no vector-read input depends on, so that one
  // broadcast value meets every vector of the row.
  std::vector<const ir::Expr*> reads;
  ir::collect_accesses(st.rhs, reads);
  auto read_along_vector = [&](const std::string& tensor) {
    return std::any_of(reads.begin(), reads.end(),
                       [&](const ir::Expr* r) { return r->name == tensor && ir::access_uses(*r, v); });
  };
  auto in_vector_reads = [&](const std::string& axis) {
    return std::any_of(reads.begin(), reads.end(),
                       [&](const ir::Expr* r) { return ir::access_uses(*r, v) && ir::access_uses(*r, axis); });
  };
  const ir::Axis* rows = nullptr;
  const ir::Axis* deepest = nullptr;  // the longest reduction: blocked for L1
  std::int64_t other_reduction = 1;
  for (auto& a : st.axes) {
    // Ties go to the later axis: its broadcasts are the closer together.
    if (!a.reduce && a.name != v && !in_vector_reads(a.name) && (!rows || a.extent >= rows->extent)) rows = &a;
    if (a.reduce && (!deepest || a.extent > deepest->extent)) deepest = &a;
  }
  for (auto& a : st.axes)
    if (a.reduce && &a != deepest) other_reduction *= a.extent;
  const std::int64_t lanes = t_.vector_lanes;
  const std::int64_t vectors_max = (vec->extent + lanes - 1) / lanes;
  // The widest element the stage reads along the vector axis: narrower than f32 (bf16, int8),
  // its products run as dot-product tiles (or widen on load), which consume a row's vectors
  // from registers.
  std::int64_t element = 0;
  for (const ir::Expr* a : reads)
    for (auto& ix : a->indices)
      if (ix.coeff_of(v) != 0 && w_.buffer_index(a->name) >= 0)
        element = std::max<std::int64_t>(element, ir::dtype_bytes(w_.buffers[w_.buffer_index(a->name)].dtype));
  if (element == 0) element = 4;
  const bool narrow = element < 4;
  // A broadcast read whose index moves with the rows and a reduction axis (a window's taps:
  // I[.., 2 * x + s - 1] with x the rows) reads, at one tap, what a neighbouring row read at
  // another: the compiler keeps such values in registers across the straight-run taps, so the
  // tile needs a register per row beside its accumulators. Counted that way, a ResNet 3 x 3
  // stride-2 conv's 7 x 4 and 14 x 2 tiles (28 accumulators) spilled in their inner loops
  // (1.43 and 1.72 ms) where 7 x 2 did not (1.14 ms; oneDNN blocked 1.1 ms).
  auto moves_with_a_reduction = [&](const auto& ix) {
    return std::any_of(st.axes.begin(), st.axes.end(),
                       [&](const ir::Axis& a) { return a.reduce && ix.coeff_of(a.name) != 0; });
  };
  bool rows_share_broadcasts = false;
  for (auto* r : reads)
    if (rows && !read_along_vector(r->name))
      for (auto& ix : r->indices) rows_share_broadcasts |= ix.coeff_of(rows->name) != 0 && moves_with_a_reduction(ix);
  // Without such rows (every other spatial axis moves a vector read: a depthwise convolution, a
  // pooling window), an axis that a vector read takes as a sliding window with a reduction
  // (I[.., y + r - 1, ..]) still pays as rows: the vectors one row loads at a tap are the next
  // row's at a later tap, and the straight-run taps keep them in registers. Depthwise 3x3 C144
  // 56x56 NCHW on AVX2, tiletune-config-bench: 3 rows of 3 vectors 78.7 us, 1 row 92.8 us.
  auto slides_in_vector_reads = [&](const std::string& axis) {
    for (auto* r : reads)
      if (read_along_vector(r->name))
        for (auto& ix : r->indices)
          if (ix.coeff_of(axis) != 0 && moves_with_a_reduction(ix)) return true;
    return false;
  };
  const bool window_rows = !rows;
  if (window_rows)
    for (auto& a : st.axes)
      if (!a.reduce && a.name != v && slides_in_vector_reads(a.name) && (!rows || a.extent > rows->extent)) rows = &a;
  // Columns: where the vector axis is one vector long (a channel block of one vector, NCHW8c on
  // AVX2), the longest other spatial axis that only vector-read inputs use (the output channel
  // blocks) widens the row instead: reg_cols vectors, each of another block, meet the same
  // broadcast. (Only there: columns over blocks of two vectors are unmeasured, and a row of two
  // vectors along the axis already runs at 0.94x oneDNN on the 1x1 NCHW16c conv.)
  auto in_broadcast_reads = [&](const std::string& axis) {
    return std::any_of(reads.begin(), reads.end(),
                       [&](const ir::Expr* r) { return !read_along_vector(r->name) && ir::access_uses(*r, axis); });
  };
  const ir::Axis* cols = nullptr;
  for (auto& a : st.axes)
    if (vectors_max == 1 && !a.reduce && a.name != v && (!rows || a.name != rows->name) && a.extent > 1 &&
        in_vector_reads(a.name) && !in_broadcast_reads(a.name) && (!cols || a.extent > cols->extent))
      cols = &a;
  // One seed: a register tile of reg_rows rows of reg_v lanes, the deepest reduction in blocks of
  // `block`, in one of two loop structures: the BLAS one (blocks of rows and of the vector axis
  // outside the reduction blocks, several register tiles inside), or the panel-outer one of
  // GotoBLAS (one register-wide panel of the vector axis outermost, a block of rows sweeping it,
  // so the panel's reduction block stays in L1 and the rows' block in L2).
  auto add_seed = [&](std::int64_t reg_v, std::int64_t reg_rows, std::int64_t reg_cols, std::int64_t block,
                      bool panel_outer, Packing pack) {
    ir::Schedule s = ir::naive_schedule(w_);
    ir::StageSchedule& ss = s.stages[stage];
    ss.tile.clear();
    ss.order.clear();
    std::vector<std::pair<std::int64_t, std::string>> spatial;  // (blocks, axis): most blocks first
    for (auto& a : st.axes) {
      if (a.reduce) {
        ss.tile[a.name] = {&a == deepest ? block : a.extent};
      } else if (a.name == v) {
        ss.tile[a.name] = panel_outer ? std::vector<std::int64_t>{reg_v} : two_levels(a.extent, reg_v, reg_v * 4);
      } else if (rows && a.name == rows->name) {
        ss.tile[a.name] = two_levels(a.extent, reg_rows, reg_rows * (panel_outer ? 16 : 8));
      } else if (cols && a.name == cols->name) {
        ss.tile[a.name] = {reg_cols};
      } else {
        ss.tile[a.name] = {1};
      }
      if (!a.reduce) spatial.push_back({(a.extent + ss.tile[a.name][0] - 1) / ss.tile[a.name][0], a.name});
    }
    std::stable_sort(spatial.begin(), spatial.end(), [](auto& x, auto& y) { return x.first > y.first; });
    if (panel_outer) std::stable_partition(spatial.begin(), spatial.end(), [&](auto& x) { return x.second == v; });
    // BLAS order: spatial blocks, then the reduction blocks, then the inner spatial levels.
    for (auto& [blocks, axis] : spatial) ss.order.push_back(axis + ".0");
    for (auto& a : st.axes)
      if (a.reduce) ss.order.push_back(a.name + ".0");
    for (auto& [blocks, axis] : spatial)
      for (size_t l = 1; l < ss.tile[axis].size(); ++l) ss.order.push_back(axis + "." + std::to_string(l));
    ss.vectorize = v;
    ss.parallel = t_.threads > 1 ? std::min<int>(2, static_cast<int>(spatial.size())) : 0;
    ss.unroll = 4;
    // Dot-product tiles consume the vector panel two or four reduction points per
    // instruction, faster than L2's prefetchers bring it: bf16 1024^3 over 6 x 4 vectors ran
    // 2.95 ms without prefetching, 2.69 ms 4 iterations ahead and 2.59 ms 8 ahead.
    if (narrow) ss.prefetch = 8;
    ss.fuse_epilogue = ir::can_fuse_epilogue(w_, stage);
    if (ss.fuse_epilogue) s.stages[stage + 1].reset();
    ss.pack = needed;
    if (pack != Packing::None)
      for (auto& input : inputs_of(stage)) {
        if (std::find(ss.pack.begin(), ss.pack.end(), input) != ss.pack.end()) continue;
        if (pack == Packing::VectorInputs && !read_along_vector(input)) continue;
        ss.pack.push_back(input);
        if (!check(s).empty()) ss.pack.pop_back();
      }
    if (pack != Packing::None && ss.pack.size() == needed.size()) return;
    // Packing all inputs may pack no more than the vector inputs.
    if (std::any_of(out.begin(), out.end(), [&](auto& o) { return o.schedule.to_json() == s.to_json(); })) return;
    // The other stages keep the naive schedule's loops here; seeds() covers them.
    if (!check(s).empty()) return;
    // The blocking, in terms any stage can share (the SIMD axis by its role).
    const std::string blocking = std::string(v == last_lhs ? "contiguous" : "strided") + " " + std::to_string(reg_v) +
                                 "x" + std::to_string(reg_rows) + "x" + std::to_string(reg_cols) +
                                 (panel_outer ? " panel-outer" : " blas");
    out.push_back({blocking, static_cast<int>(pack), s});
  };
  // A block of the deepest reduction is never smaller than a cache line of a broadcast input
  // that runs along it contiguously: every block would fetch the lines again, each time using
  // a part. The channels of an NCHW16c conv's input are such an input, and blocking them for
  // the filter's panel to fit L1 cost more than the panel streaming from L2 (ResNet 3 x 3
  // stride-2 C128 K128 on AVX-512, 7 x 2 vectors, same run: c in blocks of 4 650 us, whole 611).
  std::int64_t line_points = 1;  // reduction points in one such line
  for (const ir::Expr* r : reads) {
    const int b = w_.buffer_index(r->name);
    if (b >= 0 && !read_along_vector(r->name) && !r->indices.empty() && r->indices.back().coeff_of(deepest->name) == 1)
      line_points = std::max(line_points, ir::kCacheLineBytes / ir::dtype_bytes(w_.buffers[b].dtype));
  }
  for (std::int64_t vectors : {2, 3, 4}) {
    // Past one vector along the axis, a row's further vectors are columns where there are any.
    const std::int64_t reg_cols = cols ? std::min<std::int64_t>(vectors, cols->extent) : 1;
    if (vectors > vectors_max && vectors > 2 && reg_cols == 1) continue;
    const std::int64_t reg_v = std::min(vectors, vectors_max) * lanes;
    const std::int64_t nv = std::min(vectors, vectors_max) * reg_cols;  // vectors in a row
    // A target without registers for one row of accumulators beside a row of vectors and a
    // broadcast gets no seed of this width.
    if (t_.vector_registers - 1 - nv < nv) continue;
    // As many rows as check_schedule allows (accumulators up to the registers less 4): FMAs take
    // the row's vectors from L1 as memory operands, so they need no registers of their own
    // (conv 3x3 C64 K64 56x56 over 4 vectors of k: 3 rows 1.65 ms, 2 rows 1.86 ms).
    // Narrow operands keep the row's vectors and the broadcast in registers beside the
    // accumulators: 7 x 4 vectors spilled (bf16 1024^3 3.56 ms, int8 2.62 ms against 2.76 and
    // 1.39 ms for 6 x 4).
    std::int64_t free_registers = narrow ? t_.vector_registers - 1 - nv : t_.vector_registers - 4;
    const std::int64_t plain_rows = rows ? std::min<std::int64_t>(free_registers / nv, rows->extent) : 1;
    // Rows that share broadcasts: rows * nv accumulators, a broadcast per row, a row of vectors.
    // Where that leaves fewer rows than the plain count, both are seeds, the plain one in the
    // BLAS structure only: with 16 registers the compiler reloads the shared values instead
    // (conv 3x3 pad 1 C64 K64 56x56 NCHW16c on AVX2, tiletune-config-bench, same run: 6 rows of 2
    // vectors 1767 us, the 4 rows counted with shared broadcasts 2577 us).
    std::vector<std::int64_t> row_counts = {plain_rows};
    if (rows_share_broadcasts) {
      row_counts[0] = std::min(plain_rows, (t_.vector_registers - nv - 1) / (nv + 1));
      if (plain_rows > row_counts[0]) row_counts.push_back(plain_rows);
    }
    for (std::int64_t reg_rows : row_counts) {
      const bool extra = reg_rows != row_counts.front();
      // A window's rows: their accumulators, a row of loaded vectors, a broadcast and two to spare
      // for the loads shared across taps; 4 rows of 2 vectors ran as 3 of 3 (81.0 us), 2 rows of 4
      // as 1 row (92.6 us; the depthwise above, same run).
      if (window_rows) reg_rows = std::min<std::int64_t>({reg_rows, 4, (t_.vector_registers - nv - 3) / nv});
      if (reg_rows < 1) continue;  // not even one row of accumulators fits
      reg_rows = std::min<std::int64_t>(reg_rows, 12);
      // On a short axis a row count that divides it saves an edge tile (a second, smaller
      // register tile, and its compile time), but fewer rows than one below the most leave FMA
      // latency uncovered: conv 1x1 K64 C256 over 56 x 56 ran 6 x 2 vectors (one edge tile of 4
      // rows) in 0.76 ms, 4 x 2 in 1.04 ms. Where the taps hold the rows' broadcasts the most
      // rows are few, and the divisor may be two below: the stride-2 conv's 28 columns in 7 x 2
      // tiles ran as fast as in 10 x 2 with an edge tile of 8 rows (1.40 and 1.35 ms, one run),
      // and compile in 1.1-1.8 s instead of 2.1-2.4 s.
      const std::int64_t fewest = reg_rows - (rows_share_broadcasts && !extra ? 2 : 1);
      if (rows && !window_rows && rows->extent < 16 * reg_rows)
        for (std::int64_t r = reg_rows; r >= fewest && r > 0; --r)
          if (rows->extent % r == 0) {
            reg_rows = r;
            break;
          }
      // The vector input's panel for one reduction block: block * other reductions * reg_v floats
      // in three quarters of L1 (the broadcast rows stream through the rest).
      // An output that is not contiguous along v is gathered and scattered per block: one block.
      // (A panel of bytes: an int8 operand's holds four times the reduction points of an f32 one.)
      std::int64_t block = deepest->extent;
      while (v == last_lhs && block > 4 && block / 2 >= line_points &&
             block * other_reduction * reg_v * reg_cols * element > t_.l1_bytes * 3 / 4)
        block /= 2;
      for (bool panel_outer : {false, true}) {
        if (extra && panel_outer) continue;
        for (Packing pack : {Packing::None, Packing::VectorInputs, Packing::All})
          add_seed(reg_v, reg_rows, reg_cols, block, panel_outer, pack);
      }
    }
  }
}

}  // namespace tiletune::tuner
