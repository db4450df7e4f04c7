// SPDX-License-Identifier: BSD-3-Clause
// Edge cases of the transport engine over the fake link:
//   - a message longer than the PSN window (max_inflight_psn) continues as ACKs open it;
//   - SQD: messages already begun finish, no new one starts, IBV_EVENT_SQ_DRAINED exactly once;
//   - an MR deregistered (and its memory freed) while a READ response is being generated;
//   - a QP destroyed with packets in flight (on either side);
//   - a packet for a QP in RESET / INIT: silent drop, counted;
//   - CQ overflow on the receive and on the send side;
//   - posting in every QP state.
// Expectations follow rxe (drivers/infiniband/sw/rxe) where the behaviour is a choice; each test
// says which function it follows.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "harness.h"
#include "wire/packet.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kVaA = 0x1000000, kVaB = 0x2000000;

class EdgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net = std::make_unique<Net>(5, 2);
    a = net->reg(0, 1 << 17, kAllAccess, kVaA);
    b = net->reg(1, 1 << 17, kAllAccess, kVaB);
  }
  void connect(const RcParams &p = RcParams{}) {
    auto [x, y] = net->connect(0, 1, p);
    qa = x;
    qb = y;
  }
  QpState state(size_t i, uint32_t qpn) {
    QpAttr at;
    EXPECT_EQ(net->e(i).query_qp(qpn, &at, nullptr), 0);
    return at.qp_state;
  }
  std::vector<AsyncEventRecord> events(size_t i) {
    std::vector<AsyncEventRecord> v;
    AsyncEventRecord ev;
    while (net->e(i).poll_async_event(&ev))
      v.push_back(ev);
    return v;
  }
  std::vector<Wc> drain(size_t i, uint32_t cq = 0) {
    std::vector<Wc> v;
    Wc wc[16];
    uint32_t k;
    while ((k = net->e(i).poll_cq(cq ? cq : net->node(i).cq, wc, 16)) > 0)
      v.insert(v.end(), wc, wc + k);
    return v;
  }
  SendWr write_wr(uint64_t id, uint64_t off, uint32_t len) {
    SendWr w = make_wr(id, WrOpcode::kRdmaWrite, a, off, len);
    w.remote_addr = kVaB + off;
    w.rkey = b.key;
    return w;
  }
  std::unique_ptr<Net> net;
  Buf a, b;
  uint32_t qa = 0, qb = 0;
};

// A WRITE of 300 packets at MTU 256 with the default 256-PSN window: the requester stops at
// the window, and the ACKs (AckReq every 64 packets) must let it continue at once, not after a
// local ACK timeout, and not never (the last ACK of the window leaves nothing outstanding, so
// no timer would ever restart it).
TEST_F(EdgeTest, MessageLongerThanThePsnWindowContinuesOnAcks) {
  RcParams p;
  p.mtu = Mtu::k256;
  connect(p);
  ASSERT_EQ(net->e(0).config().max_inflight_psn, 256u);
  const uint32_t len = 300 * 256;
  fill_pattern(a.at(0), len, 1);
  ASSERT_EQ(net->e(0).post_send(qa, write_wr(1, 0, len)), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a.at(0), b.at(0), len), 0);
  EXPECT_EQ(net->e(0).qp_counters(qa)->tx_pkts, 300u);
  EXPECT_EQ(net->e(0).qp_counters(qa)->timeouts, 0u);
  EXPECT_EQ(net->e(0).qp_counters(qa)->retransmits, 0u);
}

