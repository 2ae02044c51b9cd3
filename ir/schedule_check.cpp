#include <algorithm>
#include <string_view>

#include "ir/knobs.hpp"
#include "ir/loop_nest.hpp"
#include "ir/schedule_plan.hpp"

namespace tiletune::ir {

namespace {

bool uses_select_or_compare(const Expr& e) {
  if (e.kind >= Expr::Kind::Lt || (e.kind == Expr::Kind::Call && e.name == "select")) return true;
  for (auto& a : e.args)
    if (uses_select_or_compare(a)) return true;
  return false;
}

//! Whether names[k] is also listed before it.
bool listed_before(const std::vector<std::string>& names, size_t k) {
  return std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(k), names[k]) !=
         names.begin() + static_cast<std::ptrdiff_t>(k);
}

//! The limits a work-group device puts on a stage's schedule.
std::string check_groups(const Workload& w, const Schedule& s, const TargetTraits& t, int i, std::vector<Pack>& packs) {
  const Stage& st = w.stages[i];
  const StageSchedule& ss = s.stages[i];
  std::int64_t items = 1;
  for (auto& a : st.axes) {
    const auto& sizes = ss.tile.at(a.name);
    if (a.reduce) continue;
    if (sizes.size() > 2)
      return "on a work-group device a spatial axis has at most 2 tile levels (work-group, work-item), not " +
             std::to_string(sizes.size()) + " for '" + a.name + "'";
    items *= group_span(st, ss, a.name) / sizes.back();
  }
  if (items > t.max_group_size)
    return "work-groups of " + std::to_string(items) + " items exceed the device's " + std::to_string(t.max_group_size);
  if (ss.parallel != 0) return "on a work-group device every spatial tile runs in parallel: parallel must be 0";
  if (!ss.vectorize.empty()) {
    // Vectors along the innermost left-hand axis only, whole vectors only: a point past the
    // end is computed on the last whole vector and not stored.
    for (auto& a : st.axes)
      if (a.name == ss.vectorize && (a.reduce || a.extent % t.vector_lanes != 0))
        return "on a work-group device only a left-hand axis whose extent is a multiple of " +
               std::to_string(t.vector_lanes) + " lanes is vectorized";
    if (uses_select_or_compare(*BodyView(w, s, st.rhs)) ||
        (ss.fuse_epilogue && uses_select_or_compare(*BodyView(w, s, w.stages[i + 1].rhs))))
      return "on a work-group device a body with comparisons or select is not vectorized";
  }
  std::int64_t local = 0;
  for (size_t k = 0; k < ss.pack.size(); ++k) {
    const std::string& tensor = ss.pack[k];
    if (listed_before(ss.pack, k)) return "'" + tensor + "' is staged twice";
    Pack& p = packs.emplace_back();
    std::string why = plan_local(w, s, i, tensor, p);
    if (!why.empty()) return why;
    local += p.elements() * 4;
  }
  if (local > t.local_bytes)
    return "staged inputs need " + std::to_string(local) + " bytes of local memory; the device has " +
           std::to_string(t.local_bytes);
  return "";
}

std::string check_stage(const Workload& w, const Schedule& s, const TargetTraits& t, int i, std::vector<Pack>& packs) {
  const Stage& st = w.stages[i];
  const StageSchedule& ss = s.stages[i];
  bool no_knobs = !ss.has_loop_knobs();
  if (ss.inline_stage) {
    if (!can_inline(w, i)) return "only an elementwise stage writing a temporary can be inlined";
    if (!no_knobs) return "an inlined stage takes no other knobs";
    return "";
  }
  if (i > 0 && s.stages[i - 1].fuse_epilogue) {
    if (!no_knobs) return "a stage fused as an epilogue takes no knobs of its own";
    return "";
  }
  // Axes by their index in st.axes: a stage has a handful, so scans beat sets of names (this
  // runs for every candidate the search samples and ranks).
  auto axis_of = [&](std::string_view name) -> int {
    for (size_t a = 0; a < st.axes.size(); ++a)
      if (st.axes[a].name == name) return static_cast<int>(a);
    return -1;
  };
  std::vector<const std::vector<std::int64_t>*> tiles(st.axes.size());
  size_t expected = 0;  // levels 0 .. L-1 of each axis
  for (size_t ai = 0; ai < st.axes.size(); ++ai) {
    const Axis& a = st.axes[ai];
    auto it = ss.tile.find(a.name);
    if (it == ss.tile.end() || it->second.empty()) return "axis '" + a.name + "' has no tile sizes";
    const auto& sizes = it->second;
    tiles[ai] = &sizes;
    expected += sizes.size();
    if (static_cast<std::int64_t>(sizes.size()) > knobs::tile_levels.max)
      return "axis '" + a.name + "' has more than " + std::to_string(knobs::tile_levels.max) + " tile levels";
    for (size_t l = 0; l < sizes.size(); ++l) {
      if (sizes[l] < 1) return "tile sizes of '" + a.name + "' must be at least 1";
      if (sizes[l] > std::max(2 * a.extent, a.extent + 64))
        return "tile size " + std::to_string(sizes[l]) + " of '" + a.name + "' is far beyond its extent " +
               std::to_string(a.extent);
      if (l > 0 && sizes[l - 1] % sizes[l] != 0)
        return "tile sizes of '" + a.name + "' must each divide the one before";
    }
  }
  // Every axis has tiles, so more entries than axes means one names an unknown axis.
  if (ss.tile.size() != st.axes.size())
    for (auto& [name, sizes] : ss.tile)
      if (axis_of(name) < 0) return "tile names unknown axis '" + name + "'";
  // order: every non-innermost loop exactly once, levels of one axis outermost first
  std::vector<int> next_level(st.axes.size(), 0);
  if (ss.order.size() != expected)
    return "order must list each of the " + std::to_string(expected) + " tile loops once";
  for (auto& loop : ss.order) {
    const OrderEntry entry = split_order_entry(loop);
    if (!entry.ok) return "order entry '" + loop + "' is not axis.level";
    const std::string_view axis = entry.axis;
    const int ai = axis_of(axis);
    if (ai < 0) return "order names unknown axis '" + std::string(axis) + "'";
    const auto levels = tiles[ai]->size();
    if (next_level[ai] >= static_cast<int>(levels))
      return "order entry '" + loop + "' is beyond the " + std::to_string(levels) + " tile level(s) of " +
             std::string(axis);
    if (!entry.is_level(next_level[ai]))
      return "order must list " + std::string(axis) + "." + std::to_string(next_level[ai]) + " before '" + loop + "'";
    ++next_level[ai];
  }
  for (const Knob* k : stage_int_knobs()) {
    std::string why = knob_range_problem(*k, ss.*(k->field));
    if (!why.empty()) return why;
  }
  if (ss.parallel > static_cast<int>(ss.order.size())) return "parallel is out of range";
  for (int p = 0; p < ss.parallel; ++p) {
    const std::string& loop = ss.order[p];
    const OrderEntry entry = split_order_entry(loop);  // checked above
    if (!entry.is_level(0)) return "only level-0 loops can run in parallel, not " + loop;
    if (st.axes[axis_of(entry.axis)].reduce) return "loop " + loop + " reduces and cannot run in parallel";
  }
  if (ss.prefetch > 0 && (!st.is_reduction() || t.groups()))
    return "prefetch is a knob of a CPU micro-kernel's reduction loop; this stage has none";

  if (ss.fuse_epilogue) {
    if (!can_fuse_epilogue(w, i)) return "stage cannot fuse the next stage as an epilogue";
    if (s.stages[i + 1].inline_stage) return "a fused epilogue cannot also be inlined";
  }
  double points = 1;
  for (size_t a = 0; a < st.axes.size(); ++a)
    if (!st.axes[a].reduce) points *= static_cast<double>(tiles[a]->back());
  bool vector_reduce = false;
  if (!ss.vectorize.empty()) {
    if (t.vector_lanes <= 1) return "the target has no SIMD lanes to vectorize with";
    const int vi = axis_of(ss.vectorize);
    if (vi < 0) return "vectorize names unknown axis '" + ss.vectorize + "'";
    std::string last_lhs;
    for (auto& a : st.axes) {
      if (!a.reduce) last_lhs = a.name;
      if (a.name == ss.vectorize) vector_reduce = a.reduce;
    }
    // A CPU vectorizes any spatial axis: inputs read strided along it are packed into
    // panels along it, and the output's vectors are gathered and scattered once per
    // reduction block (channels of NCHW conv, the N of C = A * B^T).
    if (!vector_reduce && ss.vectorize != last_lhs && t.groups())
      return "only the innermost left-hand axis or a reduction axis can be vectorized";
    if (tiles[vi]->back() % t.vector_lanes != 0)
      return "the innermost tile of '" + ss.vectorize + "' must be a multiple of " + std::to_string(t.vector_lanes) +
             " lanes";
    const BodyView view(w, s, st.rhs);
    const Expr& body = *view;
    // A CPU loads the rows of a strided window (stride 2 or more in the last dimension only)
    // strided, without panels; any other strided read needs its panels.
    const auto strided = strided_reads(body, ss.vectorize);
    auto rows = vector_reduce || t.groups() || strided.empty() ? std::vector<std::string>{}
                                                               : strided_row_reads(body, ss.vectorize);
    for (auto& tensor : strided) {
      if (std::find(rows.begin(), rows.end(), tensor) != rows.end()) continue;
      if (vector_reduce || t.groups() || std::find(ss.pack.begin(), ss.pack.end(), tensor) == ss.pack.end())
        return "'" + tensor + "' is read strided along '" + ss.vectorize + "'" +
               (vector_reduce || t.groups() ? ", which cannot be vectorized"
                                            : ": vectorizing it needs '" + tensor + "' packed");
      // With every index plain and the vector axis in one dimension, plan_pack runs the
      // panels along the vector axis (the SIMD axis wins), so vector loads are contiguous.
      std::string why = vector_panels_problem(body, tensor, ss.vectorize);
      if (!why.empty()) return why + ": '" + ss.vectorize + "' cannot be vectorized";
    }
    if (ss.fuse_epilogue) {
      if (vector_reduce) return "a vectorized reduction cannot fuse an epilogue";
      // The stage's own value is in registers there: only the other tensors are loaded.
      for (auto& tensor : strided_reads(fused_epilogue_body(w, s, i), ss.vectorize))
        if (tensor != st.name) return "the epilogue reads '" + tensor + "' strided along '" + ss.vectorize + "'";
    }
    double vectors = vector_reduce ? points : points / t.vector_lanes;
    if (vectors > t.vector_registers - 4)
      return "register tile needs " + std::to_string(static_cast<long long>(vectors)) +
             " vector registers; the target has " + std::to_string(t.vector_registers);
  } else if (points > 64) {
    return "scalar register tile of " + std::to_string(static_cast<long long>(points)) + " points is over 64";
  }
  if (t.groups()) {
    // A work-group device reads a padded input past its border one guarded element at a
    // time: such an input is neither loaded in vectors nor staged in local memory.
    Expr body = effective_body(w, s, st.rhs), epilogue;
    if (ss.fuse_epilogue) epilogue = fused_epilogue_body(w, s, i);
    for (auto [e, d] : reads_outside(w, i, {&body, ss.fuse_epilogue ? &epilogue : nullptr})) {
      for (auto& ix : e->indices)
        if (!ss.vectorize.empty() && ix.coeff_of(ss.vectorize) != 0)
          return "'" + e->name + "' is read past its border (padding) along '" + ss.vectorize +
                 "', which a work-group device does not vectorize";
      if (std::find(ss.pack.begin(), ss.pack.end(), e->name) != ss.pack.end())
        return "'" + e->name + "' is read past its border (padding): a work-group device does not stage it";
    }
    return check_groups(w, s, t, i, packs);
  }
  for (size_t k = 0; k < ss.pack.size(); ++k) {
    const std::string& tensor = ss.pack[k];
    if (listed_before(ss.pack, k)) return "'" + tensor + "' is packed twice";
    Pack& p = packs.emplace_back();
    std::string why = plan_pack(w, s, i, tensor, p);
    if (!why.empty()) return why;
  }
  return "";
}

//! Why the stages cannot share a loop over blocks of their first axis; "" if they can.
std::string check_fuse_rows(const Workload& w, const Schedule& s) {
  std::int64_t rows = -1;
  for (size_t i = 0; i < w.stages.size(); ++i) {
    const Stage& st = w.stages[i];
    const StageSchedule& ss = s.stages[i];
    if (ss.inline_stage || (i > 0 && s.stages[i - 1].fuse_epilogue)) continue;
    if (st.axes.empty() || st.axes[0].reduce) return "stage " + st.name + " has no left-hand axis to share";
    if (rows >= 0 && st.axes[0].extent != rows) return "the stages' first axes differ in extent";
    rows = st.axes[0].extent;
    if (s.fuse_rows % ss.tile.at(st.axes[0].name).front() != 0)
      return "fuse_rows must be a multiple of each stage's outer tile of its first axis";
    if (ss.parallel > 0) return "with fuse_rows the row loop is the parallel one: stages take parallel 0";
    if (!ss.pack.empty()) return "packing is not supported with fuse_rows";
    // Row r of a stage may read only row r of what earlier stages wrote.
    std::vector<std::pair<const Stage*, Expr>> bodies{{&st, effective_body(w, s, st.rhs)}};
    if (ss.fuse_epilogue) bodies.push_back({&w.stages[i + 1], effective_body(w, s, w.stages[i + 1].rhs)});
    for (auto& [reader, body] : bodies) {
      std::vector<const Expr*> acc;
      collect_accesses(body, acc);
      for (const Expr* a : acc) {
        int b = w.buffer_index(a->name);
        if (w.buffers[b].role == Buffer::Role::Input) continue;
        if (a->indices[0].plain_var() != reader->axes[0].name)
          return "stage " + reader->name + " reads '" + a->name + "' across rows";
      }
    }
  }
  return "";
}

}  // namespace

