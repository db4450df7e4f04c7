// SPDX-License-Identifier: BSD-3-Clause
// EngineCore: everything of the transport engine that does not transmit.
//
// It owns the fixed-capacity tables (PDs, MRs, CQs, SRQs, AHs, QPs), the control plane
// (create / modify / destroy), the posting and polling verbs, the timing wheel, the active list
// of QPs that have work, and the two receive-side roles that only consume packets:
//   responder_rx (resp.cc)  request packets -> placement, receive CQEs, queued responses
//   completer_rx (comp.cc)  response packets -> send CQEs, retries (go-back-N), RNR waits
// Engine<Port, Clock> (engine.h) derives from it and adds what needs the port: rx routing
// (recv.h), the requester (req.h) and response transmission (resp_tx.h).
#pragma once

#include <cstdint>
#include <memory>

#include "transport/cq.h"
#include "transport/dcqcn_params.h"
#include "transport/mr.h"
#include "transport/qp.h"
#include "transport/queues.h"
#include "transport/ring_queues.h"
#include "transport/tables.h"
#include "transport/timer.h"
#include "transport/verbs_types.h"
#include "transport/wq.h"
#include "wire/packet.h"
#include "wire/psn.h"

namespace uroce::transport {

// Congestion-control hooks (DCQCN plugs in here). Called on the engine's thread; may be null.
struct CcHooks {
  void *ctx = nullptr;
  // A data packet arrived with CE set for `qpn` (the notification point saw congestion).
  void (*on_ce)(void *ctx, uint32_t qpn, uint64_t now_ns) = nullptr;
  // A CNP was sent for / received by `qpn` (the reaction point should cut its rate).
  void (*on_cnp_sent)(void *ctx, uint32_t qpn, uint64_t now_ns) = nullptr;
  void (*on_cnp_received)(void *ctx, uint32_t qpn, uint64_t now_ns) = nullptr;
};

struct EngineConfig {
  uint32_t max_qp = 256;
  uint32_t max_mr = 1024;
  uint32_t max_pd = 64;
  uint32_t max_cq = 256;
  uint32_t max_srq = 64;
  uint32_t max_ah = 256;
  uint32_t max_cqe = 1u << 16;
  // Bits 16..23: the QPN prefix every QP of this engine carries (uroced: the owning worker,
  // daemon/lcore.h); the low 16 bits of a QPN are drawn at random (>= 2) at each create_qp.
  uint32_t qpn_base = 0x11;
  // Memory keys and QPNs (doc/security.md): 0 draws them from a getrandom(2)-keyed CSPRNG
  // (uroced); another value makes them reproducible (tests, fuzzers: never facing an attacker).
  uint64_t seed = 0;
  bool ecn = false;                   // mark data packets ECT(0)
  uint64_t cnp_interval_ns = 50'000;  // at most one CNP per QP per interval (DCQCN NP)
  int16_t cnp_dscp = -1;              // DSCP of CNPs (ConnectX cnp_dscp); -1: the QP's own
  int8_t cnp_pcp = -1;                // 802.1p priority of CNPs on a VLAN path; -1: the QP's
  uint32_t tx_budget = 16;            // packets a QP may send per poll (fairness)
  uint32_t max_inflight_psn = 256;    // requester window: unacknowledged PSNs
  uint32_t ack_req_every = 64;        // set AckReq at least every N packets of a long message
  uint32_t loss_window = 8;           // RC PSNs in flight right after a loss (0: no loss window)
  uint64_t timer_tick_ns = 1024;
  // DCQCN reaction point per RC / UC QP (cc.cc); null: off. Must outlive the engine.
  const DcqcnParams *dcqcn = nullptr;
  double line_rate_mbps = 100000;  // the rate an unthrottled QP sends at
  CcHooks hooks;
  // PDs, MRs and AHs shared with other engines (uroced: every worker of a device; tables.h);
  // must outlive the engine. nullptr: the engine owns its own (max_pd / max_mr / max_ah, seed).
  ObjectTables *tables = nullptr;
};

enum class DropReason : uint8_t {
  kParse = 0,    // lib/wire rejected the frame (see parse_errors)
  kNoQp,         // destination QPN unknown
  kQpState,      // QP not in a state that receives
  kOpcode,       // opcode not valid for the QP's transport
  kAddress,      // source / destination GID do not match the connection
  kPkey,         // P_Key not in our partition
  kQkey,         // UD Q_Key mismatch
  kSequence,     // PSN out of sequence (UC) or beyond ePSN (RC, after the one NAK)
  kDuplicate,    // duplicate without a resource to answer it
  kResource,     // UD/UC: no receive WQE; or response queue full
  kBadResponse,  // response for a PSN never sent
  kLength,       // UD/UC length errors
  kCount
};

struct EngineCounters {
  uint64_t rx_pkts = 0, tx_pkts = 0;
  uint64_t tx_backpressure = 0;  // tx_alloc returned no buffer
  uint64_t drops[static_cast<size_t>(DropReason::kCount)] = {};
  uint64_t parse_errors[static_cast<size_t>(wire::ParseError::kCount)] = {};
  uint64_t acks_coalesced = 0;
  uint64_t cq_overflows = 0;
  // Shared rings: WQEs copied from SQ rings, receive WQEs taken from RQ / SRQ rings, and
  // copies that failed the checks (each completes in error, or IBV_EVENT_SRQ_ERR).
  uint64_t sq_wqes = 0, rq_wqes = 0, bad_wqes = 0;
  // ECN / CNP events of every QP the engine ever had (as QpCounters::ce_seen, cnp_*).
  uint64_t ce_seen = 0, cnp_sent = 0, cnp_rcvd = 0;
  uint64_t drop(DropReason r) const noexcept { return drops[static_cast<size_t>(r)]; }
};

// Congestion-control totals of one engine, or summed over the engines of a port (uroce-stat
// port.P.cc.*, doc/congestion.md). The counters count every QP the engine ever had, destroyed
// or reset ones included; throttled_* describe the QPs throttled now (min: 0 when none).
struct CcTotals {
  uint64_t ce_seen = 0, cnp_sent = 0, cnp_rcvd = 0;
  uint64_t cnps_handled = 0, rate_cuts = 0, rate_increases = 0, releases = 0;  // RP stats
  uint64_t throttled_qps = 0;
  double throttled_rate_sum_mbps = 0, throttled_rate_min_mbps = 0;
  void add(const CcTotals &o) noexcept {
    ce_seen += o.ce_seen;
    cnp_sent += o.cnp_sent;
    cnp_rcvd += o.cnp_rcvd;
    cnps_handled += o.cnps_handled;
    rate_cuts += o.rate_cuts;
    rate_increases += o.rate_increases;
    releases += o.releases;
    if (o.throttled_qps != 0 &&
        (throttled_qps == 0 || o.throttled_rate_min_mbps < throttled_rate_min_mbps))
      throttled_rate_min_mbps = o.throttled_rate_min_mbps;
    throttled_qps += o.throttled_qps;
    throttled_rate_sum_mbps += o.throttled_rate_sum_mbps;
  }
};

struct AsyncEventRecord {
  AsyncEvent type = AsyncEvent::kQpFatal;
  uint32_t handle = 0;  // QPN, CQ or SRQ handle
};

// A QP's transport state for a person chasing a stall (uroce-stat qp.N.*): the PSNs of its
// three roles, its queue indices and what it waits for. A copy, taken on the engine's thread.
struct QpDebug {
  uint32_t req_psn = 0, sent_psn = 0, comp_psn = 0, resp_psn = 0, resp_msn = 0;
  uint32_t req_idx = 0, sq_head = 0, sq_tail = 0;  // SQ counters
  uint32_t rq_count = 0;                           // receive WQEs waiting (own RQ)
  uint32_t acks_queued = 0, window = 0, rd_atomic_out = 0;
  uint8_t retry_left = 0, rnr_left = 0, peer_credits = 0, resp_prev_op = 0;
  bool active = false, rnr_wait = false, retry_started = false, resp_in_msg = false;
  bool resp_has_wqe = false, resp_nak_sent = false, retrans_armed = false, rnr_armed = false;
  bool sq_token = false;  // shared rings: the engine holds the SQ doorbell token
};

template <class Q>
class EngineCoreT {
 public:
  using Queues = Q;
  using Qp = QpT<Q>;
  using CompletionQueue = typename Q::Cq;
  using RecvQueue = typename Q::Rq;
  using SharedRecvQueue = SharedRecvQueueT<typename Q::Rq>;
  static_assert(qp_layout_ok<Q>(), "the Qp fields every packet touches must stay in its hot lines");

