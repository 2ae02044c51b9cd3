#include "ir/workload.hpp"

#include <cctype>
#include <functional>
#include <set>

#include "support/error.hpp"
#include "support/hash.hpp"

namespace tiletune::ir {

namespace {

[[noreturn]] void invalid(const std::string& message) { throw_error(ErrorKind::InvalidInput, message); }

std::int64_t eval(const SizeExpr& e, const Sizes& sizes) {
  std::int64_t r = 0;
  switch (e.kind) {
    case SizeExpr::Kind::Const:
      return e.value;
    case SizeExpr::Kind::Symbol: {
      auto it = sizes.find(e.symbol);
      if (it == sizes.end()) invalid("size '" + e.symbol + "' is not bound: pass " + e.symbol + "=<value>");
      return it->second;
    }
    case SizeExpr::Kind::Add:
    case SizeExpr::Kind::Sub:
    case SizeExpr::Kind::Mul: {
      std::int64_t a = eval(e.args[0], sizes), b = eval(e.args[1], sizes);
      bool overflow = e.kind == SizeExpr::Kind::Add   ? __builtin_add_overflow(a, b, &r)
                      : e.kind == SizeExpr::Kind::Sub ? __builtin_sub_overflow(a, b, &r)
                                                      : __builtin_mul_overflow(a, b, &r);
      if (overflow) invalid("size expression " + to_string(e) + " overflows");
      return r;
    }
    case SizeExpr::Kind::Div: {
      std::int64_t d = eval(e.args[1], sizes);
      if (d == 0) invalid("division by zero in size expression " + to_string(e));
      return eval(e.args[0], sizes) / d;
    }
  }
  return 0;
}

//! Tensors larger than this are refused at binding: their offsets and loops would overflow.
constexpr std::int64_t kMaxElements = std::int64_t(1) << 36;

//! Size symbols in expressions become the numbers they are bound to, those in indices part of
//! their constants.
void bind_sizes(Expr& e, const Sizes& sizes) {
  if (e.kind == Expr::Kind::Size) {
    e.kind = Expr::Kind::Const;
    e.value = static_cast<double>(sizes.at(e.name));
    e.name.clear();
  }
  for (auto& ix : e.indices) {
    std::int64_t constant = ix.constant;  // folded apart, so that a message shows the index as written
    for (auto& t : ix.sizes) {
      std::int64_t term = 0;
      if (__builtin_mul_overflow(t.coeff, sizes.at(t.var), &term) || __builtin_add_overflow(constant, term, &constant))
        invalid("index " + to_string(ix) + " of '" + e.name + "' overflows with these sizes");
    }
    ix.constant = constant;
    ix.sizes.clear();
  }
  for (auto& a : e.args) bind_sizes(a, sizes);
}

void rename_vars(Expr& e, const std::map<std::string, std::string>& names) {
  for (auto& ix : e.indices)
    for (auto& t : ix.terms) t.var = names.at(t.var);
  for (auto& a : e.args) rename_vars(a, names);
}

std::string decl_text(const TensorDecl& t) {
  std::string s = t.name + ": " + dtype_name(t.dtype) + "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + to_string(t.dims[i]);
  s += "]";
  if (t.pad) s += " pad " + pad_text(*t.pad);  // only padded inputs say so: other keys stay
  if (t.constant) s += " const";               // and only constant ones this
  return s;
}

}  // namespace

std::pair<__int128, __int128> index_range(const IndexExpr& ix, const std::vector<Axis>& axes) {
  __int128 lo = ix.constant, hi = ix.constant;  // coefficients and extents are below 2^31
  for (auto& t : ix.terms)
    for (auto& a : axes)
      if (a.name == t.var) {
        __int128 span = static_cast<__int128>(t.coeff) * (a.extent - 1);
        (span < 0 ? lo : hi) += span;
      }
  return {lo, hi};
}

namespace {

//! The op's text with its sizes; index names normalised to i0, i1, ... unless keep_names.
std::string canonical(const OpDef& op, const Sizes& sizes, bool keep_names = false) {
  std::string s = "op " + op.name + "(";
  for (size_t i = 0; i < op.inputs.size(); ++i) s += (i ? ", " : "") + decl_text(op.inputs[i]);
  s += ") -> (";
  for (size_t i = 0; i < op.outputs.size(); ++i) s += (i ? ", " : "") + decl_text(op.outputs[i]);
  s += ") {\n";
  for (auto& st : op.stmts) {
    std::map<std::string, std::string> names;
    for (size_t i = 0; i < st.vars.size(); ++i)
      names[st.vars[i].name] = keep_names ? st.vars[i].name : "i" + std::to_string(i);
    Expr rhs = st.rhs;
    rename_vars(rhs, names);
    s += "  " + st.tensor + "[";
    for (size_t i = 0; i < st.lhs_vars.size(); ++i) s += (i ? ", " : "") + names[st.lhs_vars[i]];
    s += std::string("] ") + combine_token(st.combine) + " " + to_string(rhs);
    // Only ops with windows say so: every other op keeps its text, and so its workload key.
    for (size_t i = 0; i < st.ranges.size(); ++i)
      s += (i ? ", " : " where ") + names[st.ranges[i].var] + " < " + to_string(st.ranges[i].extent);
    s += "\n";
  }
  s += "}\nsizes ";
  bool first = true;
  for (auto& [k, v] : sizes) {
    s += (first ? "" : ",") + k + "=" + std::to_string(v);
    first = false;
  }
  return s + "\n";
}

}  // namespace

std::int64_t Buffer::elements() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

bool Stage::is_reduction() const {
  for (auto& a : axes)
    if (a.reduce) return true;
  return false;
}

std::int64_t Stage::points() const {
  std::int64_t n = 1;
  for (auto& a : axes) n *= a.extent;
  return n;
}

int Workload::buffer_index(const std::string& name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name) return static_cast<int>(i);
  return -1;
}

