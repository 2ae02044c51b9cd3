#include "server/remote.hpp"

#include <chrono>
#include <cstdio>
#include <thread>

#include "server/service_impl.hpp"
#include "support/error.hpp"

namespace tiletune::server {

std::optional<std::vector<measure::MeasureResult>> LeaseBoard::run(const std::string& job_id,
                                                                   const std::string& target_key, nlohmann::json task,
                                                                   const std::atomic<bool>& stop) {
  db::BatchRow batch;
  batch.posted_unix_ms = db::now_unix_ms();
  // Ids sort by posting time, so workers take batches oldest first whichever daemon posted them.
  char id[40];
  std::snprintf(id, sizeof id, "L%013lld%s", static_cast<long long>(batch.posted_unix_ms), new_id().c_str());
  batch.id = id;
  batch.job_id = job_id;
  batch.target_key = target_key;
  batch.task_json = task.dump();
  store_.post_batch(batch);
  while (true) {
    if (stop.load()) {
      store_.remove_batch(batch.id);
      return std::nullopt;
    }
    std::optional<db::BatchRow> now;
    try {
      now = store_.batch(batch.id);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Unavailable) throw;  // a database that is away: keep waiting
    }
    if (now && now->results_json) {
      std::vector<measure::MeasureResult> results;
      for (auto& r : nlohmann::json::parse(*now->results_json)) results.push_back(measure::result_from_json(r));
      store_.remove_batch(batch.id);
      return results;
    }
    if (now && now->worker_id.empty() && db::now_unix_ms() - batch.posted_unix_ms > unclaimed_seconds_ * 1e3) {
      store_.remove_batch(batch.id);
      throw_error(ErrorKind::Unavailable, "no worker of target " + target_key + " took a batch within " +
                                              std::to_string(static_cast<int>(unclaimed_seconds_)) +
                                              " s: start `tiletune worker` on a machine of that target");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::optional<nlohmann::json> LeaseBoard::lease(const std::string& worker_id, const std::string& target_key) {
  auto b = store_.lease_batch(worker_id, target_key, db::now_unix_ms(), static_cast<std::int64_t>(lease_seconds_ * 1e3));
  if (!b) return std::nullopt;
  nlohmann::json out = nlohmann::json::parse(b->task_json);
  out["lease_id"] = b->id;
  out["lease_seconds"] = lease_seconds_;
  return out;
}

void LeaseBoard::complete(const std::string& lease_id, const std::string& worker_id,
                          const std::vector<measure::MeasureResult>& results) {
  nlohmann::json stored = nlohmann::json::array();
  for (auto& r : results) stored.push_back(measure::result_to_json(r));
  switch (store_.complete_batch(lease_id, worker_id, stored.dump())) {
    case db::Completion::Accepted:
      return;
    case db::Completion::Unknown:
      throw_error(ErrorKind::NotFound, "no open lease '" + lease_id + "' (finished, or its job stopped)");
    case db::Completion::TakenOver:
      throw_error(ErrorKind::Conflict, "lease '" + lease_id + "' ran out and now belongs to another worker");
  }
}

std::vector<measure::MeasureResult> RemoteMeasurer::measure(const std::vector<ir::Schedule>& batch) {
  nlohmann::json configs = nlohmann::json::array();
  for (auto& s : batch) configs.push_back(s.to_json_value());
  nlohmann::json task = {
      {"workload", db::workload_to_json(workload_)}, {"configs", configs}, {"measure", options_.to_json()}};
  auto results = board_.run(job_id_, target_key_, std::move(task), stop_);
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
