// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: posting (the context's post_send / post_recv / post_srq_recv ops) and the
// context ops table. As rdma-core's rxe provider: each WR is written straight from the app's
// ibv_send_wr / ibv_recv_wr into its slot of the queue's shared-memory ring, under the queue's
// own lock; a chain is published with one store of the producer index and at most one doorbell.
// Errors as rdma-core: EINVAL for a bad WR, ENOMEM when the queue is full; *bad_wr names the
// first WR not posted, the WRs before it are posted.
#include <errno.h>

#include <cstring>

#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

static_assert(sizeof(ibv_sge) == sizeof(abi::Sge) && offsetof(ibv_sge, addr) == 0 &&
              offsetof(ibv_sge, length) == 8 && offsetof(ibv_sge, lkey) == 12);

namespace {

using H = abi::SendWqeHeader;

template <class T>
inline void put(uint8_t *slot, size_t off, T v) noexcept {
  std::memcpy(slot + off, &v, sizeof v);
}

// SGE by SGE: a fixed 16-byte copy each is a couple of stores, a variable-length memcpy a call
// into libc (doc/perf.md).
inline void copy_sges(uint8_t *dst, const ibv_sge *sg, uint32_t n) noexcept {
  for (uint32_t i = 0; i < n; ++i)
    std::memcpy(dst + i * sizeof(abi::Sge), &sg[i], sizeof(abi::Sge));
}

// The opcode an app wrote, as an integer: an ibv_wr_opcode object may hold any value (a bad
// WR is the app's to make), and loading one outside the enum's values as the enum type is
// undefined behaviour.
uint32_t raw_opcode(const ibv_send_wr *wr) noexcept {
  static_assert(sizeof(wr->opcode) == sizeof(uint32_t));
  uint32_t v;
  std::memcpy(&v, &wr->opcode, sizeof v);
  return v;
}

bool opcode_ok(uint32_t op) noexcept {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_LOCAL_INV:
    case IBV_WR_BIND_MW:
    case IBV_WR_SEND_WITH_INV:
      return true;
    default:  // TSO, ATOMIC_WRITE, FLUSH, DRIVER1
      return false;
  }
}

