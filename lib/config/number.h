// SPDX-License-Identifier: BSD-3-Clause
// A decimal configuration value in a range: the one parser of lib/config's numeric keys.
// Internal to lib/config.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace uroce::config::detail {

// Parses `v` as a decimal integer in [lo, hi] into *out. On failure returns false and sets
// *why to the message a key's error states ("bad number ..." or "value ... out of range ...").
inline bool parse_decimal(std::string_view v, uint64_t lo, uint64_t hi, uint64_t *out,
                          std::string *why) {
  uint64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x, 10);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size()) {
    *why = "bad number '" + std::string(v) + "' (expected a decimal integer)";
    return false;
  }
  if (x < lo || x > hi) {
    *why = "value " + std::string(v) + " out of range [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "]";
    return false;
  }
  *out = x;
  return true;
}

}  // namespace uroce::config::detail
