// SPDX-License-Identifier: BSD-3-Clause
// QP lifecycle (create / modify / query / destroy) and the posting verbs. The transition rules
// themselves are in qp_state.cc.
#include <cerrno>
#include <cstring>

#include "transport/core.h"
#include "transport/qp_state.h"
#include "wire/psn.h"

namespace uroce::transport {

namespace {

// rxe's choice of UDP source port: 0xC000 + a 14-bit multiplicative hash of the QPN, so that
// ECMP / RSS spread QPs (Annex A17.3.1 leaves the source port to the sender).
constexpr uint16_t entropy_port(uint32_t qpn) noexcept {
  return static_cast<uint16_t>(0xC000 | (((qpn * 0x61C88647u) >> (32 - 14)) & 0x3FFF));
}

bool opcode_allowed(QpType t, WrOpcode op) noexcept {
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      return true;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return t != QpType::kUd;
    case WrOpcode::kRdmaRead:
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd:
    case WrOpcode::kSendWithInv:
      return t == QpType::kRc;
    case WrOpcode::kLocalInv:
    case WrOpcode::kBindMw:
      return t != QpType::kUd;  // as rxe (rxe_opcode.c): RC and UC
    default:
      return false;
  }
}

}  // namespace

template <class Q>
size_t EngineCoreT<Q>::qp_footprint(const QpInitAttr &init) noexcept {
  const uint32_t sq = round_pow2(init.cap.max_send_wr ? init.cap.max_send_wr : 1);
  const uint32_t rq = init.srq ? 0 : round_pow2(init.cap.max_recv_wr ? init.cap.max_recv_wr : 1);
  const uint32_t ssge = init.cap.max_send_sge ? init.cap.max_send_sge : 1;
  const uint32_t rsge = init.cap.max_recv_sge ? init.cap.max_recv_sge : 1;
  return sizeof(Qp) +
         size_t{sq} * (sizeof(SendWqe) + ssge * sizeof(Sge) + init.cap.max_inline_data) +
         (rq ? size_t{rq} * (sizeof(RecvWqe) + rsge * sizeof(Sge)) : 0) + rsge * sizeof(Sge);
}

template <class Q>
uint32_t EngineCoreT<Q>::create_qp(const QpInitAttr &init, const typename Q::QpMem &mem) {
  if (init.qp_type != QpType::kRc && init.qp_type != QpType::kUc && init.qp_type != QpType::kUd)
    return 0;
  if (!pds_.valid(init.pd) || !valid_cq(init.send_cq) || !valid_cq(init.recv_cq)) return 0;
  if (init.srq && (!valid_srq(init.srq) || init.qp_type == QpType::kUc)) return 0;
  const QpCap &c = init.cap;
  if (c.max_send_wr > kMaxWr || c.max_recv_wr > kMaxWr || c.max_send_sge > kMaxSge ||
      c.max_recv_sge > kMaxSge || c.max_inline_data > kMaxInline)
    return 0;
  if (c.max_send_wr == 0 && c.max_recv_wr == 0 && init.srq == 0) return 0;
  for (uint32_t i = 0; i < cfg_.max_qp; ++i) {
    Qp &q = qps_[i];
    if (q.in_use) continue;
    const uint32_t old_qpn = q.qpn;
    fresh_qp_slot(i);  // (timers are disarmed when a QP is destroyed)
    cc_init_qp(q);
    q.in_use = true;
    q.qpn = draw_qpn(old_qpn);
    q.type = init.qp_type;
    q.state = QpState::kReset;
    q.pd = init.pd;
    q.send_cq = init.send_cq;
    q.recv_cq = init.recv_cq;
    q.srq = init.srq;
    q.sq_sig_all = init.sq_sig_all;
    q.cap = c;
    if (q.cap.max_send_sge == 0) q.cap.max_send_sge = 1;
    if (q.cap.max_recv_sge == 0) q.cap.max_recv_sge = 1;
    q.udp_sport = entropy_port(q.qpn);
    q.path.udp_sport = q.udp_sport;
    if (q.type == QpType::kUd) {
      q.mtu_enum = Mtu::k4096;
      q.mtu = 4096;
      q.mtu_shift = 12;
    }
    if (!Q::init_sq(q.sq, q.cap, mem) || (!q.srq && !Q::init_rq(q.rq, q.cap, mem))) {
      q.sq.release();
      q.rq.release();
      q.in_use = false;
      return 0;
    }
    q.resp_sge_cap = q.srq ? srqs_[q.srq - 1].rq.max_sge() : q.cap.max_recv_sge;
    q.resp_sge.reset(new Sge[q.resp_sge_cap]);
    pds_.ref(q.pd);
    ++cqs_[q.send_cq - 1].refs;
    ++cqs_[q.recv_cq - 1].refs;
    if (q.srq) ++srqs_[q.srq - 1].refs;
    qp_slot_of_[q.qpn & 0xffffu] = static_cast<uint16_t>(i + 1);
    return q.qpn;
  }
  return 0;
}

