// SPDX-License-Identifier: BSD-3-Clause
// Data path: the apps' doorbells (main) and bridge_in, the pass over rung rings.
#include "daemon/objects.h"

namespace uroce::daemon {

// Main: every session's doorbell ring. A doorbell for a QP / SRQ of worker 0 activates it here;
// one for another worker's goes to that worker's forward ring, at most one per QP and kind in
// flight (the db_pending bit: main's acq_rel fetch_or forwards on 0 -> 1 only, the worker's
// acq_rel fetch_and clears it before draining; why no doorbell is lost: doc/uroced.md,
// "Doorbells").
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
      // posts (a QP already active keeps being drained). Like a device whose queues are gone:
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
        if (q == nullptr || q->owner != s) {
          ++mctr_.bad_doorbells;
          continue;
        }
        if (q->worker == kUnbound) {  // rung before any QP uses it: it lives on worker 0
          q->worker = 0;
          W0.srq_by_handle[h] = q;
        }
        if (q->worker == 0) {
          activate_srq(W0, *q);
        } else if ((q->db_pending.fetch_or(1, std::memory_order_acq_rel) & 1) == 0) {
          if (w_[q->worker]->db_in->push(d)) {
            ++mctr_.doorbells_forwarded;
            woke |= uint64_t{1} << q->worker;
          } else
            ++mctr_.bad_doorbells;  // cannot happen (sized for it); counted, never silent
        }
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
        if (d.kind == abi::kDoorbellSq)
          q->sq_rung = true;
        else
          q->rq_rung = true;
        activate(W0, *q);
        continue;
      }
      const uint8_t bit = d.kind == abi::kDoorbellSq ? 1 : 2;
      if ((q->db_pending.fetch_or(bit, std::memory_order_acq_rel) & bit) == 0) {
        if (w_[q->worker]->db_in->push(d)) {
          ++mctr_.doorbells_forwarded;
          woke |= uint64_t{1} << q->worker;
        } else {
          ++mctr_.bad_doorbells;
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
  return W.act_head != nullptr || W.srq_act_head != nullptr || W.eng->dirty_cq_count() != 0 ||
         W.eng->active_qps() != 0;
}

uint32_t Daemon::bridge_in(unsigned w) noexcept {
  Worker &W = *w_[w];
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  if (w == 0) {
    main_doorbells();
  } else {
    abi::Doorbell db[64];
    size_t n;
    while ((n = W.db_in->pop_burst(db, 64)) != 0) {
      for (size_t i = 0; i < n; ++i) {
        const abi::Doorbell d = db[i];
        if (d.qpn & kSrqDoorbellBit) {
          const uint32_t h = d.qpn & ~kSrqDoorbellBit;
          Srq *q = h < W.srq_by_handle.size() ? W.srq_by_handle[h] : nullptr;
          if (q == nullptr) {
            ++ctr_.bad_doorbells;
            continue;
          }
          q->db_pending.fetch_and(static_cast<uint8_t>(~1u), std::memory_order_acq_rel);
          activate_srq(W, *q);
          continue;
        }
        const uint32_t idx = W.eng->qp_slot(d.qpn);
        Qp *q = idx < W.qp_by_index.size() ? W.qp_by_index[idx] : nullptr;
        if (q == nullptr) {  // destroyed since main forwarded it
          ++ctr_.bad_doorbells;
          continue;
        }
        const uint8_t bit = d.kind == abi::kDoorbellSq ? 1 : 2;
        q->db_pending.fetch_and(static_cast<uint8_t>(~bit), std::memory_order_acq_rel);
        if (bit == 1)
          q->sq_rung = true;
        else
          q->rq_rung = true;
        activate(W, *q);
      }
    }
  }
  const uint32_t before =
      static_cast<uint32_t>(ctr_.send_wqes + ctr_.recv_wqes + ctr_.bad_wqes + ctr_.flushed_wqes);
  // Receive queues first, so a request arriving with the next RX burst finds its buffer.
  for (Srq *s = W.srq_act_head; s != nullptr;) {
    Srq *next = s->act_next;
    if (!drain_srq(W, *s)) unlink(*s, W.srq_act_head);
    s = next;
  }
  for (Qp *q = W.act_head; q != nullptr;) {
    Qp *next = q->act_next;
    if (q->rq_rung && !drain_rq(W, *q)) q->rq_rung = false;
    if (q->sq_rung && !drain_sq(W, *q)) q->sq_rung = false;
    if (!q->sq_rung && !q->rq_rung) unlink(*q, W.act_head);
    q = next;
  }
  return static_cast<uint32_t>(ctr_.send_wqes + ctr_.recv_wqes + ctr_.bad_wqes +
                               ctr_.flushed_wqes) -
         before;
}

}  // namespace uroce::daemon
