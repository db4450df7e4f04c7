// SPDX-License-Identifier: BSD-3-Clause
// The device's shared object tables under rte_rcu_qsbr (daemon/qsbr.h, transport/tables.h):
// reader threads look MRs and AHs up and read through them, as workers do, while the control
// thread registers, retires, waits a grace period, poisons, frees and reuses. A reader that
// dereferenced a region after its grace period would read freed memory (ASan) or the poison
// (counted), and one that copied an AH path while its slot was refilled would see it torn.
// A reader that sleeps offline must not hold synchronize up; an online one must.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "daemon/qsbr.h"
#include "transport/tables.h"

namespace uroce::daemon {
namespace {

using transport::AhAttr;
using transport::MrCheck;
using transport::ObjectTables;

constexpr uint8_t kLive = 0xA5;
constexpr uint8_t kPoison = 0x5A;
constexpr uint32_t kBuf = 256;
constexpr uint32_t kPd = 1;
constexpr uint64_t kVa = 0x10000;

struct Shared {
  ObjectTables t{4, 64, 16, 99};
  std::atomic<uint32_t> keys[8] = {};  // published lkeys (0: none)
  std::atomic<uint32_t> ahs[4] = {};   // published AH handles
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0}, ah_reads{0}, bad{0};
  std::atomic<uint64_t> passes{0};  // every reader's, so the writer can wait for them to run
};

// Worker-like reader i: one "pass" = a few lookups and reads, then a quiescent state; every
// 64th pass it sleeps offline for a moment, as a worker in its Sleeper.
void reader(Shared &s, Qsbr &q, unsigned i) {
  q.start(i);
  uint64_t reads = 0, ah_reads = 0, bad = 0;
  for (uint64_t pass = 0; !s.stop.load(std::memory_order_acquire); ++pass) {
    for (auto &k : s.keys) {
      uint8_t *host = nullptr;
      const uint32_t key = k.load(std::memory_order_relaxed);
      if (key == 0 || s.t.mrs.check(key, kPd, kVa, kBuf, 0, &host) != MrCheck::kOk) continue;
      for (uint32_t b = 0; b < kBuf; ++b)
        bad += std::atomic_ref<uint8_t>(host[b]).load(std::memory_order_relaxed) != kLive;
      ++reads;
    }
    for (auto &a : s.ahs) {
      const wire::PathInfo *p = s.t.ahs.path(a.load(std::memory_order_relaxed), kPd);
      if (p == nullptr) continue;
      const wire::PathInfo copy = *p;  // as the requester copies it
      // Every byte of the MACs carries the same mark: a refill mid-copy tears it.
      for (int b = 0; b < 6; ++b)
        bad += copy.dmac[b] != copy.smac[0] || copy.smac[b] != copy.smac[0];
      ++ah_reads;
    }
    q.quiescent(i);
    s.passes.fetch_add(1, std::memory_order_relaxed);
    if (pass % 64 == 63) {
      q.offline(i);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      q.online(i);
    }
  }
  q.stop(i);
  s.reads += reads;
  s.ah_reads += ah_reads;
  s.bad += bad;
}

TEST(Qsbr, TablesUpdatedWhileReadersRunNeverExposeFreedMemory) {
  constexpr unsigned kReaders = 3;
  Shared s;
  Qsbr q(kReaders + 1);  // reader 0: this (control) thread, as main in uroced
  q.start(0);
  ASSERT_EQ(s.t.pds.alloc(), kPd);
  std::vector<std::thread> th;
  for (unsigned i = 1; i <= kReaders; ++i)
    th.emplace_back(reader, std::ref(s), std::ref(q), i);

  std::vector<uint8_t *> bufs(8, nullptr);
  uint8_t mark = 1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool ran = true;
  // (Checks in the loop are EXPECT_: the readers must be stopped and joined whatever happens.)
  for (int round = 0; round < 3000 && ran; ++round) {
    // Let the readers run a few passes each round (the machine may be shared): a bounded wait.
    const uint64_t seen = s.passes.load(std::memory_order_relaxed);
    while (ran && s.passes.load(std::memory_order_relaxed) < seen + kReaders) {
      ran = std::chrono::steady_clock::now() < deadline;
      std::this_thread::yield();
    }
    // An MR: register a fresh buffer under slot j, after retiring and freeing the old one.
    const unsigned j = static_cast<unsigned>(round) % 8;
    const uint32_t old = s.keys[j].exchange(0, std::memory_order_relaxed);
    if (old != 0) {
      EXPECT_EQ(s.t.retire_mr(old), 0);
      q.synchronize();
      for (uint32_t b = 0; b < kBuf; ++b)  // a late reader would count this ...
        std::atomic_ref<uint8_t>(bufs[j][b]).store(kPoison, std::memory_order_relaxed);
      delete[] bufs[j];  // ... or ASan report it
      s.t.release_mr(old);
    }
    bufs[j] = new uint8_t[kBuf];
    std::memset(bufs[j], kLive, kBuf);  // published by reg_mr's release store
    uint32_t key = 0;
    EXPECT_EQ(s.t.reg_mr(kPd, bufs[j], kVa, kBuf, 0, &key), 0);
    s.keys[j].store(key, std::memory_order_relaxed);
    // An AH: retire, wait, release, and refill the same slot with another mark.
    const unsigned a = static_cast<unsigned>(round) % 4;
    const uint32_t old_ah = s.ahs[a].exchange(0, std::memory_order_relaxed);
    if (old_ah != 0) {
      EXPECT_EQ(s.t.retire_ah(old_ah), 0);
      q.synchronize();
      s.t.release_ah(old_ah);
    }
    AhAttr attr;
    ++mark;
    std::memset(attr.path.dmac, mark, 6);
    std::memset(attr.path.smac, mark, 6);
    const uint32_t ah = s.t.create_ah(kPd, attr);
    EXPECT_NE(ah, 0u);
    s.ahs[a].store(ah, std::memory_order_relaxed);
  }
  s.stop.store(true, std::memory_order_release);
  for (auto &t : th)
    t.join();
  for (unsigned j = 0; j < 8; ++j)
    if (const uint32_t k = s.keys[j].load()) {
      ASSERT_EQ(s.t.retire_mr(k), 0);
      s.t.release_mr(k);
      delete[] bufs[j];
    }
  q.stop(0);
  EXPECT_TRUE(ran) << "the readers stopped running (bounded wait)";
  EXPECT_EQ(s.bad.load(), 0u);
  EXPECT_GT(s.reads.load(), 0u);  // the readers did read through live regions
  EXPECT_GT(s.ah_reads.load(), 0u);
  EXPECT_EQ(s.t.mrs.in_use(), 0u);
}

TEST(Qsbr, OfflineReaderDoesNotBlockAndOnlineReaderDoes) {
  Qsbr q(2);
  q.start(0);
  std::promise<void> asleep, wake, online;
  std::atomic<bool> reported{false};
  std::thread r([&] {
    q.start(1);
    q.offline(1);  // asleep in its Sleeper
    asleep.set_value();
    wake.get_future().wait();
    q.online(1);
    online.set_value();
    // Online and silent: a grace period started now must wait for the report below.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    reported.store(true);
    q.quiescent(1);
    q.stop(1);
  });
  asleep.get_future().wait();
  // Bounded wait: a sleeping reader must not hold synchronize up (it never wakes otherwise).
  auto done = std::async(std::launch::async, [&] { q.synchronize(); });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  wake.set_value();
  online.get_future().wait();
  q.synchronize();
  EXPECT_TRUE(reported.load());  // it waited for the online reader's quiescent state
  r.join();
  q.stop(0);
}

}  // namespace
}  // namespace uroce::daemon
