// SPDX-License-Identifier: BSD-3-Clause
// Memory windows over the fake link, with both queue backends: binding (type 1 and 2),
// remote access through a window, its bounds and access flags, LOCAL_INV and SEND_WITH_INV,
// a type 2 window used through another QP, and the bind errors (IBV_WC_MW_BIND_ERR).
#include <gtest/gtest.h>

#include <set>

#include "harness.h"

namespace uroce::transport::testing {
namespace {

template <class Q>
class Mw : public ::testing::Test {};
using Backends = ::testing::Types<PrivateQueues, RingQueues>;
TYPED_TEST_SUITE(Mw, Backends);

constexpr uint32_t kMrAccess = kAllAccess | kAccessMwBind;
constexpr uint32_t kRemoteAll = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

SendWr bind_wr(uint64_t id, uint32_t mw_rkey, uint32_t new_rkey, const Buf &mr, uint64_t off,
               uint64_t len, uint32_t access) {
  SendWr wr;
  wr.wr_id = id;
  wr.opcode = WrOpcode::kBindMw;
  wr.send_flags = kSendSignaled;
  wr.num_sge = 0;
  wr.rkey = mw_rkey;
  wr.invalidate_rkey = new_rkey;
  wr.ah = mr.key;
  wr.remote_addr = mr.va + off;
  wr.compare_add = len;
  wr.remote_qkey = access;
  return wr;
}

// Queue caps that fit the ABI's slot classes (RingQueues).
RcParams params() {
  RcParams p;
  p.cap = QpCap{64, 64, 4, 4, 256};
  return p;
}

uint32_t next_tag(uint32_t rkey) {
  return (rkey & ~0xffu) | ((rkey + 1) & 0xff);
}

// Node 1 exposes part of `mr` through a type 2 window bound on its QP `qb`; returns the rkey.
template <class Q>
uint32_t bind_type2(NetT<Q> &net, uint32_t qb, const Buf &mr, uint64_t off, uint64_t len,
                    uint32_t access) {
  uint32_t rkey = 0;
  EXPECT_EQ(net.e(1).tables().alloc_mw(net.node(1).pd, MwType::kType2, &rkey), 0);
  const uint32_t nk = next_tag(rkey);
  EXPECT_EQ(net.post_send(1, qb, bind_wr(900, rkey, nk, mr, off, len, access)), 0);
  std::vector<Wc> wc;
  EXPECT_TRUE(net.wait_wc(1, wc, 1));
  EXPECT_EQ(wc.at(0).status, WcStatus::kSuccess);
  EXPECT_EQ(wc.at(0).opcode, WcOpcode::kBindMw);
  EXPECT_EQ(wc.at(0).wr_id, 900u);
  return nk;
}

// One WR from node 0 on qa; returns its completion status.
template <class Q>
WcStatus one(NetT<Q> &net, uint32_t qa, const SendWr &wr) {
  EXPECT_EQ(net.post_send(0, qa, wr), 0);
  std::vector<Wc> wc;
  EXPECT_TRUE(net.wait_wc(0, wc, 1));
  return wc.empty() ? WcStatus::kGeneralErr : wc[0].status;
}

TYPED_TEST(Mw, Type2WriteReadAtomicThroughWindow) {
  NetT<TypeParam> net(61, 2);
  auto [qa, qb] = net.connect(0, 1, params());
  Buf src = net.reg(0, 4096, kAllAccess, 0x10000);
  Buf mr = net.reg(1, 8192, kMrAccess, 0x200000);
  const uint32_t k = bind_type2(net, qb, mr, 1024, 2048, kRemoteAll);
  EXPECT_NE(k, mr.key);
  fill_pattern(src.at(0), 512, 7);
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, src, 0, 512);
  w.remote_addr = mr.va + 1024 + 100;
  w.rkey = k;
  EXPECT_EQ(one(net, qa, w), WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(mr.at(1024 + 100), src.at(0), 512), 0);
  SendWr r = make_wr(2, WrOpcode::kRdmaRead, src, 1024, 512);
  r.remote_addr = mr.va + 1024 + 100;
  r.rkey = k;
  EXPECT_EQ(one(net, qa, r), WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(src.at(1024), src.at(0), 512), 0);
  SendWr a = make_wr(3, WrOpcode::kAtomicFetchAndAdd, src, 2048, 8);
  a.remote_addr = mr.va + 1024 + 2048 - 8;
  a.rkey = k;
  a.compare_add = 5;
  EXPECT_EQ(one(net, qa, a), WcStatus::kSuccess);
  EXPECT_EQ(mr.at(1024 + 2048 - 8)[0], 5);
}

TYPED_TEST(Mw, AccessOutsideTheWindowIsARemoteAccessError) {
  NetT<TypeParam> net(62, 2);
  auto [qa, qb] = net.connect(0, 1, params());
  Buf src = net.reg(0, 4096, kAllAccess, 0x10000);
  Buf mr = net.reg(1, 8192, kMrAccess, 0x200000);
  const uint32_t k = bind_type2(net, qb, mr, 1024, 2048, kRemoteAll);
  // Inside the MR, one byte past the window's end.
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, src, 0, 64);
  w.remote_addr = mr.va + 1024 + 2048 - 63;
  w.rkey = k;
  EXPECT_EQ(one(net, qa, w), WcStatus::kRemAccessErr);
  for (size_t i = 0; i < mr.mem.size(); ++i)
    ASSERT_EQ(mr.mem[i], 0) << i;
}

