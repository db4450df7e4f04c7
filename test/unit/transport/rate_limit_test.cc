// SPDX-License-Identifier: BSD-3-Clause
// IBV_QP_RATE_LIMIT (lib/transport/cc.cc, qp_state.cc): a QP's maximum send rate, held by the
// DCQCN pacer with or without DCQCN, the lower of the two when both apply; which QPs, states and
// values modify_qp accepts; query_qp reports it and RESET clears it. Simulated time on the fake
// link (10 Gb/s, no marking unless asked).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "harness.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kVaA = 0x1000000;
constexpr uint64_t kVaB = 0x2000000;
constexpr uint32_t kMsg = 1u << 20;

// One 1 MiB WRITE from node 0 to node 1 after `limit_kbps` was set on the sender's QP in RTS
// (none when 0). With `params`, DCQCN runs and the link marks CE on any queued frame. Returns
// the simulated time the WRITE took (0 on a failure).
uint64_t write_time(uint32_t limit_kbps, const DcqcnParams *params = nullptr) {
  EngineConfig cfg;
  cfg.ecn = true;
  cfg.dcqcn = params;
  cfg.line_rate_mbps = 10000;
  Net net(7, 2, cfg, 4096);
  const uint32_t acc = kAccessLocalWrite | kAccessRemoteWrite;
  Buf a = net.reg(0, kMsg, acc, kVaA);
  Buf b = net.reg(1, kMsg, acc, kVaB);
  for (size_t i = 0; i < a.mem.size(); ++i)
    a.mem[i] = static_cast<uint8_t>(i * 7 + (i >> 10));
  test::Bottleneck bn;
  bn.bits_per_ns = 10.0;
  bn.ecn_threshold_bytes = params ? 0 : UINT32_MAX;
  net.link.set_bottleneck(*net.node(1).ep, bn);
  auto [qa, qb] = net.connect(0, 1);
  (void)qb;
  if (limit_kbps) {
    QpAttr r;
    r.rate_limit_kbps = limit_kbps;
    EXPECT_EQ(net.e(0).modify_qp(qa, r, kQpRateLimit), 0);
  }
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, a, 0, kMsg);
  w.remote_addr = kVaB;
  w.rkey = b.key;
  const uint64_t t0 = net.clock.now_ns();
  EXPECT_EQ(net.e(0).post_send(qa, w), 0);
  std::vector<Wc> wcs;
  if (!net.wait_wc(0, wcs, 1) || wcs.size() != 1 || wcs[0].status != WcStatus::kSuccess) {
    ADD_FAILURE() << "the WRITE did not complete";
    return 0;
  }
  EXPECT_EQ(std::memcmp(a.mem.data(), b.mem.data(), kMsg), 0);
  return net.clock.now_ns() - t0;
}

// 1 MiB is 1024 packets charged 1024 + 64 bytes each by the pacer; the first 4 leave at once
// (the burst): (1024 - 4) x 1088 x 8 bits at R.
constexpr double kPacedBits = (1024.0 - 4) * 1088 * 8;

