#include "server/remote.hpp"

#include <chrono>

#include "support/error.hpp"

namespace tiletune::server {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

std::optional<std::vector<measure::MeasureResult>> LeaseBoard::run(const std::string& target_key, nlohmann::json task,
                                                                   const std::atomic<bool>& stop) {
  std::unique_lock lock(mu_);
  char id[32];
  std::snprintf(id, sizeof id, "L%015llu", static_cast<unsigned long long>(++next_));
  std::string lease_id = id;
  batches_[lease_id] = Batch{target_key, std::move(task), "", 0, now_s(), std::nullopt};
  while (!batches_[lease_id].results) {
    if (stop.load()) {
      batches_.erase(lease_id);
      return std::nullopt;
    }
    if (batches_[lease_id].worker_id.empty() && now_s() - batches_[lease_id].posted > unclaimed_seconds_) {
      batches_.erase(lease_id);
      throw_error(ErrorKind::Unavailable, "no worker of target " + target_key + " took a batch within " +
                                              std::to_string(static_cast<int>(unclaimed_seconds_)) +
                                              " s: start `tiletune worker` on a machine of that target");
    }
    done_.wait_for(lock, std::chrono::milliseconds(200));
  }
  auto results = std::move(batches_[lease_id].results);
  batches_.erase(lease_id);
  return results;
}

std::optional<nlohmann::json> LeaseBoard::lease(const std::string& worker_id, const std::string& target_key) {
  std::lock_guard lock(mu_);
  double now = now_s();
  for (auto& [id, b] : batches_) {
    if (b.target_key != target_key || b.results) continue;
    if (!b.worker_id.empty() && now < b.deadline) continue;  // held by a live lease
    b.worker_id = worker_id;
    b.deadline = now + lease_seconds_;
    nlohmann::json out = b.task;
    out["lease_id"] = id;
    out["lease_seconds"] = lease_seconds_;
    return out;
  }
  return std::nullopt;
}

void LeaseBoard::complete(const std::string& lease_id, const std::string& worker_id,
                          std::vector<measure::MeasureResult> results) {
  std::lock_guard lock(mu_);
  auto it = batches_.find(lease_id);
  if (it == batches_.end() || it->second.results)
    throw_error(ErrorKind::NotFound, "no open lease '" + lease_id + "' (finished, or its job stopped)");
  if (it->second.worker_id != worker_id)
    throw_error(ErrorKind::Conflict, "lease '" + lease_id + "' ran out and now belongs to another worker");
  it->second.results = std::move(results);
  done_.notify_all();
}

std::vector<measure::MeasureResult> RemoteMeasurer::measure(const std::vector<ir::Schedule>& batch) {
  nlohmann::json configs = nlohmann::json::array();
  for (auto& s : batch) configs.push_back(s.to_json_value());
  nlohmann::json task = {
      {"workload", db::workload_to_json(workload_)}, {"configs", configs}, {"measure", options_.to_json()}};
  auto results = board_.run(target_key_, std::move(task), stop_);
  if (!results) throw_error(ErrorKind::Unavailable, "stopped while a remote worker was measuring");
  std::map<std::string, measure::MeasureResult> by_key;
  for (auto& r : *results) by_key[r.config_key] = r;
  std::vector<measure::MeasureResult> out;
  for (auto& s : batch) {
    auto it = by_key.find(s.key());
    if (it != by_key.end()) {
      out.push_back(it->second);
      out.back().config_json = s.to_json();  // the record keeps the config as proposed here
      continue;
    }
    measure::MeasureResult missing;
    missing.config_json = s.to_json();
    missing.config_key = s.key();
    missing.error_class = measure::error_class::kRuntime;
    missing.error_message = "the remote worker returned no result for this config";
    out.push_back(std::move(missing));
  }
  return out;
}

}  // namespace tiletune::server
