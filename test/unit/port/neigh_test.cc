// SPDX-License-Identifier: BSD-3-Clause
// The neighbour state machine (port/neigh.h) transition by transition with a fake clock, and
// the bounded wait of port/neigh_wait.h over an Nd whose peer answers late, never, or after a
// failure (the loop's step() advances the fake clock and delivers the peer's answer).
#include "port/neigh.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "config/config.h"
#include "port/nd.h"
#include "port/neigh_wait.h"

namespace uroce::port {
namespace {

using Table = NeighTable<4>;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSec = 1'000 * kMs;
const uint8_t kIp[4] = {10, 0, 0, 1};
const uint8_t kMac[6] = {2, 0, 0, 0, 0, 1};

NeighParams small() {
  NeighParams p;
  p.retrans_ns = 100;
  p.max_probes = 3;
  p.retry_ns = 1000;
  p.reachable_ns = 10'000;
  p.gc_stale_ns = 50'000;
  return p;
}

struct Probe {
  Resolve r;
  bool probe_now, unicast;
};
Probe use(Table &t, uint64_t now, uint8_t mac[6]) {
  Probe p{};
  p.r = t.resolve(kIp, now, mac, &p.probe_now, &p.unicast);
  return p;
}
// Runs poll() until it is done for `now`; returns the probes it asked for.
std::vector<Table::Action> tick(Table &t, uint64_t now) {
  std::vector<Table::Action> v;
  const Table::Entry *e = nullptr;
  for (Table::Action a; (a = t.poll(now, &e)) != Table::Action::kNone;)
    v.push_back(a);
  return v;
}
NeighState state(const Table &t) {
  return t.find(kIp) ? t.find(kIp)->state : NeighState::kFree;
}

TEST(Neigh, FreeToIncompleteToReachable) {
  Table t(small());
  uint8_t mac[6];
  Probe p = use(t, 0, mac);
  EXPECT_EQ(p.r, Resolve::kPending);
  EXPECT_TRUE(p.probe_now);
  EXPECT_FALSE(p.unicast);
  EXPECT_EQ(state(t), NeighState::kIncomplete);
  EXPECT_TRUE(t.confirm(kIp, kMac, 50, /*create=*/false));
  EXPECT_EQ(state(t), NeighState::kReachable);
  p = use(t, 60, mac);
  EXPECT_EQ(p.r, Resolve::kResolved);
  EXPECT_FALSE(p.probe_now);
  EXPECT_EQ(0, std::memcmp(mac, kMac, 6));
}

TEST(Neigh, IncompleteProbesEveryRetransThenFailsWithoutAnswer) {
  Table t(small());
  uint8_t mac[6];
  use(t, 0, mac);
  EXPECT_TRUE(tick(t, 99).empty());
  EXPECT_EQ(tick(t, 100), std::vector{Table::Action::kBroadcastProbe});
  EXPECT_EQ(tick(t, 200), std::vector{Table::Action::kBroadcastProbe});
  EXPECT_TRUE(tick(t, 299).empty());
  EXPECT_EQ(state(t), NeighState::kIncomplete);
  EXPECT_TRUE(tick(t, 300).empty());
  EXPECT_EQ(state(t), NeighState::kFailed);
  EXPECT_EQ(t.failures(), 1u);
  EXPECT_EQ(t.failures_answer_ignored(), 0u);
}

TEST(Neigh, FailedIsRetriedWhenUsedAtMostOncePerRetryInterval) {
  Table t(small());
  uint8_t mac[6];
  use(t, 0, mac);
  tick(t, 100), tick(t, 200), tick(t, 300);
  ASSERT_EQ(state(t), NeighState::kFailed);
  Probe p = use(t, 301, mac);
  EXPECT_EQ(p.r, Resolve::kFailed);
  EXPECT_FALSE(p.probe_now);
  p = use(t, 1299, mac);
  EXPECT_EQ(p.r, Resolve::kFailed);
  EXPECT_FALSE(p.probe_now);
  p = use(t, 1300, mac);  // retry_ns after the failure: a new episode, probe at once
  EXPECT_EQ(p.r, Resolve::kPending);
  EXPECT_TRUE(p.probe_now);
  EXPECT_FALSE(p.unicast);
  EXPECT_EQ(state(t), NeighState::kIncomplete);
  p = use(t, 1310, mac);  // one episode at a time
  EXPECT_EQ(p.r, Resolve::kPending);
  EXPECT_FALSE(p.probe_now);
  EXPECT_EQ(tick(t, 1400), std::vector{Table::Action::kBroadcastProbe});
  EXPECT_EQ(tick(t, 1500), std::vector{Table::Action::kBroadcastProbe});
  tick(t, 1600);
  EXPECT_EQ(state(t), NeighState::kFailed);
  EXPECT_EQ(t.failures(), 2u);
}

TEST(Neigh, FailedAcceptsALateAnswer) {
  Table t(small());
  uint8_t mac[6];
  use(t, 0, mac);
  tick(t, 100), tick(t, 200), tick(t, 300);
  ASSERT_EQ(state(t), NeighState::kFailed);
  t.confirm(kIp, kMac, 310, /*create=*/false);  // the answer to the last probe, late
  EXPECT_EQ(state(t), NeighState::kReachable);
  EXPECT_EQ(use(t, 320, mac).r, Resolve::kResolved);
  // A peer's request (learn) also gives a failed entry its MAC back, as stale.
  Table u(small());
  use(u, 0, mac);
  tick(u, 100), tick(u, 200), tick(u, 300);
  u.learn(kIp, kMac, 400, /*create=*/false);
  EXPECT_EQ(state(u), NeighState::kStale);
  EXPECT_EQ(use(u, 410, mac).r, Resolve::kResolved);
}

TEST(Neigh, ReachableToStaleToProbeUsesTheMacThenConfirms) {
  Table t(small());
  uint8_t mac[6];
  use(t, 0, mac);
  t.confirm(kIp, kMac, 50, false);
  EXPECT_TRUE(tick(t, 10'049).empty());
  EXPECT_EQ(state(t), NeighState::kReachable);
  tick(t, 10'050);
  EXPECT_EQ(state(t), NeighState::kStale);
  Probe p = use(t, 10'100, mac);  // stale: used while it is re-probed
  EXPECT_EQ(p.r, Resolve::kResolved);
  EXPECT_TRUE(p.probe_now);
  EXPECT_TRUE(p.unicast);
  EXPECT_EQ(0, std::memcmp(mac, kMac, 6));
  EXPECT_EQ(state(t), NeighState::kProbe);
  EXPECT_EQ(tick(t, 10'200), std::vector{Table::Action::kUnicastProbe});
  EXPECT_EQ(use(t, 10'210, mac).r, Resolve::kResolved);  // still usable while probing
  t.confirm(kIp, kMac, 10'250, false);
  EXPECT_EQ(state(t), NeighState::kReachable);
  EXPECT_TRUE(tick(t, 10'300).empty());
}

TEST(Neigh, ReachableUsedAfterItsTimeIsReprobed) {
  Table t(small());
  uint8_t mac[6];
  use(t, 0, mac);
  t.confirm(kIp, kMac, 50, false);
  const Probe p = use(t, 10'050, mac);  // expired, no poll() in between
  EXPECT_EQ(p.r, Resolve::kResolved);
  EXPECT_TRUE(p.unicast);
  EXPECT_EQ(state(t), NeighState::kProbe);
}

TEST(Neigh, ProbeFailsWithoutAnswerAndDropsTheMac) {
  Table t(small());
  uint8_t mac[6];
  t.learn(kIp, kMac, 0, /*create=*/true);
  ASSERT_EQ(state(t), NeighState::kStale);
  use(t, 10, mac);
  EXPECT_EQ(tick(t, 110), std::vector{Table::Action::kUnicastProbe});
  EXPECT_EQ(tick(t, 210), std::vector{Table::Action::kUnicastProbe});
  EXPECT_TRUE(tick(t, 310).empty());
  EXPECT_EQ(state(t), NeighState::kFailed);
  EXPECT_EQ(use(t, 320, mac).r, Resolve::kFailed);
  EXPECT_EQ(use(t, 1310, mac).r, Resolve::kPending);  // retried as a new (broadcast) episode
  EXPECT_EQ(state(t), NeighState::kIncomplete);
}

TEST(Neigh, IgnoredAnswerMarksTheFailure) {
  Table t(small());
  uint8_t mac[6];
  t.answer_ignored(kIp);  // no entry: nothing to mark
  use(t, 0, mac);
  t.answer_ignored(kIp);
  tick(t, 100), tick(t, 200), tick(t, 300);
  EXPECT_EQ(t.failures(), 1u);
  EXPECT_EQ(t.failures_answer_ignored(), 1u);
  // A new episode starts unmarked.
  use(t, 1300, mac);
  tick(t, 1400), tick(t, 1500), tick(t, 1600);
  EXPECT_EQ(t.failures(), 2u);
  EXPECT_EQ(t.failures_answer_ignored(), 1u);
}

TEST(Neigh, UnusedStaleAndFailedEntriesAreCollected) {
  Table t(small());
  uint8_t mac[6];
  use(t, 0, mac);
  tick(t, 100), tick(t, 200), tick(t, 300);  // failed at 300
  use(t, 1000, mac);                         // used (kFailed): kept
  tick(t, 50'999);
  EXPECT_EQ(state(t), NeighState::kFailed);
  tick(t, 51'000);
  EXPECT_EQ(state(t), NeighState::kFree);
  EXPECT_EQ(t.used(), 0u);
}

TEST(Neigh, MakeStaleOnlyTouchesReachable) {
  Table t(small());
  uint8_t mac[6];
  use(t, 0, mac);
  t.make_stale(kIp);
  EXPECT_EQ(state(t), NeighState::kIncomplete);
  t.confirm(kIp, kMac, 10, false);
  t.make_stale(kIp);
  EXPECT_EQ(state(t), NeighState::kStale);
}

// ---- the bounded wait over ND, with a peer that answers when told to ----

const uint8_t kOurMac[6] = {0x52, 0xb8, 0x2d, 0x95, 0x25, 0x38};

struct Rig {
  Nd nd;
  uint64_t now = 0;
  uint64_t answer_from = UINT64_MAX;  // the peer answers NS sent at or after this time
  unsigned steps = 0, naps = 0, ns_seen = 0;
  uint8_t peer[16];
  uint8_t out[128];

  explicit Rig(const NeighParams &p) : nd(kOurMac, {}, p) {
    EXPECT_TRUE(config::parse_ipv6("fe80::1", peer));
  }
  // The peer's solicited NA (S and O set, TLLA 02:00:00:00:00:01), to our link-local address.
  std::vector<uint8_t> na() const {
    std::vector<uint8_t> f(14 + 40 + 32, 0);
    std::memcpy(f.data(), kOurMac, 6);
    std::memcpy(f.data() + 6, kMac, 6);
    f[12] = 0x86, f[13] = 0xdd, f[14] = 0x60, f[19] = 32, f[20] = 58, f[21] = 255;
    std::memcpy(f.data() + 22, peer, 16);
    std::memcpy(f.data() + 38, nd.addr(0), 16);
    uint8_t *m = f.data() + 54;
    m[0] = Nd::kTypeNa, m[4] = 0x60;
    std::memcpy(m + 8, peer, 16);
    m[24] = 2, m[25] = 1;
    std::memcpy(m + 26, kMac, 6);
    uint32_t sum = csum_add(0, f.data() + 22, 32);
    const uint8_t tail[8] = {0, 0, 0, 32, 0, 0, 0, 58};
    sum = csum_add(sum, tail, 8);
    sum = csum_add(sum, m, 32);
    const uint16_t c = csum_fold(sum);
    m[2] = static_cast<uint8_t>(c >> 8), m[3] = static_cast<uint8_t>(c);
    return f;
  }
  // Something went out at `now`: the peer answers if it is time.
  void sent(size_t n) {
    if (n == 0) return;
    ++ns_seen;
    if (now >= answer_from) {
      const auto f = na();
      nd.input(f.data(), f.size(), now, out, sizeof out);
    }
  }
  Resolve wait(uint64_t bound_ns) {
    uint8_t mac[6];
    return wait_resolution([this] { return now; },
                           [&](uint64_t t) {
                             size_t n = 0;
                             const Resolve r = nd.resolve(peer, t, mac, out, sizeof out, &n);
                             sent(n);
                             return r;
                           },
                           [this] {  // one loop iteration: 1 ms passes, timers run
                             ++steps;
                             now += kMs;
                             unsigned work = 0;
                             for (size_t n; (n = nd.poll(now, out, sizeof out)) != 0; ++work)
                               sent(n);
                             return work;
                           },
                           [this] { ++naps; }, bound_ns);
  }
};

TEST(NeighWait, PeerAnswersLateWithinTheBound) {
  Rig r{NeighParams{}};
  r.answer_from = 1500 * kMs;  // the first two NS (0 s, 1 s) go unanswered
  EXPECT_EQ(r.wait(4 * kSec), Resolve::kResolved);
  EXPECT_EQ(r.now, 2 * kSec);  // resolved by the answer to the third NS
  EXPECT_EQ(r.ns_seen, 3u);
  EXPECT_GT(r.naps, 0u);  // idle iterations nap
}

TEST(NeighWait, NoAnswerEndsWithTheEpisodeBeforeTheBound) {
  Rig r{NeighParams{}};
  EXPECT_EQ(r.wait(4 * kSec), Resolve::kFailed);
  EXPECT_EQ(r.now, 3 * kSec);  // 3 probes, 1 s apart: failed 1 s after the last
  EXPECT_EQ(r.ns_seen, 3u);
  EXPECT_EQ(r.nd.table().failures(), 1u);
  // Used again at once: failed without waiting and without a probe (rate bound) ...
  const unsigned steps = r.steps;
  EXPECT_EQ(r.wait(4 * kSec), Resolve::kFailed);
  EXPECT_EQ(r.steps, steps);
  EXPECT_EQ(r.ns_seen, 3u);
  // ... and 1 s later a new resolution, which the peer, now back, answers.
  r.now += kSec;
  r.answer_from = r.now;
  EXPECT_EQ(r.wait(4 * kSec), Resolve::kResolved);
  EXPECT_EQ(r.ns_seen, 4u);
}

TEST(NeighWait, BoundShorterThanTheResolution) {
  Rig r{NeighParams{}};
  EXPECT_EQ(r.wait(1500 * kMs), Resolve::kPending);
  EXPECT_EQ(r.now, 1500 * kMs);
  EXPECT_EQ(r.nd.table().find(r.peer)->state, NeighState::kIncomplete);  // goes on
  // The peer answers the next probe; the next wait finds the entry resolved.
  r.answer_from = r.now;
  EXPECT_EQ(r.wait(1500 * kMs), Resolve::kResolved);
  EXPECT_EQ(r.now, 2 * kSec);
  // Bound 0: one look, no loop iteration.
  Rig z{NeighParams{}};
  EXPECT_EQ(z.wait(0), Resolve::kPending);
  EXPECT_EQ(z.steps, 0u);
}

}  // namespace
}  // namespace uroce::port
