// Records in and out of Service: pages of records with the workloads and targets they name.
#include <algorithm>
#include <set>

#include "server/schemas.hpp"
#include "server/service_impl.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "tuner/tune.hpp"

namespace tiletune::server {

using nlohmann::json;
namespace asio = boost::asio;

void check_target_row(const db::TargetRow& row) {
  if (hash_hex(row.fingerprint_json) != row.key)
    throw_error(ErrorKind::InvalidInput, "target " + row.key + ": key is not the hash of its fingerprint");
  // The family decides which records answer for which device: it must be the fingerprint's.
  auto family = codegen::family_from_fingerprint(row.fingerprint_json);
  if (family && *family != row.family)
    throw_error(ErrorKind::InvalidInput, "target " + row.key + ": family " + row.family +
                                             " is not the device family of its fingerprint (" + *family + ")");
  codegen::traits_from_json(row.traits_json);
}

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

json Service::import_records(const json& batch) {
  validate_body("RecordBatch", batch);
  auto& store = *impl_->store;
  // Everything is checked before anything is written: a bad batch imports nothing.
  std::vector<db::WorkloadRow> workloads;
  std::map<std::string, ir::Workload> bound;
  for (auto& w : batch["workloads"]) {
    db::WorkloadRow row = db::workload_from_json(w);
    try {
      bound.emplace(row.key, tuner::workload_from_row(row));  // through the parser, and the key must match
    } catch (const Error& e) {
      throw_error(ErrorKind::InvalidInput, std::string("workload ") + row.key + ": " + e.what());
    }
    workloads.push_back(row);
  }
  std::vector<db::TargetRow> targets;
  for (auto& t : batch["targets"]) {
    db::TargetRow row = db::target_from_json(t);
    check_target_row(row);
    targets.push_back(row);
  }
  std::vector<db::Record> records;
  for (auto& r : batch["records"]) {
    db::Record rec = db::record_from_json(r);
    bool known_w = bound.count(rec.workload_key) || store.workload(rec.workload_key);
    bool known_t = std::any_of(targets.begin(), targets.end(), [&](auto& t) { return t.key == rec.target_key; }) ||
                   store.target(rec.target_key);
    if (!known_w || !known_t)
      throw_error(ErrorKind::InvalidInput, "record of workload " + rec.workload_key + " and target " + rec.target_key +
                                               ": include its workload and target in the batch");
    // A config this version cannot read is refused, as is one whose key was not derived from it.
    if (ir::Schedule::from_json(rec.config_json).key() != rec.config_key)
      throw_error(ErrorKind::InvalidInput,
                  "record " + std::to_string(rec.id) + ": config_key does not match its config");
    records.push_back(std::move(rec));
  }
  for (auto& w : workloads) store.put_workload(w);
  for (auto& t : targets) store.put_target(t);
  int imported = 0, duplicates = 0;
  for (auto& r : records) {
    if (store.has_config(r.workload_key, r.target_key, r.config_key)) {
      ++duplicates;
      continue;
    }
    store.add_record(r);
    ++imported;
  }
  return {{"imported", imported}, {"duplicates", duplicates}};
}

}  // namespace tiletune::server
