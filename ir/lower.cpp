#include <algorithm>

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

double StageNest::accumulators() const {
  double points = 1;
  for (auto& l : reg) points *= static_cast<double>(l.block);
  return vector_axis.empty() || vector_reduce ? points : points / lanes;
}

namespace {

//! The dot-product group of a stage (StageNest::dot_group), 1 when its full tiles cannot run
//! one: the body must be the product of a broadcast operand contiguous along the innermost
//! reduction axis and a vector operand packed along the SIMD axis, in bf16 x bf16 summed in
//! f32 or u8 x i8 summed in i32, with the reduction's blocks whole groups. `pack` gets the
//! index of the vector operand's pack in sn.packs.
int dot_group(const Workload& w, const StageNest& sn, size_t& pack) {
  const Stage& st = w.stages[sn.stage];
  if (sn.vector_axis.empty() || sn.vector_reduce || st.combine != Combine::Add || sn.reduce_inner.empty()) return 1;
  const Expr& b = sn.body;
  if (b.kind != Expr::Kind::Mul || b.args[0].kind != Expr::Kind::Access || b.args[1].kind != Expr::Kind::Access)
    return 1;
  const Loop& k = sn.reduce_inner.back();
  if (k.axis == sn.vector_axis) return 1;
  for (int v = 0; v < 2; ++v) {
    const Expr& vec = b.args[v];
    const Expr& bcast = b.args[1 - v];
    const Buffer& V = w.buffers[w.buffer_index(vec.name)];
    const Buffer& S = w.buffers[w.buffer_index(bcast.name)];
    // A padded broadcast operand is read unguarded on interior tiles only (border tiles are the
    // widening ones); the packed vector operand cannot be padded.
    if (V.pad || vec.name == bcast.name) continue;
    DType acc = compute_type(w.buffers[st.output].dtype);
    int g = V.dtype == DType::BF16 && S.dtype == DType::BF16 && acc == DType::F32 ? 2
            : ((V.dtype == DType::U8 && S.dtype == DType::I8) || (V.dtype == DType::I8 && S.dtype == DType::U8)) &&
                    acc == DType::I32
                ? 4
                : 1;
    if (g == 1 || (k.block % g != 0 && k.block < k.extent)) continue;
    // The broadcast operand: its last index is the reduction axis alone, and no index moves
    // along the SIMD axis; it is read where it lies.
    if (bcast.indices.back().plain_var() != k.axis) continue;
    bool moves = false;  // along the SIMD axis, or along the reduction axis in another dimension
    for (size_t d = 0; d < bcast.indices.size(); ++d)
      moves = moves || bcast.indices[d].coeff_of(sn.vector_axis) != 0 ||
              (d + 1 < bcast.indices.size() && bcast.indices[d].coeff_of(k.axis) != 0);
    pack = sn.packs.size();
    for (size_t p = 0; p < sn.packs.size(); ++p) {
      if (sn.packs[p].buffer == w.buffer_index(bcast.name)) moves = true;
      if (sn.packs[p].buffer == w.buffer_index(vec.name)) pack = p;
    }
    if (moves || pack == sn.packs.size() || sn.packs[pack].axis != sn.vector_axis || vec.indices.size() < 2) continue;
    // The vector operand: packed along the SIMD axis, the reduction axis its group dimension alone.
    const int gd = sn.packs[pack].group_dim(vec.indices.size());
    if (vec.indices[gd].plain_var() != k.axis) continue;
    for (int d = 0; d < static_cast<int>(vec.indices.size()); ++d)
      if (d != gd && vec.indices[d].coeff_of(k.axis) != 0) moves = true;
    if (moves) continue;
    return g;
  }
  return 1;
}

}  // namespace

LoopNest lower(const Workload& w, const Schedule& s, const TargetTraits& t) {
  std::vector<std::vector<Pack>> packs;
  std::string why = check_schedule(w, s, t, packs);
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
    // Tile sizes by axis index, looked up once (check_schedule has vouched for every name).
    std::vector<const std::vector<std::int64_t>*> tiles;
    tiles.reserve(st.axes.size());
    for (auto& a : st.axes) tiles.push_back(&ss.tile.find(a.name)->second);
    sn.outer.reserve(ss.order.size());
    for (size_t p = 0; p < ss.order.size(); ++p) {
      const OrderEntry entry = split_order_entry(ss.order[p]);
      size_t ai = 0;
      while (st.axes[ai].name != entry.axis) ++ai;
      const Axis& a = st.axes[ai];
      const auto& sizes = *tiles[ai];
      Loop l;
      l.axis = a.name;
      l.level = entry.number();
      l.step = sizes[l.level];
      l.extent = a.extent;
      l.block = l.level == 0 ? l.extent : sizes[l.level - 1];
      l.reduce = a.reduce;
      l.parallel = static_cast<int>(p) < ss.parallel;
      sn.outer.push_back(std::move(l));
    }
    sn.reg.reserve(st.axes.size());
    sn.reduce_inner.reserve(st.axes.size());
    for (size_t ai = 0; ai < st.axes.size(); ++ai) {
      const Axis& a = st.axes[ai];
      const auto& sizes = *tiles[ai];
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
    sn.packs = std::move(packs[i]);  // planned in ss.pack's order by check_schedule
    if (t.groups()) {
      std::int64_t local = 0;
      for (auto& p : sn.packs) {
        p.offset = local;
        local += p.elements();
      }
    }
    size_t grouped = 0;
    if (!t.groups()) sn.dot_group = dot_group(w, sn, grouped);
    if (sn.dot_group > 1) {
      Pack& p = sn.packs[grouped];
      const auto& shape = w.buffers[p.buffer].shape;
      const std::int64_t k = shape[p.group_dim(shape.size())];
      p.group = sn.dot_group;
      p.others = p.others / k * p.grouped(k);
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
