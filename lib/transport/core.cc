// SPDX-License-Identifier: BSD-3-Clause
// EngineCore: construction, the object tables (PD, MR, CQ, SRQ, AH), completions and the
// scatter / gather helpers every role uses. QPs: qp.cc.
#include "transport/core.h"

#include <cerrno>
#include <cstring>

namespace uroce::transport {

namespace {

// The seeds of an engine's own object tables (MR keys) and of its QPN generator.
uint64_t tables_seed(const EngineConfig &c) noexcept {
  return c.seed ? c.seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull : 0;
}
util::Csprng qpn_rng_for(const EngineConfig &c) {
  return c.seed ? util::Csprng(c.seed ^ 0x5150'4E00'0000'0000ull) : util::Csprng();
}

}  // namespace

template <class Q>
EngineCoreT<Q>::EngineCoreT(const EngineConfig &cfg)
    : cfg_(cfg),
      wheel_(cfg.timer_tick_ns, 0),
      own_tables_(cfg.tables ? nullptr
                             : std::make_unique<ObjectTables>(cfg.max_pd, cfg.max_mr, cfg.max_ah,
                                                              tables_seed(cfg))),
      tab_(cfg.tables ? *cfg.tables : *own_tables_),
      pds_(tab_.pds),
      mrs_(tab_.mrs),
      ahs_(tab_.ahs),
      cqs_(new CompletionQueue[cfg.max_cq]),
      srqs_(new SharedRecvQueue[cfg.max_srq]),
      qps_(new Qp[cfg.max_qp]),
      qp_slot_of_(new uint16_t[1u << 16]()),
      qpn_rng_(qpn_rng_for(cfg)),
      dirty_(new uint32_t[cfg.max_cq ? cfg.max_cq : 1]) {
  cfg_.qpn_base &= 0xff0000u;                              // the prefix; the rest is random
  if (cfg_.max_qp > kMaxQpnLow) cfg_.max_qp = kMaxQpnLow;  // 16 bits, minus QP0 / QP1
  for (uint32_t i = 0; i < cfg_.max_qp; ++i)
    fresh_qp_slot(i);
}

template <class Q>
EngineCoreT<Q>::~EngineCoreT() {
  wheel_.clear();
}

template <class Q>
int EngineCoreT<Q>::reset() {
  if (cfg_.tables != nullptr) return EINVAL;
  // What may throw comes first: from here on nothing fails.
  ObjectTables tables(cfg_.max_pd, cfg_.max_mr, cfg_.max_ah, tables_seed(cfg_));
  util::Csprng rng = qpn_rng_for(cfg_);
  wheel_.reset(0);  // disarms every node: nothing below is linked into the wheel any more
  // Every slot as the constructor made it (a slot's last QPN included: draw_qpn avoids it).
  for (uint32_t i = 0; i < cfg_.max_qp; ++i) {
    Qp &q = qps_[i];
    if (q.in_use) qp_slot_of_[q.qpn & 0xffffu] = 0;
    fresh_qp_slot(i);
  }
  for (uint32_t i = 0; i < cfg_.max_cq; ++i) {
    cqs_[i].~CompletionQueue();
    new (&cqs_[i]) CompletionQueue();
  }
  for (uint32_t i = 0; i < cfg_.max_srq; ++i) {
    srqs_[i].~SharedRecvQueue();
    new (&srqs_[i]) SharedRecvQueue();
  }
  *own_tables_ = std::move(tables);  // pds_, mrs_, ahs_ name its members: still valid
  qpn_rng_ = rng;
  ctr_ = EngineCounters{};
  cc_retired_ = DcqcnRp::Stats{};
  now_ = 0;
  act_head_ = act_tail_ = nullptr;
  active_count_ = 0;
  dirty_head_ = dirty_n_ = 0;
  for (AsyncEventRecord &e : async_)
    e = AsyncEventRecord{};
  async_head_ = async_tail_ = 0;
  ip_id_ = 0;
  return 0;
}

template <class Q>
int EngineCoreT<Q>::reg_mr(uint32_t pd, void *host, uint64_t app_va, uint64_t len, uint32_t access,
                           uint32_t *lkey, uint32_t *rkey) noexcept {
  uint32_t key = 0;
  const int rc = tab_.reg_mr(pd, host, app_va, len, access, &key);
  if (rc) return rc;
  *lkey = key;
  *rkey = key;
  return 0;
}

template <class Q>
int EngineCoreT<Q>::dereg_mr(uint32_t lkey) noexcept {
  const int rc = tab_.retire_mr(lkey);
  if (rc == 0) tab_.release_mr(lkey);
  return rc;
}

template <class Q>
int EngineCoreT<Q>::rereg_mr(uint32_t lkey, uint32_t pd, uint32_t access) noexcept {
  return tab_.rereg_mr(lkey, pd, access);
}

template <class Q>
uint32_t EngineCoreT<Q>::create_cq(uint32_t depth, const typename Q::CqMem &mem) {
  if (depth == 0 || depth > cfg_.max_cqe) return 0;
  for (uint32_t i = 0; i < cfg_.max_cq; ++i)
    if (!cqs_[i].in_use()) {
      if (!Q::init_cq(cqs_[i], depth, mem)) return 0;
      cqs_[i].refs = 0;
      return i + 1;
    }
  return 0;
}

template <class Q>
int EngineCoreT<Q>::destroy_cq(uint32_t cq) noexcept {
  if (!valid_cq(cq)) return EINVAL;
  if (cqs_[cq - 1].refs) return EBUSY;
  if (cqs_[cq - 1].dirty) {  // take it off the dirty list, keeping the others' order
    uint32_t k = 0;
    for (uint32_t i = 0; i < dirty_n_; ++i) {
      const uint32_t h = dirty_[(dirty_head_ + i) % cfg_.max_cq];
      if (h != cq) dirty_[(dirty_head_ + k++) % cfg_.max_cq] = h;
    }
    dirty_n_ = k;
    cqs_[cq - 1].dirty = false;
  }
  cqs_[cq - 1].release();
  return 0;
}

template <class Q>
uint32_t EngineCoreT<Q>::take_dirty_cqs(uint32_t *out, uint32_t n) noexcept {
  uint32_t k = 0;
  while (k < n && dirty_n_ != 0) {
    const uint32_t cq = dirty_[dirty_head_];
    dirty_head_ = (dirty_head_ + 1) % cfg_.max_cq;
    --dirty_n_;
    cqs_[cq - 1].dirty = false;
    out[k++] = cq;
  }
  return k;
}

template <class Q>
uint32_t EngineCoreT<Q>::create_srq(uint32_t pd, uint32_t max_wr, uint32_t max_sge,
                                    const typename Q::SrqMem &mem) {
  if (!pds_.valid(pd) || max_wr == 0 || max_wr > kMaxWr || max_sge == 0 || max_sge > kMaxSge)
    return 0;
  for (uint32_t i = 0; i < cfg_.max_srq; ++i)
    if (!srqs_[i].in_use) {
      SharedRecvQueue &s = srqs_[i];
      if (!Q::init_srq(s.rq, max_wr, max_sge, mem)) return 0;
      s.broken = false;
      s.pd = pd;
      s.limit = 0;
      s.refs = 0;
      s.in_use = true;
      pds_.ref(pd);
      return i + 1;
    }
  return 0;
}

template <class Q>
int EngineCoreT<Q>::modify_srq(uint32_t srq, uint32_t srq_limit) noexcept {
  if (!valid_srq(srq)) return EINVAL;
  SharedRecvQueue &s = srqs_[srq - 1];
  if (srq_limit > s.rq.capacity()) return EINVAL;
  s.limit = srq_limit;
  return 0;
}

template <class Q>
int EngineCoreT<Q>::destroy_srq(uint32_t srq) noexcept {
  if (!valid_srq(srq)) return EINVAL;
  SharedRecvQueue &s = srqs_[srq - 1];
  if (s.refs) return EBUSY;
  s.rq.release();
  s.in_use = false;
  pds_.unref(s.pd);
  return 0;
}

template <class Q>
uint32_t EngineCoreT<Q>::create_ah(uint32_t pd, const AhAttr &attr) noexcept {
  return tab_.create_ah(pd, attr);
}

template <class Q>
int EngineCoreT<Q>::destroy_ah(uint32_t ah) noexcept {
  const int rc = tab_.retire_ah(ah);
  if (rc == 0) tab_.release_ah(ah);
  return rc;
}

template <class Q>
uint32_t EngineCoreT<Q>::poll_cq(uint32_t cq, Wc *wc, uint32_t n) noexcept {
  if (!valid_cq(cq)) return 0;
  return cqs_[cq - 1].poll(wc, n);
}

template <class Q>
int EngineCoreT<Q>::req_notify_cq(uint32_t cq, bool solicited_only) noexcept {
  if (!valid_cq(cq)) return EINVAL;
  cqs_[cq - 1].arm(solicited_only);
  return 0;
}

template <class Q>
uint32_t EngineCoreT<Q>::cq_events(uint32_t cq) noexcept {
  if (!valid_cq(cq)) return 0;
  return cqs_[cq - 1].take_events();
}

template <class Q>
void EngineCoreT<Q>::push_async(AsyncEvent type, uint32_t handle) noexcept {
  if (async_head_ - async_tail_ >= kAsyncCap) return;
  async_[async_head_ % kAsyncCap] = AsyncEventRecord{type, handle};
  ++async_head_;
}

template <class Q>
bool EngineCoreT<Q>::poll_async_event(AsyncEventRecord *ev) noexcept {
  if (async_head_ == async_tail_) return false;
  *ev = async_[async_tail_ % kAsyncCap];
  ++async_tail_;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Completions

template <class Q>
void EngineCoreT<Q>::complete_send(Qp &qp, SendWqe &w, WcStatus st) noexcept {
  w.state = WqeState::kDone;
  // Errors always complete; successes only when signalled (IBTA 10.8.6, o10-9).
  if (st == WcStatus::kSuccess && !qp.sq_sig_all && !(w.flags & kSendSignaled)) return;
  Wc wc;
  wc.wr_id = w.wr_id;
  wc.status = st;
  wc.opcode = wc_opcode_of(w.opcode);
  wc.byte_len = w.length;
  wc.qp_num = qp.qpn;
  wc.pkey_index = qp.pkey_index;
  if constexpr (!Q::kShared) note_cq_dirty(qp.send_cq);
  CompletionQueue &cq = cqs_[qp.send_cq - 1];
  const bool first = !cq.overflowed();
  if (!cq.push(wc, false)) {
    ++ctr_.cq_overflows;
    // Shared rings: one event per CQ (a broken or full app ring fails every later push).
    if (!Q::kShared || first) push_async(AsyncEvent::kCqErr, qp.send_cq);
  }
}

template <class Q>
void EngineCoreT<Q>::push_recv_wc(Qp &qp, const Wc &wc, bool solicited) noexcept {
  if (qp.srq == 0) qp.rq.done();  // every receive completion is the oldest WQE taken
  if constexpr (!Q::kShared) note_cq_dirty(qp.recv_cq);
  CompletionQueue &cq = cqs_[qp.recv_cq - 1];
  const bool first = !cq.overflowed();
  if (!cq.push(wc, solicited)) {
    ++ctr_.cq_overflows;
    if (!Q::kShared || first) push_async(AsyncEvent::kCqErr, qp.recv_cq);
    // A lost receive completion is fatal for the QP (rxe_resp.c: RESPST_ERR_CQ_OVERFLOW,
    // class G -> RESPST_ERROR). A lost send completion is not (rxe_comp.c do_complete).
    if (qp.state != QpState::kErr) enter_error(qp);
  }
}

// Shared rings: what the app published and the engine has not copied yet is flushed too, and
// the doorbell token goes back to the app, so that each later post rings and is flushed.
template <class Q>
void EngineCoreT<Q>::flush_send_queue(Qp &qp) noexcept {
  for (;;) {
    for (uint32_t c = qp.sq.tail(); c != qp.sq.head(); ++c) {
      qp.sq.pop();  // the slot is free before its completion is visible
      complete_send(qp, qp.sq.at(c), WcStatus::kWrFlushErr);
    }
    qp.req_idx = qp.sq.head();
    qp.rd_atomic_out = 0;
    if constexpr (!Q::kShared) return;
    if (pull_sq(qp)) continue;
    if (!qp.sq.release_notify()) return;
  }
}

template <class Q>
void EngineCoreT<Q>::flush_recv_queue(Qp &qp) noexcept {
  Wc wc;
  wc.status = WcStatus::kWrFlushErr;
  wc.opcode = WcOpcode::kRecv;
  wc.qp_num = qp.qpn;
  if (qp.resp_has_wqe) {
    wc.wr_id = qp.resp_wqe.wr_id;
    push_recv_wc(qp, wc, false);
    qp.resp_has_wqe = false;
  }
  if (qp.srq == 0) {
    RecvWqe w;
    do {
      while (qp.rq.take(w, qp.resp_sge.get(), qp.resp_sge_cap) != RecvTake::kEmpty) {
        wc.wr_id = w.wr_id;
        push_recv_wc(qp, wc, false);
      }
    } while (qp.rq.release_notify());  // shared rings: the app rings for every later post
  }
}

template <class Q>
void EngineCoreT<Q>::enter_error(Qp &qp) noexcept {
  if (qp.state == QpState::kErr) return;
  qp.state = QpState::kErr;
  wheel_.cancel(&qp.retrans_timer);
  wheel_.cancel(&qp.rnr_timer);
  cc_stop(qp);
  qp.rnr_wait = false;
  flush_send_queue(qp);
  flush_recv_queue(qp);
  qp.acks.clear();
  qp.resp_in_msg = false;
  qp.cnp_pending = false;
  if (qp.srq) push_async(AsyncEvent::kQpLastWqeReached, qp.qpn);
  if (qp.fatal_nak_pending)
    activate(qp);
  else
    deactivate(qp);
}

template <class Q>
void EngineCoreT<Q>::enter_sqe(Qp &qp) noexcept {
  qp.state = QpState::kSqe;
  flush_send_queue(qp);
}

template <class Q>
bool EngineCoreT<Q>::take_recv_wqe(Qp &qp) noexcept {
  RecvQueue *rq;
  SharedRecvQueue *s = nullptr;
  if (qp.srq) {
    s = &srqs_[qp.srq - 1];
    rq = &s->rq;
  } else {
    rq = &qp.rq;
  }
  RecvTake t;
  while ((t = rq->take(qp.resp_wqe, qp.resp_sge.get(), qp.resp_sge_cap)) == RecvTake::kBad) {
    ++ctr_.bad_wqes;
    // Shared rings only: a malformed WQE. An SRQ's belongs to no QP: IBV_EVENT_SRQ_ERR, and the
    // next one is taken. An RQ's completes in error and the QP enters ERR.
    if (s) {
      push_async(AsyncEvent::kSrqErr, qp.srq);
      continue;
    }
    Wc wc;
    wc.wr_id = qp.resp_wqe.wr_id;
    wc.status = WcStatus::kLocLenErr;
    wc.opcode = WcOpcode::kRecv;
    wc.qp_num = qp.qpn;
    push_recv_wc(qp, wc, false);
    enter_error(qp);
    return false;
  }
  if (t == RecvTake::kEmpty) {
    if (rq->corrupt()) {  // the app broke its ring's index
      if (s == nullptr) {
        if (qp.state != QpState::kErr) {
          push_async(AsyncEvent::kQpFatal, qp.qpn);
          enter_error(qp);
        }
      } else if (!s->broken) {
        s->broken = true;
        push_async(AsyncEvent::kSrqErr, qp.srq);
      }
    }
    return false;
  }
  ++ctr_.rq_wqes;
  qp.resp_has_wqe = true;
  qp.resp_off = 0;
  if (s && s->limit && rq->count() < s->limit) {
    s->limit = 0;  // one event per arming
    push_async(AsyncEvent::kSrqLimitReached, qp.srq);
  }
  return true;
}

template <class Q>
bool EngineCoreT<Q>::place_recv(Qp &qp, uint32_t off, const uint8_t *src, uint32_t len,
                                WcStatus *st) noexcept {
  if (len == 0) return true;
  if (off > qp.resp_wqe.length || len > qp.resp_wqe.length - off) {
    *st = WcStatus::kLocLenErr;
    return false;
  }
  const uint32_t pd = qp.srq ? srqs_[qp.srq - 1].pd : qp.pd;
  for (uint32_t i = 0; i < qp.resp_wqe.num_sge && len; ++i) {
    const Sge &s = qp.resp_sge[i];
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    const uint32_t n = s.length - off < len ? s.length - off : len;
    uint8_t *host = nullptr;
    if (mrs_.check(s.lkey, pd, s.addr + off, n, kAccessLocalWrite, &host) != MrCheck::kOk) {
      *st = WcStatus::kLocProtErr;
      return false;
    }
    std::memcpy(host, src, n);
    src += n;
    len -= n;
    off = 0;
  }
  return true;
}

template <class Q>
bool EngineCoreT<Q>::gather_send(Qp &qp, uint32_t idx, uint32_t off, uint8_t *dst,
                                 uint32_t len) noexcept {
  if (len == 0) return true;
  const SendWqe &w = qp.sq.at(idx);
  if (w.flags & kSendInline) {
    std::memcpy(dst, qp.sq.inl(idx) + off, len);
    return true;
  }
  const Sge *sg = qp.sq.sges(idx);
  for (uint32_t i = 0; i < w.num_sge && len; ++i) {
    if (off >= sg[i].length) {
      off -= sg[i].length;
      continue;
    }
    const uint32_t n = sg[i].length - off < len ? sg[i].length - off : len;
    uint8_t *host = nullptr;
    if (mrs_.check(sg[i].lkey, qp.pd, sg[i].addr + off, n, 0, &host) != MrCheck::kOk) return false;
    std::memcpy(dst, host, n);
    dst += n;
    len -= n;
    off = 0;
  }
  return len == 0;
}

template <class Q>
bool EngineCoreT<Q>::scatter_send(Qp &qp, uint32_t idx, uint32_t off, const uint8_t *src,
                                  uint32_t len) noexcept {
  if (len == 0) return true;
  const SendWqe &w = qp.sq.at(idx);
  const Sge *sg = qp.sq.sges(idx);
  for (uint32_t i = 0; i < w.num_sge && len; ++i) {
    if (off >= sg[i].length) {
      off -= sg[i].length;
      continue;
    }
    const uint32_t n = sg[i].length - off < len ? sg[i].length - off : len;
    uint8_t *host = nullptr;
    if (mrs_.check(sg[i].lkey, qp.pd, sg[i].addr + off, n, kAccessLocalWrite, &host) !=
        MrCheck::kOk)
      return false;
    std::memcpy(host, src, n);
    src += n;
    len -= n;
    off = 0;
  }
  return len == 0;
}

template <class Q>
WcStatus EngineCoreT<Q>::check_local_sges(Qp &qp, uint32_t idx) noexcept {
  const SendWqe &w = qp.sq.at(idx);
  if (w.flags & kSendInline) return WcStatus::kSuccess;
  const bool writes = w.opcode == WrOpcode::kRdmaRead || w.opcode == WrOpcode::kAtomicCmpAndSwp ||
                      w.opcode == WrOpcode::kAtomicFetchAndAdd;
  const Sge *sg = qp.sq.sges(idx);
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    if (sg[i].length == 0) continue;
    uint8_t *host = nullptr;
    if (mrs_.check(sg[i].lkey, qp.pd, sg[i].addr, sg[i].length,
                   writes ? uint32_t{kAccessLocalWrite} : 0u, &host) != MrCheck::kOk)
      return WcStatus::kLocProtErr;
  }
  return WcStatus::kSuccess;
}

template <class Q>
uint32_t EngineCoreT<Q>::credits_code(const Qp &qp) const noexcept {
  if (qp.srq) return aeth::kCreditsUnlimited;  // IBTA 10.2.9.5: SRQ QPs send "invalid" credits
  return aeth::credit_code(qp.rq.count());
}

template <class Q>
bool EngineCoreT<Q>::pull_sq(Qp &qp) noexcept {
  if (const uint32_t n = qp.sq.pull(cfg_.tx_budget); n != 0) {
    ctr_.sq_wqes += n;
    return true;
  }
  if (qp.sq.corrupt() && qp.state != QpState::kErr) {
    // No WQE to complete it with: the QP is lost (a local work queue catastrophic error).
    push_async(AsyncEvent::kQpFatal, qp.qpn);
    enter_error(qp);
  }
  return false;
}

template <class Q>
int EngineCoreT<Q>::sq_doorbell(uint32_t qpn) noexcept {
  Qp *q = find_qp(qpn);
  if (q == nullptr) return EINVAL;
  q->sq.rung();  // the token is the engine's until the requester finds the queue empty
  if (q->state == QpState::kErr || q->state == QpState::kSqe) {
    flush_send_queue(*q);  // pulls and flushes everything, gives the token back
  } else if (q->state == QpState::kRts && !q->rnr_wait) {
    activate(*q);
  }
  return 0;
}

template <class Q>
int EngineCoreT<Q>::rq_doorbell(uint32_t qpn) noexcept {
  Qp *q = find_qp(qpn);
  if (q == nullptr || q->srq) return EINVAL;
  q->rq.rung();
  if (q->state == QpState::kErr) flush_recv_queue(*q);
  return 0;
}

template class EngineCoreT<PrivateQueues>;
template class EngineCoreT<RingQueues>;

}  // namespace uroce::transport
