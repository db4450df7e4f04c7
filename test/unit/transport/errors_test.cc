// SPDX-License-Identifier: BSD-3-Clause
// Exact error cases over the fake link: each NAK type, each WC error status, retry and RNR
// exhaustion (with the timing the attributes imply), access violations, duplicates that must
// not execute twice, PSN wrap.
#include <gtest/gtest.h>

#include <cstring>

#include "harness.h"
#include "support/seed.h"
#include "wire/packet.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kVaA = 0x1000000;
constexpr uint64_t kVaB = 0x2000000;

uint8_t opcode_of(const uint8_t *f, uint32_t len) {
  wire::ParsedPacket p;
  if (wire::parse_frame(f, len, &p, 0) != wire::ParseError::kOk) return 0xFF;
  return p.bth()->opcode();
}

class ErrTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net = std::make_unique<Net>(7, 2);
    a = net->reg(0, 1 << 16, kAllAccess, kVaA);
    b = net->reg(1, 1 << 16, kAllAccess, kVaB);
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
  // Posts a WRITE and a SEND behind it; returns the requester's completions.
  std::vector<Wc> write_then_send(uint64_t rva, uint32_t rkey, uint32_t len = 64) {
    SendWr w = make_wr(1, WrOpcode::kRdmaWrite, a, 0, len);
    w.remote_addr = rva;
    w.rkey = rkey;
    EXPECT_EQ(net->e(0).post_send(qa, w), 0);
    EXPECT_EQ(net->e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 0, 8)), 0);
    std::vector<Wc> wc;
    EXPECT_TRUE(net->wait_wc(0, wc, 2));
    return wc;
  }
  std::unique_ptr<Net> net;
  Buf a, b;
  uint32_t qa = 0, qb = 0;
};

void expect_error_then_flush(const std::vector<Wc> &wc, WcStatus st) {
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, st) << wc_status_str(wc[0].status);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(wc[1].status, WcStatus::kWrFlushErr);
}

TEST_F(ErrTest, WrongRkeyIsRemoteAccessError) {
  connect();
  expect_error_then_flush(write_then_send(kVaB, b.key ^ 0x5500), WcStatus::kRemAccessErr);
  EXPECT_EQ(state(0, qa), QpState::kErr);
  EXPECT_EQ(state(1, qb), QpState::kErr);  // the responder NAKed and entered ERR
  for (size_t i = 0; i < b.mem.size(); ++i)
    ASSERT_EQ(b.mem[i], 0) << i;
}

TEST_F(ErrTest, OutOfBoundsIsRemoteAccessError) {
  connect();
  expect_error_then_flush(write_then_send(kVaB + (1 << 16) - 32, b.key), WcStatus::kRemAccessErr);
}

TEST_F(ErrTest, VaWrapDoesNotPassBoundsCheck) {
  connect();
  expect_error_then_flush(write_then_send(UINT64_MAX - 16, b.key), WcStatus::kRemAccessErr);
}

TEST_F(ErrTest, MissingRemoteWriteFlagIsRemoteAccessError) {
  Buf ro = net->reg(1, 4096, kAccessLocalWrite | kAccessRemoteRead, 0x9000000);
  connect();
  expect_error_then_flush(write_then_send(ro.va, ro.key), WcStatus::kRemAccessErr);
}

TEST_F(ErrTest, RegionOfAnotherPdIsRemoteAccessError) {
  const uint32_t pd2 = net->e(1).create_pd();
  Buf other = net->reg(1, 4096, kAllAccess, 0xA000000, pd2);
  connect();
  expect_error_then_flush(write_then_send(other.va, other.key), WcStatus::kRemAccessErr);
}

