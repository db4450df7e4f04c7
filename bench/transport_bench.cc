// SPDX-License-Identifier: BSD-3-Clause
// Transport engine microbenchmarks (results, commands and the machine in doc/perf.md).
//
// Timing: every per-packet figure is the *thread CPU time* (CLOCK_THREAD_CPUTIME_ID) of the
// measured part only, reported as manual time, over batches of kBatch packets (one clock pair
// per batch: its ~0.1-0.3 us is < 1 % of a batch). Wall time is not used: on a shared VM it
// includes time the thread was not running. Run with --benchmark_repetitions and take medians.
//
//   BM_RequesterWrite64/ring  requester CPU per packet: 64 B RDMA WRITE WQE -> frame with ICRC,
//                             through Engine::poll into the ring port ("the fake link": a
//                             pre-allocated buffer ring, no copy, no allocation)
//   BM_RequesterWrite64/null  the same into a port that reuses one buffer and discards the frame:
//                             the engine's share alone (ACKs are fed back, untimed)
//   BM_ResponderWrite64       responder CPU per packet: rx (parse, ICRC verify, checks, place
//                             64 B) of a batch + the poll that sends its one coalesced ACK
//   BM_ResponderWrite64Tsc/per_frame:N  the same with a real clock (rdtsc, scaled to ns as
//                             uroced's TscClock): per_frame:1 reads it for every frame
//                             (Engine::rx(frame, len): uroced before commit cb0d76a),
//                             per_frame:0 once per burst of 32 (Engine::rx(frame, len, now):
//                             uroced now); one rx call per frame, no prefetch, as uroced
//   BM_WireBuildIcrc64        same-run baseline: lib/wire build_frame (headers + 64 B payload
//                             copy + ICRC) of the same frame, into a reused buffer
//   BM_WireParseVerify64      same-run baseline: lib/wire parse_frame + ICRC verify of the
//                             frames the requester produced
//   BM_RequesterWrite64Paced/pace:M  the /null case with the fake clock advanced 1024 ns before
//                             each poll (one wheel tick), so that a pacer refills: M = 0
//                             unpaced; 1 a 20 Gb/s IBV_QP_RATE_LIMIT; 2 DCQCN on and the QP
//                             throttled to 20 Gb/s by a CNP (rate_to_set_on_first_cnp; the byte
//                             counter runs); 3 DCQCN on, the QP unthrottled. The QP sends at most
//                             tx_budget (16) frames of 128 paced bytes per poll, 16 Gb/s of
//                             fake time: the pacer runs on every frame and never refuses one
//                             (polls/batch stays kBatch / 16 = 64; a refusal would raise it).
//   BM_MessageRate/N          full loop (post, requester, responder, ACK, completer, poll_cq)
//                             with N QPs all active, one 64 B WRITE per QP per round (N < 256:
//                             256/N per QP); items = messages, CPU time. acks/msg shows how much
//                             ACK coalescing the load allows (1 QP: many messages per ACK).
// Frames reach the other engine through Engine::rx_burst, 32 at a time (as from a DPDK rx
// burst). The clock is a fixed fake: retransmit timers are armed but never fire.
#include <benchmark/benchmark.h>
#include <time.h>
#include <x86intrin.h>

#include <chrono>
#include <thread>

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

// rdtsc scaled to ns with a 32.32 factor calibrated once against steady_clock (as
// port::TscClock, which needs DPDK): the cost of a real clock read per call.
struct TscBenchClock {
  uint64_t mult;
  TscBenchClock() {
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t c0 = __rdtsc();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint64_t c1 = __rdtsc();
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    mult = (static_cast<uint64_t>(ns) << 32) / (c1 - c0);
  }
  uint64_t now_ns() const noexcept {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(__rdtsc()) * mult) >> 32);
  }
};

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

constexpr uint32_t kBatch = 1024;