std::string check_schedule(const Workload& w, const Schedule& s, const TargetTraits& t) {
  std::vector<std::vector<Pack>> packs;
  return check_schedule(w, s, t, packs);
}

std::string check_schedule(const Workload& w, const Schedule& s, const TargetTraits& t,
                           std::vector<std::vector<Pack>>& packs) {
  packs.assign(w.stages.size(), {});
  if (s.version != 1) return "config version must be 1";
  if (s.stages.size() != w.stages.size())
    return "config has " + std::to_string(s.stages.size()) + " stages; the op has " + std::to_string(w.stages.size());
  for (size_t i = 0; i < w.stages.size(); ++i) {
    if (s.stages[i].stage != w.stages[i].name)
      return "config stage " + std::to_string(i) + " is '" + s.stages[i].stage + "'; expected '" + w.stages[i].name +
             "'";
    std::string why = check_stage(w, s, t, static_cast<int>(i), packs[i]);
    if (!why.empty()) return "stage " + w.stages[i].name + ": " + why;
  }
  std::string why = knob_range_problem(knobs::fuse_rows, s.fuse_rows);
  if (!why.empty()) return why;
  if (s.fuse_rows > 0 && t.groups()) return "fuse_rows is not supported on a work-group device";
  if (s.fuse_rows > 0) return check_fuse_rows(w, s);
  return "";
}

}  // namespace tiletune::ir
