// SPDX-License-Identifier: BSD-3-Clause
// The responder's transmit side: drains the QP's response queue (ack_queue.h) in order
// (ACK / NAK / RNR NAK, RDMA READ responses a few packets per poll, atomic ACKs), the fatal NAK
// of a QP that has just entered ERR, and CNPs (congestion notification, opcode 0x81).
// Included by engine.h.
#pragma once

#include <cassert>
#include <cstring>

#include "transport/engine.h"
#include "wire/psn.h"

namespace uroce::transport {

template <TxPort Port, Clock Clk, class Q>
bool Engine<Port, Clk, Q>::send_ack(Qp &qp, uint8_t syndrome, uint32_t psn, uint32_t msn) noexcept {
  const uint16_t ip_id = ip_id_++;
  auto describe = [&](wire::PacketDesc &d) {
    d.path = &qp.path;
    d.ip_id = ip_id;
    d.f.opcode = wire::op::kRcAck;
    d.f.dest_qp = qp.dest_qpn;
    d.f.psn = psn;
    d.f.syndrome = syndrome;
    d.f.msn = msn;
  };
  auto no_payload = [](uint8_t *) { return true; };
  int rc;
  if (qp.hdr.valid() || qp.hdr.build(qp.path, qp.dest_qpn)) {
    // The QP's header template (hdr_template.h) + the AETH.
    rc = tx_frame_with(
        [&](uint8_t *buf, size_t cap) {
          const wire::OpcodeInfo &o = wire::opcode_info(wire::op::kRcAck);
          const wire::BuildResult r = qp.hdr.write(buf, cap, o, wire::op::kRcAck, 0,
                                                   wire::Ecn::kNotEct, ip_id, false, false, psn);
          if (!r.ok()) return r;
          wire::hdr_at<wire::Aeth>(buf + qp.hdr.bth_off + o.off_aeth)->set(syndrome, msn);
#ifndef NDEBUG
          {
            wire::PacketDesc d;
            describe(d);
            assert(same_as_build_headers(buf, r, d));
          }
#endif
          return r;
        },
        no_payload);
  } else {
    wire::PacketDesc d;
    describe(d);
    rc = tx_frame(d, no_payload);
  }
  if (rc == kTxNoBuffer) return false;
  ++qp.stats.tx_pkts;
  return true;
}

template <TxPort Port, Clock Clk, class Q>
bool Engine<Port, Clk, Q>::send_cnp(Qp &qp) noexcept {
  // RoCE v2 CNP (Annex A17.9.3): BTH opcode 0x81, BECN set, destination = the QP whose packet
  // was marked, PSN 0, 16 reserved bytes; not ECN-capable itself. DSCP and 802.1p priority
  // from the configuration (ConnectX cnp_dscp / cnp_802p_prio) unless left at -1.
  wire::PathInfo path = qp.path;
  if (cfg_.cnp_dscp >= 0) path.dscp = static_cast<uint8_t>(cfg_.cnp_dscp);
  if (cfg_.cnp_pcp >= 0) path.vlan_pcp = static_cast<uint8_t>(cfg_.cnp_pcp);
  wire::PacketDesc d;
  d.path = &path;
  d.ip_id = ip_id_++;
  d.f.opcode = wire::op::kCnp;
  d.f.becn = true;
  d.f.dest_qp = qp.dest_qpn;
  const int rc = tx_frame(d, [](uint8_t *) { return true; });
  if (rc == kTxNoBuffer) return false;
  ++qp.stats.cnp_sent;
  ++ctr_.cnp_sent;
  ++qp.stats.tx_pkts;
  qp.cnp_ever = true;
  qp.last_cnp_ns = now_;
  if (cfg_.hooks.on_cnp_sent) cfg_.hooks.on_cnp_sent(cfg_.hooks.ctx, qp.qpn, now_);
  return true;
}

template <TxPort Port, Clock Clk, class Q>
uint32_t Engine<Port, Clk, Q>::run_responses(Qp &qp, uint32_t budget, bool *port_full) noexcept {
  uint32_t n = 0;
  qp.resp_paced = false;
  if (qp.fatal_nak_pending) {
    if (!send_ack(qp, qp.fatal_nak_syndrome, qp.fatal_nak_psn, qp.resp_msn)) {
      *port_full = true;
      return n;
    }
    qp.fatal_nak_pending = false;
    ++n;
  }
  if (qp.cnp_pending) {
    if (!send_cnp(qp)) {
      *port_full = true;
      return n;
    }
    qp.cnp_pending = false;
    ++n;
  }
  while (n < budget && !qp.acks.empty()) {
    RespOp &op = qp.acks.front();
    switch (op.kind) {
      case RespOp::Kind::kAck:
        if (!send_ack(qp, op.syndrome, op.psn, op.msn)) {
          *port_full = true;
          return n;
        }
        qp.acks.pop();
        ++n;
        break;

      case RespOp::Kind::kAtomicAck: {
        const RespResource &r = qp.res[op.res];
        wire::PacketDesc d;
        d.path = &qp.path;
        d.ip_id = ip_id_++;
        d.f.opcode = wire::op::kRcAtomicAck;
        d.f.dest_qp = qp.dest_qpn;
        d.f.psn = r.first_psn;
        d.f.syndrome = aeth::ack(static_cast<uint8_t>(credits_code(qp)));
        d.f.msn = op.msn;
        d.f.atomic_orig = r.atomic_orig;
        if (tx_frame(d, [](uint8_t *) { return true; }) == kTxNoBuffer) {
          *port_full = true;
          return n;
        }
        ++qp.stats.tx_pkts;
        qp.acks.pop();
        ++n;
        break;
      }

      case RespOp::Kind::kReadReply: {
        RespResource &r = qp.res[op.res];
        while (n < budget) {
          const uint32_t psn = r.reply_psn;
          const uint32_t off = static_cast<uint32_t>(wire::psn_diff(psn, r.first_psn))
                               << qp.mtu_shift;
          const uint32_t left = r.length - off;
          const uint32_t plen = left < qp.mtu ? left : qp.mtu;
          const bool first = psn == r.first_psn;
          const bool last = psn == r.last_psn;
          // A paced QP's READ responses wait for its pacer like its requests (cc.cc).
          if (qp.paced && !this->cc_may_send(qp, plen + this->kPaceOverhead)) {
            qp.resp_paced = true;
            return n;
          }
          wire::PacketDesc d;
          d.path = &qp.path;
          d.ip_id = ip_id_++;
          d.ecn = cfg_.ecn ? wire::Ecn::kEct0 : wire::Ecn::kNotEct;
          d.f.opcode = first && last ? wire::op::kRcReadResponseOnly
                       : first       ? wire::op::kRcReadResponseFirst
                       : last        ? wire::op::kRcReadResponseLast
                                     : wire::op::kRcReadResponseMiddle;
          d.f.dest_qp = qp.dest_qpn;
          d.f.psn = psn;
          d.f.syndrome = aeth::ack(static_cast<uint8_t>(credits_code(qp)));
          d.f.msn = op.msn;
          d.payload_len = plen;
          const uint64_t va = r.va + off;
          const uint32_t rkey = r.rkey;
          const uint32_t pd = qp.pd;
          const int rc = tx_frame(d, [&](uint8_t *dst) {
            if (plen == 0) return true;
            uint8_t *host = nullptr;
            // Re-checked per packet: the region may be gone since the request was accepted.
            if (this->tab_.check_rkey(rkey, pd, qp.qpn, va, plen, kAccessRemoteRead, &host) !=
                MrCheck::kOk)
              return false;
            std::memcpy(dst, host, plen);
            return true;
          });
          if (rc == kTxNoBuffer) {
            *port_full = true;
            return n;
          }
          if (rc != kTxOk) {
            qp.acks.clear();
            resp_fatal(qp, aeth::NakCode::kRemoteAccessError, WcStatus::kWrFlushErr, psn);
            return n;
          }
          ++qp.stats.tx_pkts;
          ++n;
          if (qp.paced) this->cc_sent(qp, plen + this->kPaceOverhead);
          r.reply_psn = wire::psn_add(psn, 1);
          if (last) {
            qp.acks.pop();
            break;
          }
        }
        break;
      }
    }
  }
  return n;
}

}  // namespace uroce::transport
