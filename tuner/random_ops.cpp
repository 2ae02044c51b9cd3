#include "tuner/random_ops.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <vector>

#include "ir/parse.hpp"
#include "ir/workload.hpp"
#include "support/error.hpp"
#include "tuner/random_drafts.hpp"

namespace tiletune::tuner {

namespace drafts {

//! An elementwise activation of `x` from the builtins, as networks use them.
std::string activation(Rng& rng, const std::string& x) {
  switch (uniform(rng, 0, 7)) {
    case 0: return "max(" + x + ", 0.0)";
    case 1: return "tanh(" + x + ")";
    case 2: return x + " * sigmoid(" + x + ")";
    case 3: return "0.5 * " + x + " * (1.0 + erf(" + x + " * 0.70710678))";
    case 4: return "min(max(" + x + ", 0.0), 6.0)";
    case 5: return "select(" + x + " < 0.0, 0.1 * " + x + ", " + x + ")";
    case 6: return x + " * min(max(" + x + " + 3.0, 0.0), 6.0) / 6.0";
    default: return "sigmoid(" + x + ")";
  }
}

//! A random expression of the leaves, depth at most `depth`, finite for inputs in [-1, 1].
std::string expression(Rng& rng, const std::vector<std::string>& leaves, int depth) {
  if (depth == 0 || chance(rng, 0.25)) {
    if (chance(rng, 0.15)) return std::to_string(uniform(rng, 1, 9)) + ".0";
    return pick(rng, leaves);
  }
  std::string a = expression(rng, leaves, depth - 1);
  switch (uniform(rng, 0, 11)) {
    case 0: return "exp(" + a + ")";
    case 1: return "log(1.0 + abs(" + a + "))";
    case 2: return "sqrt(abs(" + a + ") + 1.0)";
    case 3: return "pow(abs(" + a + "), 1.5)";
    case 4: return activation(rng, a);
    case 5: return "abs(" + a + ")";
    case 6: return "(" + a + " + " + expression(rng, leaves, depth - 1) + ")";
    case 7: return "(" + a + " - " + expression(rng, leaves, depth - 1) + ")";
    case 8: return a + " * " + expression(rng, leaves, depth - 1);
    case 9: return "max(" + a + ", " + expression(rng, leaves, depth - 1) + ")";
    case 10: return "min(" + a + ", " + expression(rng, leaves, depth - 1) + ")";
    default: {
      std::string b = expression(rng, leaves, depth - 1);
      return "select(" + a + " < " + b + ", " + a + ", " + b + ")";
    }
  }
}

}  // namespace drafts

namespace {

using namespace drafts;

Draft contraction(Rng& rng) {
  Draft d;
  d.kind = "contraction";
  std::vector<std::string> batch, m = {"m"}, n = {"n"}, k = {"k"};
  if (chance(rng, 0.35)) batch.push_back("g");
  if (chance(rng, 0.2)) m.push_back("p");
  if (chance(rng, 0.2)) k.push_back("l");
  auto shuffled = [&](std::vector<std::string> v, double keep) {
    if (!chance(rng, keep)) std::shuffle(v.begin(), v.end(), rng);
    return v;
  };
  auto cat = [](std::vector<std::string> a, const std::vector<std::string>& b, const std::vector<std::string>& c) {
    a.insert(a.end(), b.begin(), b.end());
    a.insert(a.end(), c.begin(), c.end());
    return a;
  };
  std::vector<std::string> a_idx = shuffled(cat(batch, m, k), 0.4), b_idx = shuffled(cat(batch, k, n), 0.4);
  std::vector<std::string> c_idx = shuffled(cat(batch, m, n), 0.8);
  d.params = {"A: f32[" + join(sizes_of(a_idx)) + "]", "B: f32[" + join(sizes_of(b_idx)) + "]"};
  bool bias = chance(rng, 0.4), epilogue = bias || chance(rng, 0.3);
  if (bias) d.params.push_back("bias: f32[N]");
  d.result = "C: f32[" + join(sizes_of(c_idx)) + "]";
  std::string product = access("A", a_idx) + " * " + access("B", b_idx);
  if (!epilogue) {
    d.body = {access("C", c_idx) + " += " + product};
  } else {
    std::string acc = access("acc", c_idx) + (bias ? " + bias[n]" : "");
    d.body = {access("acc", c_idx) + " += " + product, access("C", c_idx) + " = " + activation(rng, acc)};
  }
  for (auto& i : batch) d.free[upper(i)] = {1, 16};
  for (auto& i : m) d.free[upper(i)] = {8, m.size() > 1 ? 64 : 768};
  for (auto& i : n) d.free[upper(i)] = {8, 768};
  for (auto& i : k) d.free[upper(i)] = {4, k.size() > 1 ? 64 : 768};
  return d;
}

Draft elementwise(Rng& rng) {
  Draft d;
  d.kind = "elementwise";
  std::vector<std::string> idx = {"n", "d"};
  if (chance(rng, 0.3)) idx.insert(idx.begin(), "b");
  std::vector<std::string> out = idx;
  if (chance(rng, 0.3)) std::shuffle(out.begin(), out.end(), rng);  // a layout change
  d.params = {"X: f32[" + join(sizes_of(idx)) + "]"};
  std::vector<std::string> leaves = {access("X", idx)};
  if (chance(rng, 0.5)) {
    d.params.push_back("Z: f32[D]");
    leaves.push_back("Z[d]");
  } else if (chance(rng, 0.5)) {
    d.params.push_back("Z: f32[" + join(sizes_of(idx)) + "]");
    leaves.push_back(access("Z", idx));
  }
  d.result = "Y: f32[" + join(sizes_of(out)) + "]";
  d.body = {access("Y", out) + " = " + expression(rng, leaves, uniform(rng, 1, 3))};
  for (auto& i : idx) d.free[upper(i)] = {i == "b" ? 2 : 16, i == "b" ? 16 : 2048};
  return d;
}

Draft reduction(Rng& rng) {
  Draft d;
  d.kind = "reduction";
  bool middle = chance(rng, 0.3);  // reduce the middle axis of [A, R, B] instead of the last
  std::vector<std::string> in = middle ? std::vector<std::string>{"a", "r", "b"} : std::vector<std::string>{"n", "d"};
  std::vector<std::string> row = middle ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"n"};
  std::string x = access("X", in);
  std::string op = chance(rng, 0.7) ? "+=" : (chance(rng, 0.5) ? "max=" : "min=");
  std::string term = op == "+=" ? pick(rng, std::vector<std::string>{x, x + " * " + x, "exp(" + x + ")",
                                                                    "abs(" + x + ")"})
                                : x;
  d.params = {"X: f32[" + join(sizes_of(in)) + "]"};
  std::string s = access("s", row);
  d.body = {s + " " + op + " " + term};
  if (chance(rng, 0.6)) {
    // A second stage that normalises each element by its row's reduction.
    std::string reduced = upper(in[1]);
    std::string norm = pick(rng, std::vector<std::string>{
                                     x + " / (" + s + " + " + reduced + ")",
                                     x + " / sqrt(abs(" + s + ") / " + reduced + " + 0.001)",
                                     "exp(" + x + " - " + s + ")",
                                     x + " - " + s + " / " + reduced,
                                 });
    d.result = "Y: f32[" + join(sizes_of(in)) + "]";
    d.body.push_back(access("Y", in) + " = " + norm);
  } else {
    d.result = "Y: f32[" + join(sizes_of(row)) + "]";
    d.body[0] = access("Y", row) + " " + op + " " + term;
  }
  for (auto& i : in) d.free[upper(i)] = {i == "a" ? 2 : 8, i == "a" ? 64 : 2048};
  return d;
}

Draft window(Rng& rng) {
  Draft d;
  d.kind = "window";
  int r = pick(rng, std::vector<int>{1, 2, 3, 3, 5}), stride = pick(rng, std::vector<int>{1, 1, 2});
  int dilation = r > 1 && stride == 1 && chance(rng, 0.2) ? 2 : 1;
  int pad = chance(rng, 0.6) ? dilation * (r - 1) / 2 : 0;
  bool conv = chance(rng, 0.55);
  bool depthwise = conv && chance(rng, 0.35);
  const WindowShape geometry{r, stride, dilation, pad};
  std::string pad_value = conv ? "0" : "-inf";
  std::string x_access = "I[n, c, " + geometry.coord("y", "u") + ", " + geometry.coord("x", "v") + "]";
  std::string in_decl = "I: f32[N, C, H, W]" + (pad > 0 ? " pad " + pad_value : std::string());
  std::string shape = geometry.extent("H") + ", " + geometry.extent("W");
  if (!conv) {
    std::string op = chance(rng, 0.6) ? "max=" : "+=";
    if (op == "+=") in_decl = "I: f32[N, C, H, W]" + (pad > 0 ? std::string(" pad 0") : std::string());
    d.params = {in_decl};
    d.result = "O: f32[N, C, " + shape + "]";
    std::string where = " where u < " + std::to_string(r) + ", v < " + std::to_string(r);
    d.body = {"O[n, c, y, x] " + op + " " + x_access + where};
    d.free = {{"C", {4, 256}}, {"H", {8, 112}}};
  } else if (depthwise) {
    d.params = {in_decl, "F: f32[C, U, V]"};
    d.result = "O: f32[N, C, " + shape + "]";
    d.body = {"O[n, c, y, x] += " + x_access + " * F[c, u, v]"};
    d.free = {{"C", {8, 256}}, {"H", {8, 112}}};
    d.fixed = {{"U", r}, {"V", r}};
  } else {
    d.params = {in_decl, "F: f32[K, C, U, V]"};
    d.result = "O: f32[N, K, " + shape + "]";
    d.body = {"O[n, k, y, x] += " + x_access + " * F[k, c, u, v]"};
    d.free = {{"C", {3, 256}}, {"K", {8, 256}}, {"H", {8, 64}}};
    d.fixed = {{"U", r}, {"V", r}};
  }
  if (chance(rng, 0.3) && conv) {
    // An activation on the output: the convolution into a temporary, then the epilogue.
    std::string o = d.body[0].substr(0, d.body[0].find(' '));
    std::string acc = "acc" + o.substr(1);
    d.body = {acc + d.body[0].substr(o.size()), o + " = " + activation(rng, acc)};
  }
  d.fixed["N"] = 1;
  return d;
}

//! A network block of several stages: an input's rows pass through two or three steps, each a
//! projection (optionally gated, with a prologue on its operand or a bias and activation after
//! it, its weights in either layout, shared or per batch), a normalisation of each row (softmax,
//! layer norm, RMS norm, a sigmoid gate by the row's mean) or an elementwise function. So the
//! corpus holds ops of several contractions, and contractions followed by stages that cannot
//! fuse into them, built from the same constructs as the single-stage kinds.
Draft composite(Rng& rng) {
  Draft d;
  d.kind = "composite";
  std::vector<std::string> rows = {"m"};
  const bool batched = chance(rng, 0.35);
  if (batched) rows.insert(rows.begin(), "g");
  auto with = [&](const std::string& feature) {
    std::vector<std::string> v = rows;
    v.push_back(feature);
    return v;
  };
  std::vector<std::string> input = with("k");
  if (chance(rng, 0.3)) std::shuffle(input.begin(), input.end(), rng);  // stored another way round
  d.params = {"X: f32[" + join(sizes_of(input)) + "]"};
  for (auto& r : rows) d.free[upper(r)] = {r == "g" ? 1 : 8, r == "g" ? 16 : 512};
  d.free["K"] = {8, 1024};

  // The value flowing through the steps: how to read it at (rows, feature).
  std::string feature = "k";
  std::string current = access("X", input);
  int temps = 0, params = 0;
  auto temp = [&] { return "v" + std::to_string(++temps); };
  auto param = [&](const std::string& base) { return base + std::to_string(++params); };
  std::string last;  // the tensor the last statement wrote
  auto emit = [&](const std::string& lhs_name, const std::string& op, const std::string& rhs,
                  const std::vector<std::string>& idx) {
    d.body.push_back(access(lhs_name, idx) + " " + op + " " + rhs);
    last = lhs_name;
    return access(lhs_name, idx);
  };
  const std::vector<std::string> features = {"n", "p", "q"};
  int projections = 0;

  auto project = [&] {
    const std::string next = features[static_cast<std::size_t>(projections++)];
    d.free[upper(next)] = chance(rng, 0.25) ? std::pair<int, int>{4, 64} : std::pair<int, int>{8, 1024};
    const bool prologue = chance(rng, 0.25);  // an activation applied to the operand as it is read
    const std::string operand = prologue ? "(" + activation(rng, current) + ")" : current;
    auto weight = [&] {
      std::string w = param("W");
      std::vector<std::string> idx = chance(rng, 0.5) ? std::vector<std::string>{feature, next}
                                                      : std::vector<std::string>{next, feature};
      if (batched && chance(rng, 0.4)) idx.insert(idx.begin(), "g");  // per batch, as attention's keys
      d.params.push_back(w + ": f32[" + join(sizes_of(idx)) + "]");
      return access(w, idx);
    };
    auto out = with(next);
    const std::string product = operand + " * ";
    if (chance(rng, 0.3)) {
      // Gated: two projections of the same rows, one through an activation, multiplied.
      std::string a = emit(temp(), "+=", product + weight(), out);
      std::string b = emit(temp(), "+=", product + weight(), out);
      current = emit(temp(), "=", "(" + activation(rng, a) + ") * " + b, out);
    } else if (chance(rng, 0.3)) {
      std::string acc = emit(temp(), "+=", product + weight(), out);
      std::string bias = param("bias");
      d.params.push_back(bias + ": f32[" + upper(next) + "]");
      current = emit(temp(), "=", activation(rng, "(" + acc + " + " + bias + "[" + next + "])"), out);
    } else {
      current = emit(temp(), "+=", product + weight(), out);
    }
    feature = next;
  };

  auto normalise = [&] {
    const std::string size = upper(feature);
    auto out = with(feature);
    switch (uniform(rng, 0, 3)) {
      case 0: {  // softmax
        std::string mx = emit(temp(), "max=", current, rows);
        std::string e = emit(temp(), "=", "exp(" + current + " - " + mx + ")", out);
        std::string z = emit(temp(), "+=", e, rows);
        current = emit(temp(), "=", e + " / " + z, out);
        break;
      }
      case 1: {  // layer norm
        std::string s = emit(temp(), "+=", current, rows);
        std::string c = emit(temp(), "=", current + " - " + s + " / " + size, out);
        std::string v = emit(temp(), "+=", c + " * " + c, rows);
        current = emit(temp(), "=", c + " / sqrt(" + v + " / " + size + " + 0.00001)", out);
        break;
      }
      case 2: {  // RMS norm with a per-feature scale
        std::string v = emit(temp(), "+=", current + " * " + current, rows);
        std::string gamma = param("gamma");
        d.params.push_back(gamma + ": f32[" + size + "]");
        current = emit(temp(), "=", current + " / sqrt(" + v + " / " + size + " + 0.00001) * " + gamma + "[" +
                                        feature + "]",
                       out);
        break;
      }
      default: {  // a gate by the row's mean, as squeeze-and-excitation scales channels
        std::string s = emit(temp(), "+=", current, rows);
        current = emit(temp(), "=", current + " * sigmoid(" + s + " / " + size + ")", out);
        break;
      }
    }
  };

  auto elementwise_step = [&] {
    std::vector<std::string> leaves = {current};
    const std::string z = "Z" + std::to_string(params + 1);
    if (chance(rng, 0.5)) leaves.push_back(z + "[" + feature + "]");
    // The expressions stay finite for inputs in [-1, 1], which a projection's outputs (sums of
    // K products) are not: after one, an activation.
    std::string value = projections > 0 || chance(rng, 0.5) ? activation(rng, current) : expression(rng, leaves, 2);
    // A stage that copies its input, or drops it, is no stage: make the value depend on it.
    if (value == current) value = activation(rng, current);
    if (value.find(current) == std::string::npos) value = current + " * (" + value + ")";
    if (value.find(z + "[") != std::string::npos) d.params.push_back(param("Z") + ": f32[" + upper(feature) + "]");
    current = emit(temp(), "=", value, with(feature));
  };

  const int steps = uniform(rng, 2, 3);
  for (int step = 0; step < steps; ++step) {
    const int roll = uniform(rng, 0, 9);  // at most three steps, so never more projections than `features`
    if (step == 0 ? roll < 7 : roll < 4) {
      project();
    } else if (roll < 8 || step == 0) {
      normalise();
    } else {
      elementwise_step();
    }
  }
  // Only now is it known which temporary is the op's result.
  const std::regex result("\\b" + last + "\\[");
  for (auto& s : d.body) s = std::regex_replace(s, result, "Y[");
  d.result = "Y: f32[" + join(sizes_of(with(feature))) + "]";
  return d;
}

//! Sizes for the draft's free dimensions: log-uniform in their ranges (W follows H), halved or
//! doubled until the op's arithmetic is within [max_flops / 1000, max_flops].
std::optional<std::string> bind_sizes(Rng& rng, const Draft& d, const ir::OpDef& def, double max_flops) {
  std::map<std::string, std::int64_t> sizes;
  for (auto& [name, range] : d.free) {
    double lo = std::log(range.first), hi = std::log(range.second);
    sizes[name] = std::max<std::int64_t>(
        1, std::llround(std::exp(std::uniform_real_distribution<double>(lo, hi)(rng))));
  }
  if (sizes.count("H")) sizes["W"] = std::max<std::int64_t>(1, sizes["H"] + uniform(rng, -2, 2));
  for (auto& [name, v] : d.fixed) sizes[name] = v;
  auto text = [&] {
    std::vector<std::string> parts;
    for (auto& [name, v] : sizes) parts.push_back(name + "=" + std::to_string(v));
    return join(parts, ",");
  };
  for (int attempt = 0; attempt < 40; ++attempt) {
    try {
      ir::Workload w = ir::bind(def, ir::parse_sizes(text()));
      double f = w.flops();
      if (f <= max_flops && f >= max_flops / 1000) return text();
      std::string grow;
      std::int64_t best = f > max_flops ? 0 : std::numeric_limits<std::int64_t>::max();
      for (auto& [name, range] : d.free) {
        std::int64_t v = sizes[name];
        if (f > max_flops ? v > best && v > 1 : v < best) best = v, grow = name;
      }
      if (grow.empty()) return std::nullopt;
      sizes[grow] = f > max_flops ? std::max<std::int64_t>(1, sizes[grow] / 2) : sizes[grow] * 2;
      if (grow == "H") sizes["W"] = f > max_flops ? std::max<std::int64_t>(1, sizes["W"] / 2) : sizes["W"] * 2;
    } catch (const Error&) {
      // Windows larger than a small input: grow the input.
      if (!sizes.count("H")) return std::nullopt;
      sizes["H"] += 4;
      sizes["W"] += 4;
    }
  }
  return std::nullopt;
}

//! The `index`th op `draft` draws from `seed`'s stream (`stream` tells the families' streams
//! apart), named after its kind.
GeneratedOp draw(const char* function, std::uint64_t seed, std::uint64_t stream, int index, double max_flops,
                 const std::function<Draft(Rng&)>& draft) {
  Rng rng((seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(index)) ^ stream);
  for (int attempt = 0; attempt < 100; ++attempt) {
    Draft d = draft(rng);
    GeneratedOp op;
    op.kind = d.kind;
    op.name = "gen_" + d.kind.substr(0, 4) + "_" + std::to_string(seed) + "_" + std::to_string(index);
    op.text = "# generated by tuner/random_ops.cpp (" + d.kind + ")\n" + d.text(op.name);
    ir::OpDef def;
    try {
      def = ir::parse_op(op.text);
    } catch (const Error&) {
      continue;  // a draft the checker refuses (an index no tensor bounds): draw another
    }
    if (auto sizes = bind_sizes(rng, d, def, max_flops)) {
      op.sizes = *sizes;
      return op;
    }
  }
  throw_error(ErrorKind::Internal, std::string(function) + ": no valid op drawn for seed " + std::to_string(seed) +
                                       ", index " + std::to_string(index));
}

}  // namespace

GeneratedOp random_op(std::uint64_t seed, int index, double max_flops) {
  return draw("random_op", seed, 0, index, max_flops, [&](Rng& rng) {
    switch (index % 4) {
      case 0: return contraction(rng);
      case 1: return window(rng);
      case 2: return elementwise(rng);
      default: return reduction(rng);
    }
  });
}

GeneratedOp random_composite_op(std::uint64_t seed, int index, double max_flops) {
  return draw("random_composite_op", seed, 0xC0405172E5ull, index, max_flops, composite);
}

GeneratedOp random_construct_op(std::uint64_t seed, int index, double max_flops) {
  return draw("random_construct_op", seed, 0xC0257E7C75ull, index, max_flops, [&](Rng& rng) {
    switch (index % 5) {
      case 0:
        return axes_reduction(rng);
      case 1:
        return channels_last_window(rng);
      case 2:
        return parts(rng);
      case 3:
        return narrow_types(rng);
      default:
        return broadcast(rng);
    }
  });
}

}  // namespace tiletune::tuner