double Workload::flops() const {
  double total = 0;
  for (auto& s : stages) total += double(s.points()) * (count_ops(s.rhs) + (s.is_reduction() ? 1 : 0));
  return total;
}

bool Workload::may_read_outside(int stage, const std::string& tensor, size_t dim, const IndexExpr& ix) const {
  const Buffer& b = buffers[buffer_index(tensor)];
  if (!b.pad) return false;
  auto [lo, hi] = index_range(ix, stages[stage].axes);
  return lo < 0 || hi >= b.shape[dim];
}

std::vector<OutsideRead> reads_outside(const Workload& w, int stage, std::initializer_list<const Expr*> bodies) {
  std::vector<const Expr*> accesses;
  for (const Expr* body : bodies)
    if (body) collect_accesses(*body, accesses);
  std::vector<OutsideRead> out;
  for (const Expr* e : accesses)
    for (size_t d = 0; d < e->indices.size(); ++d)
      if (w.may_read_outside(stage, e->name, d, e->indices[d])) out.push_back({e, d});
  return out;
}

std::int64_t Workload::io_bytes() const {
  std::int64_t n = 0;
  for (auto& b : buffers)
    if (b.role != Buffer::Role::Temp) n += b.bytes();
  return n;
}

namespace {
//! A tensor's element type by name, as the typing rules look it up.
std::function<DType(const std::string&)> tensor_types(const Workload& w) {
  return [&w](const std::string& t) { return w.buffers[w.buffer_index(t)].dtype; };
}
}  // namespace

ValueType Workload::value_type(const Expr& e) const { return ir::value_type(e, tensor_types(*this)); }

DType Workload::operand_type(const Expr& e, size_t i, DType t) const {
  return ir::operand_type(e, i, t, tensor_types(*this));
}

DType Workload::accumulator_type(int i) const { return compute_type(buffers[stages[i].output].dtype); }

DType Workload::epilogue_type(int i) const { return value_type(stages[i].rhs).in(accumulator_type(i)); }

bool Workload::computes_in(DType t) const {
  std::function<bool(const Expr&)> all = [&](const Expr& e) {
    if (value_type(e).in(t) != t) return false;
    for (auto& a : e.args)
      if (!all(a)) return false;
    return true;
  };
  for (auto& st : stages)
    if (!all(st.rhs)) return false;
  return true;
}

bool Workload::f32_only() const {
  for (auto& b : buffers)
    if (b.dtype != DType::F32) return false;
  return computes_in(DType::F32);
}

std::string Workload::sizes_text() const {
  std::string s;
  for (auto& [k, v] : sizes) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

Sizes parse_sizes(const std::string& text) {
  Sizes sizes;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  skip_space();
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
    std::string name = text.substr(start, i - start);
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])))
      invalid("sizes: expected NAME=VALUE at position " + std::to_string(start + 1) + " of '" + text + "'");
    skip_space();
    if (i >= text.size() || text[i] != '=') invalid("sizes: expected '=' after '" + name + "'");
    ++i;
    skip_space();
    size_t vstart = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    std::string digits = text.substr(vstart, i - vstart);
    if (digits.empty()) invalid("sizes: '" + name + "' needs a positive integer value");
    if (digits.size() > 10) invalid("sizes: " + name + "=" + digits + " is out of range [1, 2^31)");
    std::int64_t v = std::stoll(digits);
    if (v < 1 || v >= (std::int64_t(1) << 31)) invalid("sizes: " + name + "=" + digits + " is out of range [1, 2^31)");
    if (!sizes.emplace(name, v).second) invalid("sizes: '" + name + "' is given twice");
    skip_space();
    if (i < text.size()) {
      if (text[i] != ',') invalid("sizes: expected ',' after " + name + "=" + digits);
      ++i;
      skip_space();
    }
  }
  if (sizes.empty()) invalid("sizes: none given (expected NAME=VALUE,...)");
  return sizes;
}

