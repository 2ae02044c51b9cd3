// `tiletune db`: a database's health, and records moved between databases (a machine's SQLite
// file and a team's PostgreSQL).
#include <iostream>
#include <map>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "db/store.hpp"
#include "support/error.hpp"
#include "tuner/exchange.hpp"

namespace tiletune::cli {

int run_db_check(const std::string& where) {
  auto store = db::open_store(where, /*create=*/false);
  std::string integrity = store->integrity_check();
  std::map<std::string, int> jobs;
  for (auto& j : store->jobs("", 1000000)) ++jobs[j.state];
  std::cout << where << ": " << store->workloads().size() << " workloads, " << store->targets().size()
            << " targets, " << store->count(db::RecordQuery{}) << " records";
  for (auto& [state, n] : jobs) std::cout << ", " << n << " " << state << " jobs";
  std::cout << "\nintegrity: " << integrity << "\n";
  if (integrity != "ok") throw_error(ErrorKind::Database, where + " fails its integrity check: " + integrity);
  return kOk;
}

int run_db_copy(const std::string& from, const std::string& to, const std::string& target_key) {
  if (from == to) throw_error(ErrorKind::InvalidInput, "--from and --to name the same database");
  auto source = db::open_store(from, /*create=*/false);
  db::RecordBatch batch = tuner::read_batch(*source, target_key);
  auto destination = db::open_store(to);
  // The whole batch is checked, then written in one transaction: nothing half-written.
  tuner::check_batch(batch, *destination);
  db::MergeCounts counts = destination->merge(batch);
  std::cout << "copied " << counts.imported << " records (" << counts.duplicates << " were there already) of "
            << batch.workloads.size() << " workloads and " << batch.targets.size() << " targets from " << from
            << " to " << to << "\n";
  return kOk;
}

}  // namespace tiletune::cli
