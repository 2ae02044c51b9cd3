#include "measure/protocol.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "support/error.hpp"

namespace tiletune::measure {

using nlohmann::json;

void Timing::to_json(json& j) const {
  j["min_seconds"] = min_seconds;
  j["max_seconds"] = max_seconds;
  j["min_repeats"] = min_repeats;
  j["max_repeats"] = max_repeats;
  j["seed"] = seed;
}

void Timing::read_json(const json& j) {
  min_seconds = j.value("min_seconds", min_seconds);
  max_seconds = j.value("max_seconds", max_seconds);
  min_repeats = j.value("min_repeats", min_repeats);
  max_repeats = j.value("max_repeats", max_repeats);
  seed = j.value("seed", seed);
}

namespace {
std::vector<std::string> type_names(const std::vector<ir::DType>& types) {
  std::vector<std::string> names;
  for (auto t : types) names.push_back(ir::dtype_name(t));
  return names;
}
//! The types of `count` tensors; f32 for those the list leaves out.
std::vector<ir::DType> types_from(const json& names, size_t count) {
  std::vector<ir::DType> types(count, ir::DType::F32);
  for (size_t i = 0; i < names.size() && i < count; ++i)
    if (!ir::parse_dtype(names[i].get<std::string>(), types[i]))
      throw_error(ErrorKind::InvalidInput, "run request: unknown element type " + names[i].dump());
  return types;
}
//! RunRequest::Mode's names, in its order.
constexpr const char* kModeNames[] = {"reference", "measure", "side_by_side"};
}  // namespace

std::string RunRequest::to_json() const {
  json rival_list = json::array();
  for (const Rival& r : rivals)
    rival_list.push_back({{"artifact", r.artifact}, {"workspace_floats", r.workspace_floats}});
  json j{{"mode", kModeNames[static_cast<int>(mode)]},
         {"runtime", runtime},
         {"plugin", plugin},
         {"device", device},
         {"artifact", artifact},
         {"inputs", inputs},
         {"outputs", outputs},
         {"input_types", type_names(input_types)},
         {"output_types", type_names(output_types)},
         {"integer_slack", integer_slack},
         {"workspace_floats", workspace_floats},
         {"reference_path", reference_path},
         {"tolerance", tolerance},
         {"single_run_s", single_run_s},
         {"rivals", rival_list}};
  Timing::to_json(j);
  return j.dump();
}

RunRequest RunRequest::from_json(const std::string& text) {
  try {
    json j = json::parse(text);
    RunRequest r;
    std::string mode = j.at("mode").get<std::string>();
    auto named = std::find(std::begin(kModeNames), std::end(kModeNames), mode);
    if (named == std::end(kModeNames)) throw_error(ErrorKind::InvalidInput, "run request: unknown mode " + mode);
    r.mode = static_cast<Mode>(named - std::begin(kModeNames));
    r.runtime = j.at("runtime").get<std::string>();
    r.plugin = j.value("plugin", "");
    r.device = j.value("device", "");
    r.artifact = j.at("artifact").get<std::string>();
    r.inputs = j.at("inputs").get<std::vector<std::vector<std::int64_t>>>();
    r.outputs = j.at("outputs").get<std::vector<std::vector<std::int64_t>>>();
    r.input_types = types_from(j.value("input_types", json::array()), r.inputs.size());
    r.output_types = types_from(j.value("output_types", json::array()), r.outputs.size());
    r.integer_slack = j.value("integer_slack", 0.0);
    r.workspace_floats = j.at("workspace_floats").get<std::int64_t>();
    r.reference_path = j.at("reference_path").get<std::string>();
    r.tolerance = j.at("tolerance").get<double>();
    r.single_run_s = j.value("single_run_s", 0.0);
    for (const json& rival : j.value("rivals", json::array()))
      r.rivals.push_back({rival.at("artifact").get<std::string>(), rival.at("workspace_floats").get<std::int64_t>()});
    r.read_json(j);
    return r;
  } catch (const json::exception& e) {
    throw_error(ErrorKind::InvalidInput, std::string("run request: ") + e.what());
  }
}

namespace {
json reply_json(const RunReply& r) {
  json j = r.error_class.empty() ? json{{"times_s", r.times_s}}
                                 : json{{"error_class", r.error_class}, {"message", r.message}};
  if (!r.rivals.empty()) {
    j["rivals"] = json::array();
    for (const RunReply& rival : r.rivals) j["rivals"].push_back(reply_json(rival));
  }
  return j;
}

RunReply reply_from(const json& j) {
  RunReply r;
  if (j.contains("error_class")) {
    r.error_class = j.at("error_class").get<std::string>();
    r.message = j.value("message", "");
  } else {
    r.times_s = j.at("times_s").get<std::vector<double>>();
  }
  for (const json& rival : j.value("rivals", json::array())) r.rivals.push_back(reply_from(rival));
  return r;
}
}  // namespace

std::string RunReply::to_json() const { return reply_json(*this).dump(); }

RunReply RunReply::from_json(const std::string& text) { return reply_from(json::parse(text)); }

void fill_input(ir::DType t, void* data, std::int64_t n, std::uint64_t seed, int tensor) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<std::uint64_t>(tensor));
  if (t == ir::DType::F32) {  // as before types: the same inputs for every f32 record
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (std::int64_t i = 0; i < n; ++i) static_cast<float*>(data)[i] = dist(rng);
  } else if (ir::is_integer(t)) {
    double lo = t == ir::DType::I32 ? -1000 : ir::dtype_min(t), hi = t == ir::DType::I32 ? 1000 : ir::dtype_max(t);
    std::uniform_int_distribution<int> dist(static_cast<int>(lo), static_cast<int>(hi));
    for (std::int64_t i = 0; i < n; ++i) ir::store_element(t, data, i, dist(rng));
  } else {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (std::int64_t i = 0; i < n; ++i) ir::store_element(t, data, i, dist(rng));
  }
}

