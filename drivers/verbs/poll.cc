// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: reading completions. ibv_poll_cq and ibv_cq_ex's start_poll / next_poll /
// end_poll with the read_* accessors read abi::Cqe slots in place in the CQ's shared-memory
// ring (peek, read, consume: the daemon reuses a slot only once it is consumed), under the CQ's
// lock; ibv_req_notify_cq arms the ring's notification word.
#include <errno.h>

#include <cstring>

#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

namespace {

// How many CQE slots start_poll / next_poll peek at a time (consumed together).
constexpr uint32_t kPeekBatch = 16;

inline void to_wc(const abi::Cqe &e, ibv_wc *wc) noexcept {
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
}

// ---- ibv_cq_ex ----
Cq *cx(ibv_cq_ex *x) {
  return reinterpret_cast<Cq *>(x);
}

// Peeks the next batch of CQE slots and asks for their lines (written on the daemon's core).
uint32_t peek_batch(shm::RingConsumer &ring) {
  const auto k = static_cast<uint32_t>(ring.peek(kPeekBatch));
  for (uint32_t i = 0; i < k; ++i)
    __builtin_prefetch(ring.at(i));
  return k;
}

// Makes slot `pos` of the peeked batch current (the two fields ibv_cq_ex exposes directly).
void set_cur(Cq *q) {
  q->cur = static_cast<const abi::Cqe *>(q->c->ring.at(q->pos));
  q->cq.wr_id = q->cur->wr_id;
  q->cq.status = static_cast<ibv_wc_status>(q->cur->status);
}

int start_poll(ibv_cq_ex *x, ibv_poll_cq_attr *attr) {
  if (attr && attr->comp_mask) return EINVAL;
  Cq *q = cx(x);
  q->mu.lock();  // held until end_poll (not taken when this returns non-zero)
  q->pos = 0;
  q->npeek = peek_batch(q->c->ring);
  if (q->npeek == 0) {
    q->cur = nullptr;
    q->mu.unlock();
    return ENOENT;
  }
  set_cur(q);
  return 0;
}

int next_poll(ibv_cq_ex *x) {
  Cq *q = cx(x);
  if (q->npeek == 0) return ENOENT;
  if (++q->pos == q->npeek) {  // the batch is read: hand its slots back, look for more
    q->c->ring.consume(q->npeek);
    q->pos = 0;
    q->npeek = peek_batch(q->c->ring);
    if (q->npeek == 0) {
      q->cur = nullptr;
      return ENOENT;
    }
  }
  set_cur(q);
  return 0;
}

void end_poll(ibv_cq_ex *x) {
  Cq *q = cx(x);
  if (q->npeek) q->c->ring.consume(q->pos + 1);  // up to the current one, which the app read
  q->npeek = 0;
  q->cur = nullptr;
  q->mu.unlock();
}

ibv_wc_opcode read_opcode(ibv_cq_ex *x) {
  return static_cast<ibv_wc_opcode>(cx(x)->cur->opcode);
}
uint32_t read_vendor_err(ibv_cq_ex *x) {
  return cx(x)->cur->vendor_err;
}
uint32_t read_byte_len(ibv_cq_ex *x) {
  return cx(x)->cur->byte_len;
}
__be32 read_imm_data(ibv_cq_ex *x) {
  return cx(x)->cur->imm_data;
}
uint32_t read_qp_num(ibv_cq_ex *x) {
  return cx(x)->cur->qp_num;
}
uint32_t read_src_qp(ibv_cq_ex *x) {
  return cx(x)->cur->src_qp;
}
unsigned int read_wc_flags(ibv_cq_ex *x) {
  return cx(x)->cur->wc_flags;
}
uint32_t read_slid(ibv_cq_ex *x) {
  return cx(x)->cur->slid;
}
uint8_t read_sl(ibv_cq_ex *x) {
  return cx(x)->cur->sl;
}
uint8_t read_dlid_path_bits(ibv_cq_ex *x) {
  return cx(x)->cur->dlid_path_bits;
}
// Not produced by uroce; create_cq_ex refuses the wc_flags that would ask for them.
uint64_t read_zero64(ibv_cq_ex *) {
  return 0;
}
uint16_t read_cvlan(ibv_cq_ex *) {
  return 0;
}
uint32_t read_flow_tag(ibv_cq_ex *) {
  return 0;
}
void read_tm_info(ibv_cq_ex *, ibv_wc_tm_info *tm) {
  if (tm) std::memset(tm, 0, sizeof *tm);
}

}  // namespace

namespace uroce::verbs {

int poll_cq_op(ibv_cq *cq, int n, ibv_wc *wc) noexcept {
  if (n < 0 || (n > 0 && wc == nullptr)) return -1;
  if (n == 0) return 0;
  Cq *q = cq_of(cq);
  shm::RingConsumer &ring = q->c->ring;
  std::lock_guard<Spin> g(q->mu);
  const size_t k = ring.peek(static_cast<size_t>(n));
  // The daemon wrote these slots on its own core: ask for all their lines at once (up to
  // kPeekBatch ahead) rather than one miss after the other.
  for (size_t i = 0; i < k && i < kPeekBatch; ++i)
    __builtin_prefetch(ring.at(i));
  for (size_t i = 0; i < k; ++i) {
    if (i + kPeekBatch < k) __builtin_prefetch(ring.at(i + kPeekBatch));
    to_wc(*static_cast<const abi::Cqe *>(ring.at(i)), &wc[i]);
  }
  if (k) ring.consume(k);
  return static_cast<int>(k);
}

void clean_cq(Cq *q, uint32_t qpn) noexcept {
  shm::RingConsumer &ring = q->c->ring;
  std::lock_guard<Spin> g(q->mu);
  // Slots [cons, prod) are the consumer's until consumed: the daemon writes only past prod.
  // Newest first, every kept CQE moves up over the removed ones; then the head is consumed.
  const size_t n = ring.peek(ring.capacity());
  size_t removed = 0;
  for (size_t i = n; i-- > 0;) {
    auto *e = static_cast<abi::Cqe *>(const_cast<void *>(ring.at(i)));
    if (e->qp_num == qpn)
      ++removed;
    else if (removed)
      std::memcpy(const_cast<void *>(ring.at(i + removed)), e, sizeof *e);
  }
  if (removed) ring.consume(removed);
}

int req_notify_cq_op(ibv_cq *cq, int solicited_only) noexcept {
  cq_of(cq)->c->ring.arm(solicited_only != 0);
  return 0;
}

void install_cq_ex_ops(Cq *q) noexcept {
  ibv_cq_ex &x = q->cq;
  x.comp_mask = 0;
  x.start_poll = start_poll;
  x.next_poll = next_poll;
  x.end_poll = end_poll;
  x.read_opcode = read_opcode;
  x.read_vendor_err = read_vendor_err;
  x.read_byte_len = read_byte_len;
  x.read_imm_data = read_imm_data;
  x.read_qp_num = read_qp_num;
  x.read_src_qp = read_src_qp;
  x.read_wc_flags = read_wc_flags;
  x.read_slid = read_slid;
  x.read_sl = read_sl;
  x.read_dlid_path_bits = read_dlid_path_bits;
  x.read_completion_ts = read_zero64;
  x.read_cvlan = read_cvlan;
  x.read_flow_tag = read_flow_tag;
  x.read_tm_info = read_tm_info;
  x.read_completion_wallclock_ns = read_zero64;
}

}  // namespace uroce::verbs