// rereg_mr of access / PD (ibv_rereg_mr in place): the key stays and the responder checks the
// next access against the new flags and PD; bad flags or an unknown key change nothing.
TEST_F(ErrTest, ReregisteredAccessAndPdAreCheckedUnderTheSameKey) {
  const uint32_t pd = net->node(1).pd;
  const uint32_t pd2 = net->e(1).create_pd();
  EXPECT_EQ(net->e(1).rereg_mr(b.key, pd, kAccessRemoteWrite), EINVAL);  // needs local write
  EXPECT_EQ(net->e(1).rereg_mr(b.key ^ 0x5500, pd, kAllAccess), EINVAL);
  EXPECT_EQ(net->e(1).rereg_mr(b.key, 999, kAllAccess), EINVAL);
  ASSERT_EQ(net->e(1).rereg_mr(b.key, pd, kAccessLocalWrite | kAccessRemoteRead), 0);
  connect();
  expect_error_then_flush(write_then_send(kVaB, b.key), WcStatus::kRemAccessErr);
  for (size_t i = 0; i < b.mem.size(); ++i)
    ASSERT_EQ(b.mem[i], 0) << i;
  ASSERT_EQ(net->e(1).rereg_mr(b.key, pd2, kAllAccess), 0);
  EXPECT_EQ(net->e(1).dealloc_pd(pd2), EBUSY);  // the region moved there
  connect();
  expect_error_then_flush(write_then_send(kVaB, b.key), WcStatus::kRemAccessErr);
  ASSERT_EQ(net->e(1).rereg_mr(b.key, pd, kAllAccess), 0);
  EXPECT_EQ(net->e(1).dealloc_pd(pd2), 0);
  connect();
  ASSERT_EQ(net->e(1).post_recv(qb, make_recv(9, b, 4096, 64)), 0);  // for the SEND
  const std::vector<Wc> wc = write_then_send(kVaB, b.key);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[1].status, WcStatus::kSuccess);
}

TEST_F(ErrTest, QpWithoutRemoteReadIsInvalidRequest) {
  RcParams p;
  p.access = kAccessLocalWrite | kAccessRemoteWrite;
  connect(p);
  SendWr r = make_wr(1, WrOpcode::kRdmaRead, a, 0, 64);
  r.remote_addr = kVaB;
  r.rkey = b.key;
  ASSERT_EQ(net->e(0).post_send(qa, r), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 0, 8)), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 2));
  expect_error_then_flush(wc, WcStatus::kRemInvReqErr);
}

TEST_F(ErrTest, MisalignedAtomicIsInvalidRequest) {
  connect();
  SendWr f = make_wr(1, WrOpcode::kAtomicFetchAndAdd, a, 0, 8);
  f.remote_addr = kVaB + 4;
  f.rkey = b.key;
  f.compare_add = 1;
  ASSERT_EQ(net->e(0).post_send(qa, f), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 0, 8)), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 2));
  expect_error_then_flush(wc, WcStatus::kRemInvReqErr);
}

TEST_F(ErrTest, ReceiveTooSmallIsInvalidRequestAndLocalLengthError) {
  connect();
  ASSERT_EQ(net->e(1).post_recv(qb, make_recv(70, b, 0, 100)), 0);
  ASSERT_EQ(net->e(1).post_recv(qb, make_recv(71, b, 200, 100)), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(1, WrOpcode::kSend, a, 0, 2000)), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 0, 8)), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net->wait_wc(0, wa, 2));
  ASSERT_TRUE(net->wait_wc(1, wb, 2));
  expect_error_then_flush(wa, WcStatus::kRemInvReqErr);
  EXPECT_EQ(wb[0].wr_id, 70u);
  EXPECT_EQ(wb[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(wb[1].wr_id, 71u);
  EXPECT_EQ(wb[1].status, WcStatus::kWrFlushErr);
}

TEST_F(ErrTest, BadReceiveLkeyIsRemoteOperationalError) {
  connect();
  RecvWr rr = make_recv(70, b, 0, 100);
  rr.sg_list[0].lkey ^= 0x100;
  ASSERT_EQ(net->e(1).post_recv(qb, rr), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(1, WrOpcode::kSend, a, 0, 50)), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 0, 8)), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net->wait_wc(0, wa, 2));
  ASSERT_TRUE(net->wait_wc(1, wb, 1));
  expect_error_then_flush(wa, WcStatus::kRemOpErr);
  EXPECT_EQ(wb[0].status, WcStatus::kLocProtErr);
}