  explicit EngineCoreT(const EngineConfig &cfg);
  ~EngineCoreT();
  EngineCoreT(const EngineCoreT &) = delete;
  EngineCoreT &operator=(const EngineCoreT &) = delete;

  // Puts the engine back in the state its constructor left it in, the config unchanged: every
  // QP, SRQ, CQ, AH, MR and PD goes at once (no completion, no event, nothing sent), timers,
  // counters, the async event queue and the dirty-CQ list are emptied, and the QPN and key
  // generators restart from cfg.seed, so a seeded engine then hands out the same QPNs and keys
  // as a newly built one (seed 0: fresh random ones). For fuzzers and tests that need a fresh
  // engine per input without building one. Control plane (allocates the object tables anew).
  // 0, or EINVAL (nothing changed) for an engine over shared tables (EngineConfig::tables).
  int reset();

  // ---- objects (control plane: may allocate, never on the data path) ----
  // Handles are >= 1; 0 means failure (table full / bad argument).
  // PDs, MRs, AHs: in tables() (shared with other engines when EngineConfig::tables is set:
  // then dereg_mr / destroy_ah here free at once, which is right only while no other thread
  // reads the tables; uroced retires, waits a grace period, then releases).
  uint32_t create_pd() noexcept { return pds_.alloc(); }
  int dealloc_pd(uint32_t pd) noexcept { return pds_.dealloc(pd); }
  // 0 / EINVAL / ENOMEM. lkey == rkey.
  int reg_mr(uint32_t pd, void *host, uint64_t app_va, uint64_t len, uint32_t access,
             uint32_t *lkey, uint32_t *rkey) noexcept;
  int dereg_mr(uint32_t lkey) noexcept;
  ObjectTables &tables() noexcept { return tab_; }
  // ibv_rereg_mr of PD / access, the key kept (as rxe): 0 or EINVAL.
  int rereg_mr(uint32_t lkey, uint32_t pd, uint32_t access) noexcept;
  // The CQ / SRQ / QP memory (Q::CqMem, Q::SrqMem, Q::QpMem): nothing for PrivateQueues, the
  // app's rings for RingQueues.
  uint32_t create_cq(uint32_t depth, const typename Q::CqMem &mem = {});
  int destroy_cq(uint32_t cq) noexcept;  // EBUSY while a QP uses it
  uint32_t create_srq(uint32_t pd, uint32_t max_wr, uint32_t max_sge,
                      const typename Q::SrqMem &mem = {});
  int modify_srq(uint32_t srq, uint32_t srq_limit) noexcept;  // arms the limit event
  int destroy_srq(uint32_t srq) noexcept;
  uint32_t create_ah(uint32_t pd, const AhAttr &attr) noexcept;
  int destroy_ah(uint32_t ah) noexcept;
  // Returns the QPN (the qpn_base prefix | 16 random bits, a slot's next QPN differing from
  // its last) or 0 (EINVAL-class argument error / table full).
  uint32_t create_qp(const QpInitAttr &init, const typename Q::QpMem &mem = {});
  int modify_qp(uint32_t qpn, const QpAttr &attr, uint32_t mask) noexcept;
  int query_qp(uint32_t qpn, QpAttr *attr, QpInitAttr *init) const noexcept;
  int destroy_qp(uint32_t qpn) noexcept;

