// SPDX-License-Identifier: BSD-3-Clause
// port/tx_backlog.h: frames a fake TX ring refuses stay queued and go first, in order, at the
// next drain; nothing is lost or sent twice; a full backlog refuses; only discard() drops.
#include "port/tx_backlog.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <vector>

namespace uroce::port {
namespace {

struct Frame {
  uint32_t seq = 0;
};

// A TX ring of `cap` slots that a "NIC" empties when the test says so; burst() takes what
// fits, like rte_eth_tx_burst.
struct FakeRing {
  size_t cap;
  std::deque<Frame *> slots;
  std::vector<uint32_t> wire;  // sequence numbers in the order they left the ring
  unsigned calls = 0;
  uint16_t burst(Frame **pkts, uint16_t n) {
    ++calls;
    uint16_t k = 0;
    while (k < n && slots.size() < cap)
      slots.push_back(pkts[k++]);
    return k;
  }
  void transmit(size_t n) {
    for (; n != 0 && !slots.empty(); --n) {
      wire.push_back(slots.front()->seq);
      slots.pop_front();
    }
  }
};

TEST(TxBacklog, RefusedFramesAreRetriedFirstInOrder) {
  TxBacklog<Frame, 64> b;
  FakeRing ring{10, {}, {}, 0};
  std::vector<Frame> frames(1000);
  uint32_t next = 0;
  uint64_t sent = 0, bytes = 0, refusals = 0, deferred = 0;
  auto burst = [&ring](Frame **p, uint16_t n) { return ring.burst(p, n); };
  // Commit in uneven rounds, drain after each, let the ring empty slower than we commit.
  for (int round = 0; next < frames.size() || !b.empty(); ++round) {
    ASSERT_LT(round, 10000);
    for (int i = 0; i < 7 && next < frames.size() && !b.full(); ++i) {
      frames[next].seq = next;
      ASSERT_TRUE(b.push(&frames[next], 100 + next));
      ++next;
    }
    const TxDrained d = b.drain(burst);
    sent += d.sent;
    bytes += d.bytes;
    refusals += d.refused;
    deferred += d.deferred;
    EXPECT_EQ(d.refused, !b.empty());
    ring.transmit(round % 3 == 0 ? 2 : 5);
  }
  ring.transmit(SIZE_MAX);
  ASSERT_EQ(ring.wire.size(), frames.size());  // nothing lost, nothing twice
  for (uint32_t i = 0; i < frames.size(); ++i)
    ASSERT_EQ(ring.wire[i], i) << "out of order at " << i;
  EXPECT_EQ(sent, frames.size());
  uint64_t want_bytes = 0;
  for (uint32_t i = 0; i < frames.size(); ++i)
    want_bytes += 100 + i;
  EXPECT_EQ(bytes, want_bytes);
  EXPECT_GT(refusals, 0u);  // the ring did refuse: the retry path ran
  // Each frame refused counts once however often it was offered: at most one per frame, and
  // fewer than the refusal episodes times the backlog.
  EXPECT_GT(deferred, 0u);
  EXPECT_LE(deferred, frames.size());
}

TEST(TxBacklog, FullRefusesAndWrapsAround) {
  TxBacklog<Frame, 8> b;
  std::vector<Frame> f(20);
  for (uint32_t i = 0; i < 20; ++i)
    f[i].seq = i;
  for (uint32_t i = 0; i < 8; ++i)
    ASSERT_TRUE(b.push(&f[i], 1));
  EXPECT_TRUE(b.full());
  EXPECT_FALSE(b.push(&f[8], 1));  // refused, nothing stored
  EXPECT_EQ(b.size(), 8u);
  EXPECT_EQ(b.fresh(), 8u);
  // A ring that takes 3 then refuses.
  std::vector<uint32_t> out;
  auto take3 = [&out](Frame **p, uint16_t n) {
    uint16_t k = n < 3 ? n : 3;
    for (uint16_t i = 0; i < k; ++i)
      out.push_back(p[i]->seq);
    return k;
  };
  TxDrained d = b.drain(take3);
  EXPECT_EQ(d.sent, 3u);
  EXPECT_TRUE(d.refused);
  EXPECT_EQ(d.deferred, 5u);
  EXPECT_EQ(b.fresh(), 0u);
  for (uint32_t i = 8; i < 11; ++i)
    ASSERT_TRUE(b.push(&f[i], 1));  // these wrap around the array's end
  EXPECT_TRUE(b.full());
  // Slices stop at the array's end: a ring taking everything sees two slices.
  unsigned calls = 0;
  auto all = [&](Frame **p, uint16_t n) {
    ++calls;
    for (uint16_t i = 0; i < n; ++i)
      out.push_back(p[i]->seq);
    return n;
  };
  d = b.drain(all);
  EXPECT_EQ(d.sent, 8u);
  EXPECT_FALSE(d.refused);
  EXPECT_EQ(calls, 2u);
  EXPECT_TRUE(b.empty());
  ASSERT_EQ(out.size(), 11u);
  for (uint32_t i = 0; i < 11; ++i)
    EXPECT_EQ(out[i], i);
  // A burst function claiming more than it was offered cannot make frames vanish twice.
  ASSERT_TRUE(b.push(&f[11], 1));
  d = b.drain([](Frame **, uint16_t n) { return static_cast<uint16_t>(n + 5); });
  EXPECT_EQ(d.sent, 1u);
  EXPECT_TRUE(b.empty());
}

TEST(TxBacklog, DrainOfARefusingRingKeepsEverything) {
  TxBacklog<Frame, 16> b;
  Frame f[5];
  for (auto &x : f)
    ASSERT_TRUE(b.push(&x, 60));
  const TxDrained d = b.drain([](Frame **, uint16_t) { return uint16_t{0}; });
  EXPECT_EQ(d.sent, 0u);
  EXPECT_EQ(d.bytes, 0u);
  EXPECT_TRUE(d.refused);
  EXPECT_EQ(d.deferred, 5u);
  EXPECT_EQ(b.size(), 5u);
  // Refused again: still kept, but not deferred a second time (each frame counts once).
  const TxDrained again = b.drain([](Frame **, uint16_t) { return uint16_t{0}; });
  EXPECT_TRUE(again.refused);
  EXPECT_EQ(again.deferred, 0u);
  EXPECT_EQ(b.size(), 5u);
  // Only discard() lets go of them, oldest first.
  std::vector<Frame *> freed;
  EXPECT_EQ(b.discard([&](Frame *p) { freed.push_back(p); }), 5u);
  ASSERT_EQ(freed.size(), 5u);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(freed[i], &f[i]);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.drain([](Frame **, uint16_t) { return uint16_t{0}; }).refused, false);
}

// The ports' commit path (make_room / commit / count, shared by EthPort and PortQueue): a
// burst's worth of fresh frames flushes, a full backlog flushes once before it refuses, and a
// commit into a backlog the ring still refuses fails with nothing stored.
TEST(TxBacklog, CommitFlushesABurstAndOnceMoreWhenFull) {
  TxBacklog<Frame, 64> b;
  FakeRing ring{40, {}, {}, 0};
  struct {
    uint64_t tx_packets = 0, tx_bytes = 0, tx_deferred = 0;
  } c;
  unsigned flushes = 0;
  auto flush = [&] {
    ++flushes;
    b.drain([&ring](Frame **p, uint16_t n) { return ring.burst(p, n); }).count(c);
  };
  std::vector<Frame> f(200);
  for (uint32_t i = 0; i < f.size(); ++i)
    f[i].seq = i;
  // 31 commits: no flush; the 32nd (kMaxBurst fresh frames) flushes them all into the ring.
  for (uint32_t i = 0; i < 31; ++i)
    ASSERT_TRUE(b.commit(&f[i], 10, flush));
  EXPECT_EQ(flushes, 0u);
  EXPECT_EQ(b.size(), 31u);
  ASSERT_TRUE(b.commit(&f[31], 10, flush));
  EXPECT_EQ(flushes, 1u);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(c.tx_packets, 32u);
  EXPECT_EQ(c.tx_bytes, 320u);
  EXPECT_EQ(c.tx_deferred, 0u);
  // The ring holds 8 more; the rest stays queued: fill the backlog (64) through commits.
  uint32_t next = 32;
  while (!b.full()) {
    ASSERT_TRUE(b.commit(&f[next], 10, flush)) << next;
    ++next;
  }
  EXPECT_EQ(c.tx_packets, 40u);
  EXPECT_GT(c.tx_deferred, 0u);
  EXPECT_LE(c.tx_deferred, next - 40u);
  // Full and the ring still refuses: make_room and commit flush once more, then refuse.
  const unsigned before = flushes;
  EXPECT_FALSE(b.make_room(flush));
  EXPECT_EQ(flushes, before + 1);
  EXPECT_FALSE(b.commit(&f[next], 10, flush));
  EXPECT_EQ(flushes, before + 2);
  EXPECT_EQ(b.size(), 64u);  // nothing stored
  // The NIC sends 20: make_room's flush moves 20 into the ring and there is room again.
  ring.transmit(20);
  EXPECT_TRUE(b.make_room(flush));
  EXPECT_EQ(b.size(), 44u);
  ASSERT_TRUE(b.commit(&f[next], 10, flush));  // the refused frame, committed again
  ++next;
  // Everything arrives once and in order (the refused commit stored nothing).
  while (!b.empty()) {
    ring.transmit(SIZE_MAX);
    flush();
  }
  ring.transmit(SIZE_MAX);
  ASSERT_EQ(ring.wire.size(), next);
  for (uint32_t i = 0; i < ring.wire.size(); ++i)
    ASSERT_EQ(ring.wire[i], i);
  EXPECT_EQ(c.tx_packets, next);
  EXPECT_EQ(c.tx_bytes, 10u * next);
}

}  // namespace
}  // namespace uroce::port