TEST_F(ErrTest, BadLocalLkeyIsLocalProtectionErrorAndNothingIsSent) {
  connect();
  SendWr w = make_wr(1, WrOpcode::kSend, a, 0, 64);
  w.sg_list[0].lkey += 1;
  ASSERT_EQ(net->e(0).post_send(qa, w), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 0, 8)), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 2));
  expect_error_then_flush(wc, WcStatus::kLocProtErr);
  EXPECT_EQ(net->e(0).qp_counters(qa)->tx_pkts, 0u);
}

TEST_F(ErrTest, RetryExhaustionAfterExactlyRetryCntTimeouts) {
  RcParams p;
  p.timeout = 8;  // 4.096 us << 8 = 1.048576 ms
  p.retry_cnt = 3;
  connect(p);
  test::Faults f;
  f.drop = 1.0;
  net->link.set_faults(*net->node(0).ep, *net->node(1).ep, f);
  const uint64_t t0 = net->clock.now_ns();
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(1, WrOpcode::kSend, a, 0, 64)), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kRetryExcErr);
  const uint64_t to = 4096ull << 8;
  const uint64_t dt = net->clock.now_ns() - t0;
  // 1 transmission + 3 retries, each followed by one full timeout (+ wheel tick + link delay).
  EXPECT_GE(dt, 4 * to);
  EXPECT_LT(dt, 4 * to + 4 * 20000);
  EXPECT_EQ(net->e(0).qp_counters(qa)->timeouts, 4u);
  EXPECT_EQ(net->e(0).qp_counters(qa)->tx_pkts, 4u);
  EXPECT_EQ(state(0, qa), QpState::kErr);
}

TEST_F(ErrTest, RnrRetryExhaustion) {
  RcParams p;
  p.rnr_retry = 2;
  p.min_rnr_timer = 3;  // 30 us
  connect(p);
  const uint64_t t0 = net->clock.now_ns();
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(1, WrOpcode::kSend, a, 0, 64)), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(net->e(1).qp_counters(qb)->rnr_naks_sent, 3u);
  EXPECT_EQ(net->e(0).qp_counters(qa)->rnr_naks_rcvd, 3u);
  EXPECT_GE(net->clock.now_ns() - t0, 2 * 30000u);
  EXPECT_EQ(state(1, qb), QpState::kRts);  // RNR is not an error for the responder
}

TEST_F(ErrTest, RnrRetryForeverSucceedsOnceAReceiveIsPosted) {
  RcParams p;
  p.rnr_retry = 7;
  connect(p);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(1, WrOpcode::kSend, a, 0, 64)), 0);
  // 50 RNR rounds, far more than any finite count
  ASSERT_TRUE(net->run_until([&] { return net->e(1).qp_counters(qb)->rnr_naks_sent >= 50; }));
  ASSERT_EQ(net->e(1).post_recv(qb, make_recv(5, b, 0, 64)), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net->wait_wc(0, wa, 1));
  ASSERT_TRUE(net->wait_wc(1, wb, 1));
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess);
}