  // ---- data path ----
  // 0, EINVAL (bad WR or QP state), ENOMEM (queue full).
  int post_send(uint32_t qpn, const SendWr &wr) noexcept;
  int post_recv(uint32_t qpn, const RecvWr &wr) noexcept;
  int post_srq_recv(uint32_t srq, const RecvWr &wr) noexcept;
  // Shared rings (Q::kShared): the app published WQEs in the QP's SQ / RQ ring. The requester
  // copies them as it reaches them; a QP in ERR flushes them now. 0 or EINVAL.
  int sq_doorbell(uint32_t qpn) noexcept;
  int rq_doorbell(uint32_t qpn) noexcept;
  uint32_t poll_cq(uint32_t cq, Wc *wc, uint32_t n) noexcept;
  int req_notify_cq(uint32_t cq, bool solicited_only) noexcept;
  uint32_t cq_events(uint32_t cq) noexcept;  // completion events since the last call
  // The dirty-CQ list: every CQ that received a completion (or overflowed) since it was last
  // taken is on it once. take_dirty_cqs moves up to n handles to `out` (oldest first) and
  // clears their marks; a CQ that gets a completion afterwards is listed again. A consumer
  // that leaves completions in a CQ (its own ring was full) calls mark_cq_dirty to see it
  // again on its next pass. The cost of draining completions thus grows with the CQs that
  // received some, not with all CQs. Destroying a CQ takes it off the list.
  uint32_t take_dirty_cqs(uint32_t *out, uint32_t n) noexcept;
  void mark_cq_dirty(uint32_t cq) noexcept {
    if (valid_cq(cq)) note_cq_dirty(cq);
  }
  uint32_t dirty_cq_count() const noexcept { return dirty_n_; }
  // Completions waiting in CQ `cq` (0 for an invalid handle).
  uint32_t cq_pending(uint32_t cq) const noexcept { return valid_cq(cq) ? cqs_[cq - 1].size() : 0; }
  bool poll_async_event(AsyncEventRecord *ev) noexcept;
  // The queue object of CQ `cq` (null for an invalid handle): the daemon moves completions
  // forwarded from another worker into it (RingCompletionQueue::absorb).
  CompletionQueue *cq_queue(uint32_t cq) noexcept { return valid_cq(cq) ? &cqs_[cq - 1] : nullptr; }

