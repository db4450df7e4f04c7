// SPDX-License-Identifier: BSD-3-Clause
// Test harness for the transport engine: N engines on a FakeLink driven by a FakeClock, with
// helpers to register memory, connect RC / UC QPs and run the network until a condition holds.
// Everything is bounded: run_until gives up after a step limit and reports it.
// NetT<Q> runs the engines over queue backend Q (transport/queues.h): with RingQueues the
// harness plays the app, writing WQE slots into the ABI rings and polling CQE slots
// (post_send / post_recv / post_srq_recv / poll_cq below work with either backend).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "uroce/abi.h"
#include "uroce/ring.h"

#include "support/fake_clock.h"
#include "support/fake_link.h"
#include "transport/engine.h"

namespace uroce::transport::testing {

using test::Endpoint;
using test::FakeClock;
using test::FakeLink;
using Eng = Engine<Endpoint, FakeClock>;

// The app's side of the shared rings of one node (RingQueues only).
struct AppRings {
  struct Mem {
    void operator()(void *p) const noexcept { std::free(p); }
  };
  std::vector<std::unique_ptr<void, Mem>> mem;
  std::map<uint32_t, shm::RingProducer> sq, rq, srq;  // by QPN / SRQ handle
  std::map<uint32_t, shm::RingConsumer> cq;           // by CQ handle
  RingQueues::Ring make(uint32_t slot_size, uint32_t slots) {
    const size_t bytes = abi::ring_bytes(slot_size, slots);
    void *m = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    mem.emplace_back(m);
    EXPECT_EQ(shm::ring_init(m, bytes, slot_size, slots), shm::RingError::kOk);
    return RingQueues::Ring{m, bytes, slot_size, slots};
  }
};

template <class Q>
struct NodeT {
  Endpoint *ep = nullptr;
  std::unique_ptr<Engine<Endpoint, FakeClock, Q>> eng;
  AppRings app;
  uint8_t mac[6] = {};
  wire::Gid gid;
  uint32_t pd = 0;
  uint32_t cq = 0;
};
using Node = NodeT<PrivateQueues>;

// A registered buffer: host memory plus the application VA the peer uses.
struct Buf {
  std::vector<uint8_t> mem;
  uint64_t va = 0;
  uint32_t key = 0;
  uint8_t *at(uint64_t off) { return mem.data() + off; }
};

struct RcParams {
  Mtu mtu = Mtu::k1024;
  uint32_t psn_a = 0x100, psn_b = 0x200;
  uint8_t timeout = 10;  // 4.096 us << 10 = 4.19 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us
  uint8_t max_rd_atomic = 16;
  uint32_t access =
      kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  QpType type = QpType::kRc;
  QpCap cap{64, 64, 32, 32, 256};
  bool ipv6 = false;
  uint32_t srq_a = 0, srq_b = 0;
};

template <class Q = PrivateQueues>
class NetT {
 public:
  using EngT = Engine<Endpoint, FakeClock, Q>;
  using Node = NodeT<Q>;
  static constexpr bool kRings = Q::kShared;

  NetT(uint64_t seed, size_t n, const EngineConfig &cfg = EngineConfig{}, size_t pool = 1024)
      : link(seed, clock) {
    for (size_t i = 0; i < n; ++i) {
      auto nd = std::make_unique<Node>();
      const uint8_t mac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, static_cast<uint8_t>(0x10 + i)};
      std::memcpy(nd->mac, mac, 6);
      nd->ep = &link.add_endpoint(mac, pool);
      nd->ep->user = nd.get();
      EngineConfig c = cfg;
      c.seed = seed * 31 + i;
      nd->eng = std::make_unique<EngT>(*nd->ep, clock, c);
      nd->gid = wire::Gid::from_ipv4(10, 0, 0, static_cast<uint8_t>(1 + i));
      nd->pd = nd->eng->create_pd();
      nodes.push_back(std::move(nd));
      node(i).cq = create_cq(i, 1u << 15);
    }
  }

  EngT &e(size_t i) { return *nodes[i]->eng; }

