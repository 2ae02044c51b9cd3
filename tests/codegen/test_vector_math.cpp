// The CPU prelude's builtins in SIMD lanes against the correctly rounded result (double-precision
// libm, rounded to float), over 3 million inputs each: random bit patterns (NaNs, infinities,
// subnormals, huge magnitudes), a dense range around 0 and every magnitude with both signs, and
// the special values. The largest errors in ulps are the README's ("Vector math").
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "helpers.hpp"
#include "support/subprocess.hpp"

namespace tiletune::codegen {
extern const char* const kCpuPrelude;
}

using namespace tiletune;

namespace {

// Prints "NAME MAX_ULPS WORST_X [WORST_Y]" per function, and "NAME mismatch ..." for a NaN, sign
// or infinity where the reference has none.
const char* kHarness = R"(
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

static long long ordered(float f) {
  int i;
  std::memcpy(&i, &f, 4);
  return i < 0 ? -(long long)(i & 0x7fffffff) : i;
}
static double ulps(float got, float want) {
  if (want != want) return got != got ? 0 : 1e30;
  if (got != got) return 1e30;
  long long d = ordered(got) - ordered(want);
  return d < 0 ? -d : d;
}
static float from_bits(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }

static std::vector<float> inputs() {
  std::vector<float> v = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f, 1.17549435e-38f,
                          -1.17549435e-38f, 1e-30f, 3.4028235e38f, -3.4028235e38f, 1.0f, -1.0f, 0.5f, 2.0f,
                          88.72f, 89.0f, -87.3f, -103.9f, -104.5f, 0.875f, 3.92f, 0.55f, 9.1f, -9.1f};
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> dense(-12.0f, 12.0f), expo(-140.0f, 127.0f);
  for (int i = 0; i < (1 << 20); ++i) v.push_back(from_bits(rng()));
  for (int i = 0; i < (1 << 20); ++i) v.push_back(dense(rng));
  for (int i = 0; i < (1 << 20); ++i) v.push_back((i & 1 ? -1.0f : 1.0f) * std::exp2(expo(rng)));
  return v;
}

template <typename V, typename R>
static void check1(const char* name, V vec, R ref, const std::vector<float>& in) {
  double worst = 0;
  float at = 0;
  for (size_t i = 0; i + TT_LANES <= in.size(); i += TT_LANES) {
    tt_vf x;
    for (int l = 0; l < TT_LANES; ++l) x[l] = in[i + l];
    tt_vf y = vec(x);
    for (int l = 0; l < TT_LANES; ++l) {
      double e = ulps(y[l], (float)ref((double)x[l]));
      if (e > worst) worst = e, at = x[l];
    }
  }
  std::printf("%s %.0f %.9g\n", name, worst, at);
}

int main() {
  std::vector<float> in = inputs();
  check1("exp", tt_vexp, [](double x) { return std::exp(x); }, in);
  check1("log", tt_vlog, [](double x) { return std::log(x); }, in);
  check1("sqrt", tt_vsqrt, [](double x) { return std::sqrt(x); }, in);
  check1("tanh", tt_vtanh, [](double x) { return std::tanh(x); }, in);
  check1("sigmoid", tt_vsigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, in);
  check1("erf", tt_verf, [](double x) { return std::erf(x); }, in);
  check1("abs", static_cast<tt_vf (*)(tt_vf)>(tt_vabs), [](double x) { return std::fabs(x); }, in);
  check1("round", tt_vround, [](double x) { return std::nearbyint(x); }, in);
  // pow over pairs: every input against a few exponents, and random pairs of positive bases.
  double worst = 0;
  float wx = 0, wy = 0;
  std::vector<float> ys = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, 3.0f, -3.0f, 0.5f, -0.5f, 1.5f, 7.25f, INFINITY, -INFINITY, NAN};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> base(0.0f, 16.0f), power(-24.0f, 24.0f);
  for (size_t i = 0; i + TT_LANES <= in.size(); i += TT_LANES) {
    tt_vf x, y;
    for (int l = 0; l < TT_LANES; ++l) {
      bool pair = (i / TT_LANES) % 2;
      x[l] = pair ? base(rng) : in[i + l];
      y[l] = pair ? power(rng) : ys[(i + l) % ys.size()];
    }
    tt_vf r = tt_vpow(x, y);
    for (int l = 0; l < TT_LANES; ++l) {
      double e = ulps(r[l], (float)std::pow((double)x[l], (double)y[l]));
      if (e > worst) worst = e, wx = x[l], wy = y[l];
    }
  }
  std::printf("pow %.0f %.9g %.9g\n", worst, wx, wy);
}
)";

std::map<std::string, double> worst_errors(int lanes, const test::TempDir& dir) {
  std::string src = dir.file("math" + std::to_string(lanes) + ".cpp"), exe = dir.file("math" + std::to_string(lanes));
  std::ofstream(src) << "#define TT_LANES " << lanes << "\n" << codegen::kCpuPrelude << kHarness;
  // The kernels' own flags (codegen/cpu_backend.cpp), -O2 for a quicker build.
  auto built = run_process({"g++", "-O2", "-march=native", "-ffp-contract=fast", "-fno-math-errno", "-fopenmp",
                            "-std=c++17", "-w", src, "-o", exe},
                           240);
  REQUIRE_MESSAGE(built.ok(), built.output);
  auto ran = run_process({exe}, 240);
  REQUIRE_MESSAGE(ran.ok(), ran.output);
  MESSAGE(lanes << " lanes:\n" << ran.output);
  std::map<std::string, double> worst;
  std::istringstream lines(ran.output);
  std::string name;
  double ulps;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    if (words >> name >> ulps) worst[name] = ulps;
  }
  return worst;
}

}  // namespace

TEST_CASE("vector math: every builtin in SIMD lanes is within its documented error, special values included") {
  // The README's table ("Vector math"): the largest error in ulps against the correctly rounded result.
  const std::map<std::string, double> bound = {{"exp", 1},     {"log", 1}, {"sqrt", 0}, {"tanh", 2}, {"erf", 1},
                                               {"sigmoid", 3}, {"abs", 0}, {"pow", 1},  {"round", 0}};
  test::TempDir dir;
  for (int lanes : {8, 4, 16}) {
    CAPTURE(lanes);
    auto worst = worst_errors(lanes, dir);
    for (auto& [name, limit] : bound) {
      CAPTURE(name);
      REQUIRE(worst.count(name));
      CHECK(worst[name] <= limit);
    }
  }
}

TEST_CASE("vector math: the erf tables are what scripts/fit_erf.py fits") {
  // The tables are pasted from the script's output; a refit that is not pasted, or a table
  // edited by hand, must not pass unnoticed.
  auto fitted = run_process({"python3", std::string(TILETUNE_SOURCE_DIR) + "/scripts/fit_erf.py"}, 240);
  REQUIRE_MESSAGE(fitted.ok(), fitted.output);
  const std::string prelude = codegen::kCpuPrelude;
  std::istringstream lines(fitted.output);
  int tables = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("static const float tt_erf_c", 0) != 0) continue;
    CAPTURE(line);
    CHECK(prelude.find(line) != std::string::npos);
    ++tables;
  }
  CHECK(tables == 6);
}
