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
  rebuild_lists();
}

void Daemon::on_disconnect(ctl::Server &srv, const ctl::ClientInfo &ci, ctl::CtlError why) {
  if (cm_ != nullptr) cm_->on_disconnect(srv, ci, why);  // its ids and channels (cm_service.h)
  auto it = sessions_.find(ci.id);
  if (it == sessions_.end()) return;
  // Off the doorbell list first: run_on's wait hook runs main's loop during the teardown.
  Session *s = it->second.get();
  std::erase(live_sessions_, s);
  destroy_session(*s);
  sessions_.erase(it);
  ++mctr_.sessions_closed;
  rebuild_lists();
}

void Daemon::close_all() {
  live_sessions_.clear();
  for (auto &kv : sessions_) {
    destroy_session(*kv.second);
    ++mctr_.sessions_closed;
  }
  sessions_.clear();
  rebuild_lists();
}

std::vector<uint64_t> Daemon::session_ids() const {
  std::vector<uint64_t> v;
  for (const auto &kv : sessions_)
    v.push_back(kv.first);
  return v;
}

void Daemon::rebuild_lists() {
  live_sessions_.clear();
  for (auto &kv : sessions_)
    live_sessions_.push_back(kv.second.get());
}

int Daemon::do_open_context(Session &s, ctl::Message &, Reply &r) {
  if (!s.has_db) {
    const uint32_t slots = pow2_at_least(2 * (opt_.quota.qps + opt_.quota.srqs));
    const int rc = make_ring("uroce-doorbell", abi::RingKind::kDoorbell, 0, sizeof(abi::Doorbell),
                             slots, &s.db_mem);
    if (rc) return rc;
    if (s.db.attach(s.db_mem.mem.map.addr(), s.db_mem.geo.bytes, sizeof(abi::Doorbell), slots) !=
        shm::RingError::kOk)
      return -EINVAL;
    auto ev = shm::EventFd::create();
    if (!ev) return -ev.error();
    s.async_ev = std::move(ev.value());
    auto dbe = shm::EventFd::create();
    if (!dbe) return -dbe.error();
    s.db_ev = std::move(dbe.value());
    // Edge-triggered, never read: each app write is one wake-up (doc/ipc.md, Sleeping
    // consumers). The ring's consumer is main (worker 0).
    if (!sleepers_.empty() && sleepers_[0] != nullptr) {
      const int wrc = sleepers_[0]->watch(s.db_ev.fd(), WakeSource::kDoorbell, true);
      if (wrc) return wrc;
      s.db_watched = true;
    }
    s.has_db = true;
  }
  ctl::OpenContextReply rep{};
  rep.doorbell = s.db_mem.geo;
  rep.max_qp_per_session = opt_.quota.qps;
  r.set(rep);
  r.fd(s.db_mem.mem.memfd.fd());
  r.fd(s.async_ev.fd());
  r.fd(s.db_ev.fd());
  return 0;
}

void Daemon::arm_doorbells(bool asleep) noexcept {
  for (Session *s : live_sessions_)
    if (s->has_db) s->db.set_asleep(asleep);
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
  // The app keeps its copy of the eventfd (the same open file): epoll would keep the entry.
  if (s.db_watched) sleepers_[0]->unwatch(s.db_ev.fd());
  s.db_watched = false;
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
