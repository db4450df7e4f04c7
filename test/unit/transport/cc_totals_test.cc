// SPDX-License-Identifier: BSD-3-Clause
// An engine's congestion-control totals (EngineCoreT::cc_totals, cc_totals.cc; uroce-stat
// port.P.cc.*): equal to the sum of its QPs' counters while they live, unchanged when a QP is
// moved to ERR (its reaction point is reset) or destroyed, and the throttled-QP rates of the
// QPs throttled now. Two RC QPs write 1 MiB each over a 10 Gb/s fake link that marks CE on
// every queued frame; with DCQCN the first CNP sets a QP to 1 Gb/s and nothing changes it after.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "harness.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kVaA = 0x1000000;
constexpr uint64_t kVaB = 0x2000000;
constexpr uint32_t kMsg = 1u << 20;

DcqcnParams one_gigabit() {
  DcqcnParams p;
  p.rate_to_set_on_first_cnp = 1000;
  p.rpg_min_dec_fac = 100;  // no cut below the first-CNP rate
  p.rpg_time_reset = 131071;
  p.rpg_byte_reset = 0;  // no increase within the test
  return p;
}

struct Sums {  // the QPs' own counters, summed
  uint64_t ce = 0, cnp_sent = 0, cnp_rcvd = 0, cnps = 0, cuts = 0, incs = 0, rels = 0;
  uint64_t throttled = 0;
};

Sums qp_sums(Net &net, size_t node, const std::vector<uint32_t> &qpns) {
  Sums s;
  for (uint32_t q : qpns) {
    const QpCounters *c = net.e(node).qp_counters(q);
    const DcqcnRp *rp = net.e(node).qp_rp(q);
    if (c == nullptr || rp == nullptr) {
      ADD_FAILURE() << "no QP " << q;
      continue;
    }
    s.ce += c->ce_seen;
    s.cnp_sent += c->cnp_sent;
    s.cnp_rcvd += c->cnp_rcvd;
    s.cnps += rp->stats().cnps;
    s.cuts += rp->stats().cuts;
    s.incs += rp->stats().increases;
    s.rels += rp->stats().releases;
    s.throttled += rp->throttled() ? 1 : 0;
  }
  return s;
}

// Node 0 writes 1 MiB on each of two RC QPs into node 1 through the marking bottleneck.
struct TwoWriters {
  explicit TwoWriters(const DcqcnParams *p) : net(21, 2, config(p), 4096) {
    const uint32_t acc = kAccessLocalWrite | kAccessRemoteWrite;
    a = net.reg(0, 2 * kMsg, acc, kVaA);
    b = net.reg(1, 2 * kMsg, acc, kVaB);
    fill_pattern(a.mem.data(), a.mem.size(), 7);
    test::Bottleneck bn;
    bn.bits_per_ns = 10.0;
    bn.ecn_threshold_bytes = 0;
    net.link.set_bottleneck(*net.node(1).ep, bn);
    for (int i = 0; i < 2; ++i) {
      auto [qa, qb] = net.connect(0, 1);
      sender.push_back(qa);
      receiver.push_back(qb);
      SendWr w = make_wr(i, WrOpcode::kRdmaWrite, a, i * kMsg, kMsg);
      w.remote_addr = kVaB + i * kMsg;
      w.rkey = b.key;
      EXPECT_EQ(net.e(0).post_send(qa, w), 0);
    }
    std::vector<Wc> wcs;
    EXPECT_TRUE(net.wait_wc(0, wcs, 2));
    for (const Wc &wc : wcs)
      EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_EQ(std::memcmp(a.mem.data(), b.mem.data(), a.mem.size()), 0);
  }
  static EngineConfig config(const DcqcnParams *p) {
    EngineConfig cfg;
    cfg.ecn = true;
    cfg.dcqcn = p;
    cfg.line_rate_mbps = 10000;
    return cfg;
  }
  Net net;
  Buf a, b;
  std::vector<uint32_t> sender, receiver;
};