  // ---- introspection ----
  const EngineCounters &counters() const noexcept { return ctr_; }
  const QpCounters *qp_counters(uint32_t qpn) const noexcept {
    const Qp *q = find_qp(qpn);
    return q ? &q->stats : nullptr;
  }
  // Work requests the engine holds for a QP: on its send queue, posted and not yet completed
  // or flushed; on its receive queue, posted and not yet completed (the one a message is being
  // received into included; an SRQ's are counted by srq_count). 0 for an unknown QPN.
  uint32_t sq_outstanding(uint32_t qpn) const noexcept {
    const Qp *q = find_qp(qpn);
    return q ? q->sq.head() - q->sq.tail() : 0;
  }
  uint32_t rq_outstanding(uint32_t qpn) const noexcept {
    const Qp *q = find_qp(qpn);
    if (q == nullptr || q->srq) return 0;
    return q->rq.count() + (q->resp_has_wqe ? 1 : 0);
  }
  uint32_t srq_count(uint32_t srq) const noexcept {
    return valid_srq(srq) ? srqs_[srq - 1].rq.count() : 0;
  }
  uint32_t active_qps() const noexcept { return active_count_; }
  // The state of QP `qpn` (QpDebug); false for an unknown QPN.
  bool qp_debug(uint32_t qpn, QpDebug *d) const noexcept {
    const Qp *q = find_qp(qpn);
    if (q == nullptr) return false;
    *d = QpDebug{};
    d->req_psn = q->req_psn;
    d->sent_psn = q->sent_psn;
    d->comp_psn = q->comp_psn;
    d->resp_psn = q->resp_psn;
    d->resp_msn = q->resp_msn;
    d->req_idx = q->req_idx;
    d->sq_head = q->sq.head();
    d->sq_tail = q->sq.tail();
    d->rq_count = q->srq ? 0 : q->rq.count();
    d->acks_queued = q->acks.size();
    d->window = q->window;
    d->rd_atomic_out = q->rd_atomic_out;
    d->retry_left = q->retry_left;
    d->rnr_left = q->rnr_left;
    d->peer_credits = q->peer_credits;
    d->resp_prev_op = q->resp_prev_op;
    d->active = q->active;
    d->rnr_wait = q->rnr_wait;
    d->retry_started = q->retry_started;
    d->resp_in_msg = q->resp_in_msg;
    d->resp_has_wqe = q->resp_has_wqe;
    d->resp_nak_sent = q->resp_nak_sent;
    d->retrans_armed = q->retrans_timer.armed();
    d->rnr_armed = q->rnr_timer.armed();
    if constexpr (Q::kShared) d->sq_token = q->sq.token();
    return true;
  }
  // A QP's DCQCN reaction point (cc.cc; at line rate without cfg.dcqcn); null if unknown QPN.
  const DcqcnRp *qp_rp(uint32_t qpn) const noexcept {
    const Qp *q = find_qp(qpn);
    return q ? &q->rp : nullptr;
  }
  // The engine's congestion-control totals (cc_totals.cc): O(max_qp), for introspection only.
  CcTotals cc_totals() const noexcept;
  // Earliest time a timer may fire (UINT64_MAX if none): lets a test advance its fake clock.
  uint64_t next_timer_ns() const noexcept { return wheel_.next_expiry_hint(); }
  // Bytes a QP with this init attr occupies while idle (tables + its queues).
  static size_t qp_footprint(const QpInitAttr &init) noexcept;
  const EngineConfig &config() const noexcept { return cfg_; }
  // The table slot (0 .. max_qp - 1) of a live QP, UINT32_MAX for an unknown QPN. A slot's
  // entry is written only by create_qp / destroy_qp: another thread may ask about a QP whose
  // creation happened-before (uroced's main lcore, through its command ring).
  uint32_t qp_slot(uint32_t qpn) const noexcept {
    const Qp *q = find_qp(qpn);
    return q ? q->index : UINT32_MAX;
  }

