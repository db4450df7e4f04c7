// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: the data path of the context ops: ibv_post_send / ibv_post_recv /
// ibv_post_srq_recv, ibv_poll_cq / ibv_req_notify_cq (on lib/client's shared-memory rings).
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

static_assert(sizeof(ibv_sge) == sizeof(abi::Sge) && offsetof(ibv_sge, addr) == 0 &&
              offsetof(ibv_sge, length) == 8 && offsetof(ibv_sge, lkey) == 12);

namespace {

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

}  // namespace uroce::verbs
