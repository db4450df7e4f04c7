// SPDX-License-Identifier: BSD-3-Clause
// DCQCN reaction point (lib/transport/dcqcn.h) driven by CNPs at chosen times on the fake clock,
// its deadline armed on a TimerWheel as the engine arms it. Every expected rate below is worked
// out by hand from the equations (doc/congestion.md), not printed by the code:
//   cut:       Rc' = max(Rc * max(1 - alpha / 2^rpg_gd, rpg_min_dec_fac / 100), rpg_min_rate)
//   increase:  Rt' = min(Rt + {0 | rpg_ai_rate | rpg_hai_rate}, line);  Rc' = (Rc + Rt') / 2
//   alpha:     each dce_tcp_rtt period: alpha' = floor(alpha * G / 1024) (+ 1024 - G if a CNP
//              arrived in the period), G = dce_tcp_g; the first CNP sets initial_alpha_value.
// Rates are in Mb/s; the line rate is 100 Gb/s.
#include "transport/dcqcn.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "support/fake_clock.h"
#include "transport/timer.h"

namespace uroce::transport {
namespace {

constexpr double kLine = 100000.0;
constexpr uint64_t kUs = 1000;

// An RP with its deadline on a timing wheel, advanced with a fake clock.
struct Rig {
  explicit Rig(const DcqcnParams &params) : p(params) { rp.init(&p, kLine); }

  // Moves the clock to t_us, firing every deadline on the way at its own time.
  void run_to(uint64_t t_us) {
    const uint64_t t = t_us * kUs;
    for (;;) {
      rearm();
      const uint32_t fired = wheel.advance(t, [&](TimerNode *n) {
        clock.set(n->expiry_ns);
        rp.on_timer(n->expiry_ns);
        rearm();
      });
      if (fired == 0) break;
    }
    clock.set(t);
  }
  void cnp_at(uint64_t t_us) {
    run_to(t_us);
    rp.on_cnp(clock.now_ns());
    rearm();
  }
  void rearm() {
    const uint64_t d = rp.deadline();
    if (d == UINT64_MAX)
      wheel.cancel(&node);
    else if (!node.armed() || node.expiry_ns != d)
      wheel.arm(&node, d);
  }

  DcqcnParams p;
  DcqcnRp rp;
  test::FakeClock clock;
  TimerWheel wheel{1024, 0};
  TimerNode node;
};

// alpha stays at initial_alpha_value for the whole test (one alpha period = 131 ms).
DcqcnParams frozen_alpha() {
  DcqcnParams p;
  p.dce_tcp_rtt = 131071;
  return p;
}

TEST(Dcqcn, UnthrottledUntilFirstCnp) {
  Rig r(DcqcnParams{});
  EXPECT_FALSE(r.rp.throttled());
  EXPECT_EQ(r.rp.rate_mbps(), kLine);
  EXPECT_EQ(r.rp.deadline(), UINT64_MAX);
  EXPECT_FALSE(r.rp.on_tx_bytes(1u << 20));  // no byte counting while unthrottled
  r.run_to(10000);
  EXPECT_EQ(r.rp.rate_mbps(), kLine);
}

TEST(Dcqcn, FirstCnpCutsFromLineRate) {
  Rig r(DcqcnParams{});
  r.cnp_at(0);
  EXPECT_TRUE(r.rp.throttled());
  EXPECT_EQ(r.rp.alpha(), 1023u);
  // Rc = 100000 * (1 - 1023/2048), Rt stays at line rate.
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), 100000.0 * (1 - 1023.0 / 2048));
  EXPECT_DOUBLE_EQ(r.rp.target_mbps(), kLine);
  EXPECT_EQ(r.rp.deadline(), 300 * kUs);  // rpg_time_reset
}

TEST(Dcqcn, RateToSetOnFirstCnp) {
  DcqcnParams p;
  p.rate_to_set_on_first_cnp = 10000;
  Rig r(p);
  r.cnp_at(7);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), 10000.0);
  EXPECT_DOUBLE_EQ(r.rp.target_mbps(), 10000.0);
}