// RTS -> SQD with IBV_QP_EN_SQD_ASYNC_NOTIFY while three 12-packet WRITEs are queued and the
// first poll has sent 16 packets (all of WRITE 1, 4 of WRITE 2): WRITE 2 is finished, WRITE 3
// does not start, and SQ_DRAINED is raised once, after WRITE 2's ACK (IBTA 10.3.1.6; rxe raises
// it from req_next_wqe in rxe_req.c once every begun WQE has completed). Back to RTS, WRITE 3 goes
// out.
TEST_F(EdgeTest, SqdFinishesBegunMessagesThenRaisesSqDrainedOnce) {
  connect();
  fill_pattern(a.at(0), 3 * 12 * 1024, 2);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(net->e(0).post_send(qa, write_wr(i + 1, i * 12 * 1024, 12 * 1024)), 0);
  ASSERT_EQ(net->e(0).config().tx_budget, 16u);
  ASSERT_EQ(net->e(0).poll(), 16u);
  QpAttr at;
  at.qp_state = QpState::kSqd;
  at.en_sqd_async_notify = true;
  ASSERT_EQ(net->e(0).modify_qp(qa, at, kQpState | kQpEnSqdAsyncNotify), 0);
  EXPECT_TRUE(events(0).empty());  // two messages are still in flight
  ASSERT_EQ(net->e(0).query_qp(qa, &at, nullptr), 0);
  EXPECT_EQ(at.qp_state, QpState::kSqd);
  EXPECT_TRUE(at.sq_draining);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 2));
  net->settle();
  wc = [&] {
    auto more = drain(0);
    wc.insert(wc.end(), more.begin(), more.end());
    return wc;
  }();
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(wc[1].status, WcStatus::kSuccess);
  EXPECT_EQ(net->e(0).qp_counters(qa)->tx_pkts, 24u);  // WRITE 3 was not started
  EXPECT_EQ(std::memcmp(a.at(0), b.at(0), 24 * 1024), 0);
  EXPECT_EQ(b.at(24 * 1024)[0], 0);
  auto ev = events(0);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, AsyncEvent::kSqDrained);
  EXPECT_EQ(ev[0].handle, qa);
  ASSERT_EQ(net->e(0).query_qp(qa, &at, nullptr), 0);
  EXPECT_FALSE(at.sq_draining);
  // A WR posted in SQD is queued, not sent (rxe_post_send accepts SQD: state >= RTS).
  ASSERT_EQ(net->e(0).post_send(qa, write_wr(4, 36 * 1024, 100)), 0);
  net->settle();
  EXPECT_EQ(net->e(0).qp_counters(qa)->tx_pkts, 24u);
  // SQD -> RTS: WRITE 3 and 4 go out, and no second SQ_DRAINED.
  at.qp_state = QpState::kRts;
  ASSERT_EQ(net->e(0).modify_qp(qa, at, kQpState), 0);
  wc.clear();
  ASSERT_TRUE(net->wait_wc(0, wc, 2));
  EXPECT_EQ(wc[0].wr_id, 3u);
  EXPECT_EQ(wc[1].wr_id, 4u);
  EXPECT_EQ(wc[1].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a.at(0), b.at(0), 36 * 1024 + 100), 0);
  EXPECT_TRUE(events(0).empty());
}

TEST_F(EdgeTest, SqdWithNothingInFlightIsDrainedAtOnceAndNotifiesOnlyWhenAsked) {
  connect();
  QpAttr at;
  at.qp_state = QpState::kSqd;
  at.en_sqd_async_notify = false;
  ASSERT_EQ(net->e(0).modify_qp(qa, at, kQpState), 0);  // no notification asked
  EXPECT_TRUE(events(0).empty());
  at.qp_state = QpState::kRts;
  ASSERT_EQ(net->e(0).modify_qp(qa, at, kQpState), 0);
  at.qp_state = QpState::kSqd;
  at.en_sqd_async_notify = true;
  ASSERT_EQ(net->e(0).modify_qp(qa, at, kQpState | kQpEnSqdAsyncNotify), 0);
  auto ev = events(0);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, AsyncEvent::kSqDrained);
  EXPECT_EQ(ev[0].handle, qa);
}

