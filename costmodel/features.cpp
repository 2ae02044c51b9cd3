#include "costmodel/features.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "costmodel/feature_layout.hpp"
#include "costmodel/stage_features.hpp"
#include "costmodel/work_split.hpp"
#include "ir/read_strides.hpp"
#include "ir/schedule.hpp"
#include "support/error.hpp"
#include "support/parallel.hpp"

namespace tiletune::costmodel {

using namespace layout;

using detail::log2p;
using detail::StageFeatures;

namespace detail {

StageFeatures::Cycles StageFeatures::add_to(std::vector<float>& f) const {
  double points = static_cast<double>(st.points());
  double flops = points * (ops_per_point - 1 + (st.is_reduction() ? 1 : 0));
  double reg_points = 1, reduce_inner = 1;
  for (auto& l : sn.reg) reg_points *= static_cast<double>(l.block);
  for (auto& l : sn.reduce_inner) reduce_inner *= static_cast<double>(l.block);
  const double acc = sn.accumulators();
  f[kFlops] += log2p(flops);
  f[kPoints] += log2p(points);
  f[kRegPoints] += static_cast<float>(reg_points);
  f[kVectorLanes] += log2p(sn.vector_axis.empty() ? 0 : sn.lanes);
  f[kVectorReduce] += sn.vector_reduce ? 1 : 0;
  f[kAccumulators] += static_cast<float>(acc);
  f[kRegisterPressure] += static_cast<float>(acc / std::max(1, t.vector_registers));
  // Version 3 counted a fused epilogue's reads, and the stage's own value, as loads of every
  // reduction step; its models read that count, so it stays, and version 7 adds the body's.
  const Loads all = loads_of(LoadsOf::All), body = loads_of(LoadsOf::Body), epilogue = loads_of(LoadsOf::Epilogue);
  const double per_acc = 1 / std::max(1.0, acc);
  f[kLoadsPerUpdate] += static_cast<float>(all.count * per_acc);
  f[kLoadIssue] += static_cast<float>(all.issue * per_acc);
  f[kBodyLoads] += static_cast<float>(body.count * per_acc);
  f[kSplitLoads] += static_cast<float>(body.split * per_acc);
  f[kEpilogueLoads] += static_cast<float>(epilogue.count * per_acc);
  f[kReduceInner] += log2p(reduce_inner);
  f[kUnroll] += static_cast<float>(sn.unroll);
  f[kPrefetch] += static_cast<float>(sn.prefetch);
  // The parallel loops: the stage's own, or the row blocks' loop around all stages.
  ParallelLoops parallel;
  if (nest.fuse_rows > 0) {
    parallel.push_back({(nest.rows + nest.fuse_rows - 1) / nest.fuse_rows, nest.fuse_rows, nest.rows});
  } else {
    for (auto& l : sn.outer)
      if (l.parallel) parallel.push_back({l.trips(), l.step, l.block});
  }
  const bool any_parallel = !parallel.empty();
  double par = 1;
  for (auto& l : parallel) par *= static_cast<double>(l.trips);
  int threads = std::max(1, t.threads);
  f[kParallel] += any_parallel ? log2p(par) : 0;
  f[kParallelBalance] += any_parallel ? static_cast<float>(par / (threads * std::ceil(par / threads))) : 1.0f / threads;
  f[kOuterLoops] += static_cast<float>(sn.outer.size());
  double parallel_loops = 0, trips_by_depth = 0;
  for (size_t i = 0; i < sn.outer.size(); ++i) {
    parallel_loops += sn.outer[i].parallel;
    trips_by_depth += static_cast<double>(i + 1) * log2p(static_cast<double>(sn.outer[i].trips()));
  }
  f[kParallelLoops] += static_cast<float>(parallel_loops);
  // The trips alone (parallel_balance) call 73 rows in parallel tiles of 72 even; by their
  // points, one thread has 72 rows and the other 1.
  const double work = even_share(parallel, threads);
  f[kParallelWork] += static_cast<float>(work);
  f[kLoopTrips] += static_cast<float>(trips_by_depth / std::max<size_t>(1, sn.outer.size()));
  double full = 1;
  for (auto& l : sn.reg) full *= static_cast<double>(l.extent / l.block * l.block) / static_cast<double>(l.extent);
  f[kEdgeFraction] += static_cast<float>(1 - full);
  if (!sn.reduce_inner.empty()) {
    const int inner = reduce_axis.back();
    double unit = 0;
    for (const Use& u : reads) {
      bool ok = true;
      for (size_t d = 0; d < u.ends.size(); ++d) {
        std::int64_t c = coeff(u, d, inner);
        if (d + 1 < u.ends.size() ? c != 0 : (c != 0 && c != 1)) ok = false;
      }
      unit += ok;
    }
    f[kInnerUnitStride] += static_cast<float>(reads.empty() ? 1 : unit / reads.size());
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
    if (fp <= t.l2_bytes) l2_intensity = points_in(depth) * ops_per_point / fp;
  }
  f[kFootprintCurve] += static_cast<float>(curve / n);
  f[kFitL1] += static_cast<float>(fit1 / n);
  f[kFitL2] += static_cast<float>(fit2 / n);
  f[kFitL3] += static_cast<float>(fit3 / n);
  f[kFootprintTotal] += log2p(footprint(0));
  f[kIntensityReg] += static_cast<float>(2 * reg_points * reduce_inner / std::max(4.0, reg_fp));
  f[kIntensityL2] += static_cast<float>(l2_intensity);
  double packed_bytes = 0;
  for (auto& p : sn.packs)
    packed_bytes += ir::dtype_bytes(w.buffers[p.buffer].dtype) * static_cast<double>(p.elements());
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
  f[kOutputStores] += log2p(output_stores());
  for (int k = 0; k < kIntensityCurveSteps; ++k) {
    size_t depth = sn.outer.size() * static_cast<size_t>(k) / (kIntensityCurveSteps - 1);
    f[kIntensityCurve + k] += static_cast<float>(points_in(depth) * ops_per_point / std::max(4.0, footprint(depth)));
  }
  add_buffer_features(f);
  add_vector_access(f);
  const Cycles cycles =
      add_roofline(f, flops, any_parallel ? par : 1, packed_bytes, threads * work, (body.issue + body.split) * per_acc);
  f[kLineUseReg] += static_cast<float>(line_use(depths - 1));
  f[kLineUseL1] += static_cast<float>(line_use(depth_fitting(static_cast<double>(t.l1_bytes))));
  f[kLineUseL2] += static_cast<float>(line_use(depth_fitting(static_cast<double>(t.l2_bytes))));
  return cycles;
}

std::array<StageFeatures::Level, 3> StageFeatures::levels() const {
  return {{{static_cast<double>(t.l1_bytes), 64, false},
           {static_cast<double>(t.l2_bytes), 32, false},
           {static_cast<double>(t.l3_bytes), 8, true}}};
}

double StageFeatures::memory_cycles(const Small<double, 16>& fps, double active) const {
  const double total_points = points_in(0);
  double memory = 0;
  for (auto [capacity, bandwidth, shared] : levels()) {
    double traffic = total_points * 4;  // nothing fits: every point streams in
    for (size_t depth = 0; depth < depths; ++depth) {
      double fp = fps[depth];
      if (fp <= capacity) {
        traffic = total_points / points_in(depth) * fp;
        break;
      }
    }
    memory += traffic / (bandwidth * (shared ? 1 : active));
  }
  return memory;
}

StageFeatures::Cycles StageFeatures::add_roofline(std::vector<float>& f, double flops, double par,
                                                  double packed_bytes, double busy, double step_loads) const {
  const double threads = std::max(1, t.threads), lanes_max = std::max(1, t.vector_lanes);
  const double ideal = std::max(1.0, flops / (2 * lanes_max * threads));
  const double active = std::clamp(par, 1.0, threads);  // threads with work
  const double lanes = sn.vector_axis.empty() ? 1 : sn.lanes;
  const double acc = sn.accumulators();
  double spill = 1 + 2 * std::max(0.0, acc / std::max(1, t.vector_registers) - 1);
  double fma = flops / (2 * lanes) * spill;
  double loads = f[kLoadsPerUpdate] * flops / (2 * lanes) / 2;  // two loads issue per cycle
  double compute = std::max(fma, loads) / active;
  const double memory = memory_cycles(footprints, active);
  double pack = packed_bytes * 2 / 16;
  f[kRoofCompute] += static_cast<float>(std::log2(std::max(1.0, compute) / ideal));
  f[kRoofMemory] += static_cast<float>(std::log2(std::max(1.0, memory) / ideal));
  f[kRoofTotal] += static_cast<float>(std::log2((std::max(compute, memory) + pack + 1) / ideal));
  // Version 5: issue slots (gathers and scatters lane by lane) and whole cache lines, against
  // a bound that also moves the stage's data once, so that memory-bound stages (copies,
  // transposes, pooling: no flops) compare across sizes too.
  const double updates = points_in(0) / lanes;
  const double gather_loads = f[kLoadIssue] * updates / 2;
  const double issue = std::max({fma, gather_loads, store_issue()}) / active;
  const double lines = memory_cycles(line_footprints, active);
  const double bound = std::max(ideal, data_cycles());
  f[kRoofLines] += static_cast<float>(std::log2(std::max(1.0, lines) / bound));
  f[kRoofIssue] += static_cast<float>(std::log2(std::max(1.0, issue) / bound));
  f[kRoofBound] += static_cast<float>(std::log2((std::max(issue, lines) + pack + 1) / bound));
  // Version 6: the busiest thread's cycles, where the loop's trips alone count a partial
  // last tile as a whole one.
  const double spread = active / std::max(1.0, busy);
  const double work = std::max(issue, lines) * spread + pack + 1;
  f[kRoofWork] += static_cast<float>(std::log2(work / bound));
  // Cores of both SIMD widths issue as many vector loads a cycle as FMAs (two each).
  const double steps = std::max({fma, step_loads * updates, store_issue()}) / active;
  const double step_cycles = std::max(steps, lines) * spread + pack + 1;
  f[kRoofSteps] += static_cast<float>(std::log2(step_cycles / bound));
  return {work, step_cycles, bound};
}

double StageFeatures::data_cycles() const {
  const double threads = std::max(1, t.threads), bytes = footprints[0];
  const auto lv = levels();
  std::size_t into = 0;  // the level the data moves into from the one that holds it
  while (into + 1 < lv.size() && bytes > lv[into + 1].capacity) ++into;
  return bytes / (lv[into].bandwidth * (lv[into].shared ? 1 : threads));
}

void StageFeatures::add_vector_access(std::vector<float>& f) const {
  if (sn.vector_axis.empty()) return;
  if (const double stride = output_lane_stride(); stride != 1) f[kScatterStores] += static_cast<float>(log2p(stride));
  // ir::strided_reads and ir::strided_row_reads of the body by their rules (ir/read_strides.hpp),
  // from its uses (the first body_reads of `reads`) instead of scanning its expressions by
  // name: this runs for every candidate the search ranks. Per buffer read: whether a read of it
  // is strided along the SIMD axis, and whether every read of it keeps to rows.
  struct Read {
    int buffer;
    bool strided, rows;
  };
  Small<Read> by_buffer;
  const int v = simd_axis;
  for (std::size_t i = 0; i < body_reads; ++i) {
    const Use& u = reads[i];
    auto it = std::find_if(by_buffer.begin(), by_buffer.end(), [&](const Read& r) { return r.buffer == u.buffer; });
    if (it == by_buffer.end()) {
      by_buffer.push_back({u.buffer, false, true});
      it = by_buffer.end() - 1;
    }
    for (size_t d = 0; d < u.ends.size(); ++d) {
      const std::int64_t c = coeff(u, d, v);
      const bool last = d + 1 == u.ends.size();
      it->strided = it->strided || ir::strided_dimension(c, last);
      it->rows = it->rows && ir::row_dimension(c, last);
    }
  }
  float panels = 0, rows = 0;  // panel_reads: the strided buffers less the row ones
  for (const Read& r : by_buffer)
    if (r.strided) (r.rows ? rows : panels) += 1;
  f[kPanelReads] += panels;
  f[kRowReads] += rows;
}

void StageFeatures::add_buffer_features(std::vector<float>& f) const {
  struct Row {
    const std::string* name;
    double unique;
    std::array<float, kBufferFeatures> v;
    bool output;
    std::array<float, kBufferLineFeatures> lines;
  };
  Small<Row> rows;  // the use touching the most bytes per buffer
  const int axis = innermost_axis();
  const size_t l1 = depth_fitting(static_cast<double>(t.l1_bytes));
  int tile_axis = -1;  // of the innermost tile loop that iterates
  for (size_t i = sn.outer.size(); tile_axis < 0 && i-- > 0;)
    if (sn.outer[i].trips() > 1) tile_axis = outer_axis[i];
  for (const Use* use : uses) {
    const Use& u = *use;
    const Box micro = box_of(u, sn.outer.size());  // one micro-kernel call's
    const double unique = box_of(u, 0).bytes;
    const Box in_l1 = box_of(u, l1);
    Row r{u.name, unique, {}, u.buffer == sn.store, {}};
    r.lines[kBufLineUseL1] = static_cast<float>(in_l1.bytes / std::max(1.0, in_l1.line_bytes));
    r.lines[kBufOuterStride] = static_cast<float>(log2p(std::abs(tile_axis >= 0 ? elements_between(u, tile_axis) : 0)));
    r.v[kBufBytes] = static_cast<float>(log2p(micro.bytes));
    r.v[kBufLines] = static_cast<float>(log2p(micro.lines));
    r.v[kBufUnique] = static_cast<float>(log2p(unique));
    // Reuse: the innermost loop whose axis the use does not depend on.
    for (auto [loops, axis_of] : {std::pair{&sn.reduce_inner, &reduce_axis}, std::pair{&sn.reg, &reg_axis}})
      for (size_t i = 0; i < loops->size(); ++i)
        if (r.v[kBufReuseType] == 0 && (*loops)[i].block > 1 && !u.depends((*axis_of)[i])) {
          r.v[kBufReuseType] = 2;
          r.v[kBufReuseCount] = static_cast<float>(log2p(static_cast<double>((*loops)[i].block)));
        }
    for (size_t i = sn.outer.size(); r.v[kBufReuseType] == 0 && i-- > 0;)
      if (sn.outer[i].trips() > 1 && !u.depends(outer_axis[i])) {
        r.v[kBufReuseType] = 1;
        r.v[kBufReuseDist] = static_cast<float>(log2p(footprint(i + 1)));
        r.v[kBufReuseCount] = static_cast<float>(log2p(static_cast<double>(sn.outer[i].trips())));
      }
    r.v[kBufStride] = static_cast<float>(log2p(std::abs(axis >= 0 ? elements_between(u, axis) : 0)));
    for (auto& p : sn.packs)
      if (p.buffer == u.buffer) r.v[kBufPacked] = 1;
    auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& o) { return *o.name == *u.name; });
    if (it == rows.end())
      rows.push_back(r);
    else if (r.v[kBufBytes] > it->v[kBufBytes])
      *it = r;
  }
  // The largest first, ties by name (each buffer has one row, so the order is total).
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.unique != b.unique ? a.unique > b.unique : *a.name < *b.name; });
  for (size_t b = 0; b < rows.size() && b < static_cast<size_t>(kTopBuffers); ++b) {
    for (int k = 0; k < kBufferFeatures; ++k) f[kBuffers + b * kBufferFeatures + k] += rows[b].v[k];
    f[kBufferIsOutput + b] += rows[b].output ? 1 : 0;
    for (int k = 0; k < kBufferLineFeatures; ++k) f[kBufferLines + b * kBufferLineFeatures + k] += rows[b].lines[k];
  }
}

}  // namespace detail