class RingPort {
 public:
  static constexpr uint32_t kBufs = 16384, kCap = 256;  // 64 B payloads only
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
  // Hands every pending frame to e.rx_burst in bursts of up to kBurst (as a DPDK rx loop).
  template <class E>
  uint32_t drain_to(E &e) {
    constexpr uint32_t kBurst = 32;
    const uint8_t *f[kBurst];
    const uint32_t n = n_;
    for (uint32_t i = 0; i < n; i += kBurst) {
      const uint32_t k = n - i < kBurst ? n - i : kBurst;
      for (uint32_t j = 0; j < k; ++j)
        f[j] = mem_.get() + size_t{i + j} * kCap;
      e.rx_burst(f, len_ + i, k);
    }
    n_ = 0;
    return n;
  }
  // As uroced's RX loop hands frames to the engine (one Engine::rx per frame, no prefetch):
  // per_frame, Engine::rx(frame, len), which reads the engine's clock for every frame; else
  // Engine::rx(frame, len, now) with the clock read once per burst of 32.
  template <class E, class C>
  uint32_t drain_to_rx(E &e, const C &clk, bool per_frame) {
    constexpr uint32_t kBurst = 32;
    const uint32_t n = n_;
    for (uint32_t i = 0; i < n; i += kBurst) {
      const uint32_t k = n - i < kBurst ? n - i : kBurst;
      if (per_frame) {
        for (uint32_t j = i; j < i + k; ++j)
          e.rx(mem_.get() + size_t{j} * kCap, len_[j]);
      } else {
        const uint64_t now = clk.now_ns();
        for (uint32_t j = i; j < i + k; ++j)
          e.rx(mem_.get() + size_t{j} * kCap, len_[j], now);
      }
    }
    n_ = 0;
    return n;
  }
  uint32_t pending() const { return n_; }

 private:
  std::unique_ptr<uint8_t[]> mem_;
  uint32_t len_[kBufs];
  uint32_t n_ = 0;
};

// One reused buffer; committed frames are counted and dropped.
class NullPort {
 public:
  TxBuf tx_alloc() noexcept { return TxBuf{buf_, sizeof buf_, nullptr}; }
  void tx_commit(TxBuf, uint32_t) noexcept { ++n_; }
  void tx_abort(TxBuf) noexcept {}
  uint64_t frames() const { return n_; }

 private:
  alignas(64) uint8_t buf_[256];
  uint64_t n_ = 0;
};

template <class PortA, class Clk = BenchClock>
struct Pair {
  using EngA = Engine<PortA, Clk>;
  using EngB = Engine<RingPort, Clk>;
  PortA pa;
  RingPort pb;
  Clk clk;
  std::unique_ptr<EngA> a;
  std::unique_ptr<EngB> b;
  std::vector<uint8_t> ma, mb;
  uint32_t ka = 0, kb = 0, cqa = 0, cqb = 0;
  std::vector<uint32_t> qa, qb;
  static constexpr uint8_t kMacA[6] = {2, 0, 0, 0, 0, 1}, kMacB[6] = {2, 0, 0, 0, 0, 2};

