// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: PD, MR, CQ, completion channel, QP, SRQ, AH, and the data path (post / poll
// through the context ops, on lib/client's shared-memory rings).
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "mr_map.h"
#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

static_assert(sizeof(ibv_sge) == sizeof(abi::Sge) && offsetof(ibv_sge, addr) == 0 &&
              offsetof(ibv_sge, length) == 8 && offsetof(ibv_sge, lkey) == 12);

namespace {

template <class F>
int ctl_call(Context *c, F &&f) {
  std::lock_guard<std::mutex> g(c->ctl_mu);
  return f(*c->cli);
}

Cq *cq_of(ibv_cq *cq) {
  return reinterpret_cast<Cq *>(cq);
}
Qp *qp_of(ibv_qp *qp) {
  return reinterpret_cast<Qp *>(qp);
}
Srq *srq_of(ibv_srq *s) {
  return reinterpret_cast<Srq *>(s);
}
uint32_t pd_handle(ibv_pd *pd) {
  return reinterpret_cast<Pd *>(pd)->handle;
}

// ---- data path ops ----
int op_poll_cq(ibv_cq *cq, int n, ibv_wc *wc) {
  if (n < 0 || (n > 0 && wc == nullptr)) return -1;
  Cq *q = cq_of(cq);
  client::Context &k = *q->ctx->cli;
  abi::Cqe buf[16];
  int total = 0;
  std::lock_guard<Spin> g(q->mu);
  while (total < n) {
    const int want = n - total < 16 ? n - total : 16;
    const int got = k.poll_cq(*q->c, buf, want);
    for (int i = 0; i < got; ++i)
      to_wc(buf[i], &wc[total + i]);
    total += got;
    if (got < want) break;
  }
  return total;
}

int op_req_notify_cq(ibv_cq *cq, int solicited_only) {
  Cq *q = cq_of(cq);
  q->ctx->cli->req_notify_cq(*q->c, solicited_only != 0);
  return 0;
}

// The opcode an app wrote, as an integer: an ibv_wr_opcode object may hold any value (a bad
// WR is the app's to make), and loading one outside the enum's values as the enum type is
// undefined behaviour.
uint32_t raw_opcode(const ibv_send_wr *wr) {
  static_assert(sizeof(wr->opcode) == sizeof(uint32_t));
  uint32_t v;
  std::memcpy(&v, &wr->opcode, sizeof v);
  return v;
}

bool opcode_ok(uint32_t op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return true;
    default:  // LOCAL_INV, BIND_MW, SEND_WITH_INV, TSO, ATOMIC_WRITE, FLUSH, DRIVER1
      return false;
  }
}

// One ibv_send_wr as the client library's WR; 0 or EINVAL.
int to_client_wr(const ibv_qp *qp, const ibv_send_wr *wr, client::SendWr *out) {
  client::SendWr &w = *out;  // every field is assigned below
  w.wr_id = wr->wr_id;
  const uint32_t op = raw_opcode(wr);
  w.opcode = static_cast<uint8_t>(op);
  w.send_flags = wr->send_flags;
  w.sg_list = reinterpret_cast<const abi::Sge *>(wr->sg_list);
  w.num_sge = wr->num_sge < 0 ? ~0u : static_cast<uint32_t>(wr->num_sge);
  w.imm_data = wr->imm_data;
  w.remote_addr = 0;
  w.rkey = 0;
  w.compare_add = 0;
  w.swap = 0;
  w.ah = 0;
  w.remote_qpn = 0;
  w.remote_qkey = 0;
  if (!opcode_ok(op) || wr->num_sge < 0 || (wr->num_sge != 0 && wr->sg_list == nullptr))
    return EINVAL;
  if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    w.remote_addr = wr->wr.atomic.remote_addr;
    w.rkey = wr->wr.atomic.rkey;
    w.compare_add = wr->wr.atomic.compare_add;
    w.swap = wr->wr.atomic.swap;
  } else if (qp->qp_type == IBV_QPT_UD) {
    if (wr->wr.ud.ah == nullptr || wr->wr.ud.ah->context != qp->context)
      return EINVAL;  // an AH of another context: its handle means nothing to this daemon
    w.ah = reinterpret_cast<Ah *>(wr->wr.ud.ah)->handle;
    w.remote_qpn = wr->wr.ud.remote_qpn;
    w.remote_qkey = wr->wr.ud.remote_qkey;
  } else {
    w.remote_addr = wr->wr.rdma.remote_addr;
    w.rkey = wr->wr.rdma.rkey;
  }
  return 0;
}

