#include "costmodel/features.hpp"

#include <algorithm>
#include <array>
#include <boost/container/small_vector.hpp>
#include <cmath>

#include "costmodel/feature_layout.hpp"
#include "costmodel/work_split.hpp"
#include "ir/read_strides.hpp"
#include "ir/schedule.hpp"
#include "support/error.hpp"
#include "support/parallel.hpp"

namespace tiletune::costmodel {

using namespace layout;

namespace {

using ir::Expr;
using ir::Loop;
using ir::StageNest;

double log2p(double x) { return std::log2(1.0 + std::max(0.0, x)); }

//! The features' working lists, held inline up to the size of a typical stage: they are built
//! for every candidate the search ranks, where a heap allocation each cost about a quarter of
//! the time (callgrind). Larger stages spill to the heap.
template <class T, std::size_t N = 8>
using Small = boost::container::small_vector<T, N>;

using ir::collect_accesses;
using ir::count_ops;

//! One read or write of a buffer by a stage: per dimension, the stage axes (by index) that
//! move it and their coefficients. Built once per stage so that the features, asked for at
//! every tile depth, compare no names.
struct Use {
  struct Term {
    int axis;
    std::int64_t coeff;
  };
  const std::string* name = nullptr;
  int buffer = -1;
  double element = 0;               //!< bytes
  Small<Term> terms;              //!< all dimensions', in order
  Small<std::uint32_t> ends;      //!< dimension d's terms end at terms[ends[d]]
  bool depends(int axis) const {
    for (auto& term : terms)
      if (term.axis == axis) return true;
    return false;
  }
};

struct StageFeatures {
  const ir::Workload& w;
  const ir::LoopNest& nest;
  const StageNest& sn;
  const ir::TargetTraits& t;
  const ir::Stage& st;
  const size_t axes;    //!< of the stage
  const size_t depths;  //!< tile depths 0 (the whole stage) .. sn.outer.size() (the micro-kernel)
  std::vector<const Expr*> accesses;
  Small<Use, 6> reads;  //!< one per access, in the order of `accesses`
  std::size_t body_reads = 0;  //!< the first of `reads` are the body's, the fused epilogue's follow
  Use output;              //!< the buffer the stage stores
  //! The buffers the stage reads (not its own accumulator) and the one it stores.
  Small<const Use*> uses;
  Small<int, 16> outer_axis, reg_axis, reduce_axis;  //!< axis index of each loop of sn.outer, .reg, .reduce_inner
  Small<std::int64_t, 64> span;  //!< span of axis a inside the first d tile loops: span[d * axes + a]
  Small<double, 16> points;      //!< iteration points inside the first d tile loops
  Small<double, 16> footprints;  //!< bytes touched inside the first d tile loops
  Small<double, 16> line_footprints;  //!< bytes of the cache lines touched inside the first d tile loops
  int ops_per_point;               //!< operations of the body per point, the combine included

