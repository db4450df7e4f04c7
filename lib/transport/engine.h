// SPDX-License-Identifier: BSD-3-Clause
// The transport engine: EngineCore (tables, control plane, responder, completer) plus what
// needs the packet port, as a template over the port and the clock (no virtual call per
// packet):
//   recv.h     rx(): parse with lib/wire, header checks, routing to responder / completer
//   req.h      the requester: send WQEs -> request packets
//   resp_tx.h  the responder's transmit side: queued ACK / NAK / READ responses / atomic ACKs,
//              CNPs
// poll() runs timers and then every QP on the active list, and nothing else: idle QPs cost
// nothing.
#pragma once

#include <cstdint>

#include "transport/core.h"
#include "transport/port.h"
#include "wire/packet.h"

namespace uroce::transport {

template <TxPort Port, Clock Clk, class Q = PrivateQueues>
class Engine : public EngineCoreT<Q> {
  using Base = EngineCoreT<Q>;
  using typename Base::Qp;
  // What the port-side roles use of EngineCoreT (a dependent base).
  using Base::act_head_, Base::cfg_, Base::ctr_, Base::ip_id_, Base::mrs_, Base::now_, Base::tab_,
      Base::wheel_;
  using Base::activate, Base::ah_path, Base::check_local_sges, Base::complete_send,
      Base::completer_rx, Base::credits_code, Base::deactivate, Base::enter_error, Base::enter_sqe,
      Base::find_qp, Base::gather_send, Base::on_timer, Base::prefetch_qp, Base::prefetch_rx_qp,
      Base::push_async, Base::resp_fatal, Base::responder_rx, Base::update_retransmit_timer;

 public:
  Engine(Port &port, const Clk &clock, const EngineConfig &cfg = EngineConfig{})
      : Base(cfg), port_(port), clock_(clock) {}

  // Handles one received frame (the engine does not keep the pointer). now_ns: the clock's
  // time of the RX burst the frame came in (read once per burst by the caller: a clock read
  // per frame cost ~13 % of a responder daemon, doc/perf.md); it must not be older than the
  // time of the previous rx / poll call by more than a loop iteration (timers armed while
  // handling the frame start from it). The overload without it reads the clock.
  void rx(const uint8_t *frame, uint32_t len, uint64_t now_ns) noexcept;
  void rx(const uint8_t *frame, uint32_t len) noexcept { rx(frame, len, clock_.now_ns()); }
  // Handles n received frames in order, exactly as n calls of rx(frame, len, now) with one
  // clock read for the burst; while one frame is being handled, the destination QP of a frame
  // two places further on is prefetched (a hint only: a frame that is not RoCE v2 or names no
  // QP is simply not prefetched).
  void rx_burst(const uint8_t *const *frames, const uint32_t *lens, uint32_t n) noexcept;

  // Expires timers, then lets each active QP send (responses first, then requests), at most
  // cfg.tx_budget packets each. Returns the number of packets sent. now_ns as for rx (the
  // caller's loop reads the clock once per iteration); poll() reads the clock.
  uint32_t poll(uint64_t now_ns) noexcept;
  uint32_t poll() noexcept { return poll(clock_.now_ns()); }

 private:
  // recv.h
  void rx_cnp(Qp &qp) noexcept;
  void note_ce(Qp &qp) noexcept;
  // req.h
  uint32_t run_requester(Qp &qp, uint32_t budget, bool *blocked_by_port) noexcept;
  // resp_tx.h
  uint32_t run_responses(Qp &qp, uint32_t budget, bool *blocked_by_port) noexcept;
  bool send_ack(Qp &qp, uint8_t syndrome, uint32_t psn, uint32_t msn) noexcept;
  bool send_cnp(Qp &qp) noexcept;

  // Builds and commits one frame; payload is written by `fill(dst)` (returns false to abort).
  template <class Fill>
  int tx_frame(const wire::PacketDesc &d, Fill &&fill) noexcept;
  // The same with the headers written by `hdrs(buf, cap)` -> wire::BuildResult (e.g. from the
  // QP's header template, hdr_template.h).
  template <class Hdrs, class Fill>
  int tx_frame_with(Hdrs &&hdrs, Fill &&fill) noexcept;

