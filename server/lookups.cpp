// Lookups of Service: the best kernel of a workload, with its source, cached.
#include "server/schemas.hpp"
#include "server/service_impl.hpp"
#include "support/error.hpp"
#include "tuner/tune.hpp"

namespace tiletune::server {

using nlohmann::json;
namespace asio = boost::asio;

json Service::Impl::best_answer(const tuner::BestLookup& found, const ir::Workload& w, codegen::Backend& be) {
  const db::Record& r = found.record;
  std::string cache_key = w.key + "/" + r.config_key + "/" + r.target_key;
  std::optional<tuner::RecordKernel> kernel;
  {
    std::lock_guard lock(source_mu);
    auto it = kernel_cache.find(cache_key);
    if (it != kernel_cache.end()) kernel = it->second;
  }
  if (!kernel) {
    kernel = tuner::record_kernel(*store, be, w, r);
    std::lock_guard lock(source_mu);
    if (kernel_cache.size() > 4096) kernel_cache.clear();
    kernel_cache[cache_key] = *kernel;
  }
  return tuner::kernel_json(found, w, *kernel, be);
}

json Service::best(const std::string& workload_key, const std::string& target_key) {
  auto& store = *impl_->store;
  // Compilers ask the same question often: the answer stands until the database changes.
  std::int64_t stamp = store.change_stamp();
  std::string cache_key = workload_key + "/" + target_key;
  {
    std::lock_guard lock(impl_->source_mu);
    auto it = impl_->answers.find(cache_key);
    if (it != impl_->answers.end() && it->second.first == stamp) return it->second.second;
  }
  json answer = best_uncached(workload_key, target_key);
  std::lock_guard lock(impl_->source_mu);
  if (impl_->answers.size() > 4096) impl_->answers.clear();
  impl_->answers[cache_key] = {stamp, answer};
  return answer;
}

json Service::best_uncached(const std::string& workload_key, const std::string& target_key) {
  auto& store = *impl_->store;
  auto wrow = store.workload(workload_key);
  if (!wrow) throw_error(ErrorKind::NotFound, "no workload '" + workload_key + "'; tune it first (POST /v1/tune)");
  auto trow = store.target(target_key);
  if (!trow) throw_error(ErrorKind::NotFound, "no target '" + target_key + "' (GET /v1/targets lists them)");
  codegen::TargetInfo target = tuner::target_info(*trow);
  auto found = tuner::find_best(store, workload_key, target);
  if (!found)
    throw_error(ErrorKind::NotFound, "no measured kernel of workload " + workload_key + " for target " + target_key +
                                         " or its device family; tune it first (POST /v1/tune)");
  return impl_->best_answer(*found, tuner::workload_from_row(*wrow), impl_->backend(trow->backend));
}

json Service::best_for(const json& request) {
  validate_body("BestRequest", request);
  ir::Workload w = workload_of(request);
  if (request.contains("target")) return best(w.key, request["target"].get<std::string>());
  codegen::Backend& be = impl_->backend(backend_of(request));
  auto found = tuner::find_best(*impl_->store, w.key, be.target());
  if (!found)
    throw_error(ErrorKind::NotFound, "no measured kernel of " + w.op.name + " with " + w.sizes_text() +
                                         " on this target; tune it first (POST /v1/tune)");
  return impl_->best_answer(*found, w, be);
}

}  // namespace tiletune::server
