// The two dialects of the work-group emitter: their spellings, preambles and builtins.
#include "codegen/gpu_dialect.hpp"

namespace tiletune::codegen {

namespace {

constexpr const char* kHalves =
    R"TT(// bf16 and f16 tensors are stored as 16-bit words and computed in f32: widened on load,
// rounded to nearest even on store (f16: saturating to inf past 65504, subnormals kept).
TT_FN float tt_ld_bf16(TT_HALF b) { return TT_AS_FLOAT(((unsigned int)b) << 16); }
TT_FN TT_HALF tt_st_bf16(float f) {
  unsigned int u = TT_AS_UINT(f);
  return f != f ? (TT_HALF)((u >> 16) | 0x40u) : (TT_HALF)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
TT_FN float tt_ld_f16(TT_HALF h) {
  unsigned int s = ((unsigned int)h & 0x8000u) << 16, e = ((unsigned int)h >> 10) & 0x1fu, m = (unsigned int)h & 0x3ffu;
  if (e == 0) return TT_AS_FLOAT(s) + (s ? -1.0f : 1.0f) * (float)m * 5.9604645e-8f;
  if (e == 31) return TT_AS_FLOAT(s | 0x7f800000u | (m << 13));
  return TT_AS_FLOAT(s | ((e + 112u) << 23) | (m << 13));
}
TT_FN TT_HALF tt_st_f16(float f) {
  unsigned int u = TT_AS_UINT(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (TT_HALF)(s | 0x7e00u);
  if (a >= 0x477ff000u) return (TT_HALF)(s | 0x7c00u);
  if (a < 0x38800000u) return (TT_HALF)(s | (unsigned int)TT_RINT(TT_AS_FLOAT(a) * 16777216.0f));
  return (TT_HALF)(s | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13));
}

)TT";

}  // namespace

const Dialect& dialect_of(GpuDialect d) {
  static const Dialect opencl{"__kernel",
                              "__global ",
                              "restrict",
                              "__local",
                              "get_group_id(0)",
                              "get_local_id(0)",
                              "barrier(CLK_LOCAL_MEM_FENCE);",
                              "#define TT_MAX(a, b) ((a) > (b) ? (a) : (b))\n"
                              "#define TT_MIN(a, b) ((a) < (b) ? (a) : (b))\n"
                              "#define tt_sigmoid(x) (1.0f / (1.0f + exp(-(x))))\n"
                              "#define tt_select(c, a, b) ((c) != 0.0f ? (a) : (b))\n"
                              "#define TT_FN inline\n#define TT_HALF ushort\n#define TT_AS_FLOAT as_float\n"
                              "#define TT_AS_UINT as_uint\n#define TT_RINT rint\n" +
                                  std::string(kHalves),
                              {{"exp", "exp"},
                               {"log", "log"},
                               {"sqrt", "sqrt"},
                               {"tanh", "tanh"},
                               {"abs", "fabs"},
                               {"erf", "erf"},
                               {"pow", "pow"},
                               {"max", "TT_MAX"},
                               {"min", "TT_MIN"},
                               {"sigmoid", "tt_sigmoid"},
                               {"select", "tt_select"},
                               {"round", "rint"},
                               {"f32", "(float)"}}};
  static const Dialect cuda{"extern \"C\" __global__",
                            "",
                            "__restrict__",
                            "__shared__",
                            "blockIdx.x",
                            "threadIdx.x",
                            "__syncthreads();",
                            "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n"
                            "#define TT_MAX(a, b) ((a) > (b) ? (a) : (b))\n"
                            "#define TT_MIN(a, b) ((a) < (b) ? (a) : (b))\n"
                            "#define tt_sigmoid(x) (1.0f / (1.0f + expf(-(x))))\n"
                            "#define tt_select(c, a, b) ((c) != 0.0f ? (a) : (b))\n"
                            "#define TT_FN __device__ inline\n#define TT_HALF unsigned short\n"
                            "#define TT_AS_FLOAT __uint_as_float\n#define TT_AS_UINT __float_as_uint\n"
                            "#define TT_RINT rintf\n" +
                                std::string(kHalves),
                            {{"exp", "expf"},
                             {"log", "logf"},
                             {"sqrt", "sqrtf"},
                             {"tanh", "tanhf"},
                             {"abs", "fabsf"},
                             {"erf", "erff"},
                             {"pow", "powf"},
                             {"max", "TT_MAX"},
                             {"min", "TT_MIN"},
                             {"sigmoid", "tt_sigmoid"},
                             {"select", "tt_select"},
                             {"round", "rintf"},
                             {"f32", "(float)"}}};
  return d == GpuDialect::OpenCL ? opencl : cuda;
}

}  // namespace tiletune::codegen