  Port &port_;
  const Clk &clock_;
};

// tx_frame results
inline constexpr int kTxOk = 0;
inline constexpr int kTxNoBuffer = 1;  // back-pressure: try again on a later poll
inline constexpr int kTxBuildError = 2;
inline constexpr int kTxFillError = 3;

template <TxPort Port, Clock Clk, class Q>
template <class Fill>
int Engine<Port, Clk, Q>::tx_frame(const wire::PacketDesc &d, Fill &&fill) noexcept {
  return tx_frame_with([&d](uint8_t *buf, size_t cap) { return wire::build_headers(buf, cap, d); },
                       static_cast<Fill &&>(fill));
}

template <TxPort Port, Clock Clk, class Q>
template <class Hdrs, class Fill>
int Engine<Port, Clk, Q>::tx_frame_with(Hdrs &&hdrs, Fill &&fill) noexcept {
  TxBuf b = port_.tx_alloc();
  if (b.data == nullptr) {
    ++ctr_.tx_backpressure;
    return kTxNoBuffer;
  }
  const wire::BuildResult r = hdrs(b.data, static_cast<size_t>(b.cap));
  if (!r.ok()) {
    port_.tx_abort(b);
    return kTxBuildError;
  }
  if (!fill(b.data + r.payload_off)) {
    port_.tx_abort(b);
    return kTxFillError;
  }
  wire::finalize_frame(b.data, r);
  port_.tx_commit(b, r.frame_len);
  ++ctr_.tx_pkts;
  return kTxOk;
}

template <TxPort Port, Clock Clk, class Q>
uint32_t Engine<Port, Clk, Q>::poll(uint64_t now_ns) noexcept {
  now_ = now_ns;
  wheel_.advance(now_, [this](TimerNode *t) { on_timer(t); });
  uint32_t sent = 0;
  Qp *q = act_head_;
  while (q) {
    Qp *next = q->act_next;
    if (next) prefetch_qp(next);  // its hot lines load while this QP sends
    bool port_full = false;
    const uint32_t budget = cfg_.tx_budget;
    uint32_t n = run_responses(*q, budget, &port_full);
    if (!port_full && n < budget) n += run_requester(*q, budget - n, &port_full);
    sent += n;
    // Keep the QP on the list only while it still has something it can do now.
    const bool more_resp =
        (!q->acks.empty() && !q->resp_paced) || q->fatal_nak_pending || q->cnp_pending;
    // (Shared rings: the ring may hold WQEs not copied yet, and the requester still holds the
    // doorbell token: it comes back to copy them, or to give the token back.)
    const bool more_req = q->state == QpState::kRts && !q->rnr_wait &&
                          (Q::kShared || q->has_send_work()) && n >= budget;
    if (port_full) {
      // Stays active; the port has no buffer for anyone now. The next poll starts with the
      // QP after this one (with this one if it sent nothing), so that under TX back-pressure
      // the QPs take turns instead of the list's head taking every freed buffer.
      if (n == 0)
        this->rotate_active_to(*q);
      else if (q->act_next)
        this->rotate_active_to(*q->act_next);
      break;
    }
    if (!more_resp && !more_req) deactivate(*q);
    q = next;
  }
  return sent;
}

template <TxPort Port, Clock Clk, class Q>
void Engine<Port, Clk, Q>::rx_burst(const uint8_t *const *frames, const uint32_t *lens,
                                    uint32_t n) noexcept {
  constexpr uint32_t kAhead = 2;
  if (n == 0) return;
  const uint64_t now = clock_.now_ns();
  for (uint32_t i = 0; i < n && i < kAhead; ++i)
    prefetch_rx_qp(frames[i], lens[i]);
  for (uint32_t i = 0; i < n; ++i) {
    if (i + kAhead < n) prefetch_rx_qp(frames[i + kAhead], lens[i + kAhead]);
    rx(frames[i], lens[i], now);
  }
}

}  // namespace uroce::transport

#include "transport/recv.h"
#include "transport/req.h"
#include "transport/resp_tx.h"