// Checks one ibv_send_wr against the QP and writes it into `slot` (abi::SendWqe of the QP's
// slot class): 0, or EINVAL with nothing of the WR published. The header is stored field by
// field (a header built on the stack and copied would be read back across the stores that
// wrote it: a store-forwarding stall per WQE); the SGEs or inline bytes follow it.
int write_send(const Qp *q, const ibv_send_wr *wr, uint8_t *slot) noexcept {
  const client::Qp &k = *q->c;
  const uint32_t op = raw_opcode(wr);
  // BIND_MW and LOCAL_INV carry no data: their sg_list is not read (rdma-core's providers).
  const bool local = op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV;
  if (!opcode_ok(op) ||
      (!local && (wr->num_sge < 0 || (wr->num_sge != 0 && wr->sg_list == nullptr))))
    return EINVAL;
  const auto nsge = local ? 0u : static_cast<uint32_t>(wr->num_sge);
  const uint32_t tail = k.caps.sq.slot_size - sizeof(H);
  const bool inl = !local && (wr->send_flags & IBV_SEND_INLINE) != 0;
  uint64_t inline_len = 0;
  if (inl) {
    for (uint32_t i = 0; i < nsge; ++i)
      inline_len += wr->sg_list[i].length;
    if (inline_len > tail || inline_len > k.caps.max_inline_data) return EINVAL;
  } else if (nsge > tail / sizeof(abi::Sge) || nsge > k.caps.max_send_sge) {
    return EINVAL;
  }
  uint64_t remote_addr = 0, compare_add = 0, swap = 0;
  uint32_t rkey = 0, ah = 0, remote_qpn = 0, remote_qkey = 0;
  uint32_t imm = wr->imm_data;  // or invalidate_rkey (a union)
  if (op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV) {
    if (op == IBV_WR_BIND_MW) {
      // The slot's fields of a bind (lib/transport/verbs_types.h, SendWr).
      const ibv_mw *mw = wr->bind_mw.mw;
      const ibv_mw_bind_info &b = wr->bind_mw.bind_info;
      if (mw == nullptr || mw->context != q->qpx.qp_base.context ||
          (b.mr != nullptr && b.mr->context != mw->context))
        return EINVAL;
      rkey = mw->rkey;
      imm = wr->bind_mw.rkey;
      remote_addr = b.addr;
      compare_add = b.length;
      ah = b.mr ? b.mr->lkey : 0;
      remote_qkey = b.mw_access_flags;
    }
  } else if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    remote_addr = wr->wr.atomic.remote_addr;
    rkey = wr->wr.atomic.rkey;
    compare_add = wr->wr.atomic.compare_add;
    swap = wr->wr.atomic.swap;
  } else if (q->qpx.qp_base.qp_type == IBV_QPT_UD) {
    const ibv_ah *a = wr->wr.ud.ah;
    if (a == nullptr || a->context != q->qpx.qp_base.context)
      return EINVAL;  // an AH of another context: its handle means nothing to this daemon
    ah = reinterpret_cast<const Ah *>(a)->handle;
    remote_qpn = wr->wr.ud.remote_qpn;
    remote_qkey = wr->wr.ud.remote_qkey;
  } else {
    remote_addr = wr->wr.rdma.remote_addr;
    rkey = wr->wr.rdma.rkey;
  }
  put<uint64_t>(slot, offsetof(H, wr_id), wr->wr_id);
  put<uint8_t>(slot, offsetof(H, opcode), static_cast<uint8_t>(op));
  put<uint8_t>(slot, offsetof(H, reserved), 0);
  put<uint16_t>(slot, offsetof(H, inline_len), static_cast<uint16_t>(inline_len));
  put<uint32_t>(slot, offsetof(H, send_flags),
                local ? wr->send_flags & ~uint32_t{IBV_SEND_INLINE} : wr->send_flags);
  put<uint32_t>(slot, offsetof(H, num_sge), inl ? 0 : nsge);
  put<uint32_t>(slot, offsetof(H, imm_data), imm);
  put<uint64_t>(slot, offsetof(H, remote_addr), remote_addr);
  put<uint32_t>(slot, offsetof(H, rkey), rkey);
  put<uint32_t>(slot, offsetof(H, ud_ah), ah);
  put<uint64_t>(slot, offsetof(H, compare_add), compare_add);
  put<uint64_t>(slot, offsetof(H, swap), swap);
  put<uint32_t>(slot, offsetof(H, remote_qpn), remote_qpn);
  put<uint32_t>(slot, offsetof(H, remote_qkey), remote_qkey);
  static_assert(sizeof(H) == 64, "every SendWqeHeader field is stored above");
  uint8_t *p = slot + sizeof(H);
  if (inl) {
    for (uint32_t i = 0; i < nsge; ++i) {
      std::memcpy(p, reinterpret_cast<const void *>(wr->sg_list[i].addr), wr->sg_list[i].length);
      p += wr->sg_list[i].length;
    }
  } else {
    copy_sges(p, wr->sg_list, nsge);
  }
  return 0;
}

int op_post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) {
  Qp *q = qp_of(qp);
  shm::RingProducer &sq = q->c->sq;
  std::lock_guard<Spin> g(q->sq_mu);
  int rc = 0;
  size_t k = 0;
  if (!send_state_ok(q)) {
    rc = EINVAL;
  } else {
    // The daemon read these slots last, on its own core: ask for the first two lines (header,
    // SGEs / inline bytes) of the slots of up to kAhead WRs ahead, so that their misses overlap
    // each other and the checks instead of coming one after the other.
    constexpr size_t kAhead = 4;
    const ibv_send_wr *ahead = wr;
    size_t ka = 0;
    for (; wr; wr = wr->next, ++k) {
      for (; ahead && ka < k + kAhead; ahead = ahead->next, ++ka) {
        const auto *p = static_cast<const uint8_t *>(sq.slot(ka));  // in the ring, always
        __builtin_prefetch(p, 1);
        __builtin_prefetch(p + 64, 1);
      }
      if (sq.reserve(k + 1) <= k) {  // reloads the consumer index only when the cache is short
        rc = ENOMEM;
        break;
      }
      auto *slot = static_cast<uint8_t *>(sq.slot(k));
      rc = write_send(q, wr, slot);
      if (rc) break;
    }
  }
  if (k) publish_sq(q, k);
  if (rc && bad) *bad = wr;
  return rc;
}

