// SPDX-License-Identifier: BSD-3-Clause
// Data path, intake: WQEs copied out of the app's SQ / RQ / SRQ rings, validated, posted.
#include "daemon/objects.h"

#include <cstddef>
#include <cstring>

namespace uroce::daemon {

namespace {

// One field of a WQE slot the app shares with us, read once into a private value.
template <class T>
T load_field(const uint8_t *slot, size_t off) noexcept {
  T v;
  std::memcpy(&v, slot + off, sizeof v);
  return v;
}

// The header of a send slot, read field by field (a whole-struct copy stalls on store
// forwarding: doc/perf.md).
abi::SendWqeHeader load_send_header(const uint8_t *s) noexcept {
  using H = abi::SendWqeHeader;
  H h;
  h.wr_id = load_field<uint64_t>(s, offsetof(H, wr_id));
  h.opcode = load_field<uint8_t>(s, offsetof(H, opcode));
  h.reserved = load_field<uint8_t>(s, offsetof(H, reserved));
  h.inline_len = load_field<uint16_t>(s, offsetof(H, inline_len));
  h.send_flags = load_field<uint32_t>(s, offsetof(H, send_flags));
  h.num_sge = load_field<uint32_t>(s, offsetof(H, num_sge));
  h.imm_data = load_field<uint32_t>(s, offsetof(H, imm_data));
  h.remote_addr = load_field<uint64_t>(s, offsetof(H, remote_addr));
  h.rkey = load_field<uint32_t>(s, offsetof(H, rkey));
  h.ud_ah = load_field<uint32_t>(s, offsetof(H, ud_ah));
  h.compare_add = load_field<uint64_t>(s, offsetof(H, compare_add));
  h.swap = load_field<uint64_t>(s, offsetof(H, swap));
  h.remote_qpn = load_field<uint32_t>(s, offsetof(H, remote_qpn));
  h.remote_qkey = load_field<uint32_t>(s, offsetof(H, remote_qkey));
  return h;
}

}  // namespace

void Daemon::activate(Worker &W, Qp &q) noexcept {
  link_front(q, W.act_head);
}

void Daemon::activate_srq(Worker &W, Srq &s) noexcept {
  link_front(s, W.srq_act_head);
}

void Daemon::qp_to_error(Worker &W, Qp &q) noexcept {
  transport::QpAttr a;
  a.qp_state = QpState::kErr;
  W.eng->modify_qp(q.qpn, a, transport::kQpState);
  q.err = true;
}

// The app wrote an impossible index into the QP's SQ or RQ ring (shm::RingConsumer found it
// corrupt): no WQE to complete, so the QP goes to ERR and the app gets IBV_EVENT_QP_FATAL (a
// local work queue catastrophic error), once.
void Daemon::ring_broken(Worker &W, Qp &q) noexcept {
  ++W.ctr.corrupt_rings;
  if (q.err) return;
  qp_to_error(W, q);
  emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kQpFatal), q.qpn);
}

// A WQE the engine cannot take: the QP goes to ERR (the engine flushes what it holds, and
// those completions are moved first, keeping the CQ in posting order), then this WQE
// completes with `st` (FLUSH_ERR if the QP was already in error).
void Daemon::fail_wqe(Worker &W, Qp &q, Cq *cq, uint64_t wr_id, WcStatus st, WcOpcode op,
                      bool recv) noexcept {
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  if (q.err) {
    st = WcStatus::kWrFlushErr;
    ++ctr_.flushed_wqes;
  } else {
    ++ctr_.bad_wqes;
    qp_to_error(W, q);
  }
  if (q.scq) move_cq(W, *q.scq);
  if (q.rcq && q.rcq != q.scq) move_cq(W, *q.rcq);
  if (cq == nullptr) return;
  abi::Cqe e{};
  e.wr_id = wr_id;
  e.status = static_cast<uint32_t>(st);
  e.opcode = static_cast<uint32_t>(recv ? WcOpcode::kRecv : op);
  e.qp_num = q.qpn;
  if (cq->ring.try_push(e) != shm::RingError::kOk) {
    ++ctr_.cqe_lost;
    return;
  }
  ++ctr_.cqes;
  if (cq->ring.take_arm(true)) {
    cq->ev.signal();
    ++ctr_.cq_events;
  }
}

