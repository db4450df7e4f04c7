// SPDX-License-Identifier: BSD-3-Clause
// port/loopback.h: the destination check and the fixed queue of looped-back frames.
#include "port/loopback.h"

#include <gtest/gtest.h>

#include <vector>

namespace uroce::port {
namespace {

TEST(Loopback, IsToSelf) {
  const uint8_t mac[6] = {0x02, 0, 0, 0, 0, 0x2a};
  uint8_t f[64] = {0x02, 0, 0, 0, 0, 0x2a, 0x02, 0, 0, 0, 0, 0x01};
  EXPECT_TRUE(is_to_self(f, sizeof f, mac));
  EXPECT_TRUE(is_to_self(f, 6, mac));
  EXPECT_FALSE(is_to_self(f, 5, mac));  // too short to hold a destination
  f[5] = 0x2b;
  EXPECT_FALSE(is_to_self(f, sizeof f, mac));
  const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_FALSE(is_to_self(bcast, 6, mac));
  // The source MAC is not the destination.
  uint8_t g[14] = {0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x2a};
  EXPECT_FALSE(is_to_self(g, sizeof g, mac));
}

TEST(Loopback, QueueIsFifoBoundedAndWrapsAround) {
  LoopbackQueue<int, 8> q;
  std::vector<int> v(100);
  int *out[16];
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pop(out, 16), 0u);
  size_t next_in = 0, next_out = 0;
  // Many rounds of uneven pushes and pops: the indices wrap around the 8 slots many times.
  for (int round = 0; round < 40; ++round) {
    const size_t pushes = static_cast<size_t>(round % 11);
    for (size_t i = 0; i < pushes; ++i) {
      const bool was_full = q.full();
      const bool ok = q.push(&v[next_in % v.size()]);
      EXPECT_EQ(ok, !was_full);
      if (ok) ++next_in;
    }
    EXPECT_LE(q.size(), 8u);
    EXPECT_EQ(q.size(), next_in - next_out);
    const size_t want = static_cast<size_t>(round % 5);
    const size_t n = q.pop(out, want);
    EXPECT_EQ(n, std::min(want, next_in - next_out));
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(out[i], &v[(next_out + i) % v.size()]) << "round " << round;
    next_out += n;
  }
  // Full: push refuses and stores nothing.
  while (!q.full())
    ASSERT_TRUE(q.push(&v[0]));
  EXPECT_EQ(q.size(), 8u);
  EXPECT_FALSE(q.push(&v[1]));
  EXPECT_EQ(q.size(), 8u);
  EXPECT_EQ(q.pop(out, 16), 8u);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace uroce::port
