// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: completion queues (create / destroy / resize) and completion channels.
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

namespace {
int destroy_cq_now(Cq *q) {
  Context *c = q->ctx;
  int rc;
  {
    std::lock_guard<std::mutex> g(c->ctl_mu);
    rc = c->cli->destroy_cq(*q->c);
    if (rc) return rc;
    c->cqs.erase(q->c->handle);
  }
  purge_async_events(c, EventObj::kCq, q->c->handle);
  // As rdma-core: wait until the app acknowledged every event it got for this CQ.
  pthread_mutex_lock(&q->cq.mutex);
  while (q->cq.comp_events_completed != q->comp_events ||
         q->cq.async_events_completed != q->async_events)
    pthread_cond_wait(&q->cq.cond, &q->cq.mutex);
  pthread_mutex_unlock(&q->cq.mutex);
  if (q->cq.channel) {
    epoll_ctl(q->cq.channel->fd, EPOLL_CTL_DEL, q->c->ev.fd(), nullptr);
    pthread_mutex_lock(&c->vctx.context.mutex);
    --q->cq.channel->refcnt;
    pthread_mutex_unlock(&c->vctx.context.mutex);
  }
  pthread_cond_destroy(&q->cq.cond);
  pthread_mutex_destroy(&q->cq.mutex);
  delete q;
  return 0;
}

}  // namespace

namespace uroce::verbs {
// ---------------------------------------------------------------------------------------------
// CQ
// ---------------------------------------------------------------------------------------------
ibv_cq_ex *create_cq_ex_op(ibv_context *context, ibv_cq_init_attr_ex *attr) noexcept {
  if (context == nullptr || attr == nullptr) return fail_null<ibv_cq_ex>(EINVAL);
  Context *c = ctx_of(context);
  constexpr uint64_t kWcOk = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                             IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                             IBV_WC_EX_WITH_DLID_PATH_BITS;
  // Timestamps, CVLAN, flow tags, tag matching: not produced by uroce.
  if (attr->wc_flags & ~kWcOk) return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  if (attr->comp_mask & ~uint32_t{IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD})
    return fail_null<ibv_cq_ex>(EINVAL);
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
      (attr->flags & ~uint32_t{IBV_CREATE_CQ_ATTR_SINGLE_THREADED}))
    return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  if (attr->cqe == 0 || attr->cqe > c->dattr.max_cqe ||
      attr->comp_vector >= static_cast<uint32_t>(context->num_comp_vectors))
    return fail_null<ibv_cq_ex>(EINVAL);
  if (attr->channel && attr->channel->context != context) return fail_null<ibv_cq_ex>(EINVAL);
  auto *q = new (std::nothrow) Cq();
  if (q == nullptr) return fail_null<ibv_cq_ex>(ENOMEM);
  std::memset(&q->cq, 0, sizeof q->cq);
  q->ctx = c;
  q->wc_flags = attr->wc_flags;
  int rc = ctl_call(c, [&](client::Context &k) { return k.create_cq(attr->cqe, &q->c); });
  if (rc) {
    delete q;
    return fail_null<ibv_cq_ex>(rc);
  }
  ibv_cq_ex &x = q->cq;
  x.context = context;
  x.channel = attr->channel;
  x.cq_context = attr->cq_context;
  x.handle = q->c->handle;
  x.cqe = static_cast<int>(q->c->depth);
  pthread_mutex_init(&x.mutex, nullptr);
  pthread_cond_init(&x.cond, nullptr);
  install_cq_ex_ops(q);
  if (attr->channel) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = q;
    if (epoll_ctl(attr->channel->fd, EPOLL_CTL_ADD, q->c->ev.fd(), &ev) != 0) {
      rc = errno;
      x.channel = nullptr;
      destroy_cq_now(q);
      return fail_null<ibv_cq_ex>(rc);
    }
    pthread_mutex_lock(&context->mutex);
    ++attr->channel->refcnt;
    pthread_mutex_unlock(&context->mutex);
  }
  {
    std::lock_guard<std::mutex> g(c->ctl_mu);
    try {
      c->cqs[x.handle] = q;
    } catch (...) {
    }
  }
  return &x;
}

}  // namespace uroce::verbs

