#include "ir/op.hpp"

#include <cmath>
#include <cstdio>
#include <map>

namespace tiletune::ir {

std::string IndexExpr::plain_var() const {
  if (terms.size() == 1 && terms[0].coeff == 1 && constant == 0) return terms[0].var;
  return {};
}

std::int64_t IndexExpr::coeff_of(const std::string& var) const {
  for (auto& t : terms)
    if (t.var == var) return t.coeff;
  return 0;
}

int builtin_arity(const std::string& name) {
  static const std::map<std::string, int> arity = {{"exp", 1}, {"log", 1},     {"sqrt", 1},  {"tanh", 1},
                                                   {"abs", 1}, {"sigmoid", 1}, {"erf", 1},   {"max", 2},
                                                   {"min", 2}, {"pow", 2},     {"select", 3}};
  auto it = arity.find(name);
  return it == arity.end() ? -1 : it->second;
}

void collect_accesses(const Expr& e, std::vector<const Expr*>& out) {
  if (e.kind == Expr::Kind::Access) out.push_back(&e);
  for (auto& a : e.args) collect_accesses(a, out);
}

int count_ops(const Expr& e) {
  int n = (e.kind == Expr::Kind::Const || e.kind == Expr::Kind::Access || e.kind == Expr::Kind::Size) ? 0 : 1;
  for (auto& a : e.args) n += count_ops(a);
  return n;
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

std::string to_string(const IndexExpr& e) {
  std::string s;
  for (auto& t : e.terms) {
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
