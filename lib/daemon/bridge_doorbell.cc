// SPDX-License-Identifier: BSD-3-Clause
// Data path: the apps' doorbells (main reads the sessions' rings, a worker its forward ring)
// and bridge_in. A doorbell only tells the QP's engine that its ring has work: the requester
// copies the WQEs from the SQ ring itself, the responder takes receive WQEs when it needs one.
#include "daemon/objects.h"

namespace uroce::daemon {

// Worker W, the QP's owner: the engine takes the doorbell token (doc/ipc.md, "Doorbells").
void Daemon::ring(Worker &W, uint32_t qpn, uint32_t kind) noexcept {
  if (kind == abi::kDoorbellSq)
    W.eng->sq_doorbell(qpn);
  else
    W.eng->rq_doorbell(qpn);
}

// Main: every session's doorbell ring. A doorbell for a QP of worker 0 goes to its engine here;
// one for another worker's goes to that worker's forward ring, at most one per QP and kind in
// flight (the db_pending bit: main's acq_rel fetch_or forwards on 0 -> 1 only, the worker's
// acq_rel fetch_and clears it before ringing; why no doorbell is lost: doc/uroced.md,
// "Doorbells"). An SRQ's doorbell is checked and counted only: its ring is read by the
// responder of the worker it lives on when a QP needs a receive WQE.
void Daemon::main_doorbells() noexcept {
  Worker &W0 = *w_[0];
  uint64_t woke = 0;  // workers to ring once the pass is done (one fence each, not one per push)
  for (Session *s : live_sessions_) {
    if (!s->has_db) continue;
    abi::Doorbell db[64];
    const uint32_t want = opt_.doorbell_budget < 64 ? opt_.doorbell_budget : 64;
    const size_t n = s->db.pop_burst(db, want);
    if (n == 0 && s->db.corrupt() && !s->db_broken) {
      // The app broke its doorbell ring's index: the daemon can no longer hear this context's
      // posts (a QP already active keeps being served). Like a device whose queues are gone:
      // IBV_EVENT_DEVICE_FATAL, once, to this session only; the app must close the context.
      s->db_broken = true;
      ++mctr_.corrupt_rings;
      queue_async(s, static_cast<uint32_t>(transport::AsyncEvent::kDeviceFatal), 0);
    }
    for (size_t i = 0; i < n; ++i) {
      ++mctr_.doorbells;
      const abi::Doorbell d = db[i];
      if (d.kind == abi::kDoorbellRq && (d.qpn & kSrqDoorbellBit)) {
        const uint32_t h = d.qpn & ~kSrqDoorbellBit;
        Srq *q = h < srq_by_handle_.size() ? srq_by_handle_[h] : nullptr;
        if (q == nullptr || q->owner != s) ++mctr_.bad_doorbells;
        continue;
      }
      Qp *q = main_qp(d.qpn);
      if (q == nullptr || q->owner != s ||
          (d.kind != abi::kDoorbellSq && d.kind != abi::kDoorbellRq) ||
          (d.kind == abi::kDoorbellRq && !q->has_rq)) {
        ++mctr_.bad_doorbells;
        continue;
      }
      if (q->worker == 0) {
        ring(W0, q->qpn, d.kind);
        continue;
      }
      const uint8_t bit = d.kind == abi::kDoorbellSq ? 1 : 2;
      if ((q->db_pending.fetch_or(bit, std::memory_order_acq_rel) & bit) == 0) {
        if (w_[q->worker]->db_in->push(d)) {
          ++mctr_.doorbells_forwarded;
          woke |= uint64_t{1} << q->worker;
        } else {
          ++mctr_.bad_doorbells;  // cannot happen (sized for it); counted, never silent
        }
      }
    }
  }
  // A worker that sleeps is woken after the pushes (Sleeper::ring: fence, then its flag).
  for (unsigned w = 1; woke != 0 && w < sleepers_.size(); ++w)
    if ((woke >> w) & 1) sleepers_[w]->ring();
}

bool Daemon::pending(unsigned w) const noexcept {
  const Worker &W = *w_[w];
  if (W.eng->active_qps() != 0) return true;
  for (const CqForward &f : W.forward)
    if (f.ring->consumer().available(1) != 0) return true;  // CQEs other workers wrote
  return false;
}

uint32_t Daemon::bridge_in(unsigned w) noexcept {
  Worker &W = *w_[w];
  if (w == 0) {
    const uint64_t before = mctr_.doorbells;
    main_doorbells();
    return static_cast<uint32_t>(mctr_.doorbells - before);
  }
  abi::Doorbell db[64];
  size_t n;
  uint32_t done = 0;
  while ((n = W.db_in->pop_burst(db, 64)) != 0) {
    for (size_t i = 0; i < n; ++i) {
      const abi::Doorbell d = db[i];
      const uint32_t idx = W.eng->qp_slot(d.qpn);
      Qp *q = idx < W.qp_by_index.size() ? W.qp_by_index[idx] : nullptr;
      if (q == nullptr) {  // destroyed since main forwarded it
        ++W.ctr.bad_doorbells;
        continue;
      }
      const uint8_t bit = d.kind == abi::kDoorbellSq ? 1 : 2;
      q->db_pending.fetch_and(static_cast<uint8_t>(~bit), std::memory_order_acq_rel);
      ring(W, q->qpn, d.kind);
      ++done;
    }
  }
  return done;
}

}  // namespace uroce::daemon
