// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: queue pairs (create / modify / query / destroy; posting is in post.cc).
#include <errno.h>

#include <cstring>
#include <new>

#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

// ---------------------------------------------------------------------------------------------
// QP
// ---------------------------------------------------------------------------------------------
namespace uroce::verbs {
ibv_qp *create_qp_ex_op(ibv_context *context, ibv_qp_init_attr_ex *attr) noexcept {
  if (context == nullptr || attr == nullptr) return fail_null<ibv_qp>(EINVAL);
  const uint32_t known =
      IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  if (attr->comp_mask & ~known) return fail_null<ibv_qp>(EOPNOTSUPP);  // XRC, TSO, RSS, ...
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)
    return fail_null<ibv_qp>(EOPNOTSUPP);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr)
    return fail_null<ibv_qp>(EINVAL);
  if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC && attr->qp_type != IBV_QPT_UD)
    return fail_null<ibv_qp>(EOPNOTSUPP);
  if (attr->send_cq == nullptr || attr->recv_cq == nullptr) return fail_null<ibv_qp>(EINVAL);
  // Objects of another context (another daemon session) have handles that mean nothing here,
  // or another object: refuse them (rdma-core: the kernel finds no such handle, EINVAL).
  if (attr->pd->context != context || attr->send_cq->context != context ||
      attr->recv_cq->context != context || (attr->srq && attr->srq->context != context))
    return fail_null<ibv_qp>(EINVAL);
  uint64_t ops = 0;
  if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    ops = attr->send_ops_flags;
    const uint64_t ok =
        attr->qp_type == IBV_QPT_UD ? uint64_t{IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM}
        : attr->qp_type == IBV_QPT_UC
            ? uint64_t{IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                       IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                       IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV}
            : uint64_t{IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                       IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                       IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW |
                       IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV};
    if (ops & ~ok) return fail_null<ibv_qp>(EOPNOTSUPP);
  }
  Context *c = ctx_of(context);
  auto *q = new (std::nothrow) Qp();
  if (q == nullptr) return fail_null<ibv_qp>(ENOMEM);
  std::memset(&q->qpx, 0, sizeof q->qpx);
  ctl::CreateQpPayload p{};
  p.pd = pd_handle(attr->pd);
  p.qp_type = attr->qp_type;
  p.send_cq = attr->send_cq->handle;
  p.recv_cq = attr->recv_cq->handle;
  p.srq = attr->srq ? attr->srq->handle : 0;
  p.max_send_wr = attr->cap.max_send_wr;
  p.max_recv_wr = attr->srq ? 0 : attr->cap.max_recv_wr;
  p.max_send_sge = attr->cap.max_send_sge;
  p.max_recv_sge = attr->srq ? 0 : attr->cap.max_recv_sge;
  p.max_inline_data = attr->cap.max_inline_data;
  p.sq_sig_all = attr->sq_sig_all ? 1 : 0;
  const int rc = ctl_call(c, [&](client::Context &k) { return k.create_qp(p, &q->c); });
  if (rc) {
    delete q;
    return fail_null<ibv_qp>(rc);
  }
  q->ctx = c;
  q->pd_handle = p.pd;
  q->send_ops_flags = ops;
  const ctl::CreateQpReply &r = q->c->caps;
  attr->cap.max_send_wr = r.max_send_wr;
  attr->cap.max_send_sge = r.max_send_sge;
  attr->cap.max_inline_data = r.max_inline_data;
  attr->cap.max_recv_wr = attr->srq ? 0 : r.max_recv_wr;
  attr->cap.max_recv_sge = attr->srq ? 0 : r.max_recv_sge;
  ibv_qp &b = q->qpx.qp_base;
  b.context = context;
  b.qp_context = attr->qp_context;
  b.pd = attr->pd;
  b.send_cq = attr->send_cq;
  b.recv_cq = attr->recv_cq;
  b.srq = attr->srq;
  b.handle = q->c->qpn;
  b.qp_num = q->c->qpn;
  b.state = IBV_QPS_RESET;
  b.qp_type = attr->qp_type;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  b.events_completed = 0;
  install_ex_ops(q);
  std::lock_guard<std::mutex> g(c->ctl_mu);
  try {
    c->qps[b.qp_num] = q;
  } catch (...) {
  }
  return &b;
}
// ibv_modify_qp_rate_limit: the QP's maximum send rate (kbit/s, 0: none), as IBV_QP_RATE_LIMIT.
// max_burst_sz and typical_pkt_sz are accepted and not used: the pacer's burst is a few MTUs.
int modify_qp_rate_limit_op(ibv_qp *qp, ibv_qp_rate_limit_attr *attr) noexcept {
  if (qp == nullptr || attr == nullptr || attr->comp_mask != 0) return EINVAL;
  ibv_qp_attr a{};
  a.rate_limit = attr->rate_limit;
  return ibv_modify_qp(qp, &a, IBV_QP_RATE_LIMIT);
}

}  // namespace uroce::verbs

