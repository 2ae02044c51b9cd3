// The access analysis of a loop nest's features (stage_features.hpp): each read's terms, its
// bytes and cache lines at every tile depth, the micro-kernel's loads and stores.
#include <algorithm>
#include <array>
#include <cmath>

#include "costmodel/stage_features.hpp"
#include "ir/schedule.hpp"
#include "support/error.hpp"

namespace tiletune::costmodel::detail {

using ir::collect_accesses;
using ir::count_ops;

StageFeatures::StageFeatures(const ir::Workload& w_, const ir::LoopNest& n, const StageNest& s,
                             const ir::TargetTraits& t_)
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
  output = Use{
      &w.buffers[sn.store].name, sn.store, static_cast<double>(ir::dtype_bytes(w.buffers[sn.store].dtype)), 0, {}, {}};
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
  if (!sn.vector_axis.empty()) simd_axis = axis_index(sn.vector_axis);
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
      const Box box = box_of(*u, d);
      per_buffer[u->buffer] = std::max(per_buffer[u->buffer], box.bytes);
      per_buffer_lines[u->buffer] = std::max(per_buffer_lines[u->buffer], box.line_bytes);
    }
    double total = 0, total_lines = 0;
    for (double bytes : per_buffer) total += bytes;
    for (double bytes : per_buffer_lines) total_lines += bytes;
    footprints.push_back(total);
    line_footprints.push_back(total_lines);
  }
  ops_per_point = count_ops(sn.body) + 1;
}

int StageFeatures::axis_index(const std::string& name) const {
  for (size_t a = 0; a < axes; ++a)
    if (st.axes[a].name == name) return static_cast<int>(a);
  throw_error(ErrorKind::Internal, "features: '" + name + "' is not an axis of stage " + st.name);
}

Use StageFeatures::use_of(const std::string& name, const std::vector<ir::IndexExpr>& indices) const {
  Use u{&name, w.buffer_index(name), 0, 0, {}, {}};
  u.element = ir::dtype_bytes(w.buffers[u.buffer].dtype);
  u.ends.reserve(indices.size());
  u.terms.reserve(indices.size() + 2);
  for (auto& ix : indices) {
    for (auto& term : ix.terms) u.terms.push_back({axis_index(term.var), term.coeff});
    u.ends.push_back(static_cast<std::uint32_t>(u.terms.size()));
  }
  const auto& shape = w.buffers[u.buffer].shape;
  std::int64_t row = 1;
  for (size_t d = indices.size(); d-- > 0;) {
    // Modulo a cache line's elements (a divisor of kResidues): all that alignment asks of it.
    u.offset = (u.offset + indices[d].constant % kResidues * row) % kResidues;
    row = row * (shape[d] % kResidues) % kResidues;
  }
  return u;
}

StageFeatures::Box StageFeatures::box_of(const Use& u, size_t depth) const {
  const auto& shape = w.buffers[u.buffer].shape;
  const double line = static_cast<double>(ir::kCacheLineBytes);
  Box box{u.element, 1, 0};
  double run = u.element, runs = 1;  // contiguous runs of memory: their bytes, their number
  bool contiguous = true;
  for (size_t d = u.ends.size(); d-- > 0;) {
    const std::int64_t range = range_in(u, d, depth);
    const double r = static_cast<double>(std::min(range, shape[d]));
    box.bytes *= r;
    box.lines *= d + 1 < u.ends.size() ? r : std::ceil(r * u.element / line);
    if (contiguous) {
      run *= r;
      contiguous = range >= shape[d];
    } else {
      runs *= r;
    }
  }
  box.line_bytes = runs * std::ceil(run / line) * line;
  return box;
}

size_t StageFeatures::depth_fitting(double capacity) const {
  for (size_t d = 0; d < depths; ++d)
    if (line_footprints[d] <= capacity) return d;
  return depths - 1;
}

StageFeatures::Loads StageFeatures::loads_of(LoadsOf which) const {
  const std::size_t begin = which == LoadsOf::Epilogue ? body_reads : 0;
  const std::size_t end = which == LoadsOf::Body ? body_reads : reads.size();
  const bool skip_own = which != LoadsOf::All;
  Small<std::pair<int, double>> seen_loads;  // (buffer, copies)
  Loads out;
  for (std::size_t i = begin; i < end; ++i) {
    const Use& u = reads[i];
    if (skip_own && u.buffer == st.output) continue;  // the stage's value, in registers
    double copies = 1;
    for (size_t r = 0; r < sn.reg.size(); ++r) {
      const Loop& l = sn.reg[r];
      if (!u.depends(reg_axis[r])) continue;
      copies *= (reg_axis[r] == simd_axis && !sn.vector_reduce) ? std::max<double>(1, l.block / sn.lanes) : l.block;
    }
    bool seen = false;
    for (auto& [buffer, c] : seen_loads) seen = seen || (buffer == u.buffer && c == copies);
    if (seen) continue;
    seen_loads.push_back({u.buffer, copies});
    out.count += copies;
    out.issue += copies * (gathered(u) ? sn.lanes : 1);
    if (which == LoadsOf::Body) out.split += copies * straddle_share(u);
  }
  return out;
}