  // ---- the app's verbs, over either backend ----
  uint32_t create_cq(size_t i, uint32_t depth) {
    if constexpr (kRings) {
      const uint32_t slots = round_pow2(depth);
      auto r = node(i).app.make(sizeof(abi::Cqe), slots);
      const uint32_t h = e(i).create_cq(depth, r);
      if (h) {
        EXPECT_EQ(node(i).app.cq[h].attach(r.mem, r.bytes, r.slot_size, r.slots),
                  shm::RingError::kOk);
      }
      return h;
    } else {
      return e(i).create_cq(depth);
    }
  }
  uint32_t create_srq(size_t i, uint32_t max_wr, uint32_t max_sge) {
    if constexpr (kRings) {
      auto r = node(i).app.make(abi::recv_slot_size(max_sge), round_pow2(max_wr));
      const uint32_t h = e(i).create_srq(node(i).pd, max_wr, max_sge, r);
      if (h) {
        EXPECT_EQ(node(i).app.srq[h].attach(r.mem, r.bytes, r.slot_size, r.slots),
                  shm::RingError::kOk);
      }
      return h;
    } else {
      return e(i).create_srq(node(i).pd, max_wr, max_sge);
    }
  }
  // Writes the WR into the next SQ slot (as the verbs shim does) and rings the doorbell:
  // always, or with claim_doorbells set only when RingProducer::claim_notify() says so (the
  // app's doorbell protocol, doc/ipc.md "Doorbells": no ring while the engine holds the token).
  int post_send(size_t i, uint32_t qpn, const SendWr &wr) {
    if constexpr (kRings) {
      shm::RingProducer &p = node(i).app.sq[qpn];
      if (p.reserve(1) != 1) return ENOMEM;
      auto *s = static_cast<uint8_t *>(p.slot(0));
      abi::SendWqeHeader h{};
      h.wr_id = wr.wr_id;
      h.opcode = static_cast<uint8_t>(wr.opcode);
      h.send_flags = wr.send_flags;
      const bool inv = wr.opcode == WrOpcode::kSendWithInv || wr.opcode == WrOpcode::kLocalInv ||
                       wr.opcode == WrOpcode::kBindMw;
      h.imm_data = inv ? wr.invalidate_rkey : wr.imm_data_be;
      h.remote_addr = wr.remote_addr;
      h.rkey = wr.rkey;
      h.ud_ah = wr.ah;
      h.compare_add = wr.compare_add;
      h.swap = wr.swap;
      h.remote_qpn = wr.remote_qpn;
      h.remote_qkey = wr.remote_qkey;
      if (wr.send_flags & kSendInline) {
        uint32_t len = 0;
        for (uint32_t k = 0; k < wr.num_sge; ++k) {
          std::memcpy(s + sizeof h + len, reinterpret_cast<const void *>(wr.sg_list[k].addr),
                      wr.sg_list[k].length);
          len += wr.sg_list[k].length;
        }
        h.inline_len = static_cast<uint16_t>(len);
      } else {
        h.num_sge = wr.num_sge;
        for (uint32_t k = 0; k < wr.num_sge; ++k) {
          const abi::Sge g{wr.sg_list[k].addr, wr.sg_list[k].length, wr.sg_list[k].lkey};
          std::memcpy(s + sizeof h + k * sizeof g, &g, sizeof g);
        }
      }
      std::memcpy(s, &h, sizeof h);
      p.commit(1);
      // As the app does (lib/client, drivers/verbs): ring only when the token was idle.
      if (claim_doorbells && !p.claim_notify()) return 0;
      return e(i).sq_doorbell(qpn);
    } else {
      return e(i).post_send(qpn, wr);
    }
  }
  static int write_recv(shm::RingProducer &p, const RecvWr &wr) {
    if (p.reserve(1) != 1) return ENOMEM;
    auto *s = static_cast<uint8_t *>(p.slot(0));
    abi::RecvWqeHeader h{wr.wr_id, wr.num_sge, 0};
    std::memcpy(s, &h, sizeof h);
    for (uint32_t k = 0; k < wr.num_sge; ++k) {
      const abi::Sge g{wr.sg_list[k].addr, wr.sg_list[k].length, wr.sg_list[k].lkey};
      std::memcpy(s + sizeof h + k * sizeof g, &g, sizeof g);
    }
    p.commit(1);
    return 0;
  }
  int post_recv(size_t i, uint32_t qpn, const RecvWr &wr) {
    if constexpr (kRings) {
      const int rc = write_recv(node(i).app.rq[qpn], wr);
      return rc ? rc : e(i).rq_doorbell(qpn);
    } else {
      return e(i).post_recv(qpn, wr);
    }
  }
  int post_srq_recv(size_t i, uint32_t srq, const RecvWr &wr) {
    if constexpr (kRings)
      return write_recv(node(i).app.srq[srq], wr);
    else
      return e(i).post_srq_recv(srq, wr);
  }
  uint32_t poll_cq(size_t i, uint32_t cq, Wc *out, uint32_t n) {
    if constexpr (kRings) {
      shm::RingConsumer &c = node(i).app.cq[cq];
      uint32_t k = 0;
      abi::Cqe q;
      while (k < n && c.try_pop(&q) == shm::RingError::kOk) {
        Wc &w = out[k++];
        w = Wc{};
        w.wr_id = q.wr_id;
        w.status = static_cast<WcStatus>(q.status);
        w.opcode = static_cast<WcOpcode>(q.opcode);
        w.vendor_err = q.vendor_err;
        w.byte_len = q.byte_len;
        w.imm_data = q.imm_data;
        w.qp_num = q.qp_num;
        w.src_qp = q.src_qp;
        w.wc_flags = q.wc_flags;
        w.pkey_index = q.pkey_index;
        w.slid = q.slid;
        w.sl = q.sl;
        w.dlid_path_bits = q.dlid_path_bits;
      }
      return k;
    } else {
      return e(i).poll_cq(cq, out, n);
    }
  }
  Node &node(size_t i) { return *nodes[i]; }