 protected:
  // ---- helpers shared by the roles ----
  // One index by the QPN's low 16 bits, then the whole QPN compared.
  Qp *find_qp(uint32_t qpn) noexcept {
    const uint32_t s = qp_slot_of_[qpn & 0xffffu];
    if (s == 0) return nullptr;
    Qp &q = qps_[s - 1];
    return q.in_use && q.qpn == qpn ? &q : nullptr;
  }
  const Qp *find_qp(uint32_t qpn) const noexcept {
    return const_cast<EngineCoreT *>(this)->find_qp(qpn);
  }
  bool valid_cq(uint32_t cq) const noexcept {
    return cq >= 1 && cq <= cfg_.max_cq && cqs_[cq - 1].in_use();
  }
  bool valid_srq(uint32_t s) const noexcept {
    return s >= 1 && s <= cfg_.max_srq && srqs_[s - 1].in_use;
  }
  const wire::PathInfo *ah_path(uint32_t ah, uint32_t pd) const noexcept {
    return ahs_.path(ah, pd);
  }

  // Prefetch hints for the hot head and the warm line of a Qp (see the field order in qp.h).
  static void prefetch_qp(const Qp *q) noexcept {
    const char *p = reinterpret_cast<const char *>(q);
    for (size_t off = 0; off < qp_hot_bytes<Q>(); off += 64)
      __builtin_prefetch(p + off, 1, 3);
    __builtin_prefetch(p + qp_warm_offset<Q>(), 1, 3);
  }
  // The QP a received frame is addressed to, read from the BTH without validating the frame
  // (rx() does that); no prefetch when the frame is not IPv4 / IPv6 or too short.
  void prefetch_rx_qp(const uint8_t *f, uint32_t len) const noexcept {
    if (len < 14) return;
    uint32_t off = 12;
    uint16_t type = wire::be::load16(f + off);
    if (type == wire::kEtherTypeVlan) {
      if (len < 18) return;
      off += 4;
      type = wire::be::load16(f + off);
    }
    off += 2;
    if (type == wire::kEtherTypeIpv4)
      off += wire::Ipv4Hdr::kSize;
    else if (type == wire::kEtherTypeIpv6)
      off += wire::Ipv6Hdr::kSize;
    else
      return;
    off += wire::UdpHdr::kSize;
    if (len < off + wire::Bth::kSize) return;
    const uint32_t s = qp_slot_of_[wire::be::load24(f + off + 5) & 0xffffu];
    if (s != 0) prefetch_qp(&qps_[s - 1]);
  }

