// SPDX-License-Identifier: BSD-3-Clause
// The QP state machine and its attribute masks (no network): every legal transition with the
// required mask succeeds; dropping any required bit, adding a bit the transition does not
// allow, an illegal transition, a wrong IBV_QP_CUR_STATE or an out-of-range value is EINVAL
// and leaves the QP untouched. Entering ERR flushes every outstanding WQE. MR key checks.
#include <gtest/gtest.h>

#include <cerrno>

#include "harness.h"
#include "transport/qp_state.h"

namespace uroce::transport::testing {
namespace {

constexpr uint32_t kRcInit = kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags;
constexpr uint32_t kRcRtr =
    kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
constexpr uint32_t kRcRts =
    kQpState | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic;

QpAttr attr(QpState s) {
  QpAttr a;
  a.qp_state = s;
  a.port_num = 1;
  a.path_mtu = Mtu::k1024;
  a.ah.sgid = wire::Gid::from_ipv4(10, 0, 0, 1);
  a.ah.dgid = wire::Gid::from_ipv4(10, 0, 0, 2);
  a.dest_qp_num = 99;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  a.max_dest_rd_atomic = 1;
  return a;
}

class QpStateTest : public ::testing::Test {
 protected:
  QpStateTest() : net(1, 1) {}
  uint32_t rc() { return net.create(0, RcParams{}, 0); }
  QpState state(uint32_t q) {
    QpAttr a;
    EXPECT_EQ(net.e(0).query_qp(q, &a, nullptr), 0);
    return a.qp_state;
  }
  Net net;
};

TEST_F(QpStateTest, EachRequiredBitIsRequired) {
  struct Step {
    QpState to;
    uint32_t mask;
  } steps[] = {{QpState::kInit, kRcInit}, {QpState::kRtr, kRcRtr}, {QpState::kRts, kRcRts}};
  const uint32_t q = rc();
  for (const Step &s : steps) {
    for (uint32_t bit = 1; bit; bit <<= 1) {
      if (!(s.mask & bit) || bit == kQpState) continue;
      EXPECT_EQ(net.e(0).modify_qp(q, attr(s.to), s.mask & ~bit), EINVAL)
          << qp_state_str(s.to) << " without bit " << bit;
    }
    // one bit that the transition does not allow
    EXPECT_EQ(net.e(0).modify_qp(q, attr(s.to), s.mask | kQpCap), EINVAL);
    ASSERT_EQ(net.e(0).modify_qp(q, attr(s.to), s.mask), 0) << qp_state_str(s.to);
    EXPECT_EQ(state(q), s.to);
  }
}

TEST_F(QpStateTest, IllegalTransitionsAndValues) {
  const uint32_t q = rc();
  EXPECT_EQ(net.e(0).modify_qp(q, attr(QpState::kRtr), kRcRtr), EINVAL);  // RESET -> RTR
  EXPECT_EQ(net.e(0).modify_qp(q, attr(QpState::kRts), kRcRts), EINVAL);  // RESET -> RTS
  EXPECT_EQ(net.e(0).modify_qp(q, attr(QpState::kSqd), kQpState), EINVAL);
  EXPECT_EQ(net.e(0).modify_qp(q, attr(QpState::kUnknown), kQpState), EINVAL);
  QpAttr bad = attr(QpState::kInit);
  bad.port_num = 2;
  EXPECT_EQ(net.e(0).modify_qp(q, bad, kRcInit), EINVAL);
  bad = attr(QpState::kInit);
  bad.pkey_index = 1;
  EXPECT_EQ(net.e(0).modify_qp(q, bad, kRcInit), EINVAL);
  EXPECT_EQ(state(q), QpState::kReset);
  ASSERT_EQ(net.e(0).modify_qp(q, attr(QpState::kInit), kRcInit), 0);
  bad = attr(QpState::kRtr);
  bad.path_mtu = static_cast<Mtu>(6);
  EXPECT_EQ(net.e(0).modify_qp(q, bad, kRcRtr), EINVAL);
  bad = attr(QpState::kRtr);
  bad.max_dest_rd_atomic = kMaxRdAtomic + 1;
  EXPECT_EQ(net.e(0).modify_qp(q, bad, kRcRtr), EINVAL);
  bad = attr(QpState::kRtr);
  bad.min_rnr_timer = 32;
  EXPECT_EQ(net.e(0).modify_qp(q, bad, kRcRtr), EINVAL);
  // CUR_STATE is not allowed from INIT
  EXPECT_EQ(net.e(0).modify_qp(q, attr(QpState::kRtr), kRcRtr | kQpCurState), EINVAL);
  ASSERT_EQ(net.e(0).modify_qp(q, attr(QpState::kRtr), kRcRtr), 0);
  EXPECT_EQ(net.e(0).modify_qp(q, attr(QpState::kRtr), kRcRtr), EINVAL);  // RTR -> RTR
  bad = attr(QpState::kRts);
  bad.retry_cnt = 8;
  EXPECT_EQ(net.e(0).modify_qp(q, bad, kRcRts), EINVAL);
  bad = attr(QpState::kRts);
  bad.timeout = 32;
  EXPECT_EQ(net.e(0).modify_qp(q, bad, kRcRts), EINVAL);
  // The initiator depth may exceed our responder resources (up to max_qp_init_rd_atom, 128, what
  // perftest takes from an rxe peer), not beyond.
  bad = attr(QpState::kRts);
  bad.max_rd_atomic = static_cast<uint8_t>(kMaxInitRdAtomic + 1);
  EXPECT_EQ(net.e(0).modify_qp(q, bad, kRcRts), EINVAL);
  bad = attr(QpState::kRts);
  bad.cur_qp_state = QpState::kInit;  // wrong current state
  EXPECT_EQ(net.e(0).modify_qp(q, bad, kRcRts | kQpCurState), EINVAL);
  bad.cur_qp_state = QpState::kRtr;
  bad.max_rd_atomic = static_cast<uint8_t>(kMaxInitRdAtomic);
  ASSERT_EQ(net.e(0).modify_qp(q, bad, kRcRts | kQpCurState), 0);
  QpAttr got;
  ASSERT_EQ(net.e(0).query_qp(q, &got, nullptr), 0);
  EXPECT_EQ(got.max_rd_atomic, kMaxInitRdAtomic);
  // RTS -> SQD -> RTS, RTS -> RTS with an optional attribute, any -> RESET
  EXPECT_EQ(net.e(0).modify_qp(q, attr(QpState::kRts), kQpState | kQpMinRnrTimer), 0);
  EXPECT_EQ(net.e(0).modify_qp(q, attr(QpState::kRts), kQpState | kQpPathMtu), EINVAL);
  EXPECT_EQ(net.e(0).modify_qp(q, attr(QpState::kSqd), kQpState | kQpEnSqdAsyncNotify), 0);
  EXPECT_EQ(state(q), QpState::kSqd);
  EXPECT_EQ(net.e(0).modify_qp(q, attr(QpState::kRts), kQpState), 0);
  EXPECT_EQ(net.e(0).modify_qp(q, attr(QpState::kReset), kQpState), 0);
  EXPECT_EQ(state(q), QpState::kReset);
}

TEST_F(QpStateTest, UdAndUcMasks) {
  RcParams p;
  p.type = QpType::kUd;
  const uint32_t ud = net.create(0, p, 0);
  EXPECT_EQ(net.e(0).modify_qp(ud, attr(QpState::kInit), kRcInit), EINVAL);  // needs QKEY
  EXPECT_EQ(
      net.e(0).modify_qp(ud, attr(QpState::kInit), kQpState | kQpPkeyIndex | kQpPort | kQpQkey), 0);
  EXPECT_EQ(net.e(0).modify_qp(ud, attr(QpState::kRtr), kQpState | kQpAv), EINVAL);
  EXPECT_EQ(net.e(0).modify_qp(ud, attr(QpState::kRtr), kQpState), 0);
  EXPECT_EQ(net.e(0).modify_qp(ud, attr(QpState::kRts), kQpState), EINVAL);  // needs SQ_PSN
  EXPECT_EQ(net.e(0).modify_qp(ud, attr(QpState::kRts), kQpState | kQpSqPsn), 0);
  p.type = QpType::kUc;
  const uint32_t uc = net.create(0, p, 0);
  ASSERT_EQ(net.e(0).modify_qp(uc, attr(QpState::kInit), kRcInit), 0);
  EXPECT_EQ(net.e(0).modify_qp(uc, attr(QpState::kRtr), kRcRtr), EINVAL);  // no rd_atomic
  EXPECT_EQ(net.e(0).modify_qp(uc, attr(QpState::kRtr),
                               kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn),
            0);
  EXPECT_EQ(net.e(0).modify_qp(uc, attr(QpState::kRts), kRcRts), EINVAL);
  EXPECT_EQ(net.e(0).modify_qp(uc, attr(QpState::kRts), kQpState | kQpSqPsn), 0);
}

TEST_F(QpStateTest, PostingNeedsRtsAndErrorFlushesEverything) {
  const uint32_t q = rc();
  Buf b = net.reg(0, 4096, kAllAccess, 0x1000);
  SendWr w = make_wr(1, WrOpcode::kSend, b, 0, 8);
  EXPECT_EQ(net.e(0).post_send(q, w), EINVAL);  // RESET
  EXPECT_EQ(net.e(0).post_recv(q, make_recv(1, b, 0, 8)), EINVAL);
  ASSERT_EQ(net.e(0).modify_qp(q, attr(QpState::kInit), kRcInit), 0);
  EXPECT_EQ(net.e(0).post_send(q, w), EINVAL);  // INIT
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(net.e(0).post_recv(q, make_recv(10 + i, b, 0, 8)), 0);
  ASSERT_EQ(net.e(0).modify_qp(q, attr(QpState::kRtr), kRcRtr), 0);
  EXPECT_EQ(net.e(0).post_send(q, w), EINVAL);  // RTR
  ASSERT_EQ(net.e(0).modify_qp(q, attr(QpState::kRts), kRcRts), 0);
  SendWr u = make_wr(2, WrOpcode::kSend, b, 0, 8, 0);  // unsignalled: still flushed
  ASSERT_EQ(net.e(0).post_send(q, w), 0);
  ASSERT_EQ(net.e(0).post_send(q, u), 0);
  w.opcode = static_cast<WrOpcode>(10);  // TSO: not an engine opcode
  EXPECT_EQ(net.e(0).post_send(q, w), EINVAL);
  w.opcode = WrOpcode::kAtomicFetchAndAdd;  // atomics need one 8-byte SGE
  w.sg_list[0].length = 4;
  EXPECT_EQ(net.e(0).post_send(q, w), EINVAL);
  ASSERT_EQ(net.e(0).modify_qp(q, attr(QpState::kErr), kQpState), 0);
  Wc wc[8];
  ASSERT_EQ(net.e(0).poll_cq(net.node(0).cq, wc, 8), 5u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[1].wr_id, 2u);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(wc[i].status, WcStatus::kWrFlushErr);
  for (int i = 2; i < 5; ++i) {
    EXPECT_EQ(wc[i].wr_id, uint64_t(10 + i - 2));
    EXPECT_EQ(wc[i].status, WcStatus::kWrFlushErr);
    EXPECT_EQ(wc[i].opcode, WcOpcode::kRecv);
  }
  // in ERR, new WRs complete at once with FLUSH_ERR
  w = make_wr(3, WrOpcode::kSend, b, 0, 8);
  ASSERT_EQ(net.e(0).post_send(q, w), 0);
  ASSERT_EQ(net.e(0).poll_cq(net.node(0).cq, wc, 8), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kWrFlushErr);
}

// Slot 0 with tag 0 made key 0, which the daemon took for a failed registration (reg_mr
// failed with EIO about once in 256 daemon starts). No key is 0, and a slot's next key differs.
TEST(MrTable, KeyIsNeverZeroAndChangesOnReuse) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    MrTable t(1, seed);
    uint8_t mem[64];
    uint32_t prev = 0, pd = 0;
    for (int i = 0; i < 2000; ++i) {
      uint32_t k = 0;
      ASSERT_EQ(t.reg(1, mem, 0x1000, sizeof mem, kAccessLocalWrite, &k), 0);
      ASSERT_NE(k, 0u) << "seed " << seed << " round " << i;
      ASSERT_NE(k, prev);
      prev = k;
      ASSERT_EQ(t.dereg(k, &pd), 0);
    }
  }
}