UV_EXPORT ibv_qp *ibv_create_qp(ibv_pd *pd, ibv_qp_init_attr *attr) {
  if (pd == nullptr || attr == nullptr) return fail_null<ibv_qp>(EINVAL);
  ibv_qp_init_attr_ex x{};
  x.qp_context = attr->qp_context;
  x.send_cq = attr->send_cq;
  x.recv_cq = attr->recv_cq;
  x.srq = attr->srq;
  x.cap = attr->cap;
  x.qp_type = attr->qp_type;
  x.sq_sig_all = attr->sq_sig_all;
  x.comp_mask = IBV_QP_INIT_ATTR_PD;
  x.pd = pd;
  ibv_qp *q = create_qp_ex_op(pd->context, &x);
  if (q) attr->cap = x.cap;
  return q;
}

UV_EXPORT ibv_qp_ex *ibv_qp_to_qp_ex(ibv_qp *qp) {
  // Every uroce QP supports the ibv_wr_* API (its ops are installed at creation).
  return qp ? &qp_of(qp)->qpx : nullptr;
}

UV_EXPORT int ibv_modify_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask) {
  if (qp == nullptr || attr == nullptr) return EINVAL;
  Qp *q = qp_of(qp);
  constexpr int kKnown =
      IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY | IBV_QP_ACCESS_FLAGS |
      IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT |
      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC |
      IBV_QP_ALT_PATH | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
      IBV_QP_PATH_MIG_STATE | IBV_QP_CAP | IBV_QP_DEST_QPN | IBV_QP_RATE_LIMIT;
  if (mask & ~kKnown) return EOPNOTSUPP;
  if (mask & IBV_QP_ALT_PATH) return EOPNOTSUPP;  // no automatic path migration
  ctl::QpAttrPayload a{};
  a.qp_state = attr->qp_state;
  a.cur_qp_state = attr->cur_qp_state;
  a.path_mtu = attr->path_mtu;
  a.qkey = attr->qkey;
  a.rq_psn = attr->rq_psn;
  a.sq_psn = attr->sq_psn;
  a.dest_qp_num = attr->dest_qp_num;
  a.qp_access_flags = static_cast<uint32_t>(attr->qp_access_flags);
  a.max_send_wr = attr->cap.max_send_wr;
  a.max_recv_wr = attr->cap.max_recv_wr;
  a.max_send_sge = attr->cap.max_send_sge;
  a.max_recv_sge = attr->cap.max_recv_sge;
  a.max_inline_data = attr->cap.max_inline_data;
  a.pkey_index = attr->pkey_index;
  a.en_sqd_async_notify = attr->en_sqd_async_notify;
  a.sq_draining = attr->sq_draining;
  a.max_rd_atomic = attr->max_rd_atomic;
  a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  a.min_rnr_timer = attr->min_rnr_timer;
  a.port_num = attr->port_num;
  a.timeout = attr->timeout;
  a.retry_cnt = attr->retry_cnt;
  a.rnr_retry = attr->rnr_retry;
  a.path_mig_state = attr->path_mig_state;
  a.rate_limit = attr->rate_limit;  // kbit/s: the pacer's ceiling (doc/congestion.md)
  to_ah_payload(attr->ah_attr, &a.ah_attr);
  const int rc = ctl_call(q->ctx, [&](client::Context &k) {
    return k.modify_qp(*q->c, a, static_cast<uint32_t>(mask));
  });
  if (rc) return rc;
  if (mask & IBV_QP_STATE) {
    qp->state = attr->qp_state;
    // A reset QP starts afresh: its completions still unpolled (flushes from ERR) go.
    if (attr->qp_state == IBV_QPS_RESET) {
      clean_cq(cq_of(qp->send_cq), qp->qp_num);
      if (qp->recv_cq != qp->send_cq) clean_cq(cq_of(qp->recv_cq), qp->qp_num);
    }
  }
  return 0;
}

