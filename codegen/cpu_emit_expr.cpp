// Addresses, loads (guarded on border tiles) and values of expressions at a register point,
// and the C++ text helpers for constants, conversions and reductions.
#include "codegen/cpu_emit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

namespace tiletune::codegen::cpu_emit {

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
std::string convert(const std::string& code, DType from, DType to, bool vec) {
  if (from == to) return code;
  if (to == DType::F32) return std::string(vec ? "tt_vto_f32(" : "tt_to_f32(") + code + ")";
  return std::string(vec ? "tt_vto_i32(" : "tt_to_i32(") + code + ")";
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

std::string Emitter::block_end(const std::string& start, std::int64_t block, std::int64_t extent) {
  return codegen::block_end(start, block, extent, "tt_imin");
}

std::string Emitter::as_storage(size_t b, const std::string& ptr) const {
  return w_.buffers[b].dtype == DType::F32 ? ptr : "(" + storage(b) + "*)(" + ptr + ")";
}

std::string Emitter::dtype_note(size_t b) const {
  return w_.buffers[b].dtype == DType::F32 ? "" : std::string(ir::dtype_name(w_.buffers[b].dtype)) + " ";
}

std::string Emitter::read(size_t b, const std::string& addr) const {
  return w_.buffers[b].dtype == DType::F32 ? addr : "(" + std::string(scalar_type(compute(b))) + ")" + addr;
}

std::string Emitter::shape(size_t b) const {
  std::string s = "[";
  for (size_t i = 0; i < w_.buffers[b].shape.size(); ++i) s += (i ? ", " : "") + std::to_string(w_.buffers[b].shape[i]);
  return s + "]";
}

const std::string& Emitter::var(const std::string& axis, int level) {
  auto key = std::make_pair(axis, level);
  auto it = loop_var_.find(key);
  if (it == loop_var_.end()) it = loop_var_.emplace(key, fresh(axis + std::to_string(level))).first;
  return it->second;
}

std::string Emitter::element(const std::string& tensor, const std::vector<ir::IndexExpr>& indices, const Point& p) {
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

std::string Emitter::register_base(const std::string& axis) {
  for (auto& l : sn_->reg)
    if (l.axis == axis) return var(l.axis, l.level - 1);
  return "";
}

bool Emitter::lane_invariant(const Expr& e) const {
  if (e.kind == Expr::Kind::Access) return e.name != st_->name && vector_coeff(e) == 0;
  for (auto& a : e.args)
    if (!lane_invariant(a)) return false;
  return true;
}

std::int64_t Emitter::vector_coeff(const Expr& access) const {
  for (auto& ix : access.indices)
    if (std::int64_t c = ix.coeff_of(sn_->vector_axis)) return c;
  return 0;
}

std::string Emitter::index_at(const ir::IndexExpr& ix, const Point& p) {
  Linear lin;
  lin.constant = ix.constant;
  for (auto& t : ix.terms) {
    const AxisValue& v = p.at(t.var);
    lin.add(v.var, t.coeff);
    lin.constant += t.coeff * v.offset;
  }
  return lin.str();
}

std::string Emitter::guarded_load(const Expr& e, const Point& p, bool vec, const std::string& addr,
                                  const std::string& load) {
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
                                     : "tt_load_rows_pad(&" + addr + ", " + std::to_string(stride) + ", " + row_start +
                                           ", " + std::to_string(buf.shape.back()) + ", " + pad + ")";
  if (cond.empty()) return inside;
  return "(" + cond + " ? " + inside + " : " + (vec ? splat(t) + pad + ")" : pad) + ")";
}

std::string Emitter::interior_condition() {
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

std::string Emitter::value(const Expr& e, const Point& p, bool vec, Block& blk, const std::string& acc_value,
                           DType want) {
  ir::ValueType vt = w_.value_type(e);
  DType t = vt.in(want);
  return convert(node(e, t, p, vec, blk, acc_value), t, want, vec);
}

std::string Emitter::node(const Expr& e, DType t, const Point& p, bool vec, Block& blk, const std::string& acc_value) {
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
      blk.loads.push_back(std::string("const ") + (vec ? vector_type(t) : scalar_type(t)) + " " + name + " = " + load +
                          ";");
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

void Emitter::flush(int depth, Block& blk) {
  for (auto& l : blk.loads) line(depth, l);
  blk.loads.clear();
}

}  // namespace tiletune::codegen::cpu_emit
