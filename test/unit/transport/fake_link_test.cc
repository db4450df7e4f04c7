// SPDX-License-Identifier: BSD-3-Clause
// The fake link and fake clock every transport test runs on (test/support).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "support/fake_clock.h"
#include "support/fake_link.h"
#include "support/seed.h"
#include "wire/packet.h"

namespace uroce::test {
namespace {

using wire::Ecn;

const uint8_t kMacA[6] = {0x02, 0, 0, 0, 0, 0x0A};
const uint8_t kMacB[6] = {0x02, 0, 0, 0, 0, 0x0B};
const uint8_t kMacC[6] = {0x02, 0, 0, 0, 0, 0x0C};
const uint8_t kBroadcast[6] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};

struct FrameOpts {
  Ecn ecn = Ecn::kNotEct;
  bool ipv6 = false;
  bool vlan = false;
  uint32_t payload = 64;
  uint8_t opcode = wire::op::kRcSendOnly;
};

// A valid RoCE v2 frame from smac to dmac whose PSN is `id`.
std::vector<uint8_t> make_frame(const uint8_t *smac, const uint8_t *dmac, uint32_t id,
                                const FrameOpts &o = {}) {
  wire::PathInfo path;
  std::memcpy(path.smac, smac, 6);
  std::memcpy(path.dmac, dmac, 6);
  path.vlan = o.vlan;
  path.vlan_id = 7;
  path.dscp = 26;
  if (o.ipv6) {
    path.sgid = wire::Gid::link_local_from_mac(smac);
    path.dgid = wire::Gid::link_local_from_mac(dmac);
    path.flow_label = 0x12345;
  } else {
    path.sgid = wire::Gid::from_ipv4(10, 0, 0, smac[5]);
    path.dgid = wire::Gid::from_ipv4(10, 0, 0, dmac[5]);
  }
  wire::PacketDesc d;
  d.path = &path;
  d.ecn = o.ecn;
  d.ip_id = static_cast<uint16_t>(id);
  d.f.opcode = o.opcode;
  d.f.dest_qp = 0x11;
  d.f.psn = id & 0xFFFFFF;
  d.payload_len = o.payload;
  std::vector<uint8_t> payload(o.payload);
  for (size_t i = 0; i < payload.size(); ++i)
    payload[i] = static_cast<uint8_t>(id * 31 + i);
  std::vector<uint8_t> buf(wire::frame_size(d));
  const wire::BuildResult r = wire::build_frame(buf.data(), buf.size(), d, payload.data());
  EXPECT_TRUE(r.ok());
  buf.resize(r.frame_len);
  return buf;
}

// The largest payload (a multiple of 4, so no pad) that keeps the frame within `total` bytes.
uint32_t payload_for(FrameOpts o, uint32_t total) {
  o.payload = 0;
  const uint32_t hdr = static_cast<uint32_t>(make_frame(kMacA, kMacB, 0, o).size());
  return (total - hdr) & ~3u;
}

bool send(Endpoint &ep, const std::vector<uint8_t> &frame) {
  transport::TxBuf b = ep.tx_alloc();
  if (b.data == nullptr) return false;
  EXPECT_GE(b.cap, frame.size());
  std::memcpy(b.data, frame.data(), frame.size());
  ep.tx_commit(b, static_cast<uint32_t>(frame.size()));
  return true;
}

uint32_t psn_of(const uint8_t *f, uint32_t len) {
  wire::ParsedPacket p;
  EXPECT_EQ(wire::parse_frame(f, len, &p), wire::ParseError::kOk);
  return p.bth()->psn();
}

struct Rx {
  size_t to;
  uint64_t at;
  std::vector<uint8_t> data;
};

// Runs the link until it is idle, jumping the clock from delivery to delivery.
std::vector<Rx> drain(FakeLink &link, FakeClock &clock) {
  std::vector<Rx> out;
  for (int guard = 0; link.next_delivery_ns() != UINT64_MAX; ++guard) {
    EXPECT_LT(guard, 10'000'000);
    clock.set(std::max(clock.now_ns(), link.next_delivery_ns()));
    link.deliver([&](Endpoint &to, const uint8_t *f, uint32_t len) {
      out.push_back({to.index(), clock.now_ns(), std::vector<uint8_t>(f, f + len)});
    });
  }
  return out;
}

// Bounds that a correct implementation misses with probability ~1e-9 (6 sigma).
void expect_binomial(uint64_t k, uint64_t n, double p, const char *what) {
  const double mean = static_cast<double>(n) * p;
  const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_GE(static_cast<double>(k), mean - 6 * sd) << what;
  EXPECT_LE(static_cast<double>(k), mean + 6 * sd) << what;
}

// ---------------------------------------------------------------------------------------------

TEST(FakeClock, SetAndAdvance) {
  FakeClock c(10);
  EXPECT_EQ(c.now_ns(), 10u);
  c.advance(5);
  EXPECT_EQ(c.now_ns(), 15u);
  c.set(100);
  EXPECT_EQ(c.now_ns(), 100u);
  c.set(100);
  EXPECT_EQ(c.now_ns(), 100u);
}

TEST(FakeClockDeathTest, GoingBackwardsAborts) {
  FakeClock c(100);
  EXPECT_DEATH(c.set(99), "before now");
}

TEST(Seed, EnvironmentOverridesFallback) {
  unsetenv("UROCE_SEED");
  EXPECT_EQ(test_seed(17), 17u);
  setenv("UROCE_SEED", "0x2a", 1);
  EXPECT_EQ(test_seed(17), 42u);
  setenv("UROCE_SEED", "123", 1);
  EXPECT_EQ(test_seed(17), 123u);
  unsetenv("UROCE_SEED");
}

TEST(FakeLink, DeliversByMacAndFloodsBroadcast) {
  FakeClock clock;
  FakeLink link(1, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  Endpoint &b = link.add_endpoint(kMacB);
  Endpoint &c = link.add_endpoint(kMacC);
  EXPECT_EQ(link.num_endpoints(), 3u);
  EXPECT_EQ(&link.endpoint(1), &b);

  const auto to_b = make_frame(kMacA, kMacB, 1);
  const auto to_c = make_frame(kMacB, kMacC, 2);
  const auto bcast = make_frame(kMacC, kBroadcast, 3);
  const uint8_t unknown[6] = {0x02, 0, 0, 0, 0, 0x0D};
  const auto lost = make_frame(kMacA, unknown, 4);
  ASSERT_TRUE(send(a, to_b));
  ASSERT_TRUE(send(b, to_c));
  ASSERT_TRUE(send(c, bcast));
  ASSERT_TRUE(send(a, lost));
  EXPECT_EQ(link.counters().sent, 4u);
  EXPECT_EQ(link.counters().dropped_no_dest, 1u);

  const std::vector<Rx> rx = drain(link, clock);
  ASSERT_EQ(rx.size(), 4u);  // 1 + 1 + 2 broadcast copies
  const std::vector<uint8_t> *by_psn[4] = {nullptr, &to_b, &to_c, &bcast};
  std::vector<std::vector<uint32_t>> got(3);
  for (const Rx &r : rx) {
    const uint32_t psn = psn_of(r.data.data(), static_cast<uint32_t>(r.data.size()));
    got[r.to].push_back(psn);
    ASSERT_LT(psn, 4u);
    EXPECT_EQ(r.data, *by_psn[psn]);
  }
  EXPECT_EQ(got[0], (std::vector<uint32_t>{3}));
  EXPECT_EQ(got[1], (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(got[2], (std::vector<uint32_t>{2}));
  EXPECT_EQ(a.rx_frames(), 1u);
  EXPECT_EQ(b.rx_frames(), 2u);
  EXPECT_EQ(c.tx_frames(), 1u);
  EXPECT_EQ(link.counters().delivered, 4u);
  EXPECT_EQ(link.counters().dropped, 1u);
  EXPECT_EQ(link.in_flight(), 0u);
}

TEST(FakeLink, DelayAndOrder) {
  FakeClock clock(1000);
  FakeLink link(2, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  Endpoint &b = link.add_endpoint(kMacB);
  Faults ab;
  ab.delay_ns = 5000;
  Faults ba;
  ba.delay_ns = 700;
  link.set_faults(a, b, ab);
  link.set_faults(b, a, ba);
  EXPECT_EQ(link.faults(a, b).delay_ns, 5000u);
  EXPECT_EQ(link.next_delivery_ns(), UINT64_MAX);

  ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, 10)));  // sent at 1000, due at 6000
  clock.set(1100);
  ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, 11)));  // due at 6100
  ASSERT_TRUE(send(b, make_frame(kMacB, kMacA, 20)));  // due at 1800
  EXPECT_EQ(link.next_delivery_ns(), 1800u);

  std::vector<std::pair<size_t, uint32_t>> seen;
  auto sink = [&](Endpoint &to, const uint8_t *f, uint32_t len) {
    seen.emplace_back(to.index(), psn_of(f, len));
  };
  clock.set(1799);
  EXPECT_EQ(link.deliver(sink), 0u);
  clock.set(1800);
  EXPECT_EQ(link.deliver(sink), 1u);
  EXPECT_EQ(link.next_delivery_ns(), 6000u);
  clock.set(5999);
  EXPECT_EQ(link.deliver(sink), 0u);
  clock.set(7000);
  EXPECT_EQ(link.deliver(sink), 2u);
  EXPECT_EQ(seen, (std::vector<std::pair<size_t, uint32_t>>{{0, 20}, {1, 10}, {1, 11}}));
}

