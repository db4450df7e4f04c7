// SPDX-License-Identifier: BSD-3-Clause
#include "util/csprng.h"

#include <gtest/gtest.h>

#include <set>

namespace uroce::util {
namespace {

TEST(Csprng, ChaCha20BlockMatchesRfc8439) {
  // RFC 8439 2.3.2: key 00..1f, nonce 00:00:00:09:00:00:00:4a:00:00:00:00, block counter 1.
  uint32_t key[8];
  for (uint32_t i = 0; i < 8; ++i)
    key[i] = (4 * i) | (4 * i + 1) << 8 | (4 * i + 2) << 16 | (4 * i + 3) << 24;
  const uint32_t nonce[3] = {0x09000000u, 0x4a000000u, 0};
  uint32_t out[16];
  chacha20_block(key, 1, nonce, out);
  const uint32_t want[16] = {0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033,
                             0x9aaa2204, 0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9,
                             0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2};
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(out[i], want[i]) << "word " << i;
}

TEST(Csprng, KernelKeyedGeneratorsDiffer) {
  Csprng a, b;
  int same = 0;
  for (int i = 0; i < 64; ++i)
    same += a.next_u32() == b.next_u32();
  EXPECT_LT(same, 2) << "two getrandom-keyed streams must not agree";
}

TEST(Csprng, SeededIsReproducibleAndSeedsDiffer) {
  Csprng a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) {
    const uint32_t x = a.next_u32();
    EXPECT_EQ(x, b.next_u32());
    EXPECT_NE(x, c.next_u32());  // 100 equal draws of 2^32 values: never by chance
  }
}

TEST(Csprng, UniformIsInRangeAndFlat) {
  Csprng r;
  constexpr uint32_t kBins = 10, kDraws = 100000;
  uint32_t n[kBins] = {};
  for (uint32_t i = 0; i < kDraws; ++i) {
    const uint32_t v = r.uniform(kBins);
    ASSERT_LT(v, kBins);
    ++n[v];
  }
  // Chi-square with 9 degrees of freedom: 27.9 is the 0.1 % tail.
  double chi = 0;
  for (uint32_t b = 0; b < kBins; ++b) {
    const double d = n[b] - double{kDraws} / kBins;
    chi += d * d / (double{kDraws} / kBins);
  }
  EXPECT_LT(chi, 27.9);
  EXPECT_EQ(r.uniform(1), 0u);
}

TEST(Csprng, EveryBitIsBalanced) {
  Csprng r(1);
  constexpr int kDraws = 20000;
  int ones[32] = {};
  for (int i = 0; i < kDraws; ++i) {
    const uint32_t v = r.next_u32();
    for (int b = 0; b < 32; ++b)
      ones[b] += (v >> b) & 1;
  }
  for (int b = 0; b < 32; ++b)  // 5 standard deviations (sqrt(20000)/2 = 71)
    EXPECT_NEAR(ones[b], kDraws / 2, 355) << "bit " << b;
}

}  // namespace
}  // namespace uroce::util
