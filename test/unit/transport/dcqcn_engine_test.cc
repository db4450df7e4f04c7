// SPDX-License-Identifier: BSD-3-Clause
// DCQCN wired into the engine (lib/transport/cc.cc): CE marks at a bottleneck make the receiver
// send CNPs, the sender's reaction point cuts the QP's rate, and the requester then waits for
// the pacer. Simulated time on the fake link; the data arrive intact either way.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "harness.h"
#include "wire/hdr.h"
#include "wire/packet.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kVaA = 0x1000000;
constexpr uint64_t kVaB = 0x2000000;
constexpr uint32_t kMsg = 1u << 20;

struct Outcome {
  uint64_t done_ns = 0;  // simulated time the WRITE took
  bool data_ok = false;
  uint64_t cnp_rcvd = 0;
  DcqcnRp::Stats rp;
  bool throttled_at_end = false;
  uint32_t qpn = 0;  // the sender's QP
};

// One 1 MiB WRITE over a 10 Gb/s link that marks CE on any queued frame. With `params`, the
// first CNP sets the QP to 1 Gb/s (rate_to_set_on_first_cnp) and nothing changes it afterwards
// (no further cut: rpg_min_dec_fac 100; no increase: the timer is 131 ms, the byte counter off).
Outcome run(const DcqcnParams *params, std::vector<std::vector<uint8_t>> *cnps = nullptr,
            int16_t cnp_dscp = -1) {
  EngineConfig cfg;
  cfg.ecn = true;
  cfg.dcqcn = params;
  cfg.cnp_dscp = cnp_dscp;
  cfg.line_rate_mbps = 10000;
  Net net(5, 2, cfg, 4096);
  const uint32_t acc = kAccessLocalWrite | kAccessRemoteWrite;
  Buf a = net.reg(0, kMsg, acc, kVaA);
  Buf b = net.reg(1, kMsg, acc, kVaB);
  for (size_t i = 0; i < a.mem.size(); ++i)
    a.mem[i] = static_cast<uint8_t>(i * 13 + (i >> 9));
  test::Bottleneck bn;
  bn.bits_per_ns = 10.0;
  bn.ecn_threshold_bytes = 0;
  net.link.set_bottleneck(*net.node(1).ep, bn);
  if (cnps) {
    test::Faults f;
    f.filter = [cnps](const uint8_t *fr, uint32_t len) {
      if (len > 42 + 12 && fr[42] == wire::op::kCnp) cnps->emplace_back(fr, fr + len);
      return test::Action::kPass;
    };
    net.link.set_faults(*net.node(1).ep, *net.node(0).ep, f);
  }
  auto [qa, qb] = net.connect(0, 1);
  (void)qb;
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, a, 0, kMsg);
  w.remote_addr = kVaB;
  w.rkey = b.key;
  const uint64_t t0 = net.clock.now_ns();
  EXPECT_EQ(net.e(0).post_send(qa, w), 0);
  std::vector<Wc> wcs;
  EXPECT_TRUE(net.wait_wc(0, wcs, 1));
  Outcome r;
  r.qpn = qa;
  r.done_ns = net.clock.now_ns() - t0;
  EXPECT_EQ(wcs.size(), 1u);
  if (!wcs.empty()) {
    EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  }
  r.data_ok = std::memcmp(a.mem.data(), b.mem.data(), kMsg) == 0;
  r.cnp_rcvd = net.e(0).qp_counters(qa)->cnp_rcvd;
  r.rp = net.e(0).qp_rp(qa)->stats();
  r.throttled_at_end = net.e(0).qp_rp(qa)->throttled();
  return r;
}

DcqcnParams one_gigabit() {
  DcqcnParams p;
  p.rate_to_set_on_first_cnp = 1000;
  p.rpg_min_dec_fac = 100;
  p.rpg_time_reset = 131071;
  p.rpg_byte_reset = 0;
  return p;
}