TEST(FakeLink, JitterNeverReordersADirection) {
  UROCE_SEED(seed, 3);
  FakeClock clock;
  FakeLink link(seed, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  link.add_endpoint(kMacB);
  Faults f;
  f.delay_ns = 2000;
  f.jitter_ns = 10'000;
  link.set_faults(f);
  constexpr uint32_t kN = 2000;
  std::vector<uint64_t> sent_at(kN);
  std::vector<Rx> rx;
  auto sink = [&](Endpoint &to, const uint8_t *fr, uint32_t len) {
    rx.push_back({to.index(), clock.now_ns(), std::vector<uint8_t>(fr, fr + len)});
  };
  for (uint32_t i = 0; i < kN; ++i) {
    sent_at[i] = clock.now_ns();
    ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, i)));
    clock.advance(100);
    link.deliver(sink);
  }
  for (Rx &r : drain(link, clock))
    rx.push_back(std::move(r));
  ASSERT_EQ(rx.size(), kN);
  uint64_t spread = 0;
  for (uint32_t i = 0; i < kN; ++i) {
    ASSERT_EQ(psn_of(rx[i].data.data(), static_cast<uint32_t>(rx[i].data.size())), i);
    ASSERT_GE(rx[i].at, sent_at[i] + 2000);
    spread = std::max(spread, rx[i].at - sent_at[i]);
  }
  EXPECT_GT(spread, 2000u + 5000u);  // jitter did delay frames
}

