// SPDX-License-Identifier: BSD-3-Clause
#include "wire/psn.h"

#include <gtest/gtest.h>

namespace uroce::wire {
namespace {

TEST(Psn, AddWraps) {
  EXPECT_EQ(psn_add(0xFFFFFE, 1), 0xFFFFFFu);
  EXPECT_EQ(psn_add(0xFFFFFF, 1), 0u);
  EXPECT_EQ(psn_add(0xFFFFF0, 0x20), 0x10u);
  EXPECT_EQ(psn_sub(0x10, 0x20), 0xFFFFF0u);
}

TEST(Psn, DiffAcrossWrap) {
  EXPECT_EQ(psn_diff(0x000005, 0xFFFFFB), 10);
  EXPECT_EQ(psn_diff(0xFFFFFB, 0x000005), -10);
  EXPECT_EQ(psn_diff(100, 100), 0);
  // The window is half the space: 2^23 - 1 ahead is after, 2^23 ahead is before.
  EXPECT_GT(psn_diff(0x7FFFFF, 0), 0);
  EXPECT_LT(psn_diff(0x800000, 0), 0);
}

TEST(Psn, CompareAllOffsetsNearWrap) {
  for (uint32_t base : {0u, 1u, 0x7FFFFFu, 0x800000u, 0xFFFFF0u, 0xFFFFFFu}) {
    for (int d = -300; d <= 300; ++d) {
      const uint32_t other = psn_add(base, static_cast<uint32_t>(d) & kPsnMask);
      EXPECT_EQ(psn_diff(other, base), d) << base << " " << d;
      EXPECT_EQ(psn_lt(base, other), d > 0);
      EXPECT_EQ(psn_le(base, other), d >= 0);
      EXPECT_EQ(psn_gt(base, other), d < 0);
      EXPECT_EQ(psn_ge(base, other), d <= 0);
    }
  }
}

}  // namespace
}  // namespace uroce::wire
