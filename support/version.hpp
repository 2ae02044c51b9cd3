// support/version.hpp
#pragma once

namespace tiletune {
//! Recorded with every measurement.
inline constexpr const char* kToolVersion = "tiletune 0.1.0";
}  // namespace tiletune
