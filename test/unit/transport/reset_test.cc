// SPDX-License-Identifier: BSD-3-Clause
// EngineCore::reset(): an engine that has been used (QPs in every state, traffic lost and
// retransmitted, timers armed, completions and async events unread, objects destroyed) and
// then reset behaves exactly as a newly built one with the same config. The proof: the same
// scenario run on both gives the same log, byte for byte: QPNs, memory keys, every frame the
// engine sends (PSNs, IP ids, ICRCs), every completion, every timer deadline it reports, its
// counters and the QPs' state. engine_rx_fuzz resets one engine per input and relies on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iterator>
#include <string>
#include <vector>

#include "transport/engine.h"

namespace uroce::transport {
namespace {

constexpr uint8_t kMac[6] = {0x02, 0, 0, 0, 0, 0x07};
constexpr uint32_t kMrBytes = 8192;

struct Clk {
  uint64_t t = 0;
  uint64_t now_ns() const noexcept { return t; }
};

// Keeps every committed frame for the test's "network" (the engine talks to itself).
struct LoopPort {
  uint8_t buf[4096];
  std::deque<std::vector<uint8_t>> sent;
  TxBuf tx_alloc() noexcept { return TxBuf{buf, sizeof buf, nullptr}; }
  void tx_commit(TxBuf b, uint32_t len) noexcept { sent.emplace_back(b.data, b.data + len); }
  void tx_abort(TxBuf) noexcept {}
};

using Eng = Engine<LoopPort, Clk>;

const DcqcnParams kDcqcn{};

EngineConfig config(uint64_t seed) {
  EngineConfig c;
  c.max_qp = 8;
  c.max_mr = 8;
  c.max_pd = 2;
  c.max_cq = 4;
  c.max_srq = 2;
  c.max_ah = 2;
  c.max_cqe = 256;
  c.seed = seed;
  c.dcqcn = &kDcqcn;
  return c;
}

wire::PathInfo self_path() {
  wire::PathInfo p;
  std::memcpy(p.smac, kMac, 6);
  std::memcpy(p.dmac, kMac, 6);
  p.sgid = p.dgid = wire::Gid::from_ipv4(10, 0, 0, 7);
  return p;
}

std::string hex(const uint8_t *p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

// Everything observable, one line per fact.
struct Log {
  std::vector<std::string> lines;
  template <class... A>
  void add(const char *fmt, A... a) {
    char b[256];
    std::snprintf(b, sizeof b, fmt, a...);
    lines.emplace_back(b);
  }
};

void expect_same(const Log &fresh, const Log &reused) {
  const size_t n = std::min(fresh.lines.size(), reused.lines.size());
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(fresh.lines[i], reused.lines[i]) << "first difference at line " << i;
  ASSERT_EQ(fresh.lines.size(), reused.lines.size());
}

// The app's side of one run: its memory and the engine's handles.
struct App {
  std::vector<uint8_t> mem[2];
  uint32_t pd = 0, cq = 0, srq = 0, ah = 0;
  uint32_t key[2] = {};
  uint32_t qpn[3] = {};  // RC A, RC B (connected to A), UD
};

int connect_rc(Eng &e, uint32_t qpn, uint32_t dest, uint32_t sq_psn, uint32_t rq_psn,
               uint32_t rate_kbps) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  if (int rc = e.modify_qp(qpn, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags)) return rc;
  a.qp_state = QpState::kRtr;
  a.ah = self_path();
  a.path_mtu = Mtu::k1024;
  a.dest_qp_num = dest;
  a.rq_psn = rq_psn;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 1;
  if (int rc = e.modify_qp(qpn, a,
                           kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                               kQpMaxDestRdAtomic | kQpMinRnrTimer))
    return rc;
  a.qp_state = QpState::kRts;
  a.sq_psn = sq_psn;
  a.timeout = 8;  // 1 ms
  a.retry_cnt = 5;
  a.rnr_retry = 5;
  a.max_rd_atomic = 4;
  a.rate_limit_kbps = rate_kbps;
  uint32_t m = kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  if (rate_kbps) m |= kQpRateLimit;
  return e.modify_qp(qpn, a, m);
}

int bring_up_ud(Eng &e, uint32_t qpn) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.qkey = 0x1234;
  if (int rc = e.modify_qp(qpn, a, kQpState | kQpPkeyIndex | kQpPort | kQpQkey)) return rc;
  a.qp_state = QpState::kRtr;
  if (int rc = e.modify_qp(qpn, a, kQpState)) return rc;
  a.qp_state = QpState::kRts;
  a.sq_psn = 0x55;
  return e.modify_qp(qpn, a, kQpState | kQpSqPsn);
}

Sge sge(const App &app, int mr, uint32_t off, uint32_t len) {
  return Sge{0x100000ull * (mr + 1) + off, len, app.key[mr]};
}

// Creates the objects, logging every handle, QPN and key.
void setup(Eng &e, App &app, Log &log) {
  for (int m = 0; m < 2; ++m) {
    app.mem[m].assign(kMrBytes, 0);
    for (uint32_t i = 0; i < kMrBytes; ++i)
      app.mem[m][i] = static_cast<uint8_t>(i * 13 + m);
  }
  app.pd = e.create_pd();
  app.cq = e.create_cq(256);
  ASSERT_NE(app.pd, 0u);
  ASSERT_NE(app.cq, 0u);
  const uint32_t all =
      kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  for (int m = 0; m < 2; ++m) {
    uint32_t rkey = 0;
    ASSERT_EQ(e.reg_mr(app.pd, app.mem[m].data(), 0x100000ull * (m + 1), kMrBytes, all, &app.key[m],
                       &rkey),
              0);
  }
  app.srq = e.create_srq(app.pd, 16, 2);
  AhAttr aa;
  aa.path = self_path();
  app.ah = e.create_ah(app.pd, aa);
  ASSERT_NE(app.srq, 0u);
  ASSERT_NE(app.ah, 0u);
  const QpType types[3] = {QpType::kRc, QpType::kRc, QpType::kUd};
  for (int i = 0; i < 3; ++i) {
    QpInitAttr ia;
    ia.qp_type = types[i];
    ia.pd = app.pd;
    ia.send_cq = ia.recv_cq = app.cq;
    ia.srq = i == 1 ? app.srq : 0;
    ia.cap = QpCap{16, 16, 2, 2, 64};
    app.qpn[i] = e.create_qp(ia);
    ASSERT_NE(app.qpn[i], 0u);
  }
  log.add("handles pd %u cq %u srq %u ah %u", app.pd, app.cq, app.srq, app.ah);
  log.add("keys %08x %08x", app.key[0], app.key[1]);
  log.add("qpns %06x %06x %06x", app.qpn[0], app.qpn[1], app.qpn[2]);
}

// Posts RC traffic both ways (SEND, WRITE, READ, atomic; A paced by a rate limit) and a UD SEND
// to the UD QP itself.
void post_traffic(Eng &e, const App &app) {
  ASSERT_EQ(connect_rc(e, app.qpn[0], app.qpn[1], 0x100, 0x200, 2'000'000), 0);
  ASSERT_EQ(connect_rc(e, app.qpn[1], app.qpn[0], 0x200, 0x100, 0), 0);
  ASSERT_EQ(bring_up_ud(e, app.qpn[2]), 0);
  for (uint64_t i = 0; i < 4; ++i) {
    RecvWr r;
    r.wr_id = 0x100 + i;
    r.sg_list[r.num_sge++] = sge(app, 1, 2048 * static_cast<uint32_t>(i), 2048);
    ASSERT_EQ(e.post_srq_recv(app.srq, r), 0);
    r.wr_id = 0x200 + i;
    r.sg_list[0] = sge(app, 0, 4096 + 1024 * static_cast<uint32_t>(i), 1024);
    ASSERT_EQ(e.post_recv(app.qpn[0], r), 0);
  }
  RecvWr ur;
  ur.wr_id = 0x300;
  ur.sg_list[ur.num_sge++] = sge(app, 0, 6144, 1024 + 40);
  ASSERT_EQ(e.post_recv(app.qpn[2], ur), 0);

  auto wr = [&](uint64_t id, WrOpcode op, Sge g) {
    SendWr w;
    w.wr_id = id;
    w.opcode = op;
    w.send_flags = kSendSignaled;
    w.sg_list[w.num_sge++] = g;
    return w;
  };
  ASSERT_EQ(e.post_send(app.qpn[0], wr(1, WrOpcode::kSend, sge(app, 0, 0, 2000))), 0);
  SendWr w = wr(2, WrOpcode::kRdmaWrite, sge(app, 0, 100, 2000));
  w.remote_addr = 0x200000 + 3000;
  w.rkey = app.key[1];
  ASSERT_EQ(e.post_send(app.qpn[0], w), 0);
  w = wr(3, WrOpcode::kRdmaRead, sge(app, 0, 5000, 1500));
  w.remote_addr = 0x200000 + 100;
  w.rkey = app.key[1];
  ASSERT_EQ(e.post_send(app.qpn[0], w), 0);
  w = wr(4, WrOpcode::kAtomicFetchAndAdd, sge(app, 0, 7000, 8));
  w.remote_addr = 0x200000 + 8000;
  w.rkey = app.key[1];
  w.compare_add = 9;
  ASSERT_EQ(e.post_send(app.qpn[0], w), 0);
  ASSERT_EQ(e.post_send(app.qpn[1], wr(5, WrOpcode::kSend, sge(app, 1, 0, 700))), 0);
  w = wr(6, WrOpcode::kSend, sge(app, 1, 0, 900));
  w.ah = app.ah;
  w.remote_qpn = app.qpn[2];
  w.remote_qkey = 0x1234;
  ASSERT_EQ(e.post_send(app.qpn[2], w), 0);
}

// Runs the engine against itself: every frame it sends comes back but those that `drop` names
// (by the index of the frame in the run); when nothing moves, the clock jumps to the next
// timer. At most `steps` steps; logs frames, completions and timer deadlines.
template <class Drop>
void run(Eng &e, LoopPort &port, Clk &clk, const App &app, Log &log, int steps, Drop &&drop) {
  uint32_t frame_no = 0;
  for (int s = 0; s < steps; ++s) {
    e.poll();
    bool moved = !port.sent.empty();
    while (!port.sent.empty()) {
      std::vector<uint8_t> f = std::move(port.sent.front());
      port.sent.pop_front();
      const bool lost = drop(frame_no);
      log.add("frame %u%s %s", frame_no++, lost ? " lost" : "", hex(f.data(), f.size()).c_str());
      if (!lost) e.rx(f.data(), static_cast<uint32_t>(f.size()));
    }
    Wc wc[8];
    uint32_t n;
    while ((n = e.poll_cq(app.cq, wc, 8)) > 0)
      for (uint32_t k = 0; k < n; ++k)
        log.add("wc id %llu st %u op %u len %u qp %06x src %06x flags %x",
                static_cast<unsigned long long>(wc[k].wr_id), static_cast<unsigned>(wc[k].status),
                static_cast<unsigned>(wc[k].opcode), wc[k].byte_len, wc[k].qp_num, wc[k].src_qp,
                wc[k].wc_flags);
    AsyncEventRecord ev;
    while (e.poll_async_event(&ev))
      log.add("async %u %06x", static_cast<unsigned>(ev.type), ev.handle);
    if (moved || e.active_qps() != 0) {
      clk.t += 1000;
      continue;
    }
    const uint64_t next = e.next_timer_ns();
    log.add("step %d t %llu next %llu", s, static_cast<unsigned long long>(clk.t),
            static_cast<unsigned long long>(next));
    if (next == UINT64_MAX) break;
    clk.t = next > clk.t ? next : clk.t + 1;
  }
}

void log_state(Eng &e, const App &app, Log &log) {
  const EngineCounters &c = e.counters();
  static_assert(sizeof c % sizeof(uint64_t) == 0);
  uint64_t w[sizeof c / sizeof(uint64_t)];
  std::memcpy(w, &c, sizeof c);
  for (size_t i = 0; i < std::size(w); ++i)
    log.add("counter %zu %llu", i, static_cast<unsigned long long>(w[i]));
  for (const uint32_t q : app.qpn) {
    QpDebug d;
    ASSERT_TRUE(e.qp_debug(q, &d));
    log.add("qp %06x req %x sent %x comp %x resp %x msn %x idx %u/%u/%u rq %u win %u", q, d.req_psn,
            d.sent_psn, d.comp_psn, d.resp_psn, d.resp_msn, d.req_idx, d.sq_head, d.sq_tail,
            d.rq_count, d.window);
    const QpCounters *qc = e.qp_counters(q);
    log.add("qp %06x tx %llu rx %llu retrans %llu timeouts %llu", q,
            static_cast<unsigned long long>(qc->tx_pkts),
            static_cast<unsigned long long>(qc->rx_pkts),
            static_cast<unsigned long long>(qc->retransmits),
            static_cast<unsigned long long>(qc->timeouts));
  }
  const CcTotals t = e.cc_totals();
  log.add("cc %llu %llu", static_cast<unsigned long long>(t.rate_cuts),
          static_cast<unsigned long long>(t.throttled_qps));
  log.add("mem %s", hex(app.mem[1].data(), 64).c_str());
}

// The scenario both engines run: setup, traffic with frames 3, 4 and 11 lost (retransmit
// timers fire, go-back-N), everything to the end.
Log scenario(Eng &e, LoopPort &port, Clk &clk) {
  Log log;
  App app;
  clk.t = 5'000'000;
  log.add("start next %llu active %u", static_cast<unsigned long long>(e.next_timer_ns()),
          e.active_qps());
  setup(e, app, log);
  post_traffic(e, app);
  run(e, port, clk, app, log, 4000,
      [](uint32_t i) { return i == 3 || i == 4 || i == 11 || i == 18 || i == 21 || i == 22; });
  log_state(e, app, log);
  return log;
}

// Leaves an engine in a busy state: the scenario's objects with traffic cut off in the middle
// (timers armed, QPs active, frames unsent, completions unread), a QP destroyed and created
// again (its slot remembers the old QPN), a QP in ERR with flushed work, an MR deregistered,
// a second CQ and an SRQ limit armed.
void mess_up(Eng &e, LoopPort &port, Clk &clk, App &app) {
  Log ignored;
  clk.t = 77'000'000;
  setup(e, app, ignored);
  post_traffic(e, app);
  // Only a few steps, every 5th frame lost: requests outstanding, timers armed.
  for (int s = 0; s < 3; ++s) {
    e.poll();
    uint32_t k = 0;
    while (!port.sent.empty()) {
      if (k++ % 5 != 1)
        e.rx(port.sent.front().data(), static_cast<uint32_t>(port.sent.front().size()));
      port.sent.pop_front();
    }
    clk.t += 300;
  }
  // A request whose frames never arrive: its retransmit timer stays armed.
  SendWr w;
  w.wr_id = 99;
  w.send_flags = kSendSignaled;
  w.sg_list[w.num_sge++] = sge(app, 0, 0, 1500);
  ASSERT_EQ(e.post_send(app.qpn[0], w), 0);
  e.poll();
  ASSERT_NE(e.next_timer_ns(), UINT64_MAX);
  QpInitAttr ia;
  ia.qp_type = QpType::kRc;
  ia.pd = app.pd;
  ia.send_cq = ia.recv_cq = e.create_cq(8);
  ia.cap = QpCap{4, 4, 1, 1, 0};
  const uint32_t extra = e.create_qp(ia);
  ASSERT_NE(extra, 0u);
  ASSERT_EQ(e.destroy_qp(extra), 0);
  ASSERT_NE(e.create_qp(ia), 0u);
  ASSERT_EQ(e.modify_srq(app.srq, 2), 0);
  QpAttr a;
  a.qp_state = QpState::kErr;
  ASSERT_EQ(e.modify_qp(app.qpn[2], a, kQpState), 0);
  ASSERT_EQ(e.dereg_mr(app.key[0]), 0);
  e.poll();  // frames left in the port, completions and events unread
  ASSERT_GT(e.counters().tx_pkts, 0u);
}

TEST(EngineReset, BehavesAsNewlyBuilt) {
  LoopPort port_fresh, port_reused;
  Clk clk_fresh, clk_reused;
  Eng fresh(port_fresh, clk_fresh, config(42));
  const Log want = scenario(fresh, port_fresh, clk_fresh);
  // The scenario does reach what the comparison is about.
  // The scenario does reach what the comparison is about: frames resent after a NAK and after
  // a retransmit timeout, the clock moved from timer to timer.
  EXPECT_GE(fresh.counters().tx_pkts, 15u);
  uint64_t retransmits = 0, timeouts = 0, timer_steps = 0;
  for (const std::string &l : want.lines) {
    if (l.rfind("qp ", 0) == 0 && l.find(" retrans ") != std::string::npos) {
      retransmits += std::stoull(l.substr(l.find(" retrans ") + 9));
      timeouts += std::stoull(l.substr(l.find(" timeouts ") + 10));
    }
    timer_steps += l.rfind("step", 0) == 0 && l.find(" next 1844674407") == std::string::npos;
  }
  EXPECT_GT(retransmits, 1u);
  EXPECT_GT(timeouts, 0u);
  EXPECT_GT(timer_steps, 3u);

  Eng reused(port_reused, clk_reused, config(42));
  for (int round = 0; round < 2; ++round) {
    App app;
    mess_up(reused, port_reused, clk_reused, app);
    ASSERT_EQ(reused.reset(), 0);
    port_reused.sent.clear();  // the wire is not the engine's
    const Log got = scenario(reused, port_reused, clk_reused);
    expect_same(want, got);
  }
}

TEST(EngineReset, LeavesNothingBehind) {
  LoopPort port;
  Clk clk;
  Eng e(port, clk, config(7));
  App app;
  mess_up(e, port, clk, app);
  const uint32_t old_qpn = app.qpn[0], old_key = app.key[1];
  ASSERT_EQ(e.reset(), 0);
  const Eng fresh(port, clk, config(7));
  EXPECT_EQ(std::memcmp(&e.counters(), &fresh.counters(), sizeof(EngineCounters)), 0);
  EXPECT_EQ(e.counters().tx_pkts, 0u);
  EXPECT_EQ(e.active_qps(), 0u);
  EXPECT_EQ(e.next_timer_ns(), UINT64_MAX);
  EXPECT_EQ(e.dirty_cq_count(), 0u);
  AsyncEventRecord ev;
  EXPECT_FALSE(e.poll_async_event(&ev));
  QpAttr a;
  QpInitAttr ia;
  EXPECT_EQ(e.query_qp(old_qpn, &a, &ia), EINVAL);
  EXPECT_EQ(e.qp_slot(old_qpn), UINT32_MAX);
  EXPECT_EQ(e.destroy_cq(app.cq), EINVAL);
  EXPECT_EQ(e.cq_pending(app.cq), 0u);
  EXPECT_EQ(e.destroy_srq(app.srq), EINVAL);
  EXPECT_EQ(e.destroy_ah(app.ah), EINVAL);
  EXPECT_EQ(e.dealloc_pd(app.pd), EINVAL);
  EXPECT_EQ(e.tables().mrs.in_use(), 0u);
  EXPECT_EQ(e.tables().mrs.find(old_key), nullptr);
  uint8_t *host = nullptr;
  EXPECT_EQ(e.tables().check_rkey(old_key, app.pd, 0, 0x200000, 8, 0, &host), MrCheck::kBadKey);
  const CcTotals t = e.cc_totals();
  EXPECT_EQ(t.rate_cuts + t.throttled_qps + t.cnp_rcvd, 0u);
  // Nothing is left to send.
  port.sent.clear();
  e.poll();
  EXPECT_TRUE(port.sent.empty());
  // The first objects get the handles, QPN and key a new engine gives.
  Clk clk2;
  LoopPort port2;
  Eng fresh2(port2, clk2, config(7));
  App x, y;
  Log lx, ly;
  setup(e, x, lx);
  setup(fresh2, y, ly);
  expect_same(ly, lx);
}

TEST(EngineReset, RefusedOverSharedTables) {
  ObjectTables shared(2, 8, 2, 5);
  LoopPort port;
  Clk clk;
  EngineConfig c = config(3);
  c.tables = &shared;
  Eng e(port, clk, c);
  const uint32_t pd = shared.pds.alloc();
  const uint32_t cq = e.create_cq(8);
  QpInitAttr ia;
  ia.pd = pd;
  ia.send_cq = ia.recv_cq = cq;
  ia.cap = QpCap{4, 4, 1, 1, 0};
  const uint32_t q = e.create_qp(ia);
  ASSERT_NE(q, 0u);
  EXPECT_EQ(e.reset(), EINVAL);
  QpAttr a;
  EXPECT_EQ(e.query_qp(q, &a, &ia), 0);  // nothing changed
  EXPECT_EQ(e.destroy_qp(q), 0);
}

}  // namespace
}  // namespace uroce::transport