// The responder has sent the first burst of a 64-packet READ reply when the application
// deregisters the region and frees its memory. The next reply packet re-checks the R_Key
// (rxe_resp.c read_reply -> rxe_recheck_mr returns NULL for a region no longer valid ->
// RESPST_ERR_RKEY_VIOLATION -> class C: NAK remote access error, responder QP -> ERR), so the
// requester completes the READ with IBV_WC_REM_ACCESS_ERR (rxe_comp.c check_ack,
// AETH_NAK_REM_ACC_ERR) and freed memory is never read (the ASan build checks that).
TEST_F(EdgeTest, MrDeregisteredWhileReadResponseIsGenerated) {
  connect();
  Buf src = net->reg(1, 64 * 1024, kAllAccess, 0x7000000);
  fill_pattern(src.at(0), 64 * 1024, 3);
  std::vector<uint8_t> expect(src.mem.begin(), src.mem.end());
  SendWr r = make_wr(1, WrOpcode::kRdmaRead, a, 0, 64 * 1024);
  r.remote_addr = src.va;
  r.rkey = src.key;
  ASSERT_EQ(net->e(0).post_send(qa, r), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 0, 8)), 0);
  ASSERT_TRUE(net->run_until([&] { return net->e(1).qp_counters(qb)->tx_pkts > 0; }));
  const uint64_t sent = net->e(1).qp_counters(qb)->tx_pkts;
  ASSERT_GT(sent, 0u);
  ASSERT_LT(sent, 64u);
  ASSERT_EQ(net->e(1).dereg_mr(src.key), 0);
  src.mem.clear();
  src.mem.shrink_to_fit();  // the region's memory is gone
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 2));
  net->settle();
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRemAccessErr) << wc_status_str(wc[0].status);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(wc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(state(0, qa), QpState::kErr);
  EXPECT_EQ(state(1, qb), QpState::kErr);
  EXPECT_EQ(net->e(1).qp_counters(qb)->tx_pkts, sent + 1);  // the replies, then one NAK
  EXPECT_EQ(std::memcmp(a.at(0), expect.data(), sent * 1024), 0);
  for (uint64_t i = sent * 1024; i < 64 * 1024; ++i)
    ASSERT_EQ(a.at(0)[i], 0) << i;
  EXPECT_TRUE(drain(1).empty());  // a READ consumes no receive WQE: nothing to complete
}

// The responder QP is destroyed while 16 packets of a SEND are on the wire: they and every
// retransmission are dropped as "no such QP", nothing answers, and the requester fails with
// RETRY_EXC_ERR after retry_cnt + 1 local ACK timeouts; the next WQE is flushed.
TEST_F(EdgeTest, ResponderDestroyedWithPacketsInFlightPeerSeesRetryExhaustion) {
  RcParams p;
  p.timeout = 8;
  p.retry_cnt = 2;
  connect(p);
  ASSERT_EQ(net->e(1).post_recv(qb, make_recv(1, b, 0, 64 * 1024)), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(1, WrOpcode::kSend, a, 0, 64 * 1024)), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 0, 8)), 0);
  ASSERT_EQ(net->e(0).poll(), 16u);
  ASSERT_EQ(net->link.in_flight(), 16u);
  ASSERT_EQ(net->e(1).destroy_qp(qb), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 2));
  net->settle();
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(wc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(state(0, qa), QpState::kErr);
  EXPECT_EQ(net->e(0).qp_counters(qa)->timeouts, 3u);
  const uint64_t sent = net->e(0).qp_counters(qa)->tx_pkts;
  EXPECT_GE(sent, 16u * 3);  // each round sends a window's burst again
  EXPECT_EQ(net->e(1).counters().drop(DropReason::kNoQp), sent);
  EXPECT_EQ(net->node(1).ep->tx_frames(), 0u);
  EXPECT_EQ(net->e(1).qp_counters(qb), nullptr);
  EXPECT_EQ(net->e(1).next_timer_ns(), UINT64_MAX);
}