template <class Q>
int EngineCoreT<Q>::destroy_qp(uint32_t qpn) noexcept {
  Qp *q = find_qp(qpn);
  if (!q) return EINVAL;
  wheel_.cancel(&q->retrans_timer);
  wheel_.cancel(&q->rnr_timer);
  cc_stop(*q);
  deactivate(*q);
  pds_.unref(q->pd);
  --cqs_[q->send_cq - 1].refs;
  --cqs_[q->recv_cq - 1].refs;
  if (q->srq) --srqs_[q->srq - 1].refs;
  q->sq.release();
  q->rq.release();
  q->resp_sge.reset();
  q->in_use = false;
  qp_slot_of_[q->qpn & 0xffffu] = 0;
  return 0;
}

template <class Q>
void EngineCoreT<Q>::fresh_qp_slot(uint32_t i) {
  Qp &q = qps_[i];
  q.~Qp();
  new (&q) Qp();
  q.index = i;
  q.retrans_timer.qp_index = i;
  q.retrans_timer.kind = kTimerRetransmit;
  q.rnr_timer.qp_index = i;
  q.rnr_timer.kind = kTimerRnr;
}

template <class Q>
uint32_t EngineCoreT<Q>::draw_qpn(uint32_t old_qpn) noexcept {
  // Uniform over the unused low halves 2..0xffff (QP0 / QP1 are special); at most max_qp of
  // 65534 are used, so few draws unless the table is nearly full.
  // (The last QPN is taken again only when it is the one value left.)
  for (uint32_t tries = 0;; ++tries) {
    const uint32_t low = 2 + qpn_rng_.uniform(kMaxQpnLow);
    const uint32_t qpn = cfg_.qpn_base | low;
    if (qp_slot_of_[low] == 0 && (qpn != old_qpn || tries > (1u << 22))) return qpn;
  }
}