TEST(DcqcnEngine, CnpThrottlesTheRequester) {
  const DcqcnParams p = one_gigabit();
  const Outcome r = run(&p);
  EXPECT_TRUE(r.data_ok);
  EXPECT_GT(r.cnp_rcvd, 0u);
  EXPECT_EQ(r.rp.cnps, r.cnp_rcvd);
  EXPECT_GE(r.rp.cuts, 1u);
  EXPECT_TRUE(r.throttled_at_end);
  // 1 MiB in 1024-byte packets charged 1024 + 64 bytes each, at 1 Gb/s: 1024 x 1088 x 8 ns =
  // 8.91 ms. Before the first CNP comes back the requester has sent up to its window
  // (max_inflight_psn 256 packets) at line rate, so at least 768 packets are paced: 6.68 ms.
  EXPECT_GT(r.done_ns, 6'600'000u);
  EXPECT_LT(r.done_ns, 9'000'000u);
}

TEST(DcqcnEngine, NoneLeavesTheRateAlone) {
  const Outcome r = run(nullptr);
  EXPECT_TRUE(r.data_ok);
  EXPECT_GT(r.cnp_rcvd, 0u);  // the NP still sends CNPs
  EXPECT_EQ(r.rp.cnps, 0u);
  EXPECT_FALSE(r.throttled_at_end);
  // 10 Gb/s: about 0.9 ms for the frames.
  EXPECT_LT(r.done_ns, 2'000'000u);
}

// The CNP as ConnectX sends it (NVIDIA's RoCEv2 CNP format): IPv4 total length 60, not ECT,
// DSCP cnp_dscp, UDP to 4791 with checksum 0, BTH opcode 0x81, P_Key 0xFFFF, BECN (byte 4 =
// 0x40), the throttled QP as destination, PSN 0, 16 reserved zero bytes, a valid ICRC.
TEST(DcqcnEngine, CnpIsByteExactWithTheConfiguredDscp) {
  const DcqcnParams p = one_gigabit();
  for (int16_t dscp : {int16_t{48}, int16_t{-1}}) {
    std::vector<std::vector<uint8_t>> cnps;
    const Outcome r = run(&p, &cnps, dscp);
    ASSERT_FALSE(cnps.empty());
    EXPECT_EQ(cnps.size(), r.cnp_rcvd);
    for (const auto &c : cnps) {
      ASSERT_EQ(c.size(), 14u + 60u);
      const uint8_t *ip = c.data() + 14;
      EXPECT_EQ(wire::be::load16(c.data() + 12), 0x0800);
      EXPECT_EQ(ip[0], 0x45);
      EXPECT_EQ(ip[1], dscp < 0 ? 0 : (48 << 2));  // ECN 00: a CNP is not ECN-capable
      EXPECT_EQ(wire::be::load16(ip + 2), 60);
      EXPECT_EQ(ip[9], 17);
      const uint8_t *udp = ip + 20;
      EXPECT_EQ(wire::be::load16(udp + 2), 4791);
      EXPECT_EQ(wire::be::load16(udp + 4), 40);
      EXPECT_EQ(wire::be::load16(udp + 6), 0);
      const uint8_t *bth = udp + 8;
      EXPECT_EQ(bth[0], 0x81);
      EXPECT_EQ(bth[1], 0);
      EXPECT_EQ(wire::be::load16(bth + 2), 0xFFFF);
      EXPECT_EQ(bth[4], 0x40);
      EXPECT_EQ(wire::be::load32(bth + 4) & 0xFFFFFF, r.qpn);
      EXPECT_EQ(wire::be::load32(bth + 8), 0u);  // AckReq and reserved bits 0, PSN 0
      for (int i = 0; i < 16; ++i)
        EXPECT_EQ(bth[12 + i], 0) << i;
      wire::ParsedPacket pp;
      EXPECT_EQ(wire::parse_frame(c.data(), c.size(), &pp), wire::ParseError::kOk);
    }
  }
}

}  // namespace
}  // namespace uroce::transport::testing