// The requester QP is destroyed while the READ replies stream back and its ACK timer is armed:
// the replies are dropped as "no such QP", the timer never fires for the dead QP, and the QP
// slot comes back blank, under a new QPN, for the next create.
TEST_F(EdgeTest, RequesterDestroyedWithReadRepliesInFlight) {
  connect();
  fill_pattern(b.at(0), 64 * 1024, 4);
  SendWr r = make_wr(1, WrOpcode::kRdmaRead, a, 0, 64 * 1024);
  r.remote_addr = kVaB;
  r.rkey = b.key;
  ASSERT_EQ(net->e(0).post_send(qa, r), 0);
  ASSERT_TRUE(net->run_until([&] { return net->e(1).qp_counters(qb)->tx_pkts > 0; }));
  const uint64_t rx_before = net->e(0).counters().rx_pkts;
  ASSERT_EQ(net->e(0).destroy_qp(qa), 0);
  EXPECT_EQ(net->e(0).post_send(qa, r), EINVAL);
  EXPECT_EQ(net->e(0).post_recv(qa, make_recv(1, a, 0, 8)), EINVAL);
  net->settle();
  EXPECT_EQ(net->e(0).next_timer_ns(), UINT64_MAX);
  EXPECT_EQ(net->e(1).qp_counters(qb)->tx_pkts, 64u);  // the responder sent every reply
  const uint64_t rx_after = net->e(0).counters().rx_pkts;
  EXPECT_EQ(rx_after, 64u);
  EXPECT_GT(rx_after - rx_before, 0u);
  EXPECT_EQ(net->e(0).counters().drop(DropReason::kNoQp), rx_after - rx_before);
  EXPECT_TRUE(drain(0).empty());
  // the slot is reused: a fresh random QPN (doc/security.md), RESET, zero counters and PSNs;
  // it works with a new peer
  RcParams p;
  const uint32_t q2 = net->create(0, p, 0);
  EXPECT_NE(q2, qa);
  EXPECT_EQ(net->e(0).qp_slot(q2), 0u);  // the same (only) slot
  EXPECT_EQ(net->e(0).qp_slot(qa), UINT32_MAX);
  EXPECT_EQ(state(0, q2), QpState::kReset);
  EXPECT_EQ(net->e(0).qp_counters(q2)->tx_pkts, 0u);
  const uint32_t peer = net->create(1, p, 0);
  net->to_rts(0, q2, 1, peer, p, 0x500, 0x600);
  net->to_rts(1, peer, 0, q2, p, 0x600, 0x500);
  ASSERT_EQ(net->e(1).post_recv(peer, make_recv(9, b, 0, 100)), 0);
  ASSERT_EQ(net->e(0).post_send(q2, make_wr(10, WrOpcode::kSend, a, 0, 100)), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net->wait_wc(0, wa, 1));
  ASSERT_TRUE(net->wait_wc(1, wb, 1));
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wb[0].wr_id, 9u);
  EXPECT_EQ(wb[0].qp_num, peer);
}

// Packets for a QP in RESET or INIT are dropped without any response and counted
// (DropReason::kQpState); a receive WQE posted in INIT is not consumed. With retry_cnt 0 the
// requester sends once and fails with RETRY_EXC_ERR after one timeout.
TEST_F(EdgeTest, PacketForQpInResetOrInitIsSilentlyDroppedAndCounted) {
  for (const QpState target : {QpState::kReset, QpState::kInit}) {
    SCOPED_TRACE(qp_state_str(target));
    RcParams p;
    p.timeout = 6;
    p.retry_cnt = 0;
    const uint32_t req = net->create(0, p, 0), resp = net->create(1, p, 0);
    net->to_rts(0, req, 1, resp, p, 0x10, 0x20);
    if (target == QpState::kInit) {
      QpAttr at;
      at.qp_state = QpState::kInit;
      at.qp_access_flags = kAllAccess;
      ASSERT_EQ(net->e(1).modify_qp(resp, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags),
                0);
      ASSERT_EQ(net->e(1).post_recv(resp, make_recv(70, b, 0, 64)), 0);
    }
    const uint64_t drops0 = net->e(1).counters().drop(DropReason::kQpState);
    const uint64_t tx1 = net->node(1).ep->tx_frames();
    ASSERT_EQ(net->e(0).post_send(req, make_wr(1, WrOpcode::kSend, a, 0, 64)), 0);
    std::vector<Wc> wc;
    ASSERT_TRUE(net->wait_wc(0, wc, 1));
    net->settle();
    EXPECT_EQ(wc[0].status, WcStatus::kRetryExcErr);
    EXPECT_EQ(net->e(0).qp_counters(req)->tx_pkts, 1u);
    EXPECT_EQ(net->e(1).counters().drop(DropReason::kQpState) - drops0, 1u);
    EXPECT_EQ(net->node(1).ep->tx_frames(), tx1);  // no ACK, no NAK
    EXPECT_EQ(net->e(1).qp_counters(resp)->rx_pkts, 0u);
    EXPECT_EQ(state(1, resp), target);
    EXPECT_TRUE(drain(1).empty());
    if (target == QpState::kInit) {
      QpAttr at;
      at.qp_state = QpState::kErr;
      ASSERT_EQ(net->e(1).modify_qp(resp, at, kQpState), 0);
      auto f = drain(1);
      ASSERT_EQ(f.size(), 1u);  // the receive WQE is still there, flushed now
      EXPECT_EQ(f[0].wr_id, 70u);
      EXPECT_EQ(f[0].status, WcStatus::kWrFlushErr);
    }
  }
}

