// SPDX-License-Identifier: BSD-3-Clause
// Data path, completions: engine CQs -> the app's CQ rings, slot release, bridge_out.
#include "daemon/objects.h"

#include <cstring>

namespace uroce::daemon {

// A slot of the app's SQ / RQ / SRQ ring stays taken (not reusable by the app) from the moment
// the bridge reads its WQE until the WR completes: what the ring has taken minus what the engine
// still holds is released. The engine holds only WQEs taken from that ring (after a reset it
// holds none), so the release point never passes a WR the engine still works on; called in
// the middle of a drain pass (fail_wqe -> move_cq), the engine may hold WQEs the ring has not
// marked taken yet, and the release falls short (never too far) until the pass ends.
void Daemon::release_slots(Worker &W, Qp &q) noexcept {
  q.sq.release_all_but(W.eng->sq_outstanding(q.qpn));
  if (q.has_rq) q.rq.release_all_but(W.eng->rq_outstanding(q.qpn));
  if (q.srq != 0) {
    Srq *srq = q.srq < W.srq_by_handle.size() ? W.srq_by_handle[q.srq] : nullptr;
    if (srq != nullptr) srq->ring.release_all_but(W.eng->srq_count(srq->handle));
  }
}

// The app broke its consumer index: the CQ is unusable; IBV_EVENT_CQ_ERR once.
bool Daemon::cq_ring_broken(Worker &W, Cq &c) noexcept {
  if (!c.ring.corrupt()) return false;
  if (!c.err_reported) {
    c.err_reported = true;
    ++W.ctr.corrupt_rings;
    emit_async(W, static_cast<uint32_t>(transport::AsyncEvent::kCqErr), c.handle);
  }
  return true;
}

uint32_t Daemon::move_cq(Worker &W, Cq &c) noexcept {
  BridgeCounters &ctr_ = W.ctr;  // this worker's share
  if (cq_ring_broken(W, c)) return 0;
  transport::Wc wc[kCqBurst];
  uint32_t moved = 0;
  bool urgent = false;
  for (;;) {
    const size_t fr = c.ring.free_slots(kCqBurst);
    if (fr == 0) break;
    const uint32_t want = fr < kCqBurst ? static_cast<uint32_t>(fr) : kCqBurst;
    const uint32_t k = W.eng->poll_cq(c.handle, wc, want);
    if (k == 0) break;
    const size_t got = c.ring.reserve(k);  // == k: free_slots said so
    // The WQE slots of these completions are the app's again before it can see them: an app
    // that polls a completion and posts finds the room it freed.
    uint32_t last_qpn = 0;
    for (size_t i = 0; i < got; ++i) {
      if (wc[i].qp_num == last_qpn) continue;
      last_qpn = wc[i].qp_num;
      const uint32_t idx = W.eng->qp_slot(last_qpn);
      if (Qp *q = idx < W.qp_by_index.size() ? W.qp_by_index[idx] : nullptr) release_slots(W, *q);
    }
    for (size_t i = 0; i < got; ++i) {
      abi::Cqe e{};
      e.wr_id = wc[i].wr_id;
      e.status = static_cast<uint32_t>(wc[i].status);
      e.opcode = static_cast<uint32_t>(wc[i].opcode);
      e.vendor_err = wc[i].vendor_err;
      e.byte_len = wc[i].byte_len;
      e.imm_data = wc[i].imm_data;
      e.qp_num = wc[i].qp_num;
      e.src_qp = wc[i].src_qp;
      e.wc_flags = wc[i].wc_flags;
      e.pkey_index = wc[i].pkey_index;
      e.slid = wc[i].slid;
      e.sl = wc[i].sl;
      e.dlid_path_bits = wc[i].dlid_path_bits;
      std::memcpy(c.ring.slot(i), &e, sizeof e);
      // Solicited-only arms fire on errors and on every receive completion (the engine's
      // completion does not say whether the request was solicited): a superset, never a miss.
      if (wc[i].status != WcStatus::kSuccess ||
          static_cast<uint32_t>(wc[i].opcode) >= static_cast<uint32_t>(WcOpcode::kRecv))
        urgent = true;
    }
    c.ring.commit(got);
    moved += static_cast<uint32_t>(got);
    if (k < want) break;
  }
  // free_slots() may have found the index broken just now (the dirty list will not bring
  // this CQ back unless another completion arrives).
  cq_ring_broken(W, c);
  if (moved) {
    ctr_.cqes += moved;
    if (c.ring.take_arm(urgent)) {
      c.ev.signal();
      ++ctr_.cq_events;
    }
  }
  return moved;
}

// Only the CQs the engine listed as dirty (a completion arrived since the last pass) are
// looked at: the cost grows with the CQs that received completions, not with all CQs. A CQ
// whose app ring was full keeps its remaining completions in the engine and is listed again
// for the next pass (the app is behind; it costs one check per pass until it catches up).
uint32_t Daemon::bridge_out(unsigned w) noexcept {
  Worker &W = *w_[w];
  uint32_t n = 0;
  uint32_t dirty[kCqBurst];
  // One snapshot batch at a time: CQs re-marked below land behind it, for the next pass.
  uint32_t left = W.eng->dirty_cq_count();
  while (left != 0) {
    const uint32_t k = W.eng->take_dirty_cqs(dirty, left < kCqBurst ? left : kCqBurst);
    if (k == 0) break;
    left -= k;
    for (uint32_t i = 0; i < k; ++i) {
      const uint32_t h = dirty[i];
      Cq *c = h < W.cq_by_handle.size() ? W.cq_by_handle[h] : nullptr;
      if (c == nullptr) continue;
      n += move_cq(W, *c);
      ++W.ctr.cq_passes;
      if (!c->ring.corrupt() && W.eng->cq_pending(h) != 0) W.eng->mark_cq_dirty(h);
    }
  }
  transport::AsyncEventRecord ev;
  while (W.eng->poll_async_event(&ev))
    emit_async(W, static_cast<uint32_t>(ev.type), ev.handle);
  if (w == 0) forward_events();
  return n;
}

}  // namespace uroce::daemon
