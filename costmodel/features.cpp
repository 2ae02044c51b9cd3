#include "costmodel/features.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "support/error.hpp"

namespace tiletune::costmodel {

namespace {

using ir::Expr;
using ir::Loop;
using ir::StageNest;

enum Feature {
  kFlops,
  kPoints,
  kRegPoints,
  kVectorLanes,
  kVectorReduce,
  kAccumulators,
  kRegisterPressure,
  kLoadsPerUpdate,
  kReduceInner,
  kUnroll,
  kParallel,
  kParallelBalance,
  kOuterLoops,
  kEdgeFraction,
  kInnerUnitStride,
  kFootprintReg,
  kFitL1,
  kFitL2,
  kFitL3,
  kFootprintTotal,
  kIntensityReg,
  kIntensityL2,
  kPacked,
  kPackedBytes,
  kEpilogue,
  kInlined,
  kFuseRows,
  kStages,
  kTempBytes,
  kReductionPosition,
  kOutputStores,
  kPrefetch,
  kParallelLoops,
  kLoopTrips,
  kFootprintCurve,
  kCount
};

const std::vector<std::pair<std::string, std::string>> kDocs = {
    {"flops_log", "log2(1 + arithmetic operations of the stage)"},
    {"points_log", "log2 of the iteration points of the stage (all axes)"},
    {"reg_points", "points of the register tile (spatial innermost blocks)"},
    {"vector_lanes_log", "log2(1 + SIMD lanes used); 0 if scalar"},
    {"vector_reduce", "1 if the SIMD axis is a reduction axis"},
    {"accumulators", "accumulators held in registers (vectors, or scalars if not vectorized)"},
    {"register_pressure", "accumulators over the target's vector registers"},
    {"loads_per_update", "distinct loads per reduction step of the micro-kernel, per accumulator"},
    {"reduce_inner_log", "log2 of the micro-kernel's reduction block (product over reduction axes)"},
    {"unroll", "unroll factor of the micro-kernel's reduction loop"},
    {"parallel_log", "log2(1 + iterations of the parallel loops)"},
    {"parallel_balance", "iterations / (threads * ceil(iterations / threads)); 1 is perfectly balanced"},
    {"outer_loops", "number of tile loops around the micro-kernel"},
    {"edge_fraction", "fraction of the points computed by edge tiles (tails)"},
    {"inner_unit_stride", "fraction of accesses unit-stride or invariant along the innermost reduction loop"},
    {"footprint_reg_log", "log2 of bytes touched by one micro-kernel call"},
    {"fit_l1", "fraction of tile loops (innermost outward) whose footprint fits the L1 cache"},
    {"fit_l2", "fraction of tile loops whose footprint fits the L2 cache"},
    {"fit_l3", "fraction of tile loops whose footprint fits the L3 cache"},
    {"footprint_total_log", "log2 of bytes of all buffers the stage touches"},
    {"intensity_reg", "flops per byte touched by one micro-kernel call"},
    {"intensity_l2", "flops per byte at the outermost loop whose footprint fits L2"},
    {"packed", "inputs packed into panels"},
    {"packed_bytes_log", "log2(1 + bytes copied by packing)"},
    {"epilogue", "1 if the next stage is fused at the store"},
    {"inlined", "stages of the op inlined into their consumers"},
    {"fuse_rows_log", "log2(1 + rows per block when all stages share a row loop)"},
    {"stages", "loop nests the op runs"},
    {"temp_bytes_log", "log2(1 + bytes of materialized temporaries and panels)"},
    {"reduction_position", "position of the first reduction tile loop in the order, 0 outermost .. 1 innermost"},
    {"output_stores_log", "log2 of stores of output points (reduction blocks outside the register tile)"},
    {"prefetch", "iterations of the micro-kernel's reduction loop ahead that its vector loads are prefetched"},
    {"parallel_loops", "tile loops collapsed into the parallel loop"},
    {"loop_trips_by_depth",
     "mean over tile loops of depth (1 outermost) times log2(1 + trips): where the long loops sit"},
    {"footprint_curve_log", "mean over tile-loop depths of log2(1 + bytes touched inside them): the footprint curve"},
};

double log2p(double x) { return std::log2(1.0 + std::max(0.0, x)); }

using ir::collect_accesses;
using ir::count_ops;

struct StageFeatures {
  const ir::Workload& w;
  const ir::LoopNest& nest;
  const StageNest& sn;
  const ir::TargetTraits& t;
  std::map<std::string, std::int64_t> extent;
  std::vector<const Expr*> accesses;

