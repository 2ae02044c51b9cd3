// The text every generated CPU kernel starts with (see the comment inside).
#include <set>
#include <sstream>

#include "codegen/cpu_emitter.hpp"

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
// 0 and are never written. Masked instructions on AVX-512; on AVX2 a masked load (one
// instruction where the copy is several; it measured no faster on a stride-2 depthwise kernel,
// which loads a row's last vector this way at every tap) and a short copy to store (AVX2's
// masked store is slow on AMD); a short copy elsewhere.
#if defined(__AVX512F__) && TT_LANES == 16
#include <immintrin.h>
static inline tt_vf tt_load_n(const float* p, std::int64_t n) {
  return (tt_vf)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
}
static inline void tt_store_n(float* p, tt_vf v, std::int64_t n) {
  _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (__m512)v);
}
#elif defined(__AVX2__) && TT_LANES == 8
#include <immintrin.h>
static inline tt_vf tt_load_n(const float* p, std::int64_t n) {
  __m256i first_n = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return (tt_vf)_mm256_maskload_ps(p, first_n);
}
static inline void tt_store_n(float* p, tt_vf v, std::int64_t n) { __builtin_memcpy(p, &v, n * 4); }
#else
static inline tt_vf tt_load_n(const float* p, std::int64_t n) { tt_vf v = tt_vf{}; __builtin_memcpy(&v, p, n * 4); return v; }
static inline void tt_store_n(float* p, tt_vf v, std::int64_t n) { __builtin_memcpy(p, &v, n * 4); }
#endif
// A vector of the lanes p[0], p[s], p[2s], ...: an output vectorized along an axis it is
// not contiguous in (gathered and scattered once per reduction block, not per update).
static inline tt_vf tt_load_s(const float* p, std::int64_t s) { tt_vf v; for (int i = 0; i < TT_LANES; ++i) v[i] = p[i * s]; return v; }
static inline void tt_store_s(float* p, tt_vf v, std::int64_t s) { for (int i = 0; i < TT_LANES; ++i) p[i * s] = v[i]; }
static inline std::int64_t tt_imin(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
// Reads of a padded input (`X: f32[...] pad V` in the op) on the register tiles that reach past
// its border: an index outside [0, n) reads the pad value. Tiles inside never call these.
static inline bool tt_in(std::int64_t i, std::int64_t n) { return (std::uint64_t)i < (std::uint64_t)n; }
// A vector of a row of n floats from index i on (p points at index i): lanes outside the row
// read `pad`, and only lanes inside it touch memory.
// Masked loads where the ISA has them (on AVX2 after a plain load for a vector inside the row),
// lane by lane elsewhere.
#if defined(__AVX512F__) && TT_LANES == 16
#include <immintrin.h>
static inline tt_vf tt_load_pad(const float* p, std::int64_t i, std::int64_t n, float pad) {
  std::int64_t lo = i < 0 ? -i : 0, hi = n - i;  // lanes [lo, hi) are inside
  lo = lo > 16 ? 16 : lo;
  hi = hi > 16 ? 16 : hi < lo ? lo : hi;
  __mmask16 m = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
  return (tt_vf)_mm512_mask_loadu_ps(_mm512_set1_ps(pad), m, p);
}
#elif defined(__AVX2__) && TT_LANES == 8
#include <immintrin.h>
static inline tt_vf tt_load_pad(const float* p, std::int64_t i, std::int64_t n, float pad) {
  if (i >= 0 && i + 8 <= n) return tt_load(p);  // most vectors of a border tile: cheaper than the mask
  // Lane j is inside when 0 <= i + j < n, compared in 32 bits: a dimension is below 2^31, and
  // i clamped to [-8, n] keeps every lane's answer while i + 7 cannot wrap.
  std::int64_t c = i < -8 ? -8 : i > n ? n : i;
  __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i inside = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx),
                                    _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(-1)));
  __m256 v = _mm256_maskload_ps(p, inside);
  return (tt_vf)_mm256_blendv_ps(_mm256_set1_ps(pad), v, _mm256_castsi256_ps(inside));
}
#else
static inline tt_vf tt_load_pad(const float* p, std::int64_t i, std::int64_t n, float pad) {
  if (i >= 0 && i + TT_LANES <= n) return tt_load(p);
  tt_vf v; for (int j = 0; j < TT_LANES; ++j) v[j] = tt_in(i + j, n) ? p[j] : pad; return v;
}
#endif
// Rows of a strided window, vectorized along the output (I[..., 2 * x + s] along x): lane j
// reads p[j * s]. Stride 2 is two loads and one shuffle, and the second load stops at the last
// lane's element, so that no load passes the row's end; other strides go lane by lane.
// tt_load_rows_n reads the first n lanes (the others are 0), tt_load_rows_pad the lanes inside
// a row of n floats from index i on (the others are `pad`).
#if TT_LANES == 16
static inline tt_vf tt_even_lanes(tt_vf a, tt_vf b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}
#elif defined(__AVX2__) && TT_LANES == 8
#include <immintrin.h>
// Two instructions: GCC turns the shuffle below into two vpermd and a blend, which ran a stride-2
// depthwise convolution 1.6x slower on Zen 3.
static inline tt_vf tt_even_lanes(tt_vf a, tt_vf b) {
  __m256 e = _mm256_shuffle_ps((__m256)a, (__m256)b, 0x88);  // a0 a2 b0 b2 | a4 a6 b4 b6
  return (tt_vf)_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
}
#elif TT_LANES == 8
static inline tt_vf tt_even_lanes(tt_vf a, tt_vf b) { return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14); }
#elif TT_LANES == 4
static inline tt_vf tt_even_lanes(tt_vf a, tt_vf b) { return __builtin_shufflevector(a, b, 0, 2, 4, 6); }
#else
static inline tt_vf tt_even_lanes(tt_vf a, tt_vf b) {
  tt_vf v; for (int j = 0; j < TT_LANES; ++j) v[j] = 2 * j < TT_LANES ? a[2 * j] : b[2 * j - TT_LANES]; return v;
}
#endif
static inline tt_vf tt_load_rows(const float* p, std::int64_t s) {
  if (s == 2) return tt_even_lanes(tt_load(p), tt_load_n(p + TT_LANES, TT_LANES - 1));
  return tt_load_s(p, s);
}
static inline tt_vf tt_load_rows_n(const float* p, std::int64_t s, std::int64_t n) {
  if (s == 2) {
    std::int64_t used = 2 * n - 1;  // elements from p on that the n lanes read
    return tt_even_lanes(tt_load_n(p, used < TT_LANES ? used : TT_LANES),
                         tt_load_n(p + TT_LANES, used > TT_LANES ? used - TT_LANES : 0));
  }
  tt_vf v = tt_vf{}; for (int j = 0; j < n; ++j) v[j] = p[j * s]; return v;
}
static inline tt_vf tt_load_rows_pad(const float* p, std::int64_t s, std::int64_t i, std::int64_t n, float pad) {
  // A border tile's vectors are mostly inside the row: those take two plain loads.
  if (s == 2 && i >= 0 && i + 2 * TT_LANES <= n) return tt_even_lanes(tt_load(p), tt_load(p + TT_LANES));
  if (s == 2) return tt_even_lanes(tt_load_pad(p, i, n, pad), tt_load_pad(p + TT_LANES, i + TT_LANES, n, pad));
  tt_vf v; for (int j = 0; j < TT_LANES; ++j) v[j] = tt_in(i + j * s, n) ? p[j * s] : pad; return v;
}
// Packing an input whose panels run across its contiguous dimension (B of C = A * B^T along
// N): a square tile of TT_LANES rows of `from` (row stride fs) becomes TT_LANES rows of `to`
// (row stride ts), transposed in registers: log2(TT_LANES) rounds of interleaving row i with
// row i + TT_LANES / 2 (two strided loops of single floats ran the pack at a fifth of the
// time of the GEMM it fed: Q * K^T, 12 x 128 x 128 x 64).
#if TT_LANES == 16
static inline tt_vf tt_zip_lo(tt_vf a, tt_vf b) { return __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23); }
static inline tt_vf tt_zip_hi(tt_vf a, tt_vf b) { return __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31); }
#elif TT_LANES == 8
static inline tt_vf tt_zip_lo(tt_vf a, tt_vf b) { return __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11); }
static inline tt_vf tt_zip_hi(tt_vf a, tt_vf b) { return __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15); }
#elif TT_LANES == 4
static inline tt_vf tt_zip_lo(tt_vf a, tt_vf b) { return __builtin_shufflevector(a, b, 0, 4, 1, 5); }
static inline tt_vf tt_zip_hi(tt_vf a, tt_vf b) { return __builtin_shufflevector(a, b, 2, 6, 3, 7); }
#endif
static inline void tt_transpose_tile(const float* from, std::int64_t fs, float* to, std::int64_t ts) {
#if TT_LANES == 16 || TT_LANES == 8 || TT_LANES == 4
  tt_vf r[TT_LANES], t[TT_LANES];
  for (int i = 0; i < TT_LANES; ++i) r[i] = tt_load(from + i * fs);
  for (int round = 1; round < TT_LANES; round *= 2) {
    for (int i = 0; i < TT_LANES / 2; ++i) {
      t[2 * i] = tt_zip_lo(r[i], r[i + TT_LANES / 2]);
      t[2 * i + 1] = tt_zip_hi(r[i], r[i + TT_LANES / 2]);
    }
    for (int i = 0; i < TT_LANES; ++i) r[i] = t[i];
  }
  for (int i = 0; i < TT_LANES; ++i) tt_store(to + i * ts, r[i]);
#else
  for (int i = 0; i < TT_LANES; ++i)
    for (int j = 0; j < TT_LANES; ++j) to[j * ts + i] = from[i * fs + j];
#endif
}
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
// The builtins in SIMD lanes. Each is a polynomial after an exact range reduction; the largest
// error against the correctly rounded result, measured over 3 million inputs by
// tests/codegen/test_vector_math.cpp, is in the README ("Vector math"). Special inputs (NaN,
// infinities, zeros, subnormals, negative logs) give what libm gives.
static inline tt_vf tt_bits_f(tt_vi i) { return (tt_vf)i; }
static inline tt_vi tt_f_bits(tt_vf f) { return (tt_vi)f; }
// exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln(2) / 2, with a degree-6 fit of exp(r).
// 2^n is applied in two halves, so that overflow gives inf and underflow subnormals or 0.
static inline tt_vf tt_vexp(tt_vf x) {
  tt_vf c = tt_vmin(tt_vmax(x, tt_splat(-104.0f)), tt_splat(89.0f));
  tt_vf t = c * 1.44269504f + 12582912.0f;  // adding 1.5 * 2^23 rounds to an integer
  tt_vf n = t - 12582912.0f;
  tt_vf r = c - n * 0.693145752f - n * 1.42860677e-6f;
  tt_vf p = tt_splat(0.00139411084f) * r + 0.00837512640f;
  p = p * r + 0.0416663529f;
  p = p * r + 0.166664155f;
  p = p * r + 0.500000005f;
  p = p * r + 1.00000004f;
  p = p * r + 1.0f;
  tt_vi ni = tt_f_bits(t) - 0x4B400000;  // n, from the integer left in t's mantissa
  tt_vi n1 = ni >> 1, n2 = ni - n1;
  tt_vf y = p * tt_bits_f((n1 + 127) << 23) * tt_bits_f((n2 + 127) << 23);
  return x != x ? x : y;
}
// x = 2^k m exactly, m in [sqrt(1/2), sqrt(2)), for positive x (subnormals scaled by 2^23 first).
static inline void tt_vlog_reduce(tt_vf x, tt_vf* k, tt_vf* m) {
  tt_vi tiny = x < 1.17549435e-38f;
  tt_vi ix = tt_f_bits(tiny ? x * 8388608.0f : x) + (0x3f800000 - 0x3f3504f3);
  *k = __builtin_convertvector((ix >> 23) - 127 + (tiny & -23), tt_vf);
  *m = tt_bits_f((ix & 0x007fffff) + 0x3f3504f3);
}
// log(x) = k ln 2 + log(1 + f), 1 + f = m, log(1 + f) from s = f / (2 + f) (FreeBSD's logf).
static inline tt_vf tt_vlog(tt_vf x) {
  tt_vf k, m;
  tt_vlog_reduce(x, &k, &m);
  tt_vf f = m - 1.0f;
  tt_vf s = f / (f + 2.0f), z = s * s, w = z * z;
  tt_vf R = z * (0.66666662693f + w * 0.28498786688f) + w * (0.40000972152f + w * 0.24279078841f);
  tt_vf hfsq = 0.5f * f * f;
  tt_vf y = s * (hfsq + R) + k * 9.0580006145e-06f - hfsq + f + k * 6.9313812256e-01f;
  y = x == 0.0f ? tt_splat(-INFINITY) : y;
  y = x == INFINITY ? x : y;
  return x < 0.0f || x != x ? tt_splat(NAN) : y;
}
#if defined(__AVX512F__) && TT_LANES == 16
static inline tt_vf tt_vsqrt(tt_vf x) { return (tt_vf)_mm512_sqrt_ps((__m512)x); }
#elif defined(__AVX__) && TT_LANES == 8
#include <immintrin.h>
static inline tt_vf tt_vsqrt(tt_vf x) { return (tt_vf)_mm256_sqrt_ps((__m256)x); }
#elif defined(__SSE2__) && TT_LANES == 4
#include <immintrin.h>
static inline tt_vf tt_vsqrt(tt_vf x) { return (tt_vf)_mm_sqrt_ps((__m128)x); }
#else
static inline tt_vf tt_vsqrt(tt_vf x) { tt_vf r; for (int i = 0; i < TT_LANES; ++i) r[i] = __builtin_sqrtf(x[i]); return r; }
#endif
static inline tt_vf tt_vabs(tt_vf x) { return tt_bits_f(tt_f_bits(x) & 0x7fffffff); }
static inline tt_vf tt_vcopysign(tt_vf mag, tt_vf sign) {
  return tt_bits_f((tt_f_bits(mag) & 0x7fffffff) | (tt_f_bits(sign) & (int)0x80000000));
}
// Lane l of the result is t[i[l]], 0 <= i[l] < 16: one permute at 16 lanes, two and a blend at 8
// (GCC's variable shuffles), one load per lane below.
static inline tt_vf tt_vtable16(const float* t, tt_vi i) {
#if TT_LANES == 16
  tt_vf v; __builtin_memcpy(&v, t, sizeof v); return __builtin_shuffle(v, i);
#elif TT_LANES == 8
  tt_vf lo, hi; __builtin_memcpy(&lo, t, sizeof lo); __builtin_memcpy(&hi, t + 8, sizeof hi);
  return __builtin_shuffle(lo, hi, i);
#else
  tt_vf v; for (int l = 0; l < TT_LANES; ++l) v[l] = t[i[l]]; return v;
#endif
}
// erf on [0, 4) in 16 intervals [i / 4, (i + 1) / 4), each a degree-5 polynomial in t = |x| - i / 4
// (exact) whose coefficients a table lookup gives every lane (interpolated at Chebyshev nodes by
// scripts/fit_erf.py, which prints these tables); interval 0 is t + t q(t), so that erf keeps its
// relative accuracy down to the subnormals. From 4 on, erf rounds to 1. It replaces a fit over
// two ranges with an exp, which GELU(erf) epilogues paid at every output: a loop of erf over 16
// lanes compiles (GCC 12, -O3 -march=native) to 31 instructions a vector, against 75 with the old
// one, and the BERT FFN layer went from 0.92x oneDNN to 0.99x.
static const float tt_erf_c0[16] __attribute__((aligned(64))) = {0.0f, 0.276326388f, 0.520499885f, 0.711155653f, 0.842700779f, 0.92290014f, 0.966105163f, 0.986671686f, 0.995322287f, 0.998537302f, 0.999593019f, 0.999899387f, 0.999977887f, 0.999995708f, 0.999999285f, 0.999999881f};
static const float tt_erf_c1[16] __attribute__((aligned(64))) = {0.128379136f, 1.06001246f, 0.87878108f, 0.642930627f, 0.415107965f, 0.236521885f, 0.118930809f, 0.0527751595f, 0.0206669327f, 0.00714221224f, 0.00217820425f, 0.000586235605f, 0.000139236188f, 2.91834695e-05f, 5.39790108e-06f, 8.81078336e-07f};
static const float tt_erf_c2[16] __attribute__((aligned(64))) = {6.1887431e-06f, -0.264925331f, -0.439322293f, -0.482177228f, -0.415129721f, -0.29568693f, -0.178419918f, -0.0923640728f, -0.0413315929f, -0.0160652455f, -0.00544195529f, -0.00161030237f, -0.000416963769f, -9.46016517e-05f, -1.88257236e-05f, -3.28857641e-06f};
static const float tt_erf_c3[16] __attribute__((aligned(64))) = {-0.37631622f, -0.310496718f, -0.147653177f, 0.0264100619f, 0.138736859f, 0.168142095f, 0.139175951f, 0.0902963132f, 0.0481846929f, 0.021639768f, 0.00828533061f, 0.00272636348f, 0.000775221328f, 0.000191205167f, 4.10234206e-05f, 7.67283109e-06f};
static const float tt_erf_c4[16] __attribute__((aligned(64))) = {0.00192227843f, 0.137071475f, 0.192424133f, 0.153891176f, 0.0665216371f, -0.0108338427f, -0.0479567014f, -0.0492550954f, -0.0341851711f, -0.0184310433f, -0.00811304897f, -0.00298706419f, -0.000932731899f, -0.000249203149f, -5.73127836e-05f, -1.13954584e-05f};
static const float tt_erf_c5[16] __attribute__((aligned(64))) = {0.106150225f, 0.0453474596f, -0.027088888f, -0.0667813793f, -0.0610986724f, -0.0306385886f, -0.00227928814f, 0.011347224f, 0.0124515528f, 0.00836014282f, 0.00423377566f, 0.00172564492f, 0.000583217596f, 0.000166177677f, 4.03350859e-05f, 8.39855056e-06f};
static inline tt_vf tt_verf(tt_vf x) {
  tt_vf a = tt_vabs(x);
  tt_vi i = __builtin_convertvector(tt_vmin(a * 4.0f, tt_splat(15.0f)), tt_vi);
  tt_vf t = a - __builtin_convertvector(i, tt_vf) * 0.25f;
  tt_vf p = tt_vtable16(tt_erf_c5, i);
  p = p * t + tt_vtable16(tt_erf_c4, i);
  p = p * t + tt_vtable16(tt_erf_c3, i);
  p = p * t + tt_vtable16(tt_erf_c2, i);
  p = p * t + tt_vtable16(tt_erf_c1, i);
  tt_vf y = p * t + (i == 0 ? t : tt_vtable16(tt_erf_c0, i));
  y = a >= 4.0f ? tt_splat(1.0f) : y;
  return x != x ? x : tt_vcopysign(y, x);
}
// tanh: |x| < 0.55: x + x^3 P(x^2); beyond, 1 - 2 / (exp(2|x|) + 1), which is 1 past 9.1.
static inline tt_vf tt_vtanh(tt_vf x) {
  tt_vf a = tt_vabs(x), z = a * a;
  tt_vf p = tt_splat(-0.00661022783f) * z + 0.0213093887f;
  p = p * z - 0.0539094288f;
  p = p * z + 0.133331137f;
  p = p * z - 0.33333332f;
  tt_vf small = a + a * z * p;
  tt_vf large = 1.0f - 2.0f / (tt_vexp(2.0f * tt_vmin(a, tt_splat(10.0f))) + 1.0f);
  tt_vf y = a < 0.55f ? small : large;
  return x != x ? x : tt_vcopysign(y, x);
}
// sigmoid from e = exp(-|x|), which never overflows: 1 / (1 + e), or e / (1 + e) below 0.
static inline tt_vf tt_vsigmoid(tt_vf x) {
  tt_vf e = tt_vexp(-tt_vabs(x));
  tt_vf s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : x < 0.0f ? e * s : x;
}
// pow = 2^(y log2 x) in double precision lanes (a float result is then within an ulp); lanes with
// x <= 0, x or y not finite (C's special cases) go to libm one by one.
typedef double tt_vd __attribute__((vector_size(TT_LANES * 8)));
typedef long long tt_vl __attribute__((vector_size(TT_LANES * 8)));
static inline tt_vf tt_vpow(tt_vf x, tt_vf y) {
  tt_vi special = ~(x > 0.0f) | (x == INFINITY) | ~(tt_vabs(y) < INFINITY);
  tt_vf kf, mf;
  tt_vlog_reduce(x, &kf, &mf);
  tt_vd k = __builtin_convertvector(kf, tt_vd), m = __builtin_convertvector(mf, tt_vd);
  tt_vd s = (m - 1.0) / (m + 1.0), s2 = s * s;  // log(m) = 2 atanh(s), |s| < 0.172
  tt_vd l = tt_vd{} + 1.0 / 19;  // atanh(s) / s = sum of s^2i / (2i + 1), i <= 9
  for (int i = 17; i >= 1; i -= 2) l = l * s2 + 1.0 / i;
  tt_vd t = __builtin_convertvector(y, tt_vd) * (k + 2.8853900817779268 * s * l);  // y log2 x
  tt_vd c = t < -160.0 ? -160.0 : t > 130.0 ? 130.0 : t;
  tt_vd n = (c + 6755399441055744.0) - 6755399441055744.0;  // round to an integer
  tt_vd r = (c - n) * 0.69314718055994531;  // |r| <= ln(2) / 2
  tt_vd e = tt_vd{} + 1.0;  // exp(r) = 1 + r (1 + r/2 (1 + r/3 (... (1 + r/9))))
  for (int i = 9; i >= 1; --i) e = e * r * (1.0 / i) + 1.0;
  tt_vl scale = (__builtin_convertvector(n, tt_vl) + 1023) << 52;
  tt_vf out = __builtin_convertvector(e * (tt_vd)scale, tt_vf);
  bool any = false;
  for (int i = 0; i < TT_LANES; ++i) any |= special[i] != 0;
  if (any)
    for (int i = 0; i < TT_LANES; ++i)
      if (special[i]) out[i] = (float)std::pow((double)x[i], (double)y[i]);
  return out;
}
static inline float tt_hsum(tt_vf v) { float s = 0; for (int i = 0; i < TT_LANES; ++i) s += v[i]; return s; }
static inline float tt_hprod(tt_vf v) { float s = 1; for (int i = 0; i < TT_LANES; ++i) s *= v[i]; return s; }
static inline float tt_hmax(tt_vf v) { float s = v[0]; for (int i = 1; i < TT_LANES; ++i) s = tt_max(s, v[i]); return s; }
static inline float tt_hmin(tt_vf v) { float s = v[0]; for (int i = 1; i < TT_LANES; ++i) s = tt_min(s, v[i]); return s; }
// Element types other than f32 (ir/dtype.hpp). Their storage types widen to the compute type
// when read (float for bf16 and f16, int for i8, u8 and i32) and round to nearest even when
// written; an integer saturates to its range and NaN writes 0. The f32 code above is untouched:
// typed tensors reach it through the overloads below, which widen their lanes on load.
static inline float tt_round(float x) { return __builtin_rintf(x); }  // to nearest even
static inline int tt_to_i32(float x) {
  if (!(x == x)) return 0;
  float r = __builtin_rintf(x);
  return r >= 2147483648.0f ? 2147483647 : r < -2147483648.0f ? (-2147483647 - 1) : (int)r;
}
static inline int tt_to_i32(int x) { return x; }
static inline float tt_to_f32(float x) { return x; }
static inline float tt_to_f32(int x) { return (float)x; }
static inline int tt_sat(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }
struct tt_bf16 {
  std::uint16_t bits;
  tt_bf16() = default;
  tt_bf16(float f) {
    std::uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    bits = f != f ? (std::uint16_t)((u >> 16) | 0x40) : (std::uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  tt_bf16(double d) : tt_bf16((float)d) {}
  tt_bf16(int i) : tt_bf16((float)i) {}
  operator float() const {
    std::uint32_t u = (std::uint32_t)bits << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
  }
};
struct tt_f16 {
  _Float16 h;
  tt_f16() = default;
  tt_f16(float f) : h((_Float16)f) {}
  tt_f16(double d) : tt_f16((float)d) {}
  tt_f16(int i) : tt_f16((float)i) {}
  operator float() const { return (float)h; }
};
struct tt_i32 {
  std::int32_t v;
  tt_i32() = default;
  tt_i32(int i) : v(i) {}
  tt_i32(float f) : v(tt_to_i32(f)) {}
  tt_i32(double d) : tt_i32((float)d) {}
  operator int() const { return v; }
};
// A byte that saturates to [lo, hi] when written: i8 and u8.
template <class T, int lo, int hi> struct tt_byte {
  T v;
  tt_byte() = default;
  tt_byte(int i) : v((T)tt_sat(i, lo, hi)) {}
  tt_byte(float f) : tt_byte(tt_to_i32(f)) {}
  tt_byte(double d) : tt_byte((float)d) {}
  operator int() const { return v; }
};
typedef tt_byte<std::int8_t, -128, 127> tt_i8;
typedef tt_byte<std::uint8_t, 0, 255> tt_u8;
// The vector and scalar type a storage type's values compute in.
template <class T> struct tt_kind { typedef tt_vf vec; typedef float value; };
template <> struct tt_kind<tt_i32> { typedef tt_vi vec; typedef int value; };
template <> struct tt_kind<tt_i8> { typedef tt_vi vec; typedef int value; };
template <> struct tt_kind<tt_u8> { typedef tt_vi vec; typedef int value; };
template <class T> using tt_vec = typename tt_kind<T>::vec;
template <class T> using tt_val = typename tt_kind<T>::value;
static inline tt_vi tt_splati(int x) { return x - tt_vi{}; }
template <class T> static inline tt_vec<T> tt_load(const T* p) {
  tt_vec<T> v; for (int i = 0; i < TT_LANES; ++i) v[i] = p[i]; return v;
}
template <class T> static inline tt_vec<T> tt_load_n(const T* p, std::int64_t n) {
  tt_vec<T> v = tt_vec<T>{}; for (int i = 0; i < n; ++i) v[i] = p[i]; return v;
}
template <class T> static inline tt_vec<T> tt_load_s(const T* p, std::int64_t s) {
  tt_vec<T> v; for (int i = 0; i < TT_LANES; ++i) v[i] = p[i * s]; return v;
}
template <class T> static inline tt_vec<T> tt_load_pad(const T* p, std::int64_t i, std::int64_t n, tt_val<T> pad) {
  tt_vec<T> v; for (int j = 0; j < TT_LANES; ++j) v[j] = tt_in(i + j, n) ? (tt_val<T>)p[j] : pad; return v;
}
template <class T> static inline tt_vec<T> tt_load_rows(const T* p, std::int64_t s) { return tt_load_s(p, s); }
template <class T> static inline tt_vec<T> tt_load_rows_n(const T* p, std::int64_t s, std::int64_t n) {
  tt_vec<T> v = tt_vec<T>{}; for (int j = 0; j < n; ++j) v[j] = p[j * s]; return v;
}
template <class T>
static inline tt_vec<T> tt_load_rows_pad(const T* p, std::int64_t s, std::int64_t i, std::int64_t n, tt_val<T> pad) {
  tt_vec<T> v; for (int j = 0; j < TT_LANES; ++j) v[j] = tt_in(i + j * s, n) ? (tt_val<T>)p[j * s] : pad; return v;
}
template <class T, class V> static inline void tt_store(T* p, V v) { for (int i = 0; i < TT_LANES; ++i) p[i] = v[i]; }
template <class T, class V> static inline void tt_store_n(T* p, V v, std::int64_t n) {
  T lanes[TT_LANES];
  tt_store(lanes, v);
  __builtin_memcpy(p, lanes, n * sizeof(T));
}
template <class T, class V> static inline void tt_store_s(T* p, V v, std::int64_t s) {
  for (int i = 0; i < TT_LANES; ++i) p[i * s] = v[i];
}
#if defined(__AVX512F__) && TT_LANES == 16
// Widening loads as one instruction each: bf16 is the top half of an f32, u8 and i8 extend.
static inline tt_vf tt_load(const tt_bf16* p) {
  return (tt_vf)_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p)), 16);
}
static inline tt_vi tt_load(const tt_u8* p) { return (tt_vi)_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)p)); }
static inline tt_vi tt_load(const tt_i8* p) { return (tt_vi)_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p)); }
#endif
static inline tt_vf tt_vto_f32(tt_vf v) { return v; }
static inline tt_vf tt_vto_f32(tt_vi v) { return __builtin_convertvector(v, tt_vf); }
static inline tt_vf tt_vround(tt_vf x) {
#if defined(__AVX512F__) && TT_LANES == 16
  return (tt_vf)_mm512_roundscale_ps((__m512)x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
  for (int i = 0; i < TT_LANES; ++i) x[i] = __builtin_rintf(x[i]);
  return x;
#endif
}
// Rounded to nearest even and saturated (2147483520 is the largest float below 2^31), NaN 0.
static inline tt_vi tt_vto_i32(tt_vf x) {
  tt_vf c = x == x ? tt_vmin(tt_vmax(x, tt_splat(-2147483648.0f)), tt_splat(2147483520.0f)) : tt_splat(0.0f);
  return __builtin_convertvector(tt_vround(c), tt_vi);
}
static inline tt_vi tt_vto_i32(tt_vi v) { return v; }
// Typed stores a vector at a time: the lanes rounded and saturated as the scalar stores do
// (one narrowing instruction each on AVX-512: with lane-by-lane stores the int8 GEMM 1024^3 of
// tiletune-bench ran at 825 GOP/s, with these at 1250-1400).
static inline tt_vi tt_clamp(tt_vi v, int lo, int hi) { return v < lo ? tt_splati(lo) : v > hi ? tt_splati(hi) : v; }
static inline void tt_store(tt_i32* p, tt_vi v) { __builtin_memcpy(p, &v, sizeof v); }
static inline void tt_store(tt_i32* p, tt_vf v) { tt_store(p, tt_vto_i32(v)); }
static inline tt_vi tt_load(const tt_i32* p) { tt_vi v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline void tt_store(tt_u8* p, tt_vi v) {
  v = tt_clamp(v, 0, 255);
#if defined(__AVX512F__) && TT_LANES == 16
  _mm_storeu_si128((__m128i*)p, _mm512_cvtepi32_epi8((__m512i)v));
#else
  for (int i = 0; i < TT_LANES; ++i) p[i].v = (std::uint8_t)v[i];
#endif
}
static inline void tt_store(tt_i8* p, tt_vi v) {
  v = tt_clamp(v, -128, 127);
#if defined(__AVX512F__) && TT_LANES == 16
  _mm_storeu_si128((__m128i*)p, _mm512_cvtepi32_epi8((__m512i)v));
#else
  for (int i = 0; i < TT_LANES; ++i) p[i].v = (std::int8_t)v[i];
#endif
}
static inline void tt_store(tt_u8* p, tt_vf v) { tt_store(p, tt_vto_i32(v)); }
static inline void tt_store(tt_i8* p, tt_vf v) { tt_store(p, tt_vto_i32(v)); }
#if defined(__AVX512BF16__) && TT_LANES == 16
static inline void tt_store(tt_bf16* p, tt_vf v) { _mm256_storeu_si256((__m256i*)p, (__m256i)_mm512_cvtneps_pbh((__m512)v)); }
#endif
#if defined(__AVX512F__) && TT_LANES == 16
static inline void tt_store(tt_f16* p, tt_vf v) {
  _mm256_storeu_si256((__m256i*)p, _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
static inline tt_vf tt_load(const tt_f16* p) { return (tt_vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p)); }
#endif
static inline void tt_store(tt_bf16* p, tt_vi v) { tt_store(p, tt_vto_f32(v)); }
static inline void tt_store(tt_f16* p, tt_vi v) { tt_store(p, tt_vto_f32(v)); }
static inline int tt_max(int a, int b) { return a > b ? a : b; }
static inline int tt_min(int a, int b) { return a < b ? a : b; }
static inline int tt_abs(int x) { return x < 0 ? -x : x; }
static inline int tt_select(float c, int a, int b) { return c != 0.0f ? a : b; }
static inline int tt_select(int c, int a, int b) { return c != 0 ? a : b; }
static inline float tt_select(int c, float a, float b) { return c != 0 ? a : b; }
static inline tt_vi tt_vmax(tt_vi a, tt_vi b) { return a > b ? a : b; }
static inline tt_vi tt_vmin(tt_vi a, tt_vi b) { return a < b ? a : b; }
static inline tt_vi tt_vabs(tt_vi x) { return x < 0 ? -x : x; }
static inline tt_vi tt_vselect(tt_vf c, tt_vi a, tt_vi b) { return c != tt_splat(0.0f) ? a : b; }
static inline tt_vi tt_vselect(tt_vi c, tt_vi a, tt_vi b) { return c != 0 ? a : b; }
static inline tt_vf tt_vselect(tt_vi c, tt_vf a, tt_vf b) { return c != 0 ? a : b; }
static inline int tt_hsum(tt_vi v) { int s = 0; for (int i = 0; i < TT_LANES; ++i) s += v[i]; return s; }
static inline int tt_hprod(tt_vi v) { int s = 1; for (int i = 0; i < TT_LANES; ++i) s *= v[i]; return s; }
static inline int tt_hmax(tt_vi v) { int s = v[0]; for (int i = 1; i < TT_LANES; ++i) s = tt_max(s, v[i]); return s; }
static inline int tt_hmin(tt_vi v) { int s = v[0]; for (int i = 1; i < TT_LANES; ++i) s = tt_min(s, v[i]); return s; }
// Dot-product tiles (ir::StageNest::dot_group): a vector of TT_LANES groups of 2 bf16 or 4
// bytes, raw; the broadcast operand's group as one 32-bit lane (the last group of an axis
// from its first `bytes` bytes, the rest 0); and the dot-product step, which adds the group's
// products to each lane: vdpbf16ps and vpdpbusd where the CPU has them, plain C elsewhere.
static inline tt_vi tt_load_raw(const void* p) { tt_vi v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline tt_vi tt_bcast32(const void* p) { int x; __builtin_memcpy(&x, p, 4); return tt_splati(x); }
static inline tt_vi tt_bcast_part(const void* p, std::int64_t bytes) {
  int x = 0; __builtin_memcpy(&x, p, bytes); return tt_splati(x);
}
static inline tt_vf tt_dot_bf16(tt_vf acc, tt_vi a, tt_vi b) {
#if defined(__AVX512BF16__) && TT_LANES == 16
  return (tt_vf)_mm512_dpbf16_ps((__m512)acc, (__m512bh)a, (__m512bh)b);
#else
  tt_bf16 x[2 * TT_LANES], y[2 * TT_LANES];
  __builtin_memcpy(x, &a, sizeof a);
  __builtin_memcpy(y, &b, sizeof b);
  for (int l = 0; l < TT_LANES; ++l) acc[l] += (float)x[2 * l] * (float)y[2 * l] + (float)x[2 * l + 1] * (float)y[2 * l + 1];
  return acc;
#endif
}
// u holds unsigned bytes, s signed ones: the sums are exact in i32.
static inline tt_vi tt_dot_u8s8(tt_vi acc, tt_vi u, tt_vi s) {
#if defined(__AVX512VNNI__) && TT_LANES == 16
  return (tt_vi)_mm512_dpbusd_epi32((__m512i)acc, (__m512i)u, (__m512i)s);
#else
  std::uint8_t x[4 * TT_LANES];
  std::int8_t y[4 * TT_LANES];
  __builtin_memcpy(x, &u, sizeof u);
  __builtin_memcpy(y, &s, sizeof s);
  for (int l = 0; l < TT_LANES; ++l)
    for (int i = 0; i < 4; ++i) acc[l] += (int)x[4 * l + i] * (int)y[4 * l + i];
  return acc;
#endif
}
)TT_PRELUDE";

std::vector<std::string> cpu_kernel_headers() {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::istringstream in(kCpuPrelude);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("#include <", 0) == 0 && seen.insert(line).second)
      out.push_back(line.substr(10, line.find('>') - 10));
  return out;
}

}  // namespace tiletune::codegen