TEST_F(ErrTest, DuplicateAtomicIsAnsweredFromTheCacheNotReExecuted) {
  RcParams p;
  p.timeout = 6;
  connect(p);
  uint64_t v = 100;
  std::memcpy(b.at(64), &v, 8);
  // Drop the first atomic ACK: the requester times out and resends the request.
  int dropped = 0;
  test::Faults f;
  f.filter = [&](const uint8_t *fr, uint32_t len) {
    if (opcode_of(fr, len) == wire::op::kRcAtomicAck && dropped == 0) {
      ++dropped;
      return test::Action::kDrop;
    }
    return test::Action::kPass;
  };
  net->link.set_faults(*net->node(1).ep, *net->node(0).ep, f);
  SendWr fa = make_wr(1, WrOpcode::kAtomicFetchAndAdd, a, 0, 8);
  fa.remote_addr = kVaB + 64;
  fa.rkey = b.key;
  fa.compare_add = 5;
  ASSERT_EQ(net->e(0).post_send(qa, fa), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(net->e(1).qp_counters(qb)->dup_requests, 1u);
  uint64_t orig, now;
  std::memcpy(&orig, a.at(0), 8);
  std::memcpy(&now, b.at(64), 8);
  EXPECT_EQ(orig, 100u);
  EXPECT_EQ(now, 105u);  // executed once
}

TEST_F(ErrTest, LostReadResponseIsReplayedFromTheMiddle) {
  RcParams p;
  p.mtu = Mtu::k256;
  connect(p);
  fill_pattern(b.at(0), 4096, 5);
  int n = 0;
  test::Faults f;
  f.filter = [&](const uint8_t *fr, uint32_t len) {
    if (opcode_of(fr, len) == wire::op::kRcReadResponseMiddle && ++n == 5)
      return test::Action::kDrop;
    return test::Action::kPass;
  };
  net->link.set_faults(*net->node(1).ep, *net->node(0).ep, f);
  SendWr r = make_wr(1, WrOpcode::kRdmaRead, a, 0, 4096);
  r.remote_addr = kVaB;
  r.rkey = b.key;
  ASSERT_EQ(net->e(0).post_send(qa, r), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a.at(0), b.at(0), 4096), 0);
  EXPECT_EQ(net->e(0).qp_counters(qa)->retransmits, 1u);
  EXPECT_EQ(net->e(1).qp_counters(qb)->dup_requests, 1u);
}

// Each gap in the request PSNs gets its own PSN sequence error NAK: the responder stays
// silent only until the expected PSN arrives again, so a second loss later on the same QP is
// recovered by a NAK too, not by the requester's timeout (the uroced loss test found the
// responder NAKing only the first gap of a QP's life).
TEST_F(ErrTest, EveryGapGetsItsOwnSequenceNak) {
  RcParams p;
  p.mtu = Mtu::k256;
  connect(p);
  fill_pattern(a.at(0), 3 * 4096, 11);
  int middles = 0;
  test::Faults f;
  f.filter = [&](const uint8_t *fr, uint32_t len) {
    // The third MIDDLE of each WRITE as first sent (the counter restarts per WRITE below).
    if (opcode_of(fr, len) == wire::op::kRcWriteMiddle && ++middles == 3)
      return test::Action::kDrop;
    return test::Action::kPass;
  };
  net->link.set_faults(*net->node(0).ep, *net->node(1).ep, f);
  for (uint32_t i = 0; i < 3; ++i) {
    middles = 0;
    SendWr w = make_wr(i, WrOpcode::kRdmaWrite, a, i * 4096, 4096);  // 16 packets
    w.remote_addr = kVaB + i * 4096;
    w.rkey = b.key;
    ASSERT_EQ(net->e(0).post_send(qa, w), 0);
    std::vector<Wc> wc;
    ASSERT_TRUE(net->wait_wc(0, wc, 1));
    EXPECT_EQ(wc[0].status, WcStatus::kSuccess) << wc_status_str(wc[0].status);
    EXPECT_EQ(std::memcmp(a.at(i * 4096), b.at(i * 4096), 4096), 0) << "WRITE " << i;
    EXPECT_EQ(net->e(1).qp_counters(qb)->seq_naks_sent, i + 1) << "after WRITE " << i;
  }
  EXPECT_EQ(net->e(0).qp_counters(qa)->seq_naks_rcvd, 3u);
  EXPECT_EQ(net->e(0).qp_counters(qa)->retransmits, 3u);
  EXPECT_EQ(net->e(0).qp_counters(qa)->timeouts, 0u);
}

