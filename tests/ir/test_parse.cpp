#include <doctest/doctest.h>

#include "helpers.hpp"

using namespace tiletune;
using tiletune::test::error_of;

namespace {

//! Parses and returns the error message; the test fails if parsing succeeds.
std::string parse_error(const std::string& text) {
  ErrorKind kind = ErrorKind::Internal;
  std::string msg = error_of([&] { ir::parse_ops(text); }, &kind);
  CHECK_MESSAGE(!msg.empty(), "expected a parse error for: " << text);
  CHECK(kind == ErrorKind::InvalidInput);
  return msg;
}

const char* kMatmul = "op matmul(A: f32[M, K], B: f32[K, N]) -> C: f32[M, N] {\n  C[m, n] += A[m, k] * B[k, n]\n}\n";

}  // namespace

TEST_CASE("parse: every library op parses, checks and binds") {
  for (auto& name : ops::op_names()) {
    CAPTURE(name);
    ir::OpDef op = ir::parse_op(ops::op_text(name));
    CHECK(op.name == name);
    CHECK(!op.stmts.empty());
  }
}

TEST_CASE("parse: the matmul statement has its axes and ranges") {
  ir::OpDef op = ir::parse_op(kMatmul);
  REQUIRE(op.stmts.size() == 1);
  const auto& s = op.stmts[0];
  CHECK(s.combine == ir::Combine::Add);
  REQUIRE(s.vars.size() == 3);
  CHECK(s.vars[0].name == "m");
  CHECK_FALSE(s.vars[0].reduce);
  CHECK(s.vars[2].name == "k");
  CHECK(s.vars[2].reduce);
  CHECK(ir::to_string(s.vars[2].extent) == "K");
}

TEST_CASE("parse: affine indices, size symbols in expressions, comparisons and select") {
  ir::OpDef op = ir::parse_op(
      "op f(X: f32[N, 2 * N + 3]) -> Y: f32[N] {\n"
      "  Y[i] = select(X[i, 2*i + 3 - 1] > 0.5, X[i, i + i] / N, -1.5e-3)\n"
      "}\n");
  auto w = ir::bind(op, {{"N", 4}});
  CHECK(w.buffers[0].shape == std::vector<std::int64_t>{4, 11});
  CHECK(w.canonical_text.find("/ 4.0") != std::string::npos);
}

TEST_CASE("parse errors: syntax, with line and column and what was expected") {
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] {\n  B[i] = A[i] +\n}\n").rfind("3:1:", 0) == 0);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] {\n  B[i] = A[i] +\n}\n").find("expected an expression") !=
        std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) B: f32[N] { B[i] = A[i] }").find("1:17: expected '->'") != std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = A[i]").find("expected '}'") != std::string::npos);
  CHECK(parse_error("").find("expected 'op'") != std::string::npos);
  CHECK(parse_error("op f(A: f64[N]) -> B: f32[N] { B[i] = A[i] }")
            .find("1:9: expected an element type (f32, bf16, f16, i32, i8 or u8), found 'f64'") != std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = A[i * i] }").find("affine") != std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = foo(A[i]) }").find("unknown function 'foo'") !=
        std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = exp(A[i], A[i]) }").find("takes 1 argument") !=
        std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = A[i] }\nop f(A: f32[N]) -> B: f32[N] { B[i] = A[i] }")
            .find("defined twice") != std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i + 1] = A[i] }").find("plain index names") != std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = A[i] 12abc }").find("malformed number") !=
        std::string::npos);
}

TEST_CASE("parse errors: an unknown tensor or index") {
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] {\n  B[i] = Q[i]\n}").find("2:10: unknown tensor 'Q'") !=
        std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = A[i] + Z }").find("unknown name 'Z'") != std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = A }").find("must be indexed") != std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> (B: f32[N], C: f32[N]) { B[i] = C[i]\n C[i] = A[i] }")
            .find("read before it is assigned") != std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { A[i] = B[i] }").find("cannot assign to input") !=
        std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { t[i] = A[i] }").find("'B' is never assigned") != std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = A[i]\n B[i] = A[i] }").find("assigned twice") !=
        std::string::npos);
}

