// SPDX-License-Identifier: BSD-3-Clause
// Wire fidelity, part 1: runs a representative traffic mix between three engines over the fake
// link with both captures on, and checks that the traffic itself did what it should (every
// completion's status, the data, the NAK / RNR / CNP counters). check_capture.py then has
// uroce-pcap-check and tshark dissect the two pcaps and compares them with each other and with
// its own parse of the frames.
//
// The mix:
//   nodes 0 <-> 1, RC over IPv4 at MTU 256 and nodes 0 <-> 2, RC over IPv6 at MTU 4096: SEND /
//   SEND_WITH_IMM / SEND_WITH_INV, each as one packet and as FIRST / MIDDLE / LAST, WRITE and
//   WRITE_WITH_IMM likewise, READ of one and of several packets, CMP_SWAP, FETCH_ADD, ACKs;
//   a sequence NAK (one WRITE MIDDLE dropped on the first pair), an RNR NAK (SEND before the
//   receive is posted), retransmissions under 3 % random loss (second pair), a remote access
//   error NAK (WRITE with a bad R_Key on a third pair);
//   nodes 1 <-> 2, UC at MTU 256: SEND / SEND_WITH_IMM / WRITE / WRITE_WITH_IMM, one packet and
//   several;
//   UD on every node, over an IPv4 and an IPv6 address handle, with and without immediate;
//   ECN: the engines mark data ECT(0) and node 1's switch port marks CE above 3 KB queued, so
//   its QPs send CNPs.
//
// Usage (normally from check_capture.py):
//   UROCE_CAPTURE_SENT=sent.pcap UROCE_CAPTURE_DELIVERED=delivered.pcap capture_traffic
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>

#include "harness.h"
#include "wire/packet.h"

