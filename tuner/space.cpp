#include "tuner/space.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include "ir/knobs.hpp"
#include "tuner/space_util.hpp"

namespace tiletune::tuner {

namespace {

template <typename T>
const T& pick(const std::vector<T>& v, Rng& rng) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

constexpr std::int64_t kAny = std::numeric_limits<std::int64_t>::max();

//! A value of the knob drawn by its weights among its choices in [lo, hi]; `fallback` when
//! none is.
std::int64_t draw(const ir::Knob& k, Rng& rng, std::int64_t lo = 0, std::int64_t hi = kAny, std::int64_t fallback = 0) {
  auto choices = k.choices_in(lo, hi);
  if (choices.empty()) return fallback;
  std::vector<double> weights;
  for (auto& c : choices) weights.push_back(c.weight);
  return choices[std::discrete_distribution<size_t>(weights.begin(), weights.end())(rng)].value;
}

//! Whether a coin knob (choices 1 and 0) comes up 1.
bool flip(const ir::Knob& k, Rng& rng) { return draw(k, rng) == 1; }

//! The largest choice of the knob in [lo, hi]; `fallback` when none is.
std::int64_t largest(const ir::Knob& k, std::int64_t lo, std::int64_t hi, std::int64_t fallback) {
  std::int64_t best = fallback;
  bool any = false;
  for (auto& c : k.choices_in(lo, hi))
    if (!any || c.value > best) best = c.value, any = true;
  return best;
}

//! The block of a reduction axis drawn from `k`, whose choice 0 means the whole axis.
std::int64_t draw_reduce_block(const ir::Knob& k, const ir::Axis& a, Rng& rng) {
  std::int64_t b = draw(k, rng, 0, a.extent - 1);
  return b == 0 ? a.extent : b;
}

bool coin(Rng& rng, double p = 0.5) { return std::bernoulli_distribution(p)(rng); }

constexpr int kTries = 200;

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
  std::int64_t levels = draw(ir::knobs::tile_levels, rng, 1);
  while (static_cast<std::int64_t>(sizes.size()) < levels) {
    std::int64_t inner = sizes.front();
    if (inner >= a.extent) break;
    std::int64_t f = draw(ir::knobs::tile_factor, rng, 2, round_up(a.extent, inner) / inner);
    if (f == 0) break;
    sizes.insert(sizes.begin(), inner * f);
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
  std::int64_t shape = draw(ir::knobs::order, rng);
  if (shape == 0) {
    // Blocked like a BLAS: the first level of the spatial axes outermost, then the first
    // level of the reductions, then the rest.
    std::map<std::string, int> seen;
    auto rank = [&](const std::string& axis, int occurrence) { return occurrence > 0 ? 2 : is_reduce(axis) ? 1 : 0; };
    std::vector<std::pair<int, std::string>> ranked;
    for (auto& axis : slots) ranked.push_back({rank(axis, seen[axis]++), axis});
    std::stable_sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = ranked[i].second;
  } else if (shape == 1) {
    std::stable_partition(slots.begin(), slots.end(), [&](const std::string& axis) { return !is_reduce(axis); });
  }
  std::map<std::string, int> level;
  ss.order.clear();
  for (auto& axis : slots) ss.order.push_back(axis + "." + std::to_string(level[axis]++));
  // The first loops of spatial level 0 may run in parallel.
  int leading = 0;
  for (auto& l : ss.order) {
    const ir::OrderEntry entry = ir::split_order_entry(l);
    bool reduce = false;
    for (auto& a : w_.stages[stage].axes)
      if (a.name == entry.axis) reduce = a.reduce;
    if (reduce || !entry.is_level(0)) break;
    ++leading;
  }
  ss.parallel = t_.threads > 1 ? static_cast<int>(draw(ir::knobs::parallel, rng, 0, leading)) : 0;
}

void Space::sample_group_loops(ir::StageSchedule& ss, int stage, Rng& rng) const {
  // On a work-group device a spatial axis tiles {items * reg, reg}: `reg` points per
  // work-item in registers, `items` work-items along it per group; a reduction axis steps by
  // one tile (what a staged input holds) and loops inside it.
  const ir::Stage& st = w_.stages[stage];
  ss.tile.clear();
  ss.vectorize.clear();
  // Vectors along the innermost left-hand axis, in whole vectors (check_schedule's rule).
  std::vector<std::string> vectorizable;
  for (auto& name : ir::vectorizable_axes(w_, stage))
    for (auto& a : st.axes)
      if (a.name == name && !a.reduce && t_.vector_lanes > 1 && a.extent % t_.vector_lanes == 0)
        vectorizable.push_back(a.name);
  if (!vectorizable.empty() && flip(ir::knobs::vectorize, rng)) ss.vectorize = pick(vectorizable, rng);
  std::int64_t items = 1, points = 1;
  std::int64_t max_items = std::min(t_.max_group_size, 256);
  std::vector<const ir::Axis*> axes;
  for (auto& a : st.axes) axes.push_back(&a);
  std::shuffle(axes.begin(), axes.end(), rng);
  for (const ir::Axis* a : axes) {
    if (a->reduce) {
      ss.tile[a->name] = {draw_reduce_block(ir::knobs::group_reduce, *a, rng)};
      continue;
    }
    std::int64_t reg = a->name == ss.vectorize
                           ? t_.vector_lanes * draw(ir::knobs::group_item, rng, 1, 2, 1)
                           : draw(ir::knobs::group_item, rng, 1, std::min(64 / points, a->extent), 1);
    std::int64_t n = draw(ir::knobs::group_items, rng, 1, std::min(max_items / items, (2 * a->extent - 1) / reg), 1);
    points *= reg;
    items *= n;
    ss.tile[a->name] = {reg * n, reg};
  }
  sample_order(ss, stage, rng);
  ss.parallel = 0;
  ss.unroll = static_cast<int>(draw(ir::knobs::unroll, rng));
}

std::vector<std::string> Space::vector_axes(int stage) const {
  const ir::Stage& st = w_.stages[stage];
  auto axes = ir::vectorizable_axes(w_, stage);
  if (t_.groups()) return axes;
  for (auto& a : st.axes) {
    if (a.reduce || ir::strided_reads(st.rhs, a.name).empty()) continue;
    auto strided = ir::panel_reads(st.rhs, a.name);  // strided rows of windows need no panels
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
  ss.vectorize = (t_.vector_lanes > 1 && !axes.empty() && flip(ir::knobs::vectorize, rng)) ? pick(axes, rng) : "";
  ss.pack = ss.vectorize.empty() ? std::vector<std::string>{} : ir::panel_reads(st.rhs, ss.vectorize);
  bool vec_reduce = false;
  for (auto& a : st.axes)
    if (a.name == ss.vectorize) vec_reduce = a.reduce;
  std::int64_t budget = ss.vectorize.empty() ? 64
                        : vec_reduce         ? t_.vector_registers - 4
                                             : (t_.vector_registers - 4) * t_.vector_lanes;
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
      reg = lanes * draw(ir::knobs::tile_vectors, rng, 1);
      reg = std::min(reg, std::max(lanes, round_up(a->extent, lanes)));
    } else if (a->reduce) {
      reg = draw_reduce_block(ir::knobs::tile_reduce, *a, rng);
      if (a->name == ss.vectorize) reg = round_up(reg, t_.vector_lanes);
    } else {
      std::int64_t most = std::min(budget / points, a->extent);
      // Half the time fill the registers that are left: outer-product tiles want them all.
      reg = coin(rng) ? largest(ir::knobs::tile_rows, 1, most, 1) : draw(ir::knobs::tile_rows, rng, 1, most, 1);
    }
    if (!a->reduce) points *= reg;
    ss.tile[a->name] = sample_tile(*a, reg, rng);
  }
  sample_order(ss, stage, rng);
  ss.unroll = static_cast<int>(draw(ir::knobs::unroll, rng));
  ss.prefetch = st.is_reduction() ? static_cast<int>(draw(ir::knobs::prefetch, rng)) : 0;
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
  if (!s.stages[stage].vectorize.empty()) pack = ir::panel_reads(w_.stages[stage].rhs, s.stages[stage].vectorize);
  for (auto& name : inputs_of(stage)) {
    if (std::find(pack.begin(), pack.end(), name) != pack.end() || !flip(ir::knobs::pack, rng)) continue;
    pack.push_back(name);
    if (!check(s).empty()) pack.pop_back();
  }
}

void Space::sample_fuse_rows(ir::Schedule& s, std::int64_t multiple) const {
  ir::Schedule fused = s;
  std::int64_t rows = 1;
  for (size_t i = 0; i < w_.stages.size(); ++i) {
    if (absorbed(fused, static_cast<int>(i)) || w_.stages[i].axes.empty()) continue;
    auto& ss = fused.stages[i];
    rows = std::lcm(rows, ss.tile.at(w_.stages[i].axes[0].name).front());
    ss.parallel = 0;
    ss.pack.clear();
  }
  fused.fuse_rows = rows * multiple;
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
      if (ir::can_inline(w_, stage) && flip(ir::knobs::inline_stage, rng)) {
        s.stages[i].inline_stage = true;
        continue;
      }
      sample_loops(s.stages[i], stage, rng);
      s.stages[i].fuse_epilogue = ir::can_fuse_epilogue(w_, stage) && flip(ir::knobs::fuse_epilogue, rng);
    }
    if (!check(s).empty()) continue;
    for (size_t i = 0; i < w_.stages.size(); ++i)
      if (!absorbed(s, static_cast<int>(i))) sample_packs(s, static_cast<int>(i), rng);
    std::int64_t rows = draw(ir::knobs::fuse_rows, rng);
    if (w_.stages.size() > 1 && !t_.groups() && rows > 0) sample_fuse_rows(s, rows);
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
        if (m.fuse_rows > 0)
          m.fuse_rows = 0;
        else if (w_.stages.size() > 1 && !t_.groups())
          sample_fuse_rows(m, draw(ir::knobs::fuse_rows, rng, 1));
        else
          continue;
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
        if (coin(rng) && a.name != ss.vectorize)
          reg = a.reduce ? draw_reduce_block(ir::knobs::tile_reduce, a, rng)
                         : std::min(draw(ir::knobs::tile_rows, rng, 1), a.extent);
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
        if (coin(rng) || !st.is_reduction() || t_.groups())
          ss.unroll = static_cast<int>(draw(ir::knobs::unroll, rng));
        else
          ss.prefetch = static_cast<int>(draw(ir::knobs::prefetch, rng));
        break;
      case 3:
        ss.parallel = static_cast<int>(draw(ir::knobs::parallel, rng));
        break;
      case 4: {  // resample the whole stage
        bool fuse = ss.fuse_epilogue;
        sample_loops(ss, stage, rng);
        ss.fuse_epilogue = fuse;
        break;
      }
      case 5: {  // structure: fuse or inline differently
        if (ir::can_fuse_epilogue(w_, stage)) {
          ss.fuse_epilogue = !ss.fuse_epilogue;
          if (!ss.fuse_epilogue)
            sample_loops(m.stages[stage + 1], stage + 1, rng);
          else
            m.stages[stage + 1].reset();
        } else if (ir::can_inline(w_, stage)) {
          ss.reset();
          ss.inline_stage = true;
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
