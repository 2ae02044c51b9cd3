// A kernel's op text from its draft, and the elementwise functions of ONNX nodes that become
// epilogues: what may be fused after a kernel is decided by the operands' shapes against the
// kernel's output groups, not by the kernel's type.
#include "models/draft.hpp"

#include <cmath>
#include <cstdlib>
#include <set>

#include "ir/op.hpp"

namespace tiletune::models::detail {

namespace {

std::string join_axes(const std::vector<Group>& groups, bool sizes) {
  std::string s;
  for (auto& g : groups)
    for (auto& a : g.axes) s += (s.empty() ? "" : ", ") + (sizes ? a.size : a.index);
  return s;
}

//! A single term: no space outside brackets ("X[n, k]", "max(a, b)", "(a + b)", "2.0").
bool is_term(const std::string& x) {
  if (!x.empty() && x[0] == '-') return false;  // "a * -2.0" is written "a * (-2.0)"
  int depth = 0;
  for (char ch : x) {
    depth += ch == '(' || ch == '[' ? 1 : ch == ')' || ch == ']' ? -1 : 0;
    if (ch == ' ' && depth == 0) return false;
  }
  return true;
}

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end && *end == 0;
}

}  // namespace

std::string Draft::index() const { return "[" + join_axes(groups, false) + "]"; }
std::string Draft::dims() const { return join_axes(groups, true); }

std::string Draft::text(const std::string& epilogue) const {
  std::string decls;
  for (auto& d : inputs) decls += (decls.empty() ? "" : ", ") + d;
  std::string t = "op " + name + "(" + decls + ") -> Y: " + out_type + "[" + dims() + "] {\n";
  for (auto& l : lines) t += "  " + l + "\n";
  std::string ix = index();
  if (!reduce.empty() && epilogue == "@" && result == "acc" + ix)
    return t + "  Y" + ix + " " + reduce + (window.empty() ? "" : " where " + window) + "\n}\n";
  std::string ranges = window + (window.empty() || where.empty() ? "" : ", ") + where;
  if (!reduce.empty()) t += "  acc" + ix + " " + reduce + (ranges.empty() ? "" : " where " + ranges) + "\n";
  return t + "  Y" + ix + " = " + detail::apply(epilogue, result) + "\n}\n";
}

std::string apply(const std::string& f, const std::string& x) {
  std::string out;
  bool simple = is_term(x);
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '@') {
      out += f[i];
      continue;
    }
    // A whole argument of a call ("max(@, 0.0)") needs no parentheses either.
    bool argument = (i > 0 && f[i - 1] == '(') || (i > 1 && f.compare(i - 2, 2, ", ") == 0);
    argument &= i + 1 < f.size() && (f[i + 1] == ',' || f[i + 1] == ')');
    out += simple || argument ? x : "(" + x + ")";
  }
  return out;
}

std::optional<std::pair<std::string, std::string>> fit_operand(const Dims& shape, const Dims& out,
                                                               const std::vector<Group>& groups,
                                                               std::vector<bool>* included) {
  if (shape.size() > out.size()) return std::nullopt;
  const size_t lead = out.size() - shape.size();  // numpy broadcasting aligns the last dimensions
  Dims s(lead, 1);
  s.insert(s.end(), shape.begin(), shape.end());
  std::string dims, index;
  for (auto& g : groups) {
    // Whole where the tensor has the dimensions (a batch of 1 stays indexed); broadcast where
    // they are 1 or it lacks them.
    bool ones = true, whole = true;
    for (size_t d = g.first; d < g.end; ++d) {
      ones &= s[d] == 1;
      whole &= d >= lead && s[d] == out[d];
    }
    if (included) included->push_back(whole);
    if (!whole && ones) continue;
    if (!whole) return std::nullopt;
    for (auto& a : g.axes) {
      dims += (dims.empty() ? "" : ", ") + a.size;
      index += (index.empty() ? "" : ", ") + a.index;
    }
  }
  return std::make_pair(dims, index);
}