  // QPN low halves 2..0xffff: the most QPs one engine can hold.
  static constexpr uint32_t kMaxQpnLow = 0xfffe;
  // A QPN for a new QP: the prefix | a random unused low half, not `old_qpn` (the slot's last).
  uint32_t draw_qpn(uint32_t old_qpn) noexcept;
  // Slot i as a new engine has it: every field default but its fixed identity (index, the
  // timers' back-references). Its timers must not be armed.
  void fresh_qp_slot(uint32_t i);

  void activate(Qp &qp) noexcept {
    if (qp.active) return;
    qp.active = true;
    qp.act_prev = nullptr;
    qp.act_next = act_head_;
    if (act_head_)
      act_head_->act_prev = &qp;
    else
      act_tail_ = &qp;
    act_head_ = &qp;
    ++active_count_;
  }
  void deactivate(Qp &qp) noexcept {
    if (!qp.active) return;
    if (qp.act_prev)
      qp.act_prev->act_next = qp.act_next;
    else
      act_head_ = qp.act_next;
    if (qp.act_next)
      qp.act_next->act_prev = qp.act_prev;
    else
      act_tail_ = qp.act_prev;
    qp.act_next = qp.act_prev = nullptr;
    qp.active = false;
    --active_count_;
  }

  // Makes active `qp` the head: the QPs before it move, in order, behind the tail (O(1)).
  void rotate_active_to(Qp &qp) noexcept {
    if (&qp == act_head_ || !qp.active) return;
    Qp *before = qp.act_prev;
    act_tail_->act_next = act_head_;
    act_head_->act_prev = act_tail_;
    before->act_next = nullptr;
    qp.act_prev = nullptr;
    act_tail_ = before;
    act_head_ = &qp;
  }

  void push_async(AsyncEvent type, uint32_t handle) noexcept;
  // Puts CQ `cq` (a valid handle) on the dirty list unless it is already there. The list has
  // max_cq slots and holds each live CQ at most once, so it cannot overflow.
  void note_cq_dirty(uint32_t cq) noexcept {
    CompletionQueue &c = cqs_[cq - 1];
    if (c.dirty) return;
    c.dirty = true;
    dirty_[(dirty_head_ + dirty_n_) % cfg_.max_cq] = cq;
    ++dirty_n_;
  }
  void complete_send(Qp &qp, SendWqe &w, WcStatus st) noexcept;
  void push_recv_wc(Qp &qp, const Wc &wc, bool solicited) noexcept;
  // ERR: cancel timers, flush both queues with IBV_WC_WR_FLUSH_ERR.
  void enter_error(Qp &qp) noexcept;
  // SQE (UC/UD send error): flush the send queue only.
  void enter_sqe(Qp &qp) noexcept;
  void flush_send_queue(Qp &qp) noexcept;
  void flush_recv_queue(Qp &qp) noexcept;
  // Copies WQEs the app published in a shared SQ ring; false when there is none (a broken
  // ring: QP to ERR with IBV_EVENT_QP_FATAL).
  bool pull_sq(Qp &qp) noexcept;
  // The checks post_send makes, on a WQE copied from a shared ring (kSuccess or its status).
  WcStatus check_copied_wqe(const Qp &qp, const SendWqe &w) const noexcept;
  // Takes the next receive WQE (RQ or SRQ) into qp.resp_wqe. False when there is none.
  bool take_recv_wqe(Qp &qp) noexcept;
  // Copies `len` bytes to the receive WQE at byte offset `off`; false on an SGE key / bounds /
  // length error (LOC_PROT_ERR or LOC_LEN_ERR through *st).
  bool place_recv(Qp &qp, uint32_t off, const uint8_t *src, uint32_t len, WcStatus *st) noexcept;
  // Scatter / gather over a send WQE's SGEs at byte offset `off` (inline data: the SQ buffer).
  bool gather_send(Qp &qp, uint32_t idx, uint32_t off, uint8_t *dst, uint32_t len) noexcept;
  bool scatter_send(Qp &qp, uint32_t idx, uint32_t off, const uint8_t *src, uint32_t len) noexcept;
  // Verifies every SGE of a WQE against the MR table (local access).
  WcStatus check_local_sges(Qp &qp, uint32_t idx) noexcept;

  // ---- responder (resp.cc) ----
  void responder_rx(Qp &qp, const wire::ParsedPacket &p) noexcept;
  void responder_step(Qp &qp, const wire::ParsedPacket &p) noexcept;
  void resp_fatal(Qp &qp, aeth::NakCode code, WcStatus recv_status, uint32_t psn) noexcept;

