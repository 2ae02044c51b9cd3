#include "ir/loop_nest.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "support/error.hpp"

namespace tiletune::ir {

namespace {

using VarMap = std::map<std::string, IndexExpr>;

IndexExpr substitute(const IndexExpr& ix, const VarMap& vars) {
  IndexExpr out;
  out.constant = ix.constant;
  std::map<std::string, std::int64_t> coeffs;
  std::vector<std::string> order;
  for (auto& t : ix.terms) {
    const IndexExpr& repl = vars.at(t.var);
    out.constant += t.coeff * repl.constant;
    for (auto& r : repl.terms) {
      if (!coeffs.count(r.var)) order.push_back(r.var);
      coeffs[r.var] += t.coeff * r.coeff;
    }
  }
  for (auto& v : order)
    if (coeffs[v] != 0) out.terms.push_back({v, coeffs[v]});
  return out;
}

Expr substitute(const Expr& e, const VarMap& vars) {
  Expr out = e;
  for (auto& ix : out.indices) ix = substitute(ix, vars);
  for (auto& a : out.args) a = substitute(a, vars);
  return out;
}

IndexExpr plain(const std::string& var) {
  IndexExpr ix;
  ix.terms.push_back({var, 1});
  return ix;
}

int stage_of(const Workload& w, const std::string& tensor) {
  for (size_t i = 0; i < w.stages.size(); ++i)
    if (w.stages[i].name == tensor) return static_cast<int>(i);
  return -1;
}

//! The right side of stage `i` with every access to an inlined stage replaced by its body.
Expr effective_body(const Workload& w, const Schedule& s, const Expr& e) {
  if (e.kind == Expr::Kind::Access) {
    int p = stage_of(w, e.name);
    if (p >= 0 && s.stages[p].inline_stage) {
      const Stage& producer = w.stages[p];
      VarMap vars;
      for (size_t d = 0; d < e.indices.size(); ++d) vars[producer.axes[d].name] = e.indices[d];
      return substitute(effective_body(w, s, producer.rhs), vars);
    }
    return e;
  }
  Expr out = e;
  for (auto& a : out.args) a = effective_body(w, s, a);
  return out;
}

//! The accesses of input `tensor` in `body` (pointers into it), or why there are none to
//! copy (`what`: "packed", "staged").
std::string input_reads(const Workload& w, const std::string& tensor, const Expr& body, const std::string& what,
                        std::vector<const Expr*>& reads) {
  int b = w.buffer_index(tensor);
  if (b < 0 || w.buffers[b].role != Buffer::Role::Input) return "only inputs can be " + what + ", not '" + tensor + "'";
  std::vector<const Expr*> all;
  collect_accesses(body, all);
  for (const Expr* a : all)
    if (a->name == tensor) reads.push_back(a);
  if (reads.empty()) return "'" + tensor + "' is not read by this stage";
  return "";
}

//! Where packing `tensor` in stage `i` puts its panels, or why it cannot be packed.
std::string plan_pack(const Workload& w, const Schedule& s, int i, const std::string& tensor, Pack& pack) {
  const Stage& st = w.stages[i];
  const StageSchedule& ss = s.stages[i];
  Expr body = effective_body(w, s, st.rhs);
  std::vector<const Expr*> reads;
  std::string why = input_reads(w, tensor, body, "packed", reads);
  if (!why.empty()) return why;
  const Expr* first = reads.front();
  for (const Expr* a : reads)
    for (size_t d = 0; d < a->indices.size(); ++d)
      if (a->indices[d].plain_var().empty() || a->indices[d].plain_var() != first->indices[d].plain_var())
        return "'" + tensor + "' is packed only when every access indexes each dimension by one plain axis";
  int b = w.buffer_index(tensor);
  if (ss.fuse_epilogue) {
    Expr epilogue = effective_body(w, s, w.stages[i + 1].rhs);
    std::vector<const Expr*> epilogue_reads;
    collect_accesses(epilogue, epilogue_reads);
    for (const Expr* a : epilogue_reads)
      if (a->name == tensor) return "'" + tensor + "' is read by the fused epilogue too and cannot be packed";
  }
  std::string vec = ss.vectorize;
  bool vec_reduce = false;
  for (auto& a : st.axes)
    if (a.name == vec) vec_reduce = a.reduce;
  if (vec_reduce) return "packing is not supported with a vectorized reduction";
  pack = Pack();
  pack.buffer = b;
  std::int64_t best_block = 1;
  for (size_t d = 0; d < first->indices.size(); ++d) {
    std::string axis = first->indices[d].plain_var();
    bool reduce = false;
    for (auto& a : st.axes)
      if (a.name == axis) reduce = a.reduce;
    if (reduce) continue;
    std::int64_t block = ss.tile.at(axis).back();
    // The SIMD axis wins: its panels make vector loads contiguous.
    if (axis == vec || (block > best_block && pack.axis != vec)) {
      pack.axis = axis;
      pack.dim = static_cast<int>(d);
      pack.block = block;
      best_block = block;
    }
  }
  if (pack.axis.empty() || pack.block < 2) return "packing '" + tensor + "' gains nothing: no register-tiled axis indexes it";
  pack.panels = (w.buffers[b].shape[pack.dim] + pack.block - 1) / pack.block;
  for (size_t d = 0; d < w.buffers[b].shape.size(); ++d)
    if (static_cast<int>(d) != pack.dim) pack.others *= w.buffers[b].shape[d];
  return "";
}

//! The points of `axis` one work-group covers (spatial) or one step of the reduction loops
//! spans (reduction) on a work-group device: the second-innermost tile, or the innermost.
std::int64_t group_span(const Stage& st, const StageSchedule& ss, const std::string& axis) {
  const auto& sizes = ss.tile.at(axis);
  for (auto& a : st.axes)
    if (a.name == axis && !a.reduce && sizes.size() >= 2) return sizes[sizes.size() - 2];
  return sizes.back();
}

//! Plans staging `tensor` in local memory (see Pack), or says why it cannot be.
std::string plan_local(const Workload& w, const Schedule& s, int i, const std::string& tensor, Pack& pack) {
  const Stage& st = w.stages[i];
  const StageSchedule& ss = s.stages[i];
  if (!st.is_reduction()) return "only a reduction stage stages inputs in local memory";
  Expr body = effective_body(w, s, st.rhs);
  std::vector<const Expr*> reads;
  std::string why = input_reads(w, tensor, body, "staged", reads);
  if (!why.empty()) return why;
  const Expr* first = reads.front();
  for (const Expr* a : reads)
    for (size_t d = 0; d < a->indices.size(); ++d)
      if (to_string(a->indices[d]) != to_string(first->indices[d]))
        return "'" + tensor + "' is staged only when every access of it reads the same element";
  int b = w.buffer_index(tensor);
  pack = Pack();
  pack.buffer = b;
  for (auto& ix : first->indices) {
    std::int64_t extent = 1;
    for (auto& term : ix.terms) extent += std::abs(term.coeff) * (group_span(st, ss, term.var) - 1);
    pack.box.push_back(extent);
  }
  return "";
}

bool uses_select_or_compare(const Expr& e) {
  if (e.kind >= Expr::Kind::Lt || (e.kind == Expr::Kind::Call && e.name == "select")) return true;
  for (auto& a : e.args)
    if (uses_select_or_compare(a)) return true;
  return false;
}

//! The limits a work-group device puts on a stage's schedule.
std::string check_groups(const Workload& w, const Schedule& s, const TargetTraits& t, int i) {
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
    Expr body = effective_body(w, s, st.rhs);
    if (uses_select_or_compare(body) ||
        (ss.fuse_epilogue && uses_select_or_compare(effective_body(w, s, w.stages[i + 1].rhs))))
      return "on a work-group device a body with comparisons or select is not vectorized";
  }
  std::int64_t local = 0;
  std::set<std::string> staged;
  for (auto& tensor : ss.pack) {
    if (!staged.insert(tensor).second) return "'" + tensor + "' is staged twice";
    Pack p;
    std::string why = plan_local(w, s, i, tensor, p);
    if (!why.empty()) return why;
    local += p.elements() * 4;
  }
  if (local > t.local_bytes)
    return "staged inputs need " + std::to_string(local) + " bytes of local memory; the device has " +
           std::to_string(t.local_bytes);
  return "";
}

std::string check_stage(const Workload& w, const Schedule& s, const TargetTraits& t, int i) {
  const Stage& st = w.stages[i];
  const StageSchedule& ss = s.stages[i];
  bool no_knobs = ss.tile.empty() && ss.order.empty() && ss.vectorize.empty() && ss.unroll == 0 && ss.prefetch == 0 &&
                  ss.parallel == 0 && !ss.fuse_epilogue && ss.pack.empty();
  if (ss.inline_stage) {
    if (!can_inline(w, i)) return "only an elementwise stage writing a temporary can be inlined";
    if (!no_knobs) return "an inlined stage takes no other knobs";
    return "";
  }
  if (i > 0 && s.stages[i - 1].fuse_epilogue) {
    if (!no_knobs) return "a stage fused as an epilogue takes no knobs of its own";
    return "";
  }
  std::set<std::string> axes;
  for (auto& a : st.axes) {
    axes.insert(a.name);
    auto it = ss.tile.find(a.name);
    if (it == ss.tile.end() || it->second.empty()) return "axis '" + a.name + "' has no tile sizes";
    const auto& sizes = it->second;
    if (sizes.size() > 4) return "axis '" + a.name + "' has more than 4 tile levels";
    for (size_t l = 0; l < sizes.size(); ++l) {
      if (sizes[l] < 1) return "tile sizes of '" + a.name + "' must be at least 1";
      if (sizes[l] > std::max(2 * a.extent, a.extent + 64))
        return "tile size " + std::to_string(sizes[l]) + " of '" + a.name + "' is far beyond its extent " +
               std::to_string(a.extent);
      if (l > 0 && sizes[l - 1] % sizes[l] != 0)
        return "tile sizes of '" + a.name + "' must each divide the one before";
    }
  }
  for (auto& [name, sizes] : ss.tile)
    if (!axes.count(name)) return "tile names unknown axis '" + name + "'";
  // order: every non-innermost loop exactly once, levels of one axis outermost first
  std::map<std::string, int> next_level;
  size_t expected = 0;
  for (auto& a : st.axes) expected += ss.tile.at(a.name).size();  // levels 0 .. L-1 of each axis
  if (ss.order.size() != expected) return "order must list each of the " + std::to_string(expected) + " tile loops once";
  for (auto& loop : ss.order) {
    auto dot = loop.rfind('.');
    if (dot == std::string::npos) return "order entry '" + loop + "' is not axis.level";
    std::string axis = loop.substr(0, dot);
    if (!axes.count(axis)) return "order names unknown axis '" + axis + "'";
    if (next_level[axis] >= static_cast<int>(ss.tile.at(axis).size()))
      return "order entry '" + loop + "' is beyond the " + std::to_string(ss.tile.at(axis).size()) + " tile level(s) of " + axis;
    if (loop.substr(dot + 1) != std::to_string(next_level[axis]))
      return "order must list " + axis + "." + std::to_string(next_level[axis]) + " before '" + loop + "'";
    ++next_level[axis];
  }
  if (ss.parallel < 0 || ss.parallel > static_cast<int>(ss.order.size())) return "parallel is out of range";
  for (int p = 0; p < ss.parallel; ++p) {
    std::string axis = ss.order[p].substr(0, ss.order[p].rfind('.'));
    if (ss.order[p] != axis + ".0") return "only level-0 loops can run in parallel, not " + ss.order[p];
    for (auto& a : st.axes)
      if (a.name == axis && a.reduce) return "loop " + ss.order[p] + " reduces and cannot run in parallel";
  }
  if (ss.unroll < 0 || ss.unroll > 64) return "unroll must be in [0, 64]";
  if (ss.prefetch < 0 || ss.prefetch > 64) return "prefetch must be in [0, 64]";
  if (ss.prefetch > 0 && (!st.is_reduction() || t.groups()))
    return "prefetch is a knob of a CPU micro-kernel's reduction loop; this stage has none";

  if (ss.fuse_epilogue) {
    if (!can_fuse_epilogue(w, i)) return "stage cannot fuse the next stage as an epilogue";
    if (s.stages[i + 1].inline_stage) return "a fused epilogue cannot also be inlined";
  }
  double points = 1;
  for (auto& a : st.axes)
    if (!a.reduce) points *= static_cast<double>(ss.tile.at(a.name).back());
  bool vector_reduce = false;
  if (!ss.vectorize.empty()) {
    if (t.vector_lanes <= 1) return "the target has no SIMD lanes to vectorize with";
    if (!axes.count(ss.vectorize)) return "vectorize names unknown axis '" + ss.vectorize + "'";
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
    if (ss.tile.at(ss.vectorize).back() % t.vector_lanes != 0)
      return "the innermost tile of '" + ss.vectorize + "' must be a multiple of " + std::to_string(t.vector_lanes) +
             " lanes";
    Expr body = effective_body(w, s, st.rhs);
    for (auto& tensor : strided_reads(body, ss.vectorize)) {
      if (vector_reduce || t.groups() || std::find(ss.pack.begin(), ss.pack.end(), tensor) == ss.pack.end())
        return "'" + tensor + "' is read strided along '" + ss.vectorize + "'" +
               (vector_reduce || t.groups() ? ", which cannot be vectorized" : ": vectorizing it needs '" + tensor + "' packed");
      // With every index plain and the vector axis in one dimension, plan_pack runs the
      // panels along the vector axis (the SIMD axis wins), so vector loads are contiguous.
      std::string why = vector_panels_problem(body, tensor, ss.vectorize);
      if (!why.empty()) return why + ": '" + ss.vectorize + "' cannot be vectorized";
    }
    if (ss.fuse_epilogue) {
      if (vector_reduce) return "a vectorized reduction cannot fuse an epilogue";
      const Stage& e = w.stages[i + 1];
      VarMap rename;
      size_t d = 0;
      for (auto& a : st.axes)
        if (!a.reduce) rename[e.axes[d++].name] = plain(a.name);
      if (!unit_stride_or_invariant(substitute(effective_body(w, s, e.rhs), rename), ss.vectorize))
        return "the epilogue reads strided along '" + ss.vectorize + "'";
    }
    double vectors = vector_reduce ? points : points / t.vector_lanes;
    if (vectors > t.vector_registers - 4)
      return "register tile needs " + std::to_string(static_cast<long long>(vectors)) + " vector registers; the target has " +
             std::to_string(t.vector_registers);
  } else if (points > 64) {
    return "scalar register tile of " + std::to_string(static_cast<long long>(points)) + " points is over 64";
  }
  if (t.groups()) return check_groups(w, s, t, i);
  std::set<std::string> packed;
  for (auto& tensor : ss.pack) {
    if (!packed.insert(tensor).second) return "'" + tensor + "' is packed twice";
    Pack p;
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

std::int64_t Pack::elements() const {
  if (box.empty()) return panels * others * block;
  std::int64_t n = 1;
  for (auto e : box) n *= e;
  return n;
}

std::string check_schedule(const Workload& w, const Schedule& s, const TargetTraits& t) {
  if (s.version != 1) return "config version must be 1";
  if (s.stages.size() != w.stages.size())
    return "config has " + std::to_string(s.stages.size()) + " stages; the op has " + std::to_string(w.stages.size());
  for (size_t i = 0; i < w.stages.size(); ++i) {
    if (s.stages[i].stage != w.stages[i].name)
      return "config stage " + std::to_string(i) + " is '" + s.stages[i].stage + "'; expected '" + w.stages[i].name + "'";
    std::string why = check_stage(w, s, t, static_cast<int>(i));
    if (!why.empty()) return "stage " + w.stages[i].name + ": " + why;
  }
  if (s.fuse_rows < 0) return "fuse_rows must be positive";
  if (s.fuse_rows > 0 && t.groups()) return "fuse_rows is not supported on a work-group device";
  if (s.fuse_rows > 0) return check_fuse_rows(w, s);
  return "";
}

LoopNest lower(const Workload& w, const Schedule& s, const TargetTraits& t) {
  std::string why = check_schedule(w, s, t);
  if (!why.empty()) throw_error(ErrorKind::InvalidInput, "invalid config: " + why);
  LoopNest nest;
  std::vector<bool> materialized(w.buffers.size(), true);
  for (size_t i = 0; i < w.stages.size(); ++i) {
    const Stage& st = w.stages[i];
    const StageSchedule& ss = s.stages[i];
    if (ss.inline_stage) {
      materialized[st.output] = false;
      continue;
    }
    if (i > 0 && s.stages[i - 1].fuse_epilogue) continue;
    StageNest sn;
    sn.stage = static_cast<int>(i);
    sn.body = effective_body(w, s, st.rhs);
    std::map<std::string, const Axis*> axis;
    for (auto& a : st.axes) axis[a.name] = &a;
    for (size_t p = 0; p < ss.order.size(); ++p) {
      const std::string& entry = ss.order[p];
      auto dot = entry.rfind('.');
      Loop l;
      l.axis = entry.substr(0, dot);
      l.level = std::stoi(entry.substr(dot + 1));
      const auto& sizes = ss.tile.at(l.axis);
      l.step = sizes[l.level];
      l.extent = axis[l.axis]->extent;
      l.block = l.level == 0 ? l.extent : sizes[l.level - 1];
      l.reduce = axis[l.axis]->reduce;
      l.parallel = static_cast<int>(p) < ss.parallel;
      sn.outer.push_back(l);
    }
    for (auto& a : st.axes) {
      const auto& sizes = ss.tile.at(a.name);
      Loop l;
      l.axis = a.name;
      l.level = static_cast<int>(sizes.size());
      l.step = 1;
      l.block = sizes.back();
      l.extent = a.extent;
      l.reduce = a.reduce;
      (a.reduce ? sn.reduce_inner : sn.reg).push_back(l);
      if (a.name == ss.vectorize) sn.vector_reduce = a.reduce;
    }
    // A vectorized reduction axis runs innermost so that its lanes are consecutive iterations.
    std::stable_partition(sn.reduce_inner.begin(), sn.reduce_inner.end(),
                          [&](const Loop& l) { return l.axis != ss.vectorize; });
    sn.vector_axis = ss.vectorize;
    sn.lanes = ss.vectorize.empty() ? 1 : t.vector_lanes;
    sn.unroll = ss.unroll;
    sn.prefetch = ss.prefetch;
    sn.store = st.output;
    if (ss.fuse_epilogue) {
      const Stage& e = w.stages[i + 1];
      VarMap rename;
      size_t d = 0;
      for (auto& a : st.axes)
        if (!a.reduce) rename[e.axes[d++].name] = plain(a.name);
      sn.epilogue = static_cast<int>(i + 1);
      sn.epilogue_body = substitute(effective_body(w, s, e.rhs), rename);
      sn.store = e.output;
      materialized[st.output] = false;
    }
    std::int64_t local = 0;
    for (auto& tensor : ss.pack) {
      Pack p;
      if (t.groups()) {
        plan_local(w, s, static_cast<int>(i), tensor, p);
        p.offset = local;
        local += p.elements();
      } else {
        plan_pack(w, s, static_cast<int>(i), tensor, p);
      }
      sn.packs.push_back(p);
    }
    nest.stages.push_back(std::move(sn));
  }
  if (s.fuse_rows > 0) {
    nest.fuse_rows = s.fuse_rows;
    nest.rows = w.stages[nest.stages.front().stage].axes[0].extent;
  }
  auto reserve = [&](std::int64_t floats) {
    std::int64_t at = nest.workspace_floats;
    nest.workspace_floats += (floats + 15) / 16 * 16;  // 64-byte aligned starts
    return at;
  };
  nest.workspace_offset.assign(w.buffers.size(), -1);
  for (size_t b = 0; b < w.buffers.size(); ++b)
    if (w.buffers[b].role == Buffer::Role::Temp && materialized[b]) nest.workspace_offset[b] = reserve(w.buffers[b].elements());
  for (auto& sn : nest.stages)
    for (auto& p : sn.packs)
      if (p.box.empty()) p.offset = reserve(p.elements());
  return nest;
}

}  // namespace tiletune::ir
