// SPDX-License-Identifier: BSD-3-Clause
// DCQCN on a simulated switch fabric (issue 21): N senders, each behind a NIC uplink of the
// bottleneck's rate, write into one receiver through a switch egress queue with RED/ECN marking
// (Kmin / Kmax / Pmax) and a finite tail-drop buffer. Deterministic (seeded FakeLink, fake
// clock), simulated time only. Every flow is an RC QP that keeps WRITEs outstanding from its
// start to its stop time; every WR must complete with data intact. The assertions are on the
// fabric's measured state: bottleneck utilisation, Jain fairness, queue depth percentiles and
// drops, and the same scenarios without DCQCN show the drops and retransmissions.
// Results and the join / leave curves: doc/congestion.md, doc/perf.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "harness.h"
#include "wire/hdr.h"

namespace uroce::transport::testing {
namespace {

using test::Bottleneck;
using test::QueueStats;

constexpr double kGbps = 10;                  // bottleneck and uplinks
constexpr uint32_t kMsg = 64 * 1024;          // one WRITE
constexpr uint32_t kChunks = 4;               // a flow cycles over this many source chunks
constexpr uint32_t kOutstanding = 2;          // WRs a flow keeps posted
constexpr uint64_t kBinNs = 250'000;          // rate samples
constexpr uint32_t kSenderRing = 64;          // NIC TX ring depth of a sender (frames)
constexpr uint64_t kRecvVa = 0x100000000ull;  // receiver's MR

struct FlowSpec {
  uint64_t start_ns = 0;
  uint64_t stop_ns = UINT64_MAX;  // no new WR after this time
};

struct Scenario {
  size_t senders = 2;
  uint32_t qps_per_sender = 1;
  const DcqcnParams *dcqcn = nullptr;  // null: `none`
  uint64_t duration_ns = 10'000'000;
  uint64_t measure_from_ns = 5'000'000;  // utilisation, fairness, queue: [from, duration)
  Bottleneck bn;
  std::vector<FlowSpec> flows;  // empty: every flow runs the whole time
};

struct Result {
  double utilisation = 0;  // receiver-bound wire bytes / capacity over the window
  double jain = 0;         // over the flows active for the whole window
  uint64_t p99_queue = 0, max_queue = 0;
  double mark_frac = 0;  // CE-marked share of the arrivals in the window
  uint64_t drops = 0, marks = 0;
  uint64_t drops_before_window = 0;  // of `drops`, before the measurement window
  uint64_t retransmits = 0, cnps_rcvd = 0, cuts = 0;
  uint64_t ce_seen = 0, cnps_sent = 0;  // at the receiver
  uint64_t completed = 0, wr_errors = 0;
  bool data_ok = true;
  double min_rate_mbps = 0;               // lowest Rc of a throttled RP at a bin start
  std::vector<std::vector<double>> gbps;  // per flow, per kBinNs bin
  std::vector<std::vector<double>> rc;    // per flow, Rc (Mb/s) at each bin's start
  std::vector<uint64_t> queue_max;        // per bin, deepest queue a departure left
};

Bottleneck red(uint32_t kmin, uint32_t kmax, double pmax, uint32_t buffer) {
  Bottleneck b;
  b.bits_per_ns = kGbps;
  b.red_kmin_bytes = kmin;
  b.red_kmax_bytes = kmax;
  b.red_pmax = pmax;
  b.buffer_bytes = buffer;
  return b;
}

double jain(const std::vector<double> &x) {
  double s = 0, s2 = 0;
  for (double v : x) {
    s += v;
    s2 += v * v;
  }
  return x.empty() || s2 == 0 ? 0 : s * s / (static_cast<double>(x.size()) * s2);
}

struct Flow {
  size_t node = 0;
  uint32_t qpn = 0, peer_qpn = 0;
  Buf src;
  uint64_t dst_off = 0;
  FlowSpec spec;
  uint64_t posted = 0, completed = 0;
  uint64_t window_bytes = 0;
  std::vector<uint64_t> bin_bytes;
};

// UROCE_FABRIC_DCQCN="name=value,..." overrides DCQCN parameters of every DCQCN run (ConnectX
// names, as in [cc]): a tuning aid, off by default.
DcqcnParams with_overrides(const DcqcnParams &base) {
  DcqcnParams p = base;
  const char *env = std::getenv("UROCE_FABRIC_DCQCN");
  if (env == nullptr) return p;
  std::string all(env);
  size_t pos = 0;
  while (pos < all.size()) {
    const size_t end = std::min(all.find(',', pos), all.size());
    const std::string kv = all.substr(pos, end - pos);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos ||
        !set_dcqcn_param(&p, kv.substr(0, eq).c_str(),
                         static_cast<uint32_t>(std::strtoul(kv.c_str() + eq + 1, nullptr, 0))))
      ADD_FAILURE() << "UROCE_FABRIC_DCQCN: bad item " << kv;
    pos = end + 1;
  }
  return p;
}

// UROCE_FABRIC_TRACE=1: the run's summary, then per bin the queue's maximum (KB) and either each
// flow's wire rate (Gb/s; up to 8 flows) or, with more flows, the aggregate wire rate and the
// minimum / median / maximum over the flows of the wire rate and of Rc (Mb/s).
void print_trace(const Scenario &sc, const Result &r) {
  std::printf(
      "util %.3f jain %.4f p99q %llu maxq %llu drops %llu (%llu before the window) marks %llu "
      "rexmit %llu cnps %llu cuts %llu wrs %llu errs %llu minrc %.1f pmark %.4f ce_seen %llu "
      "cnp_sent %llu\n",
      r.utilisation, r.jain, static_cast<unsigned long long>(r.p99_queue),
      static_cast<unsigned long long>(r.max_queue), static_cast<unsigned long long>(r.drops),
      static_cast<unsigned long long>(r.drops_before_window),
      static_cast<unsigned long long>(r.marks), static_cast<unsigned long long>(r.retransmits),
      static_cast<unsigned long long>(r.cnps_rcvd), static_cast<unsigned long long>(r.cuts),
      static_cast<unsigned long long>(r.completed), static_cast<unsigned long long>(r.wr_errors),
      r.min_rate_mbps, r.mark_frac, static_cast<unsigned long long>(r.ce_seen),
      static_cast<unsigned long long>(r.cnps_sent));
  const size_t n_flows = r.gbps.size();
  auto mmm = [](std::vector<double> v, double scale) {
    std::sort(v.begin(), v.end());
    std::printf(" %7.1f %7.1f %7.1f", v.front() * scale, v[v.size() / 2] * scale, v.back() * scale);
  };
  for (size_t b = 0; b < r.queue_max.size(); ++b) {
    std::printf("%8.2f ms q %4llu KB", static_cast<double>(b * kBinNs) / 1e6,
                static_cast<unsigned long long>(r.queue_max[b] / 1000));
    if (n_flows <= 8) {
      for (size_t f = 0; f < n_flows; ++f)
        std::printf(" %6.2f", r.gbps[f][b]);
    } else {
      std::vector<double> wire, rc;
      double sum = 0;
      for (size_t f = 0; f < n_flows; ++f) {
        const FlowSpec fs = sc.flows.empty() ? FlowSpec{} : sc.flows[f];
        sum += r.gbps[f][b];
        if (fs.start_ns > b * kBinNs || fs.stop_ns <= b * kBinNs) continue;
        wire.push_back(r.gbps[f][b]);
        rc.push_back(r.rc[f][b]);
      }
      std::printf(" sum %6.2f Gb/s", sum);
      if (!wire.empty()) {
        std::printf(" wire Mb/s");
        mmm(wire, 1000);
        std::printf(" rc Mb/s");
        mmm(rc, 1);
      }
    }
    std::printf("\n");
  }
}

Result run(const Scenario &sc) {
  const DcqcnParams params = sc.dcqcn ? with_overrides(*sc.dcqcn) : DcqcnParams{};
  EngineConfig cfg;
  cfg.ecn = true;
  cfg.dcqcn = sc.dcqcn ? &params : nullptr;
  cfg.line_rate_mbps = kGbps * 1000;
  cfg.max_qp = 512;
  if (sc.dcqcn) cfg.cnp_interval_ns = uint64_t{params.min_time_between_cnps} * 1000;
  const size_t n_flows = sc.senders * sc.qps_per_sender;
  // Node 0 receives; nodes 1..N send. Every node is behind a NIC of the bottleneck's rate with
  // a TX ring of kSenderRing frames (the endpoint's pool: a frame holds its buffer until it
  // reached the switch).
  Net net(21, 1 + sc.senders, cfg, kSenderRing);
  for (size_t i = 1; i <= sc.senders; ++i)
    net.link.set_uplink(*net.node(i).ep, kGbps);
  net.link.set_uplink(*net.node(0).ep, kGbps);
  net.link.set_bottleneck(*net.node(0).ep, sc.bn);
  Buf dst = net.reg(0, n_flows * kChunks * kMsg, kAllAccess, kRecvVa);

  std::vector<Flow> flows(n_flows);
  RcParams rp;
  rp.timeout = 10;  // 4.2 ms
  for (size_t f = 0; f < n_flows; ++f) {
    Flow &fl = flows[f];
    fl.node = 1 + f % sc.senders;
    fl.src = net.reg(fl.node, kChunks * kMsg, kAllAccess, 0x10000000ull + f * 0x1000000ull);
    fill_pattern(fl.src.mem.data(), fl.src.mem.size(), static_cast<uint32_t>(f + 1));
    fl.dst_off = f * kChunks * kMsg;
    auto [qs, qr] = net.connect(fl.node, 0, rp);
    fl.qpn = qs;
    fl.peer_qpn = qr;
    if (!sc.flows.empty()) fl.spec = sc.flows.at(f);
  }
  // QPNs are random (doc/security.md): looked up, not indexed.
  std::unordered_map<uint32_t, int> flow_of_qpn;  // receiver QPN -> flow
  std::vector<std::unordered_map<uint32_t, int>> flow_of_sender_qpn(1 + sc.senders);
  for (size_t f = 0; f < n_flows; ++f) {
    EXPECT_TRUE(flow_of_qpn.emplace(flows[f].peer_qpn, static_cast<int>(f)).second);
    EXPECT_TRUE(
        flow_of_sender_qpn[flows[f].node].emplace(flows[f].qpn, static_cast<int>(f)).second);
  }
  const size_t n_bins = (sc.duration_ns + kBinNs - 1) / kBinNs;
  for (Flow &fl : flows)
    fl.bin_bytes.assign(n_bins, 0);

  Result r;
  r.queue_max.assign(n_bins, 0);
  r.rc.assign(n_flows, std::vector<double>(n_bins, 0));
  size_t sampled_bins = 0;  // bins whose start has had its Rc sample
  uint64_t window_bytes = 0;
  bool window_open = false;
  auto sink = [&](Endpoint &to, const uint8_t *frame, uint32_t len) {
    const uint64_t now = net.clock.now_ns();
    if (to.index() == 0 && len >= 14 + 20 + 8 + 12u) {
      const uint32_t qpn = wire::be::load32(frame + 14 + 20 + 8 + 4) & 0xFFFFFF;
      if (const auto it = flow_of_qpn.find(qpn); it != flow_of_qpn.end()) {
        Flow &fl = flows[static_cast<size_t>(it->second)];
        if (now / kBinNs < n_bins) fl.bin_bytes[now / kBinNs] += len;
        if (window_open) fl.window_bytes += len;
      }
      if (window_open) window_bytes += len;
      if (now / kBinNs < n_bins) {
        uint64_t &qm = r.queue_max[now / kBinNs];
        qm = std::max(qm, net.link.queue_bytes(*net.node(0).ep));
      }
    }
    static_cast<NodeT<PrivateQueues> *>(to.user)->eng->rx(frame, len);
  };
  auto post = [&](Flow &fl) {
    const uint32_t chunk = static_cast<uint32_t>(fl.posted % kChunks);
    SendWr w = make_wr(fl.posted, WrOpcode::kRdmaWrite, fl.src, uint64_t{chunk} * kMsg, kMsg);
    w.remote_addr = kRecvVa + fl.dst_off + uint64_t{chunk} * kMsg;
    w.rkey = dst.key;
    EXPECT_EQ(net.e(fl.node).post_send(fl.qpn, w), 0);
    ++fl.posted;
  };

  // Completions of the senders; a flow whose WR completed may post again.
  bool repost = true;
  auto reap = [&] {
    size_t n = 0;
    for (size_t i = 1; i <= sc.senders; ++i) {
      Wc wc[64];
      uint32_t k;
      while ((k = net.e(i).poll_cq(net.node(i).cq, wc, 64)) > 0) {
        for (uint32_t j = 0; j < k; ++j) {
          ++r.completed;
          if (wc[j].status != WcStatus::kSuccess) ++r.wr_errors;
          const auto it = flow_of_sender_qpn[i].find(wc[j].qp_num);
          if (it != flow_of_sender_qpn[i].end()) ++flows[static_cast<size_t>(it->second)].completed;
        }
        n += k;
      }
    }
    if (n) repost = true;
    return n;
  };
  uint64_t steps = 0, next_start = 0;
  while (net.clock.now_ns() < sc.duration_ns) {
    const uint64_t now = net.clock.now_ns();
    for (; sampled_bins <= now / kBinNs && sampled_bins < n_bins; ++sampled_bins) {
      for (size_t f = 0; f < n_flows && sc.dcqcn; ++f) {
        const DcqcnRp *rp_f = net.e(flows[f].node).qp_rp(flows[f].qpn);
        r.rc[f][sampled_bins] = rp_f->rate_mbps();
        if (rp_f->throttled() && (r.min_rate_mbps == 0 || rp_f->rate_mbps() < r.min_rate_mbps))
          r.min_rate_mbps = rp_f->rate_mbps();
      }
    }
    if (!window_open && now >= sc.measure_from_ns) {
      window_open = true;
      net.link.reset_queue_stats(*net.node(0).ep);
      r.drops_before_window = net.link.counters().dropped_queue;
    }
    if (repost || now >= next_start) {
      repost = false;
      next_start = UINT64_MAX;
      for (Flow &fl : flows) {
        if (fl.spec.start_ns > now) next_start = std::min(next_start, fl.spec.start_ns);
        while (now >= fl.spec.start_ns && now < fl.spec.stop_ns &&
               fl.posted - fl.completed < kOutstanding)
          post(fl);
      }
    }
    size_t moved = 0;
    for (auto &nd : net.nodes)
      moved += nd->eng->poll();
    moved += net.link.deliver(sink);
    moved += reap();
    if (++steps > 100'000'000) {
      ADD_FAILURE() << "step limit at t=" << now;
      break;
    }
    if (moved) continue;
    uint64_t next = std::min(net.link.next_delivery_ns(), next_start);
    for (auto &nd : net.nodes)
      next = std::min(next, nd->eng->next_timer_ns());
    if (!window_open) next = std::min(next, sc.measure_from_ns);
    for (const Flow &fl : flows)
      if (fl.spec.stop_ns > now) next = std::min(next, fl.spec.stop_ns);
    next = std::min(next, sc.duration_ns);
    net.clock.set(next > now ? next : now + 1);
  }
  const QueueStats qs = net.link.queue_stats(*net.node(0).ep);
  const double window_ns = static_cast<double>(sc.duration_ns - sc.measure_from_ns);
  r.utilisation = static_cast<double>(window_bytes) * 8 / (window_ns * kGbps);
  r.p99_queue = qs.percentile_bytes(0.99);
  r.max_queue = qs.max_bytes;
  r.mark_frac = qs.arrivals ? static_cast<double>(qs.marked) / static_cast<double>(qs.arrivals) : 0;
  r.drops = net.link.counters().dropped_queue;
  r.marks = net.link.counters().ce_marked;
  std::vector<double> shares;
  for (const Flow &fl : flows) {
    if (fl.spec.start_ns <= sc.measure_from_ns && fl.spec.stop_ns >= sc.duration_ns)
      shares.push_back(static_cast<double>(fl.window_bytes));
    const QpCounters *c = net.e(fl.node).qp_counters(fl.qpn);
    r.retransmits += c->retransmits;
    r.cnps_rcvd += c->cnp_rcvd;
    const QpCounters *rc_ = net.e(0).qp_counters(fl.peer_qpn);
    r.ce_seen += rc_->ce_seen;
    r.cnps_sent += rc_->cnp_sent;
    if (sc.dcqcn) r.cuts += net.e(fl.node).qp_rp(fl.qpn)->stats().cuts;
    std::vector<double> g;
    for (uint64_t b : fl.bin_bytes)
      g.push_back(static_cast<double>(b) * 8 / static_cast<double>(kBinNs));
    r.gbps.push_back(std::move(g));
  }
  r.jain = jain(shares);

  // Let every posted WR finish (no new ones), then compare each flow's last kChunks writes.
  for (Flow &fl : flows)
    fl.spec.stop_ns = 0;
  net.run_until(
      [&] {
        reap();
        for (const Flow &fl : flows)
          if (fl.completed < fl.posted) return false;
        return true;
      },
      50'000'000);
  for (const Flow &fl : flows) {
    if (fl.completed != fl.posted) r.data_ok = false;
    const uint64_t chunks = std::min<uint64_t>(fl.posted, kChunks);
    if (std::memcmp(fl.src.mem.data(), dst.mem.data() + fl.dst_off, chunks * kMsg) != 0)
      r.data_ok = false;
  }
  if (std::getenv("UROCE_FABRIC_TRACE")) print_trace(sc, r);
  return r;
}

const DcqcnParams kConnectX = dcqcn_connectx_defaults();
const DcqcnParams kPaper = dcqcn_paper_preset();
// The paper preset with ConnectX's increase steps (R_AI 5 Mb/s, R_HAI 50 Mb/s): DCQCN's queue
// grows with the number of flows (every flow adds R_AI per timer period), so many flows need
// smaller steps to stay below Kmax (doc/congestion.md, "Tuning").
DcqcnParams paper_small_steps() {
  DcqcnParams p = dcqcn_paper_preset();
  p.rpg_ai_rate = 5;
  p.rpg_hai_rate = 50;
  return p;
}
const DcqcnParams kPaperSmallSteps = paper_small_steps();

// Marking as in HPCC's DCQCN runs (Kmin 100 KB, Kmax 400 KB, Pmax 0.2 per 25 Gb/s) scaled to
// 10 Gb/s, and a 300 KB tail-drop buffer.
constexpr uint32_t kKmin = 40'000, kKmax = 160'000, kBuffer = 300'000;
Bottleneck fabric_queue() {
  return red(kKmin, kKmax, 0.2, kBuffer);
}

// Mean rate of flow f over [from, to) (whole bins).
double mean_gbps(const Result &r, size_t f, uint64_t from, uint64_t to) {
  double s = 0;
  size_t n = 0;
  for (uint64_t b = from / kBinNs; b < to / kBinNs && b < r.gbps[f].size(); ++b, ++n)
    s += r.gbps[f][b];
  return n ? s / static_cast<double>(n) : 0;
}

// What DCQCN must achieve on every scenario (issue 21).
void expect_controlled(const Result &r) {
  EXPECT_TRUE(r.data_ok);
  EXPECT_EQ(r.wr_errors, 0u);
  EXPECT_GT(r.completed, 0u);
  EXPECT_EQ(r.drops, 0u);
  EXPECT_EQ(r.retransmits, 0u);
  EXPECT_GE(r.utilisation, 0.90);
  EXPECT_GE(r.jain, 0.95);
  EXPECT_LT(r.p99_queue, kKmax);
  EXPECT_GT(r.marks, 0u);
  EXPECT_GT(r.cuts, 0u);
}

// Flows start one after another, `gap_ns` apart.
std::vector<FlowSpec> staggered(size_t n, uint64_t gap_ns) {
  std::vector<FlowSpec> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i].start_ns = i * gap_ns;
  return v;
}

