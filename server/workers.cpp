// Remote workers of Service: registration, leases and their results.
#include <spdlog/spdlog.h>

#include <chrono>

#include "server/schemas.hpp"
#include "server/service_impl.hpp"
#include "support/error.hpp"

namespace tiletune::server {

using nlohmann::json;
namespace asio = boost::asio;

json Service::register_worker(const json& registration) {
  validate_body("WorkerRegistration", registration);
  const json& t = registration["target"];
  db::TargetRow row = db::target_from_json(t);
  check_target_row(row);
  impl_->store->put_target(row);
  std::string id = "w" + new_id();
  std::lock_guard lock(impl_->workers_mu);
  impl_->workers[id] = {row.key, registration["name"].get<std::string>(), 0};
  spdlog::info("event=worker_registered worker={} name={} target={}", id, registration["name"].get<std::string>(),
               row.key);
  return {{"worker_id", id}, {"target_key", row.key}};
}

std::optional<json> Service::lease(const std::string& worker_id) {
  std::string target;
  {
    std::lock_guard lock(impl_->workers_mu);
    auto it = impl_->workers.find(worker_id);
    if (it == impl_->workers.end())
      throw_error(ErrorKind::NotFound,
                  "no worker '" + worker_id + "' (a restarted daemon forgets workers: register again)");
    it->second.last_seen_unix_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    target = it->second.target_key;
  }
  return impl_->board.lease(worker_id, target);
}

json Service::complete_lease(const std::string& lease_id, const json& body) {
  validate_body("LeaseResults", body);
  std::vector<measure::MeasureResult> results;
  for (auto& r : body["results"]) results.push_back(measure::result_from_json(r));
  impl_->board.complete(lease_id, body["worker_id"].get<std::string>(), std::move(results));
  return {{"accepted", body["results"].size()}};
}

}  // namespace tiletune::server
