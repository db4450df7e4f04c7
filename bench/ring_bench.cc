// SPDX-License-Identifier: BSD-3-Clause
// SPSC ring microbenchmarks (64-byte slots, the CQE / doorbell-batch size) with same-run
// baselines: a bare 64-byte memcpy into a slot array, and a std::mutex-protected std::deque.
// Results and the exact command: doc/ipc.md.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "uroce/ring.h"

namespace {

using uroce::shm::RingConsumer;
using uroce::shm::RingError;
using uroce::shm::RingProducer;

struct Item {
  uint64_t w[8];
};
static_assert(sizeof(Item) == 64);

constexpr uint32_t kCount = 1024;

struct Ring {
  Ring() : mem(uroce::abi::ring_bytes(sizeof(Item), kCount) + 64) {
    auto p = reinterpret_cast<uintptr_t>(mem.data());
    base = reinterpret_cast<void *>((p + 63) & ~uintptr_t{63});
    const size_t bytes = uroce::abi::ring_bytes(sizeof(Item), kCount);
    if (uroce::shm::ring_init(base, bytes, sizeof(Item), kCount) != RingError::kOk ||
        p_.attach(base, bytes, sizeof(Item), kCount) != RingError::kOk ||
        c_.attach(base, bytes, sizeof(Item), kCount) != RingError::kOk)
      std::abort();
  }
  std::vector<std::byte> mem;
  void *base;
  RingProducer p_;
  RingConsumer c_;
};

void BM_RingPushPop(benchmark::State &state) {
  Ring r;
  Item in{}, out{};
  for (auto _ : state) {
    in.w[0]++;
    benchmark::DoNotOptimize(r.p_.try_push(in));
    benchmark::DoNotOptimize(r.c_.try_pop(&out));
    benchmark::ClobberMemory();
  }
  if (out.w[0] != in.w[0]) state.SkipWithError("lost item");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RingPushPop);

void BM_RingBurst32(benchmark::State &state) {
  Ring r;
  Item in[32] = {}, out[32];
  for (auto _ : state) {
    in[0].w[0]++;
    benchmark::DoNotOptimize(r.p_.push_burst(in, 32));
    benchmark::DoNotOptimize(r.c_.pop_burst(out, 32));
    benchmark::ClobberMemory();
  }
  if (out[0].w[0] != in[0].w[0]) state.SkipWithError("lost item");
  state.SetItemsProcessed(state.iterations() * 32);
}
BENCHMARK(BM_RingBurst32);

// Baseline: the copy alone (what a push or a pop must do at minimum).
void BM_Memcpy64(benchmark::State &state) {
  std::vector<Item> slots(kCount);
  Item in{};
  uint32_t i = 0;
  for (auto _ : state) {
    in.w[0]++;
    std::memcpy(&slots[i++ & (kCount - 1)], &in, sizeof(in));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Memcpy64);

// Baseline: push + pop through a locked deque, single thread (uncontended lock).
void BM_MutexDequePushPop(benchmark::State &state) {
  std::mutex mu;
  std::deque<Item> q;
  Item in{}, out{};
  for (auto _ : state) {
    in.w[0]++;
    {
      std::lock_guard<std::mutex> g(mu);
      q.push_back(in);
    }
    {
      std::lock_guard<std::mutex> g(mu);
      out = q.front();
      q.pop_front();
    }
    benchmark::ClobberMemory();
  }
  if (out.w[0] != in.w[0]) state.SkipWithError("lost item");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MutexDequePushPop);

// Cross-thread: a producer thread pushes bursts of `burst` items as fast as it can; the
// benchmark thread pops bursts. Items/s is the transfer rate. Both sides yield when blocked so
// the run completes on shared cores; on two dedicated cores the yields are rare.
void BM_RingCrossThread(benchmark::State &state) {
  const size_t burst = static_cast<size_t>(state.range(0));
  Ring r;
  std::atomic<bool> stop{false};
  std::thread prod([&] {
    std::vector<Item> buf(burst);
    uint64_t seq = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      for (size_t i = 0; i < burst; ++i)
        buf[i].w[0] = seq + i;
      size_t n = r.p_.push_burst(buf.data(), burst);
      if (n == 0) std::this_thread::yield();
      seq += n;
    }
  });
  std::vector<Item> out(burst);
  uint64_t expect = 0, items = 0;
  bool order_ok = true;
  for (auto _ : state) {
    size_t n;
    while ((n = r.c_.pop_burst(out.data(), burst)) == 0)
      std::this_thread::yield();
    for (size_t i = 0; i < n; ++i)
      order_ok &= out[i].w[0] == expect + i;
    expect += n;
    items += n;
  }
  stop = true;
  prod.join();
  if (!order_ok) state.SkipWithError("out of order");
  state.SetItemsProcessed(static_cast<int64_t>(items));
}
BENCHMARK(BM_RingCrossThread)->Arg(1)->Arg(32)->UseRealTime();

void BM_MutexDequeCrossThread(benchmark::State &state) {
  const size_t burst = static_cast<size_t>(state.range(0));
  std::mutex mu;
  std::deque<Item> q;
  std::atomic<bool> stop{false};
  std::thread prod([&] {
    uint64_t seq = 0;
    Item it{};
    while (!stop.load(std::memory_order_relaxed)) {
      bool full;
      {
        std::lock_guard<std::mutex> g(mu);
        full = q.size() >= kCount;
        if (!full) {
          for (size_t i = 0; i < burst; ++i) {
            it.w[0] = seq++;
            q.push_back(it);
          }
        }
      }
      if (full) std::this_thread::yield();
    }
  });
  uint64_t expect = 0, items = 0;
  bool order_ok = true;
  Item out[32];
  for (auto _ : state) {
    size_t n = 0;
    while (n == 0) {
      {
        std::lock_guard<std::mutex> g(mu);
        while (n < burst && !q.empty()) {
          out[n++] = q.front();
          q.pop_front();
        }
      }
      if (n == 0) std::this_thread::yield();
    }
    for (size_t i = 0; i < n; ++i)
      order_ok &= out[i].w[0] == expect + i;
    expect += n;
    items += n;
  }
  stop = true;
  prod.join();
  if (!order_ok) state.SkipWithError("out of order");
  state.SetItemsProcessed(static_cast<int64_t>(items));
}
BENCHMARK(BM_MutexDequeCrossThread)->Arg(1)->Arg(32)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
