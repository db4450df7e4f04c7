// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: ibv_qp_ex's ibv_wr_* builder. wr_start takes the QP's send lock (held until
// wr_complete / wr_abort, as rdma-core's providers); each wr_<opcode> reserves the next SQ slot
// and writes its header there, the setters (wr_set_sge*, wr_set_inline_data*, wr_set_ud_addr)
// fill the same slot. wr_complete publishes every slot at once (one producer-index store, at
// most one doorbell) or, if any call failed, none and returns that error; wr_abort publishes
// none. Nothing is allocated and nothing is copied twice.
#include <errno.h>

#include <cstring>

#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

namespace {

using H = abi::SendWqeHeader;

Qp *qx(ibv_qp_ex *x) {
  return reinterpret_cast<Qp *>(x);
}

template <class T>
inline void put(uint8_t *slot, size_t off, T v) noexcept {
  std::memcpy(slot + off, &v, sizeof v);
}

void fail(Qp *q, int err) {
  if (!q->wr_err) q->wr_err = err;
}

void wr_start(ibv_qp_ex *x) {
  Qp *q = qx(x);
  q->sq_mu.lock();
  q->wr_slot = nullptr;
  q->wr_n = 0;
  q->wr_err = 0;
}

// Reserves the next slot and writes a header for opcode `op` with every field the opcode does
// not set zeroed; nullptr (and the error recorded) when the SQ is full or an error came before.
uint8_t *new_wr(ibv_qp_ex *x, ibv_wr_opcode op) {
  Qp *q = qx(x);
  if (q->wr_err) return nullptr;
  shm::RingProducer &sq = q->c->sq;
  if (sq.reserve(q->wr_n + 1) <= q->wr_n) {
    fail(q, ENOMEM);  // more WRs than the send queue has room for
    return nullptr;
  }
  auto *s = static_cast<uint8_t *>(sq.slot(q->wr_n++));
  q->wr_slot = s;
  q->wr_flags = x->wr_flags & ~uint32_t{IBV_SEND_INLINE};  // set by wr_set_inline_data*
  q->wr_data = false;
  put<uint64_t>(s, offsetof(H, wr_id), x->wr_id);
  put<uint8_t>(s, offsetof(H, opcode), static_cast<uint8_t>(op));
  put<uint8_t>(s, offsetof(H, reserved), 0);
  put<uint16_t>(s, offsetof(H, inline_len), 0);
  put<uint32_t>(s, offsetof(H, send_flags), q->wr_flags);
  put<uint32_t>(s, offsetof(H, num_sge), 0);
  put<uint32_t>(s, offsetof(H, imm_data), 0);
  put<uint64_t>(s, offsetof(H, remote_addr), 0);
  put<uint32_t>(s, offsetof(H, rkey), 0);
  put<uint32_t>(s, offsetof(H, ud_ah), 0);
  put<uint64_t>(s, offsetof(H, compare_add), 0);
  put<uint64_t>(s, offsetof(H, swap), 0);
  put<uint32_t>(s, offsetof(H, remote_qpn), 0);
  put<uint32_t>(s, offsetof(H, remote_qkey), 0);
  static_assert(sizeof(H) == 64, "every SendWqeHeader field is stored above");
  return s;
}

// The slot of the WR whose data is being set: nullptr (error recorded) without a WR, or when
// its data was already set.
uint8_t *data_slot(ibv_qp_ex *x) {
  Qp *q = qx(x);
  if (q->wr_err) return nullptr;
  if (q->wr_slot == nullptr || q->wr_data) {
    fail(q, EINVAL);  // a setter without a WR, or data set twice for one WR
    return nullptr;
  }
  return q->wr_slot;
}

void set_remote(uint8_t *s, uint32_t rkey, uint64_t addr) {
  put<uint32_t>(s, offsetof(H, rkey), rkey);
  put<uint64_t>(s, offsetof(H, remote_addr), addr);
}

void wr_send(ibv_qp_ex *x) {
  new_wr(x, IBV_WR_SEND);
}
void wr_send_imm(ibv_qp_ex *x, __be32 imm) {
  if (uint8_t *s = new_wr(x, IBV_WR_SEND_WITH_IMM)) put<uint32_t>(s, offsetof(H, imm_data), imm);
}
void wr_rdma_write(ibv_qp_ex *x, uint32_t rkey, uint64_t addr) {
  if (uint8_t *s = new_wr(x, IBV_WR_RDMA_WRITE)) set_remote(s, rkey, addr);
}
void wr_rdma_write_imm(ibv_qp_ex *x, uint32_t rkey, uint64_t addr, __be32 imm) {
  if (uint8_t *s = new_wr(x, IBV_WR_RDMA_WRITE_WITH_IMM)) {
    set_remote(s, rkey, addr);
    put<uint32_t>(s, offsetof(H, imm_data), imm);
  }
}
void wr_rdma_read(ibv_qp_ex *x, uint32_t rkey, uint64_t addr) {
  if (uint8_t *s = new_wr(x, IBV_WR_RDMA_READ)) set_remote(s, rkey, addr);
}
void wr_atomic_cmp_swp(ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t compare,
                       uint64_t swap) {
  if (uint8_t *s = new_wr(x, IBV_WR_ATOMIC_CMP_AND_SWP)) {
    set_remote(s, rkey, addr);
    put<uint64_t>(s, offsetof(H, compare_add), compare);
    put<uint64_t>(s, offsetof(H, swap), swap);
  }
}
void wr_atomic_fetch_add(ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t add) {
  if (uint8_t *s = new_wr(x, IBV_WR_ATOMIC_FETCH_AND_ADD)) {
    set_remote(s, rkey, addr);
    put<uint64_t>(s, offsetof(H, compare_add), add);
  }
}

void unsupported(ibv_qp_ex *x) {
  fail(qx(x), EOPNOTSUPP);
}
// The slot's fields of a bind: lib/transport/verbs_types.h, SendWr.
void wr_bind_mw(ibv_qp_ex *x, ibv_mw *mw, uint32_t rkey, const ibv_mw_bind_info *b) {
  Qp *q = qx(x);
  if (q->wr_err) return;
  if (mw == nullptr || b == nullptr || mw->context != x->qp_base.context ||
      (b->mr != nullptr && b->mr->context != mw->context) ||
      (b->mw_access_flags & IBV_ACCESS_ZERO_BASED)) {
    fail(q, EINVAL);
    return;
  }
  if (uint8_t *s = new_wr(x, IBV_WR_BIND_MW)) {
    put<uint32_t>(s, offsetof(H, rkey), mw->rkey);
    put<uint32_t>(s, offsetof(H, imm_data), rkey);
    put<uint64_t>(s, offsetof(H, remote_addr), b->addr);
    put<uint64_t>(s, offsetof(H, compare_add), b->length);
    put<uint32_t>(s, offsetof(H, ud_ah), b->mr ? b->mr->lkey : 0);
    put<uint32_t>(s, offsetof(H, remote_qkey), b->mw_access_flags);
    q->wr_data = true;  // no data to set
  }
}
void wr_local_inv(ibv_qp_ex *x, uint32_t rkey) {
  if (uint8_t *s = new_wr(x, IBV_WR_LOCAL_INV)) {
    put<uint32_t>(s, offsetof(H, imm_data), rkey);
    qx(x)->wr_data = true;
  }
}
void wr_send_inv(ibv_qp_ex *x, uint32_t rkey) {
  if (uint8_t *s = new_wr(x, IBV_WR_SEND_WITH_INV)) put<uint32_t>(s, offsetof(H, imm_data), rkey);
}
void wr_send_tso(ibv_qp_ex *x, void *, uint16_t, uint16_t) {
  unsupported(x);
}
void wr_set_xrc_srqn(ibv_qp_ex *x, uint32_t) {
  unsupported(x);
}
void wr_atomic_write(ibv_qp_ex *x, uint32_t, uint64_t, const void *) {
  unsupported(x);
}

void wr_set_ud_addr(ibv_qp_ex *x, ibv_ah *ah, uint32_t qpn, uint32_t qkey) {
  Qp *q = qx(x);
  if (q->wr_err) return;
  if (q->wr_slot == nullptr || ah == nullptr || ah->context != x->qp_base.context) {
    fail(q, EINVAL);  // (an AH of another context means nothing to this daemon)
    return;
  }
  put<uint32_t>(q->wr_slot, offsetof(H, ud_ah), reinterpret_cast<Ah *>(ah)->handle);
  put<uint32_t>(q->wr_slot, offsetof(H, remote_qpn), qpn);
  put<uint32_t>(q->wr_slot, offsetof(H, remote_qkey), qkey);
}

void wr_set_sge_list(ibv_qp_ex *x, size_t n, const ibv_sge *list) {
  uint8_t *s = data_slot(x);
  if (s == nullptr) return;
  Qp *q = qx(x);
  const uint32_t tail = q->c->caps.sq.slot_size - sizeof(H);
  if (n > q->c->caps.max_send_sge || n > tail / sizeof(abi::Sge) || (n && !list)) {
    fail(q, EINVAL);
    return;
  }
  for (size_t i = 0; i < n; ++i)  // SGE by SGE: fixed-size copies, no call into libc
    std::memcpy(s + sizeof(H) + i * sizeof(abi::Sge), &list[i], sizeof(abi::Sge));
  put<uint32_t>(s, offsetof(H, num_sge), static_cast<uint32_t>(n));
  q->wr_data = true;
}

void wr_set_sge(ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t length) {
  const ibv_sge sge{addr, length, lkey};
  wr_set_sge_list(x, 1, &sge);
}

// The bytes are copied into the slot now (the app may reuse its buffers at once).
void wr_set_inline_data_list(ibv_qp_ex *x, size_t n, const ibv_data_buf *bufs) {
  uint8_t *s = data_slot(x);
  if (s == nullptr) return;
  Qp *q = qx(x);
  const uint32_t tail = q->c->caps.sq.slot_size - sizeof(H);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i)
    total += bufs[i].length;
  if (total > q->c->caps.max_inline_data || total > tail) {
    fail(q, EINVAL);
    return;
  }
  uint8_t *dst = s + sizeof(H);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(dst, bufs[i].addr, bufs[i].length);
    dst += bufs[i].length;
  }
  q->wr_flags |= IBV_SEND_INLINE;
  put<uint32_t>(s, offsetof(H, send_flags), q->wr_flags);
  put<uint16_t>(s, offsetof(H, inline_len), static_cast<uint16_t>(total));
  q->wr_data = true;
}

