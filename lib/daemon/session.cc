// SPDX-License-Identifier: BSD-3-Clause
// Sessions: one per connected app; what it owns, and its teardown in dependency order.
#include "daemon/objects.h"

#include <cerrno>

namespace uroce::daemon {

void Daemon::on_connect(ctl::Server &, const ctl::ClientInfo &ci) {
  auto s = std::make_unique<Session>();
  s->id = ci.id;
  s->pid = ci.cred.pid;
  s->name = ci.name;
  sessions_[ci.id] = std::move(s);
  ++mctr_.sessions_opened;
}

void Daemon::on_disconnect(ctl::Server &srv, const ctl::ClientInfo &ci, ctl::CtlError why) {
  if (cm_ != nullptr) cm_->on_disconnect(srv, ci, why);  // its ids and channels (cm_service.h)
  auto it = sessions_.find(ci.id);
  if (it == sessions_.end()) return;
  destroy_session(*it->second);
  sessions_.erase(it);
  ++mctr_.sessions_closed;
}

void Daemon::close_all() {
  for (auto &kv : sessions_) {
    destroy_session(*kv.second);
    ++mctr_.sessions_closed;
  }
  sessions_.clear();
}

std::vector<uint64_t> Daemon::session_ids() const {
  std::vector<uint64_t> v;
  for (const auto &kv : sessions_)
    v.push_back(kv.first);
  return v;
}

// One memfd holding ring w (of `slots` doorbells) at offset w * geo.bytes for every worker w.
static int make_doorbell_rings(uint32_t rings, uint32_t slots, RingMem *out) {
  const uint64_t bytes = shm::round_up_page(abi::ring_bytes(sizeof(abi::Doorbell), slots));
  auto r = shm::SharedRegion::create("uroce-doorbell", bytes * rings);
  if (!r) return -r.error();
  for (uint32_t w = 0; w < rings; ++w)
    if (shm::ring_init(static_cast<uint8_t *>(r->map.addr()) + w * bytes, bytes,
                       sizeof(abi::Doorbell), slots, abi::RingKind::kDoorbell,
                       w) != shm::RingError::kOk)
      return -EINVAL;
  out->mem = std::move(r.value());
  out->geo.bytes = bytes;
  out->geo.slot_size = sizeof(abi::Doorbell);
  out->geo.slot_count = slots;
  return 0;
}

int Daemon::do_open_context(Session &s, ctl::Message &, Reply &r) {
  const unsigned nw = workers();
  if (!s.has_db) {
    // Each ring holds two doorbells per QP / SRQ the session may have (one per kind and token).
    const uint32_t slots = pow2_at_least(2 * (opt_.quota.qps + opt_.quota.srqs));
    int rc = make_doorbell_rings(nw, slots, &s.db_mem);
    if (rc) return rc;
    s.db.reset(new DbLane[nw]);
    auto ev = shm::EventFd::create();
    if (!ev) return -ev.error();
    s.async_ev = std::move(ev.value());
    for (unsigned w = 0; w < nw && rc == 0; ++w) {
      DbLane &L = s.db[w];
      auto *base = static_cast<uint8_t *>(s.db_mem.mem.map.addr()) + w * s.db_mem.geo.bytes;
      if (L.ring.attach(base, s.db_mem.geo.bytes, sizeof(abi::Doorbell), slots) !=
          shm::RingError::kOk) {
        rc = -EINVAL;
        break;
      }
      auto dbe = shm::EventFd::create();
      if (!dbe) {
        rc = -dbe.error();
        break;
      }
      L.ev = std::move(dbe.value());
      // Edge-triggered, never read: each app write is one wake-up (doc/ipc.md, Sleeping
      // consumers), of the ring's consumer only: worker w.
      if (w < sleepers_.size() && sleepers_[w] != nullptr) {
        rc = sleepers_[w]->watch(L.ev.fd(), WakeSource::kDoorbell, true);
        L.watched = rc == 0;
      }
    }
    if (rc) {
      for (unsigned w = 0; w < nw; ++w)
        if (s.db[w].watched) sleepers_[w]->unwatch(s.db[w].ev.fd());
      s.db.reset();
      return rc;
    }
    // Each worker starts reading its ring (destroy_session takes them off again).
    for (unsigned w = 0; w < nw; ++w)
      run_on(w, [&] { w_[w]->db_sessions.push_back(&s); });
    s.has_db = true;
  }
  ctl::OpenContextReply rep{};
  rep.doorbell = s.db_mem.geo;
  rep.max_qp_per_session = opt_.quota.qps;
  rep.doorbell_rings = nw;
  r.set(rep);
  r.fd(s.db_mem.mem.memfd.fd());
  r.fd(s.async_ev.fd());
  r.fd(s.db[0].ev.fd());
  return 0;
}

int Daemon::do_get_async_events(Session &s, ctl::Message &, Reply &r) {
  ctl::AsyncEventsReply rep{};
  rep.count = s.async_n;
  rep.lost = s.async_lost;
  for (uint32_t i = 0; i < s.async_n; ++i)
    rep.events[i] = s.async_q[i];
  s.async_n = 0;
  s.async_lost = 0;
  r.set(rep);
  r.len = offsetof(ctl::AsyncEventsReply, events) + rep.count * sizeof(ctl::AsyncEventEntry);
  if (s.async_ev.valid()) s.async_ev.drain();
  return 0;
}

void Daemon::destroy_qp_obj(Session &s, Qp &q) {
  const uint32_t idx = w_[q.worker]->eng->qp_slot(q.qpn);
  qp_main_[q.worker][idx] = nullptr;  // main forwards no more doorbells for it
  run_on(q.worker, [&] {
    Worker &W = *w_[q.worker];
    W.qp_by_index[idx] = nullptr;
    W.eng->destroy_qp(q.qpn);
  });
  --load_[q.worker];
  --q.scq->qp_refs;
  --q.rcq->qp_refs;
  if (q.srq) --q.srq->qp_refs;
  if (--s.pd_qps[q.pd] == 0) s.pd_qps.erase(q.pd);
  s.qps.erase(q.qpn);
}

void Daemon::destroy_srq_obj(Srq &q) {
  srq_by_handle_[q.handle] = nullptr;
  if (q.worker == kUnbound) return;
  run_on(static_cast<unsigned>(q.worker), [&] {
    Worker &W = *w_[q.worker];
    W.srq_by_eh[q.eh] = nullptr;
    W.eng->destroy_srq(q.eh);
  });
}

// Everything the app owned, in dependency order. QPs go to ERR first: their queues are flushed
// and the engine stops answering for them, so peers see the ordinary RC errors (retry exceeded).
void Daemon::destroy_session(Session &s) {
  if (s.has_db) {
    // Off every worker's doorbell list first (before its QPs go, and run_on's wait hook runs
    // main's loop during the teardown).
    for (unsigned w = 0; w < workers(); ++w) {
      run_on(w, [&] { std::erase(w_[w]->db_sessions, &s); });
      // The app keeps its copy of the eventfd (the same open file): epoll would keep the entry.
      if (s.db[w].watched) sleepers_[w]->unwatch(s.db[w].ev.fd());
      s.db[w].watched = false;
    }
    s.has_db = false;
  }
  for (auto &kv : s.qps) {
    Qp &q = *kv.second;
    run_on(q.worker, [&] {
      transport::QpAttr a;
      a.qp_state = QpState::kErr;
      w_[q.worker]->eng->modify_qp(q.qpn, a, transport::kQpState);
    });
  }
  while (!s.qps.empty())
    destroy_qp_obj(s, *s.qps.begin()->second);
  for (auto &kv : s.srqs)
    destroy_srq_obj(*kv.second);
  s.srqs.clear();
  for (auto &kv : s.cqs)
    destroy_cq_obj(*kv.second);
  s.cqs.clear();
  // Windows first (they hold their PD); no grace period (transport/mw.h).
  for (uint32_t id : s.mws)
    tab_->dealloc_mw(id << 8);
  s.mws.clear();
  // One grace period for all of the session's AHs and MRs (grace.h).
  for (uint32_t ah : s.ahs)
    tab_->retire_ah(ah);
  for (auto &kv : s.mrs)
    tab_->retire_mr(kv.first);
  if (!s.ahs.empty() || !s.mrs.empty()) synchronize();
  for (uint32_t ah : s.ahs)
    tab_->release_ah(ah);
  s.ahs.clear();
  for (auto &kv : s.mrs)
    tab_->release_mr(kv.first);
  s.mrs.clear();  // unmaps
  for (uint32_t pd : s.pds)
    tab_->pds.dealloc(pd);
  s.pds.clear();
}

}  // namespace uroce::daemon