TEST_CASE("parse errors: rank mismatch") {
  CHECK(parse_error("op f(A: f32[M, N]) -> B: f32[M] {\n  B[i] = A[i]\n}").find("2:10: rank mismatch: 'A' has 2") !=
        std::string::npos);
  CHECK(parse_error("op f(A: f32[M, N]) -> B: f32[M] { B[i, j] = A[i, j] }").find("rank mismatch: output 'B'") !=
        std::string::npos);
}

TEST_CASE("parse errors: an index with no inferable range") {
  std::string msg = parse_error("op f(A: f32[N]) -> B: f32[N] {\n  B[i] += A[i + j]\n}");
  CHECK(msg.find("index 'j' has no inferable range") != std::string::npos);
  CHECK(msg.rfind("2:11:", 0) == 0);
}

TEST_CASE("parse errors: a reduction written with '='") {
  std::string msg = parse_error("op f(A: f32[M, K], B: f32[K, N]) -> C: f32[M, N] {\n  C[m, n] = A[m, k] * B[k, n]\n}");
  CHECK(msg.rfind("2:3:", 0) == 0);
  CHECK(msg.find("reduces over 'k'") != std::string::npos);
  CHECK(msg.find("'+='") != std::string::npos);
}

TEST_CASE("parse errors: an identifier that is not a plain name") {
  CHECK(parse_error("op f(A$: f32[N]) -> B: f32[N] { B[i] = A[i] }").find("unexpected character '$'") !=
        std::string::npos);
  CHECK(parse_error("op f(__A: f32[N]) -> B: f32[N] { B[i] = __A[i] }").find("not a plain name") != std::string::npos);
  CHECK(parse_error("op f(tt_A: f32[N]) -> B: f32[N] { B[i] = tt_A[i] }").find("not a plain name") !=
        std::string::npos);
  CHECK(parse_error("op f(exp: f32[N]) -> B: f32[N] { B[i] = exp[i] }").find("reserved word") != std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = A[i]; \"x\" }").find("unexpected character '\"'") !=
        std::string::npos);
  CHECK(parse_error("op f(\xc3\xa4: f32[N]) -> B: f32[N] { B[i] = A[i] }").find("plain ASCII identifiers") !=
        std::string::npos);
}

TEST_CASE("parse errors: numbers out of range, hostile nesting and reserved prefixes") {
  CHECK(parse_error("op f(A: f32[99999999999999999999]) -> B: f32[N] { B[i] = A[i] }").find("out of range") !=
        std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = A[i] * 1e999 }").find("out of the f32 range") !=
        std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = A[4611686018427387904*i] }").find("out of range") !=
        std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = " + std::string(5000, '(') + "A[i]" +
                    std::string(5000, ')') + " }")
            .find("nested deeper") != std::string::npos);
  std::string long_sum = "A[i]";
  for (int n = 0; n < 30000; ++n) long_sum += " + A[i]";
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = " + long_sum + " }").find("more than") != std::string::npos);
  CHECK(parse_error("op f(_A: f32[N]) -> B: f32[N] { B[i] = _A[i] }").find("not a plain name") != std::string::npos);
  CHECK(parse_error("op f(TT_A: f32[N]) -> B: f32[N] { B[i] = TT_A[i] }").find("not a plain name") !=
        std::string::npos);
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] { B[i] = A[i] \x01 }").find("byte 0x01") != std::string::npos);
}

TEST_CASE("bind errors: sizes whose products overflow are refused") {
  ir::OpDef big = ir::parse_op("op f(A: f32[N * N * N]) -> B: f32[N] { B[i] = A[i] }");
  CHECK(error_of([&] { ir::bind(big, {{"N", 2000000000}}); }).find("overflows") != std::string::npos);
  ir::OpDef huge = ir::parse_op("op f(A: f32[N, N]) -> B: f32[N, N] { B[i, j] = A[i, j] }");
  CHECK(error_of([&] { ir::bind(huge, {{"N", 1 << 20}}); }).find("more than 2^36 elements") != std::string::npos);
}

