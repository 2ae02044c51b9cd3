// Remote workers of Service: registration, leases and their results.
#include <spdlog/spdlog.h>

#include "server/schemas.hpp"
#include "server/service_impl.hpp"
#include "support/error.hpp"
#include "tuner/exchange.hpp"

namespace tiletune::server {

using nlohmann::json;
namespace asio = boost::asio;

json Service::register_worker(const json& registration) {
  validate_body("WorkerRegistration", registration);
  const json& t = registration["target"];
  db::TargetRow row = db::target_from_json(t);
  tuner::check_target_row(row);  // now, not when a job searches it
  impl_->store->put_target(row);
  std::string id = "w" + new_id();
  std::int64_t now = db::now_unix_ms();
  // In the database: a restarted daemon, or another daemon on it, knows the worker.
  impl_->store->put_worker({id, registration["name"].get<std::string>(), row.key, now, now});
  spdlog::info("event=worker_registered worker={} name={} target={}", id, registration["name"].get<std::string>(),
               row.key);
  return {{"worker_id", id}, {"target_key", row.key}};
}

std::optional<json> Service::lease(const std::string& worker_id) {
  auto worker = impl_->store->worker(worker_id);
  if (!worker || !impl_->store->touch_worker(worker_id, db::now_unix_ms()))
    throw_error(ErrorKind::NotFound, "no worker '" + worker_id + "': register it (POST /v1/workers)");
  return impl_->board.lease(worker_id, worker->target_key);
}

json Service::complete_lease(const std::string& lease_id, const json& body) {
  validate_body("LeaseResults", body);
  std::vector<measure::MeasureResult> results;
  for (auto& r : body["results"]) results.push_back(measure::result_from_json(r));
  impl_->board.complete(lease_id, body["worker_id"].get<std::string>(), results);
  return {{"accepted", body["results"].size()}};
}

}  // namespace tiletune::server
