// SPDX-License-Identifier: BSD-3-Clause
// The engine over both queue backends (transport/queues.h): its own rings (PrivateQueues) and
// the ABI rings shared with the app (RingQueues, the harness playing the app). RC with loss,
// UC, UD and SRQ with loss run over both; then what a hostile app can do to a shared ring:
// rewrite a slot after posting it, post a malformed WQE, break the ring's index.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>

#include "harness.h"

namespace uroce::transport::testing {
namespace {

constexpr uint64_t kVaA = 0x1000000, kVaB = 0x2000000;

template <class Q>
class Backend : public ::testing::Test {};
using Backends = ::testing::Types<PrivateQueues, RingQueues>;
TYPED_TEST_SUITE(Backend, Backends);

// Queue caps that fit the ABI's slot classes (a receive slot holds at most 31 SGEs).
RcParams params() {
  RcParams p;
  p.cap = QpCap{64, 64, 4, 4, 256};
  return p;
}

// Drops every k-th frame (data and ACKs alike).
test::Faults drop_every(uint32_t k, int *n) {
  test::Faults f;
  f.filter = [k, n](const uint8_t *, uint32_t) {
    return ++*n % k == 0 ? test::Action::kDrop : test::Action::kPass;
  };
  return f;
}

TYPED_TEST(Backend, RcMixWithLossCompletesInOrder) {
  NetT<TypeParam> net(11, 2);
  Buf a = net.reg(0, 1 << 20, kAllAccess, kVaA), b = net.reg(1, 1 << 20, kAllAccess, kVaB);
  RcParams p = params();
  p.mtu = Mtu::k1024;
  auto [qa, qb] = net.connect(0, 1, p);
  int n = 0;
  net.link.set_faults(drop_every(7, &n));
  fill_pattern(a.at(0), 1 << 19, 5);
  fill_pattern(b.at(1 << 19), 1 << 18, 6);
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(net.post_recv(1, qb, make_recv(100 + i, b, 0x40000 + i * 8192, 8192)), 0);
  uint64_t id = 0;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(net.post_send(0, qa, make_wr(id++, WrOpcode::kSend, a, i * 8192, 5000 + i)), 0);
    SendWr w = make_wr(id++, WrOpcode::kRdmaWrite, a, 0x10000 + i * 8192, 7000);
    w.remote_addr = kVaB + i * 8192;
    w.rkey = b.key;
    ASSERT_EQ(net.post_send(0, qa, w), 0);
    SendWr r = make_wr(id++, WrOpcode::kRdmaRead, a, 0x80000 + i * 8192, 3000);
    r.remote_addr = kVaB + (1 << 19) + i * 8192;
    r.rkey = b.key;
    ASSERT_EQ(net.post_send(0, qa, r), 0);
  }
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net.wait_wc(0, wa, id));
  ASSERT_TRUE(net.wait_wc(1, wb, 8));
  ASSERT_EQ(wa.size(), id);
  for (uint64_t i = 0; i < id; ++i) {
    EXPECT_EQ(wa[i].wr_id, i);
    EXPECT_EQ(wa[i].status, WcStatus::kSuccess);
  }
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(wb[i].wr_id, 100u + i);
    EXPECT_EQ(wb[i].byte_len, 5000u + i);
    EXPECT_EQ(std::memcmp(b.at(0x40000 + i * 8192), a.at(i * 8192), 5000 + i), 0);
    EXPECT_EQ(std::memcmp(b.at(i * 8192), a.at(0x10000 + i * 8192), 7000), 0);
    EXPECT_EQ(std::memcmp(a.at(0x80000 + i * 8192), b.at((1 << 19) + i * 8192), 3000), 0);
  }
  EXPECT_GT(net.e(0).qp_counters(qa)->retransmits, 0u);
  EXPECT_EQ(net.e(0).sq_outstanding(qa), 0u);
}