TEST(FakeLink, DeliverDoesNotLoopOnZeroDelayPingPong) {
  FakeClock clock;
  FakeLink link(4, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  Endpoint &b = link.add_endpoint(kMacB);
  Faults f;
  f.delay_ns = 0;
  link.set_faults(f);
  const auto ab = make_frame(kMacA, kMacB, 1), ba = make_frame(kMacB, kMacA, 2);
  ASSERT_TRUE(send(a, ab));
  auto echo = [&](Endpoint &to, const uint8_t *, uint32_t) { send(to, &to == &a ? ab : ba); };
  EXPECT_EQ(link.deliver(echo), 1u);  // the reply is due now but waits for the next call
  EXPECT_EQ(link.next_delivery_ns(), 0u);
  EXPECT_EQ(link.deliver(echo), 1u);
  EXPECT_EQ(b.rx_frames(), 1u);
  EXPECT_EQ(a.rx_frames(), 1u);
}

TEST(FakeLink, DropRate) {
  UROCE_SEED(seed, 5);
  FakeClock clock;
  FakeLink link(seed, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  link.add_endpoint(kMacB);
  Faults f;
  f.drop = 0.1;
  link.set_faults(f);
  constexpr uint32_t kN = 20'000;
  const auto frame = make_frame(kMacA, kMacB, 1);
  for (uint32_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(send(a, frame));
    if (i % 512 == 511) drain(link, clock);  // keep the pool from running dry
  }
  drain(link, clock);
  const LinkCounters &c = link.counters();
  expect_binomial(c.dropped_random, kN, 0.1, "dropped");
  EXPECT_EQ(c.dropped, c.dropped_random);
  EXPECT_EQ(c.delivered + c.dropped, kN);
  EXPECT_EQ(c.duplicated + c.corrupted + c.reordered + c.ce_marked, 0u);
}

TEST(FakeLink, DuplicateRate) {
  UROCE_SEED(seed, 6);
  FakeClock clock;
  FakeLink link(seed, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  link.add_endpoint(kMacB);
  Faults f;
  f.duplicate = 0.05;
  link.set_faults(f);
  constexpr uint32_t kN = 20'000;
  std::vector<Rx> rx;
  for (uint32_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, i)));
    if (i % 256 == 255) {
      auto part = drain(link, clock);
      rx.insert(rx.end(), part.begin(), part.end());
    }
  }
  auto part = drain(link, clock);
  rx.insert(rx.end(), part.begin(), part.end());
  const LinkCounters &c = link.counters();
  expect_binomial(c.duplicated, kN, 0.05, "duplicated");
  EXPECT_EQ(c.delivered, kN + c.duplicated);
  ASSERT_EQ(rx.size(), kN + c.duplicated);
  // Every frame arrives, in order, and a duplicate right after its original.
  uint32_t expect = 0, dups = 0;
  for (size_t k = 0; k < rx.size(); ++k) {
    const uint32_t psn = psn_of(rx[k].data.data(), static_cast<uint32_t>(rx[k].data.size()));
    if (k > 0 && psn + 1 == expect) {
      EXPECT_EQ(rx[k].data, rx[k - 1].data);
      ++dups;
      continue;
    }
    ASSERT_EQ(psn, expect);
    ++expect;
  }
  EXPECT_EQ(expect, kN);
  EXPECT_EQ(dups, c.duplicated);
}

TEST(FakeLink, ReorderHoldsBehindAtMostKLaterFrames) {
  UROCE_SEED(seed, 7);
  FakeClock clock;
  FakeLink link(seed, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  link.add_endpoint(kMacB);
  Faults f;
  f.reorder = 0.1;
  f.reorder_depth = 3;
  f.reorder_max_hold_ns = 1'000'000'000;  // only later frames release a held one here
  link.set_faults(f);
  constexpr uint32_t kN = 20'000;
  std::vector<uint32_t> order;
  auto sink = [&](Endpoint &, const uint8_t *fr, uint32_t len) {
    order.push_back(psn_of(fr, len));
  };
  for (uint32_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, i)));
    clock.advance(10);
    if (i % 256 == 255) link.deliver(sink);
  }
  // A tail of frames that are not held lets the last held ones go by count too.
  constexpr uint32_t kTail = 4;
  f.reorder = 0;
  link.set_faults(f);
  for (uint32_t i = kN; i < kN + kTail; ++i)
    ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, i)));
  for (const Rx &r : drain(link, clock))
    order.push_back(psn_of(r.data.data(), static_cast<uint32_t>(r.data.size())));

  const LinkCounters &c = link.counters();
  expect_binomial(c.reordered, kN, 0.1, "reordered");
  EXPECT_EQ(c.delivered, kN + kTail);
  ASSERT_EQ(order.size(), kN + kTail);
  // Each frame shows up exactly once; a held frame is passed by 1..3 later frames, any other
  // frame by none.
  std::vector<int> pos(kN + kTail, -1);
  for (size_t k = 0; k < order.size(); ++k) {
    ASSERT_LT(order[k], kN + kTail);
    ASSERT_EQ(pos[order[k]], -1) << "delivered twice: " << order[k];
    pos[order[k]] = static_cast<int>(k);
  }
  uint64_t late = 0;
  uint32_t max_passed = 0;
  for (uint32_t i = 0; i < kN; ++i) {
    uint32_t passed_by = 0;
    for (uint32_t j = i + 1; j < std::min(kN + kTail, i + 64); ++j)
      passed_by += pos[j] < pos[i];
    EXPECT_LE(passed_by, 3u) << "frame " << i;
    max_passed = std::max(max_passed, passed_by);
    late += passed_by > 0;
  }
  EXPECT_EQ(late, c.reordered);
  EXPECT_EQ(max_passed, 3u);
}

