// vendor/vendor.hpp — the vendor library at its best for a layer, and this machine's roofs:
// what a tuned kernel is judged against (`tiletune tune-model --compare-vendor`, tiletune-bench).
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace tiletune::vendor {

//! A vendor primitive ready to run, its inputs already reordered into the vendor's layouts
//! (outside `run`). `run` is empty when the vendor has no such layer.
struct Layer {
  std::string name;  //!< what runs, for the report ("oneDNN convolution + relu post-op")
  std::function<void()> run;
  std::vector<std::string> unfused;  //!< epilogue steps the vendor could not fuse (not timed)
};

//! Whether this build has a vendor library (oneDNN).
bool available();

//! oneDNN's primitive for a layer described as models::Task::vendor is (JSON: "primitive"
//! convolution | matmul | pooling | softmax | layer_normalization, its geometry, "post_ops"),
//! in the layouts it picks, with the post-ops it fuses. Bound to `tensors` (plain row-major
//! f32, in the order src, weights, bias, post-op operands, dst) or, when empty, to buffers of
//! its own. Throws Error(InvalidInput) on a malformed description.
Layer onednn_layer(const nlohmann::json& layer, int threads, const std::vector<float*>& tensors = {});

//! The median time of `run` over repeats lasting at least `min_time` seconds (5 at least),
//! after one warm-up call.
double median_seconds(const std::function<void()>& run, double min_time);

//! FMA peak of this machine, GFLOP/s: independent vector FMA chains on every thread.
double fma_peak_gflops(int threads);
//! A copy of `bytes` between two buffers on `threads` threads: the memory roof of a
//! memory-bound op (GB/s = 2 * bytes / time).
std::function<void()> copy_call(std::size_t bytes, int threads);

//! A tuned layer to judge: its work, its bytes, its best latency (+inf: none yet) and how the
//! vendor has it (models::Task::vendor; null: the vendor has no such layer).
struct Judged {
  double flops = 0;
  std::int64_t io_bytes = 0;
  double best_s = 0;
  const nlohmann::json* vendor = nullptr;
};

//! What each layer is judged against, measured now on `threads` threads: its roof (the FMA
//! peak, or a copy of as many bytes as it moves, whichever takes longer) and, with
//! `with_vendor` and a vendor library, the vendor's time for the same layer. JSON:
//! {"fma_gflops", "tasks": [{"copy_s", "roof_s", "roof": "fma peak" | "copy bandwidth",
//! "roof_fraction" (roof_s / best_s, null without a best), "vendor": null | {"name",
//! "unfused", "seconds" (absent where the vendor cannot run it)}}]}.
nlohmann::json judge_layers(const std::vector<Judged>& layers, int threads, bool with_vendor);

}  // namespace tiletune::vendor
