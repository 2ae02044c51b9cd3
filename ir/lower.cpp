#include <algorithm>
#include <map>

#include "ir/loop_nest.hpp"
#include "ir/schedule_plan.hpp"
#include "support/error.hpp"

namespace tiletune::ir {

std::int64_t Pack::elements() const {
  if (box.empty()) return panels * others * block;
  std::int64_t n = 1;
  for (auto e : box) n *= e;
  return n;
}

LoopNest lower(const Workload& w, const Schedule& s, const TargetTraits& t) {
  std::string why = check_schedule(w, s, t);
  if (!why.empty()) throw_error(ErrorKind::InvalidInput, "invalid config: " + why);
  LoopNest nest;
  std::vector<bool> materialized(w.buffers.size(), true);
  for (size_t i = 0; i < w.stages.size(); ++i) {
    const Stage& st = w.stages[i];
    const StageSchedule& ss = s.stages[i];
    if (ss.inline_stage) {
      materialized[st.output] = false;
      continue;
    }
    if (i > 0 && s.stages[i - 1].fuse_epilogue) continue;
    StageNest sn;
    sn.stage = static_cast<int>(i);
    sn.body = effective_body(w, s, st.rhs);
    std::map<std::string, const Axis*> axis;
    for (auto& a : st.axes) axis[a.name] = &a;
    for (size_t p = 0; p < ss.order.size(); ++p) {
      const std::string& entry = ss.order[p];
      auto dot = entry.rfind('.');
      Loop l;
      l.axis = entry.substr(0, dot);
      l.level = std::stoi(entry.substr(dot + 1));
      const auto& sizes = ss.tile.at(l.axis);
      l.step = sizes[l.level];
      l.extent = axis[l.axis]->extent;
      l.block = l.level == 0 ? l.extent : sizes[l.level - 1];
      l.reduce = axis[l.axis]->reduce;
      l.parallel = static_cast<int>(p) < ss.parallel;
      sn.outer.push_back(l);
    }
    for (auto& a : st.axes) {
      const auto& sizes = ss.tile.at(a.name);
      Loop l;
      l.axis = a.name;
      l.level = static_cast<int>(sizes.size());
      l.step = 1;
      l.block = sizes.back();
      l.extent = a.extent;
      l.reduce = a.reduce;
      (a.reduce ? sn.reduce_inner : sn.reg).push_back(l);
      if (a.name == ss.vectorize) sn.vector_reduce = a.reduce;
    }
    // A vectorized reduction axis runs innermost so that its lanes are consecutive iterations.
    std::stable_partition(sn.reduce_inner.begin(), sn.reduce_inner.end(),
                          [&](const Loop& l) { return l.axis != ss.vectorize; });
    sn.vector_axis = ss.vectorize;
    sn.lanes = ss.vectorize.empty() ? 1 : t.vector_lanes;
    sn.unroll = ss.unroll;
    sn.prefetch = ss.prefetch;
    sn.store = st.output;
    if (ss.fuse_epilogue) {
      const Stage& e = w.stages[i + 1];
      sn.epilogue = static_cast<int>(i + 1);
      sn.epilogue_body = fused_epilogue_body(w, s, static_cast<int>(i));
      sn.store = e.output;
      materialized[st.output] = false;
    }
    std::int64_t local = 0;
    for (auto& tensor : ss.pack) {
      Pack p;
      if (t.groups()) {
        plan_local(w, s, static_cast<int>(i), tensor, p);
        p.offset = local;
        local += p.elements();
      } else {
        plan_pack(w, s, static_cast<int>(i), tensor, p);
      }
      sn.packs.push_back(p);
    }
    nest.stages.push_back(std::move(sn));
  }
  if (s.fuse_rows > 0) {
    nest.fuse_rows = s.fuse_rows;
    nest.rows = w.stages[nest.stages.front().stage].axes[0].extent;
  }
  auto reserve = [&](std::int64_t floats) {
    std::int64_t at = nest.workspace_floats;
    nest.workspace_floats += (floats + 15) / 16 * 16;  // 64-byte aligned starts
    return at;
  };
  nest.workspace_offset.assign(w.buffers.size(), -1);
  for (size_t b = 0; b < w.buffers.size(); ++b)
    if (w.buffers[b].role == Buffer::Role::Temp && materialized[b])
      nest.workspace_offset[b] = reserve(w.buffers[b].elements());
  for (auto& sn : nest.stages) {
    for (auto& p : sn.packs)
      if (p.box.empty()) p.offset = reserve(p.elements());
    const Buffer& store = w.buffers[sn.store];
    bool blocked = false;
    for (auto& l : sn.reduce_inner) blocked = blocked || l.block < l.extent;
    if (blocked && store.dtype != compute_type(w.buffers[w.stages[sn.stage].output].dtype))
      sn.partials = reserve(store.elements());
  }
  return nest;
}

}  // namespace tiletune::ir