TYPED_TEST(Mw, AccessFlagsOfTheWindowApply) {
  NetT<TypeParam> net(63, 2);
  auto [qa, qb] = net.connect(0, 1, params());
  Buf src = net.reg(0, 4096, kAllAccess, 0x10000);
  Buf mr = net.reg(1, 8192, kMrAccess, 0x200000);
  const uint32_t k = bind_type2(net, qb, mr, 0, 4096, kAccessRemoteRead);
  SendWr r = make_wr(1, WrOpcode::kRdmaRead, src, 0, 64);
  r.remote_addr = mr.va;
  r.rkey = k;
  EXPECT_EQ(one(net, qa, r), WcStatus::kSuccess);
  SendWr w = make_wr(2, WrOpcode::kRdmaWrite, src, 0, 64);
  w.remote_addr = mr.va;
  w.rkey = k;
  EXPECT_EQ(one(net, qa, w), WcStatus::kRemAccessErr);
}

TYPED_TEST(Mw, LocalInvalidateRevokesTheRkey) {
  NetT<TypeParam> net(64, 2);
  auto [qa, qb] = net.connect(0, 1, params());
  Buf src = net.reg(0, 4096, kAllAccess, 0x10000);
  Buf mr = net.reg(1, 8192, kMrAccess, 0x200000);
  const uint32_t k = bind_type2(net, qb, mr, 0, 4096, kRemoteAll);
  SendWr inv;
  inv.wr_id = 50;
  inv.opcode = WrOpcode::kLocalInv;
  inv.send_flags = kSendSignaled;
  inv.num_sge = 0;
  inv.invalidate_rkey = k;
  ASSERT_EQ(net.post_send(1, qb, inv), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net.wait_wc(1, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kLocalInv);
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, src, 0, 64);
  w.remote_addr = mr.va;
  w.rkey = k;
  EXPECT_EQ(one(net, qa, w), WcStatus::kRemAccessErr);
}

