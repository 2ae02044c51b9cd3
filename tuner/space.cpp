#include "tuner/space.hpp"

#include <algorithm>
#include <numeric>
#include <map>

namespace tiletune::tuner {

namespace {

//! Which inputs a seed config packs.
enum class Packing { None, VectorInputs, All };

template <typename T>
const T& pick(const std::vector<T>& v, Rng& rng) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

bool coin(Rng& rng, double p = 0.5) { return std::bernoulli_distribution(p)(rng); }

std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

constexpr int kTries = 200;

//! Clears every knob of a stage, keeping its name.
void reset(ir::StageSchedule& ss) {
  std::string name = ss.stage;
  ss = ir::StageSchedule();
  ss.stage = name;
}

//! The tile sizes of an axis blocked by `reg` inside blocks of at most `most` points.
std::vector<std::int64_t> two_levels(std::int64_t extent, std::int64_t reg, std::int64_t most) {
  std::int64_t outer = std::min(round_up(extent, reg), most);
  return outer > reg ? std::vector<std::int64_t>{outer, reg} : std::vector<std::int64_t>{reg};
}

}  // namespace

Space::Space(const ir::Workload& w, const ir::TargetTraits& t) : w_(w), t_(t) {}

std::string Space::check(const ir::Schedule& s) const { return ir::check_schedule(w_, s, t_); }

bool Space::absorbed(const ir::Schedule& s, int stage) const {
  return s.stages[stage].inline_stage || (stage > 0 && s.stages[stage - 1].fuse_epilogue);
}

//! Tile sizes of one axis, outermost first, ending in `reg` (the register or micro-kernel
//! block): each level a power-of-two multiple of the next, up to the axis extent.
std::vector<std::int64_t> Space::sample_tile(const ir::Axis& a, std::int64_t reg, Rng& rng) const {
  std::vector<std::int64_t> sizes{reg};
  int extra = std::uniform_int_distribution<int>(0, 2)(rng);
  for (int l = 0; l < extra; ++l) {
    std::int64_t inner = sizes.front();
    if (inner >= a.extent) break;
    std::vector<std::int64_t> options;
    for (std::int64_t f = 2; f <= 64 && inner * f <= round_up(a.extent, inner); f *= 2) options.push_back(inner * f);
    if (options.empty()) break;
    sizes.insert(sizes.begin(), pick(options, rng));
  }
  return sizes;
}

void Space::sample_order(ir::StageSchedule& ss, int stage, Rng& rng) const {
  // A random interleaving of the tile loops that keeps each axis's levels outermost first.
  std::vector<std::string> slots;
  for (auto& a : w_.stages[stage].axes)
    for (size_t l = 0; l < ss.tile[a.name].size(); ++l) slots.push_back(a.name);
  std::shuffle(slots.begin(), slots.end(), rng);
  auto is_reduce = [&](const std::string& axis) {
    for (auto& a : w_.stages[stage].axes)
      if (a.name == axis) return a.reduce;
    return false;
  };
  double shape = std::uniform_real_distribution<double>(0, 1)(rng);
  if (shape < 0.4) {
    // Blocked like a BLAS: the first level of the spatial axes outermost, then the first
    // level of the reductions, then the rest.
    std::map<std::string, int> seen;
    auto rank = [&](const std::string& axis, int occurrence) { return occurrence > 0 ? 2 : is_reduce(axis) ? 1 : 0; };
    std::vector<std::pair<int, std::string>> ranked;
    for (auto& axis : slots) ranked.push_back({rank(axis, seen[axis]++), axis});
    std::stable_sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = ranked[i].second;
  } else if (shape < 0.7) {
    std::stable_partition(slots.begin(), slots.end(), [&](const std::string& axis) { return !is_reduce(axis); });
  }
  std::map<std::string, int> level;
  ss.order.clear();
  for (auto& axis : slots) ss.order.push_back(axis + "." + std::to_string(level[axis]++));
  // The first loops of spatial level 0 may run in parallel.
  int leading = 0;
  for (auto& l : ss.order) {
    std::string axis = l.substr(0, l.rfind('.'));
    bool reduce = false;
    for (auto& a : w_.stages[stage].axes)
      if (a.name == axis) reduce = a.reduce;
    if (reduce || l != axis + ".0") break;
    ++leading;
  }
  ss.parallel = (t_.threads > 1 && leading > 0) ? std::uniform_int_distribution<int>(coin(rng, 0.8) ? 1 : 0, std::min(leading, 2))(rng) : 0;
}

void Space::sample_group_loops(ir::StageSchedule& ss, int stage, Rng& rng) const {
  // On a work-group device a spatial axis tiles {items * reg, reg}: `reg` points per
  // work-item in registers, `items` work-items along it per group; a reduction axis steps by
  // one tile (what a staged input holds) and loops inside it.
  const ir::Stage& st = w_.stages[stage];
  ss.tile.clear();
  ss.vectorize.clear();
  // Vectors along the innermost left-hand axis, in whole vectors (check_schedule's rule).
  for (auto& name : ir::vectorizable_axes(w_, stage))
    for (auto& a : st.axes)
      if (a.name == name && !a.reduce && t_.vector_lanes > 1 && a.extent % t_.vector_lanes == 0 && ss.vectorize.empty() &&
          coin(rng, 0.6))
        ss.vectorize = a.name;
  std::int64_t items = 1, points = 1;
  std::int64_t max_items = std::min(t_.max_group_size, 256);
  std::vector<const ir::Axis*> axes;
  for (auto& a : st.axes) axes.push_back(&a);
  std::shuffle(axes.begin(), axes.end(), rng);
  for (const ir::Axis* a : axes) {
    if (a->reduce) {
      std::vector<std::int64_t> steps{a->extent};
      for (std::int64_t k : {1, 2, 4, 8, 16, 32, 64})
        if (k < a->extent) steps.push_back(k);
      ss.tile[a->name] = {pick(steps, rng)};
      continue;
    }
    std::vector<std::int64_t> regs, counts;
    for (std::int64_t r : {1, 1, 2, 4, 8})
      if (points * r <= 64 && r <= a->extent) regs.push_back(r);
    if (a->name == ss.vectorize) regs = {t_.vector_lanes, t_.vector_lanes, 2 * t_.vector_lanes};
    if (regs.empty()) regs = {1};
    std::int64_t reg = pick(regs, rng);
    for (std::int64_t n : {1, 2, 4, 8, 16, 32, 64, 128, 256})
      if (items * n <= max_items && reg * n < 2 * a->extent) counts.push_back(n);
    std::int64_t n = counts.empty() ? 1 : pick(counts, rng);
    points *= reg;
    items *= n;
    ss.tile[a->name] = {reg * n, reg};
  }
  sample_order(ss, stage, rng);
  ss.parallel = 0;
  ss.unroll = pick(std::vector<int>{0, 0, 2, 4, 8}, rng);
}

std::vector<std::string> Space::vector_axes(int stage) const {
  const ir::Stage& st = w_.stages[stage];
  auto axes = ir::vectorizable_axes(w_, stage);
  if (t_.groups()) return axes;
  for (auto& a : st.axes) {
    auto strided = ir::strided_reads(st.rhs, a.name);
    if (a.reduce || strided.empty()) continue;
    if (std::all_of(strided.begin(), strided.end(), [&](const std::string& t) {
          return w_.buffers[w_.buffer_index(t)].role == ir::Buffer::Role::Input &&
                 ir::vector_panels_problem(st.rhs, t, a.name).empty();
        }))
      axes.push_back(a.name);
  }
  return axes;
}

void Space::sample_loops(ir::StageSchedule& ss, int stage, Rng& rng) const {
  if (t_.groups()) return sample_group_loops(ss, stage, rng);
  const ir::Stage& st = w_.stages[stage];
  ss.tile.clear();
  auto axes = vector_axes(stage);
  ss.vectorize = (t_.vector_lanes > 1 && !axes.empty() && coin(rng, 0.85)) ? pick(axes, rng) : "";
  ss.pack = ss.vectorize.empty() ? std::vector<std::string>{} : ir::strided_reads(st.rhs, ss.vectorize);
  bool vec_reduce = false;
  for (auto& a : st.axes)
    if (a.name == ss.vectorize) vec_reduce = a.reduce;
  std::int64_t budget = ss.vectorize.empty() ? 64 : vec_reduce ? t_.vector_registers - 4 : (t_.vector_registers - 4) * t_.vector_lanes;
  std::int64_t points = 1;
  // Register blocks: the vector axis first, then the other spatial axes within the budget.
  std::vector<const ir::Axis*> order;
  for (auto& a : st.axes)
    if (a.name != ss.vectorize) order.push_back(&a);
  std::shuffle(order.begin(), order.end(), rng);  // which axis gets the registers left is a choice too
  for (auto& a : st.axes)
    if (a.name == ss.vectorize) order.insert(order.begin(), &a);
  for (const ir::Axis* a : order) {
    std::int64_t reg = 1;
    if (a->name == ss.vectorize && !a->reduce) {
      std::int64_t lanes = t_.vector_lanes;
      reg = lanes * pick(std::vector<std::int64_t>{1, 2, 2, 3, 4, 4}, rng);
      reg = std::min(reg, std::max(lanes, round_up(a->extent, lanes)));
    } else if (a->reduce) {
      std::vector<std::int64_t> blocks{a->extent};
      for (std::int64_t b : {4, 8, 16, 32, 64, 128, 128, 256, 256, 512})
        if (b < a->extent) blocks.push_back(b);
      reg = pick(blocks, rng);
      if (a->name == ss.vectorize) reg = round_up(reg, t_.vector_lanes);
    } else {
      std::vector<std::int64_t> options;
      for (std::int64_t r : {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14})
        if (points * r <= budget && r <= a->extent) options.push_back(r);
      // Half the time fill the registers that are left: outer-product tiles want them all.
      reg = options.empty() ? 1 : coin(rng) ? options.back() : pick(options, rng);
    }
    if (!a->reduce) points *= reg;
    ss.tile[a->name] = sample_tile(*a, reg, rng);
  }
  sample_order(ss, stage, rng);
  ss.unroll = pick(std::vector<int>{0, 0, 2, 4, 8}, rng);
  ss.prefetch = st.is_reduction() ? pick(std::vector<int>{0, 0, 0, 2, 8, 16}, rng) : 0;
}

std::vector<std::string> Space::inputs_of(int stage) const {
  std::vector<std::string> names;
  std::vector<const ir::Expr*> accesses;
  ir::collect_accesses(w_.stages[stage].rhs, accesses);
  for (const ir::Expr* e : accesses) {
    int b = w_.buffer_index(e->name);
    if (w_.buffers[b].role == ir::Buffer::Role::Input && std::find(names.begin(), names.end(), e->name) == names.end())
      names.push_back(e->name);
  }
  return names;
}

void Space::sample_packs(ir::Schedule& s, int stage, Rng& rng) const {
  auto& pack = s.stages[stage].pack;
  pack.clear();
  if (!s.stages[stage].vectorize.empty()) pack = ir::strided_reads(w_.stages[stage].rhs, s.stages[stage].vectorize);
  for (auto& name : inputs_of(stage)) {
    if (std::find(pack.begin(), pack.end(), name) != pack.end() || !coin(rng)) continue;
    pack.push_back(name);
    if (!check(s).empty()) pack.pop_back();
  }
}

void Space::sample_fuse_rows(ir::Schedule& s, Rng& rng) const {
  ir::Schedule fused = s;
  std::int64_t rows = 1;
  for (size_t i = 0; i < w_.stages.size(); ++i) {
    if (absorbed(fused, static_cast<int>(i)) || w_.stages[i].axes.empty()) continue;
    auto& ss = fused.stages[i];
    rows = std::lcm(rows, ss.tile.at(w_.stages[i].axes[0].name).front());
    ss.parallel = 0;
    ss.pack.clear();
  }
  fused.fuse_rows = rows << std::uniform_int_distribution<int>(0, 4)(rng);
  if (check(fused).empty()) s = fused;
}

ir::Schedule Space::sample(Rng& rng) const {
  for (int attempt = 0; attempt < kTries; ++attempt) {
    ir::Schedule s;
    for (size_t i = 0; i < w_.stages.size(); ++i) {
      ir::StageSchedule ss;
      ss.stage = w_.stages[i].name;
      s.stages.push_back(ss);
    }
    for (size_t i = 0; i < w_.stages.size(); ++i) {
      int stage = static_cast<int>(i);
      if (stage > 0 && s.stages[i - 1].fuse_epilogue) continue;
      if (ir::can_inline(w_, stage) && coin(rng, 0.5)) {
        s.stages[i].inline_stage = true;
        continue;
      }
      sample_loops(s.stages[i], stage, rng);
      s.stages[i].fuse_epilogue = ir::can_fuse_epilogue(w_, stage) && coin(rng, 0.7);
    }
    if (!check(s).empty()) continue;
    for (size_t i = 0; i < w_.stages.size(); ++i)
      if (!absorbed(s, static_cast<int>(i))) sample_packs(s, static_cast<int>(i), rng);
    if (w_.stages.size() > 1 && !t_.groups() && coin(rng)) sample_fuse_rows(s, rng);
    if (check(s).empty()) return s;
  }
  return ir::naive_schedule(w_);
}

ir::Schedule Space::mutate(const ir::Schedule& s, Rng& rng) const {
  for (int attempt = 0; attempt < kTries; ++attempt) {
    ir::Schedule m = s;
    int stage = std::uniform_int_distribution<int>(0, static_cast<int>(w_.stages.size()) - 1)(rng);
    if (m.stages[stage].inline_stage) {  // un-inline: compute it in its own loops
      m.stages[stage].inline_stage = false;
      sample_loops(m.stages[stage], stage, rng);
      if (check(m).empty()) return m;
      continue;
    }
    if (absorbed(m, stage)) continue;
    ir::StageSchedule& ss = m.stages[stage];
    const ir::Stage& st = w_.stages[stage];
    switch (std::uniform_int_distribution<int>(0, 7)(rng)) {
      case 7: {  // all stages in row blocks, or not
        if (m.fuse_rows > 0) m.fuse_rows = 0;
        else if (w_.stages.size() > 1) sample_fuse_rows(m, rng);
        else continue;
        break;
      }
      case 6: {  // pack a different set of inputs
        if (!check(m).empty()) continue;
        sample_packs(m, stage, rng);
        break;
      }
      case 0: {  // one axis's tile sizes, keeping its register block
        if (t_.groups()) {
          sample_group_loops(ss, stage, rng);
          break;
        }
        const ir::Axis& a = pick(st.axes, rng);
        auto& sizes = ss.tile[a.name];
        std::int64_t reg = sizes.back();
        if (coin(rng) && a.name != ss.vectorize) {
          std::vector<std::int64_t> regs{1, 2, 3, 4, 6, 8, 16, 32, 64, 128};
          reg = std::min<std::int64_t>(pick(regs, rng), a.extent);
        }
        sizes = sample_tile(a, reg, rng);
        sample_order(ss, stage, rng);
        break;
      }
      case 1: {  // swap two neighbouring loops
        if (ss.order.size() < 2) continue;
        size_t i = std::uniform_int_distribution<size_t>(0, ss.order.size() - 2)(rng);
        std::swap(ss.order[i], ss.order[i + 1]);
        break;
      }
      case 2:  // the micro-kernel's reduction loop: its unrolling or its prefetch distance
        if (coin(rng) || !st.is_reduction() || t_.groups()) ss.unroll = pick(std::vector<int>{0, 2, 4, 8, 16}, rng);
        else ss.prefetch = pick(std::vector<int>{0, 2, 4, 8, 16, 32}, rng);
        break;
      case 3: ss.parallel = std::uniform_int_distribution<int>(0, 2)(rng); break;
      case 4: {  // resample the whole stage
        bool fuse = ss.fuse_epilogue;
        sample_loops(ss, stage, rng);
        ss.fuse_epilogue = fuse;
        break;
      }
      case 5: {  // structure: fuse or inline differently
        if (ir::can_fuse_epilogue(w_, stage)) {
          ss.fuse_epilogue = !ss.fuse_epilogue;
          if (!ss.fuse_epilogue) sample_loops(m.stages[stage + 1], stage + 1, rng);
          else reset(m.stages[stage + 1]);
        } else if (ir::can_inline(w_, stage)) {
          ss.inline_stage = true;
          ss.tile.clear();
          ss.order.clear();
          ss.vectorize.clear();
          ss.unroll = ss.parallel = ss.prefetch = 0;
          ss.fuse_epilogue = false;
        } else {
          continue;
        }
        break;
      }
    }
    if (check(m).empty() && m.key() != s.key()) return m;
  }
  return s;
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
            reset(ss);
            ss.inline_stage = true;
            continue;
          }
          auto axes = ir::vectorizable_axes(w_, stage);
          if (axes.empty()) continue;
          ss.vectorize = axes.front();
          for (auto& a : w_.stages[i].axes) {
            // A reduction along the row runs its whole length in one vector: one horizontal
            // combine per row instead of one per block (0.81 against 0.96 ms on softmax 4096x1024).
            std::int64_t whole = round_up(a.extent, t_.vector_lanes);
            std::int64_t reg = a.name != ss.vectorize ? 1 : a.reduce ? whole : std::min(vectors * t_.vector_lanes, whole);
            ss.tile[a.name] = {reg};
          }
          ss.unroll = 0;
        }
        s.fuse_rows = rows;
        if (check(s).empty()) out.push_back(s);
      }
  return out;
}