TYPED_TEST(Backend, UcSendAndWrite) {
  NetT<TypeParam> net(12, 2);
  Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 65536, kAllAccess, kVaB);
  RcParams p = params();
  p.type = QpType::kUc;
  p.mtu = Mtu::k512;
  p.access = kAccessLocalWrite | kAccessRemoteWrite;
  auto [qa, qb] = net.connect(0, 1, p);
  fill_pattern(a.at(0), 8192, 1);
  ASSERT_EQ(net.post_recv(1, qb, make_recv(1, b, 0, 4096)), 0);
  ASSERT_EQ(net.post_send(0, qa, make_wr(10, WrOpcode::kSend, a, 0, 2000)), 0);
  SendWr w = make_wr(11, WrOpcode::kRdmaWrite, a, 0, 3000);
  w.remote_addr = kVaB + 20000;
  w.rkey = b.key;
  ASSERT_EQ(net.post_send(0, qa, w), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net.wait_wc(0, wa, 2));
  ASSERT_TRUE(net.wait_wc(1, wb, 1));
  EXPECT_EQ(wa[0].wr_id, 10u);
  EXPECT_EQ(wa[1].wr_id, 11u);
  EXPECT_EQ(wb[0].byte_len, 2000u);
  EXPECT_EQ(std::memcmp(b.at(0), a.at(0), 2000), 0);
  EXPECT_EQ(std::memcmp(b.at(20000), a.at(0), 3000), 0);
}

TYPED_TEST(Backend, UdSendWithInline) {
  NetT<TypeParam> net(13, 2);
  Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 65536, kAllAccess, kVaB);
  std::vector<uint32_t> qps;
  for (size_t i = 0; i < 2; ++i) {
    RcParams p = params();
    p.type = QpType::kUd;
    const uint32_t q = net.create(i, p, 0);
    QpAttr at;
    at.qp_state = QpState::kInit;
    at.qkey = 0x1234;
    ASSERT_EQ(net.e(i).modify_qp(q, at, kQpState | kQpPkeyIndex | kQpPort | kQpQkey), 0);
    at.qp_state = QpState::kRtr;
    ASSERT_EQ(net.e(i).modify_qp(q, at, kQpState), 0);
    at.qp_state = QpState::kRts;
    at.sq_psn = 1;
    ASSERT_EQ(net.e(i).modify_qp(q, at, kQpState | kQpSqPsn), 0);
    qps.push_back(q);
  }
  AhAttr ah;
  ah.path = net.path(0, 1);
  const uint32_t h = net.e(0).create_ah(net.node(0).pd, ah);
  ASSERT_NE(h, 0u);
  fill_pattern(a.at(0), 4096, 3);
  ASSERT_EQ(net.post_recv(1, qps[1], make_recv(7, b, 0, 4096)), 0);
  ASSERT_EQ(net.post_recv(1, qps[1], make_recv(8, b, 4096, 4096)), 0);
  SendWr w = make_wr(1, WrOpcode::kSend, a, 0, 1000);
  w.ah = h;
  w.remote_qpn = qps[1];
  w.remote_qkey = 0x1234;
  ASSERT_EQ(net.post_send(0, qps[0], w), 0);
  SendWr inl = make_wr(2, WrOpcode::kSend, a, 2000, 100, kSendSignaled | kSendInline);
  inl.sg_list[0].addr = reinterpret_cast<uintptr_t>(a.at(2000));  // inline: host address
  inl.ah = h;
  inl.remote_qpn = qps[1];
  inl.remote_qkey = 0x1234;
  ASSERT_EQ(net.post_send(0, qps[0], inl), 0);
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net.wait_wc(0, wa, 2));
  ASSERT_TRUE(net.wait_wc(1, wb, 2));
  EXPECT_EQ(wb[0].wr_id, 7u);
  EXPECT_EQ(wb[0].byte_len, 1000u + kGrhSize);
  EXPECT_EQ(wb[1].byte_len, 100u + kGrhSize);
  EXPECT_EQ(std::memcmp(b.at(kGrhSize), a.at(0), 1000), 0);
  EXPECT_EQ(std::memcmp(b.at(4096 + kGrhSize), a.at(2000), 100), 0);
}

