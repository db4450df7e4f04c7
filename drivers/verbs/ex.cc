// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: the extended verbs perftest uses by default. ibv_qp_ex's ibv_wr_* builder
// (WRs are staged between wr_start and wr_complete and posted all-or-nothing) and ibv_cq_ex's
// start_poll / next_poll / end_poll with the read_* accessors.
#include <errno.h>

#include <cstring>
#include <new>

#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

namespace {

Qp *qx(ibv_qp_ex *x) {
  return reinterpret_cast<Qp *>(x);
}

// ---- ibv_qp_ex ----
void wr_start(ibv_qp_ex *x) {
  Qp *q = qx(x);
  q->ctx->post_mu.lock();  // held until wr_complete / wr_abort (as rdma-core providers do)
  q->nstaged = q->nsge = q->ninline = 0;
  q->stage_err = 0;
  if (q->stage.empty()) {
    const ctl::CreateQpReply &r = q->c->caps;
    const size_t n = r.max_send_wr ? r.max_send_wr : 1;
    try {
      q->stage.resize(n);
      q->stage_sge.resize(n * (r.max_send_sge ? r.max_send_sge : 1));
      q->stage_inline.resize(n * r.max_inline_data);
    } catch (const std::bad_alloc &) {
      q->stage.clear();
      q->stage_err = ENOMEM;
    }
  }
}

StagedWr *new_wr(ibv_qp_ex *x, ibv_wr_opcode op) {
  Qp *q = qx(x);
  if (q->stage_err) return nullptr;
  if (q->nstaged >= q->stage.size()) {
    q->stage_err = ENOMEM;  // more WRs than the send queue holds
    return nullptr;
  }
  StagedWr &s = q->stage[q->nstaged++];
  s.wr = client::SendWr{};
  s.wr.wr_id = x->wr_id;
  s.wr.send_flags = x->wr_flags;
  s.wr.opcode = static_cast<uint8_t>(op);
  s.sge_off = q->nsge;
  s.inline_off = q->ninline;
  s.has_data = false;
  return &s;
}

StagedWr *cur_wr(ibv_qp_ex *x) {
  Qp *q = qx(x);
  if (q->stage_err) return nullptr;
  if (q->nstaged == 0) {
    q->stage_err = EINVAL;  // a setter without a WR
    return nullptr;
  }
  StagedWr *s = &q->stage[q->nstaged - 1];
  if (s->has_data) {
    q->stage_err = EINVAL;  // data set twice for one WR
    return nullptr;
  }
  return s;
}

void unsupported(ibv_qp_ex *x) {
  Qp *q = qx(x);
  if (!q->stage_err) q->stage_err = EOPNOTSUPP;
}

void wr_send(ibv_qp_ex *x) {
  new_wr(x, IBV_WR_SEND);
}
void wr_send_imm(ibv_qp_ex *x, __be32 imm) {
  if (StagedWr *s = new_wr(x, IBV_WR_SEND_WITH_IMM)) s->wr.imm_data = imm;
}
void wr_rdma_write(ibv_qp_ex *x, uint32_t rkey, uint64_t addr) {
  if (StagedWr *s = new_wr(x, IBV_WR_RDMA_WRITE)) {
    s->wr.rkey = rkey;
    s->wr.remote_addr = addr;
  }
}
void wr_rdma_write_imm(ibv_qp_ex *x, uint32_t rkey, uint64_t addr, __be32 imm) {
  if (StagedWr *s = new_wr(x, IBV_WR_RDMA_WRITE_WITH_IMM)) {
    s->wr.rkey = rkey;
    s->wr.remote_addr = addr;
    s->wr.imm_data = imm;
  }
}
void wr_rdma_read(ibv_qp_ex *x, uint32_t rkey, uint64_t addr) {
  if (StagedWr *s = new_wr(x, IBV_WR_RDMA_READ)) {
    s->wr.rkey = rkey;
    s->wr.remote_addr = addr;
  }
}
void wr_atomic_cmp_swp(ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t compare,
                       uint64_t swap) {
  if (StagedWr *s = new_wr(x, IBV_WR_ATOMIC_CMP_AND_SWP)) {
    s->wr.rkey = rkey;
    s->wr.remote_addr = addr;
    s->wr.compare_add = compare;
    s->wr.swap = swap;
  }
}
void wr_atomic_fetch_add(ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t add) {
  if (StagedWr *s = new_wr(x, IBV_WR_ATOMIC_FETCH_AND_ADD)) {
    s->wr.rkey = rkey;
    s->wr.remote_addr = addr;
    s->wr.compare_add = add;
  }
}
void wr_bind_mw(ibv_qp_ex *x, ibv_mw *, uint32_t, const ibv_mw_bind_info *) {
  unsupported(x);
}
void wr_local_inv(ibv_qp_ex *x, uint32_t) {
  unsupported(x);
}
void wr_send_inv(ibv_qp_ex *x, uint32_t) {
  unsupported(x);
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
  if (q->stage_err) return;
  if (q->nstaged == 0 || ah == nullptr || ah->context != x->qp_base.context) {
    q->stage_err = EINVAL;  // (an AH of another context means nothing to this daemon)
    return;
  }
  StagedWr &s = q->stage[q->nstaged - 1];
  s.wr.ah = reinterpret_cast<Ah *>(ah)->handle;
  s.wr.remote_qpn = qpn;
  s.wr.remote_qkey = qkey;
}

void wr_set_sge_list(ibv_qp_ex *x, size_t n, const ibv_sge *list) {
  StagedWr *s = cur_wr(x);
  if (s == nullptr) return;
  Qp *q = qx(x);
  if (n > q->c->caps.max_send_sge || q->nsge + n > q->stage_sge.size() || (n && !list)) {
    q->stage_err = EINVAL;
    return;
  }
  if (n) std::memcpy(q->stage_sge.data() + q->nsge, list, n * sizeof(abi::Sge));
  s->wr.sg_list = q->stage_sge.data() + s->sge_off;
  s->wr.num_sge = static_cast<uint32_t>(n);
  q->nsge += static_cast<uint32_t>(n);
  s->has_data = true;
}

void wr_set_sge(ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t length) {
  const ibv_sge sge{addr, length, lkey};
  wr_set_sge_list(x, 1, &sge);
}

void wr_set_inline_data_list(ibv_qp_ex *x, size_t n, const ibv_data_buf *bufs) {
  StagedWr *s = cur_wr(x);
  if (s == nullptr) return;
  Qp *q = qx(x);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i)
    total += bufs[i].length;
  if (total > q->c->caps.max_inline_data || q->ninline + total > q->stage_inline.size() ||
      q->nsge + 1 > q->stage_sge.size()) {
    q->stage_err = EINVAL;
    return;
  }
  uint8_t *dst = q->stage_inline.data() + q->ninline;
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(dst, bufs[i].addr, bufs[i].length);  // copied now: the app may reuse them
    dst += bufs[i].length;
  }
  abi::Sge &g = q->stage_sge[q->nsge];
  g.addr = reinterpret_cast<uintptr_t>(q->stage_inline.data() + q->ninline);
  g.length = static_cast<uint32_t>(total);
  g.lkey = 0;
  s->wr.sg_list = &g;
  s->wr.num_sge = 1;
  s->wr.send_flags |= IBV_SEND_INLINE;
  q->ninline += static_cast<uint32_t>(total);
  q->nsge += 1;
  s->has_data = true;
}

