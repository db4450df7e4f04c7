// SPDX-License-Identifier: BSD-3-Clause
// Microbenchmarks of the transport timing wheel (lib/transport/timer.h), per timer, with 1, 10k
// and 1M timers armed:
//   TimerArmCancel: arm one timer (a retransmit-like delay, 16 us .. 4 ms) and cancel it, with
//                   N-1 other timers armed across the wheel's levels.
//   TimerArmFire:   steady state of N periodic timers: each advance() of one tick fires the
//                   timers due and each re-arms itself one period later (period = N ticks, so
//                   about one timer fires per tick and the far ones cascade down the levels).
//                   Items = timers fired; the time per item includes advance() and the cascades.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "transport/timer.h"

namespace uroce::bench {
namespace {

using transport::TimerNode;
using transport::TimerWheel;

constexpr uint64_t kTick = 1024;

void TimerArmCancel(benchmark::State &state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<TimerNode> background(n - 1);  // declared first: outlives the wheel
  TimerWheel w(kTick, 0);
  std::mt19937_64 rng(42);
  for (auto &t : background)
    w.arm(&t, 1 + rng() % (uint64_t{1} << 32));
  std::vector<uint64_t> delays(4096);
  for (auto &d : delays)
    d = 16'000 + rng() % 4'000'000;
  TimerNode t;  // cancelled in every iteration
  size_t i = 0;
  for (auto _ : state) {
    w.arm(&t, delays[i++ & (delays.size() - 1)]);
    benchmark::DoNotOptimize(t.next);
    w.cancel(&t);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  benchmark::DoNotOptimize(w.size());
}
BENCHMARK(TimerArmCancel)->Arg(1)->Arg(10'000)->Arg(1'000'000);

void TimerArmFire(benchmark::State &state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const uint64_t period = n * kTick;
  std::vector<TimerNode> nodes(n);  // declared first: outlives the wheel
  TimerWheel w(kTick, 0);
  std::mt19937_64 rng(42);
  for (auto &t : nodes)
    w.arm(&t, 1 + rng() % period);
  uint64_t now = 0;
  uint64_t fired = 0;
  auto rearm = [&](TimerNode *t) { w.arm(t, t->expiry_ns + period); };
  for (auto _ : state) {
    now += kTick;
    fired += w.advance(now, rearm);
  }
  state.SetItemsProcessed(static_cast<int64_t>(fired));
  state.counters["fired_per_advance"] =
      static_cast<double>(fired) / static_cast<double>(state.iterations());
  benchmark::DoNotOptimize(w.size());
}
BENCHMARK(TimerArmFire)->Arg(1)->Arg(10'000)->Arg(1'000'000);

}  // namespace
}  // namespace uroce::bench

BENCHMARK_MAIN();
