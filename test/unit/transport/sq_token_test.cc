// SPDX-License-Identifier: BSD-3-Clause
// The SQ doorbell token of a shared ring (doc/ipc.md, "Doorbells") after a go-back-N: the app
// rings only while the token is idle (claim_notify), so a QP whose engine holds the token must
// stay schedulable until its requester has looked at the ring once more. Issue 19's soak stall
// (an RC pair whose next WR was never sent, no completion on either side, no error): a message
// of exactly tx_budget packets leaves in one poll, which ends before the requester finds the
// ring empty and gives the token back; the local ACK timer fires in the next poll (a daemon
// descheduled for longer than the timeout), the rewind resends only the loss window and the QP
// leaves the active list; the ACK of the first transmission then completes the message
// (req_skip_to) without the requester running again. The app's next WR finds the token taken
// and does not ring: nothing ever sends it.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <random>

#include "harness.h"
#include "transport/rnr.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kVaA = 0x1000000, kVaB = 0x2000000;

RcParams params() {
  RcParams p;
  p.cap = QpCap{64, 64, 4, 4, 256};
  p.mtu = Mtu::k1024;
  return p;
}

// One WR of `len` bytes goes out in a single poll of A, then A is "descheduled" past its local
// ACK timeout; then the network runs. Returns A's completion of it.
Wc send_then_sleep(NetT<RingQueues> &net, uint32_t qa, const SendWr &wr) {
  EXPECT_EQ(net.post_send(0, qa, wr), 0);
  const uint64_t tx0 = net.e(0).qp_counters(qa)->tx_pkts;
  net.e(0).poll();
  EXPECT_EQ(net.e(0).qp_counters(qa)->tx_pkts - tx0, net.e(0).config().tx_budget);
  net.clock.set(net.clock.now_ns() + ack_timeout_ns(params().timeout) + 1'000'000);
  std::vector<Wc> wa;
  EXPECT_TRUE(net.wait_wc(0, wa, 1));
  return wa.empty() ? Wc{} : wa[0];
}

TEST(SqToken, NextWrIsSentAfterALateAckCompletesARewoundMessage) {
  EngineConfig cfg;  // uroced's: tx_budget 16, loss_window 8
  NetT<RingQueues> net(19, 2, cfg);
  net.claim_doorbells = true;
  Buf a = net.reg(0, 1 << 20, kAllAccess, kVaA), b = net.reg(1, 1 << 20, kAllAccess, kVaB);
  auto [qa, qb] = net.connect(0, 1, params());
  fill_pattern(a.at(0), 1 << 16, 3);

  // A WRITE of exactly tx_budget MTU-sized packets, as the soak's 16 KiB WRITE over MTU 1024.
  const uint32_t len = cfg.tx_budget * 1024;
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, a, 0, len);
  w.remote_addr = kVaB;
  w.rkey = b.key;
  const Wc c1 = send_then_sleep(net, qa, w);
  EXPECT_EQ(c1.wr_id, 1u);
  EXPECT_EQ(c1.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(b.at(0), a.at(0), len), 0);
  // The path this test is about: one timeout, a go-back-N limited to the loss window.
  EXPECT_EQ(net.e(0).qp_counters(qa)->timeouts, 1u);
  EXPECT_EQ(net.e(0).qp_counters(qa)->window_cuts, 1u);

  // The app's next WR (posted only after the completion, as the soak does): sent, completed.
  ASSERT_EQ(net.post_recv(1, qb, make_recv(7, b, 0x80000, 4096)), 0);
  SendWr s = make_wr(2, WrOpcode::kSendWithImm, a, 0x100, 100);
  s.imm_data_be = 0x19191919;
  ASSERT_EQ(net.post_send(0, qa, s), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net.wait_wc(0, wa, 1)) << "the WR after the rewound message was never sent";
  EXPECT_EQ(wa[0].wr_id, 2u);
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
  ASSERT_TRUE(net.wait_wc(1, wb, 1));
  EXPECT_EQ(wb[0].wr_id, 7u);
  EXPECT_EQ(wb[0].byte_len, 100u);
  EXPECT_EQ(std::memcmp(b.at(0x80000), a.at(0x100), 100), 0);
}