  Buf reg(size_t i, size_t len, uint32_t access, uint64_t va, uint32_t pd = 0) {
    Buf b;
    b.mem.assign(len, 0);
    b.va = va;
    uint32_t lkey = 0, rkey = 0;
    const int rc = e(i).reg_mr(pd ? pd : node(i).pd, b.mem.data(), va, len, access, &lkey, &rkey);
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(lkey, rkey);
    b.key = lkey;
    return b;
  }

  wire::PathInfo path(size_t from, size_t to, bool ipv6 = false) {
    wire::PathInfo p;
    std::memcpy(p.smac, node(from).mac, 6);
    std::memcpy(p.dmac, node(to).mac, 6);
    if (ipv6) {
      p.sgid = wire::Gid::link_local_from_mac(node(from).mac);
      p.dgid = wire::Gid::link_local_from_mac(node(to).mac);
    } else {
      p.sgid = node(from).gid;
      p.dgid = node(to).gid;
    }
    return p;
  }

  uint32_t create(size_t i, const RcParams &rp, uint32_t srq) {
    QpInitAttr ia;
    ia.qp_type = rp.type;
    ia.pd = node(i).pd;
    ia.send_cq = node(i).cq;
    ia.recv_cq = node(i).cq;
    ia.srq = srq;
    ia.cap = rp.cap;
    if constexpr (kRings) {
      typename Q::QpMem m;
      m.sq = node(i).app.make(abi::send_slot_size(rp.cap.max_send_sge, rp.cap.max_inline_data),
                              round_pow2(rp.cap.max_send_wr ? rp.cap.max_send_wr : 1));
      if (!srq)
        m.rq = node(i).app.make(abi::recv_slot_size(rp.cap.max_recv_sge),
                                round_pow2(rp.cap.max_recv_wr ? rp.cap.max_recv_wr : 1));
      const uint32_t qpn = e(i).create_qp(ia, m);
      if (qpn) {
        EXPECT_EQ(node(i).app.sq[qpn].attach(m.sq.mem, m.sq.bytes, m.sq.slot_size, m.sq.slots),
                  shm::RingError::kOk);
        if (!srq) {
          EXPECT_EQ(node(i).app.rq[qpn].attach(m.rq.mem, m.rq.bytes, m.rq.slot_size, m.rq.slots),
                    shm::RingError::kOk);
        }
      }
      return qpn;
    } else {
      return e(i).create_qp(ia);
    }
  }