  StageFeatures(const ir::Workload& w_, const ir::LoopNest& n, const StageNest& s, const ir::TargetTraits& t_)
      : w(w_), nest(n), sn(s), t(t_), st(w.stages[sn.stage]), axes(st.axes.size()), depths(sn.outer.size() + 1) {
    // Sized up front: this runs for every candidate the search ranks.
    accesses.reserve(8);
    collect_accesses(sn.body, accesses);
    body_reads = accesses.size();
    if (sn.epilogue >= 0) collect_accesses(sn.epilogue_body, accesses);
    reads.reserve(accesses.size());
    uses.reserve(accesses.size() + 1);
    for (const Expr* a : accesses) reads.push_back(use_of(a->name, a->indices));
    for (size_t i = 0; i < reads.size(); ++i)
      if (accesses[i]->name != st.name) uses.push_back(&reads[i]);
    // The output is indexed by the spatial axes in order, each plainly.
    output = Use{&w.buffers[sn.store].name, sn.store, static_cast<double>(ir::dtype_bytes(w.buffers[sn.store].dtype)), {}, {}};
    for (size_t a = 0; a < axes; ++a)
      if (!st.axes[a].reduce) {
        output.terms.push_back({static_cast<int>(a), 1});
        output.ends.push_back(static_cast<std::uint32_t>(output.terms.size()));
      }
    uses.push_back(&output);
    outer_axis.reserve(sn.outer.size());
    reg_axis.reserve(sn.reg.size());
    reduce_axis.reserve(sn.reduce_inner.size());
    points.reserve(depths);
    footprints.reserve(depths);
    line_footprints.reserve(depths);
    for (auto& l : sn.outer) outer_axis.push_back(axis_index(l.axis));
    for (auto& l : sn.reg) reg_axis.push_back(axis_index(l.axis));
    for (auto& l : sn.reduce_inner) reduce_axis.push_back(axis_index(l.axis));
    span.resize(depths * axes);
    for (size_t a = 0; a < axes; ++a) span[a] = st.axes[a].extent;
    for (size_t d = 1; d < depths; ++d) {
      std::copy_n(span.begin() + (d - 1) * axes, axes, span.begin() + d * axes);
      span[d * axes + outer_axis[d - 1]] = sn.outer[d - 1].step;
    }
    Small<double> per_buffer(w.buffers.size()), per_buffer_lines(w.buffers.size());
    for (size_t d = 0; d < depths; ++d) {
      double pts = 1;
      for (size_t a = 0; a < axes; ++a) pts *= static_cast<double>(span[d * axes + a]);
      points.push_back(pts);
      // Every buffer once, its largest access.
      std::fill(per_buffer.begin(), per_buffer.end(), 0.0);
      std::fill(per_buffer_lines.begin(), per_buffer_lines.end(), 0.0);
      for (const Use* u : uses) {
        per_buffer[u->buffer] = std::max(per_buffer[u->buffer], extent_of(*u, d).first);
        per_buffer_lines[u->buffer] = std::max(per_buffer_lines[u->buffer], line_bytes_of(*u, d));
      }
      double total = 0, total_lines = 0;
      for (double bytes : per_buffer) total += bytes;
      for (double bytes : per_buffer_lines) total_lines += bytes;
      footprints.push_back(total);
      line_footprints.push_back(total_lines);
    }
    ops_per_point = count_ops(sn.body) + 1;
  }

  int axis_index(const std::string& name) const {
    for (size_t a = 0; a < axes; ++a)
      if (st.axes[a].name == name) return static_cast<int>(a);
    throw_error(ErrorKind::Internal, "features: '" + name + "' is not an axis of stage " + st.name);
  }

  Use use_of(const std::string& name, const std::vector<ir::IndexExpr>& indices) const {
    Use u{&name, w.buffer_index(name), 0, {}, {}};
    u.element = ir::dtype_bytes(w.buffers[u.buffer].dtype);
    u.ends.reserve(indices.size());
    u.terms.reserve(indices.size() + 2);
    for (auto& ix : indices) {
      for (auto& term : ix.terms) u.terms.push_back({axis_index(term.var), term.coeff});
      u.ends.push_back(static_cast<std::uint32_t>(u.terms.size()));
    }
    return u;
  }

  //! Coefficient of `axis` in dimension d of a use.
  static std::int64_t coeff(const Use& u, size_t d, int axis) {
    for (std::uint32_t i = d == 0 ? 0 : u.ends[d - 1]; i < u.ends[d]; ++i)
      if (u.terms[i].axis == axis) return u.terms[i].coeff;
    return 0;
  }

  //! Bytes and cache lines of one use inside the first `depth` tile loops.
  //! Points of dimension d of a use that the first `depth` tile loops' box spans, before the
  //! clamp to the buffer's shape.
  std::int64_t range_in(const Use& u, size_t d, size_t depth) const {
    const std::int64_t* sp = &span[depth * axes];
    std::int64_t range = 1;
    for (std::uint32_t i = d == 0 ? 0 : u.ends[d - 1]; i < u.ends[d]; ++i)
      range += std::abs(u.terms[i].coeff) * (sp[u.terms[i].axis] - 1);
    return range;
  }

  std::pair<double, double> extent_of(const Use& u, size_t depth) const {
    const auto& shape = w.buffers[u.buffer].shape;
    double bytes = u.element, lines = 1;
    for (size_t d = 0; d < u.ends.size(); ++d) {
      double r = static_cast<double>(std::min(range_in(u, d, depth), shape[d]));
      bytes *= r;
      lines *= d + 1 < u.ends.size() ? r : std::ceil(r * u.element / ir::kCacheLineBytes);
    }
    return {bytes, lines};
  }

  //! Bytes of the cache lines one use touches inside the first `depth` tile loops: its box as
  //! runs of contiguous memory (the innermost dimension, joined by the next ones out while the
  //! box covers them whole), each run rounded up to whole lines.
  double line_bytes_of(const Use& u, size_t depth) const {
    const auto& shape = w.buffers[u.buffer].shape;
    double run = u.element, runs = 1;
    bool contiguous = true;
    for (size_t d = u.ends.size(); d-- > 0;) {
      const std::int64_t range = range_in(u, d, depth);
      const double r = static_cast<double>(std::min(range, shape[d]));
      if (contiguous) {
        run *= r;
        contiguous = range >= shape[d];
      } else {
        runs *= r;
      }
    }
    const double line = static_cast<double>(ir::kCacheLineBytes);
    return runs * std::ceil(run / line) * line;
  }

