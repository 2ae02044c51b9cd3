// tuner/exchange.hpp — records moving between databases (tiletune db push/pull, POST /v1/records).
#pragma once
#include <string>

#include "db/store.hpp"

namespace tiletune::tuner {

//! A target row from outside: its key must hash its fingerprint, its family must be the
//! fingerprint's (the family decides which records answer for which device) and its traits must
//! parse. Error(InvalidInput) otherwise.
void check_target_row(const db::TargetRow& row);

//! Checks a batch before anything of it is written: every workload goes through the parser (its
//! key must be its text's), every target through check_target_row, every record's config must be
//! readable with its key derived from it, and every record's workload and target must be in the
//! batch or in `destination`. Error(InvalidInput) naming the first problem. (Store::merge checks
//! each record's own content, such as a success without times, before it writes any.)
void check_batch(const db::RecordBatch& batch, db::RecordStore& destination);

//! Everything `from` holds (the records of one target when `target_key` is not empty), with the
//! workloads and targets its records name.
db::RecordBatch read_batch(db::RecordStore& from, const std::string& target_key = "");

}  // namespace tiletune::tuner