template <class Q>
int EngineCoreT<Q>::modify_qp(uint32_t qpn, const QpAttr &attr, uint32_t mask) noexcept {
  Qp *qp = find_qp(qpn);
  if (!qp) return EINVAL;
  Qp &q = *qp;
  QpState next = q.state;
  if (const int rc = qp_check_modify(q.type, q.state, attr, mask, &next)) return rc;
  if ((mask & kQpMaxDestRdAtomic) && attr.max_dest_rd_atomic > kMaxRdAtomic) return EINVAL;

  // Attributes first, then the state change (as rxe_qp_from_attr).
  q.hdr.invalidate();  // rebuilt from path / dest_qpn by the next packet
  if (mask & kQpAccessFlags) q.access = attr.qp_access_flags;
  if (mask & kQpPkeyIndex) q.pkey_index = attr.pkey_index;
  if (mask & kQpQkey) q.qkey = attr.qkey;
  if (mask & kQpAv) {
    q.path = attr.ah;
    q.path.udp_sport = q.udp_sport;
  }
  if (mask & kQpPathMtu) {
    q.mtu_enum = attr.path_mtu;
    q.mtu = mtu_bytes(attr.path_mtu);
    q.mtu_shift = 7 + static_cast<uint32_t>(attr.path_mtu);
  }
  if (mask & kQpTimeout) q.timeout = attr.timeout;
  if (mask & kQpRetryCnt) {
    q.retry_cnt = attr.retry_cnt;
    q.retry_left = attr.retry_cnt;
  }
  if (mask & kQpRnrRetry) {
    q.rnr_retry = attr.rnr_retry;
    q.rnr_left = attr.rnr_retry;
  }
  if (mask & kQpMinRnrTimer) q.min_rnr_timer = attr.min_rnr_timer;
  if (mask & kQpMaxQpRdAtomic) q.max_rd_atomic = attr.max_rd_atomic;
  if (mask & kQpMaxDestRdAtomic) q.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  if (mask & kQpDestQpn) q.dest_qpn = attr.dest_qp_num;
  if (mask & kQpPathMigState) q.path_mig_state = attr.path_mig_state;
  if (mask & kQpEnSqdAsyncNotify) q.en_sqd_async_notify = attr.en_sqd_async_notify;
  if (mask & kQpRqPsn) {
    q.rq_psn = attr.rq_psn & wire::kPsnMask;
    q.resp_psn = q.rq_psn;
  }
  if (mask & kQpSqPsn) {
    q.sq_psn = attr.sq_psn & wire::kPsnMask;
    q.req_psn = q.comp_psn = q.sent_psn = q.sq_psn;
  }
  if (mask & kQpRateLimit) {
    q.rate_limit_bps = uint64_t{attr.rate_limit_kbps} * 1000;
    cc_apply(q);
  }

  if (!(mask & kQpState) || next == q.state) {
    if (q.state == QpState::kRts && q.has_send_work()) activate(q);
    return 0;
  }
  const QpState prev = q.state;
  switch (next) {
    case QpState::kReset: {
      // Back to a blank QP: WQEs are discarded without completions (IBTA 10.3.1.1).
      wheel_.cancel(&q.retrans_timer);
      wheel_.cancel(&q.rnr_timer);
      cc_stop(q);
      q.rate_limit_bps = 0;
      deactivate(q);
      q.sq.reset();
      if (!q.srq) q.rq.reset();
      q.req_idx = q.sq.head();
      q.rd_atomic_out = 0;
      q.noack_pkts = 0;
      q.rnr_wait = false;
      q.window = q.window_target = 0;
      q.resp_in_msg = q.resp_nak_sent = q.resp_drop_msg = q.resp_has_wqe = false;
      q.resp_msn = 0;
      q.res_head = 0;
      for (auto &r : q.res)
        r = RespResource{};
      q.acks.clear();
      q.fatal_nak_pending = false;
      q.cnp_pending = false;
      q.state = QpState::kReset;
      return 0;
    }
    case QpState::kErr:
      enter_error(q);
      return 0;
    case QpState::kRts:
      q.state = QpState::kRts;
      if (prev == QpState::kRtr) {
        q.retry_left = q.retry_cnt;
        q.rnr_left = q.rnr_retry;
      }
      q.sqd_notified = false;
      // Shared rings: WQEs the app published before RTS (the requester copies them).
      if (Q::kShared || q.has_send_work()) activate(q);
      return 0;
    case QpState::kSqd:
      q.state = QpState::kSqd;
      q.sqd_notified = false;
      // Drained already when nothing is in flight.
      if (q.req_idx == q.sq.tail() && q.en_sqd_async_notify) {
        q.sqd_notified = true;
        push_async(AsyncEvent::kSqDrained, q.qpn);
      }
      return 0;
    default:
      q.state = next;
      return 0;
  }
}

