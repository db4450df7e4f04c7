// SPDX-License-Identifier: BSD-3-Clause
// Receive: header checks and routing (IBTA 9.6 "packet header validation", Annex A17.4).
// Included by engine.h.
//
// Order of checks, each failure a silent drop counted by reason:
//   1. lib/wire parse_frame: Ethernet / IP / UDP 4791 / lengths / BTH version / opcode / pad /
//      ICRC (a corrupted frame never reaches a QP)
//   2. destination QP exists                                   (kNoQp)
//   3. opcode belongs to the QP's transport                     (kOpcode)
//   4. QP state receives: RTR, RTS, SQD, SQE (ERR / RESET / INIT drop)   (kQpState)
//   5. P_Key is the default partition (0xFFFF or 0x7FFF)         (kPkey)
//   6. RC / UC: source and destination GIDs are the connection's (kAddress)
//   7. CE mark -> congestion notification point; CNP -> reaction point hook
//   8. requests -> responder_rx (resp.cc), responses -> completer_rx (comp.cc)
#pragma once

#include "transport/engine.h"
#include "wire/packet.h"

namespace uroce::transport {

template <TxPort Port, Clock Clk, class Q>
void Engine<Port, Clk, Q>::rx(const uint8_t *frame, uint32_t len, uint64_t now_ns) noexcept {
  now_ = now_ns;
  ++ctr_.rx_pkts;
  wire::ParsedPacket p;
  const wire::ParseError e = wire::parse_frame(frame, len, &p);
  if (e != wire::ParseError::kOk) {
    ++ctr_.drops[static_cast<size_t>(DropReason::kParse)];
    ++ctr_.parse_errors[static_cast<size_t>(e)];
    return;
  }
  const wire::Bth *bth = p.bth();
  Qp *qp = find_qp(bth->dest_qp());
  if (qp == nullptr) {
    ++ctr_.drops[static_cast<size_t>(DropReason::kNoQp)];
    return;
  }
  const wire::Transport t = qp->type == QpType::kRc   ? wire::Transport::kRc
                            : qp->type == QpType::kUc ? wire::Transport::kUc
                                                      : wire::Transport::kUd;
  if (!wire::opcode_valid_for(t, bth->opcode())) {
    ++ctr_.drops[static_cast<size_t>(DropReason::kOpcode)];
    return;
  }
  const QpState s = qp->state;
  if (s != QpState::kRtr && s != QpState::kRts && s != QpState::kSqd && s != QpState::kSqe) {
    ++ctr_.drops[static_cast<size_t>(DropReason::kQpState)];
    return;
  }
  if ((bth->pkey() & 0x7FFF) != 0x7FFF) {
    ++ctr_.drops[static_cast<size_t>(DropReason::kPkey)];
    return;
  }
  if (qp->type != QpType::kUd && !(p.sgid() == qp->path.dgid && p.dgid() == qp->path.sgid)) {
    ++ctr_.drops[static_cast<size_t>(DropReason::kAddress)];
    return;
  }
  ++qp->stats.rx_pkts;
  if (p.op->mask & wire::kMaskCnp) {
    rx_cnp(*qp);
    return;
  }
  if (p.ecn() == wire::Ecn::kCe) note_ce(*qp);
  if (p.op->mask & wire::kMaskResp) {
    // Responses in RTR (no requester yet) are meaningless.
    completer_rx(*qp, p);
  } else {
    responder_rx(*qp, p);
  }
}

template <TxPort Port, Clock Clk, class Q>
void Engine<Port, Clk, Q>::rx_cnp(Qp &qp) noexcept {
  ++qp.stats.cnp_rcvd;
  ++ctr_.cnp_rcvd;
  this->cc_cnp(qp);
  if (cfg_.hooks.on_cnp_received) cfg_.hooks.on_cnp_received(cfg_.hooks.ctx, qp.qpn, now_);
}

template <TxPort Port, Clock Clk, class Q>
void Engine<Port, Clk, Q>::note_ce(Qp &qp) noexcept {
  ++qp.stats.ce_seen;
  ++ctr_.ce_seen;
  if (cfg_.hooks.on_ce) cfg_.hooks.on_ce(cfg_.hooks.ctx, qp.qpn, now_);
  // Notification point (DCQCN): at most one CNP per QP per interval, to the QP that sent the
  // marked packet (our peer). UD has no single peer; the hook alone reports it.
  if (qp.type == QpType::kUd) return;
  if (qp.cnp_ever && now_ - qp.last_cnp_ns < cfg_.cnp_interval_ns) return;
  qp.cnp_pending = true;
  activate(qp);
}

}  // namespace uroce::transport
