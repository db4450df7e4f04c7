// SPDX-License-Identifier: BSD-3-Clause
// Verbs handlers: queue pairs (create, modify, query, destroy).
#include "daemon/objects.h"

#include <cerrno>
#include <cstdio>

namespace uroce::daemon {

int Daemon::do_create_qp(Session &s, ctl::Message &m, Reply &r) {
  ctl::CreateQpPayload p{};
  if (!m.payload_as(&p) || !s.has_db) return -EINVAL;
  if (!s.pds.count(p.pd) || !s.cqs.count(p.send_cq) || !s.cqs.count(p.recv_cq)) return -EINVAL;
  if (p.srq && !s.srqs.count(p.srq)) return -EINVAL;
  if (p.qp_type < 2 || p.qp_type > 4 || p.sq_sig_all > 1) return -EINVAL;
  if (p.max_send_wr > transport::kMaxWr || p.max_recv_wr > transport::kMaxWr ||
      p.max_send_sge > transport::kMaxSge || p.max_recv_sge > transport::kMaxSge)
    return -EINVAL;
  if (const int q = check_quota(s, QuotaKind::kQps)) return q;
  const uint32_t ssge = p.max_send_sge ? p.max_send_sge : 1;
  const uint32_t rsge = p.max_recv_sge ? p.max_recv_sge : 1;
  const uint32_t sslot = abi::send_slot_size(ssge, p.max_inline_data);
  const uint32_t rslot = abi::recv_slot_size(rsge);
  if (sslot == 0 || rslot == 0 || p.max_inline_data > transport::kMaxInline) return -EINVAL;

  transport::QpInitAttr init;
  init.qp_type = static_cast<transport::QpType>(p.qp_type);
  init.pd = p.pd;
  init.send_cq = p.send_cq;
  init.recv_cq = p.recv_cq;
  init.srq = p.srq;
  init.has_srq = p.srq != 0;
  // A work queue holds as many WRs as its ring has slots (a power of two at least what was
  // asked; reported back as the QP's cap, as rxe and ConnectX round up): a slot is freed when
  // its WR completes (the engine's queue is the ring), so ibv_post_* refuses with ENOMEM at
  // exactly that cap.
  init.cap.max_send_wr = pow2_at_least(p.max_send_wr);
  init.cap.max_recv_wr = p.srq ? 0 : pow2_at_least(p.max_recv_wr);
  init.cap.max_send_sge = ssge;
  init.cap.max_recv_sge = rsge;
  init.cap.max_inline_data = p.max_inline_data;
  init.sq_sig_all = p.sq_sig_all != 0;

  auto q = std::make_unique<Qp>();
  const uint32_t sslots = init.cap.max_send_wr;
  int rc = make_ring("uroce-sq", abi::RingKind::kSendQueue, 0, sslot, sslots, &q->sq_mem);
  if (rc) return rc;
  transport::RingQueues::QpMem mem;
  mem.sq = {q->sq_mem.mem.map.addr(), q->sq_mem.geo.bytes, sslot, sslots};
  if (!p.srq) {
    const uint32_t rslots = init.cap.max_recv_wr;
    rc = make_ring("uroce-rq", abi::RingKind::kRecvQueue, 0, rslot, rslots, &q->rq_mem);
    if (rc) return rc;
    mem.rq = {q->rq_mem.mem.map.addr(), q->rq_mem.geo.bytes, rslot, rslots};
    q->has_rq = true;
  }
  // Placement (doc/ipc.md, "A CQ has one producer"): the SRQ's worker (its ring has one
  // consumer), else the worker of a CQ already bound, else the least loaded one. A CQ bound
  // elsewhere gets a forward ring on this worker: no valid create_qp is refused.
  Cq *scq = s.cqs[p.send_cq].get(), *rcq = s.cqs[p.recv_cq].get();
  Srq *srq = p.srq ? s.srqs[p.srq].get() : nullptr;
  const int bound[3] = {srq ? srq->worker : kUnbound, scq->worker, rcq->worker};
  const int w = place_qp(bound, 3, load_.data(), load_.size());
  if (w == kUnbound) return -EINVAL;  // cannot be: bindings name workers
  q->worker = static_cast<unsigned>(w);
  q->owner = &s;
  q->type = init.qp_type;
  q->scq = scq;
  q->rcq = rcq;
  q->srq = srq;
  q->pd = p.pd;
  init.send_cq = cq_on(*scq, q->worker);
  init.recv_cq = cq_on(*rcq, q->worker);
  init.srq = srq ? srq_on(*srq, q->worker) : 0;
  if (init.send_cq == 0 || init.recv_cq == 0 || (srq && init.srq == 0)) return -ENOMEM;
  uint32_t qpn = 0;
  run_on(q->worker, [&] {
    Worker &W = *w_[q->worker];
    try {
      qpn = W.eng->create_qp(init, mem);
    } catch (const std::bad_alloc &) {
      qpn = 0;
    }
    if (qpn == 0) return;
    q->qpn = qpn;
    W.qp_by_index[W.eng->qp_slot(qpn)] = q.get();
  });
  if (qpn == 0) return -ENOMEM;
  ++scq->qp_refs;
  ++rcq->qp_refs;
  if (srq) ++srq->qp_refs;
  ++s.pd_qps[p.pd];
  ++load_[q->worker];
  ctl::CreateQpReply rep{};
  rep.qpn = qpn;
  rep.max_send_wr = init.cap.max_send_wr;
  rep.max_recv_wr = init.cap.max_recv_wr;
  rep.max_send_sge = ssge;
  rep.max_recv_sge = rsge;
  rep.max_inline_data = p.max_inline_data;
  rep.sq = q->sq_mem.geo;
  rep.rq = q->rq_mem.geo;
  r.set(rep);
  r.fd(q->sq_mem.mem.memfd.fd());
  if (q->has_rq) r.fd(q->rq_mem.mem.memfd.fd());
  r.fd(s.db[w].ev.fd());  // the eventfd of the QP's doorbell ring (its worker's)
  qp_main_[w][w_[w]->eng->qp_slot(qpn)] = q.get();
  s.qps[qpn] = std::move(q);
  return 0;
}

static_assert(ctl::kRateLimitMinKbps == transport::kRateLimitMinKbps &&
              ctl::kRateLimitMaxKbps == transport::kRateLimitMaxKbps);

int Daemon::do_modify_qp(Session &s, ctl::Message &m, Reply &) {
  ctl::ModifyQpPayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  auto it = s.qps.find(p.qpn);
  if (it == s.qps.end()) return -EINVAL;
  Qp &q = *it->second;
  const ctl::QpAttrPayload &x = p.attr;
  transport::QpAttr a;
  a.qp_state = static_cast<QpState>(x.qp_state);
  a.cur_qp_state = static_cast<QpState>(x.cur_qp_state);
  a.path_mtu = static_cast<transport::Mtu>(x.path_mtu);
  if ((p.attr_mask & transport::kQpPathMtu) && transport::mtu_valid(a.path_mtu) &&
      static_cast<uint32_t>(a.path_mtu) > static_cast<uint32_t>(port_.ib_mtu()))
    a.path_mtu = port_.ib_mtu();  // as rxe: the path MTU never exceeds the port's
  a.qkey = x.qkey;
  a.rq_psn = x.rq_psn;
  a.sq_psn = x.sq_psn;
  a.dest_qp_num = x.dest_qp_num;
  a.qp_access_flags = x.qp_access_flags;
  a.pkey_index = x.pkey_index;
  a.en_sqd_async_notify = x.en_sqd_async_notify != 0;
  a.max_rd_atomic = x.max_rd_atomic;
  a.max_dest_rd_atomic = x.max_dest_rd_atomic;
  a.min_rnr_timer = x.min_rnr_timer;
  a.port_num = x.port_num;
  a.timeout = x.timeout;
  a.retry_cnt = x.retry_cnt;
  a.rnr_retry = x.rnr_retry;
  a.path_mig_state = x.path_mig_state;
  a.rate_limit_kbps = x.rate_limit;
  if (p.attr_mask & transport::kQpAv) {
    const int rc = path_from_ah(x.ah_attr, &a.ah);
    if (rc) return rc;
  }
  int rc = 0;
  // A QP entering RTS reads what the app posted before (the engine activates it).
  run_on(q.worker, [&] { rc = w_[q.worker]->eng->modify_qp(q.qpn, a, p.attr_mask); });
  return -rc;
}

int Daemon::do_query_qp(Session &s, ctl::Message &m, Reply &r) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h) || !s.qps.count(h.handle)) return -EINVAL;
  transport::QpAttr a;
  transport::QpInitAttr init;
  const unsigned ow = s.qps[h.handle]->worker;
  int rc = 0;
  run_on(ow, [&] { rc = w_[ow]->eng->query_qp(h.handle, &a, &init); });
  if (rc) return -rc;
  ctl::QueryQpReply rep{};
  ctl::QpAttrPayload &x = rep.attr;
  x.qp_state = static_cast<uint32_t>(a.qp_state);
  x.cur_qp_state = static_cast<uint32_t>(a.cur_qp_state);
  x.path_mtu = static_cast<uint32_t>(a.path_mtu);
  x.qkey = a.qkey;
  x.rq_psn = a.rq_psn;
  x.sq_psn = a.sq_psn;
  x.dest_qp_num = a.dest_qp_num;
  x.qp_access_flags = a.qp_access_flags;
  x.max_send_wr = a.cap.max_send_wr;
  x.max_recv_wr = a.cap.max_recv_wr;
  x.max_send_sge = a.cap.max_send_sge;
  x.max_recv_sge = a.cap.max_recv_sge;
  x.max_inline_data = a.cap.max_inline_data;
  x.pkey_index = a.pkey_index;
  x.en_sqd_async_notify = a.en_sqd_async_notify;
  x.sq_draining = a.sq_draining;
  x.max_rd_atomic = a.max_rd_atomic;
  x.max_dest_rd_atomic = a.max_dest_rd_atomic;
  x.min_rnr_timer = a.min_rnr_timer;
  x.port_num = 1;
  x.timeout = a.timeout;
  x.retry_cnt = a.retry_cnt;
  x.rnr_retry = a.rnr_retry;
  x.path_mig_state = a.path_mig_state;
  x.rate_limit = a.rate_limit_kbps;
  std::memcpy(x.ah_attr.dgid, a.ah.dgid.raw, 16);
  x.ah_attr.flow_label = a.ah.flow_label;
  x.ah_attr.hop_limit = a.ah.hop_limit;
  x.ah_attr.traffic_class = static_cast<uint8_t>(a.ah.dscp << 2);
  x.ah_attr.is_global = 1;
  x.ah_attr.port_num = 1;
  for (size_t i = 0; i < port_.gid_count() && i < 256; ++i)
    if (port_.gid(i) == a.ah.sgid) {
      x.ah_attr.sgid_index = static_cast<uint8_t>(i);
      break;
    }
  ctl::CreateQpPayload &n = rep.init;
  n.pd = init.pd;
  n.qp_type = static_cast<uint32_t>(init.qp_type);
  const Qp &qp = *s.qps[h.handle];  // the app's handles, not the engine's
  n.send_cq = qp.scq->handle;
  n.recv_cq = qp.rcq->handle;
  n.srq = qp.srq ? qp.srq->handle : 0;
  n.max_send_wr = init.cap.max_send_wr;
  n.max_recv_wr = init.cap.max_recv_wr;
  n.max_send_sge = init.cap.max_send_sge;
  n.max_recv_sge = init.cap.max_recv_sge;
  n.max_inline_data = init.cap.max_inline_data;
  n.sq_sig_all = init.sq_sig_all;
  r.set(rep);
  return 0;
}

int Daemon::do_destroy_qp(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h)) return -EINVAL;
  auto it = s.qps.find(h.handle);
  if (it == s.qps.end()) return -EINVAL;
  destroy_qp_obj(s, *it->second);
  return 0;
}

}  // namespace uroce::daemon