// Writes one ibv_recv_wr into a receive slot of `slot_size` bytes; 0 or EINVAL.
int write_recv(const ibv_recv_wr *wr, uint32_t slot_size, uint32_t max_sge,
               uint8_t *slot) noexcept {
  if (wr->num_sge < 0 || (wr->num_sge != 0 && wr->sg_list == nullptr)) return EINVAL;
  const auto n = static_cast<uint32_t>(wr->num_sge);
  if (n > (slot_size - sizeof(abi::RecvWqeHeader)) / sizeof(abi::Sge) || n > max_sge) return EINVAL;
  const abi::RecvWqeHeader h{wr->wr_id, n, 0};
  std::memcpy(slot, &h, sizeof h);
  copy_sges(slot + sizeof h, wr->sg_list, n);
  return 0;
}

// A chain of receive WRs into `ring` (under its queue's lock); publishes what was written and
// rings the doorbell `qpn` when the ring's token was idle.
int post_recv_chain(Context *c, shm::RingProducer &ring, uint32_t max_sge, uint32_t qpn,
                    ibv_recv_wr *wr, ibv_recv_wr **bad) noexcept {
  int rc = 0;
  size_t k = 0;
  for (; wr; wr = wr->next, ++k) {
    if (ring.reserve(k + 1) <= k) {
      rc = ENOMEM;
      break;
    }
    rc = write_recv(wr, ring.slot_size(), max_sge, static_cast<uint8_t *>(ring.slot(k)));
    if (rc) break;
  }
  if (k) {
    ring.commit(k);
    if (ring.claim_notify()) {
      std::lock_guard<Spin> g(c->db_mu);
      c->cli->ring_doorbell(qpn, abi::kDoorbellRq);
    }
  }
  if (rc && bad) *bad = wr;
  return rc;
}

int op_post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad) {
  Qp *q = qp_of(qp);
  client::Qp &k = *q->c;
  if (!k.has_rq || qp->srq != nullptr || k.state == IBV_QPS_RESET) {  // RESET: rdma-core too
    if (bad) *bad = wr;
    return EINVAL;
  }
  std::lock_guard<Spin> g(q->rq_mu);
  return post_recv_chain(q->ctx, k.rq, k.caps.max_recv_sge, k.qpn, wr, bad);
}

int op_post_srq_recv(ibv_srq *srq, ibv_recv_wr *wr, ibv_recv_wr **bad) {
  Srq *s = srq_of(srq);
  std::lock_guard<Spin> g(s->mu);
  return post_recv_chain(s->ctx, s->c->ring, s->c->caps.max_sge, 0x80000000u | s->c->handle, wr,
                         bad);
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

void publish_sq(Qp *q, size_t k) noexcept {
  shm::RingProducer &sq = q->c->sq;
  sq.commit(k);
  if (sq.claim_notify()) {
    Context *c = q->ctx;
    std::lock_guard<Spin> g(c->db_mu);  // the only per-context lock of the data path
    c->cli->ring_doorbell(q->c->qpn, abi::kDoorbellSq);
  }
}

void fill_context_ops(Context *c) noexcept {
  ibv_context_ops &o = c->vctx.context.ops;
  o._compat_query_device = compat_query_device;
  o._compat_query_port = compat_query_port;
  o.poll_cq = poll_cq_op;
  o.req_notify_cq = req_notify_cq_op;
  o.post_send = op_post_send;
  o.post_recv = op_post_recv;
  o.post_srq_recv = op_post_srq_recv;
  o.alloc_mw = alloc_mw_op;
  o.dealloc_mw = dealloc_mw_op;
  o.bind_mw = bind_mw_op;
  verbs_context &v = c->vctx;
  v.query_port = query_port_op;
  v.query_device_ex = query_device_ex_op;
  v.create_cq_ex = create_cq_ex_op;
  v.create_qp_ex = create_qp_ex_op;
  v.create_srq_ex = create_srq_ex_op;
  v.modify_qp_rate_limit = modify_qp_rate_limit_op;
  // Everything else (flows, WQs, RSS tables, DM, counters, XRC, parent domains, TDs, ESP,
  // modify_cq, advise_mr, null MR, open_qp) stays NULL: the inline wrappers in
  // verbs.h then fail with EOPNOTSUPP (or NULL + errno EOPNOTSUPP), as for any provider that
  // lacks them.
}

}  // namespace uroce::verbs