// CNPs at 0, 1, 2 us: one cut at 0, one deferred cut at 4 us (rate_reduce_monitor_period).
// alpha (G = 1019): [0,1) no CNP counted: 1023 -> floor(1023*1019/1024) = 1018;
// [1,2) CNP: floor(1018*1019/1024) + 5 = 1013 + 5 = 1018; [2,3) CNP: 1018; [3,4) none: 1013.
TEST(Dcqcn, CnpsWithinMonitorPeriodMakeOneDeferredCut) {
  Rig r(DcqcnParams{});
  r.cnp_at(0);
  const double rc1 = 100000.0 * (1 - 1023.0 / 2048);
  r.cnp_at(1);
  r.cnp_at(2);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc1);  // not cut yet
  EXPECT_EQ(r.rp.stats().cuts, 1u);
  EXPECT_EQ(r.rp.deadline(), 4 * kUs);
  r.run_to(4);
  EXPECT_EQ(r.rp.stats().cuts, 2u);
  EXPECT_EQ(r.rp.alpha(), 1013u);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc1 * (1 - 1013.0 / 2048));
  // No increase between the cuts: Rt keeps the line rate (clamp_tgt_rate off).
  EXPECT_DOUBLE_EQ(r.rp.target_mbps(), kLine);
  r.run_to(9);
  EXPECT_EQ(r.rp.stats().cuts, 2u);
  // A CNP after the period cuts at once.
  r.cnp_at(10);
  EXPECT_EQ(r.rp.stats().cuts, 3u);
}

// Cut from a set rate of 10000 (alpha frozen at 1023), then timer increases every 300 us with
// the byte counter off: F = 1 fast recovery step, one additive step, then hyper increase.
TEST(Dcqcn, TimerOnlyFastRecoveryThenAiThenHai) {
  DcqcnParams p = frozen_alpha();
  p.rate_to_set_on_first_cnp = 10000;
  p.rpg_byte_reset = 0;
  Rig r(p);
  r.cnp_at(0);
  r.cnp_at(10);
  double rc = 10000.0 * (1 - 1023.0 / 2048);  // 5004.8828125
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc);
  EXPECT_DOUBLE_EQ(r.rp.target_mbps(), 10000.0);
  struct Step {
    uint64_t t_us;
    double rt;
  };
  const Step steps[] = {
      {310, 10000},  // FR
      {610, 10005},  // AI: + 5
      {910, 10055},  // HAI: + 50
      {1210, 10105},
  };
  for (const Step &s : steps) {
    r.run_to(s.t_us - 1);
    EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc) << "before " << s.t_us;
    r.run_to(s.t_us);
    rc = (rc + s.rt) / 2;
    EXPECT_DOUBLE_EQ(r.rp.target_mbps(), s.rt) << "at " << s.t_us;
    EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc) << "at " << s.t_us;
  }
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), 9754.68017578125);
}

// rpg_threshold = 5: five fast recovery steps, each halving the distance to Rt:
// Rc_k = Rt - (Rt - Rc_0) / 2^k.
TEST(Dcqcn, FastRecoveryTakesFSteps) {
  DcqcnParams p = frozen_alpha();
  p.rpg_threshold = 5;
  p.rpg_byte_reset = 0;
  p.rate_to_set_on_first_cnp = 20000;
  Rig r(p);
  r.cnp_at(0);
  r.cnp_at(100);
  const double rc0 = 20000.0 * 1025.0 / 2048;
  for (int k = 1; k <= 5; ++k) {
    r.run_to(100 + 300 * k);
    EXPECT_DOUBLE_EQ(r.rp.target_mbps(), 20000.0);
    EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), 20000.0 - (20000.0 - rc0) / (1 << k)) << k;
  }
  r.run_to(100 + 300 * 6);  // the 6th event: additive increase
  EXPECT_DOUBLE_EQ(r.rp.target_mbps(), 20005.0);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), (20000.0 - (20000.0 - rc0) / 32 + 20005.0) / 2);
}

