// tuner/lookup.hpp
#pragma once
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

}  // namespace tiletune::tuner
