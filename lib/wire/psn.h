// SPDX-License-Identifier: BSD-3-Clause
// 24-bit packet sequence numbers (IBTA 9.7.1): all arithmetic is modulo 2^24, and ordering is
// defined over a window of half the space, so comparisons stay correct across the wrap.
#pragma once

#include <cstdint>

namespace uroce::wire {

inline constexpr uint32_t kPsnMask = 0xFFFFFF;
inline constexpr uint32_t kPsnSpace = 1u << 24;

constexpr uint32_t psn_add(uint32_t psn, uint32_t n) noexcept {
  return (psn + n) & kPsnMask;
}
constexpr uint32_t psn_sub(uint32_t psn, uint32_t n) noexcept {
  return (psn - n) & kPsnMask;
}

// Signed distance a - b in [-2^23, 2^23): positive when a is after b.
constexpr int32_t psn_diff(uint32_t a, uint32_t b) noexcept {
  // Shift the 24-bit difference into the top of a 32-bit word, then back with sign extension.
  return static_cast<int32_t>(static_cast<uint32_t>(a - b) << 8) >> 8;
}

constexpr bool psn_lt(uint32_t a, uint32_t b) noexcept {
  return psn_diff(a, b) < 0;
}
constexpr bool psn_le(uint32_t a, uint32_t b) noexcept {
  return psn_diff(a, b) <= 0;
}
constexpr bool psn_gt(uint32_t a, uint32_t b) noexcept {
  return psn_diff(a, b) > 0;
}
constexpr bool psn_ge(uint32_t a, uint32_t b) noexcept {
  return psn_diff(a, b) >= 0;
}

static_assert(psn_diff(0, kPsnMask) == 1);
static_assert(psn_diff(kPsnMask, 0) == -1);
static_assert(psn_lt(0xFFFFF0, 0x000010));
static_assert(psn_add(kPsnMask, 2) == 1);
static_assert(psn_sub(0, 1) == kPsnMask);

}  // namespace uroce::wire
