// Records in and out of Service: pages of records with the workloads and targets they name.
#include <algorithm>
#include <set>

#include "server/schemas.hpp"
#include "server/service_impl.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "tuner/exchange.hpp"
#include "tuner/tune.hpp"

namespace tiletune::server {

using nlohmann::json;
namespace asio = boost::asio;

json Service::records(const std::string& workload_key, const std::string& target_key, std::int64_t after, int limit) {
  auto& store = *impl_->store;
  auto page = store.records({workload_key, target_key, after, std::clamp(limit, 1, 10000)});
  std::set<std::string> wkeys, tkeys;
  json recs = json::array(), ws = json::array(), ts = json::array();
  for (auto& r : page) {
    recs.push_back(db::record_to_json(r));
    wkeys.insert(r.workload_key);
    tkeys.insert(r.target_key);
  }
  for (auto& k : wkeys)
    if (auto w = store.workload(k)) ws.push_back(db::workload_to_json(*w));
  for (auto& k : tkeys)
    if (auto t = store.target(k)) ts.push_back(db::target_to_json(*t));
  json out = {{"workloads", ws}, {"targets", ts}, {"records", recs}};
  out["next_after"] = page.empty() ? after : page.back().id;
  return out;
}

json Service::import_records(const json& body) {
  validate_body("RecordBatch", body);
  db::RecordBatch batch;
  for (auto& w : body["workloads"]) batch.workloads.push_back(db::workload_from_json(w));
  for (auto& t : body["targets"]) batch.targets.push_back(db::target_from_json(t));
  for (auto& r : body["records"]) batch.records.push_back(db::record_from_json(r));
  // Everything is checked before anything is written, and written in one transaction.
  tuner::check_batch(batch, *impl_->store);
  db::MergeCounts counts = impl_->store->merge(batch);
  return {{"imported", counts.imported}, {"duplicates", counts.duplicates}};
}

}  // namespace tiletune::server