template <class Q>
int EngineCoreT<Q>::query_qp(uint32_t qpn, QpAttr *a, QpInitAttr *init) const noexcept {
  const Qp *qp = find_qp(qpn);
  if (!qp) return EINVAL;
  const Qp &q = *qp;
  if (a) {
    *a = QpAttr{};
    a->qp_state = q.state;
    a->cur_qp_state = q.state;
    a->path_mtu = q.mtu_enum;
    a->qkey = q.qkey;
    a->rq_psn = q.resp_psn;
    a->sq_psn = q.req_psn;
    a->dest_qp_num = q.dest_qpn;
    a->qp_access_flags = q.access;
    a->cap = q.cap;
    a->ah = q.path;
    a->pkey_index = q.pkey_index;
    a->en_sqd_async_notify = q.en_sqd_async_notify;
    a->sq_draining = q.state == QpState::kSqd && q.req_idx != q.sq.tail();
    a->max_rd_atomic = q.max_rd_atomic;
    a->max_dest_rd_atomic = q.max_dest_rd_atomic;
    a->min_rnr_timer = q.min_rnr_timer;
    a->port_num = 1;
    a->timeout = q.timeout;
    a->retry_cnt = q.retry_cnt;
    a->rnr_retry = q.rnr_retry;
    a->path_mig_state = q.path_mig_state;
    a->rate_limit_kbps = static_cast<uint32_t>(q.rate_limit_bps / 1000);
  }
  if (init) {
    *init = QpInitAttr{};
    init->qp_type = q.type;
    init->pd = q.pd;
    init->send_cq = q.send_cq;
    init->recv_cq = q.recv_cq;
    init->srq = q.srq;
    init->cap = q.cap;
    init->sq_sig_all = q.sq_sig_all;
  }
  return 0;
}

// post_send below assigns every field of the slot it fills: a field added here must be added
// there (the size check is the reminder).
static_assert(sizeof(SendWqe) == 96, "post_send assigns every SendWqe field; update it");

template <class Q>
int EngineCoreT<Q>::post_send(uint32_t qpn, const SendWr &wr) noexcept {
  if constexpr (Q::kShared) {  // the app posts into the shared rings
    (void)qpn;
    (void)wr;
    return EINVAL;
  } else {
    Qp *qp = find_qp(qpn);
    if (!qp) return EINVAL;
    Qp &q = *qp;
    if (q.state == QpState::kReset || q.state == QpState::kInit || q.state == QpState::kRtr)
      return EINVAL;
    if (!opcode_allowed(q.type, wr.opcode)) return EINVAL;
    // The SQ's own copies of cap.max_send_sge / max_inline_data: on the hot lines (qp.h).
    if (wr.num_sge > q.sq.max_sge()) return EINVAL;
    uint64_t len = 0;
    for (uint32_t i = 0; i < wr.num_sge; ++i)
      len += wr.sg_list[i].length;
    if (len > kMaxMsgSize) return EINVAL;
    const bool atomic =
        wr.opcode == WrOpcode::kAtomicCmpAndSwp || wr.opcode == WrOpcode::kAtomicFetchAndAdd;
    if (atomic && (wr.num_sge != 1 || len != 8)) return EINVAL;
    if ((wr.send_flags & kSendInline) &&
        (len > q.sq.max_inline() || atomic || wr.opcode == WrOpcode::kRdmaRead))
      return EINVAL;
    if (q.type == QpType::kUd && len > q.mtu) return EINVAL;
    if (q.sq.full()) return ENOMEM;

    const uint32_t idx = q.sq.head();
    // The queue is deep (2048 WQEs of 96 + 16 * max_sge bytes per QP in the bench) and a slot is
    // cold when its turn comes again: start taking the lines of the slot a few posts ahead.
    constexpr uint32_t kPrefetchAhead = 4;
    const auto *ahead = reinterpret_cast<const char *>(&q.sq.at(idx + kPrefetchAhead));
    __builtin_prefetch(ahead, 1);
    __builtin_prefetch(ahead + sizeof(SendWqe) - 1, 1);
    __builtin_prefetch(q.sq.sges(idx + kPrefetchAhead), 1);
    // Every field is assigned, none through a zeroed temporary: `w = SendWqe{}` compiled to a
    // `rep stos` of the 96-byte struct on the stack and a copy, half of post_send's time in the
    // uroced profile (doc/perf.md).
    SendWqe &w = q.sq.at(idx);
    w.state = WqeState::kPosted;
    w.checked = false;
    w.fault = 0;
    w.first_psn = 0;
    w.last_psn = 0;
    w.next_off = 0;
    w.wr_id = wr.wr_id;
    w.opcode = wr.opcode;
    w.flags = wr.send_flags;
    w.num_sge = wr.num_sge;
    w.length = static_cast<uint32_t>(len);
    w.imm_be = wr.imm_data_be;
    w.inv_rkey = wr.invalidate_rkey;
    w.remote_addr = wr.remote_addr;
    w.rkey = wr.rkey;
    w.compare_add = wr.compare_add;
    w.swap = wr.swap;
    w.ah = wr.ah;
    w.remote_qpn = wr.remote_qpn & wire::kPsnMask;
    w.remote_qkey = wr.remote_qkey;
    if (wr.send_flags & kSendInline) {
      // Inline: the bytes are copied now; sg_list addresses are readable by the engine.
      uint8_t *dst = q.sq.inl(idx);
      for (uint32_t i = 0; i < wr.num_sge; ++i) {
        if (wr.sg_list[i].length)
          std::memcpy(dst, reinterpret_cast<const void *>(wr.sg_list[i].addr),
                      wr.sg_list[i].length);
        dst += wr.sg_list[i].length;
      }
    } else {
      // An element loop, not memcpy: GCC expands the variable-length memcpy into `rep movsq`,
      // which dominated post_send for the usual one or two SGEs (doc/perf.md).
      Sge *dst = q.sq.sges(idx);
      for (uint32_t i = 0; i < wr.num_sge; ++i)
        dst[i] = wr.sg_list[i];
    }
    q.sq.push();
    if (q.state == QpState::kErr || q.state == QpState::kSqe) {
      flush_send_queue(q);
      return 0;
    }
    if (q.state == QpState::kRts && !q.rnr_wait) activate(q);  // the doorbell
    return 0;
  }
}