  StageFeatures(const ir::Workload& w_, const ir::LoopNest& n, const StageNest& s, const ir::TargetTraits& t_)
      : w(w_), nest(n), sn(s), t(t_) {
    for (auto& a : w.stages[sn.stage].axes) extent[a.name] = a.extent;
    collect_accesses(sn.body, accesses);
    if (sn.epilogue >= 0) collect_accesses(sn.epilogue_body, accesses);
  }

  //! Span of each axis inside the first `depth` tile loops (the micro-kernel when depth is all).
  std::map<std::string, std::int64_t> spans(size_t depth) const {
    std::map<std::string, std::int64_t> s = extent;
    for (size_t i = 0; i < depth && i < sn.outer.size(); ++i) s[sn.outer[i].axis] = sn.outer[i].step;
    return s;
  }

  //! Bytes touched inside the first `depth` tile loops: every buffer once, the largest access.
  double footprint(size_t depth) const {
    auto span = spans(depth);
    std::map<std::string, double> per_buffer;
    auto add = [&](const std::string& name, const std::vector<ir::IndexExpr>& idx) {
      const auto& shape = w.buffers[w.buffer_index(name)].shape;
      double bytes = 4;
      for (size_t d = 0; d < idx.size(); ++d) {
        std::int64_t range = 1;
        for (auto& term : idx[d].terms) range += std::abs(term.coeff) * (span.at(term.var) - 1);
        bytes *= static_cast<double>(std::min(range, shape[d]));
      }
      per_buffer[name] = std::max(per_buffer[name], bytes);
    };
    for (const Expr* a : accesses)
      if (a->name != w.stages[sn.stage].name) add(a->name, a->indices);
    std::vector<ir::IndexExpr> out_idx;
    for (auto& a : w.stages[sn.stage].axes)
      if (!a.reduce) out_idx.push_back(ir::IndexExpr{{{a.name, 1}}, 0});
    add(w.buffers[sn.store].name, out_idx);
    double total = 0;
    for (auto& [name, bytes] : per_buffer) total += bytes;
    return total;
  }

