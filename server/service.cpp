#include "server/service.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <unistd.h>

#include "ir/parse.hpp"
#include "measure/measure.hpp"
#include "ops/library.hpp"
#include "server/dashboard_detail.hpp"
#include "server/service_impl.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "tuner/tune.hpp"

namespace tiletune::server {

using nlohmann::json;
namespace asio = boost::asio;

std::string new_id() {
  static std::mt19937_64 rng(std::random_device{}());
  static std::mutex mu;
  std::lock_guard lock(mu);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

ir::Workload workload_of(const json& request) {
  std::string op = request.at("op").get<std::string>();
  std::string op_name = request.value("op_name", "");
  auto names = ops::op_names();
  bool library = std::find(names.begin(), names.end(), op) != names.end();
  std::vector<ir::OpDef> defs = ir::parse_ops(library ? ops::op_text(op) : op);
  return ir::bind(ir::select_op(std::move(defs), op_name, library ? "library op " + op : "the op text"),
                  ir::parse_sizes(request.at("sizes").get<std::string>()));
}

std::string backend_of(const json& request) { return request.value("backend", codegen::kDefaultBackend); }

Service::Impl::Impl(ServiceOptions o)
    : options(std::move(o)),
      store(db::open_store(options.db_path)),
      board(*store, options.lease_seconds, options.unclaimed_seconds) {
  job_lease_ms = static_cast<std::int64_t>(options.job_lease_seconds * 1e3);
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  host = name;
  // The host and pid let a restarted daemon on this host see that a job's owner has died.
  daemon_id = host + ":" + std::to_string(::getpid()) + ":" + new_id();
}

codegen::TargetInfo Service::Impl::target_of(const json& req, bool* remote) {
  std::string backend_name = backend_of(req);
  if (!req.contains("target")) {
    *remote = false;
    return backend(backend_name).target();
  }
  std::string key = req["target"].get<std::string>();
  auto row = store->target(key);
  if (!row) throw_error(ErrorKind::NotFound, "no target '" + key + "': a worker registers it (tiletune worker)");
  // A target this daemon can measure itself is measured here.
  try {
    if (backend(row->backend).target().key == key) {
      *remote = false;
      return backend(row->backend).target();
    }
  } catch (const Error&) {
    // no such backend here: only remote workers can measure it
  }
  *remote = true;
  return tuner::target_info(*row);
}

codegen::Backend& Service::Impl::backend(const std::string& name) {
  std::lock_guard lock(backends_mu);
  auto& b = backends[name];
  if (!b) {
    try {
      b = codegen::make_backend(name, options.backend);
    } catch (...) {
      backends.erase(name);
      throw;
    }
  }
  return *b;
}

Service::Service(ServiceOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Service::~Service() { stop(); }

void Service::start() {
  auto& m = *impl_;
  if (m.started) return;
  m.started = true;
  m.stopping = false;
  // A daemon killed before this one may have left half-built kernels in the cache.
  std::string cache = m.options.job_defaults.measure.cache_dir.empty() ? measure::default_cache_dir()
                                                                       : m.options.job_defaults.measure.cache_dir;
  if (int removed = measure::remove_orphans(cache))
    spdlog::info("event=cache_cleaned removed={} cache={}", removed, cache);
  m.control_work.emplace(m.control_io.get_executor());
  m.rate_timer.emplace(m.control_io);
  m.heartbeat_timer.emplace(m.control_io);
  m.tick_rate();
  m.heartbeat();  // a job this host's dead daemon left is queued before the runner looks
  m.tick_heartbeat();
  m.jobs_thread = std::thread([&m] { m.run_jobs(); });
  // The dashboard's largest workloads are read before their first page is asked for.
  m.warm_thread = std::thread([&m] {
    try {
      dashboard::warm(*m.store, m.stopping);
    } catch (const std::exception& e) {
      spdlog::warn("event=dashboard_warm_failed error=\"{}\"", e.what());
    }
  });
  m.control_thread = std::thread([&m] { m.control_io.run(); });
}

void Service::stop() {
  auto& m = *impl_;
  if (!m.started) return;
  {
    std::lock_guard lock(m.wake_mu);
    m.stopping = true;
  }
  m.wake.notify_all();
  if (m.jobs_thread.joinable()) m.jobs_thread.join();  // the running job ends after its batch
  if (m.warm_thread.joinable()) m.warm_thread.join();
  m.control_work.reset();
  m.control_io.stop();
  if (m.control_thread.joinable()) m.control_thread.join();
  m.control_io.restart();
  m.started = false;
}

json Service::ops() {
  json out = json::array();
  for (auto& name : ops::op_names()) out.push_back({{"name", name}, {"text", ops::op_text(name)}});
  return {{"ops", out}};
}

json Service::dashboard() {
  json out = dashboard::overview(*impl_->store);
  out["jobs"] = jobs("", 50)["jobs"];
  out["measurements_per_second"] = impl_->metrics.measurements_per_second();
  return out;
}

json Service::dashboard_workload(const dashboard::WorkloadQuery& query) {
  return dashboard::workload(*impl_->store, query);
}

json Service::dashboard_model(const std::string& target, const std::string& kind, const std::string& workload) {
  return dashboard::model_view(*impl_->store, target, kind, workload);
}

json Service::targets() {
  json out = json::array();
  for (auto& t : impl_->store->targets()) out.push_back(dashboard::target_json(t));
  json local = json::array();
  for (auto& [name, description] : codegen::list_backends())
    local.push_back({{"name", name}, {"description", description}});
  return {{"targets", out}, {"backends", local}};
}

void Service::observe_request(const std::string& route, int status, double seconds) {
  impl_->metrics.observe_request(route, status, seconds);
}

std::string Service::metrics() {
  std::map<std::string, int> by_state = {{"queued", 0}, {"running", 0}, {"done", 0}, {"failed", 0}, {"cancelled", 0}};
  for (auto& j : impl_->store->jobs("", 100000)) ++by_state[j.state];
  return impl_->metrics.render(by_state);
}

}  // namespace tiletune::server
