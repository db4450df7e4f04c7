// SPDX-License-Identifier: BSD-3-Clause
// UC (no acknowledgement; a lost packet drops its message), UD (DETH, Q_Key, GRH in the
// receive buffer, address handles), SRQ with its limit event, solicited events, CNP / ECN hooks.
#include <gtest/gtest.h>

#include <cstring>

#include "harness.h"
#include "support/seed.h"
#include "wire/packet.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kVaA = 0x1000000, kVaB = 0x2000000;

TEST(Uc, SendAndWriteWithoutAcks) {
  Net net(1, 2);
  Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 65536, kAllAccess, kVaB);
  RcParams p;
  p.type = QpType::kUc;
  p.mtu = Mtu::k512;
  p.access = kAccessLocalWrite | kAccessRemoteWrite;
  auto [qa, qb] = net.connect(0, 1, p);
  fill_pattern(a.at(0), 8192, 1);
  ASSERT_EQ(net.e(1).post_recv(qb, make_recv(1, b, 0, 4096)), 0);
  ASSERT_EQ(net.e(1).post_recv(qb, make_recv(2, b, 4096, 4096)), 0);
  ASSERT_EQ(net.e(0).post_send(qa, make_wr(10, WrOpcode::kSend, a, 0, 2000)), 0);
  SendWr w = make_wr(11, WrOpcode::kRdmaWriteWithImm, a, 0, 3000);
  w.remote_addr = kVaB + 20000;
  w.rkey = b.key;
  w.imm_data_be = 0x01020304;
  ASSERT_EQ(net.e(0).post_send(qa, w), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net.wait_wc(0, wa, 2));
  ASSERT_TRUE(net.wait_wc(1, wb, 2));
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wa[1].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(wb[0].byte_len, 2000u);
  EXPECT_EQ(wb[1].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(wb[1].imm_data, 0x01020304u);
  EXPECT_EQ(std::memcmp(b.at(0), a.at(0), 2000), 0);
  EXPECT_EQ(std::memcmp(b.at(20000), a.at(0), 3000), 0);
  EXPECT_EQ(net.link.counters().sent, 4u + 6u);  // no ACK on the wire
  // UC cannot READ
  SendWr r = make_wr(12, WrOpcode::kRdmaRead, a, 0, 8);
  EXPECT_EQ(net.e(0).post_send(qa, r), EINVAL);
}

TEST(Uc, LostPacketDropsOnlyItsMessage) {
  Net net(2, 2);
  Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 65536, kAllAccess, kVaB);
  RcParams p;
  p.type = QpType::kUc;
  p.mtu = Mtu::k256;
  auto [qa, qb] = net.connect(0, 1, p);
  int n = 0;
  test::Faults f;
  f.filter = [&](const uint8_t *, uint32_t) {
    return ++n == 2 ? test::Action::kDrop : test::Action::kPass;  // a MIDDLE of message 1
  };
  net.link.set_faults(f);
  fill_pattern(a.at(0), 4096, 2);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(net.e(1).post_recv(qb, make_recv(i, b, i * 4096, 4096)), 0);
  ASSERT_EQ(net.e(0).post_send(qa, make_wr(1, WrOpcode::kSend, a, 0, 1024)), 0);
  ASSERT_EQ(net.e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 1024, 600)), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net.wait_wc(0, wa, 2));
  net.settle();
  Wc wc[4];
  const uint32_t k = net.e(1).poll_cq(net.node(1).cq, wc, 4);
  ASSERT_EQ(k, 1u);
  EXPECT_EQ(wc[0].wr_id, 0u);  // the WQE of the dropped message is reused
  EXPECT_EQ(wc[0].byte_len, 600u);
  EXPECT_EQ(std::memcmp(b.at(0), a.at(1024), 600), 0);
  EXPECT_EQ(net.e(1).counters().drop(DropReason::kSequence), 2u);
}

class UdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net = std::make_unique<Net>(3, 3);
    for (size_t i = 0; i < 3; ++i) {
      bufs.push_back(net->reg(i, 65536, kAllAccess, 0x100000 * (i + 1)));
      RcParams p;
      p.type = QpType::kUd;
      const uint32_t q = net->create(i, p, 0);
      QpAttr a;
      a.qp_state = QpState::kInit;
      a.qkey = 0x11110000u + static_cast<uint32_t>(i == 2 ? 99 : 0);
      ASSERT_EQ(net->e(i).modify_qp(q, a, kQpState | kQpPkeyIndex | kQpPort | kQpQkey), 0);
      a.qp_state = QpState::kRtr;
      ASSERT_EQ(net->e(i).modify_qp(q, a, kQpState), 0);
      a.qp_state = QpState::kRts;
      a.sq_psn = 5;
      ASSERT_EQ(net->e(i).modify_qp(q, a, kQpState | kQpSqPsn), 0);
      qps.push_back(q);
    }
  }
  std::unique_ptr<Net> net;
  std::vector<Buf> bufs;
  std::vector<uint32_t> qps;
};

TEST_F(UdTest, SendWithGrhQkeyAndAddressHandles) {
  AhAttr ah;
  ah.path = net->path(0, 1);
  const uint32_t h1 = net->e(0).create_ah(net->node(0).pd, ah);
  ah.path = net->path(0, 2);
  const uint32_t h2 = net->e(0).create_ah(net->node(0).pd, ah);
  ASSERT_NE(h1, 0u);
  ASSERT_NE(h2, 0u);
  Buf &a = bufs[0], &b = bufs[1], &c = bufs[2];
  fill_pattern(a.at(0), 4096, 3);
  ASSERT_EQ(net->e(1).post_recv(qps[1], make_recv(7, b, 0, 40 + 4096)), 0);
  ASSERT_EQ(net->e(1).post_recv(qps[1], make_recv(8, b, 8192, 40 + 100)), 0);
  ASSERT_EQ(net->e(2).post_recv(qps[2], make_recv(9, c, 0, 4096)), 0);
  SendWr w = make_wr(1, WrOpcode::kSendWithImm, a, 0, 1000);
  w.ah = h1;
  w.remote_qpn = qps[1];
  w.remote_qkey = 0x11110000;
  w.imm_data_be = 0xCAFE;
  ASSERT_EQ(net->e(0).post_send(qps[0], w), 0);
  SendWr w2 = make_wr(2, WrOpcode::kSend, a, 0, 200);  // too long for the 140-byte buffer
  w2.ah = h1;
  w2.remote_qpn = qps[1];
  w2.remote_qkey = 0x11110000;
  ASSERT_EQ(net->e(0).post_send(qps[0], w2), 0);
  SendWr w3 = make_wr(3, WrOpcode::kSend, a, 0, 10);  // node 2 has another Q_Key: dropped
  w3.ah = h2;
  w3.remote_qpn = qps[2];
  w3.remote_qkey = 0x11110000;
  ASSERT_EQ(net->e(0).post_send(qps[0], w3), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net->wait_wc(0, wa, 3));
  ASSERT_TRUE(net->wait_wc(1, wb, 2));
  net->settle();
  for (auto &x : wa)
    EXPECT_EQ(x.status, WcStatus::kSuccess);
  EXPECT_EQ(wb[0].wr_id, 7u);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wb[0].byte_len, 1040u);
  EXPECT_EQ(wb[0].src_qp, qps[0]);
  EXPECT_EQ(wb[0].wc_flags, uint32_t{kWcGrh | kWcWithImm});
  EXPECT_EQ(wb[0].imm_data, 0xCAFEu);
  EXPECT_EQ(wb[0].qp_num, qps[1]);
  // GRH: 20 zero bytes, then the IPv4 header (version 4, IHL 5, protocol UDP, source 10.0.0.1)
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(b.at(0)[i], 0);
  EXPECT_EQ(b.at(20)[0], 0x45);
  EXPECT_EQ(b.at(20)[9], 17);
  EXPECT_EQ(b.at(20)[12 + 3], 1);
  EXPECT_EQ(std::memcmp(b.at(40), a.at(0), 1000), 0);
  EXPECT_EQ(wb[1].wr_id, 8u);
  EXPECT_EQ(wb[1].status, WcStatus::kLocLenErr);
  Wc wc[2];
  EXPECT_EQ(net->e(2).poll_cq(net->node(2).cq, wc, 2), 0u);
  EXPECT_EQ(net->e(2).counters().drop(DropReason::kQkey), 1u);
  // UD messages larger than the MTU are refused at post time
  SendWr big = make_wr(4, WrOpcode::kSend, a, 0, 5000);
  big.ah = h1;
  EXPECT_EQ(net->e(0).post_send(qps[0], big), EINVAL);
}

