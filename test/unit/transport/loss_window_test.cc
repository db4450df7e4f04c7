// SPDX-License-Identifier: BSD-3-Clause
// The RC requester's loss window (doc/transport.md, "Loss window"): after a local ACK timeout
// or a sequence NAK the requester keeps at most EngineConfig::loss_window PSNs in flight, one
// more per ACK that advances, and drops the limit once it is back at the level that was lost.
//
// The link towards the responder is a slow port with a queue of kQueueFrames frames: a burst
// beyond that is dropped at the tail (what a TCG guest's tap / virtio queue does with uroce's
// 256-PSN bursts, doc/interop.md). The first frames of the burst carry no AckReq and the rest
// is lost, so go-back-N alone resends the same burst and loses it again until the retry count
// runs out; with the loss window the transfer completes with intact data.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "harness.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kVaA = 0x1000000;
constexpr uint64_t kVaB = 0x2000000;
constexpr uint32_t kMsg = 64 * 1024;  // 64 packets of 1024 B: AckReq only on the last one
constexpr uint32_t kMsgs = 6;
constexpr uint32_t kQueueFrames = 16;
constexpr uint32_t kFrameBytes = 1024 + 70;  // payload + Eth / IPv4 / UDP / BTH / RETH / ICRC

struct Result {
  std::vector<Wc> wcs;
  bool data_ok = false;
  QpCounters req;
};

Result run_transfer(uint32_t loss_window) {
  EngineConfig cfg;
  cfg.loss_window = loss_window;
  Net net(11, 2, cfg, 4096);
  Buf a = net.reg(0, kMsg * kMsgs, kAllAccess, kVaA);
  Buf b = net.reg(1, kMsg * kMsgs, kAllAccess, kVaB);
  for (size_t i = 0; i < a.mem.size(); ++i)
    a.mem[i] = static_cast<uint8_t>(i * 7 + (i >> 10));
  // 1 Gb/s towards the responder (about 8.8 us per frame), room for kQueueFrames frames.
  test::Bottleneck bn;
  bn.bits_per_ns = 1.0;
  bn.buffer_bytes = kQueueFrames * kFrameBytes;
  net.link.set_bottleneck(*net.node(1).ep, bn);
  RcParams rp;  // timeout 10 (4.2 ms), retry_cnt 7
  auto [qa, qb] = net.connect(0, 1, rp);
  for (uint32_t m = 0; m < kMsgs; ++m) {
    SendWr w = make_wr(m + 1, WrOpcode::kRdmaWrite, a, uint64_t{m} * kMsg, kMsg);
    w.remote_addr = kVaB + uint64_t{m} * kMsg;
    w.rkey = b.key;
    EXPECT_EQ(net.e(0).post_send(qa, w), 0);
  }
  Result r;
  // Completes (kMsgs WCs) or fails (the first WC is an error and the rest are flushed).
  net.wait_wc(0, r.wcs, kMsgs);
  r.data_ok = std::memcmp(a.mem.data(), b.mem.data(), a.mem.size()) == 0;
  r.req = *net.e(0).qp_counters(qa);
  (void)qb;
  return r;
}

TEST(LossWindow, TailDropLinkFailsWithGoBackNAlone) {
  const Result r = run_transfer(0);
  ASSERT_FALSE(r.wcs.empty());
  EXPECT_EQ(r.wcs[0].status, WcStatus::kRetryExcErr);
  EXPECT_FALSE(r.data_ok);
  EXPECT_EQ(r.req.window_cuts, 0u);
  EXPECT_EQ(r.req.timeouts, 8u);  // retry_cnt 7: the eighth timeout fails the WQE
}

TEST(LossWindow, TailDropLinkCompletesWithTheLossWindow) {
  const Result r = run_transfer(8);
  ASSERT_EQ(r.wcs.size(), kMsgs);
  for (uint32_t m = 0; m < kMsgs; ++m) {
    EXPECT_EQ(r.wcs[m].status, WcStatus::kSuccess) << m;
    EXPECT_EQ(r.wcs[m].wr_id, m + 1u);
  }
  EXPECT_TRUE(r.data_ok);
  EXPECT_GE(r.req.window_cuts, 1u);
  EXPECT_GE(r.req.retransmits, 1u);
}