TEST(FakeLink, HeldFrameIsReleasedByItsDeadline) {
  FakeClock clock;
  FakeLink link(8, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  link.add_endpoint(kMacB);
  Faults f;
  f.reorder = 1.0;
  f.reorder_depth = 3;
  f.delay_ns = 1000;
  f.reorder_max_hold_ns = 50'000;
  link.set_faults(f);
  ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, 1)));  // held, and nothing follows it
  EXPECT_EQ(link.in_flight(), 1u);
  EXPECT_EQ(link.next_delivery_ns(), 51'000u);
  clock.set(50'999);
  EXPECT_EQ(link.deliver([](Endpoint &, const uint8_t *, uint32_t) {}), 0u);
  clock.set(51'000);
  EXPECT_EQ(link.deliver([](Endpoint &, const uint8_t *, uint32_t) {}), 1u);
  EXPECT_EQ(link.in_flight(), 0u);
}

TEST(FakeLink, CorruptionFlipsExactlyOneBit) {
  UROCE_SEED(seed, 9);
  FakeClock clock;
  FakeLink link(seed, clock);
  Endpoint &a = link.add_endpoint(kMacA, 4096);
  link.add_endpoint(kMacB);
  Faults f;
  f.corrupt = 1.0;
  link.set_faults(f);
  constexpr uint32_t kN = 2000;
  std::vector<std::vector<uint8_t>> sent;
  for (uint32_t i = 0; i < kN; ++i) {
    sent.push_back(make_frame(kMacA, kMacB, i, {.payload = 32 + i % 200}));
    ASSERT_TRUE(send(a, sent.back()));
  }
  const std::vector<Rx> rx = drain(link, clock);
  ASSERT_EQ(rx.size(), kN);
  EXPECT_EQ(link.counters().corrupted, kN);
  uint32_t first_half = 0, second_half = 0, bad_icrc = 0;
  for (uint32_t i = 0; i < kN; ++i) {
    ASSERT_EQ(rx[i].data.size(), sent[i].size());
    uint32_t bits = 0;
    size_t where = 0;
    for (size_t k = 0; k < sent[i].size(); ++k) {
      const int d = std::popcount(static_cast<uint8_t>(rx[i].data[k] ^ sent[i][k]));
      if (d) where = k;
      bits += static_cast<uint32_t>(d);
    }
    ASSERT_EQ(bits, 1u) << "frame " << i;
    (where < sent[i].size() / 2 ? first_half : second_half)++;
    wire::ParsedPacket p;
    bad_icrc +=
        wire::parse_frame(rx[i].data.data(), rx[i].data.size(), &p) != wire::ParseError::kOk;
  }
  // Anywhere in the frame: both halves get hit about equally often.
  expect_binomial(first_half, kN, 0.5, "flips in the first half");
  // The receiver notices most flips (ICRC, IP checksum, header checks); not those in the MACs.
  EXPECT_GT(bad_icrc, kN * 3 / 4);
}

TEST(FakeLink, CorruptRate) {
  UROCE_SEED(seed, 10);
  FakeClock clock;
  FakeLink link(seed, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  link.add_endpoint(kMacB);
  Faults f;
  f.corrupt = 0.02;
  link.set_faults(f);
  constexpr uint32_t kN = 20'000;
  const auto frame = make_frame(kMacA, kMacB, 1);
  uint64_t changed = 0;
  for (uint32_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(send(a, frame));
    if (i % 512 == 511 || i == kN - 1)
      for (const Rx &r : drain(link, clock))
        changed += r.data != frame;
  }
  expect_binomial(link.counters().corrupted, kN, 0.02, "corrupted");
  EXPECT_EQ(changed, link.counters().corrupted);
}

TEST(FakeLink, FilterDropsTheThirdReadResponse) {
  FakeClock clock;
  FakeLink link(11, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  Endpoint &b = link.add_endpoint(kMacB);
  int read_responses = 0;
  Faults f;
  f.filter = [&](const uint8_t *fr, uint32_t len) {
    wire::ParsedPacket p;
    if (wire::parse_frame(fr, len, &p) != wire::ParseError::kOk) return Action::kPass;
    const uint8_t op = p.bth()->opcode();
    if (op >= wire::op::kRcReadResponseFirst && op <= wire::op::kRcReadResponseOnly &&
        ++read_responses == 3)
      return Action::kDrop;
    if (p.bth()->psn() == 100) return Action::kDuplicate;
    if (p.bth()->psn() == 200) return Action::kCorrupt;
    return Action::kPass;
  };
  link.set_faults(b, a, f);  // only responder -> requester
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> sent_to_a;
  for (uint32_t i = 0; i < 5; ++i)
    sent_to_a.emplace_back(i,
                           make_frame(kMacB, kMacA, i, {.opcode = wire::op::kRcReadResponseOnly}));
  for (uint32_t psn : {100u, 200u})
    sent_to_a.emplace_back(
        psn, make_frame(kMacB, kMacA, psn, {.payload = 0, .opcode = wire::op::kRcAck}));
  for (const auto &[psn, fr] : sent_to_a)
    ASSERT_TRUE(send(b, fr));
  ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, 2, {.opcode = wire::op::kRcReadResponseOnly})));
  // Frames reaching a, identified by content: the PSN of the sent frame they equal, or
  // 1000 + PSN for one that differs from a sent frame in exactly one bit.
  std::vector<uint32_t> to_a;
  for (const Rx &r : drain(link, clock)) {
    if (r.to != 0) continue;
    uint32_t id = UINT32_MAX;
    for (const auto &[psn, fr] : sent_to_a) {
      if (fr.size() != r.data.size()) continue;
      int bits = 0;
      for (size_t k = 0; k < fr.size(); ++k)
        bits += std::popcount(static_cast<uint8_t>(fr[k] ^ r.data[k]));
      if (bits == 0) id = psn;
      if (bits == 1) id = 1000 + psn;
      if (bits <= 1) break;
    }
    to_a.push_back(id);
  }
  EXPECT_EQ(to_a, (std::vector<uint32_t>{0, 1, 3, 4, 100, 100, 1200}));
  EXPECT_EQ(b.rx_frames(), 1u);  // the a -> b direction has no filter
  EXPECT_EQ(link.counters().dropped_filter, 1u);
  EXPECT_EQ(link.counters().duplicated, 1u);
  EXPECT_EQ(link.counters().corrupted, 1u);
}

// 10 frames of L ~ 1000 bytes arrive at once at a 1 bit/ns port with K = 5L: frame i finds
// i * L bytes queued, so frames 6..9 are over K (frame 5 is exactly at K: not over); the odd
// ones are ECT.
struct EcnCase {
  FrameOpts opts;
};

class FakeLinkEcn : public ::testing::TestWithParam<EcnCase> {};

TEST_P(FakeLinkEcn, MarksEctOnlyOverThreshold) {
  FakeClock clock;
  FakeLink link(12, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  Endpoint &b = link.add_endpoint(kMacB);
  FrameOpts o = GetParam().opts;
  o.payload = payload_for(o, 1000);
  const uint32_t len = static_cast<uint32_t>(make_frame(kMacA, kMacB, 0, o).size());
  ASSERT_GT(len, 930u);
  ASSERT_LE(len, 1000u);
  Bottleneck bn;
  bn.bits_per_ns = 1.0;
  bn.ecn_threshold_bytes = 5 * len;
  link.set_bottleneck(b, bn);
  Faults f;
  f.delay_ns = 0;
  link.set_faults(f);
  std::vector<std::vector<uint8_t>> sent;
  for (uint32_t i = 0; i < 10; ++i) {
    FrameOpts oi = o;
    oi.ecn = i % 2 ? o.ecn : Ecn::kNotEct;  // odd frames ECT (or as given), even not-ECT
    sent.push_back(make_frame(kMacA, kMacB, i, oi));
    ASSERT_EQ(sent.back().size(), len);
    ASSERT_TRUE(send(a, sent.back()));
  }
  const std::vector<Rx> rx = drain(link, clock);
  ASSERT_EQ(rx.size(), 10u);
  const bool ect = o.ecn == Ecn::kEct0 || o.ecn == Ecn::kEct1;
  uint32_t marked = 0;
  for (uint32_t i = 0; i < 10; ++i) {
    // Serialization: 8 ns per byte, back to back.
    EXPECT_EQ(rx[i].at, (i + 1) * len * 8);
    wire::ParsedPacket p;
    ASSERT_EQ(wire::parse_frame(rx[i].data.data(), rx[i].data.size(), &p), wire::ParseError::kOk)
        << "frame " << i << ": "
        << wire::parse_error_str(wire::parse_frame(rx[i].data.data(), rx[i].data.size(), &p));
    const bool should_mark = ect && i % 2 == 1 && i * len > 5 * len;
    const Ecn sent_ecn = i % 2 ? o.ecn : Ecn::kNotEct;
    EXPECT_EQ(p.ecn(), should_mark ? Ecn::kCe : sent_ecn) << "frame " << i;
    marked += should_mark;
    // Nothing but the ECN bits (and the IPv4 checksum) changed.
    std::vector<uint8_t> expect = sent[i];
    if (should_mark) set_frame_ecn(expect.data(), len, static_cast<uint8_t>(Ecn::kCe));
    EXPECT_EQ(rx[i].data, expect);
    if (p.ipv6) {
      EXPECT_EQ(p.ipv6h()->flow_label(), 0x12345u);
      EXPECT_EQ(p.ipv6h()->dscp(), 26);
    } else {
      EXPECT_EQ(p.ipv4()->dscp(), 26);
    }
  }
  EXPECT_EQ(link.counters().ce_marked, marked);
  EXPECT_EQ(marked, ect ? 2u : 0u);  // frames 7 and 9

  // Once the queue has drained, nothing is marked.
  clock.advance(1'000'000);
  FrameOpts oi = o;
  ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, 50, oi)));
  const std::vector<Rx> rx2 = drain(link, clock);
  ASSERT_EQ(rx2.size(), 1u);
  EXPECT_EQ(frame_ecn(rx2[0].data.data(), len), static_cast<int>(o.ecn));
}