// Receive CQ overflow: the completion is lost, IBV_EVENT_CQ_ERR is raised for the CQ (rxe_cq.c
// rxe_cq_post: queue full -> IB_EVENT_CQ_ERR, -EBUSY) and the QP enters ERR (rxe_resp.c
// do_complete: RESPST_ERR_CQ_OVERFLOW, class G -> RESPST_ERROR -> rxe_qp_error). The message
// is not acknowledged, so the requester exhausts its retries.
TEST_F(EdgeTest, ReceiveCqOverflowRaisesCqErrAndMovesTheQpToError) {
  const uint32_t small = net->e(1).create_cq(2);
  ASSERT_NE(small, 0u);
  RcParams p;
  p.timeout = 6;
  p.retry_cnt = 1;
  const uint32_t req = net->create(0, p, 0);
  QpInitAttr ia;
  ia.pd = net->node(1).pd;
  ia.send_cq = net->node(1).cq;
  ia.recv_cq = small;
  ia.cap = p.cap;
  const uint32_t resp = net->e(1).create_qp(ia);
  ASSERT_NE(resp, 0u);
  net->to_rts(0, req, 1, resp, p, 0x10, 0x20);
  net->to_rts(1, resp, 0, req, p, 0x20, 0x10);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(net->e(1).post_recv(resp, make_recv(100 + i, b, i * 256, 256)), 0);
  std::vector<Wc> wa;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(net->e(0).post_send(req, make_wr(i, WrOpcode::kSend, a, 0, 16)), 0);
    ASSERT_TRUE(net->wait_wc(0, wa, size_t(i + 1)));
    EXPECT_EQ(wa[i].status, WcStatus::kSuccess);
  }
  EXPECT_TRUE(events(1).empty());
  EXPECT_EQ(state(1, resp), QpState::kRts);
  // the CQ holds 2 completions nobody polled: the third message overflows it
  ASSERT_EQ(net->e(0).post_send(req, make_wr(2, WrOpcode::kSend, a, 0, 16)), 0);
  ASSERT_TRUE(net->wait_wc(0, wa, 3));
  net->settle();
  EXPECT_EQ(wa[2].wr_id, 2u);
  EXPECT_EQ(wa[2].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(state(1, resp), QpState::kErr);
  // the lost completion of message 3, then the lost flush of the 4th receive WQE
  EXPECT_EQ(net->e(1).counters().cq_overflows, 2u);
  auto ev = events(1);
  ASSERT_EQ(ev.size(), 2u);
  for (auto &e : ev) {
    EXPECT_EQ(e.type, AsyncEvent::kCqErr);
    EXPECT_EQ(e.handle, small);
  }
  auto wb = drain(1, small);
  ASSERT_EQ(wb.size(), 2u);
  EXPECT_EQ(wb[0].wr_id, 100u);
  EXPECT_EQ(wb[1].wr_id, 101u);
  EXPECT_EQ(net->node(1).ep->tx_frames(), 2u);  // the ACKs of messages 1 and 2 only
}

