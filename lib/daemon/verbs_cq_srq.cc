// SPDX-License-Identifier: BSD-3-Clause
// Verbs handlers: completion queues and shared receive queues, and their binding to a worker.
// A CQ or SRQ is created as a ring only; the engine object over that ring is made on the
// worker of the first QP that uses it (cq_on / srq_on, from create_qp), and lives there.
#include "daemon/objects.h"

#include <cerrno>
#include <cstdio>

namespace uroce::daemon {

namespace {

// The first free handle of a table indexed by handle (slot 0 unused); 0 when full.
template <class T>
uint32_t free_handle(const std::vector<T *> &t) noexcept {
  for (uint32_t h = 1; h < t.size(); ++h)
    if (t[h] == nullptr) return h;
  return 0;
}

}  // namespace

int Daemon::do_create_cq(Session &s, ctl::Message &m, Reply &r) {
  ctl::CreateCqPayload p{};
  if (!m.payload_as(&p) || p.cqe == 0 || p.cqe > cfg0_.max_cqe) return -EINVAL;
  const uint32_t depth = pow2_at_least(p.cqe);
  if (depth > cfg0_.max_cqe) return -EINVAL;
  if (const int q = check_quota(s, QuotaKind::kCqs)) return q;
  const uint32_t h = free_handle(cq_by_handle_);
  if (h == 0) return -ENOMEM;
  auto c = std::make_unique<Cq>();
  int rc = make_ring("uroce-cq", abi::RingKind::kCompletion, 0, sizeof(abi::Cqe), depth, &c->mem);
  if (rc) return rc;
  auto ev = shm::EventFd::create();
  if (!ev) return -ev.error();
  c->ev = std::move(ev.value());
  c->handle = h;
  c->depth = depth;
  c->owner = &s;
  c->lanes.resize(w_.size());
  ctl::CreateCqReply rep{};
  rep.cq = c->handle;
  rep.cqe = depth;
  rep.ring = c->mem.geo;
  r.set(rep);
  r.fd(c->mem.mem.memfd.fd());
  r.fd(c->ev.fd());
  cq_by_handle_[h] = c.get();
  s.cqs[h] = std::move(c);
  return 0;
}

// The owner worker (the first QP's) writes the app's ring; any other worker that gets a QP
// using this CQ writes a private forward ring of the same depth, which the owner drains
// (bridge_out). Bindings last as long as the CQ.
uint32_t Daemon::cq_on(Cq &c, unsigned w) {
  Cq::Lane &lane = c.lanes[w];
  if (lane.eh != 0) return lane.eh;
  static_assert(LocalRing<abi::Cqe>::slot_size() == sizeof(abi::Cqe));
  transport::RingQueues::CqMem mem;
  const bool own = c.worker == kUnbound;
  std::unique_ptr<LocalRing<abi::Cqe>> fwd;
  if (own) {
    mem.mem = c.mem.mem.map.addr();
    mem.bytes = c.mem.geo.bytes;
    mem.event = &Daemon::cq_event;
    mem.ctx = &c;
  } else {
    fwd = std::make_unique<LocalRing<abi::Cqe>>(c.depth);
    mem.mem = fwd->mem();
    mem.bytes = fwd->bytes();
    lane.daemon = this;
    lane.owner = static_cast<unsigned>(c.worker);
    mem.event = &Daemon::fwd_event;
    mem.ctx = &lane;
  }
  mem.slot_size = sizeof(abi::Cqe);
  mem.slots = c.depth;
  uint32_t eh = 0;
  run_on(w, [&] {
    Worker &W = *w_[w];
    eh = W.eng->create_cq(c.depth, mem);
    if (eh == 0) return;
    W.cq_by_eh[eh] = &c;
    if (own) c.ctr = &W.ctr;
  });
  if (eh == 0) return 0;
  if (own) {
    c.worker = static_cast<int>(w);
  } else {
    const unsigned o = static_cast<unsigned>(c.worker);
    LocalRing<abi::Cqe> *ring = fwd.get();
    run_on(o, [&] { w_[o]->forward.push_back(CqForward{&c, ring}); });
    lane.fwd = std::move(fwd);
  }
  lane.eh = eh;
  return eh;
}

void Daemon::destroy_cq_obj(Cq &c) {
  cq_by_handle_[c.handle] = nullptr;
  if (c.worker == kUnbound) return;
  const unsigned o = static_cast<unsigned>(c.worker);
  // The owner stops draining the forward rings before they go.
  run_on(o, [&] { std::erase_if(w_[o]->forward, [&](const CqForward &f) { return f.cq == &c; }); });
  for (unsigned w = 0; w < w_.size(); ++w) {
    Cq::Lane &lane = c.lanes[w];
    if (lane.eh == 0) continue;
    run_on(w, [&] {
      w_[w]->cq_by_eh[lane.eh] = nullptr;
      w_[w]->eng->destroy_cq(lane.eh);
    });
    lane.eh = 0;
    lane.fwd.reset();
  }
}

int Daemon::do_destroy_cq(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h)) return -EINVAL;
  auto it = s.cqs.find(h.handle);
  if (it == s.cqs.end()) return -EINVAL;
  Cq &c = *it->second;
  if (c.qp_refs) return -EBUSY;
  destroy_cq_obj(c);
  s.cqs.erase(it);
  return 0;
}