TEST_F(ErrTest, ResponderWithoutReadResourcesRejectsRead) {
  auto [x, y] = net->connect(0, 1);
  qa = x;
  qb = y;
  // Responder back through SQD? No: a fresh pair with max_dest_rd_atomic = 0 on the responder.
  RcParams p;
  const uint32_t q1 = net->create(0, p, 0), q2 = net->create(1, p, 0);
  net->to_rts(0, q1, 1, q2, p, 10, 20);
  QpAttr at;
  at.qp_state = QpState::kInit;
  at.qp_access_flags = kAllAccess;
  ASSERT_EQ(net->e(1).modify_qp(q2, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  at.qp_state = QpState::kRtr;
  at.ah = net->path(1, 0);
  at.path_mtu = Mtu::k1024;
  at.dest_qp_num = q1;
  at.rq_psn = 10;
  at.max_dest_rd_atomic = 0;
  ASSERT_EQ(net->e(1).modify_qp(q2, at,
                                kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                    kQpMaxDestRdAtomic | kQpMinRnrTimer),
            0);
  SendWr r = make_wr(1, WrOpcode::kRdmaRead, a, 0, 64);
  r.remote_addr = kVaB;
  r.rkey = b.key;
  ASSERT_EQ(net->e(0).post_send(q1, r), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kRemInvReqErr);
}

// The interop loss scenario (doc/interop.md): the requester's local ACK timer fires, it goes
// back N and resends, and only then does the responder's ACK for the first transmission
// arrive, its PSN beyond the rewound requester's. That ACK is valid: it completes the message
// and the rest is not sent again. uroce used to drop it as a response matching nothing
// (drop.bad_response, which the interop check counts as a failure) and resend everything.
// The 20-packet SEND (20000 bytes, path MTU 1024, as in the interop run) starts at PSN
// 0xfffff8, so its range wraps through 2^24.
TEST_F(ErrTest, AckArrivingAfterTheRewindCompletesTheMessageBeingResent) {
  RcParams p;
  p.psn_a = 0xFFFFF8;
  connect(p);
  fill_pattern(a.at(0), 20000, 3);
  ASSERT_EQ(net->e(1).post_recv(qb, make_recv(7, b, 0, 20000)), 0);
  std::vector<uint8_t> held;  // the responder's ACK, taken off the link
  test::Faults f;
  f.filter = [&](const uint8_t *fr, uint32_t len) {
    if (held.empty() && opcode_of(fr, len) == wire::op::kRcAck) {
      held.assign(fr, fr + len);
      return test::Action::kDrop;
    }
    return test::Action::kPass;
  };
  net->link.set_faults(*net->node(1).ep, *net->node(0).ep, f);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(1, WrOpcode::kSend, a, 0, 20000)), 0);
  Endpoint &ep0 = *net->node(0).ep;
  // The first transmission, the timeout, and the first poll of the resend (tx_budget packets).
  ASSERT_TRUE(net->run_until([&] { return ep0.tx_frames() > 20; }));
  ASSERT_FALSE(held.empty());
  const uint64_t sent = ep0.tx_frames();
  ASSERT_LT(sent, 40u) << "the resend must still be under way";
  net->e(0).rx(held.data(), static_cast<uint32_t>(held.size()));
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net->wait_wc(0, wa, 1));
  ASSERT_TRUE(net->wait_wc(1, wb, 1));
  net->settle();
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess) << wc_status_str(wa[0].status);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess) << wc_status_str(wb[0].status);
  EXPECT_EQ(wb[0].byte_len, 20000u);
  EXPECT_EQ(std::memcmp(a.at(0), b.at(0), 20000), 0);
  EXPECT_EQ(net->e(0).counters().drop(DropReason::kBadResponse), 0u);
  EXPECT_EQ(net->e(0).counters().drop(DropReason::kDuplicate), 0u);
  EXPECT_EQ(net->e(0).qp_counters(qa)->retransmits, 1u);
  EXPECT_EQ(ep0.tx_frames(), sent) << "packets the late ACK covered were sent again";
  QpAttr at;
  ASSERT_EQ(net->e(0).query_qp(qa, &at, nullptr), 0);
  EXPECT_EQ(at.sq_psn, (0xFFFFF8u + 20) & 0xFFFFFF);
  // The QP goes on: a second message completes normally.
  ASSERT_EQ(net->e(1).post_recv(qb, make_recv(8, b, 0, 4096)), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 0, 4096)), 0);
  wa.clear();
  ASSERT_TRUE(net->wait_wc(0, wa, 1));
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
}