TEST(MrTable, KeyChecks) {
  MrTable t(8, 42);
  uint8_t mem[4096];
  uint32_t k = 0;
  EXPECT_EQ(t.reg(1, mem, 0x1000, 4096, kAccessRemoteWrite, &k), EINVAL);  // needs LOCAL_WRITE
  EXPECT_EQ(t.reg(1, mem, 0x1000, 0, kAccessLocalWrite, &k), EINVAL);
  EXPECT_EQ(t.reg(1, mem, UINT64_MAX - 10, 4096, kAccessLocalWrite, &k), EINVAL);
  ASSERT_EQ(t.reg(1, mem, 0x1000, 4096, kAccessLocalWrite | kAccessRemoteRead, &k), 0);
  uint8_t *h = nullptr;
  EXPECT_EQ(t.check(k, 1, 0x1000, 4096, kAccessRemoteRead, &h), MrCheck::kOk);
  EXPECT_EQ(h, mem);
  EXPECT_EQ(t.check(k, 1, 0x1800, 16, 0, &h), MrCheck::kOk);
  EXPECT_EQ(h, mem + 0x800);
  EXPECT_EQ(t.check(k ^ 1, 1, 0x1000, 8, 0, &h), MrCheck::kBadKey);
  EXPECT_EQ(t.check(k, 2, 0x1000, 8, 0, &h), MrCheck::kWrongPd);
  EXPECT_EQ(t.check(k, 1, 0x1000, 8, kAccessRemoteWrite, &h), MrCheck::kNoAccess);
  EXPECT_EQ(t.check(k, 1, 0xFFF, 8, 0, &h), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(k, 1, 0x1000 + 4089, 8, 0, &h), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(k, 1, 0x1000, UINT64_MAX, 0, &h), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(k, 1, UINT64_MAX - 3, 8, 0, &h), MrCheck::kOutOfBounds);
  const uint32_t old = k;
  uint32_t pd = 0;
  ASSERT_EQ(t.dereg(k, &pd), 0);
  EXPECT_EQ(t.check(old, 1, 0x1000, 8, 0, &h), MrCheck::kBadKey);
  ASSERT_EQ(t.reg(1, mem, 0x1000, 4096, kAccessLocalWrite, &k), 0);
  EXPECT_NE(k, old);  // a fresh random key (ids_test.cc): the stale key stays dead
  EXPECT_EQ(t.check(old, 1, 0x1000, 8, 0, &h), MrCheck::kBadKey);
  EXPECT_EQ(t.invalidate(k, 2), EINVAL);
  EXPECT_EQ(t.invalidate(k, 1), 0);
  EXPECT_EQ(t.check(k, 1, 0x1000, 8, 0, &h), MrCheck::kBadKey);
}

}  // namespace
}  // namespace uroce::transport::testing