// A chain goes to the client library in lists of up to kPostBatch WRs: one publish of the SQ's
// producer index and at most one doorbell per list, not per WR. WRs before a bad one are posted
// (as rdma-core providers do) and *bad names the first WR not posted.
int op_post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) {
  constexpr size_t kPostBatch = 16;
  Qp *q = qp_of(qp);
  Context *c = q->ctx;
  std::lock_guard<Spin> g(c->post_mu);
  while (wr) {
    if (wr->next == nullptr) {  // one WR (or a chain's last): no list arrays to initialise
      client::SendWr one;
      int rc = to_client_wr(qp, wr, &one);
      size_t posted = 0;
      if (rc == 0) rc = c->cli->post_send_list(*q->c, &one, 1, &posted);
      if (rc && bad) *bad = wr;
      return rc;
    }
    client::SendWr w[kPostBatch];
    ibv_send_wr *from[kPostBatch];
    size_t n = 0;
    int rc = 0;
    for (; wr && n < kPostBatch; wr = wr->next) {
      from[n] = wr;
      rc = to_client_wr(qp, wr, &w[n]);
      if (rc) break;
      ++n;
    }
    size_t posted = 0;
    const int prc = n ? c->cli->post_send_list(*q->c, w, n, &posted) : 0;
    if (prc) {
      if (bad) *bad = from[posted];
      return prc;
    }
    if (rc) {
      if (bad) *bad = wr;
      return rc;
    }
  }
  return 0;
}

int op_post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad) {
  Qp *q = qp_of(qp);
  Context *c = q->ctx;
  std::lock_guard<Spin> g(c->post_mu);
  for (; wr; wr = wr->next) {
    int rc = EINVAL;
    if (wr->num_sge >= 0 && (wr->num_sge == 0 || wr->sg_list) && qp->srq == nullptr) {
      client::RecvWr w;
      w.wr_id = wr->wr_id;
      w.sg_list = reinterpret_cast<const abi::Sge *>(wr->sg_list);
      w.num_sge = static_cast<uint32_t>(wr->num_sge);
      rc = c->cli->post_recv(*q->c, w);
    }
    if (rc) {
      if (bad) *bad = wr;
      return rc;
    }
  }
  return 0;
}

int op_post_srq_recv(ibv_srq *srq, ibv_recv_wr *wr, ibv_recv_wr **bad) {
  Srq *s = srq_of(srq);
  Context *c = s->ctx;
  std::lock_guard<Spin> g(c->post_mu);
  for (; wr; wr = wr->next) {
    int rc = EINVAL;
    if (wr->num_sge >= 0 && (wr->num_sge == 0 || wr->sg_list)) {
      client::RecvWr w;
      w.wr_id = wr->wr_id;
      w.sg_list = reinterpret_cast<const abi::Sge *>(wr->sg_list);
      w.num_sge = static_cast<uint32_t>(wr->num_sge);
      rc = c->cli->post_srq_recv(*s->c, w);
    }
    if (rc) {
      if (bad) *bad = wr;
      return rc;
    }
  }
  return 0;
}

int compat_query_device(ibv_context *ctx, ibv_device_attr *a) {
  return ibv_query_device(ctx, a);
}
int compat_query_port(ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *a) {
  return query_port_op(ctx, port, reinterpret_cast<ibv_port_attr *>(a),
                       offsetof(ibv_port_attr, flags) + 1);
}

// ---- QP attributes <-> control payloads ----
void to_ah_payload(const ibv_ah_attr &a, ctl::AhAttrPayload *p) {
  std::memcpy(p->dgid, a.grh.dgid.raw, 16);
  p->flow_label = a.grh.flow_label;
  p->sgid_index = a.grh.sgid_index;
  p->hop_limit = a.grh.hop_limit;
  p->traffic_class = a.grh.traffic_class;
  p->is_global = a.is_global;
  p->port_num = a.port_num;
  p->sl = a.sl;
}

void from_ah_payload(const ctl::AhAttrPayload &p, ibv_ah_attr *a) {
  std::memset(a, 0, sizeof *a);
  std::memcpy(a->grh.dgid.raw, p.dgid, 16);
  a->grh.flow_label = p.flow_label;
  a->grh.sgid_index = p.sgid_index;
  a->grh.hop_limit = p.hop_limit;
  a->grh.traffic_class = p.traffic_class;
  a->is_global = p.is_global;
  a->port_num = p.port_num;
  a->sl = p.sl;
}

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