std::vector<Group> elementwise_groups(const Dims& out, const std::vector<Dims>& shapes,
                                      std::vector<std::pair<std::string, std::int64_t>>& sizes) {
  // A dimension's pattern: which operands have it whole (the others broadcast it).
  auto pattern = [&](size_t d) {
    std::vector<bool> p;
    for (auto& s : shapes) {
      size_t lead = out.size() - s.size();
      p.push_back(d >= lead && s[d - lead] == out[d]);
    }
    return p;
  };
  std::vector<Group> groups;
  std::vector<std::int64_t> extents;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) {
      groups.push_back({d, d + 1, {}});
      extents.push_back(1);
      continue;
    }
    if (!groups.empty() && !groups.back().axes.empty() && pattern(groups.back().first) == pattern(d)) {
      groups.back().end = d + 1;
      extents.back() *= out[d];
      continue;
    }
    groups.push_back({d, d + 1, {{"i" + std::to_string(d), ""}}});
    extents.push_back(out[d]);
  }
  // Sizes are named in order, E for a single axis (the flat form of the same-shape case).
  int axes = 0;
  for (auto& g : groups) axes += g.axes.empty() ? 0 : 1;
  int k = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i].axes.empty()) continue;
    std::string size = axes == 1 ? "E" : "E" + std::to_string(k);
    groups[i].axes[0] = {axes == 1 ? "i" : "i" + std::to_string(k), size};
    sizes.push_back({size, extents[i]});
    ++k;
  }
  return groups;
}

bool is_elementwise(const Node& n) {
  static const std::set<std::string> unary = {"Relu",      "Sigmoid", "Tanh", "Erf",        "Abs",       "Exp",
                                              "Log",       "Sqrt",    "Neg",  "Reciprocal", "LeakyRelu", "HardSigmoid",
                                              "HardSwish", "Elu",     "Selu", "Gelu",       "Softplus",  "Clip"};
  static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div", "Pow", "PRelu"};
  static const std::set<std::string> variadic = {"Max", "Min", "Sum", "Mean"};
  if (n.outputs.size() != 1) return false;
  if (unary.count(n.type) || variadic.count(n.type)) return !n.inputs.empty();
  if (n.type == "QuantizeLinear" || n.type == "DequantizeLinear") return n.inputs.size() == 2 || n.inputs.size() == 3;
  return binary.count(n.type) && n.inputs.size() == 2;
}