// Send CQ overflow: IBV_EVENT_CQ_ERR for each lost completion; the QP goes on (rxe_comp.c
// do_complete ignores rxe_cq_post's -EBUSY), so later work still completes once the
// application has made room.
TEST_F(EdgeTest, SendCqOverflowRaisesCqErrPerLostCompletion) {
  const uint32_t small = net->e(0).create_cq(1);
  ASSERT_NE(small, 0u);
  RcParams p;
  QpInitAttr ia;
  ia.pd = net->node(0).pd;
  ia.send_cq = small;
  ia.recv_cq = net->node(0).cq;
  ia.cap = p.cap;
  const uint32_t req = net->e(0).create_qp(ia);
  ASSERT_NE(req, 0u);
  const uint32_t resp = net->create(1, p, 0);
  net->to_rts(0, req, 1, resp, p, 0x10, 0x20);
  net->to_rts(1, resp, 0, req, p, 0x20, 0x10);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(net->e(1).post_recv(resp, make_recv(100 + i, b, i * 256, 256)), 0);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(net->e(0).post_send(req, make_wr(i, WrOpcode::kSend, a, 0, 16)), 0);
  std::vector<Wc> wb;
  ASSERT_TRUE(net->wait_wc(1, wb, 3));
  net->settle();
  EXPECT_EQ(net->e(0).counters().cq_overflows, 2u);
  auto ev = events(0);
  ASSERT_EQ(ev.size(), 2u);
  for (auto &e : ev) {
    EXPECT_EQ(e.type, AsyncEvent::kCqErr);
    EXPECT_EQ(e.handle, small);
  }
  EXPECT_EQ(state(0, req), QpState::kRts);
  auto w = drain(0, small);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].wr_id, 0u);
  ASSERT_EQ(net->e(0).post_send(req, make_wr(3, WrOpcode::kSend, a, 0, 16)), 0);
  std::vector<Wc> wa;
  ASSERT_TRUE(net->wait_wc(0, wa, 1, small));
  EXPECT_EQ(wa[0].wr_id, 3u);
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
}