template <class Q>
int EngineCoreT<Q>::post_recv(uint32_t qpn, const RecvWr &wr) noexcept {
  if constexpr (Q::kShared) {  // the app posts into the shared rings
    (void)qpn;
    (void)wr;
    return EINVAL;
  } else {
    Qp *qp = find_qp(qpn);
    if (!qp) return EINVAL;
    Qp &q = *qp;
    if (q.srq || q.state == QpState::kReset) return EINVAL;
    if (wr.num_sge > q.rq.max_sge()) return EINVAL;
    const int rc = q.rq.post(wr);
    if (rc) return rc;
    if (q.state == QpState::kErr) flush_recv_queue(q);
    return 0;
  }
}

template <class Q>
int EngineCoreT<Q>::post_srq_recv(uint32_t srq, const RecvWr &wr) noexcept {
  if constexpr (Q::kShared) {  // the app posts into the shared rings
    (void)srq;
    (void)wr;
    return EINVAL;
  } else {
    if (!valid_srq(srq)) return EINVAL;
    return srqs_[srq - 1].rq.post(wr);
  }
}

template <class Q>
WcStatus EngineCoreT<Q>::check_copied_wqe(const Qp &q, const SendWqe &w) const noexcept {
  if (w.fault) return static_cast<WcStatus>(w.fault);
  if (!opcode_allowed(q.type, w.opcode)) return WcStatus::kLocQpOpErr;
  const bool atomic =
      w.opcode == WrOpcode::kAtomicCmpAndSwp || w.opcode == WrOpcode::kAtomicFetchAndAdd;
  if ((w.flags & kSendInline) && (atomic || w.opcode == WrOpcode::kRdmaRead))
    return WcStatus::kLocQpOpErr;
  if (w.num_sge > q.sq.max_sge() || (atomic && (w.num_sge != 1 || w.length != 8)) ||
      ((w.flags & kSendInline) && w.length > q.sq.max_inline()) ||
      (q.type == QpType::kUd && w.length > q.mtu))
    return WcStatus::kLocLenErr;
  return WcStatus::kSuccess;
}

template class EngineCoreT<PrivateQueues>;
template class EngineCoreT<RingQueues>;

}  // namespace uroce::transport
