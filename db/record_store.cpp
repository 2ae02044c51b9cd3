// The conveniences of RecordStore, over records() and count(), and the in-memory record store.
#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "db/store.hpp"
#include "support/error.hpp"

namespace tiletune::db {

namespace {
constexpr int kAll = std::numeric_limits<int>::max();
}  // namespace

std::optional<Record> RecordStore::best(const std::string& workload_key, const std::string& target_key) {
  auto top = top_k(workload_key, target_key, 1);
  if (top.empty()) return std::nullopt;
  return std::move(top.front());
}

std::vector<Record> RecordStore::top_k(const std::string& workload_key, const std::string& target_key, int k) {
  RecordQuery q{workload_key, target_key};
  q.limit = k;
  q.fastest_first = true;
  return records(q);
}

std::vector<Record> RecordStore::history(const std::string& workload_key, const std::string& target_key) {
  RecordQuery q{workload_key, target_key};
  q.limit = kAll;
  return records(q);
}

bool RecordStore::has_config(const std::string& workload_key, const std::string& target_key,
                             const std::string& config_key) {
  RecordQuery q{workload_key, target_key};
  q.config_key = config_key;
  q.limit = 1;
  return !records(q).empty();
}

std::int64_t RecordStore::count_records(const std::string& workload_key, const std::string& target_key) {
  return count(RecordQuery{workload_key, target_key});
}

MergeCounts RecordStore::merge(const RecordBatch& batch) {
  for (auto& r : batch.records) check_record(r);  // before anything is written
  for (auto& w : batch.workloads) put_workload(w);
  for (auto& t : batch.targets) put_target(t);
  MergeCounts counts;
  for (auto& r : batch.records) {
    bool had = has_config(r.workload_key, r.target_key, r.config_key);
    add_record(r);
    ++(had ? counts.duplicates : counts.imported);
  }
  return counts;
}

namespace {

//! Records in memory, behind one mutex. It keeps the contract of the SQLite store (insert or
//! ignore, no doubled config, workload and target stored first, ids growing from 1).
class MemoryRecordStore final : public RecordStore {
 public:
  void put_workload(const WorkloadRow& w) override {
    std::lock_guard lock(mu_);
    if (!workloads_.count(w.key)) {
      workloads_[w.key] = w;
      workload_order_.push_back(w.key);
      ++stamp_;
    }
  }

  void put_target(const TargetRow& t) override {
    std::lock_guard lock(mu_);
    auto it = targets_.find(t.key);
    if (it == targets_.end()) {
      targets_[t.key] = t;
      target_order_.push_back(t.key);
    } else if (it->second.traits_json.empty()) {
      it->second.traits_json = t.traits_json;
    }
    ++stamp_;
  }

  std::optional<WorkloadRow> workload(const std::string& key) override {
    std::lock_guard lock(mu_);
    auto it = workloads_.find(key);
    if (it == workloads_.end()) return std::nullopt;
    return it->second;
  }

  std::optional<TargetRow> target(const std::string& key) override {
    std::lock_guard lock(mu_);
    auto it = targets_.find(key);
    if (it == targets_.end()) return std::nullopt;
    return it->second;
  }

  std::vector<WorkloadRow> workloads() override {
    std::lock_guard lock(mu_);
    std::vector<WorkloadRow> out;
    for (auto& k : workload_order_) out.push_back(workloads_.at(k));
    return out;
  }

  std::vector<TargetRow> targets() override {
    std::lock_guard lock(mu_);
    std::vector<TargetRow> out;
    for (auto& k : target_order_) out.push_back(targets_.at(k));
    return out;
  }

  std::int64_t add_record(const Record& r) override {
    check_record(r);
    std::lock_guard lock(mu_);
    if (!workloads_.count(r.workload_key) || !targets_.count(r.target_key))
      throw_error(ErrorKind::Database, "add_record: workload '" + r.workload_key + "' or target '" + r.target_key +
                                           "' is not in the database (put it first)");
    auto key = std::make_tuple(r.workload_key, r.target_key, r.config_key);
    if (auto it = by_config_.find(key); it != by_config_.end()) return it->second;
    Record stored = r;
    stored.id = static_cast<std::int64_t>(records_.size()) + 1;
    records_.push_back(stored);
    by_config_[key] = stored.id;
    ++stamp_;
    return stored.id;
  }

  bool retime(std::int64_t id, const std::vector<double>& times_s, const std::string& measure_params_json) override {
    check_times(times_s);
    std::lock_guard lock(mu_);
    if (id < 1 || id > static_cast<std::int64_t>(records_.size()) || !records_[id - 1].ok()) return false;
    records_[id - 1].times_s = times_s;
    records_[id - 1].measure_params_json = measure_params_json;
    ++stamp_;
    return true;
  }

  std::vector<Record> records(const RecordQuery& q) override {
    std::lock_guard lock(mu_);
    std::vector<Record> out;
    for (auto& r : records_)
      if (matches(r, q) && r.id > q.after_id) out.push_back(r);
    if (q.fastest_first)
      std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.median_s() < b.median_s(); });
    if (out.size() > static_cast<std::size_t>(std::max(0, q.limit))) out.resize(std::max(0, q.limit));
    return out;
  }

  std::int64_t count(const RecordQuery& q) override {
    std::lock_guard lock(mu_);
    return std::count_if(records_.begin(), records_.end(), [&](auto& r) { return matches(r, q); });
  }

  std::int64_t change_stamp() override {
    std::lock_guard lock(mu_);
    return stamp_;
  }

  std::string integrity_check() override { return "ok"; }

 private:
  static bool matches(const Record& r, const RecordQuery& q) {
    return (q.workload_key.empty() || r.workload_key == q.workload_key) &&
           (q.target_key.empty() || r.target_key == q.target_key) &&
           (q.config_key.empty() || r.config_key == q.config_key) &&
           (!(q.ok_only || q.fastest_first) || (r.ok() && !r.times_s.empty()));
  }

  std::mutex mu_;
  std::map<std::string, WorkloadRow> workloads_;
  std::map<std::string, TargetRow> targets_;
  std::vector<std::string> workload_order_, target_order_;
  std::vector<Record> records_;
  std::map<std::tuple<std::string, std::string, std::string>, std::int64_t> by_config_;
  std::int64_t stamp_ = 0;
};

}  // namespace

std::unique_ptr<RecordStore> make_memory_record_store() { return std::make_unique<MemoryRecordStore>(); }

}  // namespace tiletune::db
