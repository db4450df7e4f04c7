// SPDX-License-Identifier: BSD-3-Clause
// Data path: the apps' doorbells. Each worker reads its own doorbell ring of every session
// (doc/ipc.md, "Doorbells"); no other lcore is on the way. A doorbell only tells the QP's engine
// that its ring has work: the requester copies the WQEs from the SQ ring itself, the responder
// takes receive WQEs when it needs one.
#include "daemon/objects.h"

namespace uroce::daemon {

// Worker W, the QP's owner: the engine takes the doorbell token (doc/ipc.md, "Doorbells").
void Daemon::ring(Worker &W, uint32_t qpn, uint32_t kind) noexcept {
  if (kind == abi::kDoorbellSq)
    W.eng->sq_doorbell(qpn);
  else
    W.eng->rq_doorbell(qpn);
}

// Worker W: session s's doorbell ring of W. Each doorbell is copied out of the ring, then
// checked: a QP of this session that W owns (its QPN names W: a doorbell can never reach
// another worker's or another session's QP), a known kind, an RQ only for a QP that has one.
// An SRQ's doorbell belongs in ring 0 and is checked and counted only there: its ring is read
// by the responder of the worker it lives on when a QP needs a receive WQE. Anything else is
// counted in bad_doorbells and dropped.
uint32_t Daemon::doorbells(Worker &W, Session &s) noexcept {
  DbLane &L = s.db[W.id];
  abi::Doorbell db[64];
  const uint32_t want = opt_.doorbell_budget < 64 ? opt_.doorbell_budget : 64;
  const size_t n = L.ring.pop_burst(db, want);
  if (n == 0 && L.ring.corrupt() && !L.broken) {
    // The app broke this ring's index: W can no longer hear this context's posts to its QPs
    // (a QP already active keeps being served). Like a device whose queues are gone:
    // IBV_EVENT_DEVICE_FATAL, once, to this session only (main queues it); the app must close
    // the context.
    L.broken = true;
    ++W.ctr.corrupt_rings;
    emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kDeviceFatal), 0, s.id);
    return 0;
  }
  const uint32_t nw = static_cast<uint32_t>(w_.size());
  for (size_t i = 0; i < n; ++i) {
    const abi::Doorbell d = db[i];
    if (d.kind == abi::kDoorbellRq && (d.qpn & kSrqDoorbellBit)) {
      const uint32_t h = d.qpn & ~kSrqDoorbellBit;
      // srq_by_handle_ is main's table: only ring 0 (read by main) may name an SRQ.
      Srq *q = W.id == 0 && h < srq_by_handle_.size() ? srq_by_handle_[h] : nullptr;
      if (q == nullptr || q->owner != &s) ++W.ctr.bad_doorbells;
      continue;
    }
    Qp *q = nullptr;
    if ((d.kind == abi::kDoorbellSq || d.kind == abi::kDoorbellRq) &&
        qpn_owner(d.qpn, nw) == W.id) {
      const uint32_t idx = W.eng->qp_slot(d.qpn);
      q = idx < W.qp_by_index.size() ? W.qp_by_index[idx] : nullptr;
    }
    if (q == nullptr || q->owner != &s || q->qpn != d.qpn ||
        (d.kind == abi::kDoorbellRq && !q->has_rq)) {
      ++W.ctr.bad_doorbells;
      continue;
    }
    ring(W, q->qpn, d.kind);
  }
  W.ctr.doorbells += n;
  return static_cast<uint32_t>(n);
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
  uint32_t done = 0;
  for (Session *s : W.db_sessions)
    done += doorbells(W, *s);
  return done;
}

void Daemon::arm_doorbells(unsigned w, bool asleep) noexcept {
  for (Session *s : w_[w]->db_sessions)
    s->db[w].ring.set_asleep(asleep);
}

}  // namespace uroce::daemon