double StageFeatures::straddle_share(const Use& u) const {
  if (simd_axis < 0 || sn.lanes <= 1 || !u.depends(simd_axis) || gathered(u)) return 0;
  for (auto& p : sn.packs)
    if (p.buffer == u.buffer) return 0;
  // Where a vector starts within its cache line: the distribution of its address modulo the
  // line's elements, each axis running over its extent (the SIMD axis over its vectors' starts),
  // from the buffer's start, which is line-aligned.
  const int line = std::max<int>(1, static_cast<int>(ir::kCacheLineBytes / u.element));
  const int lanes = sn.lanes;
  auto mod = [line](std::int64_t x) { return static_cast<int>(((x % line) + line) % line); };
  std::array<double, kResidues> at{}, term{}, sum{};
  at[mod(u.offset)] = 1;
  const auto& shape = w.buffers[u.buffer].shape;
  std::int64_t row = 1;  // modulo the line's elements
  for (size_t d = u.ends.size(); d-- > 0;) {
    for (std::uint32_t i = d == 0 ? 0 : u.ends[d - 1]; i < u.ends[d]; ++i) {
      const int step = mod(mod(u.terms[i].coeff) * row);
      const std::int64_t extent = st.axes[u.terms[i].axis].extent;
      if (step == 0 || extent == 1) continue;
      term.fill(0);
      if (u.terms[i].axis == simd_axis) {
        for (int k = 0; k < line; ++k) term[mod(static_cast<std::int64_t>(k) * lanes * step)] += 1.0 / line;
      } else {
        for (int r = 0; r < line; ++r)  // the values of the axis that are r modulo the line
          term[mod(static_cast<std::int64_t>(r) * step)] +=
              static_cast<double>(extent / line + (r < extent % line ? 1 : 0)) / static_cast<double>(extent);
      }
      sum.fill(0);
      for (int x = 0; x < line; ++x)
        if (at[x] > 0)
          for (int y = 0; y < line; ++y) sum[(x + y) % line] += at[x] * term[y];
      at = sum;
    }
    row = mod(row * mod(shape[d]));
  }
  // A vector straddles one more line than its bytes need when it starts that far into one.
  const int spans = (lanes + line - 1) / line * line;
  double share = 0;
  for (int x = 0; x < line; ++x)
    if (x + lanes > spans) share += at[x];
  return share;
}

bool StageFeatures::gathered(const Use& u) const {
  if (sn.vector_axis.empty() || sn.vector_reduce) return false;
  const int v = simd_axis;
  for (size_t d = 0; d + 1 < u.ends.size(); ++d)
    if (coeff(u, d, v) != 0) return false;
  return !u.ends.empty() && std::abs(coeff(u, u.ends.size() - 1, v)) >= 2;
}

double StageFeatures::output_stores() const {
  double stores = 1;
  for (size_t a = 0; a < axes; ++a)
    if (!st.axes[a].reduce) stores *= static_cast<double>(st.axes[a].extent);
  for (auto& l : sn.outer)
    if (l.reduce) stores *= static_cast<double>(l.trips());
  return stores;
}

double StageFeatures::output_lane_stride() const {
  if (sn.vector_axis.empty() || sn.vector_reduce) return 0;
  return std::abs(elements_between(output, simd_axis));
}

double StageFeatures::store_issue() const {
  return output_lane_stride() == 1 ? output_stores() / sn.lanes : output_stores();
}

double StageFeatures::elements_between(const Use& u, int axis) const {
  const auto& shape = w.buffers[u.buffer].shape;
  double stride = 0, row = 1;
  for (size_t d = u.ends.size(); d-- > 0;) {
    stride += static_cast<double>(coeff(u, d, axis)) * row;
    row *= static_cast<double>(shape[d]);
  }
  return stride;
}

int StageFeatures::innermost_axis() const {
  if (simd_axis >= 0) return simd_axis;
  if (!sn.reduce_inner.empty()) return reduce_axis.back();
  if (!sn.reg.empty()) return reg_axis.back();
  return sn.outer.empty() ? -1 : outer_axis.back();
}

}  // namespace tiletune::costmodel::detail
