// SPDX-License-Identifier: BSD-3-Clause
// The completer (IBTA 9.7.5.2 "requester: response handling") and the retry machinery:
// ACK / NAK / RNR NAK / read response / atomic ACK processing, send completions in order,
// retry_cnt and rnr_retry counters, the local ACK timeout and go-back-N rewinds.
//
// The completer is a state machine stepped once per response packet; one packet can complete
// several WQEs (ACKs are cumulative), so kCompleteWqe loops back to kGetWqe.
#include <cstring>

#include "transport/core.h"
#include "transport/rnr.h"
#include "wire/psn.h"

namespace uroce::transport {

using wire::psn_diff;

namespace {

enum class CompState : uint8_t {
  kGetWqe,       // the oldest outstanding send WQE
  kCheckPsn,     // where the response PSN falls relative to that WQE and comp_psn
  kCheckAck,     // what the response says (opcode, AETH syndrome)
  kRead,         // place RDMA READ response data
  kAtomic,       // store the atomic's original value
  kWriteSend,    // an ACK covering (part of) a SEND / WRITE
  kCompleteWqe,  // the WQE is done: CQE, free its slot
  kRetry,        // implied or explicit NAK: go back N, or fail when retries are exhausted
  kRnrWait,      // RNR NAK: wait min RNR time, or fail when RNR retries are exhausted
  kError,        // complete the WQE in error, QP -> ERR
  kDone,
};

constexpr bool is_rd_atomic(WrOpcode op) noexcept {
  return op == WrOpcode::kRdmaRead || op == WrOpcode::kAtomicCmpAndSwp ||
         op == WrOpcode::kAtomicFetchAndAdd;
}

constexpr WcStatus nak_status(uint8_t code) noexcept {
  switch (static_cast<aeth::NakCode>(code)) {
    case aeth::NakCode::kInvalidRequest:
      return WcStatus::kRemInvReqErr;
    case aeth::NakCode::kRemoteAccessError:
      return WcStatus::kRemAccessErr;
    case aeth::NakCode::kRemoteOperationalError:
      return WcStatus::kRemOpErr;
    case aeth::NakCode::kInvalidRdRequest:
      return WcStatus::kRemInvRdReqErr;
    default:
      return WcStatus::kBadRespErr;
  }
}

// Whether a READ or atomic is among the WQEs posted and not completed (a bounded walk of the
// SQ; only on a rewind, never per packet).
template <class Qp>
bool rd_atomic_posted(Qp &qp) noexcept {
  for (uint32_t c = qp.sq.tail(); c != qp.sq.head(); ++c)
    if (is_rd_atomic(qp.sq.at(c).opcode)) return true;
  return false;
}

// A loss (local ACK timeout, sequence NAK, implied NAK) while `in_flight` PSNs were
// outstanding: from now on at most `min_window` PSNs in flight (doc/transport.md, "Loss
// window"). The level to grow back to is what was in flight at the first loss; a loss inside
// the window starts it again from min_window with the same target.
template <class Qp>
void loss_window_cut(Qp &qp, uint32_t min_window) noexcept {
  if (min_window == 0) return;
  if (qp.window != 0 && qp.retry_started) {
    // A second rewind without progress since the last one. Only a READ or atomic can make the
    // window itself the obstacle: the peer's ACK then points past a READ that the window holds
    // back and must be resent first, and such an ACK moves nothing (req_skip_to): resend
    // everything again, as without the window. With SENDs / WRITEs only, the peer is just
    // slow (or the resent frames were lost again): keep the window, as TCP keeps a small
    // window after a second timeout, instead of piling another full burst of duplicates onto
    // a peer that has not worked through the first one (doc/interop.md).
    if (rd_atomic_posted(qp)) qp.window = qp.window_target = 0;
    return;
  }
  const uint32_t in_flight = static_cast<uint32_t>(psn_diff(qp.req_psn, qp.comp_psn));
  if (qp.window == 0) {
    if (in_flight <= min_window) return;  // a window would not limit anything
    qp.window_target = in_flight;
  }
  qp.window = min_window;
  ++qp.stats.window_cuts;
}

// Whether the requester must run again: WQEs copied and not all sent, or (shared rings) the
// engine holds the SQ doorbell token. Only the requester gives the token back (when it finds the
// ring empty), and the app does not ring while the engine holds it (doc/ipc.md, "Doorbells"):
// a QP left off the active list with the token is never sent its next WR (issue 19's stall,
// after req_skip_to completed a message the requester had not finished looking at).
template <class Qp>
bool requester_due(const Qp &qp) noexcept {
  if constexpr (requires { qp.sq.token(); })
    return qp.has_send_work() || qp.sq.token();
  else
    return qp.has_send_work();
}

// An ACK advanced comp_psn: one more PSN in flight; at the old level the limit is lifted.
template <class Qp>
void loss_window_grow(Qp &qp) noexcept {
  if (qp.window == 0) return;
  if (++qp.window >= qp.window_target) {
    qp.window = qp.window_target = 0;
    ++qp.stats.window_restores;
  }
}

}  // namespace

template <class Q>
bool EngineCoreT<Q>::progress_made(Qp &qp, uint32_t old_comp_psn) noexcept {
  if (psn_diff(qp.comp_psn, old_comp_psn) <= 0) return false;
  // IBTA 9.7.6.1.3 / 9.7.5.2.8: forward progress restores both retry budgets.
  qp.retry_left = qp.retry_cnt;
  qp.rnr_left = qp.rnr_retry;
  qp.retry_started = false;
  return true;
}

template <class Q>
void EngineCoreT<Q>::completer_rx(Qp &qp, const wire::ParsedPacket &p) noexcept {
  if (qp.type != QpType::kRc || (qp.state != QpState::kRts && qp.state != QpState::kSqd)) {
    ++ctr_.drops[static_cast<size_t>(DropReason::kQpState)];
    return;
  }
  const uint32_t psn = p.bth()->psn();
  const uint8_t opc = p.bth()->opcode();
  // Only PSNs in the outstanding window [comp_psn - 1, sent_psn) mean anything. sent_psn, not
  // req_psn: after a go-back-N rewind, responses to the first transmission are still on the
  // way (a late ACK after the local ACK timeout, a second NAK), and they are valid responses.
  if (psn_diff(psn, qp.sent_psn) >= 0) {
    ++ctr_.drops[static_cast<size_t>(DropReason::kBadResponse)];
    return;
  }
  if (psn_diff(psn, qp.comp_psn) < -1) {  // a late answer to a request resent and completed
    ++ctr_.drops[static_cast<size_t>(DropReason::kDuplicate)];
    return;
  }
  const uint8_t syn = (p.op->mask & wire::kMaskAeth) ? p.aeth()->syndrome() : 0;
  if (psn_diff(psn, qp.req_psn) >= 0) {
    // The requester has not resent up to this PSN yet. An ACK says every PSN up to it arrived,
    // a NAK every PSN before it: skip the requester past those, then handle the response as
    // usual. Anything else (a read response, an atomic ACK) the resent request will answer
    // again: drop this one.
    const bool ack = opc == wire::op::kRcAck && aeth::kind(syn) == aeth::Kind::kAck;
    const bool nak = opc == wire::op::kRcAck && (aeth::kind(syn) == aeth::Kind::kNak ||
                                                 aeth::kind(syn) == aeth::Kind::kRnrNak);
    if (!(ack || nak) || !req_skip_to(qp, ack ? wire::psn_add(psn, 1) : psn)) {
      ++ctr_.drops[static_cast<size_t>(DropReason::kDuplicate)];
      return;
    }
  }
  if ((p.op->mask & wire::kMaskAeth) && aeth::kind(syn) == aeth::Kind::kAck)
    qp.peer_credits = aeth::value(syn);

  const uint32_t old_comp = qp.comp_psn;
  WcStatus err = WcStatus::kSuccess;
  bool again = false;  // the packet may complete more WQEs after this one
  SendWqe *w = nullptr;
  uint32_t widx = 0;
  CompState st = CompState::kGetWqe;
  while (st != CompState::kDone) {
    switch (st) {
      case CompState::kGetWqe: {
        widx = qp.sq.tail();
        const bool outstanding = widx != qp.req_idx || (widx != qp.sq.head() &&
                                                        qp.sq.at(widx).state == WqeState::kSending);
        if (!outstanding) {
          st = CompState::kDone;
          break;
        }
        w = &qp.sq.at(widx);
        st = CompState::kCheckPsn;
        break;
      }
      case CompState::kCheckPsn: {
        if (psn_diff(psn, w->last_psn) > 0) {
          // The response is for a later WQE. A SEND / WRITE before it is implicitly
          // acknowledged; a READ / atomic before it lost its response: implied NAK.
          if (is_rd_atomic(w->opcode)) {
            st = CompState::kRetry;
          } else if (w->state == WqeState::kSent) {
            again = true;
            st = CompState::kCompleteWqe;
          } else {
            st = CompState::kDone;
          }
          break;
        }
        if (psn_diff(psn, qp.comp_psn) < 0) {
          st = CompState::kDone;  // an old or duplicate response
          break;
        }
        st = CompState::kCheckAck;
        break;
      }
      case CompState::kCheckAck: {
        const uint32_t m = p.op->mask;
        if (opc == wire::op::kRcAck) {
          switch (aeth::kind(syn)) {
            case aeth::Kind::kAck:
              // An ACK inside a READ / atomic's PSN range says nothing about its data.
              st = is_rd_atomic(w->opcode) ? CompState::kDone : CompState::kWriteSend;
              break;
            case aeth::Kind::kRnrNak:
              ++qp.stats.rnr_naks_rcvd;
              st = CompState::kRnrWait;
              break;
            case aeth::Kind::kNak: {
              const uint8_t code = aeth::value(syn);
              if (code == static_cast<uint8_t>(aeth::NakCode::kPsnSequenceError)) {
                ++qp.stats.seq_naks_rcvd;
                // Everything before the NAK's PSN arrived.
                if (psn_diff(psn, qp.comp_psn) > 0) qp.comp_psn = psn;
                progress_made(qp, old_comp);
                st = CompState::kRetry;
              } else {
                err = nak_status(code);
                st = CompState::kError;
              }
              break;
            }
            default:
              st = CompState::kDone;  // reserved syndrome: ignore
              break;
          }
        } else if (m & wire::kMaskRead) {
          if (w->opcode != WrOpcode::kRdmaRead) {
            err = WcStatus::kBadRespErr;
            st = CompState::kError;
          } else if (psn != qp.comp_psn) {
            st = CompState::kRetry;  // a read response is missing
          } else {
            st = CompState::kRead;
          }
        } else if (opc == wire::op::kRcAtomicAck) {
          if (!is_rd_atomic(w->opcode) || w->opcode == WrOpcode::kRdmaRead || psn != w->first_psn) {
            err = WcStatus::kBadRespErr;
            st = CompState::kError;
          } else {
            st = CompState::kAtomic;
          }
        } else {
          st = CompState::kDone;
        }
        break;
      }
      case CompState::kRead: {
        const uint32_t off = static_cast<uint32_t>(psn_diff(psn, w->first_psn)) << qp.mtu_shift;
        const uint32_t left = w->length - (off < w->length ? off : w->length);
        const uint32_t expect = left < qp.mtu ? left : qp.mtu;
        const bool last = psn == w->last_psn;
        const bool last_op = p.op->mask & wire::kMaskLast;
        if (off > w->length || p.payload_len != expect || last != last_op) {
          err = WcStatus::kBadRespErr;
          st = CompState::kError;
          break;
        }
        if (!scatter_send(qp, widx, off, p.payload(), p.payload_len)) {
          err = WcStatus::kLocProtErr;
          st = CompState::kError;
          break;
        }
        qp.comp_psn = wire::psn_add(psn, 1);
        progress_made(qp, old_comp);
        st = last ? CompState::kCompleteWqe : CompState::kDone;
        break;
      }
      case CompState::kAtomic: {
        const uint64_t orig = p.atomic_ack()->orig();
        uint8_t b[8];
        std::memcpy(b, &orig, 8);  // host order into the local buffer, as verbs define it
        if (!scatter_send(qp, widx, 0, b, 8)) {
          err = WcStatus::kLocProtErr;
          st = CompState::kError;
          break;
        }
        qp.comp_psn = wire::psn_add(psn, 1);
        progress_made(qp, old_comp);
        st = CompState::kCompleteWqe;
        break;
      }
      case CompState::kWriteSend:
        qp.comp_psn = wire::psn_add(psn, 1);
        progress_made(qp, old_comp);
        st = (psn == w->last_psn && w->state == WqeState::kSent) ? CompState::kCompleteWqe
                                                                 : CompState::kDone;
        break;
      case CompState::kCompleteWqe: {
        if (psn_diff(wire::psn_add(w->last_psn, 1), qp.comp_psn) > 0)
          qp.comp_psn = wire::psn_add(w->last_psn, 1);
        progress_made(qp, old_comp);
        if (is_rd_atomic(w->opcode) && qp.rd_atomic_out) --qp.rd_atomic_out;
        qp.sq.pop();  // the slot is free before the completion is visible
        complete_send(qp, *w, WcStatus::kSuccess);
        if (requester_due(qp)) activate(qp);  // a fence or the rd_atomic limit may lift
        if (qp.state == QpState::kSqd && qp.en_sqd_async_notify && !qp.sqd_notified &&
            qp.req_idx == qp.sq.tail()) {
          qp.sqd_notified = true;
          push_async(AsyncEvent::kSqDrained, qp.qpn);
        }
        st = again ? CompState::kGetWqe : CompState::kDone;
        again = false;
        break;
      }
      case CompState::kRetry:
        // One go-back-N per loss: responses already in flight when it started (stale read
        // responses, a second NAK for the same gap) must not start another one. Progress or
        // the local ACK timer re-enables it.
        if (qp.retry_started) {
          st = CompState::kDone;
          break;
        }
        if (qp.retry_left == 0) {
          err = WcStatus::kRetryExcErr;
          st = CompState::kError;
          break;
        }
        --qp.retry_left;
        loss_window_cut(qp, cfg_.loss_window);
        req_rewind(qp);
        qp.retry_started = true;
        st = CompState::kDone;
        break;
      case CompState::kRnrWait:
        if (psn_diff(psn, qp.comp_psn) > 0) qp.comp_psn = psn;
        progress_made(qp, old_comp);
        if (qp.rnr_left == 0) {
          err = WcStatus::kRnrRetryExcErr;
          st = CompState::kError;
          break;
        }
        if (qp.rnr_retry != kRnrRetryInfinite) --qp.rnr_left;
        qp.rnr_wait = true;
        wheel_.cancel(&qp.retrans_timer);
        wheel_.arm(&qp.rnr_timer, now_ + rnr_timer_ns(aeth::value(syn)));
        deactivate(qp);
        st = CompState::kDone;
        return;
      case CompState::kError:
        // The failed WQE completes with its status; everything after it is flushed.
        qp.sq.pop();
        complete_send(qp, *w, err);
        if (static_cast<int32_t>(qp.req_idx - qp.sq.tail()) < 0) qp.req_idx = qp.sq.tail();
        enter_error(qp);
        return;
      case CompState::kDone:
        break;
    }
  }
  // Local ACK timer: restart on progress, stop when nothing is outstanding.
  if (psn_diff(qp.comp_psn, old_comp) > 0) {
    // An ACK that advanced (not the NAK that just cut the window and rewound).
    if (!qp.retry_started) loss_window_grow(qp);
    if (psn_diff(qp.req_psn, qp.comp_psn) > 0 && !qp.rnr_wait)
      arm_retransmit(qp);
    else
      wheel_.cancel(&qp.retrans_timer);
    // The PSN window (max_inflight_psn) may have opened: a requester blocked on it must run.
    if (requester_due(qp) && !qp.rnr_wait) activate(qp);
  }
}

template <class Q>
void EngineCoreT<Q>::arm_retransmit(Qp &qp) noexcept {
  const uint64_t t = ack_timeout_ns(qp.timeout);
  if (t == 0) return;  // timeout 0: infinite
  wheel_.arm(&qp.retrans_timer, now_ + t);
}

template <class Q>
void EngineCoreT<Q>::req_rewind(Qp &qp) noexcept {
  ++qp.stats.retransmits;
  const uint32_t tail = qp.sq.tail();
  uint32_t end = qp.req_idx;
  if (end != qp.sq.head() && qp.sq.at(end).state == WqeState::kSending) ++end;
  for (uint32_t c = tail; c != end; ++c) {
    SendWqe &w = qp.sq.at(c);
    const bool started = w.state == WqeState::kSending || w.state == WqeState::kSent;
    w.next_off = 0;
    w.state = WqeState::kPosted;
    // The oldest WQE may be partly acknowledged: resume at comp_psn, keeping its PSN range.
    if (c == tail && started) {
      const int32_t d = psn_diff(qp.comp_psn, w.first_psn);
      if (d > 0) w.next_off = static_cast<uint32_t>(d) << qp.mtu_shift;
      if (w.next_off > w.length) w.next_off = w.length;
    }
  }
  qp.req_idx = tail;
  qp.req_psn = qp.comp_psn;
  qp.rd_atomic_out = 0;
  qp.noack_pkts = 0;
  wheel_.cancel(&qp.retrans_timer);
  if (qp.state == QpState::kRts || qp.state == QpState::kSqd) activate(qp);
}

template <class Q>
bool EngineCoreT<Q>::req_skip_to(Qp &qp, uint32_t target) noexcept {
  // Every WQE between req_idx and target was sent before the rewind, so its PSN range is the
  // one the requester gives it again: a WQE not started yet begins at req_psn. First check
  // that only SENDs / WRITEs are in the way, then move.
  for (int pass = 0; pass < 2; ++pass) {
    uint32_t idx = qp.req_idx;
    uint32_t rpsn = qp.req_psn;
    while (psn_diff(target, rpsn) > 0) {
      if (idx == qp.sq.head()) return false;  // beyond what was posted: cannot be
      SendWqe &w = qp.sq.at(idx);
      if (is_rd_atomic(w.opcode)) return false;
      uint32_t first = w.first_psn, last = w.last_psn;
      if (w.next_off == 0 && w.state == WqeState::kPosted) {
        const uint32_t npk = w.length ? ((w.length - 1) >> qp.mtu_shift) + 1 : 1;
        first = rpsn;
        last = wire::psn_add(rpsn, npk - 1);
      }
      if (psn_diff(target, last) > 0) {  // all of it
        rpsn = wire::psn_add(last, 1);
        if (pass == 1) {
          w.first_psn = first;
          w.last_psn = last;
          w.next_off = w.length;
          w.state = WqeState::kSent;
          qp.req_idx = idx + 1;
          qp.req_psn = rpsn;
        }
        ++idx;
      } else {  // up to target - 1
        rpsn = target;
        if (pass == 1) {
          uint32_t off = static_cast<uint32_t>(psn_diff(target, first)) << qp.mtu_shift;
          w.first_psn = first;
          w.last_psn = last;
          w.next_off = off < w.length ? off : w.length;
          w.state = WqeState::kSending;
          qp.req_psn = rpsn;
        }
      }
    }
  }
  return true;
}

template <class Q>
void EngineCoreT<Q>::retransmit_timeout(Qp &qp) noexcept {
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;
  if (psn_diff(qp.req_psn, qp.comp_psn) <= 0 || qp.rnr_wait) return;
  ++qp.stats.timeouts;
  if (qp.retry_left == 0) {
    SendWqe &w = qp.sq.at(qp.sq.tail());
    qp.sq.pop();
    complete_send(qp, w, WcStatus::kRetryExcErr);
    if (static_cast<int32_t>(qp.req_idx - qp.sq.tail()) < 0) qp.req_idx = qp.sq.tail();
    enter_error(qp);
    return;
  }
  --qp.retry_left;
  loss_window_cut(qp, cfg_.loss_window);
  req_rewind(qp);
  qp.retry_started = true;
}

template <class Q>
void EngineCoreT<Q>::rnr_timer_expired(Qp &qp) noexcept {
  if (!qp.rnr_wait) return;
  qp.rnr_wait = false;
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;
  req_rewind(qp);
}

template <class Q>
void EngineCoreT<Q>::on_timer(TimerNode *t) noexcept {
  auto *qt = static_cast<QpTimer *>(t);
  Qp &qp = qps_[qt->qp_index];
  if (!qp.in_use) return;
  if (t->kind == kTimerRetransmit)
    retransmit_timeout(qp);
  else if (t->kind == kTimerRnr)
    rnr_timer_expired(qp);
  else if (t->kind == kTimerCc)
    cc_timer(qp);
  else if (t->kind == kTimerPace)
    activate(qp);
}

template class EngineCoreT<PrivateQueues>;
template class EngineCoreT<RingQueues>;

}  // namespace uroce::transport
