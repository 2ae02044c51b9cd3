// server/metrics.hpp — internal to server/: the daemon's counters and their Prometheus text.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tiletune::server {

//! Measurements by error class, the measurement rate and request latencies, kept in memory
//! (a restarted daemon starts them from zero, as Prometheus counters expect). Thread-safe.
class Metrics {
 public:
  //! One candidate measured: `error_class` is "" for a success.
  void count_measurement(const std::string& error_class);
  //! Updates the measurement rate over the `seconds` since the last call.
  void tick(double seconds);
  double measurements_per_second() const;
  void observe_request(const std::string& route, int status, double seconds);
  //! The Prometheus text exposition, with the jobs of the database by state.
  std::string render(const std::map<std::string, int>& jobs_by_state) const;

 private:
  mutable std::mutex mu_;
  std::int64_t measurements_ = 0, measurements_at_last_tick_ = 0;
  double measurements_per_second_ = 0;
  std::map<std::string, std::int64_t> errors_by_class_;
  std::map<std::pair<std::string, int>, std::int64_t> requests_;
  std::map<std::string, std::vector<std::int64_t>> latency_buckets_;  // per route, cumulative at render
  std::map<std::string, double> latency_sum_;
};

}  // namespace tiletune::server