  // Brings a QP to RTS towards (peer node, peer qpn).
  void to_rts(size_t i, uint32_t qpn, size_t peer, uint32_t peer_qpn, const RcParams &rp,
              uint32_t sq_psn, uint32_t rq_psn) {
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.port_num = 1;
    a.pkey_index = 0;
    a.qp_access_flags = rp.access;
    ASSERT_EQ(e(i).modify_qp(qpn, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
    a.qp_state = QpState::kRtr;
    a.ah = path(i, peer, rp.ipv6);
    a.path_mtu = rp.mtu;
    a.dest_qp_num = peer_qpn;
    a.rq_psn = rq_psn;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = rp.min_rnr_timer;
    uint32_t m = kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (rp.type == QpType::kRc) m |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    ASSERT_EQ(e(i).modify_qp(qpn, a, m), 0);
    a.qp_state = QpState::kRts;
    a.sq_psn = sq_psn;
    a.timeout = rp.timeout;
    a.retry_cnt = rp.retry_cnt;
    a.rnr_retry = rp.rnr_retry;
    a.max_rd_atomic = rp.max_rd_atomic;
    m = kQpState | kQpSqPsn;
    if (rp.type == QpType::kRc) m |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
    ASSERT_EQ(e(i).modify_qp(qpn, a, m), 0);
  }

  // Creates and connects a QP pair between nodes a and b.
  std::pair<uint32_t, uint32_t> connect(size_t a, size_t b, const RcParams &rp = RcParams{}) {
    const uint32_t qa = create(a, rp, rp.srq_a), qb = create(b, rp, rp.srq_b);
    EXPECT_NE(qa, 0u);
    EXPECT_NE(qb, 0u);
    to_rts(a, qa, b, qb, rp, rp.psn_a, rp.psn_b);
    to_rts(b, qb, a, qa, rp, rp.psn_b, rp.psn_a);
    return {qa, qb};
  }

  // One step: poll every engine, deliver what is due; when nothing moved, jump the clock to
  // the next delivery or timer. Returns false when nothing can ever happen again.
  bool step() {
    size_t moved = 0;
    for (auto &n : nodes)
      moved += n->eng->poll();
    moved += link.deliver([](Endpoint &to, const uint8_t *f, uint32_t len) {
      static_cast<Node *>(to.user)->eng->rx(f, len);
    });
    if (moved) return true;
    uint64_t next = link.next_delivery_ns();
    for (auto &n : nodes) {
      const uint64_t t = n->eng->next_timer_ns();
      if (t < next) next = t;
    }
    if (next == UINT64_MAX) return false;
    clock.set(next > clock.now_ns() ? next : clock.now_ns() + 1);
    return true;
  }

  // Runs until pred() or quiescence or max_steps. Returns pred().
  bool run_until(const std::function<bool()> &pred, uint64_t max_steps = 2'000'000) {
    for (uint64_t i = 0; i < max_steps; ++i) {
      if (pred()) return true;
      if (!step()) return pred();
    }
    ADD_FAILURE() << "run_until: step limit reached at t=" << clock.now_ns();
    return pred();
  }
  // Runs until nothing is left to do (no frames, no timers).
  void settle(uint64_t max_steps = 2'000'000) {
    run_until([] { return false; }, max_steps);
  }

  // Polls CQ of node i into `out` until `n` completions arrived (running the network).
  bool wait_wc(size_t i, std::vector<Wc> &out, size_t n, uint32_t cq = 0) {
    const uint32_t c = cq ? cq : node(i).cq;
    return run_until([&] {
      Wc wc[64];
      uint32_t k;
      while ((k = poll_cq(i, c, wc, 64)) > 0)
        out.insert(out.end(), wc, wc + k);
      return out.size() >= n;
    });
  }

  bool claim_doorbells = false;  // see post_send
  FakeClock clock;
  FakeLink link;
  std::vector<std::unique_ptr<Node>> nodes;
};
using Net = NetT<PrivateQueues>;

inline SendWr make_wr(uint64_t id, WrOpcode op, const Buf &local, uint64_t off, uint32_t len,
                      uint32_t flags = kSendSignaled) {
  SendWr wr;
  wr.wr_id = id;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.num_sge = 1;
  wr.sg_list[0] = Sge{local.va + off, len, local.key};
  return wr;
}

inline RecvWr make_recv(uint64_t id, const Buf &b, uint64_t off, uint32_t len) {
  RecvWr wr;
  wr.wr_id = id;
  wr.num_sge = 1;
  wr.sg_list[0] = Sge{b.va + off, len, b.key};
  return wr;
}

inline void fill_pattern(uint8_t *p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = static_cast<uint8_t>(x);
  }
}

constexpr uint32_t kAllAccess =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

}  // namespace uroce::transport::testing
