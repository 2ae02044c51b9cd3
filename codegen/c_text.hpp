// codegen/c_text.hpp — internal to codegen/: pieces of C-family source text the emitters share.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/op.hpp"

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
      if (!s.empty())
        s += c < 0 ? " - " : " + ";
      else if (c < 0)
        s += "-";
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

//! The C operator of a binary arithmetic or comparison node, spaced (" + ", " < ").
inline const char* c_operator(ir::Expr::Kind k) {
  switch (k) {
    case ir::Expr::Kind::Add:
      return " + ";
    case ir::Expr::Kind::Sub:
      return " - ";
    case ir::Expr::Kind::Mul:
      return " * ";
    case ir::Expr::Kind::Div:
      return " / ";
    case ir::Expr::Kind::Lt:
      return " < ";
    case ir::Expr::Kind::Le:
      return " <= ";
    case ir::Expr::Kind::Gt:
      return " > ";
    case ir::Expr::Kind::Ge:
      return " >= ";
    case ir::Expr::Kind::Eq:
      return " == ";
    case ir::Expr::Kind::Ne:
      return " != ";
    default:
      return " ? ";
  }
}

//! End of a block of `block` points starting at `start` along an axis of `extent`: the
//! bound needs a minimum (`min`, the dialect's) only where the extent is not a multiple of
//! the block.
inline std::string block_end(const std::string& start, std::int64_t block, std::int64_t extent, const char* min) {
  std::string end = start + " + " + std::to_string(block);
  return extent % block == 0 ? end : std::string(min) + "(" + end + ", " + std::to_string(extent) + ")";
}

//! The names of a generated kernel's variables. They cannot collide with anything the kernel
//! calls or includes, by construction rather than by a list: every variable is `tt_` + a base
//! (a user's tensor or axis name, or the emitter's word) + `_`. `tt_` is tiletune's own prefix,
//! which no C, C++, libm, OpenMP, OpenCL or CUDA header uses and which the tile-op language
//! refuses in user names; the fixed names of the preludes and emitters (`tt_load`, `tt_tensors`,
//! `TT_LANES`, ...) never end in `_` (a test reads the preludes for it), and variables do.
class LocalNames {
 public:
  //! A new name from `base`, unique in this kernel: `tt_A_`, then `tt_A2_`, `tt_A3_`, ...
  std::string fresh(const std::string& base) {
    std::string name = candidate(base);
    used_.insert(name);
    return name;
  }
  //! The name fresh(base) would give, without taking it (for block-local names).
  std::string candidate(const std::string& base) const {
    std::string name = "tt_" + base + "_";
    for (int k = 2; used_.count(name); ++k) name = "tt_" + base + std::to_string(k) + "_";
    return name;
  }
  void release(const std::string& name) { used_.erase(name); }
  //! For names that live in a scope: save before it, restore after.
  std::set<std::string> snapshot() const { return used_; }
  void restore(std::set<std::string> names) { used_ = std::move(names); }
  void clear() { used_.clear(); }

 private:
  std::set<std::string> used_;
};

}  // namespace tiletune::codegen
