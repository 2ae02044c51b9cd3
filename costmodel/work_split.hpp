// costmodel/work_split.hpp: how a parallel region's work falls to the threads (internal to
// costmodel/: the features read it).
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstdint>

namespace tiletune::costmodel {

//! One parallel loop of a collapsed region: its trips of `step` points along its axis, the last
//! holding only what is left of its `points`.
struct ParallelTiles {
  std::int64_t trips, step, points;
  std::int64_t last() const { return points - step * (trips - 1); }
};

//! A stage's parallel loops, outermost first (a few; held inline: this runs for every candidate ranked).
using ParallelLoops = boost::container::small_vector<ParallelTiles, 4>;

//! The threads' mean share of the points over the largest share (1: an even split, 1/threads:
//! serial, `loops` empty): the loops' iterations, collapsed (the last loop fastest), dealt out in
//! contiguous runs as OpenMP's static schedule does, each weighing its tiles' points.
double even_share(const ParallelLoops& loops, int threads);

}  // namespace tiletune::costmodel