std::optional<std::string> elementwise_expr(const Node& n, const std::vector<std::string>& args) {
  if (!is_elementwise(n) || args.empty() || args[0].empty()) return std::nullopt;
  auto num = [](double v) { return ir::number_text(v); };
  const std::string& a = args[0];
  const std::string b = args.size() > 1 ? args[1] : "";
  auto f = [&](const std::string& t) { return detail::apply(t, a); };
  // Per-tensor quantization (the mapper takes scalar scales and zero points only): the store
  // into u8 or i8 rounds to nearest even and saturates, as QuantizeLinear does.
  const std::string c = args.size() > 2 ? args[2] : "";
  if (n.type == "QuantizeLinear") return "(" + a + " / " + b + (c.empty() ? "" : " + " + c) + ")";
  if (n.type == "DequantizeLinear") return "(" + (c.empty() ? a : "(" + a + " - " + c + ")") + " * " + b + ")";
  if (n.type == "Relu") return f("max(@, 0.0)");
  if (n.type == "Sigmoid") return f("sigmoid(@)");
  if (n.type == "Tanh") return f("tanh(@)");
  if (n.type == "Erf") return f("erf(@)");
  if (n.type == "Abs") return f("abs(@)");
  if (n.type == "Exp") return f("exp(@)");
  if (n.type == "Log") return f("log(@)");
  if (n.type == "Sqrt") return f("sqrt(@)");
  if (n.type == "Neg") return f("(-@)");
  if (n.type == "Reciprocal") return f("1.0 / @");
  if (n.type == "Softplus") return f("log(1.0 + exp(@))");
  if (n.type == "LeakyRelu") return f("select(@ > 0.0, @, @ * " + num(n.attr_f("alpha", 0.01f)) + ")");
  if (n.type == "Selu")
    return f(num(n.attr_f("gamma", 1.05070102f)) + " * select(@ > 0.0, @, " + num(n.attr_f("alpha", 1.67326319f)) +
             " * (exp(@) - 1.0))");
  if (n.type == "Elu") return f("select(@ > 0.0, @, " + num(n.attr_f("alpha", 1.0f)) + " * (exp(@) - 1.0))");
  if (n.type == "HardSigmoid")
    return f("min(max(@ * " + num(n.attr_f("alpha", 0.2f)) + " + " + num(n.attr_f("beta", 0.5f)) + ", 0.0), 1.0)");
  if (n.type == "HardSwish") return f("@ * min(max(@ * 0.16666667 + 0.5, 0.0), 1.0)");
  if (n.type == "Gelu") {
    if (n.attrs.count("approximate") && n.attrs.at("approximate").s == "tanh")
      return f("0.5 * @ * (1.0 + tanh(0.7978845608 * (@ + 0.044715 * @ * @ * @)))");
    return f("0.5 * @ * (1.0 + erf(@ * 0.70710678))");
  }
  if (n.type == "Clip") {
    // opset 11+: the bounds are optional inputs (literals here when constant); before: attributes.
    std::string lo = args.size() > 1 ? args[1] : "", hi = args.size() > 2 ? args[2] : "";
    if (n.attrs.count("min") || n.attrs.count("max")) {
      float l = n.attr_f("min", -INFINITY), h = n.attr_f("max", INFINITY);
      lo = std::isfinite(l) ? num(l) : "";
      hi = std::isfinite(h) ? num(h) : "";
    }
    std::string e = a;
    if (!lo.empty()) e = "max(" + e + ", " + lo + ")";
    if (!hi.empty()) e = "min(" + e + ", " + hi + ")";
    return e;
  }
  auto term = [](const std::string& x) { return is_term(x) ? x : "(" + x + ")"; };
  if (n.type == "Max" || n.type == "Min" || n.type == "Sum" || n.type == "Mean") {
    // Variadic: folded left; one input is itself.
    std::string e = a;
    for (size_t k = 1; k < args.size(); ++k) {
      if (args[k].empty()) return std::nullopt;
      e = n.type == "Max"   ? "max(" + e + ", " + args[k] + ")"
          : n.type == "Min" ? "min(" + e + ", " + args[k] + ")"
                            : e + " + " + term(args[k]);
    }
    if (n.type == "Mean" && args.size() > 1) e = "(" + e + ") / " + num(double(args.size()));
    return e;
  }
  if (b.empty()) return std::nullopt;
  if (n.type == "Add") return term(a) + " + " + term(b);
  if (n.type == "Sub") return term(a) + " - " + term(b);
  if (n.type == "Mul") return term(a) + " * " + term(b);
  if (n.type == "Div") return term(a) + " / " + term(b);
  if (n.type == "PRelu") return "select(" + term(a) + " > 0.0, " + a + ", " + term(a) + " * " + term(b) + ")";
  if (n.type == "Pow") {
    // Exponents exporters write as constants, without pow's exp(log(x)) (wrong for x < 0).
    const double e = is_number(b) ? std::strtod(b.c_str(), nullptr) : NAN;
    if (e == 1.0) return a;
    if (e == 2.0) return term(a) + " * " + term(a);
    if (e == 3.0) return term(a) + " * " + term(a) + " * " + term(a);
    if (e == 0.5) return "sqrt(" + a + ")";
    return "pow(" + a + ", " + b + ")";
  }
  return std::nullopt;
}

}  // namespace tiletune::models::detail