TYPED_TEST(Backend, SrqSharedByTwoQpsWithLoss) {
  NetT<TypeParam> net(14, 2);
  Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 1 << 17, kAllAccess, kVaB);
  const uint32_t srq = net.create_srq(1, 32, 2);
  ASSERT_NE(srq, 0u);
  for (int i = 0; i < 16; ++i)
    ASSERT_EQ(net.post_srq_recv(1, srq, make_recv(i, b, i * 4096, 4096)), 0);
  RcParams p = params();
  p.mtu = Mtu::k1024;
  p.srq_b = srq;
  auto [q1a, q1b] = net.connect(0, 1, p);
  auto [q2a, q2b] = net.connect(0, 1, p);
  int n = 0;
  net.link.set_faults(drop_every(5, &n));
  fill_pattern(a.at(0), 65536, 4);
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(net.post_send(0, q1a, make_wr(i, WrOpcode::kSend, a, i * 4096, 3000)), 0);
    ASSERT_EQ(net.post_send(0, q2a, make_wr(i, WrOpcode::kSend, a, i * 4096, 3000)), 0);
  }
  std::vector<Wc> wa, wb;
  ASSERT_TRUE(net.wait_wc(0, wa, 12));
  ASSERT_TRUE(net.wait_wc(1, wb, 12));
  std::map<uint64_t, int> seen;
  uint32_t on1 = 0;
  for (auto &w : wb) {
    EXPECT_EQ(w.status, WcStatus::kSuccess);
    EXPECT_EQ(w.byte_len, 3000u);
    ++seen[w.wr_id];
    on1 += w.qp_num == q1b;
  }
  EXPECT_EQ(on1, 6u);
  EXPECT_EQ(seen.size(), 12u);  // every receive WQE used once
  for (auto &w : wa)
    EXPECT_EQ(w.status, WcStatus::kSuccess);
}

// ---------------------------------------------------------------------------------------------
// A hostile app on the shared rings

using RingNet = NetT<RingQueues>;

// The slot `idx` of a ring mapped at `hdr` (the slots follow the header in the mapping).
uint8_t *slot_at(void *hdr, uint64_t idx, size_t capacity, size_t slot_size) {
  return static_cast<uint8_t *>(hdr) + sizeof(abi::RingHeader) + (idx & (capacity - 1)) * slot_size;
}

// GCC 12's -Warray-bounds / -Wstringop-overread, in the sanitized build only, take the memcpy
// from a slot below for a read of a zero-sized object (false: the slot is in the ring's mapping).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overread"

uint8_t *sq_slot(RingNet &net, size_t i, uint32_t qpn, uint64_t idx) {
  shm::RingProducer &p = net.node(i).app.sq[qpn];
  return slot_at(p.header(), idx, p.capacity(), p.slot_size());
}

