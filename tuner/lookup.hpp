// tuner/lookup.hpp
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "codegen/backend.hpp"
#include "db/store.hpp"

namespace tiletune::tuner {

struct BestLookup {
  db::Record record;
  bool exact_target = true;  //!< false: measured on the same device family with another toolchain
};

//! The best record of a workload for a target; falls back to targets of the same backend and
//! device family (never another backend) when the exact target has none.
std::optional<BestLookup> find_best(db::RecordStore& store, const std::string& workload_key,
                                    const codegen::TargetInfo& target);

//! A record's kernel as the target that measured it ran it (its stored traits: thread count,
//! SIMD width; this backend's own when the row has none): the source, and how a caller calls
//! it (`abi`: the entry point and signature, the tensor arguments in order with name, role,
//! shape, f32, row-major dense, the workspace in bytes, threads and lanes, and for CPU targets
//! the compiler and flags).
struct RecordKernel {
  std::string source;
  nlohmann::json abi;
};
RecordKernel record_kernel(db::RecordStore& store, const codegen::Backend& be, const ir::Workload& w,
                           const db::Record& record);
//! The same for a schedule on given traits, measured or not (no toolchain in its abi).
RecordKernel schedule_kernel(const codegen::Backend& be, const ir::Workload& w, const ir::Schedule& s,
                             const ir::TargetTraits& traits);

//! What `POST /v1/best`, `tiletune show --json` and export manifests say about a found record's
//! kernel: keys, config, latency, GFLOP/s, source, abi (BestAnswer in schemas/api.schema.json).
nlohmann::json kernel_json(const BestLookup& found, const ir::Workload& w, const RecordKernel& kernel,
                           const codegen::Backend& be);

}  // namespace tiletune::tuner
