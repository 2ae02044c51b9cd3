// Name resolution, ranks, reductions and index-range inference for a parsed op.
// Sizes stay symbolic here; bind.cpp checks them against concrete values.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "ir/lexer.hpp"
#include "ir/op.hpp"

namespace tiletune::ir {

namespace {

using detail::fail_at;

struct Checker {
  OpDef& op;
  std::map<std::string, const TensorDecl*> inputs, outputs;
  std::map<std::string, TensorDecl> defined;  // outputs and intermediates already assigned

  const TensorDecl* readable(const std::string& name) {
    if (auto it = inputs.find(name); it != inputs.end()) return it->second;
    if (auto it = defined.find(name); it != defined.end()) return &it->second;
    return nullptr;
  }

  std::set<std::string> size_symbols;

  // Collects accesses like ir::collect_accesses and checks every size name on the way.
  void collect_checked(const Expr& e, std::vector<const Expr*>& out) {
    if (e.kind == Expr::Kind::Access) out.push_back(&e);
    if (e.kind == Expr::Kind::Size && !size_symbols.count(e.name)) {
      if (inputs.count(e.name) || defined.count(e.name) || outputs.count(e.name))
        fail_at(e.loc, "tensor '" + e.name + "' must be indexed, like " + e.name + "[...]");
      fail_at(e.loc, "unknown name '" + e.name + "': not a size of this op");
    }
    for (auto& a : e.args) collect_checked(a, out);
  }

  //! The range a later statement than `stmts[at]` gives the index it reads `tensor`'s dimension
  //! `dim` with: an intermediate is as large as its consumers read it (`acc[b, t, o] += X[b, t + r,
  //! c] * W[r, c, o]` then `Y[b, t, o] = tanh(acc[b, t, o])` gives t Y's range). The consumer's
  //! own range for that index comes as checking would give it: its 'where', its output's shape,
  //! a tensor of known shape it reads alone, else (on the left of another intermediate) that
  //! intermediate's consumers. Binding checks every read against the shape so inferred.
  std::optional<SizeExpr> consumer_extent(size_t at, const std::string& tensor, size_t dim) {
    for (size_t j = at + 1; j < op.stmts.size(); ++j) {
      const Stmt& t = op.stmts[j];
      std::optional<SizeExpr> found;
      for_each_access(t.rhs, [&](const Expr& a) {
        if (found || a.name != tensor || a.indices.size() <= dim) return;
        if (const std::string& u = a.indices[dim].plain_var(); !u.empty()) found = extent_in(j, u);
      });
      if (found) return found;
    }
    return std::nullopt;
  }

  //! extent_in's answers while one statement is checked: statements may read each other's
  //! tensors in a lattice, whose paths a search without it would walk exponentially often.
  std::map<std::pair<size_t, std::string>, std::optional<SizeExpr>> extents_seen;

  //! The range statement `stmts[j]` (not yet checked) gives index `u`, if it gives one.
  std::optional<SizeExpr> extent_in(size_t j, const std::string& u) {
    auto [seen, first] = extents_seen.try_emplace({j, u});
    if (first) seen->second = find_extent_in(j, u);
    return seen->second;
  }
  std::optional<SizeExpr> find_extent_in(size_t j, const std::string& u) {
    const Stmt& t = op.stmts[j];
    for (auto& r : t.ranges)
      if (r.var == u) return r.extent;
    auto lhs = std::find(t.lhs_vars.begin(), t.lhs_vars.end(), u);
    const size_t p = static_cast<size_t>(lhs - t.lhs_vars.begin());
    if (lhs != t.lhs_vars.end())
      if (auto out = outputs.find(t.tensor); out != outputs.end())
        return p < out->second->dims.size() ? std::optional(out->second->dims[p]) : std::nullopt;
    std::optional<SizeExpr> read;
    for_each_access(t.rhs, [&](const Expr& a) {
      const TensorDecl* known = readable(a.name);
      if (auto o = outputs.find(a.name); !known && o != outputs.end()) known = o->second;
      for (size_t d = 0; !read && known && d < a.indices.size() && d < known->dims.size(); ++d)
        if (a.indices[d].plain_var() == u) read = known->dims[d];
    });
    if (read || lhs == t.lhs_vars.end()) return read;
    return consumer_extent(j, t.tensor, p);
  }