// After the requester copied a WRITE (its first transmission is lost), the app rewrites the
// slot: SGE far outside the MR, another wr_id, a huge SGE count, a bad opcode. The resend uses
// the copy: the right bytes land, the WR completes once with its own wr_id.
TEST(SharedRings, SlotRewrittenAfterTheCopyChangesNothing) {
  RingNet net(21, 2);
  Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 65536, kAllAccess, kVaB);
  RcParams p = params();
  p.mtu = Mtu::k1024;
  auto [qa, qb] = net.connect(0, 1, p);
  (void)qb;
  int dropped = 0;
  test::Faults f;
  f.filter = [&](const uint8_t *, uint32_t) {
    return dropped++ < 4 ? test::Action::kDrop : test::Action::kPass;  // the whole 1st try
  };
  net.link.set_faults(f);
  fill_pattern(a.at(0), 4096, 9);
  const uint64_t idx = net.node(0).app.sq[qa].index();
  SendWr w = make_wr(77, WrOpcode::kRdmaWrite, a, 0, 4096);
  w.remote_addr = kVaB + 8192;
  w.rkey = b.key;
  ASSERT_EQ(net.post_send(0, qa, w), 0);
  net.e(0).poll();        // the requester copies the WQE and sends 4 packets (all dropped)
  ASSERT_EQ(dropped, 4);  // the link filters at send time: the requester has sent (copied) it
  uint8_t *s = sq_slot(net, 0, qa, idx);
  abi::SendWqeHeader h;
  std::memcpy(&h, s, sizeof h);
  h.wr_id = 666;
  h.opcode = 200;
  h.num_sge = 1000;
  std::memcpy(s, &h, sizeof h);
  const abi::Sge evil{kVaA + (1u << 30), 1u << 30, a.key};
  std::memcpy(s + sizeof h, &evil, sizeof evil);
  std::vector<Wc> wa;
  ASSERT_TRUE(net.wait_wc(0, wa, 1));
  net.settle();
  Wc more[4];
  EXPECT_EQ(net.poll_cq(0, net.node(0).cq, more, 4), 0u);  // completed once
  EXPECT_EQ(wa[0].wr_id, 77u);
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
  EXPECT_GT(net.e(0).qp_counters(qa)->retransmits, 0u);
  EXPECT_EQ(std::memcmp(b.at(8192), a.at(0), 4096), 0);
}
#pragma GCC diagnostic pop

// Rewritten before the copy, a slot is a WQE like any other: validated on the copy, it
// completes in error once, nothing is sent, and the QP enters ERR (later WRs flush).
TEST(SharedRings, MalformedWqesCompleteInErrorOnce) {
  struct Case {
    const char *what;
    void (*edit)(abi::SendWqeHeader &, abi::Sge &);
    WcStatus st;
  };
  const Case cases[] = {
      {"SGE outside the MR", [](abi::SendWqeHeader &, abi::Sge &g) { g.addr += 65536; },
       WcStatus::kLocProtErr},
      {"SGE count above the slot's", [](abi::SendWqeHeader &h, abi::Sge &) { h.num_sge = 61; },
       WcStatus::kLocLenErr},
      {"opcode", [](abi::SendWqeHeader &h, abi::Sge &) { h.opcode = 99; }, WcStatus::kLocQpOpErr},
      {"reserved byte", [](abi::SendWqeHeader &h, abi::Sge &) { h.reserved = 1; },
       WcStatus::kLocQpOpErr},
      {"inline beyond the slot",
       [](abi::SendWqeHeader &h, abi::Sge &) {
         h.send_flags |= kSendInline;
         h.num_sge = 0;
         h.inline_len = 4000;
       },
       WcStatus::kLocLenErr},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    RingNet net(22, 2);
    Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 65536, kAllAccess, kVaB);
    auto [qa, qb] = net.connect(0, 1, params());
    (void)qb;
    shm::RingProducer &p = net.node(0).app.sq[qa];
    ASSERT_EQ(p.reserve(1), 1u);
    auto *s = static_cast<uint8_t *>(p.slot(0));
    abi::SendWqeHeader h{};
    h.wr_id = 5;
    h.opcode = static_cast<uint8_t>(WrOpcode::kRdmaWrite);
    h.send_flags = kSendSignaled;
    h.num_sge = 1;
    h.remote_addr = kVaB;
    h.rkey = b.key;
    abi::Sge g{kVaA, 512, a.key};
    c.edit(h, g);
    std::memcpy(s, &h, sizeof h);
    std::memcpy(s + sizeof h, &g, sizeof g);
    p.commit(1);
    ASSERT_EQ(net.e(0).sq_doorbell(qa), 0);
    ASSERT_EQ(net.post_send(0, qa, make_wr(6, WrOpcode::kRdmaWrite, a, 0, 8)), 0);
    std::vector<Wc> wa;
    ASSERT_TRUE(net.wait_wc(0, wa, 2));
    net.settle();
    Wc more[4];
    EXPECT_EQ(net.poll_cq(0, net.node(0).cq, more, 4), 0u);
    EXPECT_EQ(wa[0].wr_id, 5u);
    EXPECT_EQ(wa[0].status, c.st);
    EXPECT_EQ(wa[1].wr_id, 6u);
    EXPECT_EQ(wa[1].status, WcStatus::kWrFlushErr);
    EXPECT_EQ(net.link.counters().sent, 0u);  // no request left the node
    QpAttr at;
    QpInitAttr ia;
    ASSERT_EQ(net.e(0).query_qp(qa, &at, &ia), 0);
    EXPECT_EQ(at.qp_state, QpState::kErr);
    // Both slots are the app's again.
    EXPECT_EQ(p.free_slots(), p.capacity());
  }
}

