// codegen/c_text.hpp — internal to codegen/: pieces of C-family source text the emitters share.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace tiletune::codegen {

//! A linear combination of C++ variables plus a constant, printed as `m1 * 512 + k1 + 3`.
struct Linear {
  std::vector<std::pair<std::string, std::int64_t>> terms;
  std::int64_t constant = 0;
  void add(const std::string& var, std::int64_t c) {
    if (c == 0) return;
    for (auto& t : terms)
      if (t.first == var) {
        t.second += c;
        return;
      }
    terms.emplace_back(var, c);
  }
  std::string str() const {
    std::string s;
    auto sorted = terms;  // largest stride first: m1 * 512 + k1
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return std::abs(a.second) > std::abs(b.second); });
    for (auto& [v, c] : sorted) {
      if (c == 0) continue;
      if (!s.empty()) s += c < 0 ? " - " : " + ";
      else if (c < 0) s += "-";
      std::int64_t a = c < 0 ? -c : c;
      s += a == 1 ? v : v + " * " + std::to_string(a);
    }
    if (s.empty()) return std::to_string(constant);
    if (constant > 0) s += " + " + std::to_string(constant);
    if (constant < 0) s += " - " + std::to_string(-constant);
    return s;
  }
};

inline std::string float_literal(double v) {
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

}  // namespace tiletune::codegen
