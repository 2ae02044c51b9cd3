#include "server/metrics.hpp"

#include <iterator>

namespace tiletune::server {

namespace {
//! Fixed buckets of the request latency histogram, seconds.
const double kBuckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5};
}  // namespace

void Metrics::count_measurement(const std::string& error_class) {
  std::lock_guard lock(mu_);
  ++measurements_;
  if (!error_class.empty()) ++errors_by_class_[error_class];
}

void Metrics::tick(double seconds) {
  std::lock_guard lock(mu_);
  measurements_per_second_ = (measurements_ - measurements_at_last_tick_) / seconds;
  measurements_at_last_tick_ = measurements_;
}

void Metrics::observe_request(const std::string& route, int status, double seconds) {
  std::lock_guard lock(mu_);
  ++requests_[{route, status}];
  auto& b = latency_buckets_[route];
  b.resize(std::size(kBuckets) + 1);
  std::size_t i = 0;
  while (i < std::size(kBuckets) && seconds > kBuckets[i]) ++i;
  ++b[i];
  latency_sum_[route] += seconds;
}

std::string Metrics::render(const std::map<std::string, int>& jobs_by_state) const {
  std::string out;
  out += "# HELP tiletune_jobs Tuning jobs in the database by state.\n# TYPE tiletune_jobs gauge\n";
  for (auto& [state, n] : jobs_by_state) out += "tiletune_jobs{state=\"" + state + "\"} " + std::to_string(n) + "\n";
  std::lock_guard lock(mu_);
  out +=
      "# HELP tiletune_measurements_total Candidates measured by this daemon.\n# TYPE tiletune_measurements_total "
      "counter\n";
  out += "tiletune_measurements_total " + std::to_string(measurements_) + "\n";
  out +=
      "# HELP tiletune_measurements_per_second Measurements per second over the last 5 s.\n"
      "# TYPE tiletune_measurements_per_second gauge\n";
  out += "tiletune_measurements_per_second " + std::to_string(measurements_per_second_) + "\n";
  out +=
      "# HELP tiletune_measurement_errors_total Failed measurements by class.\n"
      "# TYPE tiletune_measurement_errors_total counter\n";
  for (auto& [cls, n] : errors_by_class_)
    out += "tiletune_measurement_errors_total{class=\"" + cls + "\"} " + std::to_string(n) + "\n";
  out +=
      "# HELP tiletune_http_requests_total HTTP requests by route and status.\n"
      "# TYPE tiletune_http_requests_total counter\n";
  for (auto& [key, n] : requests_)
    out += "tiletune_http_requests_total{route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  out +=
      "# HELP tiletune_http_request_seconds Request latency by route.\n# TYPE tiletune_http_request_seconds "
      "histogram\n";
  for (auto& [route, buckets] : latency_buckets_) {
    std::int64_t cumulative = 0;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      cumulative += buckets[i];
      std::string le = i < std::size(kBuckets) ? std::to_string(kBuckets[i]) : "+Inf";
      out += "tiletune_http_request_seconds_bucket{route=\"" + route + "\",le=\"" + le + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    out +=
        "tiletune_http_request_seconds_sum{route=\"" + route + "\"} " + std::to_string(latency_sum_.at(route)) + "\n";
    out += "tiletune_http_request_seconds_count{route=\"" + route + "\"} " + std::to_string(cumulative) + "\n";
  }
  return out;
}

double Metrics::measurements_per_second() const {
  std::lock_guard lock(mu_);
  return measurements_per_second_;
}

}  // namespace tiletune::server
