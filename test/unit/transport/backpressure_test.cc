// SPDX-License-Identifier: BSD-3-Clause
// TX back-pressure between the transport engine and its port (transport/port.h,
// port/tx_backlog.h): two engines joined by ports whose TX ring is small and emptied slowly.
//   - kBacklog (what EthPort / PortQueue do): frames the ring refuses stay in a bounded backlog
//     and go first at the next flush; a full backlog makes tx_alloc refuse. RC WRITEs and READs
//     both ways complete with intact data and without a single retransmission, nothing is
//     dropped, and after a refused tx_alloc the engine asks for no other buffer in that poll.
//   - kDropRefused (the ports before the backlog): what the ring refuses is freed. The same
//     traffic loses frames and needs go-back-N: the scenario does exercise the refusal path.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "harness.h"
#include "port/tx_backlog.h"
#include "support/fake_clock.h"
#include "transport/engine.h"

namespace uroce::transport::testing {
namespace {

enum class Policy { kBacklog, kDropRefused };

class RingPort {
 public:
  static constexpr uint32_t kFrameCap = 4096 + 256;
  static constexpr size_t kPool = 512;
  static constexpr size_t kBacklog = 64;
  static constexpr uint16_t kBatch = 32;
  struct Frame {
    uint8_t data[kFrameCap];
    uint32_t len = 0;
  };

  RingPort(Policy pol, size_t ring_cap) : pol_(pol), ring_cap_(ring_cap), frames_(kPool) {
    free_.reserve(kPool);
    for (Frame &f : frames_)
      free_.push_back(&f);
  }

  // --- transport::TxPort ---
  TxBuf tx_alloc() noexcept {
    ++allocs;
    if (refused_in_poll) ++asked_after_refusal;
    if (pol_ == Policy::kBacklog && backlog_.full()) {
      flush();
      if (backlog_.full()) {
        ++refusals;
        refused_in_poll = true;
        return {};
      }
    }
    if (free_.empty()) {
      ++pool_empty;
      refused_in_poll = true;
      return {};
    }
    Frame *f = free_.back();
    free_.pop_back();
    return TxBuf{f->data, kFrameCap, f};
  }
  void tx_commit(TxBuf b, uint32_t len) noexcept {
    auto *f = static_cast<Frame *>(b.handle);
    f->len = len;
    if (pol_ == Policy::kBacklog) {
      if (!backlog_.push(f, len)) {  // cannot happen: tx_alloc saw room
        ++dropped;
        free_.push_back(f);
      }
      if (backlog_.fresh() >= kBatch) flush();
    } else {
      batch_.push_back(f);
      if (batch_.size() == kBatch) flush();
    }
  }
  void tx_abort(TxBuf b) noexcept { free_.push_back(static_cast<Frame *>(b.handle)); }

  void flush() noexcept {
    if (pol_ == Policy::kBacklog) {
      backlog_.drain([this](Frame **p, uint16_t n) {
        uint16_t k = 0;
        while (k < n && ring_.size() < ring_cap_)
          ring_.push_back(p[k++]);
        return k;
      });
      return;
    }
    for (Frame *f : batch_) {  // the old EthPort::flush: what the ring refuses is freed
      if (ring_.size() < ring_cap_) {
        ring_.push_back(f);
      } else {
        ++dropped;
        free_.push_back(f);
      }
    }
    batch_.clear();
  }

  // The NIC: puts up to n frames from the ring on the wire (deliver), then frees them.
  template <class Deliver>
  size_t transmit(size_t n, Deliver &&deliver) {
    size_t k = 0;
    for (; k < n && !ring_.empty(); ++k) {
      Frame *f = ring_.front();
      ring_.pop_front();
      deliver(f->data, f->len);
      ++on_wire;
      free_.push_back(f);
    }
    return k;
  }
  size_t backlog() const noexcept { return backlog_.size(); }

  bool refused_in_poll = false;
  uint64_t allocs = 0, refusals = 0, pool_empty = 0, asked_after_refusal = 0, dropped = 0,
           on_wire = 0;