TEST_CASE("sizes: parse and refuse malformed text") {
  auto s = ir::parse_sizes(" M=512, N = 3 ,K=1");
  CHECK(s.at("M") == 512);
  CHECK(s.at("N") == 3);
  CHECK(s.at("K") == 1);
  for (const char* bad : {"", "M", "M=", "M=0", "M=-3", "M=1x", "M=1,M=2", "=4", "M=99999999999", "3=4", "M=1;N=2"}) {
    CAPTURE(bad);
    ErrorKind kind{};
    CHECK(!error_of([&] { ir::parse_sizes(bad); }, &kind).empty());
    CHECK(kind == ErrorKind::InvalidInput);
  }
}

TEST_CASE("bind errors: a size not bound, a size not used, dimensions out of range") {
  ir::OpDef mm = ir::parse_op(kMatmul);
  CHECK(error_of([&] {
          ir::bind(mm, {{"M", 4}, {"N", 4}});
        }).find("needs sizes that were not given: K") != std::string::npos);
  CHECK(error_of([&] {
          ir::bind(mm, {{"M", 4}, {"N", 4}, {"K", 4}, {"Q", 1}});
        }).find("'Q' is not used") != std::string::npos);
  ir::OpDef conv = ir::parse_op(ops::op_text("conv2d"));
  CHECK(error_of([&] { ir::bind(conv, ir::parse_sizes("N=1,C=1,H=2,W=8,K=1,R=3,S=3")); }).find("must be at least 1") !=
        std::string::npos);
  ir::OpDef shifted = ir::parse_op("op f(A: f32[N]) -> B: f32[N] { B[i] = A[i + 1] }");
  CHECK(error_of([&] {
          ir::bind(shifted, {{"N", 8}});
        }).find("runs over [1, 8] but that dimension has size 8") != std::string::npos);
}

TEST_CASE("workload key: stable under renaming and reformatting, changed by sizes") {
  auto a = ir::bind(ir::parse_op(kMatmul), ir::parse_sizes("M=64,N=32,K=16"));
  auto b = ir::bind(ir::parse_op("op matmul(A: f32[M, K], B: f32[K, N]) -> C: f32[M, N]\n{ # comment\n"
                                 "  C[row, col] += A[row, red]*B[red, col]; }"),
                    ir::parse_sizes("K=16, N=32, M=64"));
  CHECK(a.key == b.key);
  CHECK(a.canonical_text == b.canonical_text);
  auto c = ir::bind(ir::parse_op(kMatmul), ir::parse_sizes("M=64,N=32,K=17"));
  CHECK(c.key != a.key);
  CHECK(a.key.size() == 16);
  CHECK(a.flops() == doctest::Approx(2.0 * 64 * 32 * 16));
}

