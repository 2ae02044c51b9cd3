// The roofs and vendor times that tuned layers are judged against (vendor.hpp: judge_layers),
// shared by `tiletune tune-model` and the daemon's model jobs.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "vendor/vendor.hpp"

namespace tiletune::vendor {

nlohmann::json judge_layers(const std::vector<Judged>& layers, int threads, bool with_vendor) {
  // The FMA peak once; per layer a copy of as many bytes as it moves (in cache where its
  // tensors fit, as theirs are).
  const double peak_flops = fma_peak_gflops(threads) * 1e9;
  const bool vendor_here = with_vendor && available();
  nlohmann::json tasks = nlohmann::json::array();
  for (const Judged& l : layers) {
    double copy_s = median_seconds(copy_call(std::max<std::size_t>(l.io_bytes / 2, 4096), threads), 0.05);
    double roof_s = std::max(l.flops / peak_flops, copy_s);
    bool compute_bound = l.flops / peak_flops >= copy_s;
    nlohmann::json t = {{"copy_s", copy_s},
                        {"roof_s", roof_s},
                        {"roof", compute_bound ? "fma peak" : "copy bandwidth"},
                        {"roof_fraction", std::isfinite(l.best_s) && l.best_s > 0 ? nlohmann::json(roof_s / l.best_s)
                                                                                 : nlohmann::json(nullptr)},
                        {"vendor", nullptr}};
    if (vendor_here && l.vendor && !l.vendor->is_null()) {
      Layer layer = onednn_layer(*l.vendor, threads);
      t["vendor"] = {{"name", layer.name}, {"unfused", layer.unfused}};
      if (layer.run) t["vendor"]["seconds"] = median_seconds(layer.run, 0.2);
    }
    tasks.push_back(t);
  }
  return {{"fma_gflops", peak_flops / 1e9}, {"tasks", tasks}};
}

}  // namespace tiletune::vendor
