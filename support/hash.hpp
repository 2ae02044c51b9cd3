// support/hash.hpp
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace tiletune {

//! 64-bit FNV-1a: stable across platforms and releases, which is all keys need (not security).
std::uint64_t fnv1a64(std::string_view text);

//! 16 lowercase hex digits of fnv1a64(text): the form used for workload, target and config keys.
std::string hash_hex(std::string_view text);

}  // namespace tiletune