// The soak's traffic in miniature on shared rings with the app's doorbell protocol, over a
// path that duplicates and reorders, while A's "daemon" is stopped for 6 ms (longer than the
// 4.2-ms local ACK timeout) after every 3 ms of running, each iteration of its loop taking
// 0.5 us: a pause can start right after any poll. Its frames wait in an RX queue it drains a
// burst per iteration before it polls, as uroced's loop does, so the timers of a resumed daemon
// fire before it has read every ACK. Every pair runs one operation at a time (WRITE or
// SEND_WITH_IMM of 1 B .. 16 KiB); each must complete with success, none may stall.
TEST(SqToken, PairsKeepMovingWhileTheRequesterDaemonIsPaused) {
  constexpr uint32_t kPairs = 64, kOpsPerPair = 400, kSlice = 64 * 1024;
  constexpr uint64_t kRun = 3'000'000, kPause = 6'000'000;  // ns: the pause > the 4.2-ms timeout
  // Frames A takes from its RX queue per iteration: fewer than uroced's 32, standing in for
  // the longer queue that 64 pairs and UD traffic leave behind a real pause.
  constexpr uint32_t kBurst = 4;
  NetT<RingQueues> net(1919, 2, EngineConfig{}, 4096);
  net.claim_doorbells = true;
  test::Faults f;
  f.duplicate = 0.01;
  f.reorder = 0.02;
  net.link.set_faults(f);
  Buf a = net.reg(0, kPairs * kSlice, kAllAccess, kVaA);
  Buf b = net.reg(1, kPairs * kSlice, kAllAccess, kVaB);
  struct Pair {
    uint32_t qa = 0, qb = 0, ops = 0, seq = 0, rseq = 0;
    bool busy = false, a_done = false, b_done = false;
  };
  std::vector<Pair> pairs(kPairs);
  for (uint32_t i = 0; i < kPairs; ++i) {
    auto [qa, qb] = net.connect(0, 1, params());
    pairs[i].qa = qa;
    pairs[i].qb = qb;
    for (uint32_t k = 0; k < 4; ++k)
      ASSERT_EQ(net.post_recv(1, qb,
                              make_recv(uint64_t{i} << 32 | pairs[i].rseq++, b, i * kSlice, 16384)),
                0);
  }
  std::mt19937_64 rng(19);
  std::deque<std::vector<uint8_t>> rx_a;  // A's RX queue
  int failures = 0;
  auto start = [&](uint32_t i) {
    Pair &p = pairs[i];
    const bool send = rng() % 2;
    const uint32_t len = 1 + static_cast<uint32_t>(rng() % 16384);
    SendWr w = make_wr(uint64_t{i} << 32 | p.seq,
                       send ? WrOpcode::kSendWithImm : WrOpcode::kRdmaWrite, a, i * kSlice, len);
    w.remote_addr = kVaB + i * kSlice + 16384;
    w.rkey = b.key;
    ASSERT_EQ(net.post_send(0, p.qa, w), 0);
    p.busy = true;
    p.a_done = false;
    p.b_done = !send;
  };
  auto finish = [&](Pair &p) {
    p.busy = false;
    ++p.ops;
    ++p.seq;
  };
  bool paused = false;
  uint64_t next_switch = net.clock.now_ns() + kRun;
  uint64_t steps = 0;
  auto all_done = [&] {
    for (const Pair &p : pairs)
      if (p.ops < kOpsPerPair) return false;
    return true;
  };
  while (!all_done() && failures == 0 && ++steps < 20'000'000) {
    const uint64_t now = net.clock.now_ns();
    if (now >= next_switch) {
      paused = !paused;
      next_switch = now + (paused ? kPause : kRun);
    }
    for (uint32_t i = 0; i < kPairs; ++i)
      if (!pairs[i].busy && pairs[i].ops < kOpsPerPair) start(i);
    size_t moved = net.link.deliver([&](Endpoint &to, const uint8_t *fr, uint32_t len) {
      if (&to == net.node(0).ep)
        rx_a.emplace_back(fr, fr + len);
      else
        net.e(1).rx(fr, len);
    });
    if (!paused) {
      for (uint32_t k = 0; k < kBurst && !rx_a.empty(); ++k, ++moved) {
        net.e(0).rx(rx_a.front().data(), static_cast<uint32_t>(rx_a.front().size()));
        rx_a.pop_front();
      }
      moved += net.e(0).poll();
    }
    moved += net.e(1).poll();
    Wc wc[64];
    for (size_t side = 0; side < 2; ++side) {
      if (side == 0 && paused) continue;
      const uint32_t n = net.poll_cq(side, net.node(side).cq, wc, 64);
      for (uint32_t k = 0; k < n; ++k, ++moved) {
        Pair &p = pairs[wc[k].wr_id >> 32];
        if (wc[k].status != WcStatus::kSuccess) {
          ADD_FAILURE() << "pair " << (wc[k].wr_id >> 32) << " side " << side << " status "
                        << static_cast<int>(wc[k].status);
          ++failures;
          continue;
        }
        if (side == 0) {
          p.a_done = true;
        } else {
          p.b_done = true;
          ASSERT_EQ(net.post_recv(1, p.qb,
                                  make_recv(wc[k].wr_id >> 32 << 32 | p.rseq++, b,
                                            (wc[k].wr_id >> 32) * kSlice, 16384)),
                    0);
        }
        if (p.a_done && p.b_done) finish(p);
      }
    }
    if (moved) {  // an iteration's work takes time: a pause may start after any of them
      net.clock.advance(500);
      continue;
    }
    uint64_t next = std::min(net.link.next_delivery_ns(), next_switch);
    if (!paused) next = std::min(next, net.e(0).next_timer_ns());
    next = std::min(next, net.e(1).next_timer_ns());
    net.clock.set(std::max(next, net.clock.now_ns() + 1));
    if (net.clock.now_ns() > 600'000'000'000ull) break;  // 10 min of fake time
  }
  for (uint32_t i = 0; i < kPairs; ++i)
    EXPECT_EQ(pairs[i].ops, kOpsPerPair) << "pair " << i << " stalled (a_done " << pairs[i].a_done
                                         << " b_done " << pairs[i].b_done << ")";
  uint64_t timeouts = 0;
  for (const Pair &p : pairs)
    timeouts += net.e(0).qp_counters(p.qa)->timeouts;
  EXPECT_GT(timeouts, 0u);  // the pauses did make the requesters time out
}

}  // namespace
}  // namespace uroce::transport::testing
