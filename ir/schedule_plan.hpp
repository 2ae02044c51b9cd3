// ir/schedule_plan.hpp: what checking (schedule_check.cpp) and lowering (lower.cpp) both
// derive from a schedule. Internal to ir/.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "ir/loop_nest.hpp"

namespace tiletune::ir {

using VarMap = std::map<std::string, IndexExpr>;

//! `e` with each variable replaced by its index expression in `vars`.
Expr substitute(const Expr& e, const VarMap& vars);

//! The right side `e` of a stage with every access to an inlined stage replaced by its body.
Expr effective_body(const Workload& w, const Schedule& s, const Expr& e);

//! The right side `e` of a stage as effective_body gives it, without copying `e` when no stage
//! it reads is inlined (the common case, which checking and lowering meet for every candidate).
class BodyView {
 public:
  BodyView(const Workload& w, const Schedule& s, const Expr& e);
  const Expr& operator*() const { return *body_; }

 private:
  std::optional<Expr> own_;
  const Expr* body_;
};

//! The body of stage `i + 1`, fused as stage `i`'s epilogue, in stage `i`'s axis names.
Expr fused_epilogue_body(const Workload& w, const Schedule& s, int i);

//! Where packing `tensor` in stage `i` puts its panels, or why it cannot be packed.
std::string plan_pack(const Workload& w, const Schedule& s, int i, const std::string& tensor, Pack& pack);

//! The points of `axis` one work-group covers (spatial) or one step of the reduction loops
//! spans (reduction) on a work-group device: the second-innermost tile, or the innermost.
std::int64_t group_span(const Stage& st, const StageSchedule& ss, const std::string& axis);

//! check_schedule, also giving each stage's packs as planned while checking them (plan_pack, or
//! plan_local without offsets on a work-group device), so that lowering does not plan them again.
//! `packs` gets one entry per stage of the workload; on a problem its contents are unspecified.
std::string check_schedule(const Workload& w, const Schedule& s, const TargetTraits& t,
                           std::vector<std::vector<Pack>>& packs);

//! Plans staging `tensor` in local memory (see Pack), or says why it cannot be.
std::string plan_local(const Workload& w, const Schedule& s, int i, const std::string& tensor, Pack& pack);

}  // namespace tiletune::ir