TEST_CASE("bind: reduction indices that read one contiguous run merge into one index over it") {
  auto axes_of = [](const ir::Stage& st) {
    std::string out;
    for (auto& a : st.axes) out += (out.empty() ? "" : " ") + a.name + "<" + std::to_string(a.extent);
    return out;
  };
  const ir::Sizes sizes = ir::parse_sizes("N=2,C=3,H=5,W=7");
  // A global pool: h and w over the whole plane are one run of 35 in each channel; X is seen
  // as [N, C, H * W] by the stages, callers still pass the declared [N, C, H, W].
  const char* pool = "op pool(X: f32[N, C, H, W]) -> Y: f32[N, C] {\n  Y[n, c] += X[n, c, h, w] * 0.5\n}";
  auto w = ir::bind(ir::parse_op(pool), sizes);
  CHECK(axes_of(w.stages[0]) == "n<2 c<3 h_w<35");
  CHECK(w.buffers[0].shape == std::vector<std::int64_t>{2, 3, 35});
  CHECK(w.buffers[0].declared_shape == std::vector<std::int64_t>{2, 3, 5, 7});
  CHECK(w.buffers[1].shape == w.buffers[1].declared_shape);
  CHECK(ir::to_string(w.stages[0].rhs).find("X[n, c, h_w]") != std::string::npos);
  CHECK(w.canonical_text.find("h_w") == std::string::npos);  // the key is the op's
  CHECK(w.flops() == doctest::Approx(2.0 * 2 * 3 * 35));
  // Three reduction indices over a whole tensor merge in turn; a name taken by another index
  // gets a suffix.
  auto all = ir::bind(ir::parse_op("op t(X: f32[C, H, W]) -> Y: f32[N] {\n  Y[n] += X[c, h, w]\n}"),
                      ir::parse_sizes("N=2,C=3,H=5,W=7"));
  CHECK(axes_of(all.stages[0]) == "n<2 c_h_w<105");
  CHECK(all.buffers[0].shape == std::vector<std::int64_t>{105});
  auto named = ir::bind(ir::parse_op("op t(X: f32[H, W]) -> Y: f32[C] {\n  Y[h_w] += X[h, w]\n}"),
                        ir::parse_sizes("C=3,H=5,W=7"));
  CHECK(axes_of(named.stages[0]) == "h_w<3 h_w_<35");
  // What stays apart: a padded input (a read may fall outside), a window over part of the
  // last dimension, indices read in both orders, a tensor another statement also reads or
  // writes, spatial indices (an output's), and an affine index.
  for (auto [text, sz] : std::vector<std::pair<const char*, const char*>>{
           {"op p(X: f32[N, C, H, W] pad 0) -> Y: f32[N, C] {\n  Y[n, c] += X[n, c, h, w]\n}", "N=2,C=3,H=5,W=7"},
           {"op p(X: f32[N, C, H, W]) -> Y: f32[N, C] {\n  Y[n, c] += X[n, c, h, w] where w < 6\n}", "N=2,C=3,H=5,W=7"},
           {"op p(X: f32[N, C, H, W]) -> Y: f32[N, C] {\n  Y[n, c] += X[n, c, h, w] * X[n, c, w, h]\n}",
            "N=2,C=3,H=5,W=5"},
           {"op p(X: f32[N, C, H, W]) -> (Y: f32[N, C], Z: f32[N, C, H, W]) {\n"
            "  Y[n, c] += X[n, c, h, w]\n  Z[n, c, h, w] = X[n, c, h, w] - Y[n, c]\n}",
            "N=2,C=3,H=5,W=7"},
           {"op p(X: f32[N, C, H, W]) -> Y: f32[N, C, H, W] {\n  Y[n, c, h, w] = X[n, c, h, w] * 2\n}",
            "N=2,C=3,H=5,W=7"},
           {"op p(X: f32[N, C, H, W]) -> Y: f32[N, C] {\n  T[n, c, h, w] = X[n, c, h, w] * 2\n"
            "  Y[n, c] += T[n, c, h, w]\n}",
            "N=2,C=3,H=5,W=7"},
           {"op p(X: f32[N, C, H, W]) -> Y: f32[N, C] {\n  Y[n, c] += X[n, c, 2 * h, w] where h < 2\n}",
            "N=2,C=3,H=5,W=7"}}) {
    CAPTURE(text);
    auto u = ir::bind(ir::parse_op(text), ir::parse_sizes(sz));
    for (auto& st : u.stages)
      for (auto& a : st.axes) CHECK(a.name.find('_') == std::string::npos);
    for (auto& b : u.buffers) CHECK(b.shape == b.declared_shape);
  }
}

