// SPDX-License-Identifier: BSD-3-Clause
// Counters: the bridge's (per worker, summed) and the kStats snapshot served page by page.
#include "daemon/objects.h"

#include <cerrno>
#include <cstdio>
#include <string>

namespace uroce::daemon {

namespace {

void add_stat(std::vector<ctl::StatEntry> &v, const std::string &name, uint64_t value) {
  ctl::StatEntry e{};
  std::snprintf(e.name, sizeof e.name, "%s", name.c_str());
  e.value = value;
  v.push_back(e);
}

constexpr const char *kDropNames[] = {"parse",     "no_qp",    "qp_state",     "opcode",
                                      "address",   "pkey",     "qkey",         "sequence",
                                      "duplicate", "resource", "bad_response", "length"};
static_assert(sizeof(kDropNames) / sizeof(kDropNames[0]) ==
              static_cast<size_t>(transport::DropReason::kCount));

}  // namespace

void Daemon::snapshot_stats() {
  std::vector<ctl::StatEntry> v;
  size_t pds = 0, mrs = 0, cqs = 0, qps = 0, srqs = 0, ahs = 0;
  for (auto &kv : sessions_) {
    const Session &s = *kv.second;
    pds += s.pds.size();
    mrs += s.mrs.size();
    cqs += s.cqs.size();
    qps += s.qps.size();
    srqs += s.srqs.size();
    ahs += s.ahs.size();
  }
  add_stat(v, "daemon.sessions", sessions_.size());
  add_stat(v, "daemon.pds", pds);
  add_stat(v, "daemon.mrs", mrs);
  add_stat(v, "daemon.cqs", cqs);
  add_stat(v, "daemon.qps", qps);
  add_stat(v, "daemon.srqs", srqs);
  add_stat(v, "daemon.ahs", ahs);
  const BridgeCounters ctr = counters();
  add_stat(v, "daemon.workers", w_.size());
  add_stat(v, "daemon.sessions_opened", ctr.sessions_opened);
  add_stat(v, "daemon.sessions_closed", ctr.sessions_closed);
  add_stat(v, "bridge.doorbells", ctr.doorbells);
  add_stat(v, "bridge.bad_doorbells", ctr.bad_doorbells);
  add_stat(v, "bridge.send_wqes", ctr.send_wqes);
  add_stat(v, "bridge.recv_wqes", ctr.recv_wqes);
  add_stat(v, "bridge.bad_wqes", ctr.bad_wqes);
  add_stat(v, "bridge.corrupt_rings", ctr.corrupt_rings);
  add_stat(v, "bridge.cqes_forwarded", ctr.cqes_forwarded);
  add_stat(v, "bridge.cq_events", ctr.cq_events);
  add_stat(v, "bridge.async_events", ctr.async_events);
  add_stat(v, "bridge.async_unrouted", ctr.async_unrouted);
  add_stat(v, "bridge.async_lost", ctr.async_lost);
  for (size_t i = 0; i < kQuotaKinds; ++i)
    add_stat(v, std::string("quota.refused.") + quota_name(static_cast<QuotaKind>(i)),
             quota_refused_[i]);
  // Every engine's counters, each copied on its own worker.
  transport::EngineCounters e;
  uint64_t active = 0;
  for (unsigned w = 0; w < w_.size(); ++w) {
    transport::EngineCounters x;
    BridgeCounters b;
    uint32_t act = 0;
    run_on(w, [&] {
      x = w_[w]->eng->counters();
      b = w_[w]->ctr;
      act = w_[w]->eng->active_qps();
    });
    e.rx_pkts += x.rx_pkts;
    e.tx_pkts += x.tx_pkts;
    e.tx_backpressure += x.tx_backpressure;
    e.acks_coalesced += x.acks_coalesced;
    e.cq_overflows += x.cq_overflows;
    for (size_t i = 0; i < static_cast<size_t>(transport::DropReason::kCount); ++i)
      e.drops[i] += x.drops[i];
    for (size_t i = 0; i < static_cast<size_t>(wire::ParseError::kCount); ++i)
      e.parse_errors[i] += x.parse_errors[i];
    active += act;
    if (w_.size() > 1) {
      const std::string pre = "worker." + std::to_string(w) + ".";
      add_stat(v, pre + "qps", load_[w]);
      add_stat(v, pre + "rx_pkts", x.rx_pkts);
      add_stat(v, pre + "tx_pkts", x.tx_pkts);
      // Doorbells read from its own rings (worker 0 only ever sees its own QPs' and SRQs').
      add_stat(v, pre + "doorbells", b.doorbells);
      add_stat(v, pre + "bad_doorbells", b.bad_doorbells);
    }
  }
  add_stat(v, "engine.rx_pkts", e.rx_pkts);
  add_stat(v, "engine.tx_pkts", e.tx_pkts);
  add_stat(v, "engine.tx_backpressure", e.tx_backpressure);
  add_stat(v, "engine.acks_coalesced", e.acks_coalesced);
  add_stat(v, "engine.cq_overflows", e.cq_overflows);
  add_stat(v, "engine.active_qps", active);
  for (size_t i = 0; i < static_cast<size_t>(transport::DropReason::kCount); ++i)
    add_stat(v, std::string("engine.drop.") + kDropNames[i], e.drops[i]);
  for (size_t i = 0; i < static_cast<size_t>(wire::ParseError::kCount); ++i)
    if (e.parse_errors[i])
      add_stat(v,
               std::string("engine.parse_error.") +
                   wire::parse_error_str(static_cast<wire::ParseError>(i)),
               e.parse_errors[i]);
  if (stats_hook_) stats_hook_(v);
  for (auto &kv : sessions_) {
    const Session &s = *kv.second;
    const std::string pre = "session." + std::to_string(s.id) + ".";
    add_stat(v, pre + "pid", static_cast<uint64_t>(s.pid));
    add_stat(v, pre + "qps", s.qps.size());
    add_stat(v, pre + "mrs", s.mrs.size());
    add_stat(v, pre + "cqs", s.cqs.size());
    add_stat(v, pre + "mr_bytes", s.mr_bytes);
    add_stat(v, pre + "quota_refused", s.quota_refused);
    for (auto &qkv : s.qps) {
      const uint32_t qpn = qkv.first;
      const unsigned ow = qkv.second->worker;
      transport::QpCounters cc;
      const transport::QpCounters *c = nullptr;
      transport::QpAttr a;
      transport::QpInitAttr init;
      // The DCQCN reaction point (doc/congestion.md), when the port runs algorithm = dcqcn.
      bool rp_on = false, rp_throttled = false;
      double rp_rate = 0, rp_target = 0;
      transport::DcqcnRp::Stats rps;
      transport::QpDebug dbg;
      run_on(ow, [&] {
        const transport::QpCounters *x = w_[ow]->eng->qp_counters(qpn);
        if (x == nullptr) return;
        cc = *x;
        c = &cc;
        w_[ow]->eng->query_qp(qpn, &a, &init);
        w_[ow]->eng->qp_debug(qpn, &dbg);
        const transport::DcqcnRp *rp = w_[ow]->eng->qp_rp(qpn);
        if (rp && w_[ow]->eng->config().dcqcn) {
          rp_on = true;
          rp_throttled = rp->throttled();
          rp_rate = rp->rate_mbps();
          rp_target = rp->target_mbps();
          rps = rp->stats();
        }
      });
      if (c == nullptr) continue;
      const std::string q = "qp." + std::to_string(qpn) + ".";
      add_stat(v, q + "session", s.id);
      add_stat(v, q + "worker", ow);
      add_stat(v, q + "type", static_cast<uint64_t>(init.qp_type));
      add_stat(v, q + "state", static_cast<uint64_t>(a.qp_state));
      add_stat(v, q + "tx_pkts", c->tx_pkts);
      add_stat(v, q + "rx_pkts", c->rx_pkts);
      add_stat(v, q + "retransmits", c->retransmits);
      add_stat(v, q + "timeouts", c->timeouts);
      add_stat(v, q + "seq_naks_sent", c->seq_naks_sent);
      add_stat(v, q + "seq_naks_rcvd", c->seq_naks_rcvd);
      add_stat(v, q + "rnr_naks_sent", c->rnr_naks_sent);
      add_stat(v, q + "rnr_naks_rcvd", c->rnr_naks_rcvd);
      add_stat(v, q + "dup_requests", c->dup_requests);
      add_stat(v, q + "ce_seen", c->ce_seen);
      add_stat(v, q + "cnp_sent", c->cnp_sent);
      add_stat(v, q + "cnp_rcvd", c->cnp_rcvd);
      add_stat(v, q + "window_cuts", c->window_cuts);
      add_stat(v, q + "window_restores", c->window_restores);
      // The transport state (core.h QpDebug): what a stalled QP waits for.
      const std::pair<const char *, uint64_t> st[] = {{"req_psn", dbg.req_psn},
                                                      {"sent_psn", dbg.sent_psn},
                                                      {"comp_psn", dbg.comp_psn},
                                                      {"resp_psn", dbg.resp_psn},
                                                      {"resp_msn", dbg.resp_msn},
                                                      {"req_idx", dbg.req_idx},
                                                      {"sq_head", dbg.sq_head},
                                                      {"sq_tail", dbg.sq_tail},
                                                      {"rq_count", dbg.rq_count},
                                                      {"acks_queued", dbg.acks_queued},
                                                      {"window", dbg.window},
                                                      {"rd_atomic_out", dbg.rd_atomic_out},
                                                      {"retry_left", dbg.retry_left},
                                                      {"rnr_left", dbg.rnr_left},
                                                      {"peer_credits", dbg.peer_credits},
                                                      {"resp_prev_op", dbg.resp_prev_op},
                                                      {"active", dbg.active},
                                                      {"rnr_wait", dbg.rnr_wait},
                                                      {"retry_started", dbg.retry_started},
                                                      {"resp_in_msg", dbg.resp_in_msg},
                                                      {"resp_has_wqe", dbg.resp_has_wqe},
                                                      {"resp_nak_sent", dbg.resp_nak_sent},
                                                      {"retrans_armed", dbg.retrans_armed},
                                                      {"rnr_armed", dbg.rnr_armed},
                                                      {"sq_token", dbg.sq_token}};
      for (const auto &[k, val] : st)
        add_stat(v, q + k, val);
      if (rp_on) {
        add_stat(v, q + "cc_throttled", rp_throttled ? 1 : 0);
        add_stat(v, q + "cc_rate_mbps", static_cast<uint64_t>(rp_rate));
        add_stat(v, q + "cc_target_mbps", static_cast<uint64_t>(rp_target));
        add_stat(v, q + "cc_cnps_handled", rps.cnps);
        add_stat(v, q + "cc_rate_cuts", rps.cuts);
        add_stat(v, q + "cc_rate_increases", rps.increases);
        add_stat(v, q + "cc_releases", rps.releases);
      }
    }
  }
  stats_ = std::move(v);
  ++stats_gen_;
}

int Daemon::do_stats(Session &, ctl::Message &m, Reply &r) {
  ctl::StatsRequest q{};
  if (!m.payload_as(&q)) return -EINVAL;
  if (q.first == 0) snapshot_stats();
  if (q.first > stats_.size()) return -EINVAL;
  auto rep = std::make_unique<ctl::StatsReply>();
  std::memset(rep.get(), 0, sizeof(*rep));
  rep->total = static_cast<uint32_t>(stats_.size());
  rep->first = q.first;
  rep->generation = stats_gen_;
  const size_t n = std::min<size_t>(ctl::kStatsPerReply, stats_.size() - q.first);
  rep->count = static_cast<uint32_t>(n);
  for (size_t i = 0; i < n; ++i)
    rep->entries[i] = stats_[q.first + i];
  // Only the used part of the entry array travels.
  r.len = offsetof(ctl::StatsReply, entries) + n * sizeof(ctl::StatEntry);
  std::memcpy(r.buf, rep.get(), r.len);
  return 0;
}

transport::CcTotals Daemon::cc_totals() {
  transport::CcTotals t;
  for (unsigned w = 0; w < w_.size(); ++w) {
    transport::CcTotals x;
    run_on(w, [&] { x = w_[w]->eng->cc_totals(); });
    t.add(x);
  }
  return t;
}

void add_port_cc_stats(const std::string &port, const transport::CcTotals &t,
                       std::vector<ctl::StatEntry> &v) {
  const std::string pre = "port." + port + ".cc.";
  if (pre.size() + sizeof("throttled_rate_sum_mbps") > sizeof(ctl::StatEntry::name)) return;
  add_stat(v, pre + "ce_seen", t.ce_seen);
  add_stat(v, pre + "cnp_sent", t.cnp_sent);
  add_stat(v, pre + "cnp_rcvd", t.cnp_rcvd);
  add_stat(v, pre + "cnps_handled", t.cnps_handled);
  add_stat(v, pre + "rate_cuts", t.rate_cuts);
  add_stat(v, pre + "rate_increases", t.rate_increases);
  add_stat(v, pre + "releases", t.releases);
  add_stat(v, pre + "throttled_qps", t.throttled_qps);
  add_stat(v, pre + "throttled_rate_sum_mbps", static_cast<uint64_t>(t.throttled_rate_sum_mbps));
  add_stat(v, pre + "throttled_rate_min_mbps", static_cast<uint64_t>(t.throttled_rate_min_mbps));
}

BridgeCounters Daemon::counters(bool stopped) {
  BridgeCounters t = mctr_;
  for (unsigned w = 0; w < w_.size(); ++w) {
    BridgeCounters c;
    transport::EngineCounters e;
    const auto take = [&] {
      c = w_[w]->ctr;
      e = w_[w]->eng->counters();
    };
    if (stopped || w == 0)
      take();
    else
      run_on(w, take);
    t.doorbells += c.doorbells;
    t.bad_doorbells += c.bad_doorbells;
    t.send_wqes += e.sq_wqes;  // the engines copy the WQEs now
    t.recv_wqes += e.rq_wqes;
    t.bad_wqes += e.bad_wqes;
    t.corrupt_rings += c.corrupt_rings;
    t.cqes_forwarded += c.cqes_forwarded;
    t.cq_events += c.cq_events;
    t.async_events += c.async_events;
    t.async_unrouted += c.async_unrouted;
    t.async_lost += c.async_lost;
  }
  return t;
}

}  // namespace uroce::daemon