TEST(Srq, SharedAcrossQpsWithLimitEvent) {
  Net net(4, 2);
  Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 65536, kAllAccess, kVaB);
  const uint32_t srq = net.e(1).create_srq(net.node(1).pd, 16, 2);
  ASSERT_NE(srq, 0u);
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(net.e(1).post_srq_recv(srq, make_recv(i, b, i * 1024, 1024)), 0);
  ASSERT_EQ(net.e(1).modify_srq(srq, 5), 0);
  RcParams p;
  p.srq_b = srq;
  auto [q1a, q1b] = net.connect(0, 1, p);
  auto [q2a, q2b] = net.connect(0, 1, p);
  fill_pattern(a.at(0), 4096, 4);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(net.e(0).post_send(q1a, make_wr(i, WrOpcode::kSend, a, i * 100, 100)), 0);
    ASSERT_EQ(net.e(0).post_send(q2a, make_wr(i, WrOpcode::kSend, a, i * 100, 100)), 0);
  }
  std::vector<Wc> wb;
  ASSERT_TRUE(net.wait_wc(1, wb, 4));
  uint32_t on1 = 0, on2 = 0;
  for (auto &w : wb) {
    EXPECT_EQ(w.status, WcStatus::kSuccess);
    on1 += w.qp_num == q1b;
    on2 += w.qp_num == q2b;
  }
  EXPECT_EQ(on1, 2u);
  EXPECT_EQ(on2, 2u);
  EXPECT_EQ(net.e(1).srq_count(srq), 4u);
  AsyncEventRecord ev;
  ASSERT_TRUE(net.e(1).poll_async_event(&ev));
  EXPECT_EQ(ev.type, AsyncEvent::kSrqLimitReached);
  EXPECT_EQ(ev.handle, srq);
  EXPECT_FALSE(net.e(1).poll_async_event(&ev));                        // raised once per arming
  EXPECT_EQ(net.e(1).post_recv(q1b, make_recv(99, b, 0, 8)), EINVAL);  // QP uses an SRQ
}

TEST(Events, SolicitedOnlyNotification) {
  Net net(5, 2);
  Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 65536, kAllAccess, kVaB);
  auto [qa, qb] = net.connect(0, 1);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(net.e(1).post_recv(qb, make_recv(i, b, i * 64, 64)), 0);
  ASSERT_EQ(net.e(1).req_notify_cq(net.node(1).cq, true), 0);
  ASSERT_EQ(net.e(0).post_send(qa, make_wr(1, WrOpcode::kSend, a, 0, 8)), 0);
  std::vector<Wc> wb;
  ASSERT_TRUE(net.wait_wc(1, wb, 1));
  EXPECT_EQ(net.e(1).cq_events(net.node(1).cq), 0u);  // not solicited
  ASSERT_EQ(
      net.e(0).post_send(qa, make_wr(2, WrOpcode::kSend, a, 0, 8, kSendSignaled | kSendSolicited)),
      0);
  ASSERT_TRUE(net.wait_wc(1, wb, 2));
  EXPECT_EQ(net.e(1).cq_events(net.node(1).cq), 1u);
}

TEST(Fence, WaitsForEarlierReads) {
  Net net(6, 2);
  Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 65536, kAllAccess, kVaB);
  auto [qa, qb] = net.connect(0, 1);
  fill_pattern(b.at(0), 1024, 6);
  SendWr r = make_wr(1, WrOpcode::kRdmaRead, a, 0, 1024);
  r.remote_addr = kVaB;
  r.rkey = b.key;
  ASSERT_EQ(net.e(0).post_send(qa, r), 0);
  // A fenced WRITE of the same remote bytes must not overtake the READ.
  std::memset(a.at(4096), 0xEE, 1024);
  SendWr w = make_wr(2, WrOpcode::kRdmaWrite, a, 4096, 1024, kSendSignaled | kSendFence);
  w.remote_addr = kVaB;
  w.rkey = b.key;
  ASSERT_EQ(net.e(0).post_send(qa, w), 0);
  // Before the READ response arrives, only the READ request is on the wire.
  net.e(0).poll();
  EXPECT_EQ(net.e(0).qp_counters(qa)->tx_pkts, 1u);
  std::vector<Wc> wa;
  ASSERT_TRUE(net.wait_wc(0, wa, 2));
  uint8_t expect[1024];
  fill_pattern(expect, 1024, 6);
  EXPECT_EQ(std::memcmp(a.at(0), expect, 1024), 0);
  EXPECT_EQ(b.at(0)[0], 0xEE);
}

