// SPDX-License-Identifier: BSD-3-Clause
// Transport engine microbenchmarks (results and the command in doc/perf.md):
//   BM_RequesterWrite64   CPU per packet on the requester: 64 B RDMA WRITE WQE -> frame with
//                         ICRC, through Engine::poll (manual time: only the requester's poll)
//   BM_ResponderWrite64   CPU per packet on the responder: rx (parse, ICRC verify, checks,
//                         place 64 B) + poll (one coalesced ACK per burst)
//   BM_MessageRate/N      full loop (post, requester, responder, ACK, completer, poll_cq) with N
//                         QPs all active: messages per second must not fall with N
// The port is a pre-allocated buffer ring (no allocation, no copy between engines); the clock
// is a fixed fake (timers are armed but never fire).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "transport/engine.h"

namespace {

using namespace uroce;
using namespace uroce::transport;

struct BenchClock {
  uint64_t t = 1000;
  uint64_t now_ns() const noexcept { return t; }
};

class RingPort {
 public:
  static constexpr uint32_t kBufs = 8192, kCap = 256;  // 64 B payloads only
  RingPort() : mem_(new uint8_t[size_t{kBufs} * kCap]) {}
  TxBuf tx_alloc() noexcept {
    if (n_ == kBufs) return {};
    return TxBuf{mem_.get() + size_t{n_} * kCap, kCap, nullptr};
  }
  void tx_commit(TxBuf b, uint32_t len) noexcept {
    (void)b;
    len_[n_++] = len;
  }
  void tx_abort(TxBuf) noexcept {}
  template <class F>
  uint32_t drain(F &&f) {
    const uint32_t n = n_;
    for (uint32_t i = 0; i < n; ++i)
      f(mem_.get() + size_t{i} * kCap, len_[i]);
    n_ = 0;
    return n;
  }
  uint32_t pending() const { return n_; }

 private:
  std::unique_ptr<uint8_t[]> mem_;
  uint32_t len_[kBufs];
  uint32_t n_ = 0;
};

using Eng = Engine<RingPort, BenchClock>;

struct Pair {
  RingPort pa, pb;
  BenchClock clk;
  std::unique_ptr<Eng> a, b;
  std::vector<uint8_t> ma, mb;
  uint32_t ka = 0, kb = 0, cqa = 0, cqb = 0;
  std::vector<uint32_t> qa, qb;

