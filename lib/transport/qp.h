// SPDX-License-Identifier: BSD-3-Clause
// One queue pair: its attributes and the state of its three roles.
//   requester (req.h)  turns send WQEs into request packets: PSNs, segmentation, go-back-N;
//   completer (comp.cc) consumes ACKs / NAKs / read responses: retry counters, send CQEs;
//   responder (resp.cc) consumes request packets: ePSN, duplicates, placement, receive CQEs,
//                      and queues its responses (ack_queue.h), sent by resp_tx.h.
// Everything a QP needs is allocated by create_qp; nothing on the data path allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/ack_queue.h"
#include "transport/dcqcn.h"
#include "transport/hdr_template.h"
#include "transport/pacer.h"
#include "transport/queues.h"
#include "transport/timer.h"
#include "transport/verbs_types.h"
#include "transport/wq.h"
#include "wire/packet.h"

namespace uroce::transport {

enum TimerKind : uint32_t {
  kTimerRetransmit = 1,  // local ACK timeout (IBTA 9.7.6.1.3)
  kTimerRnr = 2,         // RNR NAK wait (IBTA 9.7.5.2.8)
  kTimerCc = 3,          // DCQCN reaction point deadline (cc.cc)
  kTimerPace = 4,        // a paced QP may send again (cc.cc)
};

struct QpTimer : TimerNode {
  uint32_t qp_index = 0;
};

// A responder resource (IBTA 9.7.5.1.2, "responder resources"): the last max_dest_rd_atomic
// RDMA READ and atomic requests, kept so that a duplicate can be answered again without
// executing it twice.
struct RespResource {
  enum class Kind : uint8_t { kFree = 0, kRead, kAtomic };
  Kind kind = Kind::kFree;
  uint32_t first_psn = 0;
  uint32_t last_psn = 0;  // READ: first_psn + packets - 1
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;
  uint64_t atomic_orig = 0;  // the value the atomic returned
  uint32_t msn = 0;          // MSN carried by the response
  uint32_t reply_psn = 0;    // READ: next response PSN to send
};

struct QpCounters {
  uint64_t tx_pkts = 0, rx_pkts = 0;
  uint64_t retransmits = 0;  // go-back-N rewinds (timeout, NAK or implied NAK)
  uint64_t timeouts = 0;     // local ACK timer expiries with work outstanding
  uint64_t seq_naks_sent = 0, seq_naks_rcvd = 0;
  uint64_t rnr_naks_sent = 0, rnr_naks_rcvd = 0;
  uint64_t dup_requests = 0;
  uint64_t ce_seen = 0, cnp_sent = 0, cnp_rcvd = 0;
  uint64_t window_cuts = 0;      // losses that limited the PSNs in flight to the loss window
  uint64_t window_restores = 0;  // the window grew back to its old level: no limit again
};

// Field order is a cache layout (doc/transport.md, "Memory per QP"). Hot: what every packet of a
// busy QP touches, in the first qp_hot_bytes() (identity, state, scheduling links, PSNs, the path
// and header template, the queues' indices, the retransmit timer, the
// response queue's indices and first entries), then, on a line of their own, the receive WQE in
// progress and the packet counters. Cold: setup attributes, DCQCN / pacer state, the other
// timers and counters, the 768-byte responder resources. prefetch_qp() (core.h) prefetches the
// hot lines; the static_asserts below keep the layout honest. Only the order matters here:
// every field keeps its meaning and default.
template <class Q>
struct alignas(64) QpT {
  // ---- hot: touched by every data packet / ACK of the QP ----
  // identity and state (rx checks, post_send, poll)
  bool in_use = false;
  bool active = false;             // on the engine's active list
  bool rnr_wait = false;           // paused by an RNR NAK until rnr_timer fires
  bool fatal_nak_pending = false;  // a NAK to send although the QP has entered ERR
  bool cnp_pending = false;
  bool sq_sig_all = false;
  bool resp_in_msg = false;    // a multi-packet SEND / WRITE is in progress
  bool resp_nak_sent = false;  // a PSN sequence error NAK is outstanding (one per gap)
  bool paced = false;          // DCQCN throttles the QP: the requester asks the pacer (cc.cc)
  bool resp_paced = false;     // READ responses wait for the pacer (its timer re-activates)
  uint16_t pkey_index = 0;     // every completion carries it
  QpType type = QpType::kRc;
  QpState state = QpState::kReset;
  uint32_t index = 0;
  uint32_t qpn = 0;
  uint32_t dest_qpn = 0;
  uint32_t pd = 0, send_cq = 0, recv_cq = 0, srq = 0;  // handles, srq 0 = none
  uint32_t access = 0;
  uint32_t mtu = 1024;
  uint32_t mtu_shift = 10;

  // scheduling
  QpT *act_next = nullptr, *act_prev = nullptr;

