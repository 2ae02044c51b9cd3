#include "tuner/lookup.hpp"

namespace tiletune::tuner {

std::optional<BestLookup> find_best(db::RecordStore& store, const std::string& workload_key,
                                    const codegen::TargetInfo& target) {
  if (auto r = store.best(workload_key, target.key)) return BestLookup{*r, true};
  std::optional<BestLookup> found;
  for (auto& t : store.targets()) {
    if (t.key == target.key || t.backend != target.backend || t.family != target.family) continue;
    auto r = store.best(workload_key, t.key);
    if (r && (!found || r->median_s() < found->record.median_s())) found = BestLookup{*r, false};
  }
  return found;
}

}  // namespace tiletune::tuner