double tolerance_for(std::int64_t reduction_length, ir::DType output) {
  return 1e-5 * std::sqrt(static_cast<double>(std::max<std::int64_t>(reduction_length, 1))) + 1e-4 +
         2 * ir::unit_roundoff(output);
}

std::string compare(ir::DType t, const void* got, const void* want, std::int64_t n, double tolerance, double slack) {
  const bool integer = ir::is_integer(t);
  double scale = 0;
  std::int64_t finite = 0;
  for (std::int64_t i = 0; i < n; ++i)
    if (double v = ir::load_element(t, want, i); std::isfinite(v)) {
      scale += std::fabs(v);
      ++finite;
    }
  scale = finite ? scale / finite : 1.0;
  // Floating values are computed in f32, whose denormals a kernel may keep where the reference
  // flushed them (or the reverse): a difference below f32's smallest normal is that, not a wrong
  // result. Without it an output that underflows to zeros (exp of a large negative) has a scale
  // of 0 and demands equal bits: 28 of one corpus workload's 32 kernels failed on 1.4e-45 vs 0.
  const double smallest_normal = std::numeric_limits<float>::min();
  for (std::int64_t i = 0; i < n; ++i) {
    double a = ir::load_element(t, got, i), b = ir::load_element(t, want, i);
    bool same =
        (std::isnan(a) && std::isnan(b)) || a == b ||
        (integer ? std::fabs(a - b) <= slack
                 : std::fabs(a - b) < smallest_normal || std::fabs(a - b) <= tolerance * (std::fabs(b) + scale));
    if (!same) {
      char buf[160];
      if (integer)
        std::snprintf(buf, sizeof buf, "element %lld is %.0f, expected %.0f (%s, tolerance %g)",
                      static_cast<long long>(i), a, b, ir::dtype_name(t), slack);
      else
        std::snprintf(buf, sizeof buf, "element %lld is %.7g, expected %.7g (tolerance %.2g relative)",
                      static_cast<long long>(i), a, b, tolerance);
      return buf;
    }
  }
  return "";
}

}  // namespace tiletune::measure