  explicit Pair(uint32_t nqp, uint32_t sq_depth, const DcqcnParams *dcqcn = nullptr)
      : ma(1 << 16), mb(1 << 16) {
    EngineConfig c;
    c.max_qp = nqp + 1;
    c.max_inflight_psn = kBatch;
    c.dcqcn = dcqcn;
    a = std::make_unique<EngA>(pa, clk, c);
    b = std::make_unique<EngB>(pb, clk, c);
    const uint32_t pda = a->create_pd(), pdb = b->create_pd();
    uint32_t r;
    a->reg_mr(pda, ma.data(), 0x1000, ma.size(), 15, &ka, &r);
    b->reg_mr(pdb, mb.data(), 0x1000, mb.size(), 15, &kb, &r);
    cqa = a->create_cq(1 << 16);
    cqb = b->create_cq(1 << 16);
    for (uint32_t i = 0; i < nqp; ++i) {
      QpInitAttr ia;
      ia.cap = QpCap{sq_depth, 4, 1, 1, 0};
      ia.pd = pda;
      ia.send_cq = ia.recv_cq = cqa;
      const uint32_t x = a->create_qp(ia);
      ia.pd = pdb;
      ia.send_cq = ia.recv_cq = cqb;
      const uint32_t y = b->create_qp(ia);
      connect(*a, x, y, kMacA, kMacB, 1, 2);
      connect(*b, y, x, kMacB, kMacA, 2, 1);
      qa.push_back(x);
      qb.push_back(y);
    }
  }
  template <class E>
  static void connect(E &e, uint32_t q, uint32_t peer, const uint8_t *s, const uint8_t *d,
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
  // b receives what a sent (ring port only), a receives b's ACKs.
  void a_to_b() { pa.drain_to(*b); }
  void b_to_a() { pb.drain_to(*a); }
  void post_batch(uint64_t *id) {
    for (uint32_t i = 0; i < kBatch; ++i)
      a->post_send(qa[0], write64((*id)++, i == kBatch - 1));
  }
  void reap() {
    Wc wc[64];
    while (a->poll_cq(cqa, wc, 64)) {
    }
  }
};

void set_ns_per_pkt(benchmark::State &st) {
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations()) * kBatch);
  st.counters["ns/pkt"] =
      benchmark::Counter(static_cast<double>(st.iterations() * kBatch),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// Arg 0: ring port (the fake link), 1: null port (the engine alone).
// The path of b's frames back to a, for the synthetic responses below.
template <class P>
wire::PathInfo path_b_to_a() {
  wire::PathInfo back;
  std::memcpy(back.smac, P::kMacB, 6);
  std::memcpy(back.dmac, P::kMacA, 6);
  back.sgid = wire::Gid::from_ipv4(10, 0, 0, 2);
  back.dgid = wire::Gid::from_ipv4(10, 0, 0, 1);
  return back;
}

// a receives b's cumulative ACK of every PSN before `psn` (built with lib/wire, untimed).
template <class P>
void rx_cumulative_ack(P &p, const wire::PathInfo &back, uint32_t psn, uint32_t msn) {
  uint8_t frame[128];
  wire::PacketDesc d;
  d.path = &back;
  d.f.opcode = wire::op::kRcAck;
  d.f.dest_qp = p.qa[0];
  d.f.psn = (psn - 1) & 0xFFFFFF;
  d.f.syndrome = aeth::ack(aeth::kCreditsUnlimited);
  d.f.msn = msn;
  const wire::BuildResult r = wire::build_frame(frame, sizeof frame, d, nullptr);
  p.a->rx(frame, r.frame_len);
}

void BM_RequesterWrite64(benchmark::State &st) {
  if (st.range(0) == 0) {
    Pair<RingPort> p(1, kBatch);
    uint64_t id = 0;
    for (auto _ : st) {
      p.post_batch(&id);
      const double t0 = thread_cpu_s();
      uint32_t sent = 0;
      while (sent < kBatch)
        sent += p.a->poll();
      st.SetIterationTime(thread_cpu_s() - t0);
      p.a_to_b();
      p.b->poll();
      p.b_to_a();
      p.reap();
    }
  } else {
    // The frames go nowhere: b never sees them; a gets a synthetic cumulative ACK of the batch
    // (built with lib/wire, untimed) so that its window and SQ drain as in the ring case.
    Pair<NullPort> p(1, kBatch);
    const wire::PathInfo back = path_b_to_a<Pair<NullPort>>();
    uint64_t id = 0;
    uint32_t psn = 0, msn = 0;
    for (auto _ : st) {
      p.post_batch(&id);
      const double t0 = thread_cpu_s();
      uint32_t sent = 0;
      while (sent < kBatch)
        sent += p.a->poll();
      st.SetIterationTime(thread_cpu_s() - t0);
      psn = (psn + kBatch) & 0xFFFFFF;
      msn = (msn + kBatch) & 0xFFFFFF;
      rx_cumulative_ack(p, back, psn, msn);
      p.reap();
    }
  }
  set_ns_per_pkt(st);
}
BENCHMARK(BM_RequesterWrite64)->ArgName("null")->Arg(0)->Arg(1)->UseManualTime();

// DCQCN for BM_RequesterWrite64Paced: the first CNP sets 20 Gb/s; the timer (131 ms of fake
// time) hardly fires and the byte counter's increases only raise Rc (reported as rc_gbps).
DcqcnParams paced_bench_dcqcn() {
  DcqcnParams d;
  d.rate_to_set_on_first_cnp = 20000;
  d.rpg_time_reset = 131071;
  d.rpg_ai_rate = 1;
  d.rpg_hai_rate = 1;
  return d;
}

void BM_RequesterWrite64Paced(benchmark::State &st) {
  const int mode = static_cast<int>(st.range(0));
  static const DcqcnParams dcqcn = paced_bench_dcqcn();
  Pair<NullPort> p(1, kBatch, mode >= 2 ? &dcqcn : nullptr);
  const wire::PathInfo back = path_b_to_a<Pair<NullPort>>();
  if (mode == 1) {
    QpAttr at;
    at.rate_limit_kbps = 20'000'000;
    if (p.a->modify_qp(p.qa[0], at, kQpRateLimit) != 0) st.SkipWithError("rate limit refused");
  } else if (mode == 2) {
    uint8_t frame[128];
    wire::PacketDesc d;
    d.path = &back;
    d.f.opcode = wire::op::kCnp;
    d.f.becn = true;
    d.f.dest_qp = p.qa[0];
    const wire::BuildResult r = wire::build_frame(frame, sizeof frame, d, nullptr);
    p.a->rx(frame, r.frame_len);
    const DcqcnRp *rp = p.a->qp_rp(p.qa[0]);
    if (rp == nullptr || !rp->throttled()) st.SkipWithError("the CNP did not throttle the QP");
  }
  uint64_t id = 0, polls = 0, batches = 0;
  uint32_t psn = 0, msn = 0;
  for (auto _ : st) {
    p.post_batch(&id);
    const double t0 = thread_cpu_s();
    uint32_t sent = 0;
    while (sent < kBatch) {
      p.clk.t += 1024;
      sent += p.a->poll();
      ++polls;
    }
    st.SetIterationTime(thread_cpu_s() - t0);
    ++batches;
    psn = (psn + kBatch) & 0xFFFFFF;
    msn = (msn + kBatch) & 0xFFFFFF;
    rx_cumulative_ack(p, back, psn, msn);
    p.reap();
  }
  set_ns_per_pkt(st);
  st.counters["polls/batch"] = static_cast<double>(polls) / static_cast<double>(batches);
  if (const DcqcnRp *rp = p.a->qp_rp(p.qa[0]); rp != nullptr && mode >= 2)
    st.counters["rc_gbps"] = rp->rate_mbps() / 1000;
}
BENCHMARK(BM_RequesterWrite64Paced)->ArgName("pace")->DenseRange(0, 3)->UseManualTime();

void BM_ResponderWrite64(benchmark::State &st) {
  Pair<RingPort> p(1, kBatch);
  uint64_t id = 0;
  for (auto _ : st) {
    p.post_batch(&id);
    while (p.a->poll()) {
    }
    const double t0 = thread_cpu_s();
    p.a_to_b();   // rx: parse + ICRC + checks + place
    p.b->poll();  // one coalesced ACK
    st.SetIterationTime(thread_cpu_s() - t0);
    p.b_to_a();
    p.reap();
  }
  set_ns_per_pkt(st);
}
BENCHMARK(BM_ResponderWrite64)->UseManualTime();

void BM_ResponderWrite64Tsc(benchmark::State &st) {
  Pair<RingPort, TscBenchClock> p(1, kBatch);
  const bool per_frame = st.range(0) != 0;
  uint64_t id = 0;
  for (auto _ : st) {
    p.post_batch(&id);
    while (p.a->poll()) {
    }
    const double t0 = thread_cpu_s();
    p.pa.drain_to_rx(*p.b, p.clk, per_frame);
    p.b->poll();
    st.SetIterationTime(thread_cpu_s() - t0);
    p.b_to_a();
    p.reap();
  }
  set_ns_per_pkt(st);
}
BENCHMARK(BM_ResponderWrite64Tsc)->ArgName("per_frame")->Arg(0)->Arg(1)->UseManualTime();

// The requester's frame of a 64 B RDMA WRITE ONLY, as a PacketDesc (the same fields the engine
// fills: path, DSCP 0, TTL 64, UDP source port of QPN 0x11, AckReq, RETH).
struct WireFrame {
  wire::PathInfo path;
  wire::PacketDesc d;
  uint8_t payload[64] = {};
  WireFrame() {
    std::memcpy(path.smac, Pair<RingPort>::kMacA, 6);
    std::memcpy(path.dmac, Pair<RingPort>::kMacB, 6);
    path.sgid = wire::Gid::from_ipv4(10, 0, 0, 1);
    path.dgid = wire::Gid::from_ipv4(10, 0, 0, 2);
    d.path = &path;
    d.payload_len = 64;
    d.f.opcode = wire::op::kRcWriteOnly;
    d.f.dest_qp = 0x11;
    d.f.ack_req = true;
    d.f.va = 0x1080;
    d.f.rkey = 0x100;
    d.f.dma_len = 64;
  }
  void make_ack() {
    d.payload_len = 0;
    d.f.opcode = wire::op::kRcAck;
    d.f.ack_req = false;
    d.f.syndrome = aeth::ack(aeth::kCreditsUnlimited);
  }
};

// Arg 1: the ACK the responder sends instead (AETH, no payload).
void BM_WireBuildIcrc64(benchmark::State &st) {
  WireFrame w;
  if (st.range(0) == 1) w.make_ack();
  alignas(64) uint8_t buf[256];
  uint32_t psn = 0;
  for (auto _ : st) {
    const double t0 = thread_cpu_s();
    for (uint32_t i = 0; i < kBatch; ++i) {
      w.d.f.psn = psn++ & 0xFFFFFF;
      ++w.d.ip_id;
      benchmark::DoNotOptimize(wire::build_frame(buf, sizeof buf, w.d, w.payload));
      benchmark::ClobberMemory();
    }
    st.SetIterationTime(thread_cpu_s() - t0);
  }
  set_ns_per_pkt(st);
}
BENCHMARK(BM_WireBuildIcrc64)->ArgName("ack")->Arg(0)->Arg(1)->UseManualTime();

// Arg 1: ACK frames (built by lib/wire, PSN varying) instead.
void BM_WireParseVerify64(benchmark::State &st) {
  std::vector<std::vector<uint8_t>> frames;
  if (st.range(0) == 0) {
    // The frames the requester produced (ring port), parsed in place.
    Pair<RingPort> p(1, kBatch);
    uint64_t id = 0;
    p.post_batch(&id);
    while (p.a->poll()) {
    }
    p.pa.drain([&](const uint8_t *f, uint32_t l) { frames.emplace_back(f, f + l); });
  } else {
    WireFrame w;
    w.make_ack();
    uint8_t buf[256];
    for (uint32_t i = 0; i < kBatch; ++i) {
      w.d.f.psn = i;
      w.d.f.msn = i;
      const wire::BuildResult r = wire::build_frame(buf, sizeof buf, w.d, nullptr);
      frames.emplace_back(buf, buf + r.frame_len);
    }
  }
  wire::ParsedPacket pp;
  for (auto _ : st) {
    const double t0 = thread_cpu_s();
    for (const auto &f : frames) {
      benchmark::DoNotOptimize(wire::parse_frame(f.data(), f.size(), &pp));
      benchmark::ClobberMemory();
    }
    st.SetIterationTime(thread_cpu_s() - t0);
  }
  set_ns_per_pkt(st);
}
BENCHMARK(BM_WireParseVerify64)->ArgName("ack")->Arg(0)->Arg(1)->UseManualTime();

// N QPs, each with one 64 B WRITE in flight per round: post on every QP, then run the engines
// until every message is acknowledged. Items = messages.
// per_qp:0 = 256 / N messages per QP per round (the benchmark; at 10,000 QPs one message,
// and so one ACK, per QP). per_qp:16 = 16 messages per QP per round at every N: each QP's 16
// (= tx_budget) messages share one ACK at every N, so that only the QP count varies.
void BM_MessageRate(benchmark::State &st) {
  const uint32_t n = static_cast<uint32_t>(st.range(0));
  constexpr uint32_t kRound = 256;
  const uint32_t per_round =
      st.range(1) == 0 ? (n < kRound ? kRound / n : 1) : static_cast<uint32_t>(st.range(1));
  Pair<RingPort> p(n, per_round);
  Wc wc[256];
  uint64_t id = 0, done = 0;
  const uint64_t acks0 = p.b->counters().tx_pkts;
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
  st.counters["acks/msg"] =
      static_cast<double>(p.b->counters().tx_pkts - acks0) / static_cast<double>(done);
  st.counters["ns/msg"] = benchmark::Counter(
      static_cast<double>(done), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_MessageRate)
    ->ArgNames({"qps", "per_qp"})
    ->Args({1, 0})
    ->Args({100, 0})
    ->Args({10000, 0})
    ->Args({1, 16})
    ->Args({100, 16})
    ->Args({10000, 16});

}  // namespace

BENCHMARK_MAIN();
