// SPDX-License-Identifier: BSD-3-Clause
// lib/daemon/lcore.h: QPN <-> owner, the BTH destination QP of a frame, QP placement, the
// inter-lcore SPSC ring (items, including owned pointers, cross threads exactly once and in
// order; a full ring refuses) and the command channel (a closure runs on the worker thread,
// its effects are visible to the caller, exceptions come back).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "daemon/lcore.h"

namespace uroce::daemon {
namespace {

TEST(Lcore, QpnCarriesItsOwner) {
  constexpr uint32_t kBase = 0x11;
  EXPECT_EQ(worker_qpn_base(0, kBase), kBase);  // one worker: numbering unchanged
  for (uint32_t w = 0; w < 4; ++w) {
    const uint32_t base = worker_qpn_base(w, kBase);
    EXPECT_EQ(qpn_owner(base, 4), w);
    EXPECT_EQ(qpn_owner(base + kMaxQpPerWorker - 1, 4), w);
    EXPECT_LT(base + kMaxQpPerWorker - 1, 1u << 24) << "QPNs are 24 bits";
  }
  EXPECT_EQ(qpn_owner(1, 4), 0u) << "QP1 and unknown QPNs go to worker 0";
  EXPECT_EQ(qpn_owner(worker_qpn_base(5, kBase), 4), 0u) << "a worker that does not exist";
  EXPECT_EQ(qpn_owner(0xffffff, 2), 0u);
  EXPECT_EQ(qpn_owner(worker_qpn_base(1, kBase) | 0xff000000u, 2), 1u) << "only 24 bits count";
}

// Ethernet [+ 802.1Q] + IPv4 / IPv6 + UDP + BTH with destination QP `qpn`.
std::vector<uint8_t> roce_frame(bool v6, bool vlan, uint32_t qpn) {
  std::vector<uint8_t> f(14 + (vlan ? 4 : 0) + (v6 ? 40 : 20) + 8 + 12 + 4, 0);
  size_t off = 12;
  if (vlan) {
    f[off] = 0x81;
    f[off + 1] = 0x00;
    off += 4;
  }
  f[off] = v6 ? 0x86 : 0x08;
  f[off + 1] = v6 ? 0xdd : 0x00;
  off += 2 + (v6 ? 40 : 20) + 8;
  f[off + 5] = static_cast<uint8_t>(qpn >> 16);
  f[off + 6] = static_cast<uint8_t>(qpn >> 8);
  f[off + 7] = static_cast<uint8_t>(qpn);
  f[off + 4] = 0xee;  // the byte before the QPN (reserved) must not leak into it
  return f;
}

TEST(Lcore, FrameDestQpn) {
  for (bool v6 : {false, true})
    for (bool vlan : {false, true}) {
      const auto f = roce_frame(v6, vlan, 0x01a2b3);
      EXPECT_EQ(frame_dest_qpn(f.data(), static_cast<uint32_t>(f.size())), 0x01a2b3u)
          << "v6 " << v6 << " vlan " << vlan;
      // Every truncation that cuts the BTH gives 0, never a read beyond len (ASan).
      const uint32_t need = static_cast<uint32_t>(f.size()) - 4;
      for (uint32_t len = 0; len < need; ++len) {
        std::vector<uint8_t> cut(f.begin(), f.begin() + len);
        EXPECT_EQ(frame_dest_qpn(cut.data(), len), 0u) << len;
      }
    }
  auto arp = roce_frame(false, false, 0x10011);
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(frame_dest_qpn(arp.data(), static_cast<uint32_t>(arp.size())), 0u);
}

TEST(Lcore, Placement) {
  const uint32_t load[3] = {4, 2, 2};
  const int none[3] = {kUnbound, kUnbound, kUnbound};
  EXPECT_EQ(place_qp(none, 3, load, 3), 1) << "least loaded, lowest index on a tie";
  const uint32_t even[2] = {3, 3};
  EXPECT_EQ(place_qp(none, 2, even, 2), 0);
  const int one[3] = {kUnbound, 2, kUnbound};
  EXPECT_EQ(place_qp(one, 3, load, 3), 2) << "a bound CQ decides, whatever the load";
  const int agree[3] = {0, 0, 0};
  EXPECT_EQ(place_qp(agree, 3, load, 3), 0);
  const int conflict[3] = {1, kUnbound, 0};
  EXPECT_EQ(place_qp(conflict, 3, load, 3), 1)
      << "SRQ on 1, CQ on 0: the first binding in priority order (the CQ gets a forward ring)";
  const int bad[1] = {7};
  EXPECT_EQ(place_qp(bad, 1, load, 3), kUnbound);
  EXPECT_EQ(place_qp(none, 3, load, 0), kUnbound);
  const uint32_t one_worker[1] = {100};
  EXPECT_EQ(place_qp(none, 3, one_worker, 1), 0);
}

struct Item {
  uint64_t seq;
  int *owned;  // ownership moves with the item, as an mbuf does
};

TEST(Lcore, LocalRingMovesOwnershipInOrderAcrossThreads) {
  LocalRing<Item> r(64);
  EXPECT_EQ(r.capacity(), 64u);
  // Single-threaded: a full ring refuses (the caller frees and counts).
  for (uint64_t i = 0; i < 64; ++i)
    ASSERT_TRUE(r.push(Item{i, nullptr}));
  EXPECT_FALSE(r.push(Item{64, nullptr}));
  Item it{};
  for (uint64_t i = 0; i < 64; ++i) {
    ASSERT_TRUE(r.pop(&it));
    EXPECT_EQ(it.seq, i);
  }
  EXPECT_FALSE(r.pop(&it));

  // Two threads: every item arrives once, in order; the consumer frees what it received (ASan
  // and LSan see any loss or double free); the producer frees what the full ring refused.
  constexpr uint64_t kItems = 200'000;
  std::atomic<uint64_t> refused{0};
  std::thread prod([&] {
    for (uint64_t i = 0; i < kItems;) {
      int *p = new int(static_cast<int>(i));
      if (r.push(Item{i, p})) {
        ++i;
      } else {
        delete p;
        refused.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::yield();
      }
    }
  });
  uint64_t next = 0;
  while (next < kItems) {
    Item got[16];
    const size_t n = r.pop_burst(got, 16);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i].seq, next);
      ASSERT_EQ(*got[i].owned, static_cast<int>(next));
      delete got[i].owned;
      ++next;
    }
    if (n == 0) std::this_thread::yield();
  }
  prod.join();
  EXPECT_FALSE(r.pop(&it));
}