 private:
  Policy pol_;
  size_t ring_cap_;
  std::vector<Frame> frames_;
  std::vector<Frame *> free_;
  port::TxBacklog<Frame, kBacklog> backlog_;
  std::vector<Frame *> batch_;
  std::deque<Frame *> ring_;
};

using RingEng = Engine<RingPort, test::FakeClock>;

struct Side {
  std::unique_ptr<RingPort> port;
  std::unique_ptr<RingEng> eng;
  uint8_t mac[6] = {};
  wire::Gid gid;
  uint32_t pd = 0, cq = 0, qp = 0;
  std::vector<uint8_t> mem;
  uint32_t key = 0;
};

constexpr size_t kMsg = 8192;
constexpr int kWrites = 24, kReads = 8;
constexpr uint64_t kVa = 0x10000000;

class BackPressure : public ::testing::TestWithParam<Policy> {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      Side &s = side_[i];
      s.port = std::make_unique<RingPort>(GetParam(), 16);
      EngineConfig cfg;
      cfg.seed = 7 + i;
      s.eng = std::make_unique<RingEng>(*s.port, clock_, cfg);
      const uint8_t mac[6] = {0x02, 0, 0, 0, 0, static_cast<uint8_t>(0x20 + i)};
      std::memcpy(s.mac, mac, 6);
      s.gid = wire::Gid::from_ipv4(10, 0, 0, static_cast<uint8_t>(1 + i));
      s.pd = s.eng->create_pd();
      s.cq = s.eng->create_cq(1024);
      // Slots of kMsg: [0, N) our messages (the peer READs [0, kReads) of them), [N, 2N)
      // where the peer WRITEs, [2N, 2N + kReads) where our READs land.
      s.mem.resize(kMsg * (2 * kWrites + kReads));
      fill_pattern(s.mem.data(), s.mem.size(), 100 + i);
      uint32_t rkey = 0;
      ASSERT_EQ(s.eng->reg_mr(s.pd, s.mem.data(), kVa, s.mem.size(), kAllAccess, &s.key, &rkey), 0);
      QpInitAttr ia;
      ia.qp_type = QpType::kRc;
      ia.pd = s.pd;
      ia.send_cq = s.cq;
      ia.recv_cq = s.cq;
      ia.cap = QpCap{64, 64, 1, 1, 0};
      s.qp = s.eng->create_qp(ia);
      ASSERT_NE(s.qp, 0u);
    }
    to_rts(0, 1);
    to_rts(1, 0);
  }

