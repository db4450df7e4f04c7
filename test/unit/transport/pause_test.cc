// SPDX-License-Identifier: BSD-3-Clause
// The soak (test/integration/uroced_soak.sh) in miniature on the fake link and clock: RC pairs
// running every opcode one operation at a time over a lossy, duplicating, reordering path,
// while the "daemon" of either side stops now and then for longer than the local ACK timeout.
// Each node models uroced's loop (lib/daemon/poll_loop.cc, PollLoop::step): frames wait in an
// RX queue, a pass takes at most `burst` of them into the engine and then polls the engine
// (timers, then transmit). A stopped node does nothing; its frames queue up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <random>

#include "harness.h"
#include "transport/rnr.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kVaA = 0x1000000, kVaB = 0x2000000;
constexpr uint32_t kSlice = 64 * 1024;  // per pair, on each side
constexpr uint32_t kMaxLen = 16384;
// On A: source / READ destination / atomic result. On B: receive / WRITE target / READ source /
// atomic counter.
constexpr uint32_t kASrc = 0, kADst = 16384, kAAtom = 32768 + 64;
constexpr uint32_t kBRecv = 0, kBWrite = 16384, kBRead = 32768, kBAtom = 49152;

struct Schedule {
  uint64_t run_ns = 0, pause_ns = 0;  // pause_ns 0: never stopped
  uint64_t offset_ns = 0;             // first pause after run_ns + offset_ns
};

struct MiniSoak {
  uint32_t pairs = 32, ops_per_pair = 400, burst = 32;
  test::Faults faults;
  Schedule sched[2];
  RcParams params;
  uint64_t seed = 19;
};

struct Result {
  int failures = 0;
  uint64_t ops = 0, timeouts = 0, retransmits = 0;
  std::string first_failure;
  int first_side = -1;  // a failed completion: its side and status
  WcStatus first_status = WcStatus::kSuccess;
  uint32_t stops[2] = {0, 0};  // how often each side stopped
  uint64_t end_ns = 0;
};

enum Op : uint8_t { kWrite, kWriteImm, kSend, kSendImm, kRead, kCas, kFadd, kOps };

