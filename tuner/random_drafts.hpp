// tuner/random_drafts.hpp — inside the op generator (random_ops.cpp and random_constructs.cpp):
// the random draws its families share and the draft an op is written as before its sizes are
// bound. Not for callers: they take GeneratedOp from random_ops.hpp.
#pragma once
#include <cctype>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace tiletune::tuner::drafts {

using Rng = std::mt19937_64;

inline int uniform(Rng& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
inline bool chance(Rng& rng, double p) { return std::bernoulli_distribution(p)(rng); }
template <typename T>
const T& pick(Rng& rng, const std::vector<T>& v) {
  return v[static_cast<std::size_t>(uniform(rng, 0, static_cast<int>(v.size()) - 1))];
}

inline std::string upper(const std::string& s) {
  std::string out = s;
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

inline std::string join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string out;
  for (auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

inline std::string access(const std::string& tensor, const std::vector<std::string>& idx) {
  return tensor + "[" + join(idx) + "]";
}

//! The size names of indices: "m" is bounded by "M".
inline std::vector<std::string> sizes_of(const std::vector<std::string>& idx) {
  std::vector<std::string> out;
  for (auto& i : idx) out.push_back(upper(i));
  return out;
}

//! An elementwise activation of `x` from the builtins, as networks use them.
std::string activation(Rng& rng, const std::string& x);
//! A random expression of the leaves, depth at most `depth`, finite for inputs in [-1, 1].
std::string expression(Rng& rng, const std::vector<std::string>& leaves, int depth);

//! A sliding window's geometry: `taps` taps `dilation` apart, moved `stride` per output, over
//! an input padded by `pad` on each side.
struct WindowShape {
  int taps, stride, dilation, pad;

  //! The input coordinate output `o` reads at tap `w`: "2 * y + u - 1".
  std::string coord(const std::string& o, const std::string& w) const {
    std::string e = (stride > 1 ? std::to_string(stride) + " * " : "") + o;
    e += " + " + (dilation > 1 ? std::to_string(dilation) + " * " : "") + w;
    if (pad > 0) e += " - " + std::to_string(pad);
    return e;
  }
  //! The output's extent over an input of `size`: (size + 2 pad - dilation (taps - 1) - 1) / stride + 1.
  std::string extent(const std::string& size) const {
    const int shift = 2 * pad - dilation * (taps - 1) - 1 + stride;
    std::string e = shift < 0 ? size + " - " + std::to_string(-shift) : size + " + " + std::to_string(shift);
    return stride > 1 ? "(" + e + ") / " + std::to_string(stride) : e;
  }
};

//! An op's text before sizes: its signature and statements, and the size ranges of its free
//! dimensions (the others fixed).
struct Draft {
  std::string kind;
  std::vector<std::string> params;  // "A: f32[M, K]"
  std::string result;               // "C: f32[M, N]", or "(Y1: f32[N], Y2: f32[N])"
  std::vector<std::string> body;
  std::map<std::string, std::pair<int, int>> free;  // size -> [lo, hi]
  std::map<std::string, std::int64_t> fixed;

  std::string text(const std::string& name) const {
    std::string out = "op " + name + "(" + join(params) + ") -> " + result + " {\n";
    for (auto& s : body) out += "  " + s + "\n";
    return out + "}\n";
  }
};

// The families of random_constructs.cpp: the language's constructs the first families leave out.
Draft axes_reduction(Rng& rng);
Draft channels_last_window(Rng& rng);
Draft parts(Rng& rng);
Draft narrow_types(Rng& rng);
Draft broadcast(Rng& rng);

}  // namespace tiletune::tuner::drafts
