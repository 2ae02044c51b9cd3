#include "tuner/lookup.hpp"

#include "ir/loop_nest.hpp"

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

RecordKernel schedule_kernel(const codegen::Backend& be, const ir::Workload& w, const ir::Schedule& s,
                             const ir::TargetTraits& traits) {
  const std::string config = s.to_json();
  const ir::LoopNest nest = ir::lower(w, s, traits);
  RecordKernel k;
  k.source = be.emit_for(traits, w, nest, config);
  nlohmann::json arguments = nlohmann::json::array();
  for (auto& b : w.buffers) {  // the order of the kernel's tensor array: inputs, then outputs
    if (b.role == ir::Buffer::Role::Temp) continue;
    arguments.push_back({{"index", arguments.size()},
                         {"name", b.name},
                         {"role", b.role == ir::Buffer::Role::Input ? "input" : "output"},
                         {"shape", b.declared_shape},
                         {"dtype", ir::dtype_name(b.dtype)},
                         {"layout", "row-major, dense"}});
  }
  const codegen::CallAbi call = be.call_abi(w, nest, config);
  k.abi = {{"entry_point", call.entry_point},
           {"arguments", arguments},
           {"workspace_bytes", 4 * nest.workspace_floats},
           {"threads", traits.threads},
           {"vector_lanes", traits.vector_lanes}};
  if (!call.signature.empty()) k.abi["signature"] = call.signature;
  if (!call.threads_entry_point.empty()) {
    k.abi["threads_entry_point"] = call.threads_entry_point;
    k.abi["threads_signature"] = call.threads_signature;
  }
  if (!call.prepare_entry_point.empty()) {
    k.abi["prepare_entry_point"] = call.prepare_entry_point;
    k.abi["prepare_signature"] = call.prepare_signature;
  }
  return k;
}

RecordKernel record_kernel(db::RecordStore& store, const codegen::Backend& be, const ir::Workload& w,
                           const db::Record& record) {
  // The record's target row gives the traits the kernel ran with and the toolchain that built it;
  // without one (or for this backend's own target) the backend's own.
  std::optional<db::TargetRow> row = store.target(record.target_key);
  ir::TargetTraits traits = be.target().traits;
  if (record.target_key != be.target().key && row && !row->traits_json.empty())
    traits = codegen::traits_from_json(row->traits_json);
  RecordKernel k = schedule_kernel(be, w, ir::Schedule::from_json(record.config_json), traits);
  // The toolchain that built what was measured (in-tree CPU targets record it in the fingerprint).
  if (row) {
    nlohmann::json fp = nlohmann::json::parse(row->fingerprint_json, nullptr, false);
    if (fp.is_object() && fp.contains("flags")) k.abi["compile_flags"] = fp["flags"];
    if (fp.is_object() && fp.contains("compiler")) k.abi["compiler"] = fp["compiler"];
  }
  return k;
}

nlohmann::json kernel_json(const BestLookup& found, const ir::Workload& w, const RecordKernel& kernel,
                           const codegen::Backend& be) {
  const db::Record& r = found.record;
  return {{"workload_key", w.key},
          {"target_key", r.target_key},
          {"exact_target", found.exact_target},
          {"config", nlohmann::json::parse(r.config_json)},
          {"latency_s", r.median_s()},
          {"gflops", w.flops() / r.median_s() / 1e9},
          {"source", kernel.source},
          {"source_language", be.source_extension()},
          {"abi", kernel.abi},
          {"record_id", r.id}};
}

}  // namespace tiletune::tuner