  //! The outermost tile depth whose cache lines fit `capacity` bytes; the micro-kernel's if none.
  size_t depth_fitting(double capacity) const {
    for (size_t d = 0; d < depths; ++d)
      if (line_footprints[d] <= capacity) return d;
    return depths - 1;
  }
  //! Bytes touched over the bytes of their cache lines at a depth.
  double line_use(size_t depth) const { return footprints[depth] / std::max(1.0, line_footprints[depth]); }

  double points_in(size_t depth) const { return points[std::min(depth, depths - 1)]; }
  double footprint(size_t depth) const { return footprints[std::min(depth, depths - 1)]; }

  void add_to(std::vector<float>& f) const {
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
    // Loads per step: distinct (buffer, index) pairs at distinct register offsets.
    Small<std::pair<const std::string*, double>> loads;
    double load_issue = 0;  // the same loads, a gathered vector as its lanes
    for (const Use& u : reads) {
      double copies = 1;
      for (size_t r = 0; r < sn.reg.size(); ++r) {
        const Loop& l = sn.reg[r];
        if (!u.depends(reg_axis[r])) continue;
        copies *= (l.axis == sn.vector_axis && !sn.vector_reduce) ? std::max<double>(1, l.block / sn.lanes) : l.block;
      }
      bool seen = false;
      for (auto& [name, c] : loads) seen = seen || (*name == *u.name && c == copies);
      if (!seen) {
        loads.push_back({u.name, copies});
        load_issue += copies * (gathered(u) ? sn.lanes : 1);
      }
    }
    double load_count = 0;
    for (auto& l : loads) load_count += l.second;
    f[kLoadsPerUpdate] += static_cast<float>(load_count / std::max(1.0, acc));
    f[kLoadIssue] += static_cast<float>(load_issue / std::max(1.0, acc));
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
    f[kParallelBalance] +=
        any_parallel ? static_cast<float>(par / (threads * std::ceil(par / threads))) : 1.0f / threads;
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
    add_roofline(f, flops, any_parallel ? par : 1, packed_bytes, threads * work);
    f[kLineUseReg] += static_cast<float>(line_use(depths - 1));
    f[kLineUseL1] += static_cast<float>(line_use(depth_fitting(static_cast<double>(t.l1_bytes))));
    f[kLineUseL2] += static_cast<float>(line_use(depth_fitting(static_cast<double>(t.l2_bytes))));
  }

  //! The cache levels data moves into, innermost first: each one's capacity, and the bytes per
  //! cycle it receives from the level beyond (per core; memory's, shared by all cores).
  struct Level {
    double capacity;
    double bandwidth;
    bool shared;
  };
  std::array<Level, 3> levels() const {
    return {{{static_cast<double>(t.l1_bytes), 64, false},
             {static_cast<double>(t.l2_bytes), 32, false},
             {static_cast<double>(t.l3_bytes), 8, true}}};
  }

