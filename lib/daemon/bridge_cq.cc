// SPDX-License-Identifier: BSD-3-Clause
// Data path, completions: the engines write CQEs straight into the apps' CQ rings; here are
// the CQ's eventfd, the forward rings of CQs shared by QPs of several workers, and bridge_out.
#include "daemon/objects.h"

namespace uroce::daemon {

// The engine of the CQ's owner worker fired the app's arm (RingCompletionQueue::push / absorb).
void Daemon::cq_event(void *cq) noexcept {
  auto *c = static_cast<Cq *>(cq);
  c->ev.signal();
  if (c->ctr) ++c->ctr->cq_events;
}

// The owner armed the forward ring (bridge_out) and may be asleep: ring its Sleeper (the
// Dekker pattern of doc/ipc.md, "Sleeping consumers": the ring's arm, then the lcore's flag).
void Daemon::fwd_event(void *lane) noexcept {
  auto *l = static_cast<Cq::Lane *>(lane);
  if (l->owner < l->daemon->sleepers_.size()) l->daemon->sleepers_[l->owner]->ring();
}

// The app broke its CQ ring's consumer index, or the CQ overflowed: IBV_EVENT_CQ_ERR, once.
void Daemon::cq_error(Worker &W, Cq &c) noexcept {
  if (c.err_reported.exchange(true, std::memory_order_relaxed)) return;
  ++W.ctr.corrupt_rings;
  emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kCqErr), c.handle);
}

// Moves the completions other workers' QPs left in this worker's CQs' forward rings, then
// routes the engine's async events (engine handles -> the app's handles).
uint32_t Daemon::bridge_out(unsigned w) noexcept {
  Worker &W = *w_[w];
  uint32_t n = 0;
  for (CqForward &f : W.forward) {
    transport::RingCompletionQueue *q = W.eng->cq_queue(f.cq->lanes[w].eh);
    if (q == nullptr) continue;
    const uint32_t k = q->absorb(f.ring->consumer(), kCqBurst);
    W.ctr.cqes_forwarded += k;
    n += k;
    // Drained: arm it, so that the next CQE a producer writes wakes this worker (fwd_event).
    if (k < kCqBurst) f.ring->consumer().arm(false);
    if (k == 0 && q->corrupt()) cq_error(W, *f.cq);
  }
  transport::AsyncEventRecord ev;
  while (W.eng->poll_async_event(&ev)) {
    uint32_t h = ev.handle;
    switch (ev.type) {
      case transport::AsyncEvent::kCqErr: {
        Cq *c = h < W.cq_by_eh.size() ? W.cq_by_eh[h] : nullptr;
        if (c == nullptr) {
          ++W.ctr.async_unrouted;
        } else {
          cq_error(W, *c);
        }
        continue;
      }
      case transport::AsyncEvent::kSrqErr:
      case transport::AsyncEvent::kSrqLimitReached: {
        Srq *q = h < W.srq_by_eh.size() ? W.srq_by_eh[h] : nullptr;
        if (q == nullptr) {
          ++W.ctr.async_unrouted;
          continue;
        }
        h = q->handle;
        break;
      }
      case transport::AsyncEvent::kQpFatal:
        ++W.ctr.corrupt_rings;
        break;
      default:
        break;
    }
    emit_async(W, static_cast<uint32_t>(ev.type), h);
  }
  if (w == 0) forward_events();
  return n;
}

}  // namespace uroce::daemon
