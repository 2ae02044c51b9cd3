#include "tuner/dataset.hpp"

#include <nlohmann/json.hpp>

#include "ir/loop_nest.hpp"
#include "ir/parse.hpp"
#include "ops/library.hpp"
#include "support/error.hpp"

namespace tiletune::tuner {

ir::Workload workload_from_row(const db::WorkloadRow& row) {
  try {
    // Rows from before op_text was stored: the library op of that name, if it binds to the key.
    std::string text =
        !row.op_text.empty() ? row.op_text.substr(0, row.op_text.rfind("\nsizes ")) : ops::op_text(row.op_name);
    ir::Sizes sizes = nlohmann::json::parse(row.sizes_json).get<ir::Sizes>();
    ir::Workload w = ir::bind(ir::parse_op(text), sizes);
    if (w.key != row.key) throw_error(ErrorKind::Database, "it binds to key " + w.key);
    return w;
  } catch (const std::exception& e) {
    throw_error(ErrorKind::Database,
                "stored workload " + row.key + " (" + row.op_name + ") cannot be rebuilt by this version: " + e.what());
  }
}

costmodel::Sample make_sample(const ir::Workload& w, const ir::Schedule& s, const ir::TargetTraits& t,
                              double latency_s) {
  return {costmodel::featurize(w, s, t), w.key, latency_s};
}

Dataset load_dataset(db::RecordStore& store, const std::string& target_key, const ir::TargetTraits& traits,
                     const std::string& exclude_workload, int limit) {
  Dataset out;
  std::vector<db::Record> records;
  for (db::RecordQuery q{"", target_key, 0, 5000};;) {
    auto page = store.records(q);
    if (page.empty()) break;
    q.after_id = page.back().id;
    for (auto& r : page)
      if (r.workload_key != exclude_workload) records.push_back(std::move(r));
  }
  if (limit >= 0 && records.size() > static_cast<std::size_t>(limit))
    records.erase(records.begin(), records.end() - limit);
  std::map<std::string, std::optional<ir::Workload>> bound;  // nullopt: cannot be rebuilt
  for (auto& r : records) {
    auto it = bound.find(r.workload_key);
    if (it == bound.end()) {
      std::optional<ir::Workload> w;
      if (auto row = store.workload(r.workload_key)) {
        try {
          w = workload_from_row(*row);
          out.workloads[row->key] = *row;
        } catch (const Error&) {
        }
      }
      it = bound.emplace(r.workload_key, std::move(w)).first;
    }
    if (!it->second) {
      ++out.skipped;
      continue;
    }
    try {
      out.samples.push_back(make_sample(*it->second, ir::Schedule::from_json(r.config_json), traits, r.median_s()));
    } catch (const Error&) {
      ++out.skipped;  // a config this version cannot read or lower
    }
  }
  return out;
}

}  // namespace tiletune::tuner