INSTANTIATE_TEST_SUITE_P(Families, FakeLinkEcn,
                         ::testing::Values(EcnCase{{.ecn = Ecn::kEct0}},
                                           EcnCase{{.ecn = Ecn::kEct1}},
                                           EcnCase{{.ecn = Ecn::kEct0, .ipv6 = true}},
                                           EcnCase{{.ecn = Ecn::kEct1, .ipv6 = true, .vlan = true}},
                                           EcnCase{{.ecn = Ecn::kEct0, .vlan = true}},
                                           EcnCase{{.ecn = Ecn::kNotEct}}));

TEST(FakeLink, EcnQueueDropsNotEctOverLimitAndEverythingWhenFull) {
  FakeClock clock;
  FakeLink link(13, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  link.add_endpoint(kMacB);
  Bottleneck bn;
  bn.bits_per_ns = 1.0;
  bn.ecn_threshold_bytes = 1500;
  bn.notect_drop_bytes = 3500;
  bn.buffer_bytes = 6500;
  link.set_bottleneck(bn);
  Faults f;
  f.delay_ns = 0;
  link.set_faults(f);
  FrameOpts ect{.ecn = Ecn::kEct0}, plain{};
  ect.payload = plain.payload = payload_for(plain, 1000);
  for (uint32_t i = 0; i < 10; ++i) {
    const bool is_ect = i >= 4;
    ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, i, is_ect ? ect : plain)));
  }
  const std::vector<Rx> rx = drain(link, clock);
  std::vector<uint32_t> psns;
  std::vector<int> ecns;
  for (const Rx &r : rx) {
    psns.push_back(psn_of(r.data.data(), static_cast<uint32_t>(r.data.size())));
    ecns.push_back(frame_ecn(r.data.data(), static_cast<uint32_t>(r.data.size())));
  }
  // Frames of L ~ 1000 bytes (L in (930, 1000]). Frames 0..3 plain find 0..3L <= 3500 queued:
  // all pass. Frames 4..9 ECT: 4 (4L) CE, 5 (5L) CE, 6 (6L <= 6500) CE, 7 (7L > 6500) dropped,
  // 8 and 9 find 7L too: dropped.
  EXPECT_EQ(psns, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(ecns, (std::vector<int>{0, 0, 0, 0, 3, 3, 3}));
  EXPECT_EQ(link.counters().dropped_queue, 3u);
  EXPECT_EQ(link.counters().ce_marked, 3u);

  // A plain frame finding more than notect_drop_bytes is dropped; an ECT one is only marked.
  clock.advance(1'000'000);
  for (uint32_t i = 0; i < 5; ++i)
    ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, 20 + i, ect)));
  ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, 30, plain)));  // finds 5L > 3500: dropped
  ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, 31, ect)));    // finds 5L <= 6500: CE
  psns.clear();
  for (const Rx &r : drain(link, clock))
    psns.push_back(psn_of(r.data.data(), static_cast<uint32_t>(r.data.size())));
  EXPECT_EQ(psns, (std::vector<uint32_t>{20, 21, 22, 23, 24, 31}));
  EXPECT_EQ(link.counters().dropped_queue, 4u);
}