TEST_CASE("windows: 'where' gives reduction indices their range; the window is part of the key") {
  const char* pool =
      "op pool(X: f32[H, W]) -> Y: f32[(H - 3) / 2 + 1, W - R + 1] {\n"
      "  Y[y, x] max= X[2 * y + r, x + s] where r < 3, s < R\n}";
  auto w = ir::bind(ir::parse_op(pool), ir::parse_sizes("H=11,W=8,R=2"));
  REQUIRE(w.stages.size() == 1);
  REQUIRE(w.stages[0].axes.size() == 4);
  CHECK(w.stages[0].axes[2].name == "r");
  CHECK(w.stages[0].axes[2].extent == 3);
  CHECK(w.stages[0].axes[2].reduce);
  CHECK(w.stages[0].axes[3].extent == 2);
  CHECK(w.canonical_text.find(" where i2 < 3, i3 < R") != std::string::npos);
  // Another window is another workload; a statement without one keeps its text (and key).
  std::string wider = pool;
  wider.replace(wider.find("r < 3"), 5, "r < 2");
  CHECK(ir::bind(ir::parse_op(wider), ir::parse_sizes("H=11,W=8,R=2")).key != w.key);
  CHECK(ir::bind(ir::parse_op(kMatmul), ir::parse_sizes("M=4,N=4,K=4")).canonical_text.find("where") ==
        std::string::npos);
  // A window past the tensor's end is an out-of-bounds access, found when binding.
  std::string far = pool;
  far.replace(far.find("r < 3"), 5, "r < 4");
  CHECK(error_of([&] { ir::bind(ir::parse_op(far), ir::parse_sizes("H=11,W=8,R=2")); }).find("runs over [0, 11]") !=
        std::string::npos);
  // A statement after a window may assign a tensor named `where`.
  auto two = ir::parse_op("op f(X: f32[N]) -> (Y: f32[N], where: f32[N]) {\n  Y[i] = X[i]\n  where[i] = X[i]\n}");
  CHECK(two.stmts.size() == 2);
}

TEST_CASE("windows: errors say which index and why") {
  CHECK(parse_error("op f(X: f32[N]) -> Y: f32[N] {\n  Y[i] += X[i] where i < 3\n}").find("index 'i' is on the left") !=
        std::string::npos);
  // An intermediate's left-hand index that reads nothing alone is given its range, which
  // becomes the intermediate's dimension.
  auto shifted =
      ir::parse_op("op f(X: f32[N] pad 0) -> Y: f32[N] {\n  t[i] += X[i + r - 1] where i < N, r < 3\n  Y[i] = t[i]\n}");
  REQUIRE(shifted.intermediates.size() == 1);
  CHECK(ir::to_string(shifted.intermediates[0].dims[0]) == "N");
  CHECK(parse_error("op f(X: f32[N, M]) -> Y: f32[N] {\n  Y[i] += X[i, j] where q < 3\n}")
            .find("index 'q' in 'where' is not used") != std::string::npos);
  CHECK(parse_error("op f(X: f32[N, M]) -> Y: f32[N] {\n  Y[i] += X[i, j] where j < 3, j < 2\n}").find("two ranges") !=
        std::string::npos);
  CHECK(parse_error("op f(X: f32[N, M]) -> Y: f32[N] {\n  Y[i] += X[i, j] where j < Q\n}").find("unknown size 'Q'") !=
        std::string::npos);
  CHECK(parse_error("op f(X: f32[N, M]) -> Y: f32[N] {\n  Y[i] += X[i, j] where j <\n}")
            .rfind("3:1: expected a size", 0) == 0);
  std::string none = parse_error("op f(A: f32[N]) -> B: f32[N] {\n  B[i] += A[i + j]\n}");
  CHECK(none.find("or be given one with 'where j < SIZE'") != std::string::npos);
  auto op = ir::parse_op("op f(X: f32[N, M]) -> Y: f32[N] {\n  Y[i] += X[i, j + k] where k < M - 4, j < 2\n}");
  CHECK(error_of([&] { ir::bind(op, ir::parse_sizes("N=2,M=4")); }).find("must be at least 1") != std::string::npos);
}