bool Daemon::drain_sq(Worker &W, Qp &q) noexcept {
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  transport::SendWr wr;
  const uint32_t ssize = q.sq.slot_size();
  const uint32_t max_sge = (ssize - sizeof(abi::SendWqeHeader)) / sizeof(abi::Sge);
  const uint32_t max_inline = ssize - sizeof(abi::SendWqeHeader);
  // The WQEs available now (up to the budget) are taken in place and released to the app with
  // one consume() at the end of the pass: one store to the shared consumer index per pass, not
  // per WQE.
  const size_t avail = q.sq.peek(opt_.wqe_budget);
  uint32_t done = 0;
  bool engine_full = false;
  // The app wrote these slots on another core: prefetch both lines of a slot (header, then
  // the first SGEs or inline bytes) several slots ahead of the copy (doc/perf.md).
  constexpr uint32_t kPrefetchAhead = 8;
  const auto prefetch_slot = [&q, ssize](size_t i) {
    const auto *p = static_cast<const uint8_t *>(q.sq.at(i));
    __builtin_prefetch(p);
    if (ssize > 64) __builtin_prefetch(p + 64);
  };
  for (uint32_t i = 0; i < kPrefetchAhead && i < avail; ++i)
    prefetch_slot(i);
  while (done < avail) {
    // Copy first, validate the private copy only (the app may keep writing the slot): the
    // header here, the SGEs straight into wr.sg_list (checked by the engine from there), and
    // only as many as the private header says. Inline bytes are payload, never checked: the
    // engine copies them once, at post time, from the slot itself.
    const auto *shared = static_cast<const uint8_t *>(q.sq.at(done));
    if (done + kPrefetchAhead < avail) prefetch_slot(done + kPrefetchAhead);
    const abi::SendWqeHeader h = load_send_header(shared);
    bool ok = h.reserved == 0 && h.opcode <= static_cast<uint8_t>(WrOpcode::kSendWithInv) &&
              (h.send_flags & ~uint32_t{0x1f}) == 0;
    WcStatus st = WcStatus::kLocQpOpErr;
    if (ok) {
      wr.wr_id = h.wr_id;
      wr.opcode = static_cast<WrOpcode>(h.opcode);
      wr.send_flags = h.send_flags;
      wr.imm_data_be = h.imm_data;
      wr.invalidate_rkey = h.imm_data;
      wr.remote_addr = h.remote_addr;
      wr.rkey = h.rkey;
      wr.compare_add = h.compare_add;
      wr.swap = h.swap;
      wr.ah = h.ud_ah;
      wr.remote_qpn = h.remote_qpn;
      wr.remote_qkey = h.remote_qkey;
      if (h.send_flags & transport::kSendInline) {
        if (h.inline_len > max_inline || h.num_sge != 0) {
          ok = false;
          st = WcStatus::kLocLenErr;
        } else {
          // The engine copies inline bytes at post time from sg_list addresses.
          wr.num_sge = h.inline_len ? 1 : 0;
          wr.sg_list[0].addr = reinterpret_cast<uintptr_t>(shared + sizeof h);
          wr.sg_list[0].length = h.inline_len;
          wr.sg_list[0].lkey = 0;
        }
      } else if (h.inline_len != 0 || h.num_sge > max_sge || h.num_sge > transport::kMaxSge) {
        ok = false;
        st = WcStatus::kLocLenErr;
      } else {
        wr.num_sge = h.num_sge;
        // Element by element, not one variable-length memcpy (doc/perf.md).
        for (uint32_t i = 0; i < h.num_sge; ++i) {
          abi::Sge g;
          std::memcpy(&g, shared + sizeof h + i * sizeof g, sizeof g);
          wr.sg_list[i].addr = g.addr;
          wr.sg_list[i].length = g.length;
          wr.sg_list[i].lkey = g.lkey;
        }
      }
    }
    if (ok) {
      // On a QP in ERR the engine takes the WQE and flushes it, in order.
      const int rc = W.eng->post_send(q.qpn, wr);
      if (rc == ENOMEM) {  // the engine's queue is full: retry on a later pass
        engine_full = true;
        break;
      }
      if (rc == 0)
        ++ctr_.send_wqes;
      else
        ok = false;
    }
    if (!ok)
      fail_wqe(W, q, q.scq, h.wr_id, st, wc_opcode_of(static_cast<WrOpcode>(h.opcode)), false);
    ++done;
  }
  if (done != 0) {
    q.sq.consume(done);
    // The WQEs failed here, and those the engine finished meanwhile.
    q.sq.release_all_but(W.eng->sq_outstanding(q.qpn));
  }
  if (engine_full) return true;
  if (q.sq.corrupt()) {
    ring_broken(W, q);
    return false;
  }
  if (done == opt_.wqe_budget) return true;
  return q.sq.release_notify();
}