// RED/ECN between Kmin and Kmax: the k-th frame of a burst finds k frames queued; the marking
// probability is 0 up to Kmin, Pmax (q - Kmin) / (Kmax - Kmin) up to Kmax, 1 above. The queue's
// statistics count every arrival at the depth it saw.
TEST(FakeLink, RedMarksBetweenKminAndKmaxWithRisingProbability) {
  FakeClock clock;
  FakeLink link(21, clock);
  Endpoint &a = link.add_endpoint(kMacA, 64);
  Endpoint &b = link.add_endpoint(kMacB);
  FrameOpts ect{.ecn = Ecn::kEct0};
  ect.payload = payload_for(ect, 1000);
  const uint32_t len = static_cast<uint32_t>(make_frame(kMacA, kMacB, 0, ect).size());
  Bottleneck bn;
  bn.bits_per_ns = 1.0;
  bn.red_kmin_bytes = 2 * len;
  bn.red_kmax_bytes = 6 * len;
  bn.red_pmax = 0.5;
  link.set_bottleneck(b, bn);
  constexpr uint32_t kBursts = 4000, kPerBurst = 9;
  std::vector<uint64_t> marks(kPerBurst, 0);
  for (uint32_t r = 0; r < kBursts; ++r) {
    for (uint32_t i = 0; i < kPerBurst; ++i)
      ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, i, ect)));
    for (const Rx &x : drain(link, clock)) {
      const uint32_t i = psn_of(x.data.data(), static_cast<uint32_t>(x.data.size()));
      ASSERT_LT(i, kPerBurst);
      if (frame_ecn(x.data.data(), static_cast<uint32_t>(x.data.size())) == 3) ++marks[i];
    }
    clock.advance(1'000'000);
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < kPerBurst; ++i) {
    total += marks[i];
    const double q = static_cast<double>(i) * len;
    if (i <= 2) {
      EXPECT_EQ(marks[i], 0u) << "frame " << i;
    } else if (i <= 6) {
      expect_binomial(marks[i], kBursts, 0.5 * (q - 2.0 * len) / (4.0 * len), "RED band");
    } else {
      EXPECT_EQ(marks[i], kBursts) << "frame " << i;
    }
  }
  const QueueStats st = link.queue_stats(b);
  EXPECT_EQ(st.arrivals, uint64_t{kBursts} * kPerBurst);
  EXPECT_EQ(st.marked, total);
  EXPECT_EQ(st.dropped, 0u);
  EXPECT_EQ(st.max_bytes, 8u * len);
  EXPECT_EQ(st.accepted_bytes, uint64_t{kBursts} * kPerBurst * len);
  // Depths 0, L, ..., 8L, equally often: the median arrival saw 4L, the last ninth 8L.
  EXPECT_GE(st.percentile_bytes(0.5), 4u * len);
  EXPECT_LE(st.percentile_bytes(0.5), 4u * len + QueueStats::kBinBytes);
  EXPECT_GE(st.percentile_bytes(1.0), 8u * len);
  EXPECT_LE(st.percentile_bytes(0.85), 7u * len + QueueStats::kBinBytes);
  link.reset_queue_stats(b);
  EXPECT_EQ(link.queue_stats(b).arrivals, 0u);
  EXPECT_EQ(link.queue_stats(b).percentile_bytes(0.99), 0u);
}