Result run_mini_soak(const MiniSoak &cfg) {
  NetT<RingQueues> net(cfg.seed, 2, EngineConfig{}, 8192);
  net.claim_doorbells = true;
  net.link.set_faults(cfg.faults);
  Buf a = net.reg(0, cfg.pairs * kSlice, kAllAccess, kVaA);
  Buf b = net.reg(1, cfg.pairs * kSlice, kAllAccess, kVaB);
  struct Pair {
    uint32_t qa = 0, qb = 0, ops = 0, seq = 0, rseq = 0;
    Op op = kWrite;
    uint32_t len = 0;
    uint64_t counter = 0, expect_orig = 0;
    bool busy = false, a_done = false, b_done = false;
  };
  std::vector<Pair> pairs(cfg.pairs);
  for (uint32_t i = 0; i < cfg.pairs; ++i) {
    auto [qa, qb] = net.connect(0, 1, cfg.params);
    pairs[i].qa = qa;
    pairs[i].qb = qb;
    for (uint32_t k = 0; k < 4; ++k)
      EXPECT_EQ(net.post_recv(1, qb,
                              make_recv(uint64_t{i} << 32 | pairs[i].rseq++, b, i * kSlice + kBRecv,
                                        kMaxLen)),
                0);
  }
  std::mt19937_64 rng(cfg.seed);
  Result res;
  auto fail = [&](const std::string &what) {
    if (res.failures++ == 0) res.first_failure = what;
  };
  auto start = [&](uint32_t i) {
    Pair &p = pairs[i];
    p.op = static_cast<Op>(rng() % kOps);
    p.len = p.op == kCas || p.op == kFadd ? 8 : 1 + static_cast<uint32_t>(rng() % kMaxLen);
    const uint64_t id = uint64_t{i} << 32 | p.seq;
    const uint64_t ab = i * kSlice, bb = kVaB + i * kSlice;
    static constexpr WrOpcode kWr[] = {
        WrOpcode::kRdmaWrite,        WrOpcode::kRdmaWriteWithImm, WrOpcode::kSend,
        WrOpcode::kSendWithImm,      WrOpcode::kRdmaRead,         WrOpcode::kAtomicCmpAndSwp,
        WrOpcode::kAtomicFetchAndAdd};
    const uint64_t local = p.op == kRead ? ab + kADst : p.op >= kCas ? ab + kAAtom : ab + kASrc;
    SendWr w = make_wr(id, kWr[p.op], a, local, p.len);
    if (p.op == kWrite || p.op == kWriteImm) w.remote_addr = bb + kBWrite;
    if (p.op == kRead) w.remote_addr = bb + kBRead;
    if (p.op >= kCas) w.remote_addr = bb + kBAtom;
    w.rkey = b.key;
    w.imm_data_be = static_cast<uint32_t>(id);
    if (p.op == kCas) {
      w.compare_add = rng() % 2 ? p.counter : p.counter + 1;  // half of them fail
      w.swap = rng();
    } else if (p.op == kFadd) {
      w.compare_add = rng() % 1000;
    }
    p.expect_orig = p.counter;
    if (p.op == kCas && w.compare_add == p.counter) p.counter = w.swap;
    if (p.op == kFadd) p.counter += w.compare_add;
    fill_pattern(a.at(ab + kASrc), p.len, static_cast<uint32_t>(id));
    if (p.op == kRead) fill_pattern(b.at(i * kSlice + kBRead), p.len, static_cast<uint32_t>(~id));
    ASSERT_EQ(net.post_send(0, p.qa, w), 0);
    p.busy = true;
    p.a_done = false;
    p.b_done = !(p.op == kSend || p.op == kSendImm || p.op == kWriteImm);
  };
  auto finish = [&](uint32_t i) {
    Pair &p = pairs[i];
    const uint64_t ab = i * kSlice, bb = i * kSlice;
    bool ok = true;
    if (p.op == kWrite || p.op == kWriteImm)
      ok = std::memcmp(b.at(bb + kBWrite), a.at(ab + kASrc), p.len) == 0;
    else if (p.op == kSend || p.op == kSendImm)
      ok = std::memcmp(b.at(bb + kBRecv), a.at(ab + kASrc), p.len) == 0;
    else if (p.op == kRead)
      ok = std::memcmp(a.at(ab + kADst), b.at(bb + kBRead), p.len) == 0;
    else {
      uint64_t orig = 0, now = 0;
      std::memcpy(&orig, a.at(ab + kAAtom), 8);
      std::memcpy(&now, b.at(bb + kBAtom), 8);
      ok = orig == p.expect_orig && now == p.counter;
    }
    if (!ok) fail("pair " + std::to_string(i) + ": data differs after op " + std::to_string(p.op));
    p.busy = false;
    ++p.ops;
    ++p.seq;
    ++res.ops;
  };

  std::deque<std::vector<uint8_t>> rxq[2];
  bool paused[2] = {false, false};
  uint64_t next_switch[2];
  for (int n = 0; n < 2; ++n)
    next_switch[n] = cfg.sched[n].pause_ns
                         ? net.clock.now_ns() + cfg.sched[n].run_ns + cfg.sched[n].offset_ns
                         : UINT64_MAX;
  auto all_done = [&] {
    for (const Pair &p : pairs)
      if (p.ops < cfg.ops_per_pair) return false;
    return true;
  };
  uint64_t steps = 0;
  while (!all_done() && res.failures == 0 && ++steps < 50'000'000) {
    const uint64_t now = net.clock.now_ns();
    for (int n = 0; n < 2; ++n)
      if (now >= next_switch[n]) {
        paused[n] = !paused[n];
        if (paused[n]) ++res.stops[n];
        next_switch[n] = now + (paused[n] ? cfg.sched[n].pause_ns : cfg.sched[n].run_ns);
      }
    if (!paused[0])
      for (uint32_t i = 0; i < cfg.pairs; ++i)
        if (!pairs[i].busy && pairs[i].ops < cfg.ops_per_pair) start(i);
    size_t moved = net.link.deliver([&](Endpoint &to, const uint8_t *fr, uint32_t len) {
      rxq[&to == net.node(0).ep ? 0 : 1].emplace_back(fr, fr + len);
    });
    for (int n = 0; n < 2; ++n) {
      if (paused[n]) continue;
      // PollLoop::step: one RX burst, then the engine's poll (timers, then transmit).
      for (uint32_t k = 0; k < cfg.burst && !rxq[n].empty(); ++k, ++moved) {
        net.e(n).rx(rxq[n].front().data(), static_cast<uint32_t>(rxq[n].front().size()));
        rxq[n].pop_front();
      }
      moved += net.e(n).poll();
      Wc wc[64];
      const uint32_t got = net.poll_cq(n, net.node(n).cq, wc, 64);
      for (uint32_t k = 0; k < got; ++k, ++moved) {
        const uint32_t i = static_cast<uint32_t>(wc[k].wr_id >> 32);
        if (i >= cfg.pairs) {
          fail("unknown completion");
          continue;
        }
        Pair &p = pairs[i];
        if (wc[k].status != WcStatus::kSuccess) {
          if (res.failures == 0) {
            res.first_side = n;
            res.first_status = wc[k].status;
          }
          fail("pair " + std::to_string(i) + " side " + std::to_string(n) + " op " +
               std::to_string(p.op) + " len " + std::to_string(p.len) + ": status " +
               std::to_string(static_cast<int>(wc[k].status)) + " at " + std::to_string(now));
          continue;
        }
        if (n == 0) {
          if (!p.busy || p.a_done || wc[k].wr_id != (uint64_t{i} << 32 | p.seq)) {
            fail("pair " + std::to_string(i) + ": unexpected send completion");
            continue;
          }
          p.a_done = true;
        } else {
          if (!p.busy || p.b_done) {
            fail("pair " + std::to_string(i) + ": unexpected receive completion");
            continue;
          }
          p.b_done = true;
          EXPECT_EQ(net.post_recv(
                        1, p.qb,
                        make_recv(uint64_t{i} << 32 | p.rseq++, b, i * kSlice + kBRecv, kMaxLen)),
                    0);
        }
        if (p.a_done && p.b_done) finish(i);
      }
    }
    if (moved) {  // a pass with work takes time: a stop may begin after any of them
      net.clock.advance(500);
      continue;
    }
    uint64_t next = std::min({net.link.next_delivery_ns(), next_switch[0], next_switch[1]});
    for (int n = 0; n < 2; ++n)
      if (!paused[n]) next = std::min(next, net.e(n).next_timer_ns());
    net.clock.set(std::max(next, net.clock.now_ns() + 1));
    if (net.clock.now_ns() > 3'600'000'000'000ull) break;  // an hour of fake time
  }
  res.end_ns = net.clock.now_ns();
  for (uint32_t i = 0; i < cfg.pairs; ++i) {
    if (pairs[i].ops < cfg.ops_per_pair && res.failures == 0)
      fail("pair " + std::to_string(i) + " stalled after " + std::to_string(pairs[i].ops));
    res.timeouts += net.e(0).qp_counters(pairs[i].qa)->timeouts;
    res.retransmits += net.e(0).qp_counters(pairs[i].qa)->retransmits;
  }
  return res;
}