TEST_CASE("windows: an intermediate's left-hand index takes the range its consumers read it with") {
  // A channels-last 1-D conv with an activation, the conv's result a temporary: nothing in its own
  // statement gives t a range; the output it feeds does.
  const std::string conv =
      "op c(X: f32[B, T, C], W: f32[R, C, O]) -> Y: f32[B, T - R + 1, O] {\n"
      "  acc[b, t, o] += X[b, t + r, c] * W[r, c, o]\n"
      "  Y[b, t, o] = tanh(acc[b, t, o])\n}";
  auto op = ir::parse_op(conv);
  REQUIRE(op.intermediates.size() == 1);
  CHECK(ir::to_string(op.intermediates[0].dims[1]) == "((T - R) + 1)");
  // Recorded as if written: the op binds to the workload of the spelling with 'where'.
  std::string written = conv;
  written.replace(written.find("W[r, c, o]\n"), 11, "W[r, c, o] where t < T - R + 1\n");
  const auto sizes = ir::parse_sizes("B=2,T=9,C=3,O=4,R=3");
  auto inferred = ir::bind(op, sizes), explicit_range = ir::bind(ir::parse_op(written), sizes);
  CHECK(inferred.key == explicit_range.key);
  CHECK(inferred.canonical_text == explicit_range.canonical_text);
  CHECK(inferred.stages[0].axes[1].extent == 7);

  // Through a chain of intermediates, and from a tensor the consumer reads alone.
  auto chain = ir::parse_op(
      "op f(X: f32[N] pad 0, G: f32[M]) -> Y: f32[M] {\n  s[i] += X[i + r - 1] where r < 3\n"
      "  u[j] = s[j] * 2.0\n  Y[k] = u[k] + G[k]\n}");
  REQUIRE(chain.intermediates.size() == 2);
  CHECK(ir::to_string(chain.intermediates[0].dims[0]) == "M");
  auto read_alone = ir::parse_op(
      "op f(X: f32[N] pad 0, G: f32[M]) -> Y: f32[N] {\n  s[i] += X[i + r - 1] where r < 3\n"
      "  Y[k] += s[j] * G[j] * X[k]\n}");
  CHECK(ir::to_string(read_alone.intermediates[0].dims[0]) == "M");

  // A consumer that reads past the inferred range is refused where sizes are bound.
  auto past = ir::parse_op(
      "op f(X: f32[N] pad 0) -> Y: f32[N] {\n  s[i] += X[i + r - 1] where r < 3\n  Y[k] = s[k] + s[k + 1]\n}");
  CHECK(error_of([&] { ir::bind(past, ir::parse_sizes("N=8")); }).find("index k + 1 of 's' runs over [1, 8]") !=
        std::string::npos);
  // No consumer reads it alone: the error says all three ways to give the range.
  std::string none = parse_error(
      "op f(X: f32[N] pad 0) -> Y: f32[N] {\n  s[i] += X[i + r - 1] where r < 3\n  Y[k] = s[k + 1]\n}");
  CHECK(none.find("index 'i' has no inferable range") != std::string::npos);
  CHECK(none.find("or be read alone by a later statement ('s[.., i, ..]')") != std::string::npos);
  // Statements that each read the two before: the search for a consumer's range meets each
  // statement once, not once per path (60 of them have about 10^12 paths).
  std::string lattice = "op f(X: f32[N] pad 0) -> Y: f32[N] {\n  t0[i] += X[i + r] where r < 2\n  t1[i] = t0[i]\n";
  for (int k = 2; k < 60; ++k)
    lattice += "  t" + std::to_string(k) + "[i] = t" + std::to_string(k - 1) + "[i] + t" + std::to_string(k - 2) + "[i]\n";
  CHECK(parse_error(lattice + "  Y[i] = t59[i + 1]\n}").find("index 'i' has no inferable range") != std::string::npos);
  auto resolved = ir::parse_op(lattice + "  Y[i] = t59[i]\n}");
  CHECK(ir::to_string(resolved.intermediates[0].dims[0]) == "N");
}