// An uplink serializes what its endpoint commits: frames reach the switch one after another at
// the uplink's rate, keep their buffers meanwhile, and queue at the bottleneck in arrival order
// across senders.
TEST(FakeLink, UplinkSerializesFramesBeforeTheSwitch) {
  FakeClock clock;
  FakeLink link(22, clock);
  Endpoint &a = link.add_endpoint(kMacA, 8);
  Endpoint &b = link.add_endpoint(kMacB);
  Endpoint &c = link.add_endpoint(kMacC, 8);
  Faults f;
  f.delay_ns = 100;
  link.set_faults(f);
  link.set_uplink(a, 1.0);  // 8 ns per byte
  link.set_uplink(c, 0.5);  // 16 ns per byte
  FrameOpts o;
  o.payload = payload_for(o, 500);
  const uint32_t len = static_cast<uint32_t>(make_frame(kMacA, kMacB, 0, o).size());
  for (uint32_t i = 0; i < 4; ++i)
    ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, i, o)));
  ASSERT_TRUE(send(c, make_frame(kMacC, kMacB, 100, o)));
  EXPECT_EQ(a.free_buffers(), 4u);
  EXPECT_EQ(link.in_flight(), 5u);
  EXPECT_EQ(link.next_delivery_ns(), uint64_t{len} * 8);
  // At 8L a's first frame reaches the switch: its buffer is free, the frame still in flight.
  clock.set(uint64_t{len} * 8);
  EXPECT_EQ(link.deliver([](Endpoint &, const uint8_t *, uint32_t) {}), 0u);
  EXPECT_EQ(a.free_buffers(), 5u);
  EXPECT_EQ(link.in_flight(), 5u);
  std::vector<Rx> rx = drain(link, clock);
  ASSERT_EQ(rx.size(), 5u);
  // a's frames at (i + 1) * 8L + delay; c's one at 16L + delay, after a's second (tie: a's
  // second reached the switch at the same time and went first by endpoint index).
  std::vector<uint32_t> psns;
  for (const Rx &x : rx)
    psns.push_back(psn_of(x.data.data(), static_cast<uint32_t>(x.data.size())));
  EXPECT_EQ(psns, (std::vector<uint32_t>{0, 1, 100, 2, 3}));
  EXPECT_EQ(rx[0].at, uint64_t{len} * 8 + 100);
  EXPECT_EQ(rx[1].at, uint64_t{len} * 16 + 100);
  EXPECT_EQ(rx[2].at, uint64_t{len} * 16 + 100);
  EXPECT_EQ(rx[4].at, uint64_t{len} * 32 + 100);
  EXPECT_EQ(a.free_buffers(), 8u);

  // Into a bottleneck of 0.5 bit/ns (the slower uplink's rate): a and c each send 2
  // frames at once; the queue sees them in switch-arrival order.
  clock.advance(1'000'000);
  Bottleneck bn;
  bn.bits_per_ns = 0.5;
  link.set_bottleneck(b, bn);
  const uint64_t t0 = clock.now_ns();
  for (uint32_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(send(a, make_frame(kMacA, kMacB, 10 + i, o)));
    ASSERT_TRUE(send(c, make_frame(kMacC, kMacB, 20 + i, o)));
  }
  rx = drain(link, clock);
  ASSERT_EQ(rx.size(), 4u);
  psns.clear();
  for (const Rx &x : rx)
    psns.push_back(psn_of(x.data.data(), static_cast<uint32_t>(x.data.size())));
  // a's frames reach the switch at 8L and 16L, c's at 16L and 32L; the queue drains at 16L per
  // frame from the first arrival: departures 24L, 40L, 56L, 72L.
  EXPECT_EQ(psns, (std::vector<uint32_t>{10, 11, 20, 21}));
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(rx[i].at - t0, uint64_t{len} * (24 + 16 * i) + 100) << i;
  EXPECT_EQ(link.queue_stats(b).arrivals, 4u);
}

TEST(FakeLink, SetFrameEcnKeepsIpv4ChecksumValid) {
  // Every TOS / ECN combination: the incremental update gives the same result as a recompute.
  for (uint8_t ecn = 0; ecn < 4; ++ecn) {
    for (uint32_t id = 0; id < 300; ++id) {
      auto fr = make_frame(kMacA, kMacB, id * 977, {.ecn = static_cast<Ecn>(ecn)});
      const int old = set_frame_ecn(fr.data(), static_cast<uint32_t>(fr.size()), 3);
      EXPECT_EQ(old, ecn);
      wire::ParsedPacket p;
      ASSERT_EQ(wire::parse_frame(fr.data(), fr.size(), &p), wire::ParseError::kOk);
      EXPECT_EQ(p.ecn(), Ecn::kCe);
      auto *ip = wire::hdr_at<wire::Ipv4Hdr>(fr.data() + p.l3_off);
      const uint16_t inc = ip->checksum();
      ip->fill_checksum();
      EXPECT_EQ(inc, ip->checksum());
    }
  }
  uint8_t arp[60] = {};
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(set_frame_ecn(arp, sizeof arp, 3), -1);
  EXPECT_EQ(frame_ecn(arp, sizeof arp), -1);
}

