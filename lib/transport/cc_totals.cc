// SPDX-License-Identifier: BSD-3-Clause
// An engine's congestion-control totals (core.h CcTotals; uroce-stat port.P.cc.*): the ECN /
// CNP counters the roles keep in EngineCounters, the reaction points' stats of the live QPs plus
// those of every QP reset, errored or destroyed since (cc_stop retires them here), and the
// rates of the QPs throttled now. Read on the engine's thread; nothing on the data path.
#include "transport/core.h"

namespace uroce::transport {

template <class Q>
void EngineCoreT<Q>::cc_retire(const DcqcnRp::Stats &s) noexcept {
  cc_retired_.cnps += s.cnps;
  cc_retired_.cuts += s.cuts;
  cc_retired_.increases += s.increases;
  cc_retired_.releases += s.releases;
}

template <class Q>
CcTotals EngineCoreT<Q>::cc_totals() const noexcept {
  CcTotals t;
  t.ce_seen = ctr_.ce_seen;
  t.cnp_sent = ctr_.cnp_sent;
  t.cnp_rcvd = ctr_.cnp_rcvd;
  t.cnps_handled = cc_retired_.cnps;
  t.rate_cuts = cc_retired_.cuts;
  t.rate_increases = cc_retired_.increases;
  t.releases = cc_retired_.releases;
  for (uint32_t i = 0; i < cfg_.max_qp; ++i) {
    const Qp &q = qps_[i];
    if (!q.in_use) continue;
    const DcqcnRp::Stats &s = q.rp.stats();
    t.cnps_handled += s.cnps;
    t.rate_cuts += s.cuts;
    t.rate_increases += s.increases;
    t.releases += s.releases;
    if (!q.rp.throttled()) continue;
    const double r = q.rp.rate_mbps();
    if (t.throttled_qps == 0 || r < t.throttled_rate_min_mbps) t.throttled_rate_min_mbps = r;
    ++t.throttled_qps;
    t.throttled_rate_sum_mbps += r;
  }
  return t;
}

template void EngineCoreT<PrivateQueues>::cc_retire(const DcqcnRp::Stats &) noexcept;
template void EngineCoreT<RingQueues>::cc_retire(const DcqcnRp::Stats &) noexcept;
template CcTotals EngineCoreT<PrivateQueues>::cc_totals() const noexcept;
template CcTotals EngineCoreT<RingQueues>::cc_totals() const noexcept;

}  // namespace uroce::transport
