// SPDX-License-Identifier: BSD-3-Clause
// Verbs handlers: completion queues and shared receive queues.
#include "daemon/objects.h"

#include <cerrno>
#include <cstdio>

namespace uroce::daemon {

int Daemon::do_create_cq(Session &s, ctl::Message &m, Reply &r) {
  ctl::CreateCqPayload p{};
  if (!m.payload_as(&p) || p.cqe == 0 || p.cqe > cfg0_.max_cqe) return -EINVAL;
  const uint32_t depth = pow2_at_least(p.cqe);
  if (depth > cfg0_.max_cqe) return -EINVAL;
  if (const int q = check_quota(s, QuotaKind::kCqs)) return q;
  auto c = std::make_unique<Cq>();
  int rc = make_ring("uroce-cq", abi::RingKind::kCompletion, 0, sizeof(abi::Cqe), depth, &c->mem);
  if (rc) return rc;
  auto ev = shm::EventFd::create();
  if (!ev) return -ev.error();
  c->ev = std::move(ev.value());
  if (c->ring.attach(c->mem.mem.map.addr(), c->mem.geo.bytes, sizeof(abi::Cqe), depth) !=
      shm::RingError::kOk)
    return -EINVAL;
  c->handle = replicate(
      [depth](transport::EngineCore &e) -> uint32_t {
        try {
          return e.create_cq(depth);
        } catch (const std::bad_alloc &) {
          return 0;
        }
      },
      [](transport::EngineCore &e, uint32_t h) { e.destroy_cq(h); });
  if (c->handle == 0) return -ENOMEM;
  c->owner = &s;
  ctl::CreateCqReply rep{};
  rep.cq = c->handle;
  rep.cqe = depth;
  rep.ring = c->mem.geo;
  r.set(rep);
  r.fd(c->mem.mem.memfd.fd());
  r.fd(c->ev.fd());
  cq_by_handle_[c->handle] = c.get();
  s.cqs[c->handle] = std::move(c);
  rebuild_lists();
  return 0;
}

int Daemon::do_destroy_cq(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h)) return -EINVAL;
  auto it = s.cqs.find(h.handle);
  if (it == s.cqs.end()) return -EINVAL;
  Cq &c = *it->second;
  if (c.qp_refs) return -EBUSY;  // checked here: the QPs are in their owner's engine only
  cq_by_handle_[h.handle] = nullptr;
  if (c.worker != kUnbound)
    run_on(static_cast<unsigned>(c.worker),
           [&] { w_[c.worker]->cq_by_handle[c.handle] = nullptr; });
  on_all([&](transport::EngineCore &e) { e.destroy_cq(c.handle); });
  s.cqs.erase(it);
  rebuild_lists();
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
  auto q = std::make_unique<Srq>();
  int rc = make_ring("uroce-srq", abi::RingKind::kSharedRecvQueue, 0, slot, slots, &q->mem);
  if (rc) return rc;
  if (q->ring.attach(q->mem.mem.map.addr(), q->mem.geo.bytes, slot, slots) != shm::RingError::kOk)
    return -EINVAL;
  q->ring.defer_release();  // as a QP's RQ (do_create_qp): max_wr is the ring's slot count
  q->handle = replicate(
      [&p, slots](transport::EngineCore &e) -> uint32_t {
        try {
          return e.create_srq(p.pd, slots, p.max_sge);
        } catch (const std::bad_alloc &) {
          return 0;
        }
      },
      [](transport::EngineCore &e, uint32_t h) { e.destroy_srq(h); });
  if (q->handle == 0) return -ENOMEM;
  if (p.srq_limit) {
    run_on(0, [&] { rc = w_[0]->eng->modify_srq(q->handle, p.srq_limit); });
    if (rc) {
      on_all([&](transport::EngineCore &e) { e.destroy_srq(q->handle); });
      return -rc;
    }
    for (unsigned w = 1; w < w_.size(); ++w)
      run_on(w, [&] { w_[w]->eng->modify_srq(q->handle, p.srq_limit); });
  }
  q->owner = &s;
  ctl::CreateSrqReply rep{};
  rep.srq = q->handle;
  rep.max_wr = slots;
  rep.max_sge = p.max_sge;
  rep.ring = q->mem.geo;
  r.set(rep);
  r.fd(q->mem.mem.memfd.fd());
  srq_by_handle_[q->handle] = q.get();
  s.srqs[q->handle] = std::move(q);
  return 0;
}

int Daemon::do_modify_srq(Session &s, ctl::Message &m, Reply &) {
  ctl::ModifySrqPayload p{};
  if (!m.payload_as(&p) || !s.srqs.count(p.srq)) return -EINVAL;
  // The SRQ exists in every worker's engine (do_create_srq): arm it everywhere, as creation
  // does; worker 0's engine validates the limit (the engines are identical).
  int rc = 0;
  run_on(0, [&] { rc = w_[0]->eng->modify_srq(p.srq, p.srq_limit); });
  if (rc) return -rc;
  for (unsigned w = 1; w < w_.size(); ++w)
    run_on(w, [&] { w_[w]->eng->modify_srq(p.srq, p.srq_limit); });
  return 0;
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