// ibv_resize_cq. The owner's engine copies the completions the app has not consumed into a new
// ring and writes there from then on (the app, which holds its CQ lock meanwhile, maps the new
// ring from the reply). Forward rings of other workers keep their depth: they are drained into
// the app's ring at every pass, whatever its size.
int Daemon::do_resize_cq(Session &s, ctl::Message &m, Reply &r) {
  ctl::ResizeCqPayload p{};
  if (!m.payload_as(&p) || p.cqe == 0 || p.cqe > cfg0_.max_cqe) return -EINVAL;
  auto it = s.cqs.find(p.cq);
  if (it == s.cqs.end()) return -EINVAL;
  Cq &c = *it->second;
  const uint32_t depth = pow2_at_least(p.cqe);
  if (depth > cfg0_.max_cqe) return -EINVAL;
  RingMem mem;
  int rc = make_ring("uroce-cq", abi::RingKind::kCompletion, 0, sizeof(abi::Cqe), depth, &mem);
  if (rc) return rc;
  if (c.worker == kUnbound) {  // no engine has written it: only the arm to carry over
    std::atomic_ref<uint32_t>(static_cast<abi::RingHeader *>(mem.mem.map.addr())->notify)
        .store(
            std::atomic_ref<uint32_t>(static_cast<abi::RingHeader *>(c.mem.mem.map.addr())->notify)
                .load(std::memory_order_relaxed),
            std::memory_order_relaxed);
  } else {
    const unsigned o = static_cast<unsigned>(c.worker);
    const uint32_t eh = c.lanes[o].eh;
    run_on(o, [&] {
      transport::RingCompletionQueue *q = w_[o]->eng->cq_queue(eh);
      rc = q ? q->move_to(mem.mem.map.addr(), mem.geo.bytes, depth) : EINVAL;
    });
    if (rc) return -rc;
  }
  c.mem = std::move(mem);  // the old ring goes: no engine writes it any more
  c.depth = depth;
  ctl::CreateCqReply rep{};
  rep.cq = c.handle;
  rep.cqe = depth;
  rep.ring = c.mem.geo;
  r.set(rep);
  r.fd(c.mem.mem.memfd.fd());
  return 0;
}

int Daemon::do_create_srq(Session &s, ctl::Message &m, Reply &r) {
  ctl::CreateSrqPayload p{};
  if (!m.payload_as(&p) || !s.has_db || !s.pds.count(p.pd)) return -EINVAL;
  if (p.max_wr == 0 || p.max_wr > transport::kMaxWr || p.max_sge == 0 || p.max_sge > 31)
    return -EINVAL;
  if (const int q = check_quota(s, QuotaKind::kSrqs)) return q;
  const uint32_t slot = abi::recv_slot_size(p.max_sge);
  const uint32_t slots = pow2_at_least(p.max_wr);
  if (p.srq_limit > slots) return -EINVAL;  // the engine's modify_srq rule
  const uint32_t h = free_handle(srq_by_handle_);
  if (h == 0) return -ENOMEM;
  auto q = std::make_unique<Srq>();
  int rc = make_ring("uroce-srq", abi::RingKind::kSharedRecvQueue, 0, slot, slots, &q->mem);
  if (rc) return rc;
  q->handle = h;
  q->owner = &s;
  q->pd = p.pd;
  q->slots = slots;
  q->max_sge = p.max_sge;
  q->limit = p.srq_limit;
  ctl::CreateSrqReply rep{};
  rep.srq = h;
  rep.max_wr = slots;
  rep.max_sge = p.max_sge;
  rep.ring = q->mem.geo;
  r.set(rep);
  r.fd(q->mem.mem.memfd.fd());
  srq_by_handle_[h] = q.get();
  s.srqs[h] = std::move(q);
  return 0;
}

uint32_t Daemon::srq_on(Srq &q, unsigned w) {
  if (q.worker != kUnbound) return static_cast<unsigned>(q.worker) == w ? q.eh : 0;
  transport::RingQueues::SrqMem mem;
  mem.mem = q.mem.mem.map.addr();
  mem.bytes = q.mem.geo.bytes;
  mem.slot_size = q.mem.geo.slot_size;
  mem.slots = q.slots;
  uint32_t eh = 0;
  run_on(w, [&] {
    Worker &W = *w_[w];
    try {
      eh = W.eng->create_srq(q.pd, q.slots, q.max_sge, mem);
    } catch (const std::bad_alloc &) {
      eh = 0;
    }
    if (eh == 0) return;
    if (q.limit) W.eng->modify_srq(eh, q.limit);
    W.srq_by_eh[eh] = &q;
  });
  if (eh == 0) return 0;
  q.worker = static_cast<int>(w);
  q.eh = eh;
  return eh;
}

int Daemon::do_modify_srq(Session &s, ctl::Message &m, Reply &) {
  ctl::ModifySrqPayload p{};
  if (!m.payload_as(&p) || !s.srqs.count(p.srq)) return -EINVAL;
  Srq &q = *s.srqs[p.srq];
  if (p.srq_limit > q.slots) return -EINVAL;
  if (q.worker == kUnbound) {  // armed when a QP binds it (no WQE is taken before)
    q.limit = p.srq_limit;
    return 0;
  }
  int rc = 0;
  run_on(static_cast<unsigned>(q.worker),
         [&] { rc = w_[q.worker]->eng->modify_srq(q.eh, p.srq_limit); });
  return -rc;
}

int Daemon::do_destroy_srq(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h)) return -EINVAL;
  auto it = s.srqs.find(h.handle);
  if (it == s.srqs.end()) return -EINVAL;
  Srq &q = *it->second;
  if (q.qp_refs) return -EBUSY;  // checked here: the QPs are in their owner's engine only
  destroy_srq_obj(q);
  s.srqs.erase(it);
  return 0;
}

}  // namespace uroce::daemon