  // ---- completer and retries (comp.cc) ----
  void completer_rx(Qp &qp, const wire::ParsedPacket &p) noexcept;
  void on_timer(TimerNode *t) noexcept;
  void retransmit_timeout(Qp &qp) noexcept;
  void rnr_timer_expired(Qp &qp) noexcept;
  // Go-back-N: the requester resends from comp_psn.
  void req_rewind(Qp &qp) noexcept;
  // After a go-back-N, a response for packets not resent yet: move the requester past the PSNs
  // before `target` as if resent. False (nothing changed) when a READ / atomic is in the way.
  bool req_skip_to(Qp &qp, uint32_t target) noexcept;
  void arm_retransmit(Qp &qp) noexcept;
  bool progress_made(Qp &qp, uint32_t old_comp_psn) noexcept;

  // Sets or cancels the retransmit timer after the requester sent (or the completer acked).
  void update_retransmit_timer(Qp &qp) noexcept {
    if (qp.type != QpType::kRc) return;
    if (wire::psn_diff(qp.req_psn, qp.comp_psn) > 0 && !qp.rnr_wait) {
      if (!qp.retrans_timer.armed()) arm_retransmit(qp);
    } else {
      wheel_.cancel(&qp.retrans_timer);
    }
  }

  uint32_t credits_code(const Qp &qp) const noexcept;

  // ---- DCQCN glue (cc.cc) ----
  // Frame bytes charged to the pacer and the byte counter for a payload of `plen`.
  static constexpr uint32_t kPaceOverhead = 64;
  void cc_init_qp(Qp &qp) noexcept;  // create_qp: timer identities, RP at line rate
  void cc_stop(Qp &qp) noexcept;     // reset / error / destroy: timers off, unpaced
  void cc_cnp(Qp &qp) noexcept;      // a CNP for the QP arrived
  void cc_timer(Qp &qp) noexcept;
  // Requester of a paced QP: may a frame of `bytes` leave now? If not, a timer re-activates
  // the QP when it may. cc_sent charges a sent frame.
  bool cc_may_send(Qp &qp, uint32_t bytes) noexcept;
  void cc_sent(Qp &qp, uint32_t bytes) noexcept;
  void cc_apply(Qp &qp) noexcept;  // the pacer follows the RP's rate; its deadline re-armed
  void cc_retire(const DcqcnRp::Stats &s) noexcept;  // cc_stop: into cc_retired_ (cc_totals.cc)

  EngineConfig cfg_;
  EngineCounters ctr_;
  DcqcnRp::Stats cc_retired_;  // the RP stats of QPs since reset, errored or destroyed
  uint64_t now_ = 0;           // time of the current poll / rx (set by Engine)
  TimerWheel wheel_;
  std::unique_ptr<ObjectTables> own_tables_;  // when cfg.tables is null
  ObjectTables &tab_;
  PdTable &pds_;
  MrTable &mrs_;
  AhTable &ahs_;
  std::unique_ptr<CompletionQueue[]> cqs_;
  std::unique_ptr<SharedRecvQueue[]> srqs_;
  std::unique_ptr<Qp[]> qps_;
  std::unique_ptr<uint16_t[]> qp_slot_of_;  // QPN & 0xffff -> slot + 1 (0: none)
  util::Csprng qpn_rng_;
  Qp *act_head_ = nullptr, *act_tail_ = nullptr;
  uint32_t active_count_ = 0;
  std::unique_ptr<uint32_t[]> dirty_;  // circular list of CQ handles, max_cq slots
  uint32_t dirty_head_ = 0, dirty_n_ = 0;
  static constexpr uint32_t kAsyncCap = 256;
  AsyncEventRecord async_[kAsyncCap];
  uint32_t async_head_ = 0, async_tail_ = 0;
  uint16_t ip_id_ = 0;
};

// The engine over its own queues (what the daemon uses until it is wired onto the rings).
using EngineCore = EngineCoreT<PrivateQueues>;
extern template class EngineCoreT<PrivateQueues>;
extern template class EngineCoreT<RingQueues>;

}  // namespace uroce::transport
