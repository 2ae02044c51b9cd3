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

//! The traits of the target that measured `record` (stored with its target row), or `be`'s own
//! when the row has none: the source of a record is generated for the target that ran it.
ir::TargetTraits record_traits(db::RecordStore& store, const codegen::Backend& be, const db::Record& record);

//! The source `be` emits for a record's config, for the target that measured it.
std::string record_source(db::RecordStore& store, const codegen::Backend& be, const ir::Workload& w,
                          const db::Record& record);

//! How a caller calls a record's kernel: the entry point, the tensor arguments in order (name,
//! role, shape, f32, row-major, dense), the workspace it needs and the threads it was built for.
nlohmann::json record_abi(db::RecordStore& store, const codegen::Backend& be, const ir::Workload& w,
                          const db::Record& record);

}  // namespace tiletune::tuner