UV_EXPORT ibv_cq *ibv_create_cq(ibv_context *context, int cqe, void *cq_context,
                                ibv_comp_channel *channel, int comp_vector) {
  if (cqe <= 0 || comp_vector < 0) return fail_null<ibv_cq>(EINVAL);
  ibv_cq_init_attr_ex a{};
  a.cqe = static_cast<uint32_t>(cqe);
  a.cq_context = cq_context;
  a.channel = channel;
  a.comp_vector = static_cast<uint32_t>(comp_vector);
  a.wc_flags = IBV_WC_STANDARD_FLAGS;
  ibv_cq_ex *x = create_cq_ex_op(context, &a);
  return x ? ibv_cq_ex_to_cq(x) : nullptr;
}

UV_EXPORT int ibv_destroy_cq(ibv_cq *cq) {
  if (cq == nullptr) return EINVAL;
  return destroy_cq_now(cq_of(cq));
}

// The daemon moves the unpolled completions into a ring of the new depth (EINVAL, as rxe, when
// more are waiting than the new size holds); pollers wait on the CQ's lock meanwhile.
UV_EXPORT int ibv_resize_cq(ibv_cq *cq, int cqe) {
  if (cq == nullptr) return EINVAL;
  Cq *q = cq_of(cq);
  if (cqe <= 0 || static_cast<uint32_t>(cqe) > q->ctx->dattr.max_cqe) return EINVAL;
  std::lock_guard<Spin> g(q->mu);
  const int rc = ctl_call(
      q->ctx, [&](client::Context &k) { return k.resize_cq(*q->c, static_cast<uint32_t>(cqe)); });
  if (rc == 0) cq->cqe = static_cast<int>(q->c->depth);
  return rc;
}

// ---------------------------------------------------------------------------------------------
// Completion channels: the fd is an epoll instance over the eventfds of the channel's CQs, so
// poll() / epoll on it works and ibv_get_cq_event blocks (or fails with EAGAIN when the app set
// O_NONBLOCK on it, as with rdma-core's channel fd).
// ---------------------------------------------------------------------------------------------
UV_EXPORT ibv_comp_channel *ibv_create_comp_channel(ibv_context *context) {
  if (context == nullptr) return fail_null<ibv_comp_channel>(EINVAL);
  auto *ch = new (std::nothrow) CompChannel();
  if (ch == nullptr) return fail_null<ibv_comp_channel>(ENOMEM);
  ch->ch.context = context;
  ch->ch.refcnt = 0;
  ch->ch.fd = epoll_create1(EPOLL_CLOEXEC);
  if (ch->ch.fd < 0) {
    const int e = errno;
    delete ch;
    return fail_null<ibv_comp_channel>(e);
  }
  return &ch->ch;
}

UV_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel *channel) {
  if (channel == nullptr) return EINVAL;
  pthread_mutex_lock(&channel->context->mutex);
  const bool busy = channel->refcnt != 0;
  pthread_mutex_unlock(&channel->context->mutex);
  if (busy) return EBUSY;
  ::close(channel->fd);
  delete reinterpret_cast<CompChannel *>(channel);
  return 0;
}

UV_EXPORT int ibv_get_cq_event(ibv_comp_channel *channel, ibv_cq **cq, void **cq_context) {
  if (channel == nullptr || cq == nullptr || cq_context == nullptr) {
    errno = EINVAL;
    return -1;
  }
  for (;;) {
    const int fl = fcntl(channel->fd, F_GETFL);
    const int timeout = fl >= 0 && (fl & O_NONBLOCK) ? 0 : -1;
    epoll_event ev{};
    const int n = epoll_wait(channel->fd, &ev, 1, timeout);
    if (n < 0) return -1;  // errno from epoll_wait (EINTR, ...)
    if (n == 0) {
      errno = EAGAIN;
      return -1;
    }
    Cq *q = static_cast<Cq *>(ev.data.ptr);
    if (q->c->ev.drain() <= 0) continue;  // another thread took it
    pthread_mutex_lock(&q->cq.mutex);
    ++q->comp_events;
    pthread_mutex_unlock(&q->cq.mutex);
    *cq = ibv_cq_ex_to_cq(&q->cq);
    *cq_context = q->cq.cq_context;
    return 0;
  }
}

UV_EXPORT void ibv_ack_cq_events(ibv_cq *cq, unsigned int nevents) {
  if (cq == nullptr) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}
