#include "vendors.hpp"

#include <omp.h>

#include <oneapi/dnnl/dnnl.h>
#include <chrono>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>

#include "support/error.hpp"

extern "C" {
#include <openblas-pthread/cblas.h>
}

namespace tiletune::bench {

namespace {

std::int64_t size_of(const ir::Workload& w, const char* name) { return w.sizes.at(name); }

//! A oneDNN primitive with its memories, bound to caller-owned buffers.
struct DnnlRunner {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
  void operator()() {
    prim.execute(stream, args);
    stream.wait();
  }
};

dnnl::memory::desc md(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag);
}

}  // namespace

VendorCall onednn_call(const ir::Workload& w, const std::vector<float*>& t, int threads) {
  using tag = dnnl::memory::format_tag;
  omp_set_num_threads(threads);
  const std::string& op = w.op.name;
  if (op == "matmul" || op == "matmul_bias_relu") {
    std::int64_t M = size_of(w, "M"), N = size_of(w, "N"), K = size_of(w, "K");
    float *A = t[0], *B = t[1];
    float* C = t.back();
    if (op == "matmul") return {"oneDNN sgemm", [=] { dnnl_sgemm('N', 'N', M, N, K, 1.0f, A, K, B, N, 0.0f, C, N); }};
    float* bias = t[2];
    return {"oneDNN sgemm + bias/relu pass", [=] {
              dnnl_sgemm('N', 'N', M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
#pragma omp parallel for num_threads(threads)
              for (std::int64_t m = 0; m < M; ++m)
                for (std::int64_t n = 0; n < N; ++n) C[m * N + n] = std::max(C[m * N + n] + bias[n], 0.0f);
            }};
  }
  auto r = std::make_shared<DnnlRunner>();
  auto mem = [&](const dnnl::memory::desc& d, float* p) { return dnnl::memory(d, r->engine, p); };
  if (op == "matmul_bias_gelu") {
    // oneDNN at its best: its matmul with the bias and gelu_erf fused as post-ops.
    std::int64_t M = size_of(w, "M"), N = size_of(w, "N"), K = size_of(w, "K");
    dnnl::post_ops post;
    post.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(post);
    dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(md({M, K}, tag::ab), md({K, N}, tag::ab), md({1, N}, tag::ab), md({M, N}, tag::ab)), attr,
        r->engine);
    r->prim = dnnl::matmul(pd);
    r->args = {{DNNL_ARG_SRC, mem(pd.src_desc(), t[0])},
               {DNNL_ARG_WEIGHTS, mem(pd.weights_desc(), t[1])},
               {DNNL_ARG_BIAS, mem(md({1, N}, tag::ab), t[2])},
               {DNNL_ARG_DST, mem(pd.dst_desc(), t[3])}};
    return {"oneDNN matmul + bias + gelu_erf post-op", [r] { (*r)(); }};
  }
  if (op == "batch_matmul" || op == "batch_matmul_nt") {
    dnnl::memory::dims a{size_of(w, "G"), size_of(w, "M"), size_of(w, "K")},
        b{size_of(w, "G"), size_of(w, "K"), size_of(w, "N")}, c{size_of(w, "G"), size_of(w, "M"), size_of(w, "N")};
    // The transposed operand as oneDNN takes it: B's logical [G, K, N] stored as [G, N, K] (acb).
    auto b_md = md(b, op == "batch_matmul_nt" ? tag::acb : tag::abc);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md(a, tag::abc), b_md, md(c, tag::abc)), r->engine);
    r->prim = dnnl::matmul(pd);
    r->args = {{DNNL_ARG_SRC, mem(pd.src_desc(), t[0])},
               {DNNL_ARG_WEIGHTS, mem(pd.weights_desc(), t[1])},
               {DNNL_ARG_DST, mem(pd.dst_desc(), t[2])}};
    return {"oneDNN matmul", [r] { (*r)(); }};
  }
  if (op.find("conv2d") != std::string::npos) {
    // The library's convolutions, by name: _p1 pads by 1, _s2 strides by 2, depthwise and
    // grouped split the channels, 1x1 has a KC filter, bias_relu fuses both.
    bool dw = op.rfind("depthwise", 0) == 0, grouped = op.rfind("grouped", 0) == 0, one = op == "conv2d_1x1";
    bool bias_relu = op.find("bias_relu") != std::string::npos;
    std::int64_t pad = op.find("p1") != std::string::npos ? 1 : 0, stride = op.find("s2") != std::string::npos ? 2 : 1;
    std::int64_t N = size_of(w, "N"), H = size_of(w, "H"), W = size_of(w, "W");
    std::int64_t G = grouped ? size_of(w, "G") : 1;
    std::int64_t C = grouped ? G * size_of(w, "CG") : size_of(w, "C");
    std::int64_t K = dw ? C : grouped ? G * size_of(w, "KG") : size_of(w, "K");
    std::int64_t R = one ? 1 : size_of(w, "R"), S = one ? 1 : size_of(w, "S");
    if (dw) G = C;
    std::int64_t OH = (H + 2 * pad - R) / stride + 1, OW = (W + 2 * pad - S) / stride + 1;
    dnnl::memory::dims src{N, C, H, W}, dst{N, K, OH, OW};
    dnnl::memory::dims wei = G > 1 ? dnnl::memory::dims{G, K / G, C / G, R, S} : dnnl::memory::dims{K, C, R, S};
    auto wei_plain = md(wei, G > 1 ? tag::goihw : tag::oihw);
    // oneDNN at its best: the layouts it picks (blocked), with the inputs reordered once here,
    // outside the timed calls, and the output left in its layout.
    dnnl::primitive_attr attr;
    if (bias_relu) {
      dnnl::post_ops post;
      post.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(post);
    }
    auto bias_md = bias_relu ? md({K}, tag::a) : dnnl::memory::desc();
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      md(src, tag::any), md(wei, tag::any), bias_md, md(dst, tag::any),
                                      {stride, stride}, {pad, pad}, {pad, pad});
    dnnl::convolution_forward::primitive_desc pd(d, attr, r->engine);
    r->prim = dnnl::convolution_forward(pd);
    dnnl::memory in(pd.src_desc(), r->engine), weights(pd.weights_desc(), r->engine), out(pd.dst_desc(), r->engine);
    dnnl::memory plain_in = mem(md(src, tag::nchw), t[0]), plain_wei = mem(wei_plain, t[1]);
    dnnl::reorder(plain_in, in).execute(r->stream, plain_in, in);
    dnnl::reorder(plain_wei, weights).execute(r->stream, plain_wei, weights);
    r->stream.wait();
    r->args = {{DNNL_ARG_SRC, in}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, out}};
    if (bias_relu) r->args[DNNL_ARG_BIAS] = mem(bias_md, t[2]);
    return {bias_relu ? "oneDNN convolution + bias + relu post-op (its layout)" : "oneDNN convolution (its layout)",
            [r] { (*r)(); }};
  }
  if (op.find("pool") != std::string::npos) {
    // The same NCHW tensors; a global pool is a window as large as the plane.
    std::int64_t N = size_of(w, "N"), C = size_of(w, "C"), H = size_of(w, "H"), W = size_of(w, "W");
    bool global = op == "global_avg_pool";
    std::int64_t k = global ? H : 3, kw = global ? W : 3, stride = global ? 1 : 2;
    std::int64_t pad = op.find("_p1") != std::string::npos ? 1 : 0;
    dnnl::memory::dims src{N, C, H, W}, dst{N, C, (H + 2 * pad - k) / stride + 1, (W + 2 * pad - kw) / stride + 1};
    auto alg = op.rfind("max", 0) == 0 ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding;
    // oneDNN at its best: its blocked layout (plain NCHW pooling is a slow reference path), the
    // input reordered once here, outside the timed calls.
#if defined(__AVX512F__)
    auto blocked = tag::nChw16c;  // its JIT kernels' block: the vector width
#else
    auto blocked = tag::nChw8c;
#endif
    dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, md(src, blocked), md(dst, blocked),
                                  {stride, stride}, {k, kw}, {pad, pad}, {pad, pad});
    dnnl::pooling_forward::primitive_desc pd(d, r->engine);
    r->prim = dnnl::pooling_forward(pd);
    dnnl::memory in(pd.src_desc(), r->engine), out(pd.dst_desc(), r->engine);
    dnnl::memory plain = mem(md(src, tag::nchw), t[0]);
    dnnl::reorder(plain, in).execute(r->stream, plain, in);
    r->stream.wait();
    r->args = {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, out}};
    return {"oneDNN pooling (blocked)", [r] { (*r)(); }};
  }
  if (op == "softmax") {
    dnnl::memory::dims dims{size_of(w, "N"), size_of(w, "D")};
    dnnl::softmax_forward::primitive_desc pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, md(dims, tag::ab), 1), r->engine);
    r->prim = dnnl::softmax_forward(pd);
    r->args = {{DNNL_ARG_SRC, mem(md(dims, tag::ab), t[0])}, {DNNL_ARG_DST, mem(md(dims, tag::ab), t[1])}};
    return {"oneDNN softmax", [r] { (*r)(); }};
  }
  if (op == "layernorm") {
    std::int64_t N = size_of(w, "N"), D = size_of(w, "D");
    dnnl::memory::dims dims{N, D};
    auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    dnnl::layer_normalization_forward::primitive_desc pd(
        dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, md(dims, tag::ab), 1e-5f, flags),
        r->engine);
    r->prim = dnnl::layer_normalization_forward(pd);
    r->args = {{DNNL_ARG_SRC, mem(md(dims, tag::ab), t[0])},
               {DNNL_ARG_SCALE, mem(md({D}, tag::a), t[1])},
               {DNNL_ARG_SHIFT, mem(md({D}, tag::a), t[2])},
               {DNNL_ARG_DST, mem(md(dims, tag::ab), t[3])}};
    return {"oneDNN layer_normalization", [r] { (*r)(); }};
  }
  return {"", {}};
}