namespace {

void collect_accesses_mut(Expr& e, std::vector<Expr*>& out) {
  if (e.kind == Expr::Kind::Access) out.push_back(&e);
  for (auto& a : e.args) collect_accesses_mut(a, out);
}

//! An access reading two axes as one run: the dimension of the first.
struct Run {
  Expr* access;
  size_t dim;
};

//! The accesses among `accesses` that mention a or b, each indexing [.., a, b, ..] with b over
//! the whole (unpadded) dimension; nullopt if one mentions them otherwise, or none does.
std::optional<std::vector<Run>> runs_of(const Workload& w, const std::vector<Expr*>& accesses, const Axis& a,
                                        const Axis& b) {
  std::vector<Run> runs;
  for (Expr* e : accesses) {
    std::optional<size_t> at;
    int mentions = 0;
    for (size_t d = 0; d < e->indices.size(); ++d) {
      mentions += e->indices[d].coeff_of(a.name) != 0 || e->indices[d].coeff_of(b.name) != 0;
      if (e->indices[d].plain_var() == a.name && d + 1 < e->indices.size() && e->indices[d + 1].plain_var() == b.name)
        at = d;
    }
    if (mentions == 0) continue;
    const Buffer& buf = w.buffers[w.buffer_index(e->name)];
    if (!at || mentions != 2 || buf.pad || buf.shape[*at + 1] != b.extent) return std::nullopt;
    runs.push_back({e, *at});
  }
  if (runs.empty()) return std::nullopt;
  return runs;
}

//! Whether the runs' tensors are read nowhere else (in any stage, nor written by one), each
//! at one dimension: only then can their view change.
bool read_only_as(const Workload& w, const std::vector<Run>& runs) {
  for (const Run& r : runs) {
    size_t everywhere = 0, here = 0;
    for (auto& st : w.stages) {
      if (w.buffers[st.output].name == r.access->name) return false;
      std::vector<const Expr*> all;
      collect_accesses(st.rhs, all);
      for (const Expr* x : all) everywhere += x->name == r.access->name;
    }
    for (const Run& x : runs) {
      here += x.access->name == r.access->name;
      if (x.access->name == r.access->name && x.dim != r.dim) return false;
    }
    if (everywhere != here) return false;
  }
  return true;
}

//! `name`, or with '_' appended until no stage has an axis of that name.
std::string fresh_axis_name(const Workload& w, std::string name) {
  auto taken = [&] {
    for (auto& st : w.stages)
      for (auto& x : st.axes)
        if (x.name == name) return true;
    return false;
  };
  while (taken()) name += "_";
  return name;
}

//! Merges one pair of reduction axes (a, b) of one stage whose every access indexes
//! [.., a, b, ..] with b over the whole dimension: offset a * B + b is then one index over a run
//! of A * B, and the tensors see the two dimensions as one. Only tensors no other access
//! reads (so their view changes nowhere else), unpadded (no read falls outside), qualify.
//! Returns whether it merged a pair.
bool merge_reduction_run(Workload& w) {
  for (Stage& st : w.stages) {
    std::vector<Expr*> accesses;
    collect_accesses_mut(st.rhs, accesses);
    for (size_t ai = 0; ai < st.axes.size(); ++ai)
      for (size_t bi = 0; bi < st.axes.size(); ++bi) {
        const Axis &a = st.axes[ai], &b = st.axes[bi];
        if (ai == bi || !a.reduce || !b.reduce) continue;
        auto runs = runs_of(w, accesses, a, b);
        if (!runs || !read_only_as(w, *runs)) continue;
        const std::string name = fresh_axis_name(w, a.name + "_" + b.name);
        std::set<std::string> reshaped;
        for (const Run& r : *runs) {
          auto& ix = r.access->indices;
          ix[r.dim] = IndexExpr{{{name, 1}}, 0, {}};
          ix.erase(ix.begin() + static_cast<std::ptrdiff_t>(r.dim) + 1);
          if (!reshaped.insert(r.access->name).second) continue;
          auto& shape = w.buffers[w.buffer_index(r.access->name)].shape;
          shape[r.dim] *= shape[r.dim + 1];
          shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(r.dim) + 1);
        }
        st.axes[ai] = Axis{name, a.extent * b.extent, true};
        st.axes.erase(st.axes.begin() + static_cast<std::ptrdiff_t>(bi));
        return true;
      }
  }
  return false;
}

}  // namespace