// A response older than everything outstanding (its request was resent, answered and
// completed before this first answer arrived, as a slow peer under loss does) is a duplicate,
// which the interop loss scenario expects, not a response for a PSN never sent.
TEST_F(ErrTest, LateAnswerToACompletedRequestIsADuplicate) {
  connect(RcParams{});
  fill_pattern(a.at(0), 4096, 5);
  std::vector<uint8_t> held;
  test::Faults f;
  f.filter = [&](const uint8_t *fr, uint32_t len) {
    if (held.empty() && opcode_of(fr, len) == wire::op::kRcAck) {
      held.assign(fr, fr + len);
      return test::Action::kDrop;
    }
    return test::Action::kPass;
  };
  net->link.set_faults(*net->node(1).ep, *net->node(0).ep, f);
  std::vector<Wc> wa, wb;
  for (uint64_t id = 1; id <= 2; ++id) {  // the first completes after a resend
    ASSERT_EQ(net->e(1).post_recv(qb, make_recv(id, b, 0, 4096)), 0);
    ASSERT_EQ(net->e(0).post_send(qa, make_wr(id, WrOpcode::kSend, a, 0, 4096)), 0);
    ASSERT_TRUE(net->wait_wc(0, wa, id));
    ASSERT_TRUE(net->wait_wc(1, wb, id));
  }
  ASSERT_FALSE(held.empty());
  EXPECT_EQ(net->e(0).qp_counters(qa)->retransmits, 1u);
  const uint64_t dup = net->e(0).counters().drop(DropReason::kDuplicate);
  net->e(0).rx(held.data(), static_cast<uint32_t>(held.size()));
  EXPECT_EQ(net->e(0).counters().drop(DropReason::kBadResponse), 0u);
  EXPECT_EQ(net->e(0).counters().drop(DropReason::kDuplicate), dup + 1);
  ASSERT_EQ(net->e(1).post_recv(qb, make_recv(3, b, 0, 4096)), 0);
  ASSERT_EQ(net->e(0).post_send(qa, make_wr(3, WrOpcode::kSend, a, 0, 4096)), 0);
  ASSERT_TRUE(net->wait_wc(0, wa, 3));
  for (const Wc &w : wa)
    EXPECT_EQ(w.status, WcStatus::kSuccess);
}

TEST_F(ErrTest, PsnWrapsAt2To24) {
  UROCE_SEED(seed, 24);
  RcParams p;
  p.mtu = Mtu::k256;
  p.psn_a = 0xFFFFF0;
  p.psn_b = 0xFFFFFA;
  p.timeout = 6;
  connect(p);
  test::Faults f;
  f.drop = 0.02;
  net->link.set_faults(f);
  fill_pattern(a.at(0), 8192, static_cast<uint32_t>(seed));
  for (int i = 0; i < 8; ++i) {
    SendWr w = make_wr(i, WrOpcode::kRdmaWrite, a, i * 1024, 1024);  // 4 packets each
    w.remote_addr = kVaB + i * 1024;
    w.rkey = b.key;
    ASSERT_EQ(net->e(0).post_send(qa, w), 0);
  }
  SendWr r = make_wr(8, WrOpcode::kRdmaRead, a, 16384, 8192);
  r.remote_addr = kVaB;
  r.rkey = b.key;
  ASSERT_EQ(net->e(0).post_send(qa, r), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net->wait_wc(0, wc, 9));
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(wc[i].wr_id, uint64_t(i));
    EXPECT_EQ(wc[i].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(std::memcmp(a.at(0), b.at(0), 8192), 0);
  EXPECT_EQ(std::memcmp(a.at(16384), b.at(0), 8192), 0);
  QpAttr at;
  ASSERT_EQ(net->e(0).query_qp(qa, &at, nullptr), 0);
  EXPECT_EQ(at.sq_psn, (0xFFFFF0u + 32 + 32) & 0xFFFFFF);  // wrapped
  ASSERT_EQ(net->e(1).query_qp(qb, &at, nullptr), 0);
  EXPECT_EQ(at.rq_psn, (0xFFFFF0u + 64) & 0xFFFFFF);
}

}  // namespace
}  // namespace uroce::transport::testing