int to_wc(const abi::Cqe &e, ibv_wc *wc) noexcept {
  wc->wr_id = e.wr_id;
  wc->status = static_cast<ibv_wc_status>(e.status);
  wc->opcode = static_cast<ibv_wc_opcode>(e.opcode);
  wc->vendor_err = e.vendor_err;
  wc->byte_len = e.byte_len;
  wc->imm_data = e.imm_data;
  wc->qp_num = e.qp_num;
  wc->src_qp = e.src_qp;
  wc->wc_flags = e.wc_flags;
  wc->pkey_index = e.pkey_index;
  wc->slid = e.slid;
  wc->sl = e.sl;
  wc->dlid_path_bits = e.dlid_path_bits;
  return 0;
}

void fill_context_ops(Context *c) noexcept {
  ibv_context_ops &o = c->vctx.context.ops;
  o._compat_query_device = compat_query_device;
  o._compat_query_port = compat_query_port;
  o.poll_cq = op_poll_cq;
  o.req_notify_cq = op_req_notify_cq;
  o.post_send = op_post_send;
  o.post_recv = op_post_recv;
  o.post_srq_recv = op_post_srq_recv;
  // alloc_mw / bind_mw / dealloc_mw stay NULL: verbs.h's inline wrappers return EOPNOTSUPP.
  verbs_context &v = c->vctx;
  v.query_port = query_port_op;
  v.query_device_ex = query_device_ex_op;
  v.create_cq_ex = create_cq_ex_op;
  v.create_qp_ex = create_qp_ex_op;
  v.create_srq_ex = create_srq_ex_op;
  // Everything else (flows, WQs, RSS tables, DM, counters, XRC, parent domains, TDs, ESP,
  // modify_cq, rate limits, advise_mr, null MR, open_qp) stays NULL: the inline wrappers in
  // verbs.h then fail with EOPNOTSUPP (or NULL + errno EOPNOTSUPP), as for any provider that
  // lacks them.
}

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

