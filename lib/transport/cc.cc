// SPDX-License-Identifier: BSD-3-Clause
// The engine's DCQCN glue: a received CNP cuts the QP's rate (dcqcn.h), the QP's pacer
// (pacer.h) follows the rate, the RP's deadline and the pacer's wake-up are timers on the
// engine's wheel, and the requester charges each frame it sends. Only RC / UC QPs are throttled
// (a UD QP has no single peer). doc/congestion.md.
#include "transport/core.h"

namespace uroce::transport {

namespace {
constexpr uint32_t kPaceBurstFrames = 4;
}  // namespace

template <class Q>
void EngineCoreT<Q>::cc_init_qp(Qp &qp) noexcept {
  qp.cc_timer.qp_index = qp.pace_timer.qp_index = qp.index;
  qp.cc_timer.kind = kTimerCc;
  qp.pace_timer.kind = kTimerPace;
  qp.paced = false;
  qp.rate_limit_bps = 0;
  if (cfg_.dcqcn) qp.rp.init(cfg_.dcqcn, cfg_.line_rate_mbps);
}

template <class Q>
void EngineCoreT<Q>::cc_stop(Qp &qp) noexcept {
  wheel_.cancel(&qp.cc_timer);
  wheel_.cancel(&qp.pace_timer);
  qp.paced = false;
  qp.pacer.set_rate(0, 0, now_);
  if (cfg_.dcqcn) {
    cc_retire(qp.rp.stats());  // the engine's totals outlive the QP's RP (cc_totals.cc)
    qp.rp.init(cfg_.dcqcn, cfg_.line_rate_mbps);
  }
}

template <class Q>
void EngineCoreT<Q>::cc_apply(Qp &qp) noexcept {
  // The pacer runs at the lower of the RP's rate (when throttled) and the QP's rate limit.
  uint64_t bps = 0;
  if (qp.rp.throttled()) {
    bps = static_cast<uint64_t>(qp.rp.rate_mbps() * 1e6);
    if (bps == 0) bps = 1;
  }
  if (qp.rate_limit_bps != 0 && (bps == 0 || qp.rate_limit_bps < bps)) bps = qp.rate_limit_bps;
  if (bps != 0) {
    qp.pacer.set_rate(bps, kPaceBurstFrames * (qp.mtu + kPaceOverhead), now_);
    qp.paced = true;
  } else {
    qp.pacer.set_rate(0, 0, now_);
    qp.paced = false;
    wheel_.cancel(&qp.pace_timer);
  }
  const uint64_t d = qp.rp.deadline();
  if (d == UINT64_MAX)
    wheel_.cancel(&qp.cc_timer);
  else if (!qp.cc_timer.armed() || qp.cc_timer.expiry_ns != d)
    wheel_.arm(&qp.cc_timer, d);
}

template <class Q>
void EngineCoreT<Q>::cc_cnp(Qp &qp) noexcept {
  if (!cfg_.dcqcn || qp.type == QpType::kUd) return;
  qp.rp.on_cnp(now_);
  cc_apply(qp);
}

template <class Q>
void EngineCoreT<Q>::cc_timer(Qp &qp) noexcept {
  if (!cfg_.dcqcn) return;
  qp.rp.on_timer(now_);
  cc_apply(qp);
}

template <class Q>
bool EngineCoreT<Q>::cc_may_send(Qp &qp, uint32_t bytes) noexcept {
  if (qp.pacer.may_send(bytes, now_)) return true;
  if (!qp.pace_timer.armed()) wheel_.arm(&qp.pace_timer, qp.pacer.next_send_ns(bytes, now_));
  return false;
}

template <class Q>
void EngineCoreT<Q>::cc_sent(Qp &qp, uint32_t bytes) noexcept {
  qp.pacer.consume(bytes);
  if (qp.rp.on_tx_bytes(bytes)) cc_apply(qp);
}

template class EngineCoreT<PrivateQueues>;
template class EngineCoreT<RingQueues>;

}  // namespace uroce::transport
