// Register tiles cut by the end of an axis (Emitter::edge_tile): the rows left form one more,
// smaller register tile; along the SIMD axis, whole vectors, then one masked vector.
#include "codegen/cpu_emit.hpp"

#include <functional>
#include <string>
#include <vector>

namespace tiletune::codegen::cpu_emit {

void Emitter::edge_tile(int depth, Mode mode) {
  // Register axes other than the SIMD one: each spans its whole block, or at the end of the
  // axis what is left of it. Every register base is a multiple of the block (tile sizes divide
  // the one above), so what is left is the constant extent % block, and the tile cut there is
  // one more register tile of that many points: an attention score's 128 rows in tiles of 12
  // end in a tile of 8 rows, not 8 tiles of one. Row blocks of fused stages (fuse_rows) are
  // multiples of each stage's outer tile of the row axis (check_fuse_rows), so their register
  // bases are multiples of the block too.
  std::vector<const Loop*> axes;
  const Loop* vector_loop = nullptr;
  for (auto& l : sn_->reg) {
    if (mode == Mode::VecSpatial && l.axis == sn_->vector_axis)
      vector_loop = &l;
    else
      axes.push_back(&l);
  }
  auto cut_after = [&](size_t i) {  // whether an axis after the i-th can be cut
    for (size_t j = i + 1; j < axes.size(); ++j)
      if (axes[j]->extent % axes[j]->block != 0) return true;
    return vector_loop && vector_loop->extent % vector_loop->block != 0;
  };
  std::function<void(int, size_t, std::vector<Point>, bool)> cut = [&](int d, size_t i, std::vector<Point> pts,
                                                                       bool any_cut) {
    if (i == axes.size()) {
      edge_points(d, mode, pts, vector_loop, any_cut);
      return;
    }
    const Loop& l = *axes[i];
    const std::string& parent = var(l.axis, l.level - 1);
    auto spread = [&](std::int64_t n) {
      std::vector<Point> out;
      for (auto& p : pts)
        for (std::int64_t r = 0; r < n; ++r) {
          Point q = p;
          q[l.axis] = {parent, r};
          out.push_back(q);
        }
      return out;
    };
    const std::int64_t left = l.extent % l.block;
    if (left == 0) {
      cut(d, i + 1, spread(l.block), any_cut);
    } else if (!any_cut && !cut_after(i)) {
      cut(d, i + 1, spread(left), true);  // the only axis that can be cut, and this is an edge tile
    } else {
      line(d, "if (" + parent + " + " + std::to_string(l.block) + " <= " + std::to_string(l.extent) + ") {");
      cut(d + 1, i + 1, spread(l.block), any_cut);
      line(d, "} else {");
      cut(d + 1, i + 1, spread(left), true);
      line(d, "}");
    }
  };
  Point p;
  for (auto& l : sn_->reduce_inner) p[l.axis] = {var(l.axis, l.level), 0};
  cut(depth, 0, {p}, false);
}

void Emitter::edge_points(int d, Mode mode, const std::vector<Point>& rows, const Loop* vector_loop, bool rows_cut) {
  if (!vector_loop) {
    points(d, rows, mode == Mode::VecReduce ? Mode::VecReduce : Mode::Scalar);
    return;
  }
  const Loop& l = *vector_loop;
  std::string base = var(l.axis, l.level - 1);
  std::string block = std::to_string(l.block), extent = std::to_string(l.extent);
  std::string lanes = std::to_string(sn_->lanes);
  auto at = [&](const std::string& v, std::int64_t step, std::int64_t to) {  // the rows at v + 0, step, ...
    std::vector<Point> out;
    for (auto& p : rows)
      for (std::int64_t r = 0; r < to; r += step) {
        Point q = p;
        q[l.axis] = {v, r};
        out.push_back(q);
      }
    return out;
  };
  const std::vector<Point> whole = at(base, sn_->lanes, l.block);
  if (l.extent % l.block == 0) {
    if (rows_cut) points(d, whole, Mode::VecSpatial);  // else it is the full tile: never here
    return;
  }
  line(d, "if (" + base + " + " + block + " <= " + extent + ") {");
  if (rows_cut) points(d + 1, whole, Mode::VecSpatial);
  line(d, "} else {");
  const std::string& v = var(l.axis, l.level);
  const std::vector<Point> at_v = at(v, 1, 1);  // the rows at the lanes' loop variable
  if (strided_vector_) {
    // Only whole panels are contiguous: the points past the last one go one at a time.
    line(d + 1, "for (std::int64_t " + v + " = " + base + "; " + v + " < " + extent + "; ++" + v + ") {");
    points(d + 2, at_v, Mode::Scalar);
    line(d + 1, "}");
    line(d, "}");
    return;
  }
  std::string end = "tt_imin(" + base + " + " + block + ", " + extent + ")";
  line(d + 1, "std::int64_t " + v + " = " + base + ";");
  line(d + 1, "for (; " + v + " + " + lanes + " <= " + end + "; " + v + " += " + lanes + ") {");
  points(d + 2, at_v, Mode::VecSpatial);
  line(d + 1, "}");
  // The last lanes: one vector with its end masked off.
  line(d + 1, "if (" + v + " < " + end + ") {");
  std::string left = fresh("lanes_left");
  line(d + 2, "const std::int64_t " + left + " = " + end + " - " + v + ";");
  partial_ = left;
  points(d + 2, at_v, Mode::VecSpatial);
  partial_.clear();
  names_.release(left);
  line(d + 1, "}");
  line(d, "}");
}

}  // namespace tiletune::codegen::cpu_emit
