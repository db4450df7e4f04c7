// SPDX-License-Identifier: BSD-3-Clause
// TimerWheel against a reference model (std::multimap of expiries) under a fake "now".
#include "transport/timer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <vector>

namespace uroce::transport {
namespace {

TEST(TimerWheel, EmptyWheel) {
  TimerWheel w(1024, 5000);
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.next_expiry_hint(), UINT64_MAX);
  EXPECT_EQ(w.advance(UINT64_MAX / 2, [](TimerNode *) { FAIL(); }), 0u);
  EXPECT_EQ(w.now_ns(), UINT64_MAX / 2);
}

TEST(TimerWheel, FiresAtExpiryNeverBefore) {
  for (uint64_t tick : {uint64_t{1}, uint64_t{1000}, uint64_t{1024}}) {
    SCOPED_TRACE(tick);
    TimerWheel w(tick, 0);
    TimerNode a;
    EXPECT_FALSE(a.armed());
    w.arm(&a, 12345);
    EXPECT_TRUE(a.armed());
    EXPECT_EQ(w.size(), 1u);
    EXPECT_LE(w.next_expiry_hint(), 12345u);
    int n = 0;
    auto cb = [&](TimerNode *t) {
      EXPECT_EQ(t, &a);
      EXPECT_FALSE(t->armed());
      ++n;
    };
    EXPECT_EQ(w.advance(12344, cb), 0u);
    EXPECT_EQ(n, 0);
    EXPECT_EQ(w.advance(12344, cb), 0u);
    EXPECT_EQ(w.advance(12345, cb), 1u);
    EXPECT_EQ(n, 1);
    EXPECT_FALSE(a.armed());
    EXPECT_EQ(w.size(), 0u);
    EXPECT_EQ(w.advance(1u << 30, cb), 0u);
    EXPECT_EQ(n, 1);
  }
}

TEST(TimerWheel, CancelAndRearm) {
  TimerWheel w(1024, 0);
  TimerNode a, b;
  w.cancel(&a);  // not armed: no-op
  EXPECT_EQ(w.size(), 0u);
  w.arm(&a, 10'000);
  w.arm(&b, 20'000);
  w.cancel(&a);
  EXPECT_FALSE(a.armed());
  EXPECT_EQ(w.size(), 1u);
  w.arm(&b, 5'000'000);  // move later
  EXPECT_EQ(w.size(), 1u);
  std::vector<TimerNode *> fired;
  auto cb = [&](TimerNode *t) { fired.push_back(t); };
  EXPECT_EQ(w.advance(4'999'999, cb), 0u);
  w.arm(&b, 3'000);  // move into the past: due at the next advance
  EXPECT_LE(w.next_expiry_hint(), 4'999'999u);
  EXPECT_EQ(w.advance(4'999'999, cb), 1u);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0], &b);
  EXPECT_EQ(w.next_expiry_hint(), UINT64_MAX);
}

TEST(TimerWheel, FiresInExpiryOrder) {
  TimerWheel w(1024, 0);
  std::vector<TimerNode> nodes(200);
  std::mt19937_64 rng(7);
  for (auto &n : nodes)
    w.arm(&n, rng() % (uint64_t{1} << 36));
  uint64_t last = 0;
  uint32_t total = w.advance(uint64_t{1} << 36, [&](TimerNode *t) {
    EXPECT_GE(t->expiry_ns / 1024, last / 1024);  // tick order (FIFO within a tick)
    last = t->expiry_ns;
  });
  EXPECT_EQ(total, 200u);
}

TEST(TimerWheel, LongIdleGapIsCheap) {
  // tick = 1 ns: stepping tick by tick to 2^50 would never finish.
  TimerWheel w(1, 0);
  TimerNode a, b, c;
  w.arm(&a, uint64_t{1} << 50);
  w.arm(&b, (uint64_t{1} << 62) + 3);
  w.arm(&c, UINT64_MAX);
  int n = 0;
  EXPECT_EQ(w.advance((uint64_t{1} << 50) - 1, [&](TimerNode *) { ++n; }), 0u);
  EXPECT_EQ(w.advance(uint64_t{1} << 50, [&](TimerNode *) { ++n; }), 1u);
  EXPECT_EQ(w.advance((uint64_t{1} << 62) + 2, [&](TimerNode *) { ++n; }), 0u);
  EXPECT_EQ(w.advance((uint64_t{1} << 62) + 3, [&](TimerNode *) { ++n; }), 1u);
  EXPECT_EQ(w.advance(UINT64_MAX - 1, [&](TimerNode *) { ++n; }), 0u);
  EXPECT_EQ(w.advance(UINT64_MAX, [&](TimerNode *) { ++n; }), 1u);
  EXPECT_EQ(n, 3);
}

TEST(TimerWheel, HintJumpsReachEveryTimer) {
  // Jumping a fake clock from hint to hint fires everything, exactly at its expiry, with a
  // bounded number of hint refinements per timer.
  for (uint64_t tick : {uint64_t{1}, uint64_t{1000}, uint64_t{1024}}) {
    SCOPED_TRACE(tick);
    TimerWheel w(tick, 100);
    std::vector<TimerNode> nodes(500);
    std::mt19937_64 rng(tick);
    for (auto &n : nodes) {
      const int kind = static_cast<int>(rng() % 3);
      const uint64_t e = kind == 0   ? 100 + rng() % 5000
                         : kind == 1 ? 100 + rng() % (uint64_t{1} << 30)
                                     : 100 + rng() % (uint64_t{1} << 45);
      w.arm(&n, e);
    }
    uint64_t now = 100;
    size_t fired = 0, steps = 0;
    while (w.size() > 0) {
      const uint64_t h = w.next_expiry_hint();
      ASSERT_NE(h, UINT64_MAX);
      ASSERT_GE(h, now) << "hint went backwards";
      now = h;
      w.advance(now, [&](TimerNode *t) {
        EXPECT_EQ(t->expiry_ns, now);  // hint-driven: fires exactly at its expiry
        ++fired;
      });
      ASSERT_LT(++steps, 500u * (TimerWheel::kLevels + 2));
    }
    EXPECT_EQ(fired, 500u);
  }
}

TEST(TimerWheel, CallbackRearmsSelfAndOthers) {
  TimerWheel w(1024, 0);
  TimerNode a, b, c;
  int a_fires = 0;
  w.arm(&a, 10'000);
  w.arm(&b, 50'000);
  w.arm(&c, 60'000);
  uint32_t n = w.advance(100'000, [&](TimerNode *t) {
    if (t == &a) {
      ++a_fires;
      if (a_fires < 5) w.arm(&a, t->expiry_ns + 15'000);  // fires again within this advance
      if (a_fires == 1) w.cancel(&c);
    } else {
      EXPECT_EQ(t, &b);
    }
  });
  // a at 10k, 25k, 40k, 55k, 70k; b at 50k; c cancelled.
  EXPECT_EQ(a_fires, 5);
  EXPECT_EQ(n, 6u);
  EXPECT_FALSE(c.armed());
  EXPECT_EQ(w.size(), 0u);
}

TEST(TimerWheel, RearmAtNowDoesNotLoop) {
  TimerWheel w(1024, 0);
  TimerNode a;
  w.arm(&a, 500);
  int fires = 0;
  auto cb = [&](TimerNode *t) {
    ++fires;
    w.arm(t, 700);  // already due: deferred to the next advance()
  };
  EXPECT_EQ(w.advance(1000, cb), 1u);
  EXPECT_TRUE(a.armed());
  EXPECT_LE(w.next_expiry_hint(), 1000u);
  EXPECT_EQ(w.advance(1000, cb), 1u);
  EXPECT_EQ(w.advance(1000, cb), 1u);
  EXPECT_EQ(fires, 3);
  w.cancel(&a);
  EXPECT_EQ(w.advance(5000, cb), 0u);
}

TEST(TimerWheel, ClearDisarmsEverything) {
  std::vector<TimerNode> nodes(100);
  {
    TimerWheel w(1000, 0);
    for (size_t i = 0; i < nodes.size(); ++i)
      w.arm(&nodes[i], i * 977'777);
    w.clear();
    EXPECT_EQ(w.size(), 0u);
    for (auto &n : nodes)
      EXPECT_FALSE(n.armed());
    for (size_t i = 0; i < nodes.size(); ++i)
      w.arm(&nodes[i], i * 977'777);
  }  // destructor disarms too
  for (auto &n : nodes)
    EXPECT_FALSE(n.armed());
}

TEST(TimerWheel, MoveKeepsNodes) {
  TimerWheel a(1024, 0);
  TimerNode n;
  a.arm(&n, 1'000'000);
  TimerWheel b(std::move(a));
  EXPECT_EQ(b.size(), 1u);
  int f = 0;
  EXPECT_EQ(b.advance(1'000'000, [&](TimerNode *) { ++f; }), 1u);
  EXPECT_EQ(f, 1);
}

// ---------------------------------------------------------------------------------------------
// Randomized property test against a reference model.

struct Model {
  std::multimap<uint64_t, size_t> by_expiry;
  std::vector<std::multimap<uint64_t, size_t>::iterator> where;
  std::vector<bool> armed;

  explicit Model(size_t n) : where(n), armed(n, false) {}
  void arm(size_t i, uint64_t e) {
    if (armed[i]) by_expiry.erase(where[i]);
    where[i] = by_expiry.emplace(e, i);
    armed[i] = true;
  }
  void cancel(size_t i) {
    if (!armed[i]) return;
    by_expiry.erase(where[i]);
    armed[i] = false;
  }
};

struct Params {
  uint64_t tick;
  uint64_t seed;
};

class TimerWheelRandom : public ::testing::TestWithParam<Params> {};

TEST_P(TimerWheelRandom, MatchesReference) {
  const Params p = GetParam();
  SCOPED_TRACE("tick=" + std::to_string(p.tick) + " seed=" + std::to_string(p.seed));
  constexpr size_t kNodes = 3000;
  std::mt19937_64 rng(p.seed);
  const uint64_t start = rng() % (uint64_t{1} << 40);
  TimerWheel w(p.tick, start);
  std::vector<TimerNode> nodes(kNodes);
  for (size_t i = 0; i < kNodes; ++i)
    nodes[i].kind = static_cast<uint32_t>(i);
  Model m(kNodes);
  uint64_t now = start;

  // Random delay: tiny, medium, huge, or in the past.
  auto delay = [&]() -> uint64_t {
    switch (rng() % 8) {
      case 0:
        return 0;
      case 1:
      case 2:
        return rng() % (4 * p.tick);
      case 3:
        return rng() % 100'000;
      case 4:
        return rng() % (uint64_t{1} << 28);
      case 5:
        return rng() % (uint64_t{1} << 40);
      case 6:
        return rng() % (uint64_t{1} << 50);
      default:
        return uint64_t{1} << (rng() % 52);
    }
  };
  auto expiry = [&](uint64_t base) -> uint64_t {
    if (rng() % 16 == 0) return base - std::min<uint64_t>(base, rng() % 10'000);  // past
    return base + delay();
  };

  size_t total_fired = 0;
  for (int round = 0; round < 4000; ++round) {
    // Mutations between advances.
    const int ops = static_cast<int>(rng() % 8);
    for (int k = 0; k < ops; ++k) {
      const size_t i = rng() % kNodes;
      if (rng() % 4 == 0) {
        w.cancel(&nodes[i]);
        m.cancel(i);
      } else {
        const uint64_t e = expiry(now);
        w.arm(&nodes[i], e);
        m.arm(i, e);
      }
      ASSERT_EQ(nodes[i].armed(), m.armed[i]);
    }
    ASSERT_EQ(w.size(), m.by_expiry.size());
    const uint64_t hint = w.next_expiry_hint();
    if (m.by_expiry.empty()) {
      ASSERT_EQ(hint, UINT64_MAX);
    } else {
      ASSERT_LE(hint, m.by_expiry.begin()->first) << "hint after the earliest expiry";
    }

    // Pick the next "now": small steps, jumps to the hint, to the earliest expiry, or long jumps.
    uint64_t next = now;
    switch (rng() % 6) {
      case 0:
        next = now + rng() % (2 * p.tick);
        break;
      case 1:
        next = now + rng() % 50'000;
        break;
      case 2:
        if (hint != UINT64_MAX) next = std::max(now, hint);
        break;
      case 3:
        if (!m.by_expiry.empty()) next = std::max(now, m.by_expiry.begin()->first);
        break;
      case 4:
        next = now + rng() % (uint64_t{1} << 36);
        break;
      default:
        next = now + (rng() % 4 == 0 ? (uint64_t{1} << (30 + rng() % 14)) : 0);
        break;
    }
    now = next;

    // Fire, checking each node against the model; callbacks mutate the wheel too.
    std::vector<bool> armed_in_cb(kNodes, false);
    // Overdue nodes (tick before the wheel's current tick on entry) fire first, in any order;
    // then the others in non-decreasing tick order.
    const uint64_t entry_tick = w.now_ns() / p.tick;
    uint64_t last_tick = 0;
    uint32_t fired = w.advance(now, [&](TimerNode *t) {
      const size_t i = t->kind;
      ASSERT_LT(i, kNodes);
      ASSERT_FALSE(t->armed()) << "node still armed in its callback";
      ASSERT_TRUE(m.armed[i]) << "fired a node that is not armed (twice, or after cancel)";
      ASSERT_EQ(m.where[i]->first, t->expiry_ns);
      ASSERT_LE(t->expiry_ns, now) << "fired early";
      const uint64_t tk = t->expiry_ns / p.tick;
      if (tk < entry_tick) {
        ASSERT_EQ(last_tick, 0u) << "overdue node fired after a node that was not overdue";
      } else {
        ASSERT_GE(tk, last_tick) << "out of tick order";
        last_tick = tk;
      }
      m.cancel(i);
      ++total_fired;
      const unsigned r = static_cast<unsigned>(rng() % 8);
      if (r == 0) {  // re-arm itself, maybe in the past / at now
        const uint64_t e = expiry(now - std::min<uint64_t>(now, rng() % 3000));
        w.arm(t, e);
        m.arm(i, e);
        armed_in_cb[i] = true;
      } else if (r == 1) {  // cancel another node
        const size_t j = rng() % kNodes;
        w.cancel(&nodes[j]);
        m.cancel(j);
      } else if (r == 2) {  // arm or move another node
        const size_t j = rng() % kNodes;
        const uint64_t e = expiry(t->expiry_ns);
        w.arm(&nodes[j], e);
        m.arm(j, e);
        armed_in_cb[j] = true;
      }
    });
    (void)fired;
    if (::testing::Test::HasFatalFailure()) return;
    // Nothing due may remain armed, except nodes armed inside this advance's callbacks.
    for (auto it = m.by_expiry.begin(); it != m.by_expiry.end() && it->first <= now; ++it)
      ASSERT_TRUE(armed_in_cb[it->second])
          << "node " << it->second << " due at " << it->first << " not fired at " << now;
    ASSERT_EQ(w.size(), m.by_expiry.size());
    for (size_t i = 0; i < kNodes; ++i)
      ASSERT_EQ(nodes[i].armed(), m.armed[i]) << i;
  }
  EXPECT_GT(total_fired, 1000u);  // the test exercised firing
  w.clear();
}

INSTANTIATE_TEST_SUITE_P(Ticks, TimerWheelRandom,
                         ::testing::Values(Params{1024, 1}, Params{1024, 2}, Params{1000, 3},
                                           Params{1000, 4}, Params{1, 5}, Params{1, 6},
                                           Params{4096, 7}, Params{7, 8}));

}  // namespace
}  // namespace uroce::transport
