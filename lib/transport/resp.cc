// SPDX-License-Identifier: BSD-3-Clause
// The responder (IBTA 9.7.5.1 "responder: request handling", 9.8 for UC, 9.8.x for UD):
// ePSN and duplicate detection, opcode sequence, QP access, receive WQE and responder resource,
// length, R_Key, execution (placement, READ set-up, atomics), receive completions and the ACK /
// NAK / RNR NAK it owes. Responses are queued on the QP (ack_queue.h) and sent by resp_tx.h, so
// this file never transmits.
#include <cstring>

#include "transport/core.h"
#include "wire/psn.h"

namespace uroce::transport {

using wire::psn_diff;

namespace {

enum class RespState : uint8_t {
  kCheckPsn,       // ePSN: in sequence, duplicate, or a gap
  kDuplicate,      // replay READ / atomic from the resources, or re-ACK
  kCheckOpSeq,     // FIRST / MIDDLE / LAST order within a message
  kCheckOpValid,   // the QP allows this operation (access flags, rd_atomic resources)
  kCheckResource,  // a receive WQE (SEND, WRITE with immediate) / a responder resource
  kCheckLength,    // payload sizes against the MTU, the RETH length and the receive WQE
  kCheckRkey,      // R_Key, bounds, access and alignment of the remote buffer
  kExecute,        // place data / set up the READ reply / perform the atomic
  kComplete,       // the message is complete: MSN, receive CQE
  kAcknowledge,    // queue the ACK the AckReq bit asks for
  kDone,
};

constexpr bool is_send(uint32_t m) noexcept {
  return m & wire::kMaskSend;
}
constexpr bool is_write(uint32_t m) noexcept {
  return m & wire::kMaskWrite;
}

// Which opcodes may follow `prev` (the last accepted request opcode) when a message is open.
bool continues(uint8_t prev, uint32_t cur_mask) noexcept {
  const uint32_t pm = wire::opcode_info(prev).mask;
  if (cur_mask & wire::kMaskFirst) return false;  // FIRST / ONLY cannot interrupt a message
  if (!(cur_mask & (wire::kMaskMiddle | wire::kMaskLast))) return false;
  return (is_send(pm) && is_send(cur_mask)) || (is_write(pm) && is_write(cur_mask));
}

}  // namespace

template <class Q>
void EngineCoreT<Q>::resp_fatal(Qp &qp, aeth::NakCode code, WcStatus recv_status,
                                uint32_t psn) noexcept {
  // Class C/D errors of IBTA 9.9.3.1.2: NAK, then the responder QP enters the Error state.
  if (qp.resp_has_wqe && recv_status != WcStatus::kWrFlushErr) {
    Wc wc;
    wc.wr_id = qp.resp_wqe.wr_id;
    wc.status = recv_status;
    wc.opcode = WcOpcode::kRecv;
    wc.qp_num = qp.qpn;
    push_recv_wc(qp, wc, false);
    qp.resp_has_wqe = false;
  }
  if (qp.type == QpType::kRc) {
    qp.fatal_nak_pending = true;
    qp.fatal_nak_syndrome = aeth::nak(code);
    qp.fatal_nak_psn = psn;
  }
  enter_error(qp);
}

template <class Q>
void EngineCoreT<Q>::responder_rx(Qp &qp, const wire::ParsedPacket &p) noexcept {
  responder_step(qp, p);
  // Whatever the outcome, queued responses (ACK, NAK, RNR NAK, READ / atomic replies) are
  // sent by the next poll.
  if (!qp.acks.empty() || qp.fatal_nak_pending) activate(qp);
}

template <class Q>
void EngineCoreT<Q>::responder_step(Qp &qp, const wire::ParsedPacket &p) noexcept {
  const wire::Bth *bth = p.bth();
  const uint32_t psn = bth->psn();
  const uint8_t opc = bth->opcode();
  const uint32_t m = p.op->mask;
  const bool rc = qp.type == QpType::kRc;

  // ---------------------------------------------------------------- UD: one packet, one WQE
  if (qp.type == QpType::kUd) {
    if (p.deth()->qkey() != qp.qkey) {
      ++ctr_.drops[static_cast<size_t>(DropReason::kQkey)];
      return;
    }
    if (!take_recv_wqe(qp)) {
      ++ctr_.drops[static_cast<size_t>(DropReason::kResource)];
      return;
    }
    // The GRH occupies the first 40 bytes of the buffer: the IPv6 header, or for IPv4 20
    // undefined (zero) bytes followed by the IPv4 header (as rxe and ConnectX place it).
    uint8_t grh[kGrhSize] = {};
    if (p.ipv6)
      std::memcpy(grh, p.frame + p.l3_off, 40);
    else
      std::memcpy(grh + 20, p.frame + p.l3_off, 20);
    Wc wc;
    wc.wr_id = qp.resp_wqe.wr_id;
    wc.opcode = WcOpcode::kRecv;
    wc.qp_num = qp.qpn;
    wc.src_qp = p.deth()->src_qp();
    wc.pkey_index = qp.pkey_index;
    wc.wc_flags = kWcGrh;
    wc.sl = p.ipv6 ? kWcSlRoceIpv6 : kWcSlRoceIpv4;
    wc.byte_len = p.payload_len + kGrhSize;
    WcStatus st = WcStatus::kSuccess;
    if (p.payload_len + kGrhSize > qp.resp_wqe.length) {
      st = WcStatus::kLocLenErr;
    } else if (place_recv(qp, 0, grh, kGrhSize, &st)) {
      place_recv(qp, kGrhSize, p.payload(), p.payload_len, &st);
    }
    wc.status = st;
    if (m & wire::kMaskImm) {
      wc.wc_flags |= kWcWithImm;
      wc.imm_data = p.imm()->raw_be();
    }
    qp.resp_has_wqe = false;
    push_recv_wc(qp, wc, bth->solicited());
    return;
  }

  // ---------------------------------------------------------------- RC and UC
  const uint32_t mtu = qp.mtu;
  const uint32_t len = p.payload_len;
  RespState st = RespState::kCheckPsn;
  uint32_t npkts = 1;  // PSNs this request consumes (READ: its response packets)
  uint8_t res_idx = 0;
  bool used_wqe = false;  // this message consumed a receive WQE (SEND, WRITE with imm)

  // UC errors drop the rest of the message silently (IBTA 9.8.3 / 9.9.4).
  auto uc_drop = [&](DropReason r) {
    qp.resp_drop_msg = true;
    qp.resp_in_msg = false;
    ++ctr_.drops[static_cast<size_t>(r)];
  };

  while (st != RespState::kDone) {
    switch (st) {
      case RespState::kCheckPsn: {
        const int32_t d = psn_diff(psn, qp.resp_psn);
        if (!rc) {
          const bool starts = m & wire::kMaskFirst;
          if (starts) {
            // A FIRST / ONLY resynchronises; an open message is abandoned (its WQE reused).
            qp.resp_psn = psn;
            qp.resp_drop_msg = false;
            qp.resp_in_msg = false;
            qp.resp_off = 0;
          } else if (d != 0 || qp.resp_drop_msg) {
            qp.resp_psn = wire::psn_add(psn, 1);
            uc_drop(DropReason::kSequence);
            return;
          }
          st = RespState::kCheckOpSeq;
          break;
        }
        if (d > 0) {
          // A gap: one NAK per gap (IBTA 9.7.5.1.1), then silence until ePSN arrives.
          if (!qp.resp_nak_sent) {
            qp.resp_nak_sent = true;
            ++qp.stats.seq_naks_sent;
            qp.acks.push_ack(aeth::nak(aeth::NakCode::kPsnSequenceError), qp.resp_psn, qp.resp_msn);
          } else {
            ++ctr_.drops[static_cast<size_t>(DropReason::kSequence)];
          }
          return;
        }
        if (d == 0) qp.resp_nak_sent = false;  // the gap is closed: the next one gets a NAK
        st = d < 0 ? RespState::kDuplicate : RespState::kCheckOpSeq;
        break;
      }

      case RespState::kDuplicate: {
        ++qp.stats.dup_requests;
        if (m & wire::kMaskRead) {
          // Replay from the resource that covers this PSN, with the (possibly shorter) range
          // of the duplicate request, as a new READ reply.
          for (uint32_t i = 0; i < qp.max_dest_rd_atomic; ++i) {
            RespResource &r = qp.res[i];
            if (r.kind != RespResource::Kind::kRead) continue;
            if (psn_diff(psn, r.first_psn) < 0 || psn_diff(psn, r.last_psn) > 0) continue;
            const uint32_t dlen = p.reth()->dma_len();
            const uint32_t dp = dlen ? ((dlen - 1) >> qp.mtu_shift) + 1 : 1;
            if (wire::psn_add(psn, dp - 1) != r.last_psn) break;  // inconsistent: drop
            r.first_psn = psn;
            r.reply_psn = psn;
            r.va = p.reth()->va();
            r.rkey = p.reth()->rkey();
            r.length = dlen;
            if (!qp.acks.has_resource(static_cast<uint8_t>(i)))
              qp.acks.push_resource(RespOp::Kind::kReadReply, static_cast<uint8_t>(i), psn, r.msn);
            return;
          }
          ++ctr_.drops[static_cast<size_t>(DropReason::kDuplicate)];
          return;
        }
        if (m & wire::kMaskAtomic) {
          // Answer with the saved result; never execute an atomic twice.
          for (uint32_t i = 0; i < qp.max_dest_rd_atomic; ++i) {
            const RespResource &r = qp.res[i];
            if (r.kind != RespResource::Kind::kAtomic || r.first_psn != psn) continue;
            if (!qp.acks.has_resource(static_cast<uint8_t>(i)))
              qp.acks.push_resource(RespOp::Kind::kAtomicAck, static_cast<uint8_t>(i), psn, r.msn);
            return;
          }
          ++ctr_.drops[static_cast<size_t>(DropReason::kDuplicate)];
          return;
        }
        // SEND / WRITE: already executed; acknowledge again what we have.
        if (bth->ack_req() && !qp.acks.push_ack(aeth::ack(static_cast<uint8_t>(credits_code(qp))),
                                                wire::psn_sub(qp.resp_psn, 1), qp.resp_msn))
          ++ctr_.drops[static_cast<size_t>(DropReason::kResource)];
        return;
      }

      case RespState::kCheckOpSeq: {
        const bool ok = qp.resp_in_msg ? continues(qp.resp_prev_op, m) : (m & wire::kMaskFirst);
        if (!ok) {
          if (!rc) {
            uc_drop(DropReason::kSequence);
            qp.resp_psn = wire::psn_add(psn, 1);
            return;
          }
          resp_fatal(qp, aeth::NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, psn);
          return;
        }
        st = RespState::kCheckOpValid;
        break;
      }

      case RespState::kCheckOpValid: {
        uint32_t need = 0;
        if (is_write(m))
          need = kAccessRemoteWrite;
        else if (m & wire::kMaskRead)
          need = kAccessRemoteRead;
        else if (m & wire::kMaskAtomic)
          need = kAccessRemoteAtomic;
        const bool rd_atomic = m & (wire::kMaskRead | wire::kMaskAtomic);
        if ((qp.access & need) != need || (rd_atomic && qp.max_dest_rd_atomic == 0)) {
          if (!rc) {
            uc_drop(DropReason::kOpcode);
            qp.resp_psn = wire::psn_add(psn, 1);
            return;
          }
          resp_fatal(qp, aeth::NakCode::kInvalidRequest, WcStatus::kWrFlushErr, psn);
          return;
        }
        st = RespState::kCheckResource;
        break;
      }

      case RespState::kCheckResource: {
        const bool needs_wqe =
            (is_send(m) && (m & wire::kMaskFirst)) || ((m & wire::kMaskRecvWqe) && is_write(m));
        if (needs_wqe && !qp.resp_has_wqe && !take_recv_wqe(qp)) {
          if (qp.state == QpState::kErr) return;  // a malformed WQE in a shared ring
          if (!rc) {
            qp.resp_psn = wire::psn_add(psn, 1);
            uc_drop(DropReason::kResource);
            return;
          }
          // RNR NAK carrying our min_rnr_timer; ePSN stays (IBTA 9.7.5.2.8).
          ++qp.stats.rnr_naks_sent;
          qp.acks.push_ack(aeth::rnr_nak(qp.min_rnr_timer), psn, qp.resp_msn);
          return;
        }
        if (m & (wire::kMaskRead | wire::kMaskAtomic)) {
          res_idx = static_cast<uint8_t>(qp.res_head % qp.max_dest_rd_atomic);
          if (qp.acks.has_resource(res_idx)) {
            // More READ / atomic requests outstanding than max_dest_rd_atomic.
            resp_fatal(qp, aeth::NakCode::kInvalidRequest, WcStatus::kWrFlushErr, psn);
            return;
          }
        }
        st = RespState::kCheckLength;
        break;
      }

      case RespState::kCheckLength: {
        bool ok = true;
        WcStatus rs = WcStatus::kWrFlushErr;
        if (is_send(m) || is_write(m)) {
          if (m & (wire::kMaskFirst | wire::kMaskMiddle)) {
            if (!(m & wire::kMaskLast) && len != mtu) ok = false;  // FIRST / MIDDLE: full MTU
          }
          if ((m & wire::kMaskLast) && len > mtu) ok = false;
          if ((m & wire::kMaskLast) && !(m & wire::kMaskFirst) && len == 0) ok = false;
        }
        if (ok && is_write(m)) {
          if (m & wire::kMaskFirst) {
            const uint32_t dl = p.reth()->dma_len();
            if (dl > kMaxMsgSize) ok = false;
            qp.resp_len = dl;
            qp.resp_resid = dl;
            qp.resp_va = p.reth()->va();
            qp.resp_rkey = p.reth()->rkey();
          }
          if (ok && (len > qp.resp_resid || ((m & wire::kMaskLast) && len != qp.resp_resid)))
            ok = false;
        }
        if (ok && is_send(m)) {
          if (m & wire::kMaskFirst) qp.resp_off = 0;
          if (uint64_t{qp.resp_off} + len > qp.resp_wqe.length) {
            ok = false;
            rs = WcStatus::kLocLenErr;
          }
        }
        if (ok && (m & wire::kMaskRead) && p.reth()->dma_len() > kMaxMsgSize) ok = false;
        if (!ok) {
          if (!rc) {
            if (rs == WcStatus::kLocLenErr && qp.resp_has_wqe) {
              Wc wc;
              wc.wr_id = qp.resp_wqe.wr_id;
              wc.status = rs;
              wc.opcode = WcOpcode::kRecv;
              wc.qp_num = qp.qpn;
              push_recv_wc(qp, wc, false);
              qp.resp_has_wqe = false;
            }
            qp.resp_psn = wire::psn_add(psn, 1);
            uc_drop(DropReason::kLength);
            return;
          }
          resp_fatal(qp, aeth::NakCode::kInvalidRequest, rs, psn);
          return;
        }
        st = RespState::kCheckRkey;
        break;
      }

      case RespState::kCheckRkey: {
        uint8_t *host = nullptr;
        MrCheck c = MrCheck::kOk;
        if (is_write(m) && (m & wire::kMaskFirst) && qp.resp_len)
          c = tab_.check_rkey(qp.resp_rkey, qp.pd, qp.qpn, qp.resp_va, qp.resp_len,
                              kAccessRemoteWrite, &host);
        else if ((m & wire::kMaskRead) && p.reth()->dma_len())
          c = tab_.check_rkey(p.reth()->rkey(), qp.pd, qp.qpn, p.reth()->va(), p.reth()->dma_len(),
                              kAccessRemoteRead, &host);
        if (m & wire::kMaskAtomic) {
          const wire::AtomicEth *a = p.atomic_eth();
          if (a->va() & 7) {
            resp_fatal(qp, aeth::NakCode::kInvalidRequest, WcStatus::kWrFlushErr, psn);
            return;
          }
          c = tab_.check_rkey(a->rkey(), qp.pd, qp.qpn, a->va(), 8, kAccessRemoteAtomic, &host);
        }
        if (c != MrCheck::kOk) {
          if (!rc) {
            qp.resp_psn = wire::psn_add(psn, 1);
            uc_drop(DropReason::kLength);
            return;
          }
          resp_fatal(qp, aeth::NakCode::kRemoteAccessError, WcStatus::kWrFlushErr, psn);
          return;
        }
        st = RespState::kExecute;
        break;
      }

      case RespState::kExecute: {
        if (is_send(m)) {
          WcStatus ws = WcStatus::kSuccess;
          if (!place_recv(qp, qp.resp_off, p.payload(), len, &ws)) {
            if (!rc) {
              Wc wc;
              wc.wr_id = qp.resp_wqe.wr_id;
              wc.status = ws;
              wc.opcode = WcOpcode::kRecv;
              wc.qp_num = qp.qpn;
              push_recv_wc(qp, wc, false);
              qp.resp_has_wqe = false;
              qp.resp_psn = wire::psn_add(psn, 1);
              uc_drop(DropReason::kLength);
              return;
            }
            resp_fatal(qp,
                       ws == WcStatus::kLocLenErr ? aeth::NakCode::kInvalidRequest
                                                  : aeth::NakCode::kRemoteOperationalError,
                       ws, psn);
            return;
          }
          qp.resp_off += len;
          used_wqe = true;
        } else if (is_write(m)) {
          if (len) {
            uint8_t *host = nullptr;
            // Checked per packet: the region may have been deregistered since the FIRST.
            if (tab_.check_rkey(qp.resp_rkey, qp.pd, qp.qpn, qp.resp_va, len, kAccessRemoteWrite,
                                &host) != MrCheck::kOk) {
              if (!rc) {
                qp.resp_psn = wire::psn_add(psn, 1);
                uc_drop(DropReason::kLength);
                return;
              }
              resp_fatal(qp, aeth::NakCode::kRemoteAccessError, WcStatus::kWrFlushErr, psn);
              return;
            }
            std::memcpy(host, p.payload(), len);
            qp.resp_va += len;
            qp.resp_resid -= len;
          }
          if (m & wire::kMaskRecvWqe) used_wqe = true;
        } else if (m & wire::kMaskRead) {
          const uint32_t dl = p.reth()->dma_len();
          npkts = dl ? ((dl - 1) >> qp.mtu_shift) + 1 : 1;
          RespResource &r = qp.res[res_idx];
          r.kind = RespResource::Kind::kRead;
          r.first_psn = psn;
          r.last_psn = wire::psn_add(psn, npkts - 1);
          r.va = p.reth()->va();
          r.rkey = p.reth()->rkey();
          r.length = dl;
          r.reply_psn = psn;
          qp.resp_msn = (qp.resp_msn + 1) & wire::kPsnMask;
          r.msn = qp.resp_msn;
          if (!qp.acks.push_resource(RespOp::Kind::kReadReply, res_idx, psn, r.msn)) {
            // No room to answer now: forget it, the requester will retry.
            qp.resp_msn = (qp.resp_msn - 1) & wire::kPsnMask;
            r.kind = RespResource::Kind::kFree;
            ++ctr_.drops[static_cast<size_t>(DropReason::kResource)];
            return;
          }
          ++qp.res_head;
        } else if (m & wire::kMaskAtomic) {
          const wire::AtomicEth *a = p.atomic_eth();
          uint8_t *host = nullptr;
          // Checked in kCheckRkey; again here for the host address (and in case it went).
          if (tab_.check_rkey(a->rkey(), qp.pd, qp.qpn, a->va(), 8, kAccessRemoteAtomic, &host) !=
              MrCheck::kOk) {
            resp_fatal(qp, aeth::NakCode::kRemoteAccessError, WcStatus::kWrFlushErr, psn);
            return;
          }
          if (qp.acks.size() + 1 >= AckQueue::kCap) {
            ++ctr_.drops[static_cast<size_t>(DropReason::kResource)];
            return;  // cannot answer: do not execute; the requester retries
          }
          uint64_t v;
          std::memcpy(&v, host, 8);
          const uint64_t orig = v;
          if (opc == wire::op::kRcCompareSwap) {
            if (v == a->compare()) v = a->swap_add();
          } else {
            v += a->swap_add();
          }
          std::memcpy(host, &v, 8);
          RespResource &r = qp.res[res_idx];
          r.kind = RespResource::Kind::kAtomic;
          r.first_psn = r.last_psn = psn;
          r.va = a->va();
          r.rkey = a->rkey();
          r.length = 8;
          r.atomic_orig = orig;
          qp.resp_msn = (qp.resp_msn + 1) & wire::kPsnMask;
          r.msn = qp.resp_msn;
          qp.acks.push_resource(RespOp::Kind::kAtomicAck, res_idx, psn, r.msn);
          ++qp.res_head;
        }
        qp.resp_prev_op = opc;
        qp.resp_in_msg = (is_send(m) || is_write(m)) && !(m & wire::kMaskLast);
        qp.resp_psn = wire::psn_add(psn, npkts);
        st = (m & wire::kMaskLast) && (is_send(m) || is_write(m)) ? RespState::kComplete
                                                                  : RespState::kAcknowledge;
        break;
      }

      case RespState::kComplete: {
        qp.resp_msn = (qp.resp_msn + 1) & wire::kPsnMask;
        if (used_wqe && qp.resp_has_wqe) {
          Wc wc;
          wc.wr_id = qp.resp_wqe.wr_id;
          wc.status = WcStatus::kSuccess;
          wc.qp_num = qp.qpn;
          wc.pkey_index = qp.pkey_index;
          wc.sl = p.ipv6 ? kWcSlRoceIpv6 : kWcSlRoceIpv4;
          if (is_write(m)) {
            wc.opcode = WcOpcode::kRecvRdmaWithImm;
            wc.byte_len = qp.resp_len;
          } else {
            wc.opcode = WcOpcode::kRecv;
            wc.byte_len = qp.resp_off;
          }
          if (m & wire::kMaskImm) {
            wc.wc_flags |= kWcWithImm;
            wc.imm_data = p.imm()->raw_be();
          }
          if (m & wire::kMaskIeth) {
            const uint32_t key = p.ieth()->rkey();
            // An MR, else a type 2 window bound to this QP (IBTA 10.6.7.2.3).
            if (mrs_.invalidate(key, qp.pd) != 0 &&
                tab_.mws.invalidate(key, qp.pd, qp.qpn, true) != 0) {
              resp_fatal(qp, aeth::NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, psn);
              return;
            }
            wc.wc_flags |= kWcWithInv;
            wc.imm_data = key;
          }
          qp.resp_has_wqe = false;
          push_recv_wc(qp, wc, bth->solicited());
        }
        st = RespState::kAcknowledge;
        break;
      }

      case RespState::kAcknowledge:
        // (ERR here: the receive completion was lost to a CQ overflow; no ACK.)
        if (rc && bth->ack_req() && !(m & (wire::kMaskRead | wire::kMaskAtomic)) &&
            qp.state != QpState::kErr) {
          if (!qp.acks.push_ack(aeth::ack(static_cast<uint8_t>(credits_code(qp))), psn,
                                qp.resp_msn))
            ++ctr_.drops[static_cast<size_t>(DropReason::kResource)];
        }
        st = RespState::kDone;
        break;

      case RespState::kDone:
        break;
    }
  }
}

template class EngineCoreT<PrivateQueues>;
template class EngineCoreT<RingQueues>;

}  // namespace uroce::transport