// An SQ producer index moved backwards: the ring is corrupt for good, the QP enters ERR with
// IBV_EVENT_QP_FATAL, what the engine had copied completes once each (flushed), and nothing
// more is read from the ring.
TEST(SharedRings, BrokenSqIndexIsFatalAndCompletesEachWrOnce) {
  RingNet net(23, 2);
  Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 65536, kAllAccess, kVaB);
  RcParams p = params();
  auto [qa, qb] = net.connect(0, 1, p);
  (void)qb;
  int n = 0;
  net.link.set_faults(drop_every(1, &n));  // nothing arrives: WRs stay outstanding
  for (int i = 0; i < 3; ++i) {
    SendWr w = make_wr(i, WrOpcode::kRdmaWrite, a, 0, 64);
    w.remote_addr = kVaB;
    w.rkey = b.key;
    ASSERT_EQ(net.post_send(0, qa, w), 0);
  }
  net.e(0).poll();  // copied and sent
  EXPECT_EQ(net.e(0).sq_outstanding(qa), 3u);
  abi::RingHeader *hdr = net.node(0).app.sq[qa].header();
  std::atomic_ref<uint64_t>(hdr->prod).fetch_sub(2);  // the app moves its index backwards
  ASSERT_EQ(net.e(0).sq_doorbell(qa), 0);
  net.e(0).poll();
  AsyncEventRecord ev;
  ASSERT_TRUE(net.e(0).poll_async_event(&ev));
  EXPECT_EQ(ev.type, AsyncEvent::kQpFatal);
  EXPECT_EQ(ev.handle, qa);
  std::vector<Wc> wa;
  net.wait_wc(0, wa, 3);
  net.settle();
  Wc more[8];
  EXPECT_EQ(net.poll_cq(0, net.node(0).cq, more, 8), 0u);
  ASSERT_EQ(wa.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(wa[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(wa[i].status, WcStatus::kWrFlushErr);
  }
  EXPECT_EQ(net.e(0).sq_outstanding(qa), 0u);
}

// A receive slot rewritten after the responder took it: the rest of the message still lands in
// the buffer the WQE named when it was taken.
TEST(SharedRings, RecvSlotRewrittenAfterTakeChangesNothing) {
  RingNet net(24, 2);
  Buf a = net.reg(0, 65536, kAllAccess, kVaA), b = net.reg(1, 65536, kAllAccess, kVaB);
  RcParams p = params();
  p.mtu = Mtu::k1024;
  auto [qa, qb] = net.connect(0, 1, p);
  shm::RingProducer &rq = net.node(1).app.rq[qb];
  const uint64_t idx = rq.index();
  ASSERT_EQ(net.post_recv(1, qb, make_recv(3, b, 4096, 8192)), 0);
  fill_pattern(a.at(0), 4096, 12);
  ASSERT_EQ(net.post_send(0, qa, make_wr(1, WrOpcode::kSend, a, 0, 4096)), 0);
  net.e(0).poll();  // 4 packets on the link
  int frames = 0;
  for (int k = 0; k < 16 && net.link.next_delivery_ns() != UINT64_MAX; ++k) {
    const uint64_t t = net.link.next_delivery_ns();
    if (t > net.clock.now_ns()) net.clock.set(t);
    net.link.deliver([&](Endpoint &to, const uint8_t *f, uint32_t len) {
      static_cast<RingNet::Node *>(to.user)->eng->rx(f, len);
      if (&to == net.node(1).ep && ++frames == 1) {
        // The responder took the WQE with the first packet: the app now points it elsewhere.
        uint8_t *s = slot_at(rq.header(), idx, rq.capacity(), rq.slot_size());
        const abi::Sge evil{kVaB + (1u << 20), 1u << 20, b.key};
        std::memcpy(s + sizeof(abi::RecvWqeHeader), &evil, sizeof evil);
      }
    });
  }
  EXPECT_EQ(frames, 4);
  std::vector<Wc> wb;
  ASSERT_TRUE(net.wait_wc(1, wb, 1));
  EXPECT_EQ(wb[0].wr_id, 3u);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(b.at(4096), a.at(0), 4096), 0);
}

