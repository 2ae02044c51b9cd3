#include "ir/op.hpp"

#include <cmath>
#include <cstdio>
#include <map>

namespace tiletune::ir {

const std::string& IndexExpr::plain_var() const {
  static const std::string none;
  if (terms.size() == 1 && terms[0].coeff == 1 && constant == 0 && sizes.empty()) return terms[0].var;
  return none;
}

std::int64_t IndexExpr::coeff_of(const std::string& var) const {
  for (auto& t : terms)
    if (t.var == var) return t.coeff;
  return 0;
}

int builtin_arity(const std::string& name) {
  static const std::map<std::string, int> arity = {{"exp", 1},     {"log", 1},   {"sqrt", 1}, {"tanh", 1}, {"abs", 1},
                                                   {"sigmoid", 1}, {"erf", 1},   {"max", 2},  {"min", 2},  {"pow", 2},
                                                   {"select", 3},  {"round", 1}, {"f32", 1},  {"i32", 1}};
  auto it = arity.find(name);
  return it == arity.end() ? -1 : it->second;
}

ValueType join(ValueType a, ValueType b) {
  if (a.weak && b.weak) return {promote(a.type, b.type), true};
  if (a.weak) std::swap(a, b);  // b is the weak one, if either
  if (b.weak) return {b.type == DType::F32 ? DType::F32 : a.type, false};
  return {promote(a.type, b.type), false};
}

ValueType value_type(const Expr& e, const std::function<DType(const std::string&)>& tensor_type) {
  auto arg = [&](size_t i) { return value_type(e.args[i], tensor_type); };
  switch (e.kind) {
    case Expr::Kind::Const: {
      bool integral = e.value == std::floor(e.value) && std::fabs(e.value) < 2147483648.0;
      return {integral ? DType::I32 : DType::F32, true};
    }
    case Expr::Kind::Size:
      return {DType::I32, true};
    case Expr::Kind::Access:
      return {compute_type(tensor_type(e.name)), false};
    case Expr::Kind::Neg:
      return arg(0);
    case Expr::Kind::Add:
    case Expr::Kind::Sub:
    case Expr::Kind::Mul:
      return join(arg(0), arg(1));
    case Expr::Kind::Call:
      if (e.name == "f32") return {DType::F32, false};
      if (e.name == "i32") return {DType::I32, false};
      if (e.name == "abs") return arg(0);
      if (e.name == "max" || e.name == "min") return join(arg(0), arg(1));
      if (e.name == "select") return join(arg(1), arg(2));
      {
        bool weak = true;
        for (size_t i = 0; i < e.args.size(); ++i) weak = weak && arg(i).weak;
        return {DType::F32, weak};
      }
    default:  // division and comparisons
      return {DType::F32, arg(0).weak && arg(1).weak};
  }
}

bool is_cast(const Expr& e) { return e.kind == Expr::Kind::Call && (e.name == "f32" || e.name == "i32"); }

DType operand_type(const Expr& e, size_t i, DType t, const std::function<DType(const std::string&)>& tensor_type) {
  auto own = [&](size_t k) { return value_type(e.args[k], tensor_type); };
  switch (e.kind) {
    case Expr::Kind::Call:
      if (is_cast(e) || (e.name == "select" && i == 0)) return own(i).own();
      return t;
    case Expr::Kind::Lt:
    case Expr::Kind::Le:
    case Expr::Kind::Gt:
    case Expr::Kind::Ge:
    case Expr::Kind::Eq:
    case Expr::Kind::Ne:
      return join(own(0), own(1)).own();
    default:
      return t;
  }
}

void collect_accesses(const Expr& e, std::vector<const Expr*>& out) {
  // One allocation for a typical body's reads instead of one per doubling.
  if (out.capacity() == 0) out.reserve(8);
  for_each_access(e, [&](const Expr& a) { out.push_back(&a); });
}

bool access_uses(const Expr& access, const std::string& axis) {
  for (auto& ix : access.indices)
    if (ix.coeff_of(axis) != 0) return true;
  return false;
}

int count_ops(const Expr& e) {
  int n = (e.kind == Expr::Kind::Const || e.kind == Expr::Kind::Access || e.kind == Expr::Kind::Size) ? 0 : 1;
  for (auto& a : e.args) n += count_ops(a);
  return n;
}

double combine_identity(Combine c) {
  switch (c) {
    case Combine::Mul:
      return 1.0;
    case Combine::Max:
      return -INFINITY;
    case Combine::Min:
      return INFINITY;
    case Combine::Add:
    case Combine::Assign:
      return 0.0;
  }
  return 0.0;
}

const char* combine_token(Combine c) {
  switch (c) {
    case Combine::Assign:
      return "=";
    case Combine::Add:
      return "+=";
    case Combine::Mul:
      return "*=";
    case Combine::Max:
      return "max=";
    case Combine::Min:
      return "min=";
  }
  return "=";
}

std::string to_string(const SizeExpr& e) {
  switch (e.kind) {
    case SizeExpr::Kind::Const:
      return std::to_string(e.value);
    case SizeExpr::Kind::Symbol:
      return e.symbol;
    case SizeExpr::Kind::Add:
      return "(" + to_string(e.args[0]) + " + " + to_string(e.args[1]) + ")";
    case SizeExpr::Kind::Sub:
      return "(" + to_string(e.args[0]) + " - " + to_string(e.args[1]) + ")";
    case SizeExpr::Kind::Mul:
      return "(" + to_string(e.args[0]) + " * " + to_string(e.args[1]) + ")";
    case SizeExpr::Kind::Div:
      return "(" + to_string(e.args[0]) + " / " + to_string(e.args[1]) + ")";
  }
  return "?";
}

void collect_size_symbols(const SizeExpr& e, std::set<std::string>& out) {
  if (e.kind == SizeExpr::Kind::Symbol) out.insert(e.symbol);
  for (auto& a : e.args) collect_size_symbols(a, out);
}

std::set<std::string> size_symbols(const OpDef& op) {
  std::set<std::string> out;
  for (auto* list : {&op.inputs, &op.outputs})
    for (auto& t : *list)
      for (auto& d : t.dims) collect_size_symbols(d, out);
  return out;
}

std::string to_string(const IndexExpr& e) {
  std::string s;
  for (auto* list : {&e.terms, &e.sizes})
    for (auto& t : *list) {
      std::int64_t c = t.coeff;
      if (!s.empty()) {
        s += c < 0 ? " - " : " + ";
        c = c < 0 ? -c : c;
      } else if (c < 0) {
        s += "-";
        c = -c;
      }
      s += c == 1 ? t.var : std::to_string(c) + "*" + t.var;
    }
  if (e.constant != 0 || s.empty()) {
    if (s.empty()) return std::to_string(e.constant);
    s += e.constant < 0 ? " - " + std::to_string(-e.constant) : " + " + std::to_string(e.constant);
  }
  return s;
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

namespace {
const char* infix(Expr::Kind k) {
  switch (k) {
    case Expr::Kind::Add:
      return " + ";
    case Expr::Kind::Sub:
      return " - ";
    case Expr::Kind::Mul:
      return " * ";
    case Expr::Kind::Div:
      return " / ";
    case Expr::Kind::Lt:
      return " < ";
    case Expr::Kind::Le:
      return " <= ";
    case Expr::Kind::Gt:
      return " > ";
    case Expr::Kind::Ge:
      return " >= ";
    case Expr::Kind::Eq:
      return " == ";
    case Expr::Kind::Ne:
      return " != ";
    default:
      return " ? ";
  }
}
}  // namespace

std::string to_string(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Const:
      return number_text(e.value);
    case Expr::Kind::Size:
      return e.name;
    case Expr::Kind::Access: {
      std::string s = e.name + "[";
      for (size_t i = 0; i < e.indices.size(); ++i) s += (i ? ", " : "") + to_string(e.indices[i]);
      return s + "]";
    }
    case Expr::Kind::Neg:
      return "(-" + to_string(e.args[0]) + ")";
    case Expr::Kind::Call: {
      std::string s = e.name + "(";
      for (size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + to_string(e.args[i]);
      return s + ")";
    }
    default:
      return "(" + to_string(e.args[0]) + infix(e.kind) + to_string(e.args[1]) + ")";
  }
}

std::string pad_text(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace tiletune::ir
