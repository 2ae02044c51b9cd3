#include "vendors.hpp"

#include <omp.h>

#include <oneapi/dnnl/dnnl.h>

#include <nlohmann/json.hpp>

#include "support/error.hpp"
#include "vendor/vendor.hpp"

extern "C" {
#include <openblas-pthread/cblas.h>
}

namespace tiletune::bench {

namespace {

std::int64_t size_of(const ir::Workload& w, const char* name) { return w.sizes.at(name); }

}  // namespace

VendorCall onednn_call(const ir::Workload& w, const std::vector<float*>& t, int threads) {
  omp_set_num_threads(threads);
  const std::string& op = w.op.name;
  if (op == "matmul") {
    std::int64_t M = size_of(w, "M"), N = size_of(w, "N"), K = size_of(w, "K");
    float *A = t[0], *B = t[1], *C = t[2];
    return {"oneDNN sgemm", [=] { dnnl_sgemm('N', 'N', M, N, K, 1.0f, A, K, B, N, 0.0f, C, N); }};
  }
  auto layer = [&](const nlohmann::json& l) {
    auto v = vendor::onednn_layer(l, threads, t);
    return VendorCall{v.name, v.run};
  };
  if (op == "matmul_bias_relu") {
    // oneDNN at its best: its matmul with the bias and relu fused as post-ops.
    return layer({{"primitive", "matmul"},
                  {"a", {size_of(w, "M"), size_of(w, "K")}},
                  {"b", {size_of(w, "K"), size_of(w, "N")}},
                  {"bias", true},
                  {"post_ops", {{{"eltwise", "relu"}}}}});
  }
  if (op == "matmul_bias_gelu") {
    // oneDNN at its best: its matmul with the bias and gelu_erf fused as post-ops.
    return layer({{"primitive", "matmul"},
                  {"a", {size_of(w, "M"), size_of(w, "K")}},
                  {"b", {size_of(w, "K"), size_of(w, "N")}},
                  {"bias", true},
                  {"post_ops", {{{"eltwise", "gelu_erf"}}}}});
  }
  if (op == "matmul_bf16")
    return layer({{"primitive", "matmul"},
                  {"a", {size_of(w, "M"), size_of(w, "K")}},
                  {"b", {size_of(w, "K"), size_of(w, "N")}},
                  {"types", {{"src", "bf16"}, {"weights", "bf16"}, {"dst", "f32"}}}});
  if (op == "matmul_u8s8_u8")  // the op's scale and zero point as oneDNN's output scale and zero point
    return layer({{"primitive", "matmul"},
                  {"a", {size_of(w, "M"), size_of(w, "K")}},
                  {"b", {size_of(w, "K"), size_of(w, "N")}},
                  {"types", {{"src", "u8"}, {"weights", "i8"}, {"dst", "u8"}}},
                  {"alpha", 0.0005},
                  {"dst_zero_point", 128}});
  if (op == "batch_matmul" || op == "batch_matmul_nt") {
    // The transposed operand as oneDNN takes it: B's logical [G, K, N] stored as [G, N, K].
    std::int64_t G = size_of(w, "G"), M = size_of(w, "M"), K = size_of(w, "K"), N = size_of(w, "N");
    return layer({{"primitive", "matmul"}, {"a", {G, M, K}}, {"b", {G, K, N}}, {"trans_b", op == "batch_matmul_nt"}});
  }
  if (op.find("conv2d") != std::string::npos) {
    // The library's convolutions, by name: _p1 pads by 1, _s2 strides by 2, depthwise and
    // grouped split the channels, 1x1 has a KC filter, bias_relu fuses both; nchwc holds
    // C = CB * L channels (K = KB * L out) in blocks of L (oneDNN takes the same layer in the
    // layout it picks).
    bool dw = op.rfind("depthwise", 0) == 0, grouped = op.rfind("grouped", 0) == 0,
         one = op.find("1x1") != std::string::npos;
    bool blocked = op.find("nchwc") != std::string::npos;
    bool bias_relu = op.find("bias_relu") != std::string::npos;
    std::int64_t pad = op.find("p1") != std::string::npos ? 1 : 0, stride = op.find("s2") != std::string::npos ? 2 : 1;
    std::int64_t N = size_of(w, "N"), H = size_of(w, "H"), W = size_of(w, "W");
    std::int64_t G = grouped ? size_of(w, "G") : 1;
    std::int64_t C = grouped ? G * size_of(w, "CG") : blocked ? size_of(w, "CB") * size_of(w, "L") : size_of(w, "C");
    std::int64_t K = dw ? C : grouped ? G * size_of(w, "KG") : blocked ? size_of(w, "KB") * size_of(w, "L") : size_of(w, "K");
    std::int64_t R = one ? 1 : size_of(w, "R"), S = one ? 1 : size_of(w, "S");
    if (dw) G = C;
    nlohmann::json post = nlohmann::json::array();
    if (bias_relu) post.push_back({{"eltwise", "relu"}});
    nlohmann::json types = nlohmann::json::object();
    if (op.size() > 5 && op.compare(op.size() - 5, 5, "_bf16") == 0)
      types = {{"src", "bf16"}, {"weights", "bf16"}, {"dst", "f32"}};
    return layer({{"primitive", "convolution"},
                  {"types", types},
                  {"src", {N, C, H, W}},
                  {"weights", {K, C / G, R, S}},
                  {"groups", G},
                  {"strides", {stride, stride}},
                  {"dilations", {1, 1}},
                  {"pads_begin", {pad, pad}},
                  {"pads_end", {pad, pad}},
                  {"bias", bias_relu},
                  {"post_ops", post}});
  }
  if (op.find("pool") != std::string::npos) {
    // The same NCHW tensors; a global pool is a window as large as the plane.
    std::int64_t N = size_of(w, "N"), C = size_of(w, "C"), H = size_of(w, "H"), W = size_of(w, "W");
    bool global = op == "global_avg_pool";
    std::int64_t k = global ? H : 3, kw = global ? W : 3, stride = global ? 1 : 2;
    std::int64_t pad = op.find("_p1") != std::string::npos ? 1 : 0;
    return layer({{"primitive", "pooling"},
                  {"algorithm", op.rfind("max", 0) == 0 ? "max" : "avg_include_padding"},
                  {"src", {N, C, H, W}},
                  {"kernel", {k, kw}},
                  {"strides", {stride, stride}},
                  {"pads_begin", {pad, pad}},
                  {"pads_end", {pad, pad}}});
  }
  if (op == "softmax") return layer({{"primitive", "softmax"}, {"src", {size_of(w, "N"), size_of(w, "D")}}});
  if (op == "layernorm")
    return layer({{"primitive", "layer_normalization"},
                  {"src", {size_of(w, "N"), size_of(w, "D")}},
                  {"epsilon", 1e-5},
                  {"scale_shift", true}});
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

}  // namespace tiletune::bench
