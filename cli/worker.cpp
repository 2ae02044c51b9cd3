// `tiletune worker`: measures candidates for a daemon on this machine's hardware. It registers
// its target (fingerprint and traits), leases batches of that target, builds and measures them
// locally and posts the results back, until SIGTERM or SIGINT (after the batch in hand).
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "client/client.hpp"
#include "codegen/backend.hpp"
#include "measure/measure.hpp"
#include "support/error.hpp"
#include "tuner/dataset.hpp"
#include "tuner/tune.hpp"

namespace tiletune::cli {

namespace {
volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }
}  // namespace

int run_worker(const CommonOptions& c, const WorkerOptions& o) {
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  auto backend = backend_for(c);
  client::Client daemon(o.server, o.token);
  char host[256] = "worker";
  gethostname(host, sizeof host - 1);
  db::TargetRow t = tuner::target_row(backend->target());
  nlohmann::json reg =
      daemon.call("POST", "/v1/workers",
                  {{"name", o.name.empty() ? std::string(host) : o.name}, {"target", db::target_to_json(t)}});
  std::string id = reg["worker_id"];
  std::cout << "tiletune: worker " << id << " measuring for " << o.server << " as target " << t.key << std::endl;
  int batches = 0;
  while (!g_stop && (o.max_batches <= 0 || batches < o.max_batches)) {
    nlohmann::json task = daemon.call("POST", "/v1/workers/" + id + "/lease");
    if (task.is_null()) {
      std::this_thread::sleep_for(std::chrono::duration<double>(o.poll_s));
      continue;
    }
    ir::Workload w = tuner::workload_from_row(db::workload_from_json(task.at("workload")));
    std::vector<ir::Schedule> configs;
    for (auto& cfg : task.at("configs")) configs.push_back(ir::Schedule::from_json_value(cfg));
    measure::MeasureOptions mo = measure::MeasureOptions::from_json(task.at("measure"));
    mo.cache_dir = c.cache_dir;
    measure::Measurer measurer(*backend, w, mo);
    nlohmann::json results = nlohmann::json::array();
    for (auto& r : measurer.measure(configs)) results.push_back(measure::result_to_json(r));
    try {
      daemon.call("POST", "/v1/leases/" + task.at("lease_id").get<std::string>(),
                  {{"worker_id", id}, {"results", results}});
    } catch (const Error& e) {
      // The lease ran out (another worker has the batch) or its job stopped: the work is lost,
      // not the worker.
      if (e.kind() != ErrorKind::Conflict && e.kind() != ErrorKind::NotFound) throw;
      std::cerr << "tiletune: worker " << id << ": results not taken: " << e.what() << std::endl;
    }
    ++batches;
    std::cout << "tiletune: worker " << id << " measured " << configs.size() << " candidates of " << w.op.name << " "
              << w.sizes_text() << std::endl;
  }
  return kOk;
}

}  // namespace tiletune::cli