TEST(Congestion, CeMarkYieldsRateLimitedCnp) {
  struct Seen {
    int ce = 0, sent = 0, rcvd = 0;
  } seen;
  EngineConfig ec;
  ec.ecn = true;
  ec.cnp_interval_ns = 50'000;
  ec.hooks.ctx = &seen;
  ec.hooks.on_ce = [](void *c, uint32_t, uint64_t) { ++static_cast<Seen *>(c)->ce; };
  ec.hooks.on_cnp_sent = [](void *c, uint32_t, uint64_t) { ++static_cast<Seen *>(c)->sent; };
  ec.hooks.on_cnp_received = [](void *c, uint32_t, uint64_t) { ++static_cast<Seen *>(c)->rcvd; };
  Net net(7, 2, ec);
  Buf a = net.reg(0, 1 << 20, kAllAccess, kVaA), b = net.reg(1, 1 << 20, kAllAccess, kVaB);
  auto [qa, qb] = net.connect(0, 1);
  test::Faults f;
  f.filter = [](const uint8_t *fr, uint32_t len) {
    // data packets must be ECT(0); mark every one CE as a congested switch would
    if (test::frame_ecn(fr, len) == 2) test::set_frame_ecn(const_cast<uint8_t *>(fr), len, 3);
    return test::Action::kPass;
  };
  net.link.set_faults(*net.node(0).ep, *net.node(1).ep, f);
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, a, 0, 64 * 1024);
  w.remote_addr = kVaB;
  w.rkey = b.key;
  ASSERT_EQ(net.e(0).post_send(qa, w), 0);
  std::vector<Wc> wa;
  ASSERT_TRUE(net.wait_wc(0, wa, 1));
  net.settle();
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
  EXPECT_EQ(seen.ce, 64);  // 64 packets of 1 KiB, all marked
  EXPECT_GE(seen.sent, 1);
  EXPECT_EQ(seen.sent, seen.rcvd);
  EXPECT_EQ(uint64_t(seen.sent), net.e(1).qp_counters(qb)->cnp_sent);
  EXPECT_EQ(uint64_t(seen.rcvd), net.e(0).qp_counters(qa)->cnp_rcvd);
  // rate limit: no more CNPs than 50-us intervals elapsed, plus one
  EXPECT_LE(uint64_t(seen.sent), net.clock.now_ns() / 50'000 + 1);
}

TEST(Wire, UdpSourcePortIsPerQpEntropy) {
  Net net(8, 2);
  Buf a = net.reg(0, 4096, kAllAccess, kVaA);
  std::vector<uint16_t> ports;
  test::Faults f;
  f.filter = [&](const uint8_t *fr, uint32_t len) {
    wire::ParsedPacket p;
    if (wire::parse_frame(fr, len, &p) == wire::ParseError::kOk) ports.push_back(p.udp()->sport());
    return test::Action::kPass;
  };
  net.link.set_faults(f);
  for (int i = 0; i < 4; ++i) {
    auto [qa, qb] = net.connect(0, 1);
    Buf b = net.reg(1, 4096, kAllAccess, kVaB + i * 4096);
    ASSERT_EQ(net.e(1).post_recv(qb, make_recv(1, b, 0, 64)), 0);
    ASSERT_EQ(net.e(0).post_send(qa, make_wr(1, WrOpcode::kSend, a, 0, 8)), 0);
    net.settle();
  }
  ASSERT_EQ(ports.size(), 8u);  // 4 SENDs + 4 ACKs
  for (uint16_t p : ports)
    EXPECT_EQ(p & 0xC000, 0xC000);
  EXPECT_NE(ports[0], ports[2]);
  EXPECT_NE(ports[2], ports[4]);
}

}  // namespace
}  // namespace uroce::transport::testing