UV_EXPORT int ibv_resize_cq(ibv_cq *cq, int cqe) {
  (void)cq;
  (void)cqe;
  return EOPNOTSUPP;  // the CQ ring has a fixed size (doc/verbs.md)
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

// ---------------------------------------------------------------------------------------------
// PD
// ---------------------------------------------------------------------------------------------
UV_EXPORT ibv_pd *ibv_alloc_pd(ibv_context *context) {
  if (context == nullptr) return fail_null<ibv_pd>(EINVAL);
  Context *c = ctx_of(context);
  auto *p = new (std::nothrow) Pd();
  if (p == nullptr) return fail_null<ibv_pd>(ENOMEM);
  const int rc = ctl_call(c, [&](client::Context &k) { return k.alloc_pd(&p->handle); });
  if (rc) {
    delete p;
    return fail_null<ibv_pd>(rc);
  }
  p->pd.context = context;
  p->pd.handle = p->handle;
  return &p->pd;
}

UV_EXPORT int ibv_dealloc_pd(ibv_pd *pd) {
  if (pd == nullptr) return EINVAL;
  Pd *p = reinterpret_cast<Pd *>(pd);
  const int rc =
      ctl_call(ctx_of(pd->context), [&](client::Context &k) { return k.dealloc_pd(p->handle); });
  if (rc) return rc;
  delete p;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// MR (mr_map.h: the page range is remapped onto the process's memfd at the same address)
// ---------------------------------------------------------------------------------------------
namespace {
ibv_mr *reg_mr_common(ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access) {
  if (pd == nullptr || addr == nullptr || length == 0) return fail_null<ibv_mr>(EINVAL);
  // Optional access flags (IBV_ACCESS_OPTIONAL_RANGE, e.g. RELAXED_ORDERING from perftest)
  // are hints a device may ignore; uroce ignores them.
  access &= ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  constexpr unsigned kOk = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                           IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB;
  if (access & ~kOk) return fail_null<ibv_mr>(EOPNOTSUPP);  // MW_BIND, ON_DEMAND, FLUSH_*
  Context *c = ctx_of(pd->context);
  auto *m = new (std::nothrow) Mr();
  if (m == nullptr) return fail_null<ibv_mr>(ENOMEM);
  int fd = -1;
  const uint64_t a = reinterpret_cast<uintptr_t>(addr);
  int rc = Remapper::get().acquire(a, length, &fd, &m->page_start, &m->page_end);
  if (rc) {
    delete m;
    return fail_null<ibv_mr>(rc);
  }
  ctl::RegMrPayload p{};
  p.pd = pd_handle(pd);
  p.access = access;
  p.offset = a;  // the memfd's offset = the virtual address
  p.app_va = iova;
  p.length = length;
  rc = ctl_call(c, [&](client::Context &k) { return k.reg_mr_fd(fd, p, &m->cmr); });
  if (rc) {
    Remapper::get().release(m->page_start, m->page_end);
    delete m;
    return fail_null<ibv_mr>(rc);
  }
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = m->cmr.lkey;
  m->mr.lkey = m->cmr.lkey;
  m->mr.rkey = m->cmr.rkey;
  return &m->mr;
}
}  // namespace

#undef ibv_reg_mr
UV_EXPORT ibv_mr *ibv_reg_mr(ibv_pd *pd, void *addr, size_t length, int access) {
  return reg_mr_common(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                       static_cast<unsigned>(access));
}

#undef ibv_reg_mr_iova
UV_EXPORT ibv_mr *ibv_reg_mr_iova(ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                  int access) {
  return reg_mr_common(pd, addr, length, iova, static_cast<unsigned>(access));
}

UV_EXPORT ibv_mr *ibv_reg_mr_iova2(ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                   unsigned int access) {
  return reg_mr_common(pd, addr, length, iova, access);
}

UV_EXPORT ibv_mr *ibv_reg_dmabuf_mr(ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
                                    int fd, int access) {
  (void)pd, (void)offset, (void)length, (void)iova, (void)fd, (void)access;
  return fail_null<ibv_mr>(EOPNOTSUPP);  // no device memory to import from
}

UV_EXPORT int ibv_rereg_mr(ibv_mr *mr, int flags, ibv_pd *pd, void *addr, size_t length,
                           int access) {
  (void)mr, (void)flags, (void)pd, (void)addr, (void)length, (void)access;
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;  // deregister and register again instead
}

UV_EXPORT int ibv_dereg_mr(ibv_mr *mr) {
  if (mr == nullptr) return EINVAL;
  Mr *m = reinterpret_cast<Mr *>(mr);
  const int rc =
      ctl_call(ctx_of(mr->context), [&](client::Context &k) { return k.dereg_mr(m->cmr); });
  if (rc) return rc;
  Remapper::get().release(m->page_start, m->page_end);  // private memory again
  delete m;
  return 0;
}

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
                       IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM}
            : uint64_t{IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                       IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                       IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD};
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
      IBV_QP_PATH_MIG_STATE | IBV_QP_CAP | IBV_QP_DEST_QPN;
  if (mask & ~kKnown) return EOPNOTSUPP;          // RATE_LIMIT
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
  to_ah_payload(attr->ah_attr, &a.ah_attr);
  const int rc = ctl_call(q->ctx, [&](client::Context &k) {
    return k.modify_qp(*q->c, a, static_cast<uint32_t>(mask));
  });
  if (rc) return rc;
  if (mask & IBV_QP_STATE) qp->state = attr->qp_state;
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

// ---------------------------------------------------------------------------------------------
// AH
// ---------------------------------------------------------------------------------------------
UV_EXPORT ibv_ah *ibv_create_ah(ibv_pd *pd, ibv_ah_attr *attr) {
  if (pd == nullptr || attr == nullptr) return fail_null<ibv_ah>(EINVAL);
  if (!attr->is_global) return fail_null<ibv_ah>(EINVAL);  // RoCE: the GID is the address
  auto *a = new (std::nothrow) Ah();
  if (a == nullptr) return fail_null<ibv_ah>(ENOMEM);
  ctl::AhAttrPayload p{};
  to_ah_payload(*attr, &p);
  const int rc = ctl_call(ctx_of(pd->context), [&](client::Context &k) {
    return k.create_ah(pd_handle(pd), p, &a->handle);
  });
  if (rc) {
    delete a;
    return fail_null<ibv_ah>(rc);
  }
  a->ah.context = pd->context;
  a->ah.pd = pd;
  a->ah.handle = a->handle;
  return &a->ah;
}

UV_EXPORT int ibv_destroy_ah(ibv_ah *ah) {
  if (ah == nullptr) return EINVAL;
  Ah *a = reinterpret_cast<Ah *>(ah);
  const int rc =
      ctl_call(ctx_of(ah->context), [&](client::Context &k) { return k.destroy_ah(a->handle); });
  if (rc) return rc;
  delete a;
  return 0;
}

// The GRH area of a UD receive holds, for RoCE v2 over IPv4, the IPv4 header in its last 20
// bytes (as rxe and ConnectX write it); tell the two apart as rdma-core does (IP version, and
// for an ambiguous first nibble the IPv4 header checksum).
namespace {
uint16_t ipv4_csum(const uint8_t *h) {
  uint32_t s = 0;
  for (int i = 0; i < 20; i += 2)
    if (i != 10) s += static_cast<uint32_t>(h[i] << 8 | h[i + 1]);
  while (s >> 16)
    s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(~s);
}
int grh_ip_version(const ibv_grh *grh) {
  const auto *b = reinterpret_cast<const uint8_t *>(grh);
  const uint8_t *ip4 = b + 20;
  const int v6 = b[0] >> 4;
  if (v6 != 6) return (ip4[0] >> 4) == 4 ? 4 : -1;
  if ((ip4[0] & 0x0f) != 5 || (ip4[0] >> 4) != 4) return 6;
  return ipv4_csum(ip4) == static_cast<uint16_t>(ip4[10] << 8 | ip4[11]) ? 4 : 6;
}
}  // namespace

UV_EXPORT int ibv_init_ah_from_wc(ibv_context *context, uint8_t port_num, ibv_wc *wc, ibv_grh *grh,
                                  ibv_ah_attr *ah_attr) {
  if (context == nullptr || wc == nullptr || ah_attr == nullptr) return EINVAL;
  if (!(wc->wc_flags & IBV_WC_GRH) || grh == nullptr) return EINVAL;  // RoCE: needs the GRH
  std::memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  ah_attr->is_global = 1;
  union ibv_gid our {};
  const int ver = grh_ip_version(grh);
  if (ver == 4) {
    const auto *ip4 = reinterpret_cast<const uint8_t *>(grh) + 20;
    uint8_t *d = ah_attr->grh.dgid.raw;  // the sender's address, IPv4-mapped
    d[10] = d[11] = 0xff;
    std::memcpy(d + 12, ip4 + 12, 4);
    our.raw[10] = our.raw[11] = 0xff;
    std::memcpy(our.raw + 12, ip4 + 16, 4);
    ah_attr->grh.hop_limit = 0xff;
    ah_attr->grh.traffic_class = ip4[1];
  } else if (ver == 6) {
    ah_attr->grh.dgid = grh->sgid;
    our = grh->dgid;
    const uint32_t vtf = be32toh(grh->version_tclass_flow);
    ah_attr->grh.flow_label = vtf & 0xfffff;
    ah_attr->grh.hop_limit = 0xff;
    ah_attr->grh.traffic_class = static_cast<uint8_t>(vtf >> 20);
  } else {
    return EPROTONOSUPPORT;
  }
  // Our GID the packet was sent to -> sgid_index.
  ibv_port_attr pa{};
  int rc = query_port_op(context, port_num, &pa, sizeof pa);
  if (rc) return rc;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    union ibv_gid g {};
    if (ibv_query_gid(context, port_num, i, &g) == 0 && std::memcmp(g.raw, our.raw, 16) == 0) {
      ah_attr->grh.sgid_index = static_cast<uint8_t>(i);
      return 0;
    }
  }
  return ENOENT;
}

UV_EXPORT ibv_ah *ibv_create_ah_from_wc(ibv_pd *pd, ibv_wc *wc, ibv_grh *grh, uint8_t port_num) {
  if (pd == nullptr) return fail_null<ibv_ah>(EINVAL);
  ibv_ah_attr a{};
  const int rc = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a);
  if (rc) return fail_null<ibv_ah>(rc);
  return ibv_create_ah(pd, &a);
}

// ---------------------------------------------------------------------------------------------
// Multicast: not supported (no multicast groups on uroce).
// ---------------------------------------------------------------------------------------------
UV_EXPORT int ibv_attach_mcast(ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) {
  (void)qp, (void)gid, (void)lid;
  return EOPNOTSUPP;
}

UV_EXPORT int ibv_detach_mcast(ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) {
  (void)qp, (void)gid, (void)lid;
  return EOPNOTSUPP;
}
