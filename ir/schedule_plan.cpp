#include "ir/schedule_plan.hpp"

#include <algorithm>
#include <cstdlib>

namespace tiletune::ir {

namespace {

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

//! The accesses of input `tensor` in `body` (pointers into it), or why there are none to
//! copy (`what`: "packed", "staged").
std::string input_reads(const Workload& w, const std::string& tensor, const Expr& body, const std::string& what,
                        std::vector<const Expr*>& reads) {
  int b = w.buffer_index(tensor);
  if (b < 0 || w.buffers[b].role != Buffer::Role::Input) return "only inputs can be " + what + ", not '" + tensor + "'";
  for_each_access(body, [&](const Expr& a) {
    if (a.name == tensor) reads.push_back(&a);
  });
  if (reads.empty()) return "'" + tensor + "' is not read by this stage";
  return "";
}

}  // namespace

namespace {
void substitute_in_place(Expr& e, const VarMap& vars) {
  for (auto& ix : e.indices) ix = substitute(ix, vars);
  for (auto& a : e.args) substitute_in_place(a, vars);
}
}  // namespace

Expr substitute(const Expr& e, const VarMap& vars) {
  Expr out = e;  // copied once, then rewritten where it lies
  substitute_in_place(out, vars);
  return out;
}

namespace {
//! Whether `e` reads a stage the schedule inlines.
bool reads_inlined(const Workload& w, const Schedule& s, const Expr& e) {
  if (e.kind == Expr::Kind::Access) {
    int p = stage_of(w, e.name);
    return p >= 0 && s.stages[p].inline_stage;
  }
  for (auto& a : e.args)
    if (reads_inlined(w, s, a)) return true;
  return false;
}

//! Replaces, in `e`, every access to an inlined stage by that stage's body.
void inline_in_place(const Workload& w, const Schedule& s, Expr& e) {
  if (e.kind == Expr::Kind::Access) {
    int p = stage_of(w, e.name);
    if (p < 0 || !s.stages[p].inline_stage) return;
    const Stage& producer = w.stages[p];
    VarMap vars;
    for (size_t d = 0; d < e.indices.size(); ++d) vars[producer.axes[d].name] = e.indices[d];
    e = substitute(effective_body(w, s, producer.rhs), vars);
    return;
  }
  for (auto& a : e.args) inline_in_place(w, s, a);
}
}  // namespace

Expr effective_body(const Workload& w, const Schedule& s, const Expr& e) {
  Expr out = e;  // copied once, then rewritten where it lies
  inline_in_place(w, s, out);
  return out;
}

BodyView::BodyView(const Workload& w, const Schedule& s, const Expr& e) : body_(&e) {
  if (reads_inlined(w, s, e)) body_ = &own_.emplace(effective_body(w, s, e));
}

Expr fused_epilogue_body(const Workload& w, const Schedule& s, int i) {
  const Stage& e = w.stages[i + 1];
  VarMap rename;
  size_t d = 0;
  for (auto& a : w.stages[i].axes)
    if (!a.reduce) rename[e.axes[d++].name] = plain(a.name);
  return substitute(effective_body(w, s, e.rhs), rename);
}

std::string plan_pack(const Workload& w, const Schedule& s, int i, const std::string& tensor, Pack& pack) {
  const Stage& st = w.stages[i];
  const StageSchedule& ss = s.stages[i];
  BodyView body(w, s, st.rhs);
  std::vector<const Expr*> reads;
  std::string why = input_reads(w, tensor, *body, "packed", reads);
  if (!why.empty()) return why;
  const Expr* first = reads.front();
  for (const Expr* a : reads)
    for (size_t d = 0; d < a->indices.size(); ++d)
      if (a->indices[d].plain_var().empty() || a->indices[d].plain_var() != first->indices[d].plain_var())
        return "'" + tensor + "' is packed only when every access indexes each dimension by one plain axis";
  int b = w.buffer_index(tensor);
  if (ss.fuse_epilogue) {
    BodyView epilogue(w, s, w.stages[i + 1].rhs);
    bool read = false;
    for_each_access(*epilogue, [&](const Expr& a) { read = read || a.name == tensor; });
    if (read) return "'" + tensor + "' is read by the fused epilogue too and cannot be packed";
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
    const std::string& axis = first->indices[d].plain_var();
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
  if (pack.axis.empty() || pack.block < 2)
    return "packing '" + tensor + "' gains nothing: no register-tiled axis indexes it";
  pack.panels = (w.buffers[b].shape[pack.dim] + pack.block - 1) / pack.block;
  for (size_t d = 0; d < w.buffers[b].shape.size(); ++d)
    if (static_cast<int>(d) != pack.dim) pack.others *= w.buffers[b].shape[d];
  return "";
}

std::int64_t group_span(const Stage& st, const StageSchedule& ss, const std::string& axis) {
  const auto& sizes = ss.tile.at(axis);
  for (auto& a : st.axes)
    if (a.name == axis && !a.reduce && sizes.size() >= 2) return sizes[sizes.size() - 2];
  return sizes.back();
}

std::string plan_local(const Workload& w, const Schedule& s, int i, const std::string& tensor, Pack& pack) {
  const Stage& st = w.stages[i];
  const StageSchedule& ss = s.stages[i];
  if (!st.is_reduction()) return "only a reduction stage stages inputs in local memory";
  BodyView body(w, s, st.rhs);
  std::vector<const Expr*> reads;
  std::string why = input_reads(w, tensor, *body, "staged", reads);
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

}  // namespace tiletune::ir
