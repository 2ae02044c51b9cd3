// tuner/random_constructs.cpp — the generator's family of the language's constructs that the
// first families (random_ops.cpp) leave out, so that a model trained on the corpus has seen
// them: reductions over any set of axes, channels-last and causal windows, parts of a tensor at
// constant indices and several outputs, narrow element types and casts, operands of different
// ranks broadcast against each other. Each draft draws its layouts and variants at random; the
// sizes are bound by random_ops.cpp as for every family.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ir/dtype.hpp"
#include "tuner/random_drafts.hpp"

namespace tiletune::tuner::drafts {

namespace {

using Strings = std::vector<std::string>;

//! "(Y1: f32[N], Y2: f32[N])" for several outputs, "Y: f32[N]" for one.
std::string outputs(const Strings& decls) { return decls.size() == 1 ? decls[0] : "(" + join(decls) + ")"; }

std::string decl(const std::string& name, const std::string& type, const Strings& shape) {
  return name + ": " + type + "[" + join(shape) + "]";
}

//! Whether the element type a draft names ("i8", "bf16", ...) holds integers.
bool is_integer_type(const std::string& name) {
  ir::DType t;
  return ir::parse_dtype(name, t) && ir::is_integer(t);
}

}  // namespace

Draft axes_reduction(Rng& rng) {
  Draft d;
  d.kind = "axes";
  if (chance(rng, 0.2)) {
    // A Gram matrix: one tensor read twice in a product whose two output axes span one
    // dimension (covariance, style matrices), the summed axis leading or last, maybe centred.
    const bool leading = chance(rng, 0.5);
    auto at = [&](const std::string& t, const std::string& i) {
      return access(t, leading ? Strings{"r", i} : Strings{i, "r"});
    };
    d.params = {leading ? "X: f32[R, F]" : "X: f32[F, R]"};
    d.free = {{"R", {8, 2048}}, {"F", {4, 256}}};
    d.result = "Y: f32[F, F]";
    std::string operand = "X";
    if (chance(rng, 0.5)) {
      d.body = {"s[i] += " + at("X", "i"), at("xc", "i") + " = " + at("X", "i") + " - s[i] / R"};
      operand = "xc";
    }
    d.body.push_back("Y[i, j] += " + at(operand, "i") + " * " + at(operand, "j") + (chance(rng, 0.5) ? " * 0.01" : ""));
    return d;
  }
  const bool image = chance(rng, 0.5);
  const Strings in = image ? Strings{"n", "c", "h", "w"} : Strings{"a", "b", "c"};
  if (image)
    d.free = {{"N", {1, 8}}, {"C", {4, 256}}, {"H", {4, 64}}};
  else
    d.free = {{"A", {2, 512}}, {"B", {2, 512}}, {"C", {2, 512}}};
  Strings kept, reduced;
  while (kept.empty() || reduced.empty()) {
    kept.clear();
    reduced.clear();
    for (auto& i : in) (chance(rng, 0.5) ? reduced : kept).push_back(i);
  }
  const std::string x = access("X", in), count = "(" + join(sizes_of(reduced), " * ") + ")";
  const std::string full = decl("Y", "f32", sizes_of(in)), stat = decl("Y", "f32", sizes_of(kept));
  d.params = {decl("X", "f32", sizes_of(in))};
  switch (uniform(rng, 0, 3)) {
    case 0: {  // the statistics alone: one, or two as two outputs
      if (chance(rng, 0.3)) {
        d.result = outputs({stat, decl("Z", "f32", sizes_of(kept))});
        d.body = {access("Y", kept) + " max= " + x, access("Z", kept) + " += " + x + " * " + x};
      } else {
        const std::string op = pick(rng, Strings{"+=", "+=", "max=", "min="});
        const std::string term = op == "+=" ? pick(rng, Strings{x, x + " * " + x, "abs(" + x + ")"}) : x;
        d.result = stat;
        d.body = {access("Y", kept) + " " + op + " " + term};
      }
      break;
    }
    case 1: {  // centred on the group's mean
      d.result = full;
      d.body = {access("s", kept) + " += " + x,
                access("Y", in) + " = " + x + " - " + access("s", kept) + " / " + count};
      break;
    }
    case 2: {  // standardised, with a scale and shift along one kept axis (instance and group norms)
      const std::string k = pick(rng, kept), mu = access("mu", kept), dv = access("dv", in);
      d.params.push_back(decl("gamma", "f32", {upper(k)}));
      d.params.push_back(decl("beta", "f32", {upper(k)}));
      d.result = full;
      d.body = {access("s1", kept) + " += " + x, mu + " = " + access("s1", kept) + " / " + count,
                dv + " = " + x + " - " + mu, access("s2", kept) + " += " + dv + " * " + dv,
                access("Y", in) + " = " + dv + " / sqrt(" + access("s2", kept) + " / " + count +
                    " + 0.00001) * gamma[" + k + "] + beta[" + k + "]"};
      break;
    }
    default: {  // a softmax over the group
      const std::string e = access("e", in);
      d.result = full;
      d.body = {access("mx", kept) + " max= " + x, e + " = exp(" + x + " - " + access("mx", kept) + ")",
                access("z", kept) + " += " + e, access("Y", in) + " = " + e + " / " + access("z", kept)};
      break;
    }
  }
  return d;
}

Draft channels_last_window(Rng& rng) {
  Draft d;
  d.kind = "channels_last";
  const bool plane = chance(rng, 0.5);  // NHWC, or a sequence's NTC
  const int taps = pick(rng, plane ? std::vector<int>{2, 3, 3, 5} : std::vector<int>{2, 3, 4, 5, 7});
  const int stride = pick(rng, std::vector<int>{1, 1, 2});
  const int dilation = stride == 1 && chance(rng, 0.2) ? 2 : 1;
  // A causal window reads the taps before its output (padded), so its output is as long as its input.
  const bool causal = !plane && stride == 1 && chance(rng, 0.3);
  const int pad = causal ? dilation * (taps - 1) : chance(rng, 0.5) ? dilation * (taps - 1) / 2 : 0;
  const WindowShape shape{taps, stride, dilation, pad};
  const Strings out = plane ? Strings{"y", "x"} : Strings{"t"}, tap = plane ? Strings{"u", "v"} : Strings{"u"};
  const Strings in_sizes = plane ? Strings{"H", "W"} : Strings{"T"};
  Strings coords, extents;
  for (std::size_t i = 0; i < out.size(); ++i) {
    coords.push_back(shape.coord(out[i], tap[i]));
    extents.push_back(causal ? in_sizes[i] : shape.extent(in_sizes[i]));
  }
  const int variant = uniform(rng, 0, 3);  // a pool, a depthwise or (twice as often) a dense convolution
  const bool max_pool = variant == 0 && chance(rng, 0.5);
  Strings x_shape = {"N"};
  x_shape.insert(x_shape.end(), in_sizes.begin(), in_sizes.end());
  x_shape.push_back("C");
  const std::string x_decl = decl("X", "f32", x_shape) + (pad > 0 ? max_pool ? " pad -inf" : " pad 0" : "");
  const std::string x = "X[n, " + join(coords) + ", c]";
  const std::string channel = variant >= 2 ? "k" : "c";
  Strings y_idx = {"n"}, y_shape = {"N"};
  y_idx.insert(y_idx.end(), out.begin(), out.end());
  y_idx.push_back(channel);
  y_shape.insert(y_shape.end(), extents.begin(), extents.end());
  y_shape.push_back(upper(channel));
  Strings f_idx = tap, f_shape = plane ? Strings{"U", "V"} : Strings{"U"};
  f_idx.push_back("c");
  f_shape.push_back("C");
  if (variant >= 2) {
    f_idx.push_back("k");
    f_shape.push_back("K");
  }
  const std::string y = access("Y", y_idx);
  d.params = {x_decl};
  d.result = decl("Y", "f32", y_shape);
  if (variant == 0) {
    const std::string where = " where u < " + std::to_string(taps) + (plane ? ", v < " + std::to_string(taps) : "");
    const double scale = 1.0 / std::pow(taps, static_cast<double>(tap.size()));
    d.body = {y + (max_pool ? " max= " + x : " += " + x + " * " + std::to_string(scale)) + where};
  } else {
    d.params.push_back(decl("F", "f32", f_shape) + (chance(rng, 0.5) ? " const" : ""));
    const std::string product = x + " * " + access("F", f_idx);
    if (chance(rng, 0.35)) {
      // An epilogue: the convolution into a temporary, then a bias and an activation.
      const std::string acc = access("acc", y_idx);
      d.params.push_back(decl("bias", "f32", {upper(channel)}));
      d.body = {acc + " += " + product, y + " = " + activation(rng, acc + " + bias[" + channel + "]")};
    } else {
      d.body = {y + " += " + product};
    }
    d.fixed["U"] = taps;
    if (plane) d.fixed["V"] = taps;
  }
  d.free["C"] = {variant >= 2 ? 3 : 4, 256};
  if (variant >= 2) d.free["K"] = {8, 256};
  if (plane) {
    d.free["H"] = {8, 112};
    d.fixed["N"] = 1;
  } else {
    d.free["T"] = {16, 2048};
    d.free["N"] = {1, 8};
  }
  return d;
}

Draft parts(Rng& rng) {
  Draft d;
  d.kind = "parts";
  // X holds `count` parts along a small axis (real and imaginary halves, a fused projection's
  // gate and value, q, k and v), read at constant indices; the axis sits anywhere in its layout.
  const int count = pick(rng, std::vector<int>{2, 2, 2, 3, 4});
  const Strings rows = {"b", "t", "d"};
  const int at = uniform(rng, 0, 3);
  auto part = [&](int p) {
    Strings idx = rows;
    idx.insert(idx.begin() + at, std::to_string(p));
    return access("X", idx);
  };
  Strings shape = sizes_of(rows);
  shape.insert(shape.begin() + at, std::to_string(count));
  d.params = {decl("X", "f32", shape)};
  d.free = {{"B", {1, 16}}, {"T", {8, 1024}}, {"D", {8, 512}}};
  Strings out = rows;
  if (chance(rng, 0.3)) std::shuffle(out.begin(), out.end(), rng);  // the outputs in another layout
  auto y = [&](const std::string& name) { return access(name, out); };
  auto y_decl = [&](const std::string& name) { return decl(name, "f32", sizes_of(out)); };
  const int variant = count == 2 ? uniform(rng, 0, 2) : 1;
  if (variant == 0) {
    // A rotation of each pair by an angle per position and feature (rotary embeddings, complex
    // products), its tables over (t, d) or d alone.
    const Strings table = chance(rng, 0.7) ? Strings{"t", "d"} : Strings{"d"};
    d.params.push_back(decl("Cos", "f32", sizes_of(table)));
    d.params.push_back(decl("Sin", "f32", sizes_of(table)));
    const std::string c = access("Cos", table), s = access("Sin", table);
    d.result = outputs({y_decl("Y1"), y_decl("Y2")});
    d.body = {y("Y1") + " = " + part(0) + " * " + c + " - " + part(1) + " * " + s,
              y("Y2") + " = " + part(1) + " * " + c + " + " + part(0) + " * " + s};
  } else if (variant == 1) {
    // A split into one output per part, each through a function of its own.
    Strings decls;
    for (int p = 0; p < count; ++p) {
      const std::string name = "Y" + std::to_string(p + 1);
      decls.push_back(y_decl(name));
      const std::string v = part(p);
      std::string value = pick(rng, Strings{v, v + " * 0.125", activation(rng, v), expression(rng, {v}, 2)});
      if (value.find(v) == std::string::npos) value = v + " * (" + value + ")";  // a constant is no part's output
      d.body.push_back(y(name) + " = " + value);
    }
    d.result = outputs(decls);
  } else {
    // A gate: one part through an activation times the other (a fused gated projection's halves).
    d.result = y_decl("Y");
    d.body = {y("Y") + " = " + activation(rng, part(0)) + " * " + part(1)};
  }
  return d;
}

Draft narrow_types(Rng& rng) {
  Draft d;
  d.kind = "narrow";
  if (chance(rng, 0.3)) {
    // A conversion: a dequantisation by a scale per feature, or a quantisation or rounding to a
    // narrow type.
    const std::string from = pick(rng, Strings{"i8", "u8", "bf16", "f16", "f32"});
    const std::string to = from == "f32" ? pick(rng, Strings{"i8", "u8", "bf16", "f16"}) : "f32";
    const Strings idx = {"n", "d"}, out = chance(rng, 0.3) ? Strings{"d", "n"} : idx;
    const std::string x = access("X", idx);
    d.params = {decl("X", from, sizes_of(idx)), "S: f32[D]"};
    const std::string value = is_integer_type(from) ? "f32(" + x + ") * S[d]"
                              : is_integer_type(to) ? x + " * S[d] * 100.0"
                                                    : activation(rng, x) + " * S[d]";
    d.result = decl("Y", to, sizes_of(out));
    d.body = {access("Y", out) + " = " + value};
    d.free = {{"N", {16, 2048}}, {"D", {16, 2048}}};
    return d;
  }
  // A contraction over narrow operands: accumulated in f32, or in i32 when both are integers.
  const std::string a_type = pick(rng, Strings{"f32", "f32", "bf16", "f16", "u8", "i8"});
  const std::string b_type = is_integer_type(a_type) ? pick(rng, Strings{"i8", "i8", "u8"})
                             : a_type == "f32"       ? pick(rng, Strings{"i8", "u8", "bf16", "f16"})
                                                     : pick(rng, Strings{a_type, a_type, "i8"});
  const bool integers = is_integer_type(a_type) && is_integer_type(b_type);
  const Strings a_idx = chance(rng, 0.2) ? Strings{"k", "m"} : Strings{"m", "k"};
  const Strings b_idx = chance(rng, 0.5) ? Strings{"n", "k"} : Strings{"k", "n"};
  d.params = {decl("A", a_type, sizes_of(a_idx)),
              decl("B", b_type, sizes_of(b_idx)) + (chance(rng, 0.7) ? " const" : "")};
  std::string b = access("B", b_idx);
  if (is_integer_type(b_type) && !integers && chance(rng, 0.5)) b = "f32(" + b + ")";
  const std::string acc = "acc[m, n]";
  d.body = {acc + " += " + access("A", a_idx) + " * " + b};
  std::string value;
  if (integers) {
    // Dequantised by scales per row and column, maybe then requantised to a narrow output.
    d.params.push_back("SA: f32[M]");
    d.params.push_back("SB: f32[N]");
    value = "f32(" + acc + ") * SA[m] * SB[n]";
  } else if (is_integer_type(b_type)) {
    d.params.push_back("S: f32[N]");
    value = acc + " * S[n]";
  } else {
    value = acc;
  }
  if (chance(rng, 0.4)) {
    d.params.push_back("bias: f32[N]");
    value = activation(rng, value + " + bias[n]");
  }
  const std::string out_type =
      pick(rng, integers ? Strings{"f32", "bf16", "i8", "u8", "i32"} : Strings{"f32", "f32", "bf16", "f16"});
  d.result = decl("C", out_type, {"M", "N"});
  d.body.push_back("C[m, n] = " + value);
  d.free = {{"M", {8, 768}}, {"N", {8, 768}}, {"K", {16, 768}}};
  return d;
}

Draft broadcast(Rng& rng) {
  Draft d;
  d.kind = "broadcast";
  if (chance(rng, 0.3)) {
    // No reduction: every row of one set against every row of another (an outer sum or
    // product, pairwise distances' terms), per batch or not.
    const Strings batch = chance(rng, 0.5) ? Strings{"b"} : Strings{};
    auto with = [&](Strings idx) {
      idx.insert(idx.begin(), batch.begin(), batch.end());
      return idx;
    };
    const std::string u = access("U", with({"i"})), v = access("V", with({"j"}));
    d.params = {decl("U", "f32", sizes_of(with({"i"}))), decl("V", "f32", sizes_of(with({"j"})))};
    d.result = decl("Y", "f32", sizes_of(with({"i", "j"})));
    std::string value =
        pick(rng, Strings{u + " * " + v, u + " + " + v, "(" + u + " - " + v + ") * (" + u + " - " + v + ")"});
    if (chance(rng, 0.5)) value = activation(rng, value);
    d.body = {access("Y", with({"i", "j"})) + " = " + value};
    d.free = {{"I", {8, 2048}}, {"J", {8, 2048}}};
    if (!batch.empty()) d.free["B"] = {1, 16};
    return d;
  }
  // A contraction whose operands have different batch axes: A's rows come in groups [G, P] of
  // which B has only G (grouped-query attention's shared key heads), or none (a weight shared
  // by every batch), in either of B's layouts.
  const bool shared = chance(rng, 0.3);
  Strings a_idx = chance(rng, 0.3) ? Strings{"p", "g", "m", "k"} : Strings{"g", "p", "m", "k"};
  Strings b_idx = chance(rng, 0.5) ? Strings{"k", "n"} : Strings{"n", "k"};
  if (!shared) b_idx.insert(b_idx.begin(), "g");
  Strings c_idx = chance(rng, 0.25) ? Strings{"g", "m", "p", "n"} : Strings{"g", "p", "m", "n"};
  Strings rows = c_idx;
  rows.erase(std::find(rows.begin(), rows.end(), "n"));
  d.params = {decl("A", "f32", sizes_of(a_idx)), decl("B", "f32", sizes_of(b_idx))};
  d.result = decl("C", "f32", sizes_of(c_idx));
  const std::string product = access("A", a_idx) + " * " + access("B", b_idx), c = access("C", c_idx);
  switch (uniform(rng, 0, 2)) {
    case 0:
      d.body = {c + " += " + product};
      break;
    case 1: {  // a softmax over n
      const std::string s = access("s", c_idx), e = access("e", c_idx);
      d.body = {s + " += " + product, access("mx", rows) + " max= " + s,
                e + " = exp(" + s + " - " + access("mx", rows) + ")", access("z", rows) + " += " + e,
                c + " = " + e + " / " + access("z", rows)};
      break;
    }
    default: {
      const std::string acc = access("acc", c_idx);
      d.body = {acc + " += " + product, c + " = " + activation(rng, acc)};
      break;
    }
  }
  d.free = {{"G", {1, 8}}, {"P", {1, 8}}, {"M", {8, 256}}, {"N", {8, 512}}, {"K", {8, 256}}};
  return d;
}

}  // namespace tiletune::tuner::drafts
