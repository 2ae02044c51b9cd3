// The text every generated CPU kernel starts with (see the comment inside).
namespace tiletune::codegen {
extern const char* const kCpuPrelude;
const char* const kCpuPrelude = R"TT_PRELUDE(
// Helpers every generated CPU kernel starts with: a GCC vector type of TT_LANES floats and the
// scalar and vector forms of each builtin of the tile-op language. Comparisons give 1 or 0;
// max/min use the same `a > b ? a : b` form in scalar and vector code so NaNs agree.
#include <cmath>
#include <cstdint>
#include <omp.h>
typedef float tt_vf __attribute__((vector_size(TT_LANES * 4)));
typedef int tt_vi __attribute__((vector_size(TT_LANES * 4)));
static inline tt_vf tt_load(const float* p) { tt_vf v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline void tt_store(float* p, tt_vf v) { __builtin_memcpy(p, &v, sizeof v); }
// x - 0 is exactly x for every x (x + 0 is not, for -0), so the compiler folds it and
// broadcasts straight from memory; x + 0 cost one scalar add per broadcast.
static inline tt_vf tt_splat(float x) { return x - tt_vf{}; }
// The first n lanes (0 < n < TT_LANES) of a vector at a tensor's end; the other lanes read as
// 0 and are never written. Masked instructions on AVX-512, a short copy elsewhere.
#if defined(__AVX512F__) && TT_LANES == 16
#include <immintrin.h>
static inline tt_vf tt_load_n(const float* p, std::int64_t n) {
  return (tt_vf)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
}
static inline void tt_store_n(float* p, tt_vf v, std::int64_t n) {
  _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (__m512)v);
}
#else
static inline tt_vf tt_load_n(const float* p, std::int64_t n) { tt_vf v = tt_vf{}; __builtin_memcpy(&v, p, n * 4); return v; }
static inline void tt_store_n(float* p, tt_vf v, std::int64_t n) { __builtin_memcpy(p, &v, n * 4); }
#endif
// A vector of the lanes p[0], p[s], p[2s], ...: an output vectorized along an axis it is
// not contiguous in (gathered and scattered once per reduction block, not per update).
static inline tt_vf tt_load_s(const float* p, std::int64_t s) { tt_vf v; for (int i = 0; i < TT_LANES; ++i) v[i] = p[i * s]; return v; }
static inline void tt_store_s(float* p, tt_vf v, std::int64_t s) { for (int i = 0; i < TT_LANES; ++i) p[i * s] = v[i]; }
static inline std::int64_t tt_imin(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
static inline float tt_max(float a, float b) { return a > b ? a : b; }
static inline float tt_min(float a, float b) { return a < b ? a : b; }
static inline float tt_exp(float x) { return std::exp(x); }
static inline float tt_log(float x) { return std::log(x); }
static inline float tt_sqrt(float x) { return std::sqrt(x); }
static inline float tt_tanh(float x) { return std::tanh(x); }
static inline float tt_abs(float x) { return std::fabs(x); }
static inline float tt_erf(float x) { return std::erf(x); }
static inline float tt_pow(float x, float y) { return std::pow(x, y); }
static inline float tt_sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
static inline float tt_select(float c, float a, float b) { return c != 0.0f ? a : b; }
static inline tt_vf tt_vmax(tt_vf a, tt_vf b) { return a > b ? a : b; }
static inline tt_vf tt_vmin(tt_vf a, tt_vf b) { return a < b ? a : b; }
static inline tt_vf tt_vbool(tt_vi m) { return m ? tt_splat(1.0f) : tt_splat(0.0f); }
static inline tt_vf tt_vselect(tt_vf c, tt_vf a, tt_vf b) { return c != tt_splat(0.0f) ? a : b; }
#define TT_LANEWISE(name, fn) \
  static inline tt_vf name(tt_vf x) { tt_vf r; for (int i = 0; i < TT_LANES; ++i) r[i] = fn(x[i]); return r; }
// exp in SIMD lanes: exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln(2) / 2, with a
// degree-6 polynomial (relative error below 3e-7). NaN stays NaN.
static inline tt_vf tt_vexp(tt_vf x) {
  tt_vf c = tt_vmin(tt_vmax(x, tt_splat(-87.3f)), tt_splat(88.7f));
  tt_vf t = c * 1.44269504f + 12582912.0f;  // adding 1.5 * 2^23 rounds to an integer
  tt_vf n = t - 12582912.0f;
  tt_vf r = c - n * 0.693145752f - n * 1.42860677e-6f;
  tt_vf p = tt_splat(1.0f / 720) * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  tt_vi bits = ((tt_vi)t - 0x4B400000 + 127) << 23;  // 2^n from the integer left in t's mantissa
  tt_vf y = p * (tt_vf)bits;
  return x != x ? x : y;
}
static inline tt_vf tt_vtanh(tt_vf x) {
  tt_vf e = tt_vexp(x * 2.0f);
  return 1.0f - 2.0f / (e + 1.0f);
}
static inline tt_vf tt_vsigmoid(tt_vf x) { return 1.0f / (1.0f + tt_vexp(-x)); }
static inline tt_vf tt_vabs(tt_vf x) { return x < 0.0f ? -x : x; }
TT_LANEWISE(tt_vlog, tt_log)
TT_LANEWISE(tt_vsqrt, tt_sqrt)
TT_LANEWISE(tt_verf, tt_erf)
static inline tt_vf tt_vpow(tt_vf x, tt_vf y) { tt_vf r; for (int i = 0; i < TT_LANES; ++i) r[i] = tt_pow(x[i], y[i]); return r; }
static inline float tt_hsum(tt_vf v) { float s = 0; for (int i = 0; i < TT_LANES; ++i) s += v[i]; return s; }
static inline float tt_hprod(tt_vf v) { float s = 1; for (int i = 0; i < TT_LANES; ++i) s *= v[i]; return s; }
static inline float tt_hmax(tt_vf v) { float s = v[0]; for (int i = 1; i < TT_LANES; ++i) s = tt_max(s, v[i]); return s; }
static inline float tt_hmin(tt_vf v) { float s = v[0]; for (int i = 1; i < TT_LANES; ++i) s = tt_min(s, v[i]); return s; }
)TT_PRELUDE";
}  // namespace tiletune::codegen