void wr_set_inline_data(ibv_qp_ex *x, void *addr, size_t length) {
  const ibv_data_buf b{addr, length};
  wr_set_inline_data_list(x, 1, &b);
}

int wr_complete(ibv_qp_ex *x) {
  Qp *q = qx(x);
  int rc = q->wr_err;
  if (rc == 0 && q->wr_n && !send_state_ok(q)) rc = EINVAL;
  if (rc == 0 && q->wr_n) publish_sq(q, q->wr_n);
  q->wr_slot = nullptr;
  q->wr_n = 0;
  q->sq_mu.unlock();
  return rc;
}

void wr_abort(ibv_qp_ex *x) {
  Qp *q = qx(x);
  q->wr_slot = nullptr;
  q->wr_n = 0;  // the reserved slots stay unpublished
  q->sq_mu.unlock();
}

}  // namespace

namespace uroce::verbs {

void install_ex_ops(Qp *q) noexcept {
  ibv_qp_ex &x = q->qpx;
  x.comp_mask = 0;
  x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  x.wr_atomic_fetch_add = wr_atomic_fetch_add;
  x.wr_bind_mw = wr_bind_mw;
  x.wr_local_inv = wr_local_inv;
  x.wr_rdma_read = wr_rdma_read;
  x.wr_rdma_write = wr_rdma_write;
  x.wr_rdma_write_imm = wr_rdma_write_imm;
  x.wr_send = wr_send;
  x.wr_send_imm = wr_send_imm;
  x.wr_send_inv = wr_send_inv;
  x.wr_send_tso = wr_send_tso;
  x.wr_set_ud_addr = wr_set_ud_addr;
  x.wr_set_xrc_srqn = wr_set_xrc_srqn;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_atomic_write = wr_atomic_write;
}

}  // namespace uroce::verbs