// Byte counter on (32767 B): BC events go FR (BC=1), then AI while T <= F; hyper increase only
// once both T and BC passed F = 1.
TEST(Dcqcn, HyperIncreaseNeedsTimerAndByteCounter) {
  DcqcnParams p = frozen_alpha();
  p.rate_to_set_on_first_cnp = 10000;
  Rig r(p);
  r.cnp_at(0);
  r.cnp_at(10);
  double rc = 10000.0 * 1025.0 / 2048;
  double rt = 10000.0;
  auto bytes = [&](uint32_t n, double new_rt) {
    EXPECT_TRUE(r.rp.on_tx_bytes(n));
    rt = new_rt;
    rc = (rc + rt) / 2;
    EXPECT_DOUBLE_EQ(r.rp.target_mbps(), rt);
    EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc);
  };
  r.run_to(20);
  EXPECT_FALSE(r.rp.on_tx_bytes(32766));  // one byte short
  bytes(1, 10000);                        // BC = 1: FR
  bytes(32767, 10005);                    // BC = 2, T = 0: AI
  bytes(32767, 10010);                    // BC = 3, T = 0: AI
  r.run_to(310);                          // T = 1: min(T, BC) = 1 <= F: AI
  rt = 10015;
  rc = (rc + rt) / 2;
  EXPECT_DOUBLE_EQ(r.rp.target_mbps(), rt);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc);
  r.run_to(610);  // T = 2, BC = 3: both past F: HAI
  rt = 10065;
  rc = (rc + rt) / 2;
  EXPECT_DOUBLE_EQ(r.rp.target_mbps(), rt);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc);
  bytes(32767, 10115);  // BC = 4: HAI
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), 9998.3575439453125);
}

// Two cuts with no increase between them: Rt keeps the first target unless clamp_tgt_rate.
TEST(Dcqcn, ClampTgtRateOnEveryCut) {
  for (const bool clamp : {false, true}) {
    DcqcnParams p = frozen_alpha();
    p.clamp_tgt_rate = clamp;
    Rig r(p);
    r.cnp_at(0);
    const double rc1 = 100000.0 * 1025.0 / 2048;
    r.cnp_at(10);
    const double rc2 = rc1 * 1025.0 / 2048;
    EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc2);
    const double rt = clamp ? rc1 : kLine;
    EXPECT_DOUBLE_EQ(r.rp.target_mbps(), rt) << clamp;
    r.run_to(310);  // FR toward the target
    EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), (rc2 + rt) / 2) << clamp;
  }
}

// A cut after a timer increase sets Rt = Rc only with clamp_tgt_rate_after_time_inc; after a
// byte-counter increase it always does.
TEST(Dcqcn, ClampTgtRateAfterTimeInc) {
  for (const bool after_time : {false, true}) {
    DcqcnParams p = frozen_alpha();
    p.clamp_tgt_rate_after_time_inc = after_time;
    Rig r(p);
    r.cnp_at(0);
    const double rc1 = 100000.0 * 1025.0 / 2048;
    r.run_to(300);  // timer FR
    const double rc2 = (rc1 + kLine) / 2;
    EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc2);
    r.cnp_at(400);
    EXPECT_DOUBLE_EQ(r.rp.target_mbps(), after_time ? rc2 : kLine) << after_time;
    EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc2 * 1025.0 / 2048);
  }
  DcqcnParams p = frozen_alpha();
  p.clamp_tgt_rate_after_time_inc = false;
  Rig r(p);
  r.cnp_at(0);
  const double rc1 = 100000.0 * 1025.0 / 2048;
  EXPECT_TRUE(r.rp.on_tx_bytes(32767));  // BC FR
  const double rc2 = (rc1 + kLine) / 2;
  r.cnp_at(100);
  EXPECT_DOUBLE_EQ(r.rp.target_mbps(), rc2);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc2 * 1025.0 / 2048);
}

// rpg_min_dec_fac bounds one cut: with rpg_gd = 10 and alpha = 1023 the equation alone would
// leave 1/1024 of Rc; 50 % leaves half.
TEST(Dcqcn, MinDecFacBoundsOneCut) {
  DcqcnParams p = frozen_alpha();
  p.rpg_gd = 10;
  Rig r(p);
  r.cnp_at(0);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), 50000.0);
  p.rpg_min_dec_fac = 0;
  Rig r0(p);
  r0.cnp_at(0);
  EXPECT_DOUBLE_EQ(r0.rp.rate_mbps(), 100000.0 / 1024);
}

