// tiletune-store-bench: how fast each store takes records, written as the tuner writes them (a
// measured batch merged in one transaction) and one at a time, side by side in one run.
//
//   build/tiletune-store-bench --db /tmp/a.db --db postgresql://tiletune@/bench?host=/tmp/pg
//
// Each store gets its own fresh workload and target, so the stores may already hold records.
// Prints records per second per store and mode: the median of --repeats runs.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "db/store.hpp"
#include "support/hash.hpp"

using namespace tiletune;

namespace {

db::Record synthetic(const db::WorkloadRow& w, const db::TargetRow& t, int n) {
  db::Record r;
  r.workload_key = w.key;
  r.target_key = t.key;
  r.config_json = nlohmann::json{{"version", 1}, {"bench", n}}.dump();
  r.config_key = hash_hex(r.config_json);
  r.times_s = {1e-4 + n * 1e-9, 1.1e-4, 0.9e-4};
  r.measure_params_json = R"({"repeats":3})";
  r.tool_version = "bench";
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tiletune-store-bench: records written per second, per store"};
  std::vector<std::string> where;
  int records = 2000, batch = 16, repeats = 3;
  app.add_option("--db", where, "stores to compare (SQLite files, postgresql:// URLs)")->required();
  app.add_option("--records", records, "records per run and mode")->capture_default_str();
  app.add_option("--batch", batch, "records per merged batch (the tuner's batch size)")->capture_default_str();
  app.add_option("--repeats", repeats, "runs per store and mode (the median is printed)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::mt19937_64 rng(std::random_device{}());
  std::printf("%-60s %14s %14s\n", "store", "batched rec/s", "single rec/s");
  for (auto& url : where) {
    auto store = db::open_store(url);
    std::vector<double> batched, single;
    for (int rep = 0; rep < repeats; ++rep) {
      for (bool one_by_one : {false, true}) {
        std::string salt = std::to_string(rng());
        db::WorkloadRow w{hash_hex("bench-w" + salt), "bench", "bench " + salt, "{}", ""};
        db::TargetRow t{hash_hex("bench-t" + salt), "cpu", "bench", "{}", ""};
        store->put_workload(w);
        store->put_target(t);
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < records; i += batch) {
          db::RecordBatch b;
          for (int j = i; j < std::min(records, i + batch); ++j) b.records.push_back(synthetic(w, t, j));
          if (one_by_one)
            for (auto& r : b.records) store->add_record(r);
          else
            store->merge(b);
        }
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        (one_by_one ? single : batched).push_back(records / s);
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("%-60s %14.0f %14.0f\n", url.substr(0, 60).c_str(), median(batched),
                median(single));
  }
  return 0;
}
