// SPDX-License-Identifier: BSD-3-Clause
// The requester (IBTA 9.7.4 / 9.7.5.2 "requester: sending requests"): send WQEs in order become
// request packets: PSN assignment, segmentation at the path MTU, opcode choice (FIRST / MIDDLE /
// LAST / ONLY, with immediate / invalidate), AckReq, fences, the max_rd_atomic limit, the PSN
// window, and for UC / UD the completion at the last packet (nothing comes back).
// Retransmission is a rewind of req_idx / req_psn done by comp.cc (go-back-N); this file then
// simply sends again from there. Included by engine.h.
#pragma once

#include <cassert>
#include <cstring>

#include "transport/engine.h"
#include "transport/rnr.h"
#include "wire/psn.h"

namespace uroce::transport {

namespace detail {

enum class ReqState : uint8_t {
  kNextWqe,     // pick the WQE at req_idx, or stop (idle / not RTS / RNR wait / budget)
  kStartWqe,    // first packet of a WQE: local key checks, fence, rd_atomic limit
  kWindow,      // the PSN window (unacknowledged PSNs) has room
  kSendPacket,  // build and transmit one packet
  kLocalOp,     // BIND_MW / LOCAL_INV: run once every earlier WQE has completed
  kLocalError,  // the WQE failed locally: complete it in error once it is the oldest
  kStop,
};

constexpr bool is_local_op(WrOpcode op) noexcept {
  return op == WrOpcode::kBindMw || op == WrOpcode::kLocalInv;
}

constexpr bool is_rd_atomic(WrOpcode op) noexcept {
  return op == WrOpcode::kRdmaRead || op == WrOpcode::kAtomicCmpAndSwp ||
         op == WrOpcode::kAtomicFetchAndAdd;
}

// The BTH opcode of the packet at byte offset `off` of a WQE (IBTA 9.4 table 38).
constexpr uint8_t request_opcode(QpType t, WrOpcode op, bool first, bool last) noexcept {
  if (t == QpType::kUd)
    return op == WrOpcode::kSendWithImm ? wire::op::kUdSendOnlyImm : wire::op::kUdSendOnly;
  const uint8_t base = t == QpType::kUc ? 0x20 : 0x00;
  uint8_t c = 0;
  switch (op) {
    case WrOpcode::kSend:
      c = first && last ? 0x04 : first ? 0x00 : last ? 0x02 : 0x01;
      break;
    case WrOpcode::kSendWithImm:
      c = first && last ? 0x05 : first ? 0x00 : last ? 0x03 : 0x01;
      break;
    case WrOpcode::kSendWithInv:
      c = first && last ? 0x17 : first ? 0x00 : last ? 0x16 : 0x01;
      break;
    case WrOpcode::kRdmaWrite:
      c = first && last ? 0x0A : first ? 0x06 : last ? 0x08 : 0x07;
      break;
    case WrOpcode::kRdmaWriteWithImm:
      c = first && last ? 0x0B : first ? 0x06 : last ? 0x09 : 0x07;
      break;
    case WrOpcode::kRdmaRead:
      return wire::op::kRcReadRequest;
    case WrOpcode::kAtomicCmpAndSwp:
      return wire::op::kRcCompareSwap;
    case WrOpcode::kAtomicFetchAndAdd:
      return wire::op::kRcFetchAdd;
    default:
      break;
  }
  return static_cast<uint8_t>(base + c);
}

}  // namespace detail

template <TxPort Port, Clock Clk, class Q>
uint32_t Engine<Port, Clk, Q>::run_requester(Qp &qp, uint32_t budget, bool *port_full) noexcept {
  using detail::ReqState;
  uint32_t sent = 0;
  WcStatus lerr = WcStatus::kSuccess;
  SendWqe *w = nullptr;
  uint32_t idx = 0;
  ReqState st = ReqState::kNextWqe;
  while (st != ReqState::kStop) {
    switch (st) {
      case ReqState::kNextWqe: {
        if (qp.rnr_wait || sent >= budget) {
          st = ReqState::kStop;
          break;
        }
        // Shared rings: copy what the app published since (nothing to do for PrivateQueues).
        // An empty ring gives the doorbell token back to the app (doc/ipc.md, "Doorbells"),
        // unless WQEs arrived meanwhile.
        if (!qp.has_send_work() &&
            !(Q::kShared && (this->pull_sq(qp) || (qp.sq.release_notify() && this->pull_sq(qp))))) {
          st = ReqState::kStop;
          break;
        }
        idx = qp.req_idx;
        w = &qp.sq.at(idx);
        // SQD: messages already begun are finished, no new one starts (IBTA 10.3.1.6).
        const bool begun = w->state == WqeState::kSending || w->next_off != 0;
        if (qp.state != QpState::kRts && !(qp.state == QpState::kSqd && begun)) {
          st = ReqState::kStop;
          break;
        }
        st = begun ? ReqState::kWindow : ReqState::kStartWqe;
        break;
      }

      case ReqState::kStartWqe: {
        if (!w->checked) {
          lerr = Q::kShared ? this->check_copied_wqe(qp, *w) : WcStatus::kSuccess;
          if (lerr != WcStatus::kSuccess) ++this->ctr_.bad_wqes;
          if (lerr == WcStatus::kSuccess) lerr = check_local_sges(qp, idx);
          if (lerr == WcStatus::kSuccess && qp.type == QpType::kUd &&
              ah_path(w->ah, qp.pd) == nullptr)
            lerr = WcStatus::kLocQpOpErr;
          if (lerr == WcStatus::kSuccess && detail::is_rd_atomic(w->opcode) &&
              qp.max_rd_atomic == 0)
            lerr = WcStatus::kLocQpOpErr;
          if (lerr != WcStatus::kSuccess) {
            st = ReqState::kLocalError;
            break;
          }
          w->checked = true;
        }
        if (detail::is_local_op(w->opcode)) {
          st = ReqState::kLocalOp;
          break;
        }
        // IBV_SEND_FENCE: wait for every earlier READ / atomic to complete.
        if ((w->flags & kSendFence) && qp.rd_atomic_out) {
          st = ReqState::kStop;
          break;
        }
        if (detail::is_rd_atomic(w->opcode) && qp.rd_atomic_out >= qp.max_rd_atomic) {
          st = ReqState::kStop;
          break;
        }
        st = ReqState::kWindow;
        break;
      }

      case ReqState::kWindow:
        // The loss window (qp.window, after a loss) or the configured limit.
        if (qp.type == QpType::kRc &&
            static_cast<uint32_t>(wire::psn_diff(qp.req_psn, qp.comp_psn)) >=
                (qp.window ? qp.window : cfg_.max_inflight_psn)) {
          st = ReqState::kStop;
          break;
        }
        st = ReqState::kSendPacket;
        break;

      case ReqState::kSendPacket: {
        const bool rd_atomic = detail::is_rd_atomic(w->opcode);
        const uint32_t off = w->next_off;
        const bool first = off == 0;
        const uint32_t left = w->length - off;
        const uint32_t plen = rd_atomic ? 0 : (left < qp.mtu ? left : qp.mtu);
        const bool last = rd_atomic || left <= qp.mtu;
        if (qp.paced &&
            !this->cc_may_send(qp, plen + this->kPaceOverhead)) {  // DCQCN pacing (cc.cc)
          st = ReqState::kStop;
          break;
        }
        if (first) {
          // A fresh start assigns the PSN range; a resumed WQE (go-back-N) keeps it.
          const uint32_t npk = w->opcode == WrOpcode::kRdmaRead
                                   ? (w->length ? ((w->length - 1) >> qp.mtu_shift) + 1 : 1)
                               : rd_atomic
                                   ? 1
                                   : (w->length ? ((w->length - 1) >> qp.mtu_shift) + 1 : 1);
          w->first_psn = qp.req_psn;
          w->last_psn = wire::psn_add(qp.req_psn, npk - 1);
        }
        bool ackreq = false;
        if (qp.type == QpType::kRc) {
          ackreq = last || ++qp.noack_pkts >= cfg_.ack_req_every;
          // The packet that fills the window asks for the ACK that opens it (else a window
          // below ack_req_every would wait for the local ACK timeout); inside the loss window
          // also the packet at its half, so the window keeps moving.
          const uint32_t out = static_cast<uint32_t>(wire::psn_diff(qp.req_psn, qp.comp_psn)) + 1;
          if (out >= (qp.window ? qp.window : cfg_.max_inflight_psn) ||
              (qp.window && out == (qp.window + 1) / 2))
            ackreq = true;
          // A paced QP also asks once its unacknowledged packets took a quarter of the ACK
          // timeout to leave (at a low rate, ack_req_every packets could outlast the timeout).
          if (qp.paced && !ackreq) {
            const uint64_t t = ack_timeout_ns(qp.timeout);
            const uint64_t paced_ns = uint64_t{qp.noack_pkts} * (qp.mtu + this->kPaceOverhead) *
                                      8'000'000'000 / qp.pacer.rate_bps();
            if (t != 0 && paced_ns >= t / 4) ackreq = true;
          }
          if (ackreq) qp.noack_pkts = 0;
        }
        const uint8_t opcode = detail::request_opcode(qp.type, w->opcode, first, last);
        const bool se =
            last && (w->flags & kSendSolicited) &&
            (w->opcode == WrOpcode::kSend || w->opcode == WrOpcode::kSendWithImm ||
             w->opcode == WrOpcode::kSendWithInv || w->opcode == WrOpcode::kRdmaWriteWithImm);
        const uint16_t ip_id = ip_id_++;
        const wire::Ecn ecn = cfg_.ecn ? wire::Ecn::kEct0 : wire::Ecn::kNotEct;
        const uint32_t psn = qp.req_psn;
        // The whole description for lib/wire's builder: UD (the path comes from the WR's AH),
        // or a connected QP whose template cannot be built; without NDEBUG also the reference
        // every templated frame is compared with.
        auto describe = [&](wire::PacketDesc &d, wire::PathInfo &ud_path) {
          if (qp.type == QpType::kUd) {
            ud_path = *ah_path(w->ah, qp.pd);
            ud_path.udp_sport = qp.udp_sport;
            d.path = &ud_path;
          } else {
            d.path = &qp.path;
          }
          d.ip_id = ip_id;
          d.ecn = ecn;
          d.payload_len = plen;
          wire::PacketFields &f = d.f;
          f.opcode = opcode;
          f.dest_qp = qp.type == QpType::kUd ? w->remote_qpn : qp.dest_qpn;
          f.psn = psn;
          f.ack_req = ackreq;
          f.solicited = se;
          switch (w->opcode) {
            case WrOpcode::kRdmaWrite:
            case WrOpcode::kRdmaWriteWithImm:
              f.va = w->remote_addr;
              f.rkey = w->rkey;
              f.dma_len = w->length;
              break;
            case WrOpcode::kRdmaRead:
              f.va = w->remote_addr + off;
              f.rkey = w->rkey;
              f.dma_len = w->length - off;
              break;
            case WrOpcode::kAtomicCmpAndSwp:
              f.va = w->remote_addr;
              f.rkey = w->rkey;
              f.swap_add = w->swap;
              f.compare = w->compare_add;
              break;
            case WrOpcode::kAtomicFetchAndAdd:
              f.va = w->remote_addr;
              f.rkey = w->rkey;
              f.swap_add = w->compare_add;
              break;
            default:
              break;
          }
          f.imm_be = w->imm_be;
          f.inv_rkey = w->inv_rkey;
          if (qp.type == QpType::kUd) {
            // IBTA 10.2.5: a Q_Key with the high bit set means "use the QP's own Q_Key".
            f.qkey = (w->remote_qkey & 0x80000000u) ? qp.qkey : w->remote_qkey;
            f.src_qp = qp.qpn;
          }
        };
        auto fill = [&](uint8_t *dst) { return plen == 0 || gather_send(qp, idx, off, dst, plen); };
        int rc;
        if (qp.type != QpType::kUd && (qp.hdr.valid() || qp.hdr.build(qp.path, qp.dest_qpn))) {
          // Connected QP: copy the QP's header template, patch it, add the extended headers.
          rc = tx_frame_with(
              [&](uint8_t *buf, size_t cap) {
                const wire::OpcodeInfo &o = wire::opcode_info(opcode);
                const wire::BuildResult r =
                    qp.hdr.write(buf, cap, o, opcode, plen, ecn, ip_id, se, ackreq, psn);
                if (!r.ok()) return r;
                uint8_t *bp = buf + qp.hdr.bth_off;
                if (o.off_reth) {
                  const uint32_t roff = w->opcode == WrOpcode::kRdmaRead ? off : 0;
                  wire::hdr_at<wire::Reth>(bp + o.off_reth)
                      ->set(w->remote_addr + roff, w->rkey, w->length - roff);
                }
                if (o.off_atomic_eth) {
                  const bool cas = w->opcode == WrOpcode::kAtomicCmpAndSwp;
                  wire::hdr_at<wire::AtomicEth>(bp + o.off_atomic_eth)
                      ->set(w->remote_addr, w->rkey, cas ? w->swap : w->compare_add,
                            cas ? w->compare_add : 0);
                }
                if (o.off_imm) wire::hdr_at<wire::ImmDt>(bp + o.off_imm)->set_raw_be(w->imm_be);
                if (o.off_ieth) wire::hdr_at<wire::Ieth>(bp + o.off_ieth)->set_rkey(w->inv_rkey);
#ifndef NDEBUG
                {
                  wire::PacketDesc d;
                  wire::PathInfo ud_path;
                  describe(d, ud_path);
                  assert(same_as_build_headers(buf, r, d));
                }
#endif
                return r;
              },
              fill);
        } else {
          wire::PacketDesc d;
          wire::PathInfo ud_path;
          describe(d, ud_path);
          rc = tx_frame(d, fill);
        }
        if (rc == kTxNoBuffer) {
          *port_full = true;
          st = ReqState::kStop;
          break;
        }
        if (rc != kTxOk) {
          lerr = rc == kTxFillError ? WcStatus::kLocProtErr : WcStatus::kLocQpOpErr;
          st = ReqState::kLocalError;
          break;
        }
        ++sent;
        ++qp.stats.tx_pkts;
        if (qp.paced) this->cc_sent(qp, plen + this->kPaceOverhead);
        if (rd_atomic) {
          qp.req_psn = wire::psn_add(w->last_psn, 1);
          w->next_off = w->length;
        } else {
          qp.req_psn = wire::psn_add(qp.req_psn, 1);
          w->next_off = off + plen;
        }
        if (wire::psn_diff(qp.req_psn, qp.sent_psn) > 0) qp.sent_psn = qp.req_psn;
        if (last) {
          w->state = WqeState::kSent;
          ++qp.req_idx;
          if (rd_atomic) ++qp.rd_atomic_out;
          if (qp.type != QpType::kRc) {
            // UC / UD: nothing will acknowledge it; it completes once sent (IBTA 9.8.2).
            qp.sq.pop();  // the slot is free before the completion is visible
            complete_send(qp, *w, WcStatus::kSuccess);
          }
        } else {
          w->state = WqeState::kSending;
        }
        update_retransmit_timer(qp);
        st = ReqState::kNextWqe;
        break;
      }

      case ReqState::kLocalOp: {
        // No packet: the operation takes effect once the WQEs before it have completed, so
        // that it is ordered after them as seen by the peer (a stricter fence than IBTA's).
        if (qp.sq.tail() != idx) {
          st = ReqState::kStop;
          break;
        }
        lerr = WcStatus::kSuccess;
        if (w->opcode == WrOpcode::kBindMw) {
          // The SendWqe fields of a bind (verbs_types.h, SendWr).
          const MwBind b{w->rkey,        w->inv_rkey,    w->ah,
                         w->remote_addr, w->compare_add, w->remote_qkey};
          if (this->tab_.mws.bind(b, qp.pd, qp.qpn, mrs_) != 0) lerr = WcStatus::kMwBindErr;
        } else if (mrs_.invalidate(w->inv_rkey, qp.pd) != 0 &&
                   this->tab_.mws.invalidate(w->inv_rkey, qp.pd, qp.qpn, false) != 0) {
          lerr = WcStatus::kLocQpOpErr;
        }
        if (lerr != WcStatus::kSuccess) {
          st = ReqState::kLocalError;
          break;
        }
        qp.sq.pop();
        ++qp.req_idx;
        complete_send(qp, *w, WcStatus::kSuccess);
        st = ReqState::kNextWqe;
        break;
      }

      case ReqState::kLocalError:
        // Completions stay in order: wait until every earlier WQE has completed.
        if (qp.sq.tail() != idx) {
          w->checked = false;
          st = ReqState::kStop;
          break;
        }
        qp.sq.pop();
        complete_send(qp, *w, lerr);
        qp.req_idx = qp.sq.tail();
        if (qp.type == QpType::kRc)
          enter_error(qp);
        else
          enter_sqe(qp);
        st = ReqState::kStop;
        break;

      case ReqState::kStop:
        break;
    }
  }
  return sent;
}

}  // namespace uroce::transport