UV_EXPORT int ibv_query_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask, ibv_qp_init_attr *init_attr) {
  (void)mask;  // everything is returned, as rdma-core providers do
  if (qp == nullptr || attr == nullptr || init_attr == nullptr) return EINVAL;
  Qp *q = qp_of(qp);
  ctl::QueryQpReply r{};
  const int rc = ctl_call(q->ctx, [&](client::Context &k) { return k.query_qp(*q->c, &r); });
  if (rc) return rc;
  const ctl::QpAttrPayload &a = r.attr;
  std::memset(attr, 0, sizeof *attr);
  attr->qp_state = static_cast<ibv_qp_state>(a.qp_state);
  attr->cur_qp_state = static_cast<ibv_qp_state>(a.cur_qp_state);
  attr->path_mtu = static_cast<ibv_mtu>(a.path_mtu);
  attr->path_mig_state = static_cast<ibv_mig_state>(a.path_mig_state);
  attr->qkey = a.qkey;
  attr->rq_psn = a.rq_psn;
  attr->sq_psn = a.sq_psn;
  attr->dest_qp_num = a.dest_qp_num;
  attr->qp_access_flags = static_cast<unsigned>(a.qp_access_flags);
  attr->cap.max_send_wr = a.max_send_wr;
  attr->cap.max_recv_wr = a.max_recv_wr;
  attr->cap.max_send_sge = a.max_send_sge;
  attr->cap.max_recv_sge = a.max_recv_sge;
  attr->cap.max_inline_data = a.max_inline_data;
  from_ah_payload(a.ah_attr, &attr->ah_attr);
  attr->rate_limit = a.rate_limit;
  attr->pkey_index = a.pkey_index;
  attr->en_sqd_async_notify = a.en_sqd_async_notify;
  attr->sq_draining = a.sq_draining;
  attr->max_rd_atomic = a.max_rd_atomic;
  attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
  attr->min_rnr_timer = a.min_rnr_timer;
  attr->port_num = a.port_num;
  attr->timeout = a.timeout;
  attr->retry_cnt = a.retry_cnt;
  attr->rnr_retry = a.rnr_retry;
  std::memset(init_attr, 0, sizeof *init_attr);
  init_attr->qp_context = qp->qp_context;
  init_attr->send_cq = qp->send_cq;
  init_attr->recv_cq = qp->recv_cq;
  init_attr->srq = qp->srq;
  init_attr->cap = attr->cap;
  init_attr->qp_type = qp->qp_type;
  init_attr->sq_sig_all = static_cast<int>(r.init.sq_sig_all);
  qp->state = attr->qp_state;  // the daemon's view (e.g. ERR after a failed WQE)
  return 0;
}

UV_EXPORT int ibv_query_qp_data_in_order(ibv_qp *qp, ibv_wr_opcode op, uint32_t flags) {
  (void)qp, (void)op, (void)flags;
  return 0;  // no guarantee beyond the completion (rdma-core's answer for most devices)
}

UV_EXPORT int ibv_destroy_qp(ibv_qp *qp) {
  if (qp == nullptr) return EINVAL;
  Qp *q = qp_of(qp);
  Context *c = q->ctx;
  {
    std::lock_guard<std::mutex> g(c->ctl_mu);
    const int rc = c->cli->destroy_qp(*q->c);
    if (rc) return rc;
    c->qps.erase(qp->qp_num);
  }
  purge_async_events(c, EventObj::kQp, qp->qp_num);
  pthread_mutex_lock(&qp->mutex);
  while (qp->events_completed != q->async_events)
    pthread_cond_wait(&qp->cond, &qp->mutex);
  pthread_mutex_unlock(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  pthread_mutex_destroy(&qp->mutex);
  delete q;
  return 0;
}
