// tuner/space_util.hpp: arithmetic the space and its seed recipes share. Internal to tuner/.
#pragma once
#include <cstdint>

namespace tiletune::tuner {

//! `x` rounded up to a multiple of `m`.
inline std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

}  // namespace tiletune::tuner