  // requester
  uint32_t req_psn = 0;        // PSN of the next new request packet
  uint32_t sent_psn = 0;       // one past the highest PSN sent (a go-back-N does not lower it)
  uint32_t req_idx = 0;        // SQ counter of the WQE being transmitted
  uint32_t rd_atomic_out = 0;  // READ / atomic WQEs started and not completed
  uint32_t noack_pkts = 0;     // packets since the last AckReq

  // completer
  uint32_t comp_psn = 0;  // oldest unacknowledged PSN
  uint8_t retry_left = 0, rnr_left = 0;
  uint8_t peer_credits = aeth::kCreditsUnlimited;
  bool retry_started = false;  // a go-back-N is under way and no progress was seen since
  // Loss window (doc/transport.md): after a timeout or a NAK, at most `window` PSNs in flight,
  // one more per ACK that advances, until `window_target` (the level that was lost) is reached.
  // 0: not limited (max_inflight_psn).
  uint32_t window = 0, window_target = 0;
  uint8_t timeout = 0, retry_cnt = 0, rnr_retry = 0, min_rnr_timer = 0;
  uint8_t max_rd_atomic = 0, max_dest_rd_atomic = 0;

  // responder
  uint8_t resp_prev_op = 0;    // last accepted opcode (sequence checks)
  bool resp_drop_msg = false;  // UC: the rest of this message is being dropped
  bool resp_has_wqe = false;   // resp_wqe holds a receive WQE taken from the RQ / SRQ
  uint32_t resp_psn = 0;       // ePSN
  uint32_t resp_msn = 0;
  uint32_t resp_off = 0;  // SEND: bytes placed in resp_wqe
  uint64_t resp_va = 0;   // WRITE: next VA
  uint32_t resp_rkey = 0;
  uint32_t resp_resid = 0;  // WRITE: bytes still expected
  uint32_t resp_len = 0;    // WRITE: dma_len of the message

  // attributes (modify_qp) the headers are built from
  uint16_t udp_sport = 0xC000;
  wire::PathInfo path;
  HdrTemplate hdr;  // RC / UC frame headers pre-built from path / dest_qpn (hdr_template.h)

  typename Q::Sq sq;
  typename Q::Rq rq;
  QpTimer retrans_timer;
  AckQueue acks;  // indices and first entries hot (it restarts at entry 0 whenever empty)

  // ---- warm: a line of its own, prefetched with the hot ones ----
  alignas(64) RecvWqe resp_wqe;  // SEND / WRITE with immediate: the receive WQE being filled
  std::unique_ptr<Sge[]> resp_sge;
  uint32_t resp_sge_cap = 0;
  QpCounters stats;  // tx_pkts / rx_pkts counted per packet (first), the rest rarely

  // ---- cold: setup, errors, congestion control, READ / atomic, introspection ----
  QpCap cap;  // as created (post_send checks the SQ's copies of its limits)
  uint32_t qkey = 0;
  Mtu mtu_enum = Mtu::k1024;
  uint32_t path_mig_state = 0;
  bool en_sqd_async_notify = false;
  bool sqd_notified = false;
  uint32_t sq_psn = 0, rq_psn = 0;  // as last set

  uint8_t fatal_nak_syndrome = 0;
  uint32_t fatal_nak_psn = 0;

  // congestion hooks
  bool cnp_ever = false;
  uint64_t last_cnp_ns = 0;
  // DCQCN reaction point and pacer (cc.cc); used only when EngineConfig::dcqcn is set
  DcqcnRp rp;
  Pacer pacer;
  uint64_t rate_limit_bps = 0;  // IBV_QP_RATE_LIMIT: the pacer never exceeds it (0: none)
  QpTimer cc_timer, pace_timer;

  QpTimer rnr_timer;
  RespResource res[kMaxRdAtomic];
  uint32_t res_head = 0;

  bool has_send_work() const noexcept { return req_idx != sq.head(); }
};

// offsetof on QpT (not standard-layout: QpTimer extends TimerNode) is conditionally supported;
// GCC and Clang give the layout the compiler uses, which is what these functions are about.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
// The hot head of a Qp in whole cache lines: every field up to and including the response
// queue's indices and first entry (512 bytes with PrivateQueues, 704 with RingQueues, GCC 12 /
// x86-64). prefetch_qp() takes these lines and the warm one.
template <class Q>
constexpr size_t qp_hot_bytes() noexcept {
  return (offsetof(QpT<Q>, acks) + 16 + sizeof(RespOp) + 63) / 64 * 64;
}
template <class Q>
constexpr size_t qp_warm_offset() noexcept {
  return offsetof(QpT<Q>, resp_wqe);
}
// The warm line holds resp_wqe .. stats.rx_pkts; nothing hot lies beyond it.
template <class Q>
constexpr bool qp_layout_ok() noexcept {
  using T = QpT<Q>;
  return qp_warm_offset<Q>() % 64 == 0 &&
         qp_warm_offset<Q>() / 64 == (offsetof(T, stats) + 2 * sizeof(uint64_t) - 1) / 64;
}
#pragma GCC diagnostic pop

}  // namespace uroce::transport
