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

}  // namespace
}  // namespace uroce::transport::testing