// One lost frame in a long transfer: the window is cut once and grows back to the level that
// was lost (at most max_inflight_psn, 32 here), then the QP runs without a limit again.
TEST(LossWindow, GrowsBackAndLiftsTheLimitAfterOneLoss) {
  EngineConfig cfg;
  cfg.loss_window = 4;
  cfg.max_inflight_psn = 32;
  Net net(12, 2, cfg, 4096);
  constexpr uint32_t kLen = 256 * 1024;
  Buf a = net.reg(0, kLen * 4, kAllAccess, kVaA);
  Buf b = net.reg(1, kLen * 4, kAllAccess, kVaB);
  for (size_t i = 0; i < a.mem.size(); ++i)
    a.mem[i] = static_cast<uint8_t>(i * 13 + (i >> 12));
  // Drop the 40th request frame once.
  int seen = 0;
  test::Faults f;
  f.filter = [&seen](const uint8_t *, uint32_t len) {
    if (len > 1000 && ++seen == 40) return test::Action::kDrop;
    return test::Action::kPass;
  };
  net.link.set_faults(*net.node(0).ep, *net.node(1).ep, f);
  auto [qa, qb] = net.connect(0, 1);
  for (uint32_t m = 0; m < 4; ++m) {
    SendWr w = make_wr(m + 1, WrOpcode::kRdmaWrite, a, uint64_t{m} * kLen, kLen);
    w.remote_addr = kVaB + uint64_t{m} * kLen;
    w.rkey = b.key;
    ASSERT_EQ(net.e(0).post_send(qa, w), 0);
  }
  std::vector<Wc> wcs;
  ASSERT_TRUE(net.wait_wc(0, wcs, 4));
  for (const Wc &wc : wcs)
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a.mem.data(), b.mem.data(), a.mem.size()), 0);
  const QpCounters &c = *net.e(0).qp_counters(qa);
  EXPECT_EQ(c.window_cuts, 1u) << "retransmits " << c.retransmits << " timeouts " << c.timeouts
                               << " naks " << c.seq_naks_rcvd << " drops "
                               << net.link.counters().dropped;
  EXPECT_EQ(c.window_restores, 1u);
  (void)qb;
}

// A peer that is slow but loses nothing (the TCG guest of doc/interop.md on a loaded host,
// whose ACKs can come later than the local ACK timeout): the link towards it
// carries one 1 KB frame per 150 us and queues everything, so the ACK for 64 packets comes
// about 2.3 local ACK timeouts (4.2 ms each) after the previous one and a 256-PSN burst takes
// nine. Every timeout resends; a second timeout without progress must keep the loss window
// for SENDs / WRITEs. Before, it lifted the limit and resent the whole burst again: the
// duplicates queued up in front of the peer faster than it drained them, its ACK for the next
// new packet came later than eight timeouts, and the WQE failed with RETRY_EXC_ERR.
struct SlowPeerResult {
  std::vector<Wc> wcs;
  bool data_ok = false;
  QpCounters req;
  uint64_t dup_requests = 0;
};

SlowPeerResult run_slow_peer(WrOpcode op) {
  EngineConfig cfg;  // loss_window 8, max_inflight_psn 256
  Net net(13, 2, cfg, 4096);
  constexpr uint32_t kN = 8;
  Buf a = net.reg(0, kMsg * kN, kAllAccess, kVaA);
  Buf b = net.reg(1, kMsg * kN, kAllAccess, kVaB);
  for (size_t i = 0; i < a.mem.size(); ++i)
    a.mem[i] = static_cast<uint8_t>(i * 11 + (i >> 10));
  test::Bottleneck bn;
  bn.bits_per_ns = kFrameBytes * 8 / 150'000.0;  // 150 us per frame, unlimited queue
  net.link.set_bottleneck(*net.node(1).ep, bn);
  RcParams rp;  // timeout 10 (4.2 ms), retry_cnt 7
  auto [qa, qb] = net.connect(0, 1, rp);
  for (uint32_t m = 0; m < kN; ++m) {
    if (op == WrOpcode::kSend) {
      EXPECT_EQ(net.e(1).post_recv(qb, make_recv(m + 1, b, uint64_t{m} * kMsg, kMsg)), 0);
    }
    SendWr w = make_wr(m + 1, op, a, uint64_t{m} * kMsg, kMsg);
    w.remote_addr = kVaB + uint64_t{m} * kMsg;
    w.rkey = b.key;
    EXPECT_EQ(net.e(0).post_send(qa, w), 0);
  }
  SlowPeerResult r;
  net.wait_wc(0, r.wcs, kN);
  r.data_ok = std::memcmp(a.mem.data(), b.mem.data(), a.mem.size()) == 0;
  r.req = *net.e(0).qp_counters(qa);
  r.dup_requests = net.e(1).qp_counters(qb)->dup_requests;
  return r;
}

TEST(LossWindow, SlowPeerIsNotFloodedWithResentBursts) {
  for (WrOpcode op : {WrOpcode::kRdmaWrite, WrOpcode::kSend}) {
    const SlowPeerResult r = run_slow_peer(op);
    ASSERT_EQ(r.wcs.size(), 8u) << static_cast<int>(op);
    for (uint32_t m = 0; m < 8; ++m) {
      EXPECT_EQ(r.wcs[m].status, WcStatus::kSuccess) << static_cast<int>(op) << " " << m;
      EXPECT_EQ(r.wcs[m].wr_id, m + 1u);
    }
    EXPECT_TRUE(r.data_ok) << static_cast<int>(op);
    EXPECT_GE(r.req.timeouts, 2u) << static_cast<int>(op);  // the peer is slower than the timer
    // Each PSN went out at most about twice (before: 2368 frames for these 512 PSNs, and
    // message 4 failed with RETRY_EXC_ERR behind the duplicates).
    EXPECT_LT(r.req.tx_pkts, 2u * 8 * 64)
        << static_cast<int>(op) << " timeouts " << r.req.timeouts << " retransmits "
        << r.req.retransmits << " duplicates at the peer " << r.dup_requests;
  }
}

}  // namespace
}  // namespace uroce::transport::testing