// post_send / post_recv in every QP state, as rxe_verbs.c: rxe_post_send refuses
// state < RTS (RESET, INIT, RTR) with EINVAL; rxe_post_recv refuses RESET (state < INIT). In
// SQD a send WR is queued and waits for RTS; in SQE (UC after a local error) a send WR is
// flushed at once while receives still work; in ERR both are flushed at once (rxe:
// flush_send_queue / flush_recv_queue). A destroyed QPN: EINVAL.
TEST_F(EdgeTest, PostingInEveryState) {
  RcParams p;
  const uint32_t q = net->create(0, p, 0), peer = net->create(1, p, 0);
  SendWr s = make_wr(1, WrOpcode::kSend, a, 0, 8);
  auto rr = [&](uint64_t id) { return make_recv(id, a, 1024, 64); };
  // RESET
  EXPECT_EQ(net->e(0).post_send(q, s), EINVAL);
  EXPECT_EQ(net->e(0).post_recv(q, rr(1)), EINVAL);
  // INIT, RTR: receives queue up, sends are refused
  QpAttr at;
  at.qp_state = QpState::kInit;
  at.qp_access_flags = kAllAccess;
  ASSERT_EQ(net->e(0).modify_qp(q, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  EXPECT_EQ(net->e(0).post_send(q, s), EINVAL);
  EXPECT_EQ(net->e(0).post_recv(q, rr(10)), 0);
  at.qp_state = QpState::kRtr;
  at.ah = net->path(0, 1);
  at.path_mtu = Mtu::k1024;
  at.dest_qp_num = peer;
  at.rq_psn = 0x20;
  at.max_dest_rd_atomic = 4;
  at.min_rnr_timer = 1;
  ASSERT_EQ(net->e(0).modify_qp(q, at,
                                kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                    kQpMaxDestRdAtomic | kQpMinRnrTimer),
            0);
  EXPECT_EQ(net->e(0).post_send(q, s), EINVAL);
  EXPECT_EQ(net->e(0).post_recv(q, rr(11)), 0);
  EXPECT_EQ(net->e(0).qp_counters(q)->tx_pkts, 0u);
  // RTS: sent
  at.qp_state = QpState::kRts;
  at.sq_psn = 0x10;
  at.timeout = 10;
  at.retry_cnt = 7;
  at.rnr_retry = 7;
  at.max_rd_atomic = 4;
  ASSERT_EQ(
      net->e(0).modify_qp(
          q, at, kQpState | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic),
      0);
  net->to_rts(1, peer, 0, q, p, 0x20, 0x10);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(net->e(1).post_recv(peer, make_recv(200 + i, b, i * 64, 64)), 0);
  ASSERT_EQ(net->e(0).post_send(q, s), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(net->e(0).post_recv(q, rr(12)), 0);
  // SQD: accepted, held until RTS
  at.qp_state = QpState::kSqd;
  ASSERT_EQ(net->e(0).modify_qp(q, at, kQpState), 0);
  s.wr_id = 2;
  ASSERT_EQ(net->e(0).post_send(q, s), 0);
  EXPECT_EQ(net->e(0).post_recv(q, rr(13)), 0);
  net->settle();
  EXPECT_EQ(net->e(0).qp_counters(q)->tx_pkts, 1u);
  EXPECT_TRUE(drain(0).empty());
  at.qp_state = QpState::kRts;
  ASSERT_EQ(net->e(0).modify_qp(q, at, kQpState), 0);
  wc.clear();
  ASSERT_TRUE(net->wait_wc(0, wc, 1));
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  // ERR: both flushed at once, in order, one completion each
  at.qp_state = QpState::kErr;
  ASSERT_EQ(net->e(0).modify_qp(q, at, kQpState), 0);
  auto f = drain(0);
  ASSERT_EQ(f.size(), 4u);  // receive WQEs 10..13
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(f[i].wr_id, uint64_t(10 + i));
    EXPECT_EQ(f[i].status, WcStatus::kWrFlushErr);
    EXPECT_EQ(f[i].opcode, WcOpcode::kRecv);
  }
  s.wr_id = 3;
  s.send_flags = 0;  // unsignalled: a flush completes anyway
  ASSERT_EQ(net->e(0).post_send(q, s), 0);
  ASSERT_EQ(net->e(0).post_recv(q, rr(14)), 0);
  f = drain(0);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].wr_id, 3u);
  EXPECT_EQ(f[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(f[1].wr_id, 14u);
  EXPECT_EQ(f[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(net->e(0).qp_counters(q)->tx_pkts, 2u);
  // destroyed
  ASSERT_EQ(net->e(0).destroy_qp(q), 0);
  EXPECT_EQ(net->e(0).post_send(q, s), EINVAL);
  EXPECT_EQ(net->e(0).post_recv(q, rr(15)), EINVAL);
  EXPECT_EQ(net->e(0).post_send(0xFFFFFF, s), EINVAL);
}

TEST_F(EdgeTest, PostingInSqeFlushesSendsAndStillReceives) {
  RcParams p;
  p.type = QpType::kUc;
  p.access = kAccessLocalWrite | kAccessRemoteWrite;
  connect(p);
  SendWr bad = make_wr(1, WrOpcode::kSend, a, 0, 8);
  bad.sg_list[0].lkey ^= 0x100;  // local protection error: UC -> SQE
  ASSERT_EQ(net->e(0).post_send(qa, bad), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kLocProtErr);
  ASSERT_EQ(state(0, qa), QpState::kSqe);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 0, 8)), 0);
  auto f = drain(0);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].wr_id, 2u);
  EXPECT_EQ(f[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(net->e(0).qp_counters(qa)->tx_pkts, 0u);
  // the receive side of an SQE QP keeps working (IBTA 10.3.1.7)
  ASSERT_EQ(net->e(0).post_recv(qa, make_recv(50, a, 512, 64)), 0);
  fill_pattern(b.at(0), 40, 6);
  ASSERT_EQ(net->e(1).post_send(qb, make_wr(60, WrOpcode::kSend, b, 0, 40)), 0);
  wc.clear();
  ASSERT_TRUE(net->wait_wc(0, wc, 1));
  EXPECT_EQ(wc[0].wr_id, 50u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[0].byte_len, 40u);
  EXPECT_EQ(std::memcmp(a.at(512), b.at(0), 40), 0);
  // SQE -> RTS resumes sending
  QpAttr at;
  at.qp_state = QpState::kRts;
  ASSERT_EQ(net->e(0).modify_qp(qa, at, kQpState), 0);
  ASSERT_EQ(net->e(1).post_recv(qb, make_recv(70, b, 1024, 64)), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(3, WrOpcode::kSend, a, 0, 8)), 0);
  std::vector<Wc> wb;
  ASSERT_TRUE(net->wait_wc(1, wb, 2));  // node 1: its own send (60) and the receive (70)
  EXPECT_EQ(wb[1].wr_id, 70u);
  EXPECT_EQ(wb[1].status, WcStatus::kSuccess);
}

}  // namespace
}  // namespace uroce::transport::testing