bool Daemon::drain_rq(Worker &W, Qp &q) noexcept {
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  alignas(64) uint8_t slot[512];
  transport::RecvWr wr;
  const uint32_t rsize = q.rq.slot_size();
  const uint32_t max_sge = (rsize - sizeof(abi::RecvWqeHeader)) / sizeof(abi::Sge);
  uint32_t done = 0;
  while (done < opt_.wqe_budget && q.rq.peek(1) == 1) {
    std::memcpy(slot, q.rq.at(0), rsize);
    abi::RecvWqeHeader h;
    std::memcpy(&h, slot, sizeof h);
    if (h.reserved != 0 || h.num_sge > max_sge || h.num_sge > transport::kMaxSge) {
      fail_wqe(W, q, q.rcq, h.wr_id, WcStatus::kLocLenErr, WcOpcode::kRecv, true);
    } else {
      wr.wr_id = h.wr_id;
      wr.num_sge = h.num_sge;
      std::memcpy(wr.sg_list, slot + sizeof h, h.num_sge * sizeof(abi::Sge));
      const int rc = W.eng->post_recv(q.qpn, wr);
      if (rc == ENOMEM) return true;
      if (rc == 0)
        ++ctr_.recv_wqes;
      else
        fail_wqe(W, q, q.rcq, h.wr_id, WcStatus::kLocQpOpErr, WcOpcode::kRecv, true);
    }
    q.rq.consume(1);
    ++done;
  }
  if (done != 0) q.rq.release_all_but(W.eng->rq_outstanding(q.qpn));
  if (q.rq.corrupt()) {
    ring_broken(W, q);
    return false;
  }
  if (done == opt_.wqe_budget) return true;
  return q.rq.release_notify();
}

// SRQ WQEs belong to no QP: a malformed one is counted and dropped, and the app gets
// IBV_EVENT_SRQ_ERR for the SRQ.
bool Daemon::drain_srq(Worker &W, Srq &s) noexcept {
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  alignas(64) uint8_t slot[512];
  transport::RecvWr wr;
  const uint32_t rsize = s.ring.slot_size();
  const uint32_t max_sge = (rsize - sizeof(abi::RecvWqeHeader)) / sizeof(abi::Sge);
  uint32_t done = 0;
  while (done < opt_.wqe_budget && s.ring.peek(1) == 1) {
    std::memcpy(slot, s.ring.at(0), rsize);
    abi::RecvWqeHeader h;
    std::memcpy(&h, slot, sizeof h);
    if (h.reserved != 0 || h.num_sge > max_sge || h.num_sge > transport::kMaxSge) {
      ++ctr_.bad_wqes;
      emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kSrqErr), s.handle);
    } else {
      wr.wr_id = h.wr_id;
      wr.num_sge = h.num_sge;
      std::memcpy(wr.sg_list, slot + sizeof h, h.num_sge * sizeof(abi::Sge));
      const int rc = W.eng->post_srq_recv(s.handle, wr);
      if (rc == ENOMEM) return true;
      if (rc == 0) {
        ++ctr_.recv_wqes;
      } else {
        ++ctr_.bad_wqes;
        emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kSrqErr), s.handle);
      }
    }
    s.ring.consume(1);
    ++done;
  }
  if (done != 0) s.ring.release_all_but(W.eng->srq_count(s.handle));
  if (s.ring.corrupt()) {
    ++ctr_.corrupt_rings;
    emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kSrqErr), s.handle);
    return false;
  }
  if (done == opt_.wqe_budget) return true;
  return s.ring.release_notify();
}

}  // namespace uroce::daemon