TEST(RateLimit, PacesTheRequesterWithoutDcqcn) {
  const uint64_t free_ns = write_time(0);
  EXPECT_GT(free_ns, 0u);
  EXPECT_LT(free_ns, 2'000'000u);  // 10 Gb/s: ~0.9 ms of frames
  for (uint32_t kbps : {1'000'000u, 200'000u}) {
    const double want_ns = kPacedBits / (kbps / 1e6);  // bits / (Gb/s) = ns
    const uint64_t t = write_time(kbps);
    EXPECT_GT(t, want_ns * 0.98) << kbps << " kbit/s";
    EXPECT_LT(t, want_ns * 1.02 + 200'000) << kbps << " kbit/s";  // + the last ACK's trip
  }
}

TEST(RateLimit, TheLowerOfTheLimitAndDcqcnWins) {
  // DCQCN sets 1 Gb/s on the first CNP and keeps it (no cut, no increase).
  DcqcnParams p;
  p.rate_to_set_on_first_cnp = 1000;
  p.rpg_min_dec_fac = 100;
  p.rpg_time_reset = 131071;
  p.rpg_byte_reset = 0;
  // Limit 500 Mb/s, under DCQCN's 1 Gb/s: the limit holds from the first packet.
  const double want_ns = kPacedBits / 0.5;
  const uint64_t t = write_time(500'000, &p);
  EXPECT_GT(t, want_ns * 0.98);
  EXPECT_LT(t, want_ns * 1.02 + 200'000);
  // Limit 5 Gb/s, above DCQCN's 1 Gb/s: DCQCN's rate holds once the first CNP is back (the
  // window sent before it at 5 Gb/s), so well above the 1.7 ms of 5 Gb/s alone.
  const uint64_t t2 = write_time(5'000'000, &p);
  EXPECT_GT(t2, 6'000'000u);
  EXPECT_LT(t2, 9'000'000u);
}

// READ responses are paced like requests: node 0 READs 1 MiB from node 1, whose QP (the
// responder) is limited to 1 Gb/s; unlimited, the same READ takes under 2 ms.
uint64_t read_time(uint32_t responder_limit_kbps) {
  EngineConfig cfg;
  cfg.line_rate_mbps = 10000;
  Net net(11, 2, cfg, 4096);
  const uint32_t acc = kAccessLocalWrite | kAccessRemoteRead;
  Buf a = net.reg(0, kMsg, acc, kVaA);
  Buf b = net.reg(1, kMsg, acc, kVaB);
  for (size_t i = 0; i < b.mem.size(); ++i)
    b.mem[i] = static_cast<uint8_t>(i * 5 + (i >> 11));
  test::Bottleneck bn;
  bn.bits_per_ns = 10.0;
  net.link.set_bottleneck(*net.node(0).ep, bn);
  auto [qa, qb] = net.connect(0, 1);
  if (responder_limit_kbps) {
    QpAttr r;
    r.rate_limit_kbps = responder_limit_kbps;
    EXPECT_EQ(net.e(1).modify_qp(qb, r, kQpRateLimit), 0);
  }
  SendWr w = make_wr(1, WrOpcode::kRdmaRead, a, 0, kMsg);
  w.remote_addr = kVaB;
  w.rkey = b.key;
  const uint64_t t0 = net.clock.now_ns();
  EXPECT_EQ(net.e(0).post_send(qa, w), 0);
  std::vector<Wc> wcs;
  if (!net.wait_wc(0, wcs, 1) || wcs.size() != 1 || wcs[0].status != WcStatus::kSuccess) {
    ADD_FAILURE() << "the READ did not complete";
    return 0;
  }
  EXPECT_EQ(std::memcmp(a.mem.data(), b.mem.data(), kMsg), 0);
  return net.clock.now_ns() - t0;
}

TEST(RateLimit, PacesReadResponses) {
  const uint64_t free_ns = read_time(0);
  EXPECT_GT(free_ns, 0u);
  EXPECT_LT(free_ns, 2'000'000u);
  const double want_ns = kPacedBits / 1.0;  // 1 Gb/s
  const uint64_t t = read_time(1'000'000);
  EXPECT_GT(t, want_ns * 0.98);
  EXPECT_LT(t, want_ns * 1.02 + 200'000);
}

TEST(RateLimit, ModifyAcceptsRcUcInRtrRtsSqdAndTheRange) {
  EngineConfig cfg;
  Net net(9, 2, cfg, 4096);
  auto [qa, qb] = net.connect(0, 1);
  (void)qb;
  QpAttr r;
  QpAttr q;
  QpInitAttr init;
  // Out of range, either side.
  r.rate_limit_kbps = kRateLimitMinKbps - 1;
  EXPECT_EQ(net.e(0).modify_qp(qa, r, kQpRateLimit), EINVAL);
  r.rate_limit_kbps = kRateLimitMaxKbps + 1;
  EXPECT_EQ(net.e(0).modify_qp(qa, r, kQpRateLimit), EINVAL);
  // In range: kept and reported.
  r.rate_limit_kbps = kRateLimitMinKbps;
  EXPECT_EQ(net.e(0).modify_qp(qa, r, kQpRateLimit), 0);
  ASSERT_EQ(net.e(0).query_qp(qa, &q, &init), 0);
  EXPECT_EQ(q.rate_limit_kbps, kRateLimitMinKbps);
  // Together with a state change RTS -> SQD.
  r.rate_limit_kbps = kRateLimitMaxKbps;
  r.qp_state = QpState::kSqd;
  EXPECT_EQ(net.e(0).modify_qp(qa, r, kQpRateLimit | kQpState), 0);
  ASSERT_EQ(net.e(0).query_qp(qa, &q, &init), 0);
  EXPECT_EQ(q.qp_state, QpState::kSqd);
  EXPECT_EQ(q.rate_limit_kbps, kRateLimitMaxKbps);
  // 0 removes it.
  r.rate_limit_kbps = 0;
  EXPECT_EQ(net.e(0).modify_qp(qa, r, kQpRateLimit), 0);
  ASSERT_EQ(net.e(0).query_qp(qa, &q, &init), 0);
  EXPECT_EQ(q.rate_limit_kbps, 0u);
  // Not while going to ERR / RESET / INIT, and RESET clears it.
  r.rate_limit_kbps = 2000;
  EXPECT_EQ(net.e(0).modify_qp(qa, r, kQpRateLimit), 0);
  r.qp_state = QpState::kErr;
  EXPECT_EQ(net.e(0).modify_qp(qa, r, kQpRateLimit | kQpState), EINVAL);
  r.qp_state = QpState::kReset;
  EXPECT_EQ(net.e(0).modify_qp(qa, r, kQpRateLimit | kQpState), EINVAL);
  EXPECT_EQ(net.e(0).modify_qp(qa, r, kQpState), 0);
  ASSERT_EQ(net.e(0).query_qp(qa, &q, &init), 0);
  EXPECT_EQ(q.rate_limit_kbps, 0u);
  EXPECT_EQ(net.e(0).modify_qp(qa, r, kQpRateLimit), EINVAL);  // in RESET
  // UD: refused (packet_pacing_caps.supported_qpts is RC and UC).
  RcParams ud;
  ud.type = QpType::kUd;
  const uint32_t u = net.create(0, ud, 0);
  ASSERT_NE(u, 0u);
  QpAttr s;
  s.qp_state = QpState::kInit;
  s.port_num = 1;
  s.pkey_index = 0;
  s.qkey = 0x11111111;
  ASSERT_EQ(net.e(0).modify_qp(u, s, kQpState | kQpPort | kQpPkeyIndex | kQpQkey), 0);
  s.qp_state = QpState::kRtr;
  ASSERT_EQ(net.e(0).modify_qp(u, s, kQpState), 0);
  s.rate_limit_kbps = 2000;
  EXPECT_EQ(net.e(0).modify_qp(u, s, kQpRateLimit), EINVAL);
}

}  // namespace
}  // namespace uroce::transport::testing