VendorCall openblas_call(const ir::Workload& w, const std::vector<float*>& t, int threads) {
  // Only for ops OpenBLAS has: setting its thread count wakes its spinning pool, which then
  // takes the cores from whatever is timed next (depthwise ran 0.15x to 0.76x oneDNN in runs
  // minutes apart until it was left asleep).
  if (w.op.name != "matmul" && w.op.name != "batch_matmul" && w.op.name != "batch_matmul_nt") return {"", {}};
  openblas_set_num_threads(threads);
  if (w.op.name == "matmul") {
    std::int64_t M = size_of(w, "M"), N = size_of(w, "N"), K = size_of(w, "K");
    float *A = t[0], *B = t[1], *C = t[2];
    return {"OpenBLAS sgemm",
            [=] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N); }};
  }
  if (w.op.name == "batch_matmul" || w.op.name == "batch_matmul_nt") {
    std::int64_t G = size_of(w, "G"), M = size_of(w, "M"), N = size_of(w, "N"), K = size_of(w, "K");
    float *A = t[0], *B = t[1], *C = t[2];
    bool nt = w.op.name == "batch_matmul_nt";  // B stored [G, N, K]
    return {"OpenBLAS sgemm per batch", [=] {
              for (std::int64_t g = 0; g < G; ++g)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, nt ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A + g * M * K,
                            K, B + g * K * N, nt ? K : N, 0.0f, C + g * M * N, N);
            }};
  }
  return {"", {}};
}