TEST_CASE("padding: an input's declared pad value lets reads fall outside it; it is part of the key") {
  const char* conv =
      "op c(I: f32[H, W] pad 0, F: f32[R, S]) -> O: f32[H + 3 - R, W + 3 - S] {\n"
      "  O[y, x] += I[y + r - 1, x + s - 1] * F[r, s]\n}";
  auto w = ir::bind(ir::parse_op(conv), ir::parse_sizes("H=5,W=6,R=3,S=3"));
  CHECK(w.buffers[0].pad == 0.0);
  CHECK_FALSE(w.buffers[1].pad.has_value());
  CHECK(w.canonical_text.find("I: f32[H, W] pad 0,") != std::string::npos);
  CHECK(w.may_read_outside(0, "I", 0, w.stages[0].rhs.args[0].indices[0]));
  CHECK_FALSE(w.may_read_outside(0, "F", 0, w.stages[0].rhs.args[1].indices[0]));
  // Another pad value is another workload; max pooling pads with -inf, which round-trips.
  std::string other = conv;
  other.replace(other.find("pad 0"), 5, "pad -inf");
  auto m = ir::bind(ir::parse_op(other), ir::parse_sizes("H=5,W=6,R=3,S=3"));
  CHECK(m.key != w.key);
  CHECK(m.buffers[0].pad == -INFINITY);
  CHECK(m.canonical_text.find("pad -inf") != std::string::npos);
  CHECK(ir::parse_op(m.canonical_text.substr(0, m.canonical_text.find("sizes "))).inputs[0].pad == -INFINITY);
  CHECK(ir::bind(ir::parse_op(kMatmul), ir::parse_sizes("M=4,N=4,K=4")).canonical_text.find("pad") ==
        std::string::npos);
  // Without 'pad' the same reads are refused, with a hint; a window that never touches the
  // tensor is refused even with one.
  std::string unpadded = conv;
  unpadded.replace(unpadded.find(" pad 0"), 6, "");
  CHECK(error_of([&] {
          ir::bind(ir::parse_op(unpadded), ir::parse_sizes("H=5,W=6,R=3,S=3"));
        }).find("runs over [-1, 5] but that dimension has size 5 with H=5,R=3,S=3,W=6 (declare 'I: ... pad VALUE'") !=
        std::string::npos);
  auto far = ir::parse_op("op f(X: f32[N] pad 0) -> Y: f32[N] { Y[i] = X[i + 9] }");
  CHECK(error_of([&] { ir::bind(far, {{"N", 4}}); }).find("runs over [9, 12]") != std::string::npos);
}