RcParams soak_params() {
  RcParams p;
  p.cap = QpCap{64, 64, 4, 4, 256};
  p.mtu = Mtu::k1024;
  p.max_rd_atomic = 4;
  return p;  // timeout 10: 4.2 ms; retry_cnt 7
}

test::Faults lossy() {
  test::Faults f;
  f.drop = 0.01;
  f.duplicate = 0.01;
  f.reorder = 0.02;
  return f;
}

// Without stops, the lossy path alone never exhausts the retries.
TEST(Pause, LossyPathAlone) {
  MiniSoak c;
  c.faults = lossy();
  c.params = soak_params();
  const Result r = run_mini_soak(c);
  EXPECT_EQ(r.failures, 0) << r.first_failure;
  EXPECT_GT(r.timeouts, 0u);
}

// The requester's daemon stops for 3 local ACK timeouts after every 15 ms.
TEST(Pause, RequesterDaemonStops) {
  MiniSoak c;
  c.faults = lossy();
  c.params = soak_params();
  c.sched[0] = Schedule{15'000'000, 13'000'000, 0};
  const Result r = run_mini_soak(c);
  EXPECT_EQ(r.failures, 0) << r.first_failure;
  EXPECT_GE(r.stops[0], 3u);
}

// The responder's daemon stops for 3 local ACK timeouts after every 15 ms.
TEST(Pause, ResponderDaemonStops) {
  MiniSoak c;
  c.faults = lossy();
  c.params = soak_params();
  c.sched[1] = Schedule{15'000'000, 13'000'000, 0};
  const Result r = run_mini_soak(c);
  EXPECT_EQ(r.failures, 0) << r.first_failure;
  EXPECT_GE(r.stops[1], 3u);
}

// The soak's RETRY_EXC_ERR bursts in miniature: a responder daemon that does not run for longer
// than the requester's retry budget (retry_cnt + 1 local ACK timeouts: 8 x 4.2 ms here, 8 x 134 ms
// in the soak) leaves the requester no choice: it completes the WR with RETRY_EXC_ERR (IBTA
// 9.7.6.1.3), as every QP with a WR in flight did in the soak when daemon B was starved of its
// core for 1.2-1.7 s. Just under the budget nothing fails.
TEST(Pause, ResponderStoppedJustUnderTheRetryBudget) {
  MiniSoak c;
  c.faults = lossy();
  c.params = soak_params();
  const uint64_t t = ack_timeout_ns(c.params.timeout);
  c.sched[1] = Schedule{15'000'000, 6 * t, 0};
  const Result r = run_mini_soak(c);
  EXPECT_EQ(r.failures, 0) << r.first_failure;
  EXPECT_GE(r.stops[1], 3u);
}

TEST(Pause, ResponderStoppedPastTheRetryBudgetFailsWithRetryExc) {
  MiniSoak c;
  c.faults = lossy();
  c.params = soak_params();
  const uint64_t t = ack_timeout_ns(c.params.timeout);
  c.sched[1] = Schedule{15'000'000, 10 * t, 0};
  const Result r = run_mini_soak(c);
  ASSERT_GT(r.failures, 0);
  EXPECT_EQ(r.first_side, 0) << r.first_failure;
  EXPECT_EQ(r.first_status, WcStatus::kRetryExcErr) << r.first_failure;
}

// Both stop, out of phase.
TEST(Pause, BothDaemonsStop) {
  MiniSoak c;
  c.faults = lossy();
  c.params = soak_params();
  c.sched[0] = Schedule{15'000'000, 13'000'000, 0};
  c.sched[1] = Schedule{15'000'000, 13'000'000, 7'000'000};
  const Result r = run_mini_soak(c);
  EXPECT_EQ(r.failures, 0) << r.first_failure;
  EXPECT_GE(r.stops[0], 3u);
  EXPECT_GE(r.stops[1], 3u);
}

}  // namespace
}  // namespace uroce::transport::testing