  //! Estimated cycles moving data into L1, L2 and L3: per level, the executions of the largest
  //! block whose footprint (by `fps`, bytes per tile depth) fits it, times those bytes, over
  //! the level's bandwidth in bytes per cycle and core (L2 to L1 64, L3 to L2 32, memory to L3
  //! 8 shared by all cores).
  double memory_cycles(const Small<double, 16>& fps, double active) const {
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

  //! The roofline estimates, relative to the stage's ideal so that they compare across ops.
  //! `par`: the parallel loops' trips; `busy`: threads' worth of work the busiest thread has to
  //! itself (threads × parallel_work, even_share).
  void add_roofline(std::vector<float>& f, double flops, double par, double packed_bytes, double busy) const {
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
    f[kRoofWork] += static_cast<float>(std::log2((std::max(issue, lines) * spread + pack + 1) / bound));
  }

  //! Whether the micro-kernel loads a read's vectors lane by lane: a strided window's row, read
  //! at a stride of 2 or more along a spatial SIMD axis in its last dimension only (strided in
  //! another dimension, it is packed into panels first).
  bool gathered(const Use& u) const {
    if (sn.vector_axis.empty() || sn.vector_reduce) return false;
    const int v = axis_index(sn.vector_axis);
    for (size_t d = 0; d + 1 < u.ends.size(); ++d)
      if (coeff(u, d, v) != 0) return false;
    return !u.ends.empty() && std::abs(coeff(u, u.ends.size() - 1, v)) >= 2;
  }

  //! Stores of output points: each once per reduction block outside the register tile.
  double output_stores() const {
    double stores = 1;
    for (size_t a = 0; a < axes; ++a)
      if (!st.axes[a].reduce) stores *= static_cast<double>(st.axes[a].extent);
    for (auto& l : sn.outer)
      if (l.reduce) stores *= static_cast<double>(l.trips());
    return stores;
  }

  //! Elements between the output's neighbouring lanes along a spatial SIMD axis; 0 if the SIMD
  //! axis is a reduction axis or there is none.
  double output_lane_stride() const {
    if (sn.vector_axis.empty() || sn.vector_reduce) return 0;
    return std::abs(elements_between(output, axis_index(sn.vector_axis)));
  }

  //! Store instructions the stage issues: a vector per `lanes` output stores where the SIMD axis
  //! is the output's contiguous one, else one by one (stored lane by lane, or a vectorized
  //! reduction's result).
  double store_issue() const {
    return output_lane_stride() == 1 ? output_stores() / sn.lanes : output_stores();
  }

  //! Cycles to move the stage's unique bytes once, from the smallest level that holds them all:
  //! the memory-side half of the stage's bound.
  double data_cycles() const {
    const double threads = std::max(1, t.threads), bytes = footprints[0];
    const auto lv = levels();
    std::size_t into = 0;  // the level the data moves into from the one that holds it
    while (into + 1 < lv.size() && bytes > lv[into + 1].capacity) ++into;
    return bytes / (lv[into].bandwidth * (lv[into].shared ? 1 : threads));
  }

  //! Elements of a use's buffer between two neighbouring points of `axis` (its row-major stride).
  double elements_between(const Use& u, int axis) const {
    const auto& shape = w.buffers[u.buffer].shape;
    double stride = 0, row = 1;
    for (size_t d = u.ends.size(); d-- > 0;) {
      stride += static_cast<double>(coeff(u, d, axis)) * row;
      row *= static_cast<double>(shape[d]);
    }
    return stride;
  }

  //! How the SIMD axis meets memory, as the code generators classify it (ir/schedule.hpp).
  void add_vector_access(std::vector<float>& f) const {
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
    const int v = axis_index(sn.vector_axis);
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

  //! The axis of the micro-kernel's innermost loop: the SIMD axis, else the innermost
  //! reduction or register loop; -1 if none.
  int innermost_axis() const {
    if (!sn.vector_axis.empty()) return axis_index(sn.vector_axis);
    if (!sn.reduce_inner.empty()) return reduce_axis.back();
    if (!sn.reg.empty()) return reg_axis.back();
    return sn.outer.empty() ? -1 : outer_axis.back();
  }

  void add_buffer_features(std::vector<float>& f) const {
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
      auto [bytes, lines] = extent_of(u, sn.outer.size());
      double unique = extent_of(u, 0).first;
      Row r{u.name, unique, {}, u.buffer == sn.store, {}};
      r.lines[kBufLineUseL1] = static_cast<float>(extent_of(u, l1).first / std::max(1.0, line_bytes_of(u, l1)));
      r.lines[kBufOuterStride] =
          static_cast<float>(log2p(std::abs(tile_axis >= 0 ? elements_between(u, tile_axis) : 0)));
      r.v[kBufBytes] = static_cast<float>(log2p(bytes));
      r.v[kBufLines] = static_cast<float>(log2p(lines));
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
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      return a.unique != b.unique ? a.unique > b.unique : *a.name < *b.name;
    });
    for (size_t b = 0; b < rows.size() && b < static_cast<size_t>(kTopBuffers); ++b) {
      for (int k = 0; k < kBufferFeatures; ++k) f[kBuffers + b * kBufferFeatures + k] += rows[b].v[k];
      f[kBufferIsOutput + b] += rows[b].output ? 1 : 0;
      for (int k = 0; k < kBufferLineFeatures; ++k) f[kBufferLines + b * kBufferLineFeatures + k] += rows[b].lines[k];
    }
  }
};

}  // namespace

Features extract_features(const ir::Workload& w, const ir::LoopNest& nest, const ir::TargetTraits& t) {
  Features out;
  out.stages.reserve(std::max<size_t>(1, nest.stages.size()));
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

void Features::pool_into(float* out, Pooling how, std::size_t width) const {
  width = std::min<std::size_t>(width, kCount);
  if (stages.empty()) std::fill(out, out + width, 0.0f);
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