TYPED_TEST(Mw, SendWithInvalidateFreesTheWindowForANewBind) {
  NetT<TypeParam> net(65, 2);
  auto [qa, qb] = net.connect(0, 1, params());
  Buf src = net.reg(0, 4096, kAllAccess, 0x10000);
  Buf mr = net.reg(1, 8192, kMrAccess, 0x200000);
  Buf rbuf = net.reg(1, 256, kAllAccess, 0x400000);
  const uint32_t k = bind_type2(net, qb, mr, 0, 4096, kRemoteAll);
  ASSERT_EQ(net.post_recv(1, qb, make_recv(70, rbuf, 0, 256)), 0);
  SendWr s = make_wr(1, WrOpcode::kSendWithInv, src, 0, 32);
  s.invalidate_rkey = k;
  EXPECT_EQ(one(net, qa, s), WcStatus::kSuccess);
  std::vector<Wc> wc;
  ASSERT_TRUE(net.wait_wc(1, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(wc[0].wc_flags & kWcWithInv, uint32_t{kWcWithInv});
  EXPECT_EQ(wc[0].imm_data, k);
  // The window is free again: a new bind (new tag) works, the old rkey does not.
  const uint32_t k2 = next_tag(k);
  ASSERT_EQ(net.post_send(1, qb, bind_wr(71, k, k2, mr, 0, 128, kRemoteAll)), 0);
  wc.clear();
  ASSERT_TRUE(net.wait_wc(1, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  SendWr w = make_wr(2, WrOpcode::kRdmaWrite, src, 0, 64);
  w.remote_addr = mr.va;
  w.rkey = k2;
  EXPECT_EQ(one(net, qa, w), WcStatus::kSuccess);
  w.rkey = k;
  EXPECT_EQ(one(net, qa, w), WcStatus::kRemAccessErr);
}

TYPED_TEST(Mw, Type2WindowIsUsableOnlyThroughItsQp) {
  NetT<TypeParam> net(66, 2);
  auto [qa, qb] = net.connect(0, 1, params());
  auto [qa2, qb2] = net.connect(0, 1, params());
  Buf src = net.reg(0, 4096, kAllAccess, 0x10000);
  Buf mr = net.reg(1, 8192, kMrAccess, 0x200000);
  const uint32_t k = bind_type2(net, qb, mr, 0, 4096, kRemoteAll);
  (void)qb2;
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, src, 0, 64);
  w.remote_addr = mr.va;
  w.rkey = k;
  EXPECT_EQ(one(net, qa2, w), WcStatus::kRemAccessErr);
  EXPECT_EQ(one(net, qa, w), WcStatus::kSuccess);  // its own QP still may
}

TYPED_TEST(Mw, SendWithInvalidateThroughAnotherQpIsAnInvalidRequest) {
  NetT<TypeParam> net(67, 2);
  auto [qa, qb] = net.connect(0, 1, params());
  auto [qa2, qb2] = net.connect(0, 1, params());
  Buf src = net.reg(0, 4096, kAllAccess, 0x10000);
  Buf mr = net.reg(1, 8192, kMrAccess, 0x200000);
  Buf rbuf = net.reg(1, 256, kAllAccess, 0x400000);
  const uint32_t k = bind_type2(net, qb, mr, 0, 4096, kRemoteAll);
  ASSERT_EQ(net.post_recv(1, qb2, make_recv(70, rbuf, 0, 256)), 0);
  SendWr s = make_wr(1, WrOpcode::kSendWithInv, src, 0, 32);
  s.invalidate_rkey = k;
  EXPECT_EQ(one(net, qa2, s), WcStatus::kRemInvReqErr);
  SendWr w = make_wr(2, WrOpcode::kRdmaWrite, src, 0, 64);
  w.remote_addr = mr.va;
  w.rkey = k;
  EXPECT_EQ(one(net, qa, w), WcStatus::kSuccess);  // still bound
}

TYPED_TEST(Mw, Type1BindChangesTheKeyAndUnbinds) {
  NetT<TypeParam> net(68, 2);
  auto [qa, qb] = net.connect(0, 1, params());
  Buf src = net.reg(0, 4096, kAllAccess, 0x10000);
  Buf mr = net.reg(1, 8192, kMrAccess, 0x200000);
  uint32_t k0 = 0;
  ASSERT_EQ(net.e(1).tables().alloc_mw(net.node(1).pd, MwType::kType1, &k0), 0);
  std::vector<Wc> wc;
  const uint32_t k1 = next_tag(k0);
  ASSERT_EQ(net.post_send(1, qb, bind_wr(1, k0, k1, mr, 0, 4096, kRemoteAll)), 0);
  // Type 1 rebinds while bound (ibv_bind_mw): the old rkey dies.
  const uint32_t k2 = next_tag(k1);
  ASSERT_EQ(net.post_send(1, qb, bind_wr(2, k1, k2, mr, 0, 256, kRemoteAll)), 0);
  ASSERT_TRUE(net.wait_wc(1, wc, 2));
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[1].status, WcStatus::kSuccess);
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, src, 0, 64);
  w.remote_addr = mr.va;
  w.rkey = k2;
  EXPECT_EQ(one(net, qa, w), WcStatus::kSuccess);
  // Unbind (length 0): nothing is reachable under the next key either.
  const uint32_t k3 = next_tag(k2);
  SendWr ub = bind_wr(3, k2, k3, mr, 0, 0, 0);
  ub.ah = 0;
  ASSERT_EQ(net.post_send(1, qb, ub), 0);
  wc.clear();
  ASSERT_TRUE(net.wait_wc(1, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  w.rkey = k3;
  EXPECT_EQ(one(net, qa, w), WcStatus::kRemAccessErr);
}

// UC binds too (as rxe); a WRITE through the window lands, one outside it is dropped (UC
// has no NAK) and the QP stays usable.
TYPED_TEST(Mw, UcBindAndWriteThroughTheWindow) {
  NetT<TypeParam> net(82, 2);
  RcParams p = params();
  p.type = QpType::kUc;
  auto [qa, qb] = net.connect(0, 1, p);
  Buf src = net.reg(0, 4096, kAllAccess, 0x10000);
  Buf mr = net.reg(1, 8192, kMrAccess, 0x200000);
  const uint32_t k = bind_type2(net, qb, mr, 4096, 1024, kAccessRemoteWrite);
  fill_pattern(src.at(0), 256, 3);
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, src, 0, 256);
  w.remote_addr = mr.va + 8192 - 256;  // inside the MR, past the window
  w.rkey = k;
  EXPECT_EQ(one(net, qa, w), WcStatus::kSuccess);  // UC: sent is done
  net.settle();
  for (size_t i = 0; i < mr.mem.size(); ++i)
    ASSERT_EQ(mr.mem[i], 0) << i;
  w.remote_addr = mr.va + 4096 + 1024 - 256;
  EXPECT_EQ(one(net, qa, w), WcStatus::kSuccess);
  net.settle();
  EXPECT_EQ(std::memcmp(mr.at(4096 + 1024 - 256), src.at(0), 256), 0);
}

// Each violation completes the bind with IBV_WC_MW_BIND_ERR and moves the QP to ERR.
TYPED_TEST(Mw, BindViolationsAreMwBindErrors) {
  enum Case {
    kNoMwBindFlag,
    kAlreadyBound,
    kSameTag,
    kOutsideMr,
    kWriteWithoutLocalWrite,
    kOtherPd,
    kZeroLengthType2,
    kZeroBased
  };
  for (int c = kNoMwBindFlag; c <= kZeroBased; ++c) {
    SCOPED_TRACE(c);
    NetT<TypeParam> net(70 + c, 2);
    auto [qa, qb] = net.connect(0, 1, params());
    (void)qa;
    Buf mr = net.reg(1, 8192, c == kNoMwBindFlag ? kAllAccess : kMrAccess, 0x200000);
    uint32_t pd = net.node(1).pd;
    if (c == kOtherPd) pd = net.e(1).create_pd();
    uint32_t k = 0;
    ASSERT_EQ(net.e(1).tables().alloc_mw(pd, MwType::kType2, &k), 0);
    if (c == kAlreadyBound) {
      const uint32_t nk = next_tag(k);
      ASSERT_EQ(net.post_send(1, qb, bind_wr(1, k, nk, mr, 0, 64, kRemoteAll)), 0);
      std::vector<Wc> wc;
      ASSERT_TRUE(net.wait_wc(1, wc, 1));
      ASSERT_EQ(wc[0].status, WcStatus::kSuccess);
      k = nk;
    }
    SendWr b = bind_wr(9, k, next_tag(k), mr, 0, 4096, kRemoteAll);
    if (c == kSameTag) b.invalidate_rkey = k;
    if (c == kOutsideMr) b.compare_add = 8193;
    if (c == kZeroLengthType2) b.compare_add = 0;
    if (c == kZeroBased) b.remote_qkey |= kAccessZeroBased;
    Buf ro;
    if (c == kWriteWithoutLocalWrite) {
      ro = net.reg(1, 4096, kAccessRemoteRead | kAccessMwBind, 0x600000);
      b.ah = ro.key;
      b.remote_addr = ro.va;
    }
    ASSERT_EQ(net.post_send(1, qb, b), 0);
    std::vector<Wc> wc;
    ASSERT_TRUE(net.wait_wc(1, wc, 1));
    EXPECT_EQ(wc[0].status, WcStatus::kMwBindErr);
    EXPECT_EQ(wc[0].wr_id, 9u);
    QpAttr at;
    ASSERT_EQ(net.e(1).query_qp(qb, &at, nullptr), 0);
    EXPECT_EQ(at.qp_state, QpState::kErr);
  }
}

TYPED_TEST(Mw, LocalInvalidateOfAType1WindowFails) {
  NetT<TypeParam> net(80, 2);
  auto [qa, qb] = net.connect(0, 1, params());
  (void)qa;
  uint32_t k = 0;
  ASSERT_EQ(net.e(1).tables().alloc_mw(net.node(1).pd, MwType::kType1, &k), 0);
  SendWr inv;
  inv.wr_id = 5;
  inv.opcode = WrOpcode::kLocalInv;
  inv.num_sge = 0;
  inv.invalidate_rkey = k;
  ASSERT_EQ(net.post_send(1, qb, inv), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net.wait_wc(1, wc, 1));
  EXPECT_EQ(wc[0].status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kLocalInv);
}

// The bind waits for the WQEs before it: a WRITE posted before it to a window it binds would
// otherwise race; here a SEND then a bind then a WRITE through the window complete in order.
TYPED_TEST(Mw, BindIsOrderedWithTheSendQueue) {
  NetT<TypeParam> net(81, 2);
  auto [qa, qb] = net.connect(0, 1, params());
  Buf a = net.reg(0, 8192, kMrAccess, 0x10000);
  Buf b = net.reg(1, 4096, kAllAccess, 0x200000);
  uint32_t k = 0;
  ASSERT_EQ(net.e(0).tables().alloc_mw(net.node(0).pd, MwType::kType2, &k), 0);
  ASSERT_EQ(net.post_recv(1, qb, make_recv(1, b, 0, 4096)), 0);
  ASSERT_EQ(net.post_send(0, qa, make_wr(10, WrOpcode::kSend, a, 0, 3000)), 0);
  ASSERT_EQ(net.post_send(0, qa, bind_wr(11, k, next_tag(k), a, 4096, 4096, kRemoteAll)), 0);
  ASSERT_EQ(net.post_send(0, qa, make_wr(12, WrOpcode::kSend, a, 0, 8)), 0);
  ASSERT_EQ(net.post_recv(1, qb, make_recv(2, b, 0, 4096)), 0);
  std::vector<Wc> wc;
  ASSERT_TRUE(net.wait_wc(0, wc, 3));
  ASSERT_EQ(wc.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(wc[i].wr_id, 10u + i);
    EXPECT_EQ(wc[i].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(wc[1].opcode, WcOpcode::kBindMw);
}

TEST(MwTable, KeysNeverCoincideWithMrKeysAndPdsAreHeld) {
  ObjectTables t(4, 512, 4, 99, 512);
  const uint32_t pd = t.pds.alloc(), wpd = t.pds.alloc();
  std::vector<uint8_t> mem(64);
  std::set<uint32_t> mr_ids, mw_ids;
  for (int i = 0; i < 256; ++i) {
    uint32_t k = 0;
    ASSERT_EQ(t.reg_mr(pd, mem.data(), 0x1000, 64, kAccessLocalWrite, &k), 0);
    mr_ids.insert(k >> 8);
    ASSERT_EQ(t.alloc_mw(wpd, i & 1 ? MwType::kType1 : MwType::kType2, &k), 0);
    mw_ids.insert(k >> 8);
    MemoryWindow w;
    ASSERT_TRUE(t.mws.snapshot(k, &w));
    EXPECT_EQ(w.state, i & 1 ? MemoryWindow::State::kValid : MemoryWindow::State::kFree);
    EXPECT_EQ(t.mrs.find(k), nullptr);
  }
  for (uint32_t id : mw_ids)
    EXPECT_EQ(mr_ids.count(id), 0u);
  EXPECT_EQ(t.mws.in_use(), 256u);
  EXPECT_EQ(t.pds.dealloc(wpd), EBUSY);  // the windows hold their PD
  uint32_t bad = 0;
  EXPECT_EQ(t.alloc_mw(wpd + 1, MwType::kType1, &bad), EINVAL);
  EXPECT_EQ(t.alloc_mw(pd, static_cast<MwType>(3), &bad), EINVAL);
  EXPECT_EQ(t.dealloc_mw(0x12345600), EINVAL);
  for (uint32_t id : mw_ids)
    ASSERT_EQ(t.dealloc_mw(id << 8), 0);  // by id, whatever the tag
  EXPECT_EQ(t.mws.in_use(), 0u);
  EXPECT_EQ(t.pds.dealloc(wpd), 0);
}

// An id some MR key has (any tag) is refused; ObjectTables::reg_mr redraws an MR key whose
// id is a live window's.
TEST(MwTable, AnIdShadowedByAnMrKeyIsRefused) {
  ObjectTables t(4, 64, 4, 5, 64);
  const uint32_t pd = t.pds.alloc();
  std::vector<uint8_t> mem(64);
  uint32_t k = 0;
  ASSERT_EQ(t.reg_mr(pd, mem.data(), 0x1000, 64, kAccessLocalWrite, &k), 0);
  uint32_t rk = 0;
  EXPECT_EQ(
      t.mws.alloc_with_id(k >> 8, static_cast<uint8_t>(k + 1), pd, MwType::kType2, t.mrs, &rk),
      EBUSY);
  ASSERT_EQ(t.mws.alloc_with_id((k >> 8) ^ 0x800000, 3, pd, MwType::kType2, t.mrs, &rk), 0);
  EXPECT_EQ(rk, (((k >> 8) ^ 0x800000) << 8) | 3);
  EXPECT_TRUE(t.mws.id_live(rk >> 8));
  EXPECT_EQ(t.mws.alloc_with_id(0, 0, pd, MwType::kType2, t.mrs, &rk), EINVAL);
}

TEST(MwTable, DeallocKillsTheKeyAndTheSlotsNextKeyDiffers) {
  ObjectTables t(4, 1, 4, 7, 1);
  const uint32_t pd = t.pds.alloc();
  uint32_t k = 0;
  ASSERT_EQ(t.alloc_mw(pd, MwType::kType2, &k), 0);
  uint32_t k2 = 0;
  EXPECT_EQ(t.alloc_mw(pd, MwType::kType2, &k2), ENOMEM);
  ASSERT_EQ(t.dealloc_mw(k), 0);
  EXPECT_EQ(t.dealloc_mw(k), EINVAL);
  MemoryWindow w;
  EXPECT_FALSE(t.mws.snapshot(k, &w));
  ASSERT_EQ(t.alloc_mw(pd, MwType::kType2, &k2), 0);
  EXPECT_NE(k2 >> 8, k >> 8);
  ASSERT_EQ(t.dealloc_mw(k2), 0);
  EXPECT_EQ(t.pds.dealloc(pd), 0);
}

}  // namespace
}  // namespace uroce::transport::testing