Workload bind(const OpDef& op, const Sizes& sizes) {
  Workload w;
  w.op = op;
  w.sizes = sizes;
  const std::set<std::string> used = size_symbols(op);
  for (auto& [name, v] : sizes)
    if (!used.count(name)) invalid("size '" + name + "' is not used by op '" + op.name + "'");
  std::vector<std::string> missing;
  for (auto& name : used)
    if (!sizes.count(name)) missing.push_back(name);
  if (!missing.empty()) {
    std::string list;
    for (auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    invalid("op '" + op.name + "' needs sizes that were not given: " + list);
  }
  for (auto& st : w.op.stmts) bind_sizes(st.rhs, sizes);

  auto add_buffer = [&](const TensorDecl& t, Buffer::Role role) {
    Buffer b{t.name, role, {}, {}, t.pad, t.dtype, t.constant};
    for (auto& d : t.dims) {
      std::int64_t v = eval(d, sizes);
      if (v < 1)
        invalid("tensor '" + t.name + "' dimension " + to_string(d) + " is " + std::to_string(v) +
                " with these sizes; it must be at least 1");
      b.shape.push_back(v);
    }
    b.declared_shape = b.shape;
    __int128 n = 1;
    for (auto d : b.shape) {
      n *= d;
      if (n > kMaxElements)
        invalid("tensor '" + t.name + "' would have more than 2^36 elements with " + w.sizes_text());
    }
    w.buffers.push_back(b);
  };
  for (auto& t : op.inputs) add_buffer(t, Buffer::Role::Input);
  for (auto& t : op.outputs) add_buffer(t, Buffer::Role::Output);
  for (auto& t : op.intermediates) add_buffer(t, Buffer::Role::Temp);

  for (auto& st : op.stmts) {
    Stage stage;
    stage.name = st.tensor;
    stage.output = w.buffer_index(st.tensor);
    stage.combine = st.combine;
    stage.rhs = st.rhs;
    bind_sizes(stage.rhs, sizes);
    for (auto& v : st.vars) {
      stage.axes.push_back({v.name, eval(v.extent, sizes), v.reduce});
      if (stage.axes.back().extent < 1)  // a 'where' range; tensor dimensions are checked above
        invalid("index '" + v.name + "' of statement " + st.tensor + " ranges below " + to_string(v.extent) + " = " +
                std::to_string(stage.axes.back().extent) + " with " + w.sizes_text() + "; it must be at least 1");
    }
    __int128 points = 1;
    for (auto& a : stage.axes) points *= a.extent;
    if (points > (static_cast<__int128>(1) << 50))
      invalid("statement " + st.tensor + " has more than 2^50 iteration points with " + w.sizes_text());
    // Every access must stay inside its tensor, or read a padded input: a window must
    // still overlap it (a read that never touches the tensor is a mistake, not padding).
    std::vector<const Expr*> accesses;
    collect_accesses(stage.rhs, accesses);
    for (size_t k = 0; k < accesses.size(); ++k) {
      const Expr* e = accesses[k];
      const Buffer& b = w.buffers[w.buffer_index(e->name)];
      for (size_t d = 0; d < e->indices.size(); ++d) {
        const IndexExpr& ix = e->indices[d];
        auto [lo, hi] = index_range(ix, stage.axes);
        if (!(b.pad ? (hi < 0 || lo >= b.shape[d]) : (lo < 0 || hi >= b.shape[d]))) continue;
        // The message shows the index as the op text wrote it (the same access of the unbound
        // statement), and its value where sizes were bound into it.
        std::vector<const Expr*> written;
        collect_accesses(st.rhs, written);
        const IndexExpr& as_written = written[k]->indices[d];
        const bool with_sizes = !as_written.sizes.empty();
        invalid(std::to_string(e->loc.line) + ":" + std::to_string(e->loc.column) + ": index " +
                to_string(as_written) + (with_sizes ? " (" + to_string(ix) + ")" : "") + " of '" + e->name +
                "' runs over [" + std::to_string(static_cast<long long>(lo)) + ", " +
                std::to_string(static_cast<long long>(hi)) + "] but that dimension has size " +
                std::to_string(b.shape[d]) + " with " + w.sizes_text() +
                (b.pad || b.role != Buffer::Role::Input
                     ? ""
                     : " (declare '" + b.name + ": ... pad VALUE' if reads outside it are meant)") +
                (with_sizes ? "; in an index a size's name means the size, not an index" : ""));
      }
    }
    w.stages.push_back(std::move(stage));
  }
  while (merge_reduction_run(w)) {
  }
  w.canonical_text = canonical(w.op, sizes);
  w.source_text = canonical(w.op, sizes, true);
  w.key = hash_hex(w.canonical_text);
  return w;
}

}  // namespace tiletune::ir