TEST(FakeLink, PoolExhaustionIsBackPressure) {
  FakeClock clock;
  FakeLink link(14, clock);
  Endpoint &a = link.add_endpoint(kMacA, 4);
  link.add_endpoint(kMacB);
  EXPECT_EQ(a.pool_size(), 4u);
  const auto frame = make_frame(kMacA, kMacB, 1);
  std::vector<transport::TxBuf> bufs;
  for (int i = 0; i < 4; ++i) {
    bufs.push_back(a.tx_alloc());
    ASSERT_NE(bufs.back().data, nullptr);
    EXPECT_GE(bufs.back().cap, 9216u);
  }
  transport::TxBuf none = a.tx_alloc();
  EXPECT_EQ(none.data, nullptr);
  EXPECT_EQ(a.tx_alloc_failed(), 1u);
  EXPECT_EQ(link.counters().tx_alloc_failed, 1u);
  a.tx_abort(bufs[3]);  // abort gives it back
  EXPECT_EQ(a.free_buffers(), 1u);
  for (int i = 0; i < 3; ++i) {
    std::memcpy(bufs[i].data, frame.data(), frame.size());
    a.tx_commit(bufs[i], static_cast<uint32_t>(frame.size()));
  }
  EXPECT_EQ(a.free_buffers(), 1u);  // committed frames are in flight: buffers stay busy
  EXPECT_TRUE(send(a, frame));
  EXPECT_FALSE(send(a, frame));
  EXPECT_EQ(link.in_flight(), 4u);
  clock.set(link.next_delivery_ns());
  EXPECT_EQ(link.deliver([](Endpoint &, const uint8_t *, uint32_t) {}), 4u);
  EXPECT_EQ(a.free_buffers(), 4u);
  // Dropped frames give their buffer back at once.
  Faults f;
  f.drop = 1.0;
  link.set_faults(f);
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(send(a, frame));
  EXPECT_EQ(a.free_buffers(), 4u);
}

TEST(FakeLinkDeathTest, CommitTwiceAborts) {
  FakeClock clock;
  FakeLink link(15, clock);
  Endpoint &a = link.add_endpoint(kMacA, 2);
  link.add_endpoint(kMacB);
  transport::TxBuf b = a.tx_alloc();
  std::memset(b.data, 0, 64);
  std::memcpy(b.data, kMacB, 6);
  a.tx_commit(b, 64);
  EXPECT_DEATH(a.tx_commit(b, 64), "twice");
  EXPECT_DEATH(link.add_endpoint(kMacA), "duplicate");
}

// Records everything observable: what was delivered where and when, and the counters.
std::vector<std::string> run_trace(uint64_t seed) {
  FakeClock clock;
  FakeLink link(seed, clock);
  Endpoint &a = link.add_endpoint(kMacA);
  Endpoint &b = link.add_endpoint(kMacB);
  Faults f;
  f.drop = 0.05;
  f.duplicate = 0.05;
  f.corrupt = 0.05;
  f.reorder = 0.05;
  f.jitter_ns = 3000;
  link.set_faults(f);
  Bottleneck bn;
  bn.bits_per_ns = 25;
  bn.ecn_threshold_bytes = 2000;
  link.set_bottleneck(bn);
  std::vector<std::string> trace;
  auto sink = [&](Endpoint &to, const uint8_t *fr, uint32_t len) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len; ++i)
      h = (h ^ fr[i]) * 16777619u;
    trace.push_back(std::to_string(clock.now_ns()) + " " + std::to_string(to.index()) + " " +
                    std::to_string(h));
  };
  for (uint32_t i = 0; i < 3000; ++i) {
    Endpoint &from = i % 3 ? a : b;
    send(from, make_frame(from.mac(), i % 3 ? kMacB : kMacA, i,
                          {.ecn = Ecn::kEct0, .payload = 16 + (i * 37) % 1000}));
    clock.advance(50 + (i * 13) % 200);
    link.deliver(sink);
  }
  while (link.next_delivery_ns() != UINT64_MAX) {
    clock.set(std::max(clock.now_ns(), link.next_delivery_ns()));
    link.deliver(sink);
  }
  const LinkCounters &c = link.counters();
  trace.push_back(std::to_string(c.delivered) + " " + std::to_string(c.dropped) + " " +
                  std::to_string(c.duplicated) + " " + std::to_string(c.reordered) + " " +
                  std::to_string(c.corrupted) + " " + std::to_string(c.ce_marked));
  EXPECT_GT(c.ce_marked, 0u);
  EXPECT_GT(c.reordered, 0u);
  return trace;
}

TEST(FakeLink, SameSeedSameTrace) {
  UROCE_SEED(seed, 16);
  const auto t1 = run_trace(seed);
  const auto t2 = run_trace(seed);
  EXPECT_GT(t1.size(), 2500u);
  EXPECT_EQ(t1, t2);
  EXPECT_NE(t1, run_trace(seed + 1));
}

TEST(FakeLink, CapturesFramesAsSentAndAsDelivered) {
  const std::string dir = ::testing::TempDir();
  const std::string sent_path = dir + "/fake_link_sent.pcap";
  const std::string rcvd_path = dir + "/fake_link_rcvd.pcap";
  {
    FakeClock clock;
    FakeLink link(17, clock);
    Endpoint &a = link.add_endpoint(kMacA);
    link.add_endpoint(kMacB);
    ASSERT_TRUE(link.capture(sent_path));
    ASSERT_TRUE(link.capture_delivered(rcvd_path));
    Faults f;
    f.drop = 0.5;
    link.set_faults(f);
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < 40; ++i) {
      const auto fr = make_frame(kMacA, kMacB, i, {.payload = i * 10});
      bytes += fr.size();
      ASSERT_TRUE(send(a, fr));
    }
    drain(link, clock);
    const uint64_t delivered = link.counters().delivered;
    ASSERT_GT(delivered, 0u);
    ASSERT_LT(delivered, 40u);
    link.stop_capture();
    // Classic pcap: 24-byte global header, 16-byte record header per frame.
    EXPECT_EQ(std::filesystem::file_size(sent_path), 24 + 40 * 16 + bytes);
    const auto rcvd = std::filesystem::file_size(rcvd_path);
    EXPECT_GT(rcvd, 24 + delivered * 16);
    EXPECT_LT(rcvd, 24 + 40 * 16 + bytes);
  }
  std::filesystem::remove(sent_path);
  std::filesystem::remove(rcvd_path);
}

}  // namespace
}  // namespace uroce::test
