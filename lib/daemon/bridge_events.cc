// SPDX-License-Identifier: BSD-3-Clause
// Data path: engine async events, from the worker that saw them to the owning session.
#include "daemon/objects.h"

namespace uroce::daemon {

// Main: an engine async event goes to the session owning the object it names
// (ibv_get_async_event).
void Daemon::route_event(uint32_t type, uint32_t h, uint64_t session) noexcept {
  Session *owner = nullptr;
  switch (static_cast<transport::AsyncEvent>(type)) {
    case transport::AsyncEvent::kDeviceFatal: {  // a broken doorbell ring: once per session
      auto it = sessions_.find(session);
      if (it != sessions_.end()) {
        if (it->second->db_broken) return;
        it->second->db_broken = true;
        owner = it->second.get();
      }
      break;
    }
    case transport::AsyncEvent::kCqErr:
      if (h < cq_by_handle_.size() && cq_by_handle_[h]) owner = cq_by_handle_[h]->owner;
      break;
    case transport::AsyncEvent::kSrqErr:
    case transport::AsyncEvent::kSrqLimitReached:
      if (h < srq_by_handle_.size() && srq_by_handle_[h]) owner = srq_by_handle_[h]->owner;
      break;
    default:  // QP events
      if (Qp *q = main_qp(h)) owner = q->owner;
      break;
  }
  if (owner == nullptr) {
    ++mctr_.async_unrouted;
    return;
  }
  queue_async(owner, type, h);
}

// Worker W: an event for main (direct on worker 0, else through W's event ring).
void Daemon::emit_async(Worker &W, uint32_t type, uint32_t handle, uint64_t session) noexcept {
  if (W.id == 0) {
    route_event(type, handle, session);
  } else if (!W.ev_out->push(AsyncItem{type, handle, session})) {
    ++W.ctr.async_lost;
  } else if (!sleepers_.empty()) {
    sleepers_[0]->ring();  // main routes it
  }
}

void Daemon::forward_events() noexcept {
  for (size_t w = 1; w < w_.size(); ++w) {
    AsyncItem it[32];
    size_t n;
    while ((n = w_[w]->ev_out->pop_burst(it, 32)) != 0)
      for (size_t i = 0; i < n; ++i)
        route_event(it[i].type, it[i].handle, it[i].session);
  }
}

void Daemon::queue_async(Session *owner, uint32_t type, uint32_t handle) noexcept {
  if (owner->async_n == ctl::kMaxAsyncEvents) {
    ++owner->async_lost;
    ++mctr_.async_lost;
    return;
  }
  owner->async_q[owner->async_n++] = {type, handle};
  ++mctr_.async_events;
  if (owner->async_ev.valid()) owner->async_ev.signal();
}

}  // namespace uroce::daemon
