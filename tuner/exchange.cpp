// Records between databases: the checks a batch from outside passes before it is written.
#include "tuner/exchange.hpp"

#include <set>

#include "codegen/backend.hpp"
#include "ir/schedule.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "tuner/tune.hpp"

namespace tiletune::tuner {

void check_target_row(const db::TargetRow& row) {
  if (hash_hex(row.fingerprint_json) != row.key)
    throw_error(ErrorKind::InvalidInput, "target " + row.key + ": key is not the hash of its fingerprint");
  auto family = codegen::family_from_fingerprint(row.fingerprint_json);
  if (family && *family != row.family)
    throw_error(ErrorKind::InvalidInput, "target " + row.key + ": family " + row.family +
                                             " is not the device family of its fingerprint (" + *family + ")");
  codegen::traits_from_json(row.traits_json);
}

void check_batch(const db::RecordBatch& batch, db::RecordStore& destination) {
  std::set<std::string> workloads, targets;
  for (auto& row : batch.workloads) {
    try {
      workload_from_row(row);  // through the parser, and the key must match
    } catch (const Error& e) {
      throw_error(ErrorKind::InvalidInput, std::string("workload ") + row.key + ": " + e.what());
    }
    workloads.insert(row.key);
  }
  for (auto& row : batch.targets) {
    check_target_row(row);
    targets.insert(row.key);
  }
  // Keys found in the destination join the sets, so each is looked up there once.
  auto known = [](std::set<std::string>& seen, const std::string& key, auto&& stored) {
    if (seen.count(key)) return true;
    if (!stored(key)) return false;
    seen.insert(key);
    return true;
  };
  for (auto& rec : batch.records) {
    bool known_w = known(workloads, rec.workload_key, [&](auto& k) { return destination.workload(k).has_value(); });
    bool known_t = known(targets, rec.target_key, [&](auto& k) { return destination.target(k).has_value(); });
    if (!known_w || !known_t)
      throw_error(ErrorKind::InvalidInput, "record of workload " + rec.workload_key + " and target " + rec.target_key +
                                               ": include its workload and target in the batch");
    // A config this version cannot read is refused, as is one whose key was not derived from it.
    if (ir::Schedule::from_json(rec.config_json).key() != rec.config_key)
      throw_error(ErrorKind::InvalidInput,
                  "record " + std::to_string(rec.id) + ": config_key does not match its config");
  }
}

db::RecordBatch read_batch(db::RecordStore& from, const std::string& target_key) {
  db::RecordBatch batch;
  std::set<std::string> workloads, targets;
  for (db::RecordQuery q{"", target_key, 0, 10000};;) {
    auto page = from.records(q);
    if (page.empty()) break;
    q.after_id = page.back().id;
    for (auto& r : page) {
      workloads.insert(r.workload_key);
      targets.insert(r.target_key);
    }
    batch.records.insert(batch.records.end(), std::make_move_iterator(page.begin()),
                         std::make_move_iterator(page.end()));
  }
  for (auto& w : from.workloads())
    if (workloads.count(w.key)) batch.workloads.push_back(w);
  for (auto& t : from.targets())
    if (targets.count(t.key)) batch.targets.push_back(t);
  return batch;
}

}  // namespace tiletune::tuner