TEST(CcTotals, SumOfTheQpsThenSurviveErrorAndDestroy) {
  const DcqcnParams p = one_gigabit();
  TwoWriters t(&p);
  Net &net = t.net;
  // While the QPs live: the totals are their sums.
  const Sums s = qp_sums(net, 0, t.sender);
  const CcTotals tx = net.e(0).cc_totals();
  ASSERT_EQ(s.throttled, 2u) << "both QPs must have been cut to 1 Gb/s";
  EXPECT_GT(s.cnp_rcvd, 0u);
  EXPECT_EQ(tx.cnp_rcvd, s.cnp_rcvd);
  EXPECT_EQ(tx.cnps_handled, s.cnps);
  EXPECT_EQ(tx.cnps_handled, s.cnp_rcvd);
  EXPECT_EQ(tx.rate_cuts, s.cuts);
  EXPECT_EQ(tx.rate_increases, s.incs);
  EXPECT_EQ(tx.releases, s.rels);
  EXPECT_EQ(tx.throttled_qps, 2u);
  EXPECT_EQ(tx.throttled_rate_sum_mbps, 2000.0);
  EXPECT_EQ(tx.throttled_rate_min_mbps, 1000.0);
  EXPECT_EQ(tx.ce_seen, 0u);  // the sender's direction carries no data: nothing to mark
  EXPECT_EQ(tx.cnp_sent, 0u);
  const Sums r = qp_sums(net, 1, t.receiver);
  const CcTotals rx = net.e(1).cc_totals();
  EXPECT_GT(r.ce, 0u);
  EXPECT_GT(r.cnp_sent, 0u);
  EXPECT_EQ(rx.ce_seen, r.ce);
  EXPECT_EQ(rx.cnp_sent, r.cnp_sent);
  EXPECT_EQ(rx.cnp_sent, s.cnp_rcvd);  // no loss on the fake link
  EXPECT_EQ(rx.throttled_qps, 0u);     // the receiver's QPs sent nothing worth a CNP

  // One QP to ERR: its reaction point starts over, the totals keep what it did.
  QpAttr err;
  err.qp_state = QpState::kErr;
  ASSERT_EQ(net.e(0).modify_qp(t.sender[0], err, kQpState), 0);
  EXPECT_EQ(net.e(0).qp_rp(t.sender[0])->stats().cuts, 0u);
  const CcTotals e1 = net.e(0).cc_totals();
  EXPECT_EQ(e1.cnp_rcvd, tx.cnp_rcvd);
  EXPECT_EQ(e1.cnps_handled, tx.cnps_handled);
  EXPECT_EQ(e1.rate_cuts, tx.rate_cuts);
  EXPECT_EQ(e1.rate_increases, tx.rate_increases);
  EXPECT_EQ(e1.throttled_qps, 1u);
  EXPECT_EQ(e1.throttled_rate_sum_mbps, 1000.0);
  EXPECT_EQ(e1.throttled_rate_min_mbps, 1000.0);

  // Every QP destroyed: the cumulative counters stay, nothing is throttled.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(net.e(0).destroy_qp(t.sender[i]), 0);
    EXPECT_EQ(net.e(1).destroy_qp(t.receiver[i]), 0);
  }
  const CcTotals tx2 = net.e(0).cc_totals();
  EXPECT_EQ(tx2.cnp_rcvd, tx.cnp_rcvd);
  EXPECT_EQ(tx2.cnps_handled, tx.cnps_handled);
  EXPECT_EQ(tx2.rate_cuts, tx.rate_cuts);
  EXPECT_EQ(tx2.rate_increases, tx.rate_increases);
  EXPECT_EQ(tx2.releases, tx.releases);
  EXPECT_EQ(tx2.throttled_qps, 0u);
  EXPECT_EQ(tx2.throttled_rate_sum_mbps, 0.0);
  EXPECT_EQ(tx2.throttled_rate_min_mbps, 0.0);
  const CcTotals rx2 = net.e(1).cc_totals();
  EXPECT_EQ(rx2.ce_seen, rx.ce_seen);
  EXPECT_EQ(rx2.cnp_sent, rx.cnp_sent);
}

TEST(CcTotals, NoneCountsCnpsButNoReaction) {
  TwoWriters t(nullptr);
  const CcTotals tx = t.net.e(0).cc_totals();
  const CcTotals rx = t.net.e(1).cc_totals();
  EXPECT_GT(tx.cnp_rcvd, 0u);
  EXPECT_EQ(tx.cnp_rcvd, qp_sums(t.net, 0, t.sender).cnp_rcvd);
  EXPECT_EQ(rx.cnp_sent, tx.cnp_rcvd);
  EXPECT_GT(rx.ce_seen, 0u);
  EXPECT_EQ(tx.cnps_handled, 0u);
  EXPECT_EQ(tx.rate_cuts, 0u);
  EXPECT_EQ(tx.throttled_qps, 0u);
}

// Summing the engines of a port (uroced's workers): the minimum rate is over the engines that
// have a throttled QP; one without leaves it alone.
TEST(CcTotals, AddKeepsTheMinimumOfThrottledEngines) {
  CcTotals a, idle, b, sum;
  a.cnp_rcvd = 5;
  a.rate_cuts = 3;
  a.throttled_qps = 2;
  a.throttled_rate_sum_mbps = 3000;
  a.throttled_rate_min_mbps = 1000;
  idle.cnp_rcvd = 1;
  b.throttled_qps = 1;
  b.throttled_rate_sum_mbps = 300;
  b.throttled_rate_min_mbps = 300;
  sum.add(idle);
  EXPECT_EQ(sum.throttled_rate_min_mbps, 0.0);
  sum.add(a);
  EXPECT_EQ(sum.throttled_rate_min_mbps, 1000.0);
  sum.add(idle);
  EXPECT_EQ(sum.throttled_rate_min_mbps, 1000.0);
  sum.add(b);
  EXPECT_EQ(sum.throttled_rate_min_mbps, 300.0);
  EXPECT_EQ(sum.throttled_qps, 3u);
  EXPECT_EQ(sum.throttled_rate_sum_mbps, 3300.0);
  EXPECT_EQ(sum.cnp_rcvd, 7u);
  EXPECT_EQ(sum.rate_cuts, 3u);
}

}  // namespace
}  // namespace uroce::transport::testing