namespace uroce::transport::testing {
namespace {

uint8_t opcode_of(const uint8_t *f, uint32_t len) {
  wire::ParsedPacket p;
  if (wire::parse_frame(f, len, &p, 0) != wire::ParseError::kOk) return 0xFF;
  return p.bth()->opcode();
}

std::string env_path(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

struct Pair {
  uint32_t qa = 0, qb = 0;
  Buf a, b;
};

// Posts the whole RC mix on a connected pair (a -> b) and checks every completion and the data.
void rc_mix(Net &net, size_t x, size_t y, Pair &p, uint32_t mtu, uint64_t id0) {
  const uint32_t multi = 2 * mtu + mtu / 2;  // FIRST, MIDDLE, LAST
  fill_pattern(p.a.at(0), 8 * multi, static_cast<uint32_t>(id0));
  std::memset(p.b.at(0), 0, p.b.mem.size());
  // two regions the peer will invalidate with SEND_WITH_INV
  const Buf inv1 = net.reg(y, 64, kAllAccess, 0x9000000 + id0 * 0x1000);
  const Buf inv2 = net.reg(y, 64, kAllAccess, 0x9100000 + id0 * 0x1000);
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(net.e(y).post_recv(p.qb, make_recv(id0 + 100 + i, p.b, i * multi, multi)), 0);
  std::vector<SendWr> wrs;
  auto add = [&](WrOpcode op, uint32_t off, uint32_t len) -> SendWr & {
    wrs.push_back(make_wr(id0 + wrs.size(), op, p.a, off, len));
    return wrs.back();
  };
  add(WrOpcode::kSend, 0, multi);
  add(WrOpcode::kSend, 0, 40);
  add(WrOpcode::kSendWithImm, 0, multi).imm_data_be = 0x01000000;
  add(WrOpcode::kSendWithImm, 0, 30).imm_data_be = 0x02000000;
  add(WrOpcode::kSendWithInv, 0, multi).invalidate_rkey = inv1.key;
  add(WrOpcode::kSendWithInv, 0, 20).invalidate_rkey = inv2.key;
  const uint64_t wbase = 8 * multi;  // WRITE / READ target area in b
  for (auto [op, len] : {std::pair{WrOpcode::kRdmaWrite, multi},
                         {WrOpcode::kRdmaWrite, 64u},
                         {WrOpcode::kRdmaWriteWithImm, multi},
                         {WrOpcode::kRdmaWriteWithImm, 8u}}) {
    SendWr &w = add(op, 0, len);
    w.remote_addr = p.b.va + wbase + (wrs.size() - 7) * multi;
    w.rkey = p.b.key;
    w.imm_data_be = 0x03000000;
  }
  for (uint32_t len : {multi, 100u}) {
    SendWr &r = add(WrOpcode::kRdmaRead, 12 * multi, len);  // reads what the WRITEs placed
    r.remote_addr = p.b.va + wbase;
    r.rkey = p.b.key;
    r.send_flags |= kSendFence;
  }
  const uint64_t abase = p.b.va + 16 * multi;
  SendWr &cas = add(WrOpcode::kAtomicCmpAndSwp, 14 * multi, 8);
  cas.remote_addr = abase;
  cas.rkey = p.b.key;
  cas.compare_add = 0;
  cas.swap = 77;
  SendWr &faa = add(WrOpcode::kAtomicFetchAndAdd, 14 * multi + 8, 8);
  faa.remote_addr = abase;
  faa.rkey = p.b.key;
  faa.compare_add = 5;
  for (const SendWr &w : wrs)
    ASSERT_EQ(net.e(x).post_send(p.qa, w), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net.wait_wc(x, wa, wrs.size()));
  ASSERT_TRUE(net.wait_wc(y, wb, 8));
  for (size_t i = 0; i < wa.size(); ++i) {
    EXPECT_EQ(wa[i].wr_id, id0 + i);
    EXPECT_EQ(wa[i].status, WcStatus::kSuccess) << i << ": " << wc_status_str(wa[i].status);
  }
  for (const Wc &w : wb)
    EXPECT_EQ(w.status, WcStatus::kSuccess) << w.wr_id << ": " << wc_status_str(w.status);
  EXPECT_EQ(wb[4].wc_flags, uint32_t{kWcWithInv});
  EXPECT_EQ(std::memcmp(p.b.at(0), p.a.at(0), multi), 0);
  EXPECT_EQ(std::memcmp(p.b.at(wbase), p.a.at(0), multi), 0);
  EXPECT_EQ(std::memcmp(p.a.at(12 * multi), p.a.at(0), multi), 0);  // READ back
  uint64_t v = 0;
  std::memcpy(&v, p.b.at(16 * multi), 8);
  EXPECT_EQ(v, 82u);  // CAS 0 -> 77, then FAA + 5
}

TEST(CaptureTraffic, RepresentativeMix) {
  const std::string sent = env_path("UROCE_CAPTURE_SENT");
  const std::string delivered = env_path("UROCE_CAPTURE_DELIVERED");
  ASSERT_FALSE(sent.empty()) << "set UROCE_CAPTURE_SENT (and UROCE_CAPTURE_DELIVERED)";
  ASSERT_FALSE(delivered.empty());
  EngineConfig cfg;
  cfg.ecn = true;
  cfg.cnp_dscp = 48;  // check_capture.py's CNP_DSCP
  Net net(21, 3, cfg);
  ASSERT_TRUE(net.link.capture(sent)) << sent;
  ASSERT_TRUE(net.link.capture_delivered(delivered)) << delivered;
  Endpoint &e0 = *net.node(0).ep, &e1 = *net.node(1).ep, &e2 = *net.node(2).ep;

  // ---- RC, IPv4, MTU 256, nodes 0 -> 1, with one WRITE MIDDLE dropped: a sequence NAK
  Pair p1;
  p1.a = net.reg(0, 1 << 16, kAllAccess, 0x1000000);
  p1.b = net.reg(1, 1 << 16, kAllAccess, 0x2000000);
  RcParams rp;
  rp.mtu = Mtu::k256;
  std::tie(p1.qa, p1.qb) = net.connect(0, 1, rp);
  int middles = 0;
  test::Faults f01;
  f01.filter = [&](const uint8_t *fr, uint32_t len) {
    return opcode_of(fr, len) == wire::op::kRcWriteMiddle && ++middles == 1 ? test::Action::kDrop
                                                                            : test::Action::kPass;
  };
  net.link.set_faults(e0, e1, f01);
  // node 1's port: 1 Gb/s, CE above 3 KB queued
  test::Bottleneck bn;
  bn.bits_per_ns = 1.0;
  bn.ecn_threshold_bytes = 3000;
  net.link.set_bottleneck(e1, bn);
  rc_mix(net, 0, 1, p1, 256, 1000);
  EXPECT_EQ(net.e(1).qp_counters(p1.qb)->seq_naks_sent, 1u);
  EXPECT_GE(net.e(0).qp_counters(p1.qa)->retransmits, 1u);

  // ---- RNR NAK on the same pair: a SEND before the receive is posted
  ASSERT_EQ(net.e(0).post_send(p1.qa, make_wr(1100, WrOpcode::kSend, p1.a, 0, 16)), 0);
  ASSERT_TRUE(net.run_until([&] { return net.e(1).qp_counters(p1.qb)->rnr_naks_sent >= 1; }));
  ASSERT_EQ(net.e(1).post_recv(p1.qb, make_recv(1101, p1.b, 0, 64)), 0);
  std::vector<Wc> w1, w2;
  ASSERT_TRUE(net.wait_wc(0, w1, 1));
  ASSERT_TRUE(net.wait_wc(1, w2, 1));
  EXPECT_EQ(w1[0].status, WcStatus::kSuccess);
  EXPECT_EQ(net.e(0).qp_counters(p1.qa)->rnr_naks_rcvd, 1u);

  // ---- RC, IPv6, MTU 4096, nodes 0 <-> 2, 3 % loss both ways: retransmissions
  Pair p2;
  p2.a = net.reg(0, 1 << 18, kAllAccess, 0x3000000);
  p2.b = net.reg(2, 1 << 18, kAllAccess, 0x4000000);
  rp.mtu = Mtu::k4096;
  rp.ipv6 = true;
  rp.timeout = 6;
  std::tie(p2.qa, p2.qb) = net.connect(0, 2, rp);
  // 3 % random loss, plus a few fixed frames of each direction so that loss surely happens
  test::Faults lossy;
  lossy.drop = 0.03;
  int n02 = 0, n20 = 0;
  lossy.filter = [&](const uint8_t *, uint32_t) {
    ++n02;
    return n02 == 4 || n02 == 15 || n02 == 31 ? test::Action::kDrop : test::Action::kPass;
  };
  net.link.set_faults(e0, e2, lossy);
  lossy.filter = [&](const uint8_t *, uint32_t) {
    ++n20;
    return n20 == 3 || n20 == 12 ? test::Action::kDrop : test::Action::kPass;
  };
  net.link.set_faults(e2, e0, lossy);
  rc_mix(net, 0, 2, p2, 4096, 2000);
  rc_mix(net, 0, 2, p2, 4096, 3000);
  net.link.set_faults(e0, e2, test::Faults{});
  net.link.set_faults(e2, e0, test::Faults{});
  EXPECT_GE(net.e(0).qp_counters(p2.qa)->retransmits, 1u);

  // ---- remote access error NAK: WRITE with a bad R_Key, nodes 0 -> 1, IPv4, MTU 1024
  RcParams rp3;
  auto [q3a, q3b] = net.connect(0, 1, rp3);
  SendWr bad = make_wr(4000, WrOpcode::kRdmaWrite, p1.a, 0, 100);
  bad.remote_addr = p1.b.va;
  bad.rkey = p1.b.key ^ 0x4400;
  ASSERT_EQ(net.e(0).post_send(q3a, bad), 0);
  w1.clear();
  ASSERT_TRUE(net.wait_wc(0, w1, 1));
  EXPECT_EQ(w1[0].status, WcStatus::kRemAccessErr);
  (void)q3b;

  // ---- UC, IPv4, MTU 256, nodes 1 -> 2
  Buf ua = net.reg(1, 1 << 16, kAllAccess, 0x5000000),
      ub = net.reg(2, 1 << 16, kAllAccess, 0x6000000);
  RcParams up;
  up.type = QpType::kUc;
  up.mtu = Mtu::k256;
  up.access = kAccessLocalWrite | kAccessRemoteWrite;
  auto [uqa, uqb] = net.connect(1, 2, up);
  fill_pattern(ua.at(0), 4096, 9);
  for (int i = 0; i < 6; ++i)
    ASSERT_EQ(net.e(2).post_recv(uqb, make_recv(5100 + i, ub, i * 1024, 1024)), 0);
  uint64_t uid = 5000;
  for (auto [op, len] : {std::pair{WrOpcode::kSend, 700u},
                         {WrOpcode::kSend, 50u},
                         {WrOpcode::kSendWithImm, 700u},
                         {WrOpcode::kSendWithImm, 50u},
                         {WrOpcode::kRdmaWrite, 700u},
                         {WrOpcode::kRdmaWrite, 50u},
                         {WrOpcode::kRdmaWriteWithImm, 700u},
                         {WrOpcode::kRdmaWriteWithImm, 50u}}) {
    SendWr w = make_wr(uid, op, ua, 0, len);
    w.remote_addr = ub.va + 8192 + (uid - 5000) * 1024;
    w.rkey = ub.key;
    w.imm_data_be = 0x05000000;
    ASSERT_EQ(net.e(1).post_send(uqa, w), 0);
    ++uid;
  }
  w1.clear();
  w2.clear();
  ASSERT_TRUE(net.wait_wc(1, w1, 8));
  ASSERT_TRUE(net.wait_wc(2, w2, 6));  // 2 SEND, 2 SEND_WITH_IMM, 2 WRITE_WITH_IMM
  EXPECT_EQ(w2.size(), 6u);
  for (const Wc &w : w2)
    EXPECT_EQ(w.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(ub.at(8192 + 4 * 1024), ua.at(0), 700), 0);

  // ---- UD on every node, over IPv4 and IPv6 address handles
  std::vector<uint32_t> ud;
  std::vector<Buf> ubufs;
  for (size_t i = 0; i < 3; ++i) {
    ubufs.push_back(net.reg(i, 1 << 14, kAllAccess, 0x7000000 + i * 0x100000));
    RcParams p;
    p.type = QpType::kUd;
    const uint32_t q = net.create(i, p, 0);
    QpAttr at;
    at.qp_state = QpState::kInit;
    at.qkey = 0x1234;
    ASSERT_EQ(net.e(i).modify_qp(q, at, kQpState | kQpPkeyIndex | kQpPort | kQpQkey), 0);
    at.qp_state = QpState::kRtr;
    ASSERT_EQ(net.e(i).modify_qp(q, at, kQpState), 0);
    at.qp_state = QpState::kRts;
    at.sq_psn = 0x77;
    ASSERT_EQ(net.e(i).modify_qp(q, at, kQpState | kQpSqPsn), 0);
    for (int k = 0; k < 4; ++k)
      ASSERT_EQ(net.e(i).post_recv(q, make_recv(6100 + k, ubufs[i], k * 2048, 2048)), 0);
    ud.push_back(q);
  }
  uint64_t did = 6000;
  for (size_t from = 0; from < 3; ++from) {
    const size_t to = (from + 1) % 3;
    for (bool v6 : {false, true}) {
      AhAttr ah;
      ah.path = net.path(from, to, v6);
      const uint32_t h = net.e(from).create_ah(net.node(from).pd, ah);
      ASSERT_NE(h, 0u);
      SendWr w =
          make_wr(did++, v6 ? WrOpcode::kSendWithImm : WrOpcode::kSend, ubufs[from], 0, 1000);
      w.ah = h;
      w.remote_qpn = ud[to];
      w.remote_qkey = 0x1234;
      w.imm_data_be = 0x06000000;
      ASSERT_EQ(net.e(from).post_send(ud[from], w), 0);
    }
  }
  for (size_t i = 0; i < 3; ++i) {
    std::vector<Wc> w;
    ASSERT_TRUE(net.wait_wc(i, w, 4));  // 2 sends + 2 receives
    for (const Wc &c : w)
      EXPECT_EQ(c.status, WcStatus::kSuccess);
  }
  net.settle();

  // ECN: CE marks were seen on node 1 and answered with CNPs.
  EXPECT_GT(net.link.counters().ce_marked, 0u);
  uint64_t cnps = 0;
  for (uint32_t q : {p1.qb, q3b})
    cnps += net.e(1).qp_counters(q)->cnp_sent;
  EXPECT_GT(cnps, 0u);
  EXPECT_GT(net.e(0).qp_counters(p1.qa)->cnp_rcvd, 0u);
  net.link.stop_capture();
  std::printf("frames: sent %llu, delivered %llu, CE marked %llu, CNPs from node 1 %llu\n",
              static_cast<unsigned long long>(net.link.counters().sent),
              static_cast<unsigned long long>(net.link.counters().delivered),
              static_cast<unsigned long long>(net.link.counters().ce_marked),
              static_cast<unsigned long long>(cnps));
}

}  // namespace
}  // namespace uroce::transport::testing