  void check_stmt(size_t at) {
    Stmt& s = op.stmts[at];
    if (inputs.count(s.tensor)) fail_at(s.loc, "cannot assign to input '" + s.tensor + "'");
    if (defined.count(s.tensor))
      fail_at(s.loc, "tensor '" + s.tensor + "' is assigned twice: each tensor has exactly one statement");
    std::set<std::string> lhs(s.lhs_vars.begin(), s.lhs_vars.end());
    if (lhs.size() != s.lhs_vars.size()) fail_at(s.loc, "an index name repeats on the left of '" + s.tensor + "'");
    // In an index a size's name means the size (`t + r - R + 1`), so no index may take one.
    for (auto& v : s.lhs_vars)
      if (size_symbols.count(v))
        fail_at(s.loc, "index '" + v + "' on the left of '" + s.tensor +
                           "' is named like a size of the op; in an index that name means the size: rename the index");
    for (auto& r : s.ranges)
      if (size_symbols.count(r.var))
        fail_at(r.loc, "index '" + r.var + "' in 'where' is named like a size of the op; rename the index");
    const TensorDecl* out = nullptr;
    if (auto it = outputs.find(s.tensor); it != outputs.end()) {
      out = it->second;
      if (out->dims.size() != s.lhs_vars.size())
        fail_at(s.loc, "rank mismatch: output '" + s.tensor + "' has " + std::to_string(out->dims.size()) +
                           " dimensions but is assigned with " + std::to_string(s.lhs_vars.size()) + " indices");
    }

    std::vector<const Expr*> accesses;
    collect_checked(s.rhs, accesses);
    std::vector<std::string> order(s.lhs_vars.begin(), s.lhs_vars.end());
    std::map<std::string, SizeExpr> extent;
    std::map<std::string, SourceLoc> first_use;
    for (const Expr* a : accesses) {
      const TensorDecl* t = readable(a->name);
      if (!t) {
        if (a->name == s.tensor || outputs.count(a->name))
          fail_at(a->loc, "tensor '" + a->name + "' is read before it is assigned");
        fail_at(a->loc, "unknown tensor '" + a->name + "'");
      }
      if (t->dims.size() != a->indices.size())
        fail_at(a->loc, "rank mismatch: '" + a->name + "' has " + std::to_string(t->dims.size()) +
                            " dimensions but is indexed with " + std::to_string(a->indices.size()));
      for (size_t d = 0; d < a->indices.size(); ++d) {
        for (auto& term : a->indices[d].terms) {
          if (!first_use.count(term.var)) first_use[term.var] = a->loc;
          if (!lhs.count(term.var) && std::find(order.begin(), order.end(), term.var) == order.end())
            order.push_back(term.var);
        }
        std::string v = a->indices[d].plain_var();
        if (!v.empty() && !extent.count(v)) extent[v] = t->dims[d];
      }
    }
    std::vector<std::string> reduce(order.begin() + s.lhs_vars.size(), order.end());
    if (!reduce.empty() && s.combine == Combine::Assign)
      fail_at(s.loc, "statement reduces over '" + reduce[0] +
                         "' (it is not on the left) but is written with '='; use '+=', '*=', 'max=' or 'min='");
    if (out)
      for (size_t d = 0; d < s.lhs_vars.size(); ++d) extent[s.lhs_vars[d]] = out->dims[d];
    std::set<std::string> ranged;
    for (auto& r : s.ranges) {
      // An intermediate's shape comes from its indices' ranges: a left-hand index that reads
      // nothing alone (y in acc[.., y, ..] += I[.., y + r - 1, ..]) may be given its range.
      if (lhs.count(r.var) && out)
        fail_at(r.loc, "index '" + r.var +
                           "' is on the left of an output: its range is the tensor's, 'where' gives reduction "
                           "and intermediate indices theirs");
      if (std::find(order.begin(), order.end(), r.var) == order.end())
        fail_at(r.loc, "index '" + r.var + "' in 'where' is not used by the statement");
      if (!ranged.insert(r.var).second) fail_at(r.loc, "index '" + r.var + "' has two ranges in 'where'");
      std::set<std::string> used;
      collect_size_symbols(r.extent, used);
      for (auto& name : used)
        if (!size_symbols.count(name)) fail_at(r.loc, "unknown size '" + name + "' in the range of '" + r.var + "'");
      extent[r.var] = r.extent;
    }

    // An intermediate's left-hand index that nothing here gives a range takes the one its
    // consumers read it with, recorded as if written in 'where' (so the op prints, keys and
    // binds as that spelling does).
    extents_seen.clear();  // what is readable has grown since the statement before
    if (!out)
      for (size_t d = 0; d < s.lhs_vars.size(); ++d)
        if (!extent.count(s.lhs_vars[d]))
          if (auto e = consumer_extent(at, s.tensor, d)) {
            extent[s.lhs_vars[d]] = *e;
            s.ranges.push_back({s.lhs_vars[d], *e, s.loc});
          }

    s.vars.clear();
    for (auto& v : order) {
      auto it = extent.find(v);
      if (it == extent.end()) {
        SourceLoc loc = first_use.count(v) ? first_use[v] : s.loc;
        fail_at(loc, "index '" + v +
                         "' has no inferable range: it must appear alone as the index of some "
                         "dimension (like 'k' in A[m, k]), or be given one with 'where " +
                         v + " < SIZE'" +
                         (!out && lhs.count(v) ? ", or be read alone by a later statement ('" + s.tensor + "[.., " +
                                                     v + ", ..]')"
                                               : ""));
      }
      s.vars.push_back({v, it->second, !lhs.count(v)});
    }
    TensorDecl result;
    if (out) {
      result = *out;
    } else {
      result.name = s.tensor;
      // An intermediate holds its right side's compute type: so a reduction accumulates in
      // f32 over bf16 or f16 operands and in i32 over i8 or u8 ones (ir/dtype.hpp).
      result.dtype = value_type(s.rhs, [&](const std::string& t) { return readable(t)->dtype; }).own();
      result.loc = s.loc;
      for (size_t d = 0; d < s.lhs_vars.size(); ++d) result.dims.push_back(s.vars[d].extent);
      op.intermediates.push_back(result);
    }
    defined[s.tensor] = result;
  }

  void run() {
    std::set<std::string> names;
    for (auto* list : {&op.inputs, &op.outputs})
      for (auto& t : *list)
        if (!names.insert(t.name).second) fail_at(t.loc, "tensor '" + t.name + "' is declared twice");
    size_symbols = ir::size_symbols(op);
    for (auto& t : op.inputs) {
      inputs[t.name] = &t;
      if (t.pad && is_integer(t.dtype) &&
          (*t.pad != std::floor(*t.pad) || *t.pad < dtype_min(t.dtype) || *t.pad > dtype_max(t.dtype)))
        fail_at(t.loc,
                "pad " + pad_text(*t.pad) + " of '" + t.name + "' is not a value of its type " + dtype_name(t.dtype));
    }
    for (auto& t : op.outputs) outputs[t.name] = &t;
    op.intermediates.clear();
    for (size_t i = 0; i < op.stmts.size(); ++i) check_stmt(i);
    for (auto& t : op.outputs)
      if (!defined.count(t.name)) fail_at(t.loc, "output '" + t.name + "' is never assigned");
  }
};

}  // namespace

void check_op(OpDef& op) { Checker{op, {}, {}, {}, {}, {}}.run(); }

}  // namespace tiletune::ir