Features extract_features(const ir::Workload& w, const ir::LoopNest& nest, const ir::TargetTraits& t) {
  Features out;
  out.stages.reserve(std::max<size_t>(1, nest.stages.size()));
  StageFeatures::Cycles program;
  detail::Small<double> work;  // each nest's
  for (auto& sn : nest.stages) {
    out.stages.emplace_back(kCount, 0.0f);
    const StageFeatures::Cycles cycles = StageFeatures(w, nest, sn, t).add_to(out.stages.back());
    work.push_back(cycles.work);
    program += cycles;
  }
  for (size_t r = 0; r < work.size(); ++r)  // each nest's work is at least a cycle
    out.stages[r][kStageShare] = static_cast<float>(work[r] / program.work);
  if (out.stages.empty()) out.stages.emplace_back(kCount, 0.0f);
  FeatureRow& f = out.stages.front();
  // log2(1 + ratio): never below 0, which the other rows hold here, so that max pooling keeps it.
  if (program.bound > 0) {
    f[kProgramRoofWork] = static_cast<float>(std::log2(1 + program.work / program.bound));
    f[kProgramRoofSteps] = static_cast<float>(std::log2(1 + program.steps / program.bound));
  }
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

void Features::pool_into(float* out, Pooling how, std::size_t width) const {
  width = std::min<std::size_t>(width, kCount);
  if (stages.empty()) std::fill(out, out + width, 0.0f);
  if (how == Pooling::Dominant && !stages.empty()) {
    std::size_t top = 0;
    for (std::size_t r = 0; r < stages.size(); ++r) {
      check_feature_row(stages[r]);
      if (stages[r][kStageShare] > stages[top][kStageShare]) top = r;
    }
    nest_row_into(top, out, width);
    return;
  }
  if (per_nest(how)) throw_error(ErrorKind::Internal, "a program pooled into one row per nest");
  for (size_t r = 0; r < stages.size(); ++r) {
    const FeatureRow& row = stages[r];
    check_feature_row(row);
    if (r == 0)
      std::copy_n(row.begin(), width, out);
    else if (how == Pooling::Sum)
      for (size_t i = 0; i < width; ++i) out[i] += row[i];
    else
      for (size_t i = 0; i < width; ++i) out[i] = std::max(out[i], row[i]);
  }
}

void Features::nest_row_into(std::size_t nest, float* out, std::size_t width) const {
  width = std::min<std::size_t>(width, kCount);
  check_feature_row(stages.at(nest));
  std::copy_n(stages[nest].begin(), width, out);
  for (Feature i : kProgramFeatures)
    if (static_cast<std::size_t>(i) < width) out[i] = stages.front()[i];
}

FeatureRow Features::pooled(Pooling how) const {
  FeatureRow row(kCount);
  pool_into(row.data(), how, kCount);
  return row;
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
  for_slices(schedules.size(), 64, work);
  return out;
}

}  // namespace tiletune::costmodel
