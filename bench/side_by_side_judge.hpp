// The search bench's judge: which of a held-out op's contenders (the runs' answers, the pool's
// fastest, the database's best) is the best known, and how fast each is, by times taken side by
// side (measure::Measurer::side_by_side) rather than alone.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/backend.hpp"
#include "ir/schedule.hpp"
#include "ir/workload.hpp"
#include "measure/measure.hpp"

namespace tiletune::bench {

//! The contenders' judged times, and which of them is the best known.
struct Judgement {
  std::map<std::string, double> time;  //!< per contender timed, by config key; the others count as above the goal
  std::string best;                    //!< the key of the best contender
};

//! Judges the contenders in three steps, so that the best known is not the luckiest of many:
//! - one side-by-side session of all of them screens the front-runners (kFrontSpread);
//! - `sessions` / 2 sessions of the front-runners pick the best;
//! - the remaining sessions time the front-runners again, and those times judge them, the best
//!   among them: times that did not pick it.
//! The contenders that are not front-runners keep their screening time, shifted by the
//! front-runners' median ratio of judged to screening time. Each session's progress goes to
//! stderr under `op`. Empty where no session timed any contender.
Judgement judge(const codegen::Backend& backend, const ir::Workload& w, const measure::MeasureOptions& options,
                const std::vector<ir::Schedule>& contenders, int sessions, const std::string& op);

}  // namespace tiletune::bench