double measure_fma_peak_gflops(int threads) {
#if defined(__AVX512F__)
  constexpr int kLanes = 16;
#elif defined(__AVX2__)
  constexpr int kLanes = 8;
#else
  constexpr int kLanes = 4;
#endif
  typedef float vf __attribute__((vector_size(kLanes * 4)));
  const long iterations = 10'000'000;
  double best = 0;
  for (int trial = 0; trial < 3; ++trial) {
    auto t0 = std::chrono::steady_clock::now();
    float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      // 12 independent FMA chains: enough to cover the FMA latency on both pipes.
      vf a = vf{} + 0.999f, b = vf{} + 0.001f;
      vf c0 = a, c1 = a, c2 = a, c3 = a, c4 = a, c5 = a, c6 = a, c7 = a, c8 = a, c9 = a, c10 = a, c11 = a;
      for (long i = 0; i < iterations; ++i) {
        c0 = c0 * a + b, c1 = c1 * a + b, c2 = c2 * a + b, c3 = c3 * a + b, c4 = c4 * a + b, c5 = c5 * a + b;
        c6 = c6 * a + b, c7 = c7 * a + b, c8 = c8 * a + b, c9 = c9 * a + b, c10 = c10 * a + b, c11 = c11 * a + b;
        __asm__ volatile(""
                         : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7), "+v"(c8),
                           "+v"(c9), "+v"(c10), "+v"(c11));
      }
      vf sum = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11;
      sink += sum[0];
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * kLanes * 12 * double(iterations) * threads / s / 1e9);
    if (sink == 12345.0f) best += 0;  // keeps the chains alive
  }
  return best;
}

std::function<void()> copy_call(std::size_t bytes, int threads) {
  std::size_t n = bytes / 4;
  auto src = std::make_shared<std::vector<float>>(n, 1.0f);
  auto dst = std::make_shared<std::vector<float>>(n, 0.0f);
  return [src, dst, n, threads] {
    const float* s = src->data();
    float* d = dst->data();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
  };
}

}  // namespace tiletune::bench
