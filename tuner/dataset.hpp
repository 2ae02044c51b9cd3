// tuner/dataset.hpp
#pragma once
#include <map>
#include <string>
#include <vector>

#include "costmodel/model.hpp"
#include "db/store.hpp"
#include "ir/workload.hpp"

namespace tiletune::tuner {

//! Rebinds a stored workload from its op text (or, in rows from before op text was stored, the
//! library op of its name); Error(Database) if that no longer parses or binds to the same key.
ir::Workload workload_from_row(const db::WorkloadRow& row);

//! Cost-model samples built from the records of one target: each record's config lowered and
//! featurized against its workload. Records whose config or workload this version cannot read
//! are skipped and counted.
struct Dataset {
  std::vector<costmodel::Sample> samples;
  std::map<std::string, db::WorkloadRow> workloads;  //!< by key, those with samples
  int skipped = 0;
};

//! How many recent records of other workloads a model-guided search learns from by default.
inline constexpr int kPriorRecords = 20000;

//! At most `limit` most recent records of the target, excluding one workload's (its own records
//! reach a search through notify, not as prior). `traits` are the target's (its backend's).
Dataset load_dataset(db::RecordStore& store, const std::string& target_key, const ir::TargetTraits& traits,
                     const std::string& exclude_workload = "", int limit = kPriorRecords);

//! The features of a config of a workload on a target, for a sample.
costmodel::Sample make_sample(const ir::Workload& w, const ir::Schedule& s, const ir::TargetTraits& t,
                              double latency_s);

}  // namespace tiletune::tuner