TEST(Lcore, CommandChannelRunsOnTheWorkerAndReturnsItsEffects) {
  CmdChannel ch;
  std::atomic<bool> stop{false};
  std::thread::id worker_id;
  std::vector<int> worker_state;  // touched by the worker thread only (inside commands)
  std::atomic<unsigned> served{0};
  std::thread worker([&] {
    worker_id = std::this_thread::get_id();
    while (!stop.load(std::memory_order_acquire)) {
      const unsigned n = ch.serve();
      served.fetch_add(n, std::memory_order_relaxed);
      if (n == 0) std::this_thread::yield();
    }
  });
  unsigned waits = 0;
  auto wait = [&] {
    ++waits;
    std::this_thread::yield();
  };
  for (int i = 0; i < 2000; ++i) {
    int seen_size = -1;
    std::thread::id ran_on;
    auto f = [&] {
      ran_on = std::this_thread::get_id();
      worker_state.push_back(i);  // may allocate: control operations may
      seen_size = static_cast<int>(worker_state.size());
    };
    ch.call(f, wait);
    ASSERT_EQ(seen_size, i + 1) << "the closure's writes are visible when call returns";
    ASSERT_NE(ran_on, std::this_thread::get_id());
  }
  bool threw = false;
  auto bad = [] { throw std::runtime_error("on the worker"); };
  try {
    ch.call(bad, wait);
  } catch (const std::runtime_error &e) {
    threw = std::strcmp(e.what(), "on the worker") == 0;
  }
  EXPECT_TRUE(threw) << "an exception on the worker comes back to the caller";
  int after = 0;
  auto ok = [&] { after = 42; };
  ch.call(ok, wait);
  EXPECT_EQ(after, 42) << "the channel still works after an exception";
  stop.store(true, std::memory_order_release);
  worker.join();
  EXPECT_EQ(worker_state.size(), 2000u);
  EXPECT_EQ(served.load(), 2002u);
  EXPECT_EQ(ch.calls(), 2002u);
}

}  // namespace
}  // namespace uroce::daemon