// A CNP every 4 us for 20 ms cannot push Rc below rpg_min_rate (1 Mb/s); afterwards the QP
// recovers. Rt stayed at line rate (no increase between cuts), so each 300 us timer event
// halves the distance 100000 - 1 = 99999; the limiter is released once it is below 1 Mb/s:
// 99999 / 2^17 < 1 <= 99999 / 2^16, i.e. at the 17th event.
TEST(Dcqcn, CnpFloodStopsAtMinRateAndRecovers) {
  Rig r(DcqcnParams{});
  for (uint64_t t = 0; t <= 20000; t += 4) {
    r.cnp_at(t);
    ASSERT_GE(r.rp.rate_mbps(), 1.0) << t;
  }
  EXPECT_EQ(r.rp.rate_mbps(), 1.0);
  EXPECT_EQ(r.rp.stats().cuts, 5001u);
  EXPECT_EQ(r.rp.stats().increases, 0u);
  r.run_to(20000 + 300);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), (1.0 + kLine) / 2);
  r.run_to(20000 + 16 * 300);
  EXPECT_TRUE(r.rp.throttled());
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), kLine - 99999.0 / 65536);
  r.run_to(20000 + 17 * 300);
  EXPECT_FALSE(r.rp.throttled());
  EXPECT_EQ(r.rp.rate_mbps(), kLine);
  EXPECT_EQ(r.rp.deadline(), UINT64_MAX);
  // The next CNP is a first CNP again: alpha restarts at initial_alpha_value.
  r.cnp_at(30000);
  EXPECT_EQ(r.rp.alpha(), 1023u);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), 100000.0 * (1 - 1023.0 / 2048));
}

// alpha decays once per dce_tcp_rtt without CNPs (applied lazily at the next cut): 10 periods
// from 1023 with G = 1019 (each step floor(a * 1019 / 1024)): 1018 1013 1008 1003 998 993 988
// 983 978 973.
TEST(Dcqcn, AlphaDecaysPerPeriod) {
  Rig r(DcqcnParams{});
  r.cnp_at(0);
  r.cnp_at(10);
  EXPECT_EQ(r.rp.alpha(), 973u);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), 100000.0 * 1025.0 / 2048 * (1 - 973.0 / 2048));
}

// The paper preset: g = 1/256 (G = 1020), alpha period 55 us, one cut per 50 us, Rt = Rc on
// every cut. CNPs at 0 and 20 us; the one at 20 is cut at 50 us with alpha still 1023 (the first
// alpha period ends at 55 us).
TEST(Dcqcn, PaperPreset) {
  Rig r(dcqcn_paper_preset());
  r.cnp_at(0);
  const double rc1 = 100000.0 * 1025.0 / 2048;
  r.cnp_at(20);
  EXPECT_EQ(r.rp.stats().cuts, 1u);
  r.run_to(50);
  EXPECT_EQ(r.rp.stats().cuts, 2u);
  EXPECT_EQ(r.rp.alpha(), 1023u);
  EXPECT_DOUBLE_EQ(r.rp.target_mbps(), rc1);  // clamp_tgt_rate
  const double rc2 = rc1 * 1025.0 / 2048;
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc2);
  // The 55 us timer after the cut at 50: fast recovery at 105 toward Rt = rc1.
  r.run_to(105);
  const double rc3 = (rc2 + rc1) / 2;
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc3);
  // alpha: [0,55) had the CNP at 20: floor(1023*1020/1024) + 4 = 1019 + 4 = 1023; [55,110)
  // none: 1019. The cut at 120 sets Rt = Rc (clamp_tgt_rate) and cuts with 1019.
  r.cnp_at(120);
  EXPECT_EQ(r.rp.alpha(), 1019u);
  EXPECT_DOUBLE_EQ(r.rp.target_mbps(), rc3);
  EXPECT_DOUBLE_EQ(r.rp.rate_mbps(), rc3 * (1 - 1019.0 / 2048));
}

}  // namespace
}  // namespace uroce::transport