void wr_set_inline_data(ibv_qp_ex *x, void *addr, size_t length) {
  const ibv_data_buf b{addr, length};
  wr_set_inline_data_list(x, 1, &b);
}

int wr_complete(ibv_qp_ex *x) {
  Qp *q = qx(x);
  Context *c = q->ctx;
  int rc = q->stage_err;
  if (rc == 0 && q->nstaged) {
    // All or nothing: every WR was checked by its builder, so only room can fail here.
    if (q->c->sq.free_slots(q->nstaged) < q->nstaged) rc = ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < q->nstaged; ++i)
      rc = c->cli->post_send(*q->c, q->stage[i].wr);
  }
  q->nstaged = 0;
  c->post_mu.unlock();
  return rc;
}

void wr_abort(ibv_qp_ex *x) {
  Qp *q = qx(x);
  q->nstaged = 0;
  q->ctx->post_mu.unlock();
}

// ---- ibv_cq_ex ----
Cq *cx(ibv_cq_ex *x) {
  return reinterpret_cast<Cq *>(x);
}

int pop_one(Cq *q) {
  if (q->ctx->cli->poll_cq(*q->c, &q->cur, 1) != 1) return ENOENT;
  q->cq.wr_id = q->cur.wr_id;
  q->cq.status = static_cast<ibv_wc_status>(q->cur.status);
  return 0;
}

int start_poll(ibv_cq_ex *x, ibv_poll_cq_attr *attr) {
  if (attr && attr->comp_mask) return EINVAL;
  Cq *q = cx(x);
  q->mu.lock();  // held until end_poll (not taken when this returns non-zero)
  const int rc = pop_one(q);
  if (rc) q->mu.unlock();
  return rc;
}
int next_poll(ibv_cq_ex *x) {
  return pop_one(cx(x));
}
void end_poll(ibv_cq_ex *x) {
  cx(x)->mu.unlock();
}
ibv_wc_opcode read_opcode(ibv_cq_ex *x) {
  return static_cast<ibv_wc_opcode>(cx(x)->cur.opcode);
}
uint32_t read_vendor_err(ibv_cq_ex *x) {
  return cx(x)->cur.vendor_err;
}
uint32_t read_byte_len(ibv_cq_ex *x) {
  return cx(x)->cur.byte_len;
}
__be32 read_imm_data(ibv_cq_ex *x) {
  return cx(x)->cur.imm_data;
}
uint32_t read_qp_num(ibv_cq_ex *x) {
  return cx(x)->cur.qp_num;
}
uint32_t read_src_qp(ibv_cq_ex *x) {
  return cx(x)->cur.src_qp;
}
unsigned int read_wc_flags(ibv_cq_ex *x) {
  return cx(x)->cur.wc_flags;
}
uint32_t read_slid(ibv_cq_ex *x) {
  return cx(x)->cur.slid;
}
uint8_t read_sl(ibv_cq_ex *x) {
  return cx(x)->cur.sl;
}
uint8_t read_dlid_path_bits(ibv_cq_ex *x) {
  return cx(x)->cur.dlid_path_bits;
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