TEST(DcqcnFabric, TwoSendersStartingTogether) {
  Scenario sc;
  sc.senders = 2;
  sc.dcqcn = &kPaper;
  sc.bn = fabric_queue();
  expect_controlled(run(sc));
}

TEST(DcqcnFabric, EightSendersJoiningOneByOne) {
  Scenario sc;
  sc.senders = 8;
  sc.dcqcn = &kPaper;
  sc.bn = fabric_queue();
  sc.flows = staggered(8, 250'000);
  sc.duration_ns = 14'000'000;
  sc.measure_from_ns = 8'000'000;
  expect_controlled(run(sc));
}

TEST(DcqcnFabric, ThirtyTwoSendersJoiningOneByOne) {
  Scenario sc;
  sc.senders = 32;
  sc.dcqcn = &kPaperSmallSteps;
  sc.bn = fabric_queue();
  sc.flows = staggered(32, 250'000);
  sc.duration_ns = 20'000'000;
  sc.measure_from_ns = 12'000'000;
  expect_controlled(run(sc));
}

// 256 QPs over 32 senders (8 each; QP i on sender 1 + i % 32), joining one QP at a time 250 us
// apart (the last at 63.75 ms), on the fabric's queue with Pmax 0.5, and DCQCN tuned for a
// fan-in of 256 (doc/congestion.md, "256 QPs over 32 senders": every value and why).
DcqcnParams fan_in_256() {
  DcqcnParams p = dcqcn_paper_preset();
  p.rpg_time_reset = 1000;  // T: one increase event per ms
  p.rpg_byte_reset = 0;     // the timer alone: F fast-recovery steps, one AI step, then HAI
  p.rpg_threshold = 1;      // F
  p.rpg_ai_rate = 1;        // Mb/s
  p.rpg_hai_rate = 3;       // Mb/s: the Rt of 256 flows rise by at most 0.77 Gb/s per ms
  p.dce_tcp_rtt = 1000;     // K: alpha follows the share of 1 ms periods with a CNP
  p.dce_tcp_g = 960;        // g = 1/16: alpha's time constant K / g = 16 ms
  return p;
}
const DcqcnParams kFanIn256 = fan_in_256();
constexpr double kPmaxManyQps = 0.5;
constexpr size_t kManyQpsSenders = 32, kManyQps = 256;
constexpr uint64_t kManyQpsJoinGap = 250'000;

Scenario many_qps(const DcqcnParams *p) {
  Scenario sc;
  sc.senders = kManyQpsSenders;
  sc.qps_per_sender = kManyQps / kManyQpsSenders;
  sc.dcqcn = p;
  sc.bn = red(kKmin, kKmax, kPmaxManyQps, kBuffer);
  sc.flows = staggered(kManyQps, kManyQpsJoinGap);
  return sc;
}

TEST(DcqcnFabric, ManyQpsJoiningOneByOne) {
  Scenario sc = many_qps(&kFanIn256);
  sc.duration_ns = 110'000'000;
  sc.measure_from_ns = 80'000'000;  // 16 ms after the last join
  expect_controlled(run(sc));
}

// The same 256 QPs without a reaction point, for the first 20 ms (80 QPs joined): the queue
// overflows, frames are dropped and go-back-N retransmits; the data still arrive intact. (The
// whole 110 ms is not run: go-back-N among hundreds of line-rate QPs costs minutes of CPU.)
TEST(DcqcnFabric, ManyQpsWithoutCcDropAndRetransmit) {
  Scenario sc = many_qps(nullptr);
  sc.duration_ns = 20'000'000;
  sc.measure_from_ns = 0;
  const Result r = run(sc);
  EXPECT_TRUE(r.data_ok);
  EXPECT_EQ(r.wr_errors, 0u);
  EXPECT_GT(r.drops, 0u);
  EXPECT_GT(r.retransmits, 0u);
  EXPECT_EQ(r.cuts, 0u);
  EXPECT_GT(r.max_queue, kKmax);
}

// Two flows; a third joins at 6 ms and stops posting at 14 ms. The rates move to the new fair
// share: C/3 each with three flows, C/2 each again after the third left.
TEST(DcqcnFabric, FlowJoinsAndLeaves) {
  Scenario sc;
  sc.senders = 3;
  sc.dcqcn = &kPaper;
  sc.bn = fabric_queue();
  sc.flows = {{0, UINT64_MAX}, {0, UINT64_MAX}, {6'000'000, 14'000'000}};
  sc.duration_ns = 22'000'000;
  sc.measure_from_ns = 0;
  const Result r = run(sc);
  EXPECT_TRUE(r.data_ok);
  EXPECT_EQ(r.drops, 0u);
  EXPECT_EQ(r.retransmits, 0u);
  struct Phase {
    uint64_t from, to;
    std::vector<size_t> flows;
  };
  // Each phase: its last 2 ms, i.e. `kConverge` after the join / leave.
  constexpr uint64_t kConverge = 6'000'000;
  for (const Phase &ph :
       {Phase{4'000'000, 6'000'000, {0, 1}}, Phase{6'000'000 + kConverge, 14'000'000, {0, 1, 2}},
        Phase{14'000'000 + kConverge, 22'000'000, {0, 1}}}) {
    std::vector<double> rates;
    double sum = 0;
    for (size_t f : ph.flows) {
      rates.push_back(mean_gbps(r, f, ph.from, ph.to));
      sum += rates.back();
    }
    EXPECT_GE(jain(rates), 0.95) << "phase from " << ph.from;
    EXPECT_GE(sum, 0.9 * kGbps) << "phase from " << ph.from;
  }
}

// The same fabric without a reaction point: the queue overflows, frames are dropped and
// go-back-N retransmits; the data still arrive intact.
TEST(DcqcnFabric, NoneDropsAndRetransmits) {
  for (size_t n : {8, 32}) {
    Scenario sc;
    sc.senders = n;
    sc.bn = fabric_queue();
    const Result r = run(sc);
    EXPECT_TRUE(r.data_ok) << n;
    EXPECT_GT(r.drops, 0u) << n;
    EXPECT_GT(r.retransmits, 0u) << n;
    EXPECT_EQ(r.cuts, 0u) << n;
    EXPECT_GT(r.max_queue, kKmax) << n;
  }
}

}  // namespace
}  // namespace uroce::transport::testing