  void to_rts(int i, int peer) {
    Side &s = side_[i];
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.port_num = 1;
    a.qp_access_flags = kAllAccess;
    ASSERT_EQ(s.eng->modify_qp(s.qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
    a.qp_state = QpState::kRtr;
    std::memcpy(a.ah.smac, s.mac, 6);
    std::memcpy(a.ah.dmac, side_[peer].mac, 6);
    a.ah.sgid = s.gid;
    a.ah.dgid = side_[peer].gid;
    a.path_mtu = Mtu::k1024;
    a.dest_qp_num = side_[peer].qp;
    a.rq_psn = 0x300 + static_cast<uint32_t>(peer);
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 1;
    ASSERT_EQ(s.eng->modify_qp(s.qp, a,
                               kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                   kQpMaxDestRdAtomic | kQpMinRnrTimer),
              0);
    a.qp_state = QpState::kRts;
    a.sq_psn = 0x300 + static_cast<uint32_t>(i);
    a.timeout = 14;  // 67 ms: far beyond this test's simulated time unless frames are lost
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    ASSERT_EQ(s.eng->modify_qp(
                  s.qp, a,
                  kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic),
              0);
  }

  // Both sides WRITE kWrites messages into the peer and READ kReads back.
  void post_all() {
    for (int i = 0; i < 2; ++i) {
      Side &s = side_[i];
      for (int m = 0; m < kWrites + kReads; ++m) {
        const bool read = m >= kWrites;
        const int slot = read ? m - kWrites : m;
        SendWr wr;
        wr.wr_id = static_cast<uint64_t>(m);
        wr.opcode = read ? WrOpcode::kRdmaRead : WrOpcode::kRdmaWrite;
        wr.send_flags = kSendSignaled;
        wr.num_sge = 1;
        // WRITE: our [slot] -> the peer's [N + slot]; READ: the peer's [slot] -> our
        // [2N + slot].
        const uint64_t local = read ? kMsg * (2 * kWrites + slot) : kMsg * slot;
        wr.sg_list[0] = Sge{kVa + local, static_cast<uint32_t>(kMsg), s.key};
        wr.remote_addr = kVa + (read ? kMsg * slot : kMsg * (kWrites + slot));
        wr.rkey = side_[1 - i].key;
        ASSERT_EQ(s.eng->post_send(s.qp, wr), 0) << "side " << i << " wr " << m;
      }
    }
  }

  // One step: both engines poll (the port notes a refusal and any later ask in that poll),
  // both ports flush, each NIC puts at most 3 frames on the wire; the clock moves 1 us, or to
  // the next timer when nothing moved.
  bool step() {
    size_t moved = 0;
    for (Side &s : side_) {
      s.port->refused_in_poll = false;
      moved += s.eng->poll();
      s.port->refused_in_poll = false;
    }
    for (Side &s : side_)
      s.port->flush();
    for (int i = 0; i < 2; ++i)
      moved += side_[i].port->transmit(
          3, [&](const uint8_t *f, uint32_t len) { side_[1 - i].eng->rx(f, len); });
    if (moved) {
      clock_.set(clock_.now_ns() + 1000);
      return true;
    }
    uint64_t next = UINT64_MAX;
    for (Side &s : side_)
      if (s.eng->next_timer_ns() < next) next = s.eng->next_timer_ns();
    if (next == UINT64_MAX) return false;
    clock_.set(next > clock_.now_ns() ? next : clock_.now_ns() + 1);
    return true;
  }

  // Runs until both sides have every completion (or max_steps). Returns the completions.
  std::vector<Wc> run(int side, uint64_t max_steps, std::vector<Wc> *other) {
    std::vector<Wc> wcs[2];
    const size_t want = kWrites + kReads;
    for (uint64_t n = 0; n < max_steps; ++n) {
      for (int i = 0; i < 2; ++i) {
        Wc wc[64];
        uint32_t k;
        while ((k = side_[i].eng->poll_cq(side_[i].cq, wc, 64)) > 0)
          wcs[i].insert(wcs[i].end(), wc, wc + k);
      }
      if (wcs[0].size() >= want && wcs[1].size() >= want) break;
      if (!step()) break;
    }
    *other = wcs[1 - side];
    return wcs[side];
  }

  test::FakeClock clock_;
  Side side_[2];
};

TEST_P(BackPressure, RcTrafficThroughASmallSlowTxRing) {
  post_all();
  std::vector<Wc> wb;
  const std::vector<Wc> wa = run(0, 400'000, &wb);
  const QpCounters *qa = side_[0].eng->qp_counters(side_[0].qp);
  const QpCounters *qb = side_[1].eng->qp_counters(side_[1].qp);
  ASSERT_NE(qa, nullptr);
  ASSERT_NE(qb, nullptr);
  const uint64_t dropped = side_[0].port->dropped + side_[1].port->dropped;
  const uint64_t retransmits = qa->retransmits + qb->retransmits;
  std::printf("tx_alloc refusals %lu / %lu, dropped %lu, retransmits %lu, timeouts %lu, %.3f ms\n",
              side_[0].port->refusals, side_[1].port->refusals, dropped, retransmits,
              qa->timeouts + qb->timeouts, static_cast<double>(clock_.now_ns()) / 1e6);

  if (GetParam() == Policy::kDropRefused) {
    // The ports before the backlog: the ring refused, frames were lost, RC had to go back.
    EXPECT_GT(dropped, 0u);
    EXPECT_GT(retransmits, 0u);
    return;
  }
  // Back-pressure: the ring refused, the backlog filled, tx_alloc refused ...
  for (int i = 0; i < 2; ++i) {
    const RingPort &p = *side_[i].port;
    EXPECT_GT(p.refusals, 0u) << "side " << i << ": the backlog never filled";
    // ... and the engine counted each refusal and asked for nothing else in that poll.
    EXPECT_EQ(side_[i].eng->counters().tx_backpressure, p.refusals + p.pool_empty);
    EXPECT_EQ(p.asked_after_refusal, 0u) << "side " << i;
    EXPECT_EQ(p.dropped, 0u);
    EXPECT_EQ(p.backlog(), 0u);
    // Every frame the engine sent reached the wire exactly once.
    EXPECT_EQ(p.on_wire, side_[i].eng->counters().tx_pkts);
  }
  // Nothing was lost: no go-back-N, no timeout, no sequence NAK.
  EXPECT_EQ(retransmits, 0u);
  EXPECT_EQ(qa->timeouts + qb->timeouts, 0u);
  EXPECT_EQ(qa->seq_naks_sent + qb->seq_naks_sent, 0u);
  // Every WR completed successfully and the data is where it belongs.
  ASSERT_EQ(wa.size(), static_cast<size_t>(kWrites + kReads));
  ASSERT_EQ(wb.size(), static_cast<size_t>(kWrites + kReads));
  for (const Wc &w : wa)
    EXPECT_EQ(w.status, WcStatus::kSuccess) << "A wr " << w.wr_id;
  for (const Wc &w : wb)
    EXPECT_EQ(w.status, WcStatus::kSuccess) << "B wr " << w.wr_id;
  for (int i = 0; i < 2; ++i) {
    const Side &s = side_[i];
    const Side &peer = side_[1 - i];
    std::vector<uint8_t> orig(s.mem.size()), porig(s.mem.size());  // the initial contents
    fill_pattern(orig.data(), orig.size(), 100 + i);
    fill_pattern(porig.data(), porig.size(), 100 + (1 - i));
    for (int m = 0; m < kWrites; ++m)
      EXPECT_EQ(0, std::memcmp(s.mem.data() + kMsg * (kWrites + m), porig.data() + kMsg * m, kMsg))
          << "side " << i << ": the peer's WRITE " << m;
    for (int r = 0; r < kReads; ++r)
      EXPECT_EQ(0,
                std::memcmp(s.mem.data() + kMsg * (2 * kWrites + r), porig.data() + kMsg * r, kMsg))
          << "side " << i << ": READ " << r;
    EXPECT_EQ(0, std::memcmp(s.mem.data(), orig.data(), kMsg * kWrites)) << "side " << i;
    EXPECT_EQ(&peer, &side_[1 - i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, BackPressure,
                         ::testing::Values(Policy::kBacklog, Policy::kDropRefused),
                         [](const ::testing::TestParamInfo<Policy> &p) {
                           return p.param == Policy::kBacklog ? std::string("Backlog")
                                                              : std::string("DropRefused");
                         });

// Two QPs of one engine with more to send than the port has buffers per poll: they take turns
// (the next poll starts after the QP that last sent), instead of the list's head taking every
// freed buffer until its work is done while the other QP sends nothing.
TEST(BackPressureTurns, QpsShareAScarcePort) {
  constexpr uint64_t kVa0 = 0x100000, kVa1 = 0x900000;
  constexpr uint32_t kMsgs = 32, kLen = 16 * 1024;  // 16 frames each at MTU 1024
  Net net(5, 2, EngineConfig{}, 8);                 // 8 TX buffers per endpoint
  Buf a = net.reg(0, size_t{kMsgs} * kLen * 2, kAllAccess, kVa0);
  Buf b = net.reg(1, size_t{kMsgs} * kLen * 2, kAllAccess, kVa1);
  const auto [qa1, qb1] = net.connect(0, 1);
  const auto [qa2, qb2] = net.connect(0, 1);
  (void)qb1;
  (void)qb2;
  for (uint32_t m = 0; m < kMsgs; ++m) {
    for (int q = 0; q < 2; ++q) {
      const uint64_t off = (uint64_t{m} * 2 + q) * kLen;
      SendWr w = make_wr(m * 2 + q + 1, WrOpcode::kRdmaWrite, a, off, kLen);
      w.remote_addr = kVa1 + off;
      w.rkey = b.key;
      ASSERT_EQ(net.e(0).post_send(q == 0 ? qa1 : qa2, w), 0);
    }
  }
  const QpCounters *c1 = net.e(0).qp_counters(qa1);
  const QpCounters *c2 = net.e(0).qp_counters(qa2);
  ASSERT_NE(c1, nullptr);
  ASSERT_NE(c2, nullptr);
  // Once the first QP has sent a quarter of its frames, the second has sent a fair share too.
  constexpr uint64_t kQuarter = uint64_t{kMsgs} * 16 / 4;
  ASSERT_TRUE(net.run_until([&] { return c1->tx_pkts >= kQuarter || c2->tx_pkts >= kQuarter; }));
  EXPECT_GT(net.node(0).ep->tx_alloc_failed(), 0u) << "the port never ran out of buffers";
  EXPECT_GE(c1->tx_pkts, kQuarter / 2) << "QP 1 " << c1->tx_pkts << ", QP 2 " << c2->tx_pkts;
  EXPECT_GE(c2->tx_pkts, kQuarter / 2) << "QP 1 " << c1->tx_pkts << ", QP 2 " << c2->tx_pkts;
  std::vector<Wc> wcs;
  ASSERT_TRUE(net.wait_wc(0, wcs, size_t{kMsgs} * 2));
  for (const Wc &w : wcs)
    EXPECT_EQ(w.status, WcStatus::kSuccess) << "wr " << w.wr_id;
  EXPECT_EQ(std::memcmp(a.mem.data(), b.mem.data(), a.mem.size()), 0);
}

}  // namespace
}  // namespace uroce::transport::testing
