// SPDX-License-Identifier: BSD-3-Clause
// The engine's dirty-CQ list (EngineCore::take_dirty_cqs / mark_cq_dirty): the daemon's
// bridge_out looks only at CQs on it, so its cost grows with the CQs that received completions.
// Completions are produced without a network: receive WQEs posted in INIT are flushed when the
// QP goes to ERR (one FLUSH_ERR completion each).
#include <gtest/gtest.h>

#include <vector>

#include "harness.h"

namespace uroce::transport::testing {
namespace {

constexpr uint32_t kMaxCq = 8;

struct Fixture {
  EngineConfig cfg = [] {
    EngineConfig c;
    c.max_cq = kMaxCq;
    return c;
  }();
  Net net{7, 1, cfg};
  Eng &e = net.e(0);
  Buf buf = net.reg(0, 4096, kAllAccess, 0x1000);

  // A QP whose send and receive CQ is `cq`, in INIT.
  uint32_t qp_on(uint32_t cq) {
    QpInitAttr ia;
    ia.qp_type = QpType::kRc;
    ia.pd = net.node(0).pd;
    ia.send_cq = cq;
    ia.recv_cq = cq;
    ia.cap = QpCap{8, 8, 1, 1, 0};
    const uint32_t qpn = e.create_qp(ia);
    EXPECT_NE(qpn, 0u);
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.port_num = 1;
    a.qp_access_flags = kAccessLocalWrite;
    EXPECT_EQ(e.modify_qp(qpn, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
    return qpn;
  }
  // n receive WQEs on qpn, then ERR: n flushed completions on its CQ.
  void flush_recvs(uint32_t qpn, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i)
      ASSERT_EQ(e.post_recv(qpn, make_recv(i, buf, 0, 64)), 0);
    QpAttr a;
    a.qp_state = QpState::kErr;
    ASSERT_EQ(e.modify_qp(qpn, a, kQpState), 0);
  }
  std::vector<uint32_t> take(uint32_t n = kMaxCq) {
    uint32_t out[kMaxCq + 1] = {};
    const uint32_t k = e.take_dirty_cqs(out, n);
    return std::vector<uint32_t>(out, out + k);
  }
};

TEST(DirtyCq, OnlyCqsWithNewCompletionsAreListedOnceInOrder) {
  Fixture f;
  std::vector<uint32_t> cq;
  for (uint32_t i = 1; i < kMaxCq; ++i) {  // handle 1 is the harness's CQ
    cq.push_back(f.e.create_cq(64));
    ASSERT_NE(cq.back(), 0u);
  }
  std::vector<uint32_t> qp;
  for (uint32_t c : cq)
    qp.push_back(f.qp_on(c));
  EXPECT_EQ(f.e.dirty_cq_count(), 0u) << "creating CQs and QPs completes nothing";
  EXPECT_TRUE(f.take().empty());

  f.flush_recvs(qp[4], 3);  // three completions on cq[4]: listed once
  f.flush_recvs(qp[1], 1);
  EXPECT_EQ(f.e.dirty_cq_count(), 2u);
  EXPECT_EQ(f.take(), (std::vector<uint32_t>{cq[4], cq[1]}));
  EXPECT_TRUE(f.take().empty()) << "taking clears the marks";
  EXPECT_EQ(f.e.cq_pending(cq[4]), 3u) << "the list does not consume completions";
  EXPECT_EQ(f.e.cq_pending(cq[1]), 1u);

  // A completion after the take lists the CQ again.
  f.flush_recvs(qp[2], 1);
  EXPECT_EQ(f.take(), (std::vector<uint32_t>{cq[2]}));
}

TEST(DirtyCq, MarkAgainTakeInBatchesAndInvalidHandles) {
  Fixture f;
  std::vector<uint32_t> cq{f.net.node(0).cq};
  for (uint32_t i = 1; i < kMaxCq; ++i)
    cq.push_back(f.e.create_cq(16));
  // Every CQ marked, some twice, in a known order: the list is full (max_cq) and exact.
  for (uint32_t i = 0; i < kMaxCq; ++i)
    f.e.mark_cq_dirty(cq[(i * 3) % kMaxCq]);
  for (uint32_t i = 0; i < kMaxCq; ++i)
    f.e.mark_cq_dirty(cq[i]);
  f.e.mark_cq_dirty(0);
  f.e.mark_cq_dirty(kMaxCq + 1);
  f.e.mark_cq_dirty(0xffffffffu);
  EXPECT_EQ(f.e.dirty_cq_count(), kMaxCq);
  // Taken in batches of 3; re-marking wraps the circular list around.
  std::vector<uint32_t> seen;
  for (int round = 0; round < 6; ++round) {
    for (uint32_t h : f.take(3)) {
      seen.push_back(h);
      if (round < 2) f.e.mark_cq_dirty(h);  // the consumer left completions behind
    }
  }
  std::vector<uint32_t> want;
  for (uint32_t i = 0; i < kMaxCq; ++i)
    want.push_back(cq[(i * 3) % kMaxCq]);
  for (uint32_t i = 0; i < 6; ++i)  // the six re-marked ones, behind the first pass
    want.push_back(want[i]);
  EXPECT_EQ(seen, want);
  EXPECT_EQ(f.e.dirty_cq_count(), 0u);
}

TEST(DirtyCq, DestroyTakesTheCqOffTheListAndKeepsTheOthersOrder) {
  Fixture f;
  const uint32_t a = f.e.create_cq(16), b = f.e.create_cq(16), c = f.e.create_cq(16);
  const uint32_t qb = f.qp_on(b);
  f.e.mark_cq_dirty(a);
  f.flush_recvs(qb, 2);
  f.e.mark_cq_dirty(c);
  EXPECT_EQ(f.e.destroy_cq(b), EBUSY);
  ASSERT_EQ(f.e.destroy_qp(qb), 0);
  ASSERT_EQ(f.e.destroy_cq(b), 0);
  EXPECT_EQ(f.e.dirty_cq_count(), 2u);
  // A new CQ reusing b's handle starts clean, and can be listed once.
  const uint32_t b2 = f.e.create_cq(16);
  EXPECT_EQ(b2, b);
  EXPECT_EQ(f.take(), (std::vector<uint32_t>{a, c}));
  f.e.mark_cq_dirty(b2);
  f.e.mark_cq_dirty(b2);
  EXPECT_EQ(f.take(), (std::vector<uint32_t>{b2}));
}

}  // namespace
}  // namespace uroce::transport::testing