  explicit Pair(uint32_t nqp, uint32_t sq_depth) : ma(1 << 16), mb(1 << 16) {
    EngineConfig c;
    c.max_qp = nqp + 1;
    c.max_inflight_psn = 1024;
    a = std::make_unique<Eng>(pa, clk, c);
    b = std::make_unique<Eng>(pb, clk, c);
    const uint32_t pda = a->create_pd(), pdb = b->create_pd();
    uint32_t r;
    a->reg_mr(pda, ma.data(), 0x1000, ma.size(), 15, &ka, &r);
    b->reg_mr(pdb, mb.data(), 0x1000, mb.size(), 15, &kb, &r);
    cqa = a->create_cq(1 << 16);
    cqb = b->create_cq(1 << 16);
    const uint8_t maca[6] = {2, 0, 0, 0, 0, 1}, macb[6] = {2, 0, 0, 0, 0, 2};
    for (uint32_t i = 0; i < nqp; ++i) {
      QpInitAttr ia;
      ia.cap = QpCap{sq_depth, 4, 1, 1, 0};
      ia.pd = pda;
      ia.send_cq = ia.recv_cq = cqa;
      const uint32_t x = a->create_qp(ia);
      ia.pd = pdb;
      ia.send_cq = ia.recv_cq = cqb;
      const uint32_t y = b->create_qp(ia);
      connect(*a, x, y, maca, macb, 1, 2);
      connect(*b, y, x, macb, maca, 2, 1);
      qa.push_back(x);
      qb.push_back(y);
    }
  }
  static void connect(Eng &e, uint32_t q, uint32_t peer, const uint8_t *s, const uint8_t *d,
                      uint8_t si, uint8_t di) {
    QpAttr at;
    at.qp_state = QpState::kInit;
    at.qp_access_flags = 15;
    e.modify_qp(q, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags);
    at.qp_state = QpState::kRtr;
    std::memcpy(at.ah.smac, s, 6);
    std::memcpy(at.ah.dmac, d, 6);
    at.ah.sgid = wire::Gid::from_ipv4(10, 0, 0, si);
    at.ah.dgid = wire::Gid::from_ipv4(10, 0, 0, di);
    at.dest_qp_num = peer;
    at.max_dest_rd_atomic = 4;
    e.modify_qp(q, at,
                kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
                    kQpMinRnrTimer);
    at.qp_state = QpState::kRts;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 4;
    e.modify_qp(q, at,
                kQpState | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic);
  }
  SendWr write64(uint64_t id, bool signaled) const {
    SendWr w;
    w.wr_id = id;
    w.opcode = WrOpcode::kRdmaWrite;
    w.send_flags = signaled ? uint32_t{kSendSignaled} : 0u;
    w.num_sge = 1;
    w.sg_list[0] = Sge{0x1000, 64, ka};
    w.remote_addr = 0x1000 + 128;
    w.rkey = kb;
    return w;
  }
  // b receives what a sent, a receives b's ACKs.
  void a_to_b() {
    pa.drain([&](const uint8_t *f, uint32_t l) { b->rx(f, l); });
  }
  void b_to_a() {
    pb.drain([&](const uint8_t *f, uint32_t l) { a->rx(f, l); });
  }
};

constexpr uint32_t kBatch = 256;

void BM_RequesterWrite64(benchmark::State &st) {
  Pair p(1, 1024);
  Wc wc[64];
  uint64_t id = 0;
  for (auto _ : st) {
    for (uint32_t i = 0; i < kBatch; ++i)
      p.a->post_send(p.qa[0], p.write64(id++, i == kBatch - 1));
    const auto t0 = std::chrono::steady_clock::now();
    uint32_t sent = 0;
    while (sent < kBatch)
      sent += p.a->poll();
    const auto t1 = std::chrono::steady_clock::now();
    st.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    p.a_to_b();
    p.b->poll();
    p.b_to_a();
    while (p.a->poll_cq(p.cqa, wc, 64)) {
    }
  }
  st.SetItemsProcessed(st.iterations() * kBatch);
  st.counters["ns/pkt"] =
      benchmark::Counter(static_cast<double>(st.iterations() * kBatch),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RequesterWrite64)->UseManualTime();

void BM_ResponderWrite64(benchmark::State &st) {
  Pair p(1, 1024);
  Wc wc[64];
  uint64_t id = 0;
  for (auto _ : st) {
    for (uint32_t i = 0; i < kBatch; ++i)
      p.a->post_send(p.qa[0], p.write64(id++, i == kBatch - 1));
    while (p.a->poll()) {
    }
    const auto t0 = std::chrono::steady_clock::now();
    p.a_to_b();   // rx: parse + ICRC + checks + place
    p.b->poll();  // one coalesced ACK
    const auto t1 = std::chrono::steady_clock::now();
    st.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    p.b_to_a();
    while (p.a->poll_cq(p.cqa, wc, 64)) {
    }
  }
  st.SetItemsProcessed(st.iterations() * kBatch);
  st.counters["ns/pkt"] =
      benchmark::Counter(static_cast<double>(st.iterations() * kBatch),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ResponderWrite64)->UseManualTime();

// N QPs, each with one 64 B WRITE in flight per round: post on every QP, then run the engines
// until every message is acknowledged. Items = messages.
void BM_MessageRate(benchmark::State &st) {
  const uint32_t n = static_cast<uint32_t>(st.range(0));
  Pair p(n, n < kBatch ? kBatch / n : 1);
  Wc wc[256];
  uint64_t id = 0, done = 0;
  const uint32_t per_round = n < kBatch ? kBatch / n : 1;
  for (auto _ : st) {
    uint64_t want = 0;
    for (uint32_t r = 0; r < per_round; ++r)
      for (uint32_t i = 0; i < n; ++i)
        if (p.a->post_send(p.qa[i], p.write64(id++, true)) == 0) ++want;
    uint64_t got = 0;
    while (got < want) {
      p.a->poll();
      p.a_to_b();
      p.b->poll();
      p.b_to_a();
      uint32_t k;
      while ((k = p.a->poll_cq(p.cqa, wc, 256)) > 0)
        got += k;
    }
    done += got;
  }
  st.SetItemsProcessed(static_cast<int64_t>(done));
}
BENCHMARK(BM_MessageRate)->Arg(1)->Arg(100)->Arg(10000);

}  // namespace

BENCHMARK_MAIN();
