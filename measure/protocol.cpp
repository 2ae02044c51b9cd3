#include "measure/protocol.hpp"

#include <cmath>
#include <cstdio>
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

std::string RunRequest::to_json() const {
  json j{{"mode", mode == Mode::Reference ? "reference" : "measure"},
         {"runtime", runtime},
         {"plugin", plugin},
         {"device", device},
         {"artifact", artifact},
         {"inputs", inputs},
         {"outputs", outputs},
         {"workspace_floats", workspace_floats},
         {"reference_path", reference_path},
         {"tolerance", tolerance},
         {"single_run_s", single_run_s}};
  Timing::to_json(j);
  return j.dump();
}

RunRequest RunRequest::from_json(const std::string& text) {
  try {
    json j = json::parse(text);
    RunRequest r;
    r.mode = j.at("mode").get<std::string>() == "reference" ? Mode::Reference : Mode::Measure;
    r.runtime = j.at("runtime").get<std::string>();
    r.plugin = j.value("plugin", "");
    r.device = j.value("device", "");
    r.artifact = j.at("artifact").get<std::string>();
    r.inputs = j.at("inputs").get<std::vector<std::vector<std::int64_t>>>();
    r.outputs = j.at("outputs").get<std::vector<std::vector<std::int64_t>>>();
    r.workspace_floats = j.at("workspace_floats").get<std::int64_t>();
    r.reference_path = j.at("reference_path").get<std::string>();
    r.tolerance = j.at("tolerance").get<double>();
    r.single_run_s = j.value("single_run_s", 0.0);
    r.read_json(j);
    return r;
  } catch (const json::exception& e) {
    throw_error(ErrorKind::InvalidInput, std::string("run request: ") + e.what());
  }
}

std::string RunReply::to_json() const {
  if (error_class.empty()) return json{{"times_s", times_s}}.dump();
  return json{{"error_class", error_class}, {"message", message}}.dump();
}

RunReply RunReply::from_json(const std::string& text) {
  json j = json::parse(text);
  RunReply r;
  if (j.contains("error_class")) {
    r.error_class = j.at("error_class").get<std::string>();
    r.message = j.value("message", "");
  } else {
    r.times_s = j.at("times_s").get<std::vector<double>>();
  }
  return r;
}

void fill_input(float* data, std::int64_t n, std::uint64_t seed, int tensor) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<std::uint64_t>(tensor));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < n; ++i) data[i] = dist(rng);
}

double tolerance_for(std::int64_t reduction_length) {
  return 1e-5 * std::sqrt(static_cast<double>(std::max<std::int64_t>(reduction_length, 1))) + 1e-4;
}

std::string compare(const float* got, const float* want, std::int64_t n, double tolerance) {
  double scale = 0;
  std::int64_t finite = 0;
  for (std::int64_t i = 0; i < n; ++i)
    if (std::isfinite(want[i])) {
      scale += std::fabs(want[i]);
      ++finite;
    }
  scale = finite ? scale / finite : 1.0;
  for (std::int64_t i = 0; i < n; ++i) {
    float a = got[i], b = want[i];
    bool same = (std::isnan(a) && std::isnan(b)) || a == b ||
                std::fabs(double(a) - double(b)) <= tolerance * (std::fabs(double(b)) + scale);
    if (!same) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %lld is %.7g, expected %.7g (tolerance %.2g relative)",
                    static_cast<long long>(i), a, b, tolerance);
      return buf;
    }
  }
  return "";
}

}  // namespace tiletune::measure
