// SPDX-License-Identifier: BSD-3-Clause
// Pacer (lib/transport/pacer.h): the rate it lets through, measured over 10,000 packets on the
// fake clock, is within 2 % of the set rate at 1 %, 10 %, 50 % and 100 % of a 100 Gb/s line,
// both when the sender asks exactly at next_send_ns and when it polls at random times.
#include "transport/pacer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "support/fake_clock.h"

namespace uroce::transport {
namespace {

constexpr uint64_t kLineBps = 100'000'000'000;
constexpr uint32_t kPkt = 1500;
constexpr uint32_t kBurst = 4 * kPkt;
constexpr int kPackets = 10000;

double measured_bps(uint64_t bytes, uint64_t first_ns, uint64_t last_ns) {
  return static_cast<double>(bytes) * 8e9 / static_cast<double>(last_ns - first_ns);
}

class PacerRate : public ::testing::TestWithParam<unsigned> {};

// The sender sleeps until next_send_ns each time it is refused. Bytes counted: every packet but
// the first, over the time from the first to the last (the initial burst included, it is 4 of
// 10,000 packets).
TEST_P(PacerRate, ExactWakeups) {
  const uint64_t rate = kLineBps / 100 * GetParam();
  test::FakeClock clock(1'000'000);
  Pacer p;
  p.set_rate(rate, kBurst, clock.now_ns());
  uint64_t first = 0, last = 0, bytes = 0;
  for (int i = 0; i < kPackets; ++i) {
    if (!p.may_send(kPkt, clock.now_ns())) {
      const uint64_t t = p.next_send_ns(kPkt, clock.now_ns());
      ASSERT_GT(t, clock.now_ns());
      clock.set(t);
      ASSERT_TRUE(p.may_send(kPkt, clock.now_ns())) << i;
    }
    p.consume(kPkt);
    if (i == 0)
      first = clock.now_ns();
    else
      bytes += kPkt;
    last = clock.now_ns();
  }
  const double got = measured_bps(bytes, first, last);
  EXPECT_NEAR(got / static_cast<double>(rate), 1.0, 0.02) << got;
}

// The sender polls at random intervals (up to a quarter of the burst time, as a busy lcore
// does) and sends whatever the bucket allows at each poll.
TEST_P(PacerRate, RandomPolls) {
  const uint64_t rate = kLineBps / 100 * GetParam();
  const uint64_t burst_ns = uint64_t{kBurst} * 8'000'000'000 / rate;
  std::mt19937_64 rng(GetParam());
  std::uniform_int_distribution<uint64_t> gap(0, burst_ns / 4);
  test::FakeClock clock(5'000);
  Pacer p;
  p.set_rate(rate, kBurst, clock.now_ns());
  uint64_t first = 0, last = 0, bytes = 0;
  int sent = 0;
  while (sent < kPackets) {
    while (sent < kPackets && p.may_send(kPkt, clock.now_ns())) {
      p.consume(kPkt);
      if (sent == 0)
        first = clock.now_ns();
      else
        bytes += kPkt;
      last = clock.now_ns();
      ++sent;
    }
    clock.advance(1 + gap(rng));
  }
  const double got = measured_bps(bytes, first, last);
  EXPECT_NEAR(got / static_cast<double>(rate), 1.0, 0.02) << got;
}

INSTANTIATE_TEST_SUITE_P(PercentOfLine, PacerRate, ::testing::Values(1u, 10u, 50u, 100u));

TEST(Pacer, UnpacedPassesEverything) {
  Pacer p;
  EXPECT_FALSE(p.paced());
  EXPECT_TRUE(p.may_send(9000, 0));
  EXPECT_EQ(p.next_send_ns(9000, 77), 77u);
}

// 1 Gb/s: a 1500-byte packet is 12,000 ns of tokens. The bucket starts full (two packets).
TEST(Pacer, NextSendTimeIsExact) {
  Pacer p;
  p.set_rate(1'000'000'000, 2 * kPkt, 1000);
  EXPECT_TRUE(p.may_send(kPkt, 1000));
  p.consume(kPkt);
  EXPECT_TRUE(p.may_send(kPkt, 1000));
  p.consume(kPkt);
  EXPECT_FALSE(p.may_send(kPkt, 1000));
  EXPECT_EQ(p.next_send_ns(kPkt, 1000), 13000u);
  EXPECT_FALSE(p.may_send(kPkt, 12999));
  EXPECT_TRUE(p.may_send(kPkt, 13000));
  p.consume(kPkt);
  // Idle for a second: the bucket holds the burst, no more.
  EXPECT_TRUE(p.may_send(kPkt, 1'000'013'000));
  p.consume(kPkt);
  p.consume(kPkt);
  EXPECT_FALSE(p.may_send(1, 1'000'013'000));
  // Empty at T0. Half a packet after 6,000 ns, a whole one after 12,000.
  constexpr uint64_t T0 = 1'000'013'000;
  EXPECT_TRUE(p.may_send(kPkt / 2, T0 + 6000));
  EXPECT_FALSE(p.may_send(kPkt, T0 + 11999));
  EXPECT_TRUE(p.may_send(kPkt, T0 + 12000));
  p.consume(kPkt / 2);  // half a packet left
  // 20,000 ns more (less than the 24,000 ns that fill an empty bucket) would make 2.17 packets:
  // capped at the burst of two.
  EXPECT_TRUE(p.may_send(kPkt, T0 + 32000));
  p.consume(kPkt);
  p.consume(kPkt);
  EXPECT_FALSE(p.may_send(1, T0 + 32000));
  p.consume(kPkt);  // taking more than the bucket holds leaves it empty, not in debt
  EXPECT_EQ(p.next_send_ns(kPkt, T0 + 32000), T0 + 44000);
  // A lower rate keeps what the bucket holds (nothing); back to unpaced lets everything through.
  p.set_rate(500'000'000, 2 * kPkt, T0 + 32000);
  EXPECT_EQ(p.next_send_ns(kPkt, T0 + 32000), T0 + 32000 + 24000);
  p.set_rate(0, 0, T0 + 32001);
  EXPECT_TRUE(p.may_send(9000, T0 + 32001));
}

}  // namespace
}  // namespace uroce::transport