std::vector<ir::Schedule> Space::seeds() const {
  std::vector<ir::Schedule> out;
  if (t_.groups() || t_.vector_lanes <= 1 || w_.stages.empty()) return out;
  // The GEMM recipe wants a first stage that reduces into vectors of its innermost output
  // axis; other ops of several stages get the row recipe.
  auto otherwise = [&] { return w_.stages.size() > 1 ? row_seeds() : out; };
  const ir::Stage& st = w_.stages[0];
  auto spatial = [&](const std::string& v) {
    for (auto& a : st.axes)
      if (a.name == v) return !a.reduce;
    return false;
  };
  auto contiguous = ir::vectorizable_axes(w_, 0);
  if (!st.is_reduction() || contiguous.empty() || !spatial(contiguous.front())) return otherwise();
  // Every spatial axis the stage can compute in SIMD lanes: the contiguous one, and axes
  // read strided only by inputs, which get packed (the output channels of an NCHW conv).
  for (auto& v : vector_axes(0))
    if (spatial(v)) gemm_seeds(v, out);
  return out;
}

void Space::gemm_seeds(const std::string& v, std::vector<ir::Schedule>& out) const {
  const ir::Stage& st = w_.stages[0];
  const auto needed = ir::strided_reads(st.rhs, v);  // packs vectorizing v needs (see vector_axes)
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
    for (auto* r : reads)
      if (r->name == tensor)
        for (auto& ix : r->indices)
          if (ix.coeff_of(v) != 0) return true;
    return false;
  };
  auto in_vector_reads = [&](const std::string& axis) {
    for (auto* r : reads) {
      bool along = false, uses = false;
      for (auto& ix : r->indices) {
        along |= ix.coeff_of(v) != 0;
        uses |= ix.coeff_of(axis) != 0;
      }
      if (along && uses) return true;
    }
    return false;
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
  for (std::int64_t vectors : {2, 3, 4}) {
    if (vectors > vectors_max && vectors > 2) continue;
    std::int64_t nv = std::min(vectors, vectors_max);
    // Registers: rows x nv accumulators, one row of nv vectors and one broadcast.
    if (t_.vector_registers - 1 - nv < nv) continue;  // no registers left for rows
    std::int64_t reg_v = nv * lanes;
    std::int64_t reg_rows = rows ? std::min<std::int64_t>((t_.vector_registers - 1 - nv) / nv, rows->extent) : 1;
    reg_rows = std::min<std::int64_t>(reg_rows, 12);
    // On a short axis a row count that divides it saves an edge tile that would cost much.
    if (rows && rows->extent < 16 * reg_rows)
      for (std::int64_t r = reg_rows; r > reg_rows / 2; --r)
        if (rows->extent % r == 0) {
          reg_rows = r;
          break;
        }
    // The vector input's panel for one reduction block: block * other reductions * reg_v floats
    // in three quarters of L1 (the broadcast rows stream through the rest).
    // An output that is not contiguous along v is gathered and scattered per block: one block.
    std::int64_t block = deepest->extent;
    while (v == last_lhs && block > 4 && block * other_reduction * reg_v * 4 > t_.l1_bytes * 3 / 4) block /= 2;
    // Two loop structures: the BLAS one (blocks of rows and of the vector axis outside the
    // reduction blocks, several register tiles inside), and the panel-outer one of GotoBLAS
    // (one register-wide panel of the vector axis outermost, a block of rows sweeping it, so
    // the panel's reduction block stays in L1 and the rows' block in L2).
    for (bool panel_outer : {false, true})
      for (Packing pack : {Packing::None, Packing::VectorInputs, Packing::All}) {
        ir::Schedule s = ir::naive_schedule(w_);
        ir::StageSchedule& ss = s.stages[0];
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
          } else {
            ss.tile[a.name] = {1};
          }
          if (!a.reduce) spatial.push_back({(a.extent + ss.tile[a.name][0] - 1) / ss.tile[a.name][0], a.name});
        }
        std::stable_sort(spatial.begin(), spatial.end(), [](auto& x, auto& y) { return x.first > y.first; });
        if (panel_outer)
          std::stable_partition(spatial.begin(), spatial.end(), [&](auto& x) { return x.second == v; });
        // BLAS order: spatial blocks, then the reduction blocks, then the inner spatial levels.
        for (auto& [blocks, axis] : spatial) ss.order.push_back(axis + ".0");
        for (auto& a : st.axes)
          if (a.reduce) ss.order.push_back(a.name + ".0");
        for (auto& [blocks, axis] : spatial)
          for (size_t l = 1; l < ss.tile[axis].size(); ++l) ss.order.push_back(axis + "." + std::to_string(l));
        ss.vectorize = v;
        ss.parallel = t_.threads > 1 ? std::min<int>(2, static_cast<int>(spatial.size())) : 0;
        ss.unroll = 4;
        ss.fuse_epilogue = ir::can_fuse_epilogue(w_, 0);
        if (ss.fuse_epilogue) reset(s.stages[1]);
        ss.pack = needed;
        if (pack != Packing::None)
          for (auto& input : inputs_of(0)) {
            if (std::find(ss.pack.begin(), ss.pack.end(), input) != ss.pack.end()) continue;
            if (pack == Packing::VectorInputs && !read_along_vector(input)) continue;
            ss.pack.push_back(input);
            if (!check(s).empty()) ss.pack.pop_back();
          }
        if (pack != Packing::None && ss.pack.size() == needed.size()) continue;
        // Packing all inputs may pack no more than the vector inputs.
        if (std::any_of(out.begin(), out.end(), [&](auto& o) { return o.to_json() == s.to_json(); })) continue;
        // Later stages that the recipe does not cover keep the naive schedule's loops.
        if (check(s).empty()) out.push_back(s);
      }
  }
}

ir::Schedule Space::crossover(const ir::Schedule& a, const ir::Schedule& b, Rng& rng) const {
  for (int attempt = 0; attempt < 20; ++attempt) {
    ir::Schedule c = a;
    for (size_t i = 0; i < c.stages.size(); ++i)
      if (coin(rng)) c.stages[i] = b.stages[i];
    if (check(c).empty()) return c;
  }
  return mutate(a, rng);
}

}  // namespace tiletune::tuner