  void add_to(std::vector<float>& f) const {
    const ir::Stage& st = w.stages[sn.stage];
    double points = static_cast<double>(st.points());
    double flops = points * (count_ops(sn.body) + (st.is_reduction() ? 1 : 0));
    double reg_points = 1, reduce_inner = 1;
    for (auto& l : sn.reg) reg_points *= static_cast<double>(l.block);
    for (auto& l : sn.reduce_inner) reduce_inner *= static_cast<double>(l.block);
    double acc = sn.vector_axis.empty() || sn.vector_reduce ? reg_points : reg_points / sn.lanes;
    f[kFlops] += log2p(flops);
    f[kPoints] += log2p(points);
    f[kRegPoints] += static_cast<float>(reg_points);
    f[kVectorLanes] += log2p(sn.vector_axis.empty() ? 0 : sn.lanes);
    f[kVectorReduce] += sn.vector_reduce ? 1 : 0;
    f[kAccumulators] += static_cast<float>(acc);
    f[kRegisterPressure] += static_cast<float>(acc / std::max(1, t.vector_registers));
    // Loads per step: distinct (buffer, index) pairs at distinct register offsets.
    std::set<std::string> loads;
    for (const Expr* a : accesses) {
      double copies = 1;
      for (auto& l : sn.reg)
        for (auto& ix : a->indices)
          if (ix.coeff_of(l.axis) != 0) {
            copies *=
                (l.axis == sn.vector_axis && !sn.vector_reduce) ? std::max<double>(1, l.block / sn.lanes) : l.block;
            break;
          }
      loads.insert(a->name + ":" + std::to_string(copies));
    }
    double load_count = 0;
    for (auto& l : loads) load_count += std::stod(l.substr(l.rfind(':') + 1));
    f[kLoadsPerUpdate] += static_cast<float>(load_count / std::max(1.0, acc));
    f[kReduceInner] += log2p(reduce_inner);
    f[kUnroll] += static_cast<float>(sn.unroll);
    f[kPrefetch] += static_cast<float>(sn.prefetch);
    double par = 1;
    bool any_parallel = false;
    for (auto& l : sn.outer)
      if (l.parallel) {
        par *= static_cast<double>(l.trips());
        any_parallel = true;
      }
    if (nest.fuse_rows > 0) {
      par = std::ceil(double(nest.rows) / nest.fuse_rows);
      any_parallel = true;
    }
    int threads = std::max(1, t.threads);
    f[kParallel] += any_parallel ? log2p(par) : 0;
    f[kParallelBalance] +=
        any_parallel ? static_cast<float>(par / (threads * std::ceil(par / threads))) : 1.0f / threads;
    f[kOuterLoops] += static_cast<float>(sn.outer.size());
    double parallel_loops = 0, trips_by_depth = 0;
    for (size_t i = 0; i < sn.outer.size(); ++i) {
      parallel_loops += sn.outer[i].parallel;
      trips_by_depth += static_cast<double>(i + 1) * log2p(static_cast<double>(sn.outer[i].trips()));
    }
    f[kParallelLoops] += static_cast<float>(parallel_loops);
    f[kLoopTrips] += static_cast<float>(trips_by_depth / std::max<size_t>(1, sn.outer.size()));
    double full = 1;
    for (auto& l : sn.reg) full *= static_cast<double>(l.extent / l.block * l.block) / static_cast<double>(l.extent);
    f[kEdgeFraction] += static_cast<float>(1 - full);
    if (!sn.reduce_inner.empty()) {
      const std::string& inner = sn.reduce_inner.back().axis;
      double unit = 0;
      for (const Expr* a : accesses) {
        bool ok = true;
        for (size_t d = 0; d < a->indices.size(); ++d) {
          std::int64_t c = a->indices[d].coeff_of(inner);
          if (d + 1 < a->indices.size() ? c != 0 : (c != 0 && c != 1)) ok = false;
        }
        unit += ok;
      }
      f[kInnerUnitStride] += static_cast<float>(accesses.empty() ? 1 : unit / accesses.size());
    } else {
      f[kInnerUnitStride] += 1;
    }
    // Footprints: the micro-kernel sees the register and reduction blocks.
    double reg_fp = footprint(sn.outer.size());
    f[kFootprintReg] += log2p(reg_fp);
    double n = std::max<size_t>(1, sn.outer.size());
    int fit1 = 0, fit2 = 0, fit3 = 0;
    double l2_intensity = 0;
    double curve = 0;
    for (size_t depth = sn.outer.size(); depth-- > 0;) {
      double fp = footprint(depth);
      curve += log2p(fp);
      fit1 += fp <= t.l1_bytes;
      fit2 += fp <= t.l2_bytes;
      fit3 += fp <= t.l3_bytes;
      if (fp <= t.l2_bytes) {
        auto s = spans(depth);
        double pts = 1;
        for (auto& [axis, sp] : s) pts *= static_cast<double>(sp);
        l2_intensity = pts * (count_ops(sn.body) + 1) / fp;
      }
    }
    f[kFootprintCurve] += static_cast<float>(curve / n);
    f[kFitL1] += static_cast<float>(fit1 / n);
    f[kFitL2] += static_cast<float>(fit2 / n);
    f[kFitL3] += static_cast<float>(fit3 / n);
    f[kFootprintTotal] += log2p(footprint(0));
    f[kIntensityReg] += static_cast<float>(2 * reg_points * reduce_inner / std::max(4.0, reg_fp));
    f[kIntensityL2] += static_cast<float>(l2_intensity);
    double packed_bytes = 0;
    for (auto& p : sn.packs) packed_bytes += 4.0 * static_cast<double>(p.elements());
    f[kPacked] += static_cast<float>(sn.packs.size());
    f[kPackedBytes] += log2p(packed_bytes);
    f[kEpilogue] += sn.epilogue >= 0 ? 1 : 0;
    size_t first_reduce = sn.outer.size();
    for (size_t i = 0; i < sn.outer.size(); ++i)
      if (sn.outer[i].reduce) {
        first_reduce = i;
        break;
      }
    f[kReductionPosition] += static_cast<float>(first_reduce / n);
    double reduce_blocks = 1;
    for (auto& l : sn.outer)
      if (l.reduce) reduce_blocks *= static_cast<double>(l.trips());
    double outputs = 1;
    for (auto& a : st.axes)
      if (!a.reduce) outputs *= static_cast<double>(a.extent);
    f[kOutputStores] += log2p(outputs * reduce_blocks);
  }
};

}  // namespace

const std::vector<std::pair<std::string, std::string>>& feature_docs() { return kDocs; }
std::size_t feature_count() { return kCount; }

Features extract_features(const ir::Workload& w, const ir::LoopNest& nest, const ir::TargetTraits& t) {
  static_assert(kCount == 35, "update kDocs and kFeatureVersion with the features");
  Features out;
  for (auto& sn : nest.stages) {
    out.stages.emplace_back(kCount, 0.0f);
    StageFeatures(w, nest, sn, t).add_to(out.stages.back());
  }
  if (out.stages.empty()) out.stages.emplace_back(kCount, 0.0f);
  FeatureRow& f = out.stages.front();
  f[kInlined] = static_cast<float>(w.stages.size() - nest.stages.size());
  for (auto& sn : nest.stages)
    if (sn.epilogue >= 0) f[kInlined] -= 1;  // a fused epilogue is not an inlined stage
  f[kFuseRows] = static_cast<float>(log2p(static_cast<double>(nest.fuse_rows)));
  f[kStages] = static_cast<float>(nest.stages.size());
  f[kTempBytes] = static_cast<float>(log2p(4.0 * static_cast<double>(nest.workspace_floats)));
  return out;
}

void check_feature_row(const FeatureRow& row) {
  if (row.size() != kCount)
    throw_error(ErrorKind::InvalidInput, "a feature row has " + std::to_string(row.size()) + " features, expected " +
                                             std::to_string(kCount) + " (feature version " +
                                             std::to_string(kFeatureVersion) + ")");
}

FeatureRow Features::pooled() const {
  FeatureRow sum(kCount, 0.0f);
  for (auto& row : stages) {
    check_feature_row(row);
    for (size_t i = 0; i < row.size(); ++i) sum[i] += row[i];
  }
  return sum;
}

Features featurize(const ir::Workload& w, const ir::Schedule& s, const ir::TargetTraits& t) {
  return extract_features(w, ir::lower(w, s, t), t);
}

std::vector<std::optional<Features>> featurize_all(const ir::Workload& w, const std::vector<ir::Schedule>& schedules,
                                                   const ir::TargetTraits& t) {
  std::vector<std::optional<Features>> out(schedules.size());
  auto work = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      try {
        out[i] = featurize(w, schedules[i], t);
      } catch (const Error&) {
      }
    }
  };
  std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  if (schedules.size() < 64 || threads == 1) {
    work(0, schedules.size());
    return out;
  }
  std::vector<std::thread> pool;
  std::size_t chunk = (schedules.size() + threads - 1) / threads;
  for (std::size_t k = 0; k < threads; ++k)
    pool.emplace_back(work, std::min(schedules.size(), k * chunk), std::min(schedules.size(), (k + 1) * chunk));
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace tiletune::costmodel
