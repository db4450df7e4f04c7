// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: shared receive queues (control path; posting is in post.cc).
#include <errno.h>

#include <cstring>
#include <new>

#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

// ---------------------------------------------------------------------------------------------
// SRQ
// ---------------------------------------------------------------------------------------------
namespace uroce::verbs {
ibv_srq *create_srq_ex_op(ibv_context *context, ibv_srq_init_attr_ex *attr) noexcept {
  if (context == nullptr || attr == nullptr) return fail_null<ibv_srq>(EINVAL);
  const uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  if (attr->comp_mask & ~known) return fail_null<ibv_srq>(EOPNOTSUPP);  // XRC, CQ, TM
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC)
    return fail_null<ibv_srq>(EOPNOTSUPP);
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || attr->pd == nullptr ||
      attr->pd->context != context)
    return fail_null<ibv_srq>(EINVAL);
  Context *c = ctx_of(context);
  auto *s = new (std::nothrow) Srq();
  if (s == nullptr) return fail_null<ibv_srq>(ENOMEM);
  ctl::CreateSrqPayload p{pd_handle(attr->pd), attr->attr.max_wr, attr->attr.max_sge,
                          attr->attr.srq_limit};
  const int rc = ctl_call(c, [&](client::Context &k) { return k.create_srq(p, &s->c); });
  if (rc) {
    delete s;
    return fail_null<ibv_srq>(rc);
  }
  s->ctx = c;
  s->max_wr = s->c->caps.max_wr;
  s->max_sge = s->c->caps.max_sge;
  s->limit = attr->attr.srq_limit;
  attr->attr.max_wr = s->max_wr;
  attr->attr.max_sge = s->max_sge;
  ibv_srq &x = s->srq;
  x.context = context;
  x.srq_context = attr->srq_context;
  x.pd = attr->pd;
  x.handle = s->c->handle;
  pthread_mutex_init(&x.mutex, nullptr);
  pthread_cond_init(&x.cond, nullptr);
  x.events_completed = 0;
  std::lock_guard<std::mutex> g(c->ctl_mu);
  try {
    c->srqs[x.handle] = s;
  } catch (...) {
  }
  return &x;
}
}  // namespace uroce::verbs

UV_EXPORT ibv_srq *ibv_create_srq(ibv_pd *pd, ibv_srq_init_attr *attr) {
  if (pd == nullptr || attr == nullptr) return fail_null<ibv_srq>(EINVAL);
  ibv_srq_init_attr_ex x{};
  x.srq_context = attr->srq_context;
  x.attr = attr->attr;
  x.comp_mask = IBV_SRQ_INIT_ATTR_PD;
  x.pd = pd;
  ibv_srq *s = create_srq_ex_op(pd->context, &x);
  if (s) attr->attr = x.attr;
  return s;
}

UV_EXPORT int ibv_modify_srq(ibv_srq *srq, ibv_srq_attr *attr, int mask) {
  if (srq == nullptr || attr == nullptr) return EINVAL;
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  if (mask & IBV_SRQ_MAX_WR) return EOPNOTSUPP;  // the SRQ ring has a fixed size
  if (!(mask & IBV_SRQ_LIMIT)) return 0;
  Srq *s = srq_of(srq);
  if (attr->srq_limit > s->max_wr) return EINVAL;
  const int rc =
      ctl_call(s->ctx, [&](client::Context &k) { return k.modify_srq(*s->c, attr->srq_limit); });
  if (rc == 0) s->limit = attr->srq_limit;
  return rc;
}

UV_EXPORT int ibv_query_srq(ibv_srq *srq, ibv_srq_attr *attr) {
  if (srq == nullptr || attr == nullptr) return EINVAL;
  Srq *s = srq_of(srq);
  attr->max_wr = s->max_wr;
  attr->max_sge = s->max_sge;
  attr->srq_limit = s->limit;
  return 0;
}

UV_EXPORT int ibv_destroy_srq(ibv_srq *srq) {
  if (srq == nullptr) return EINVAL;
  Srq *s = srq_of(srq);
  Context *c = s->ctx;
  {
    std::lock_guard<std::mutex> g(c->ctl_mu);
    const int rc = c->cli->destroy_srq(*s->c);
    if (rc) return rc;
    c->srqs.erase(srq->handle);
  }
  purge_async_events(c, EventObj::kSrq, srq->handle);
  pthread_mutex_lock(&srq->mutex);
  while (srq->events_completed != s->async_events)
    pthread_cond_wait(&srq->cond, &srq->mutex);
  pthread_mutex_unlock(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  pthread_mutex_destroy(&srq->mutex);
  delete s;
  return 0;
}