TEST_CASE("sizes in indices: a causal window and a reversal bind to constants; an index may not take a size's name") {
  // A causal convolution of R taps reads R - 1 points before t: its offset is a size.
  const char* causal =
      "op causal(X: f32[C, T] pad 0, F: f32[C, R]) -> Y: f32[C, T] {\n"
      "  Y[c, t] += X[c, t + r - R + 1] * F[c, r]\n}";
  ir::OpDef op = ir::parse_op(causal);
  const ir::IndexExpr& ix = op.stmts[0].rhs.args[0].indices[1];
  CHECK(ir::to_string(ix) == "t + r - R + 1");
  // One index name plus a size is no plain index: its range is not the dimension's.
  CHECK(ir::parse_op("op f(X: f32[N] pad 0) -> Y: f32[N] { Y[t] = X[t + N] }").stmts[0].rhs.indices[0].plain_var().empty());
  auto w = ir::bind(op, ir::parse_sizes("C=2,T=9,R=4"));
  const ir::IndexExpr& bound = w.stages[0].rhs.args[0].indices[1];
  CHECK(bound.sizes.empty());
  CHECK(bound.constant == -3);
  CHECK(bound.coeff_of("t") == 1);
  CHECK(bound.coeff_of("r") == 1);
  CHECK(w.canonical_text.find("X[i0, i1 + i2 - 3]") != std::string::npos);
  // The same op with R = 4 written in: the same window, read the same way.
  auto written = ir::bind(ir::parse_op("op causal(X: f32[C, T] pad 0, F: f32[C, 4]) -> Y: f32[C, T] {\n"
                                       "  Y[c, t] += X[c, t + r - 3] * F[c, r]\n}"),
                          ir::parse_sizes("C=2,T=9"));
  CHECK(to_string(written.stages[0].rhs) == to_string(w.stages[0].rhs));
  // A reversal: a size with a coefficient, the index negated.
  auto rev = ir::bind(ir::parse_op("op rev(X: f32[T]) -> Y: f32[T] { Y[t] = X[T - 1 - t] }"), {{"T", 7}});
  const ir::IndexExpr& r = rev.stages[0].rhs.indices[0];
  CHECK(r.coeff_of("t") == -1);
  CHECK(r.constant == 6);
  // The op text as printed parses back to the same index.
  ir::OpDef rev_op = ir::parse_op("op rev(X: f32[T]) -> Y: f32[T] { Y[t] = X[T - 1 - t] }");
  const std::string printed = ir::to_string(rev_op.stmts[0].rhs.indices[0]);
  CHECK(printed == "-t + T - 1");
  auto again = ir::bind(ir::parse_op("op rev(X: f32[T]) -> Y: f32[T] { Y[t] = X[" + printed + "] }"), {{"T", 7}});
  CHECK(again.key == rev.key);
  // An index of sizes alone: the last element.
  auto last = ir::bind(ir::parse_op("op f(X: f32[T]) -> Y: f32[1] { Y[i] = X[T - 1] }"), {{"T", 7}});
  CHECK(last.stages[0].rhs.indices[0].terms.empty());
  CHECK(last.stages[0].rhs.indices[0].constant == 6);
  auto twice = ir::bind(ir::parse_op("op f(X: f32[2 * N]) -> Y: f32[N] { Y[i] = X[2*N - 1 - i] }"), {{"N", 5}});
  CHECK(twice.stages[0].rhs.indices[0].constant == 9);
  // Reads past the tensor are refused as with constants.
  CHECK(error_of([&] {
          ir::bind(ir::parse_op("op f(X: f32[N]) -> Y: f32[N] { Y[i] = X[i + N] }"), {{"N", 4}});
        }).find("runs over [4, 7]") != std::string::npos);
  // Sizes whose terms overflow are refused, not wrapped.
  CHECK(error_of([&] {
          ir::bind(ir::parse_op("op f(X: f32[N], Z: f32[M]) -> Y: f32[N] { Y[i] = X[i + 2147483648*N + 2147483648*M] + Z[0] }"),
                   {{"N", 2147483648}, {"M", 2147483648}});
        }).find("overflows with these sizes") != std::string::npos);
  // A reduction index of an older op text named like a size now means the size: the read it
  // makes is refused, and the message says why.
  std::string old_text = error_of([&] {
    ir::bind(ir::parse_op("op f(X: f32[N, K]) -> Y: f32[N] { Y[i] += X[i, K] }"), {{"N", 2}, {"K", 4}});
  });
  CHECK(old_text.find("index K (4) of 'X' runs over [4, 4]") != std::string::npos);
  CHECK(old_text.find("in an index a size's name means the size") != std::string::npos);
  // An index named like a size would change meaning: refused, on the left or in 'where'.
  CHECK(parse_error("op f(A: f32[N, K]) -> B: f32[N] {\n  B[N] += A[N, k]\n}").find("index 'N' on the left of 'B' is named like a size") !=
        std::string::npos);
  // K is no size of this op: the usual error.
  CHECK(parse_error("op f(A: f32[N]) -> B: f32[N] {\n  B[i] += A[i] where K < 3\n}").find("not used by the statement") !=
        std::string::npos);
  CHECK(parse_error("op f(A: f32[N, R]) -> B: f32[N] {\n  B[i] += A[i, 0] * 2.0 where R < 3\n}").find("named like a size") !=
        std::string::npos);
}

TEST_CASE("padding: errors say where and why") {
  CHECK(parse_error("op f(X: f32[N]) -> Y: f32[N] pad 0 {\n  Y[i] = X[i]\n}").find("output 'Y' cannot declare 'pad'") !=
        std::string::npos);
  CHECK(parse_error("op f(X: f32[N] pad) -> Y: f32[N] {\n  Y[i] = X[i]\n}").find("expected the pad value") !=
        std::string::npos);
  CHECK(parse_error("op f(X: f32[N] pad nan) -> Y: f32[N] {\n  Y[i] = X[i]\n}").find("1:20: expected the pad value") !=
        std::string::npos);
  CHECK(parse_error("op f(X: f32[N] pad 1e39) -> Y: f32[N] {\n  Y[i] = X[i]\n}").find("out of the f32 range") !=
        std::string::npos);
}