// ibv_resize_cq's move (RingCompletionQueue::move_to): the unconsumed CQEs go to the new ring in
// order and the arm with them; more waiting than the new ring holds is EINVAL, an impossible
// consumer index EIO, and either leaves the CQ on its old ring, unchanged.
TEST(SharedRings, CqMoveKeepsUnconsumedCompletionsAndTheArm) {
  AppRings app;
  auto r4 = app.make(sizeof(abi::Cqe), 4);
  RingCompletionQueue q;
  ASSERT_TRUE(q.attach(r4.mem, r4.bytes, 4));
  shm::RingConsumer c;
  ASSERT_EQ(c.attach(r4.mem, r4.bytes, sizeof(abi::Cqe), 4), shm::RingError::kOk);
  for (uint64_t i = 0; i < 4; ++i) {
    Wc w{};
    w.wr_id = 10 + i;
    ASSERT_TRUE(q.push(w, false));
  }
  abi::Cqe e{};
  ASSERT_EQ(c.try_pop(&e), shm::RingError::kOk);  // 10 consumed; 11, 12, 13 wait
  c.arm(true);
  auto r2 = app.make(sizeof(abi::Cqe), 2);
  EXPECT_EQ(q.move_to(r2.mem, r2.bytes, 2), EINVAL);  // three do not fit in two
  EXPECT_EQ(q.depth(), 4u);
  auto r8 = app.make(sizeof(abi::Cqe), 8);
  EXPECT_EQ(q.move_to(r8.mem, r8.bytes, 4), EINVAL);  // not the ring's geometry
  ASSERT_EQ(q.move_to(r8.mem, r8.bytes, 8), 0);
  EXPECT_EQ(q.depth(), 8u);
  shm::RingConsumer c8;
  ASSERT_EQ(c8.attach(r8.mem, r8.bytes, sizeof(abi::Cqe), 8), shm::RingError::kOk);
  Wc w{};
  w.wr_id = 14;
  w.status = WcStatus::kSuccess;
  ASSERT_TRUE(q.push(w, true));  // solicited: fires the arm carried over
  EXPECT_EQ(q.take_events(), 1u);
  for (uint64_t i = 11; i <= 14; ++i) {
    ASSERT_EQ(c8.try_pop(&e), shm::RingError::kOk);
    EXPECT_EQ(e.wr_id, i);
  }
  EXPECT_EQ(c8.try_pop(&e), shm::RingError::kEmpty);
  // The app moves its consumer index past the producer's: EIO, the CQ stays where it was.
  std::atomic_ref<uint64_t>(static_cast<abi::RingHeader *>(r8.mem)->cons).store(99);
  auto r16 = app.make(sizeof(abi::Cqe), 16);
  EXPECT_EQ(q.move_to(r16.mem, r16.bytes, 16), EIO);
  EXPECT_EQ(q.depth(), 8u);
}

}  // namespace
}  // namespace uroce::transport::testing
