// SPDX-License-Identifier: BSD-3-Clause
// RingQueues: the queue backend over the ABI rings of include/uroce/ring.h, shared with the app
// (doc/ipc.md, "One queue, one copy: design"). The app writes abi::SendWqe / abi::RecvWqe slots
// and reads abi::Cqe slots; the engine consumes and produces them in place:
//   RingSendQueue  pull() copies newly published send slots into the engine's per-WQE state
//                  (header and SGEs; nothing is checked on the shared bytes); pop() releases
//                  the slot of the completed WR.
//   RingRecvQueue  take() copies one receive slot and checks the copy; done() releases the
//                  slot of the completed receive (an SRQ's slot is released at take()).
//   RingCompletionQueue  push() writes one abi::Cqe into the app's CQ ring and fires its arm.
// The app's indices are untrusted (shm::RingConsumer: private indices, sticky corrupt state).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "transport/verbs_types.h"
#include "transport/wq.h"
#include "uroce/abi.h"
#include "uroce/ring.h"

namespace uroce::transport {

namespace ring_detail {
template <class T>
T load(const uint8_t *p, size_t off) noexcept {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}
}  // namespace ring_detail

class RingSendQueue {
 public:
  // The SQ ring (slot_size >= abi::send_slot_size(max_sge, max_inline)); false on bad geometry.
  bool attach(void *mem, size_t bytes, uint32_t slot_size, uint32_t slots, uint32_t max_sge,
              uint32_t max_inline) {
    if (mem == nullptr || abi::send_slot_size(max_sge ? max_sge : 1, max_inline) == 0 ||
        slot_size < abi::send_slot_size(max_sge ? max_sge : 1, max_inline))
      return false;
    if (ring_.attach(mem, bytes, slot_size, slots) != shm::RingError::kOk) return false;
    ring_.defer_release();
    data_ = static_cast<uint8_t *>(mem) + sizeof(abi::RingHeader);
    slot_size_ = slot_size;
    mask_ = slots - 1;
    max_sge_ = max_sge ? max_sge : 1;
    max_inline_ = max_inline;
    wqe_.reset(new SendWqe[slots]);
    sge_.reset(new Sge[size_t{slots} * max_sge_]);
    rel_ = ring_.index();
    head_ = tail_ = static_cast<uint32_t>(rel_);
    return true;
  }
  void release() noexcept {
    wqe_.reset();
    sge_.reset();
    data_ = nullptr;
  }
  // RESET: WQEs are discarded without completions: every published slot is taken and freed.
  void reset() noexcept {
    const size_t n = ring_.peek(~size_t{0});
    ring_.consume(n);
    rel_ = ring_.index();
    ring_.release_to(rel_);
    head_ = tail_ = static_cast<uint32_t>(rel_);
    release_notify();
  }

  // The ring's doorbell token (doc/ipc.md, "Doorbells"): the app rang (the token is the
  // engine's until release_notify gives it back when the queue looks empty). True from
  // release_notify: WQEs arrived meanwhile and the token was taken back (keep going).
  void rung() noexcept { owned_ = true; }
  bool release_notify() noexcept {
    if (!owned_) return false;
    owned_ = ring_.release_notify();
    return owned_;
  }
  bool token() const noexcept { return owned_; }

  // Copies up to `budget` newly published WQEs into the engine's state; returns how many. A
  // slot whose header cannot be a WQE (reserved bits, opcode, flags, SGE count, inline length)
  // is copied with `fault` set: the requester completes it in error when it reaches it.
  uint32_t pull(uint32_t budget) noexcept {
    const size_t n = ring_.peek(budget);
    for (size_t i = 0; i < n; ++i)
      copy_in(static_cast<const uint8_t *>(ring_.at(i)), head_ + static_cast<uint32_t>(i));
    if (n) ring_.consume(n);
    head_ += static_cast<uint32_t>(n);
    return static_cast<uint32_t>(n);
  }
  bool corrupt() const noexcept { return ring_.corrupt(); }

  SendWqe &at(uint32_t c) noexcept { return wqe_[c & mask_]; }
  const SendWqe &at(uint32_t c) const noexcept { return wqe_[c & mask_]; }
  Sge *sges(uint32_t c) noexcept { return &sge_[size_t{c & mask_} * max_sge_]; }
  // Inline payload, read in place: at most the private copy's length (<= the slot's tail).
  const uint8_t *inl(uint32_t c) const noexcept {
    return data_ + size_t{c & mask_} * slot_size_ + sizeof(abi::SendWqeHeader);
  }
  uint32_t head() const noexcept { return head_; }
  uint32_t tail() const noexcept { return tail_; }
  // The oldest WR completed: its slot is the app's again.
  void pop() noexcept {
    ++tail_;
    ring_.release_to(++rel_);
  }
  uint32_t max_sge() const noexcept { return max_sge_; }
  uint32_t max_inline() const noexcept { return max_inline_; }
  uint32_t capacity() const noexcept { return mask_ + 1; }

 private:
  void copy_in(const uint8_t *s, uint32_t c) noexcept {
    using H = abi::SendWqeHeader;
    using ring_detail::load;
    SendWqe &w = at(c);
    const auto reserved = load<uint8_t>(s, offsetof(H, reserved));
    const auto opcode = load<uint8_t>(s, offsetof(H, opcode));
    const auto inline_len = load<uint16_t>(s, offsetof(H, inline_len));
    const auto num_sge = load<uint32_t>(s, offsetof(H, num_sge));
    const auto imm = load<uint32_t>(s, offsetof(H, imm_data));
    w.wr_id = load<uint64_t>(s, offsetof(H, wr_id));
    w.flags = load<uint32_t>(s, offsetof(H, send_flags));
    w.imm_be = imm;
    w.inv_rkey = imm;
    w.remote_addr = load<uint64_t>(s, offsetof(H, remote_addr));
    w.rkey = load<uint32_t>(s, offsetof(H, rkey));
    w.ah = load<uint32_t>(s, offsetof(H, ud_ah));
    w.compare_add = load<uint64_t>(s, offsetof(H, compare_add));
    w.swap = load<uint64_t>(s, offsetof(H, swap));
    w.remote_qpn = load<uint32_t>(s, offsetof(H, remote_qpn)) & 0xFFFFFF;
    w.remote_qkey = load<uint32_t>(s, offsetof(H, remote_qkey));
    w.state = WqeState::kPosted;
    w.checked = false;
    w.fault = 0;
    w.first_psn = w.last_psn = w.next_off = 0;
    w.num_sge = 0;
    w.length = 0;
    const bool op_ok = opcode <= static_cast<uint8_t>(WrOpcode::kSendWithInv);
    w.opcode = op_ok ? static_cast<WrOpcode>(opcode) : WrOpcode::kSend;
    if (!op_ok || reserved != 0 || (w.flags & ~uint32_t{0x1f}) != 0) {
      w.fault = static_cast<uint8_t>(WcStatus::kLocQpOpErr);
      return;
    }
    if (w.flags & kSendInline) {
      if (num_sge != 0 || inline_len > max_inline_) {
        w.fault = static_cast<uint8_t>(WcStatus::kLocLenErr);
        return;
      }
      w.length = inline_len;
      return;
    }
    if (inline_len != 0 || num_sge > max_sge_) {
      w.fault = static_cast<uint8_t>(WcStatus::kLocLenErr);
      return;
    }
    Sge *dst = sges(c);
    uint64_t len = 0;
    for (uint32_t i = 0; i < num_sge; ++i) {
      abi::Sge g;
      std::memcpy(&g, s + sizeof(H) + i * sizeof g, sizeof g);
      dst[i] = Sge{g.addr, g.length, g.lkey};
      len += g.length;
    }
    w.num_sge = num_sge;
    if (len > kMaxMsgSize) {
      w.fault = static_cast<uint8_t>(WcStatus::kLocLenErr);
      return;
    }
    w.length = static_cast<uint32_t>(len);
  }

  shm::RingConsumer ring_;
  uint8_t *data_ = nullptr;
  std::unique_ptr<SendWqe[]> wqe_;
  std::unique_ptr<Sge[]> sge_;
  uint64_t rel_ = 0;  // ring index of the oldest slot not released (= tail_)
  uint32_t slot_size_ = 0, mask_ = 0, max_sge_ = 1, max_inline_ = 0;
  uint32_t head_ = 0, tail_ = 0;
  bool owned_ = false;  // the doorbell token is the engine's (a doorbell came, not given back)
};

class RingRecvQueue {
 public:
  // srq: an SRQ's ring (slots are released when a QP takes them, as rxe's get_srq_wqe).
  bool attach(void *mem, size_t bytes, uint32_t slot_size, uint32_t slots, uint32_t max_sge,
              bool srq) {
    const uint32_t need = abi::recv_slot_size(max_sge ? max_sge : 1);
    if (mem == nullptr || need == 0 || slot_size < need) return false;
    if (ring_.attach(mem, bytes, slot_size, slots) != shm::RingError::kOk) return false;
    if (!srq) ring_.defer_release();
    srq_ = srq;
    max_sge_ = max_sge ? max_sge : 1;
    cap_ = slots;
    rel_ = ring_.index();
    return true;
  }
  void release() noexcept { cap_ = 0; }
  void reset() noexcept {
    ring_.consume(ring_.peek(~size_t{0}));
    rel_ = ring_.index();
    ring_.release_to(rel_);
    release_notify();
  }
  // The doorbell token of an RQ: the responder reads the ring when it needs a WQE, so the
  // engine keeps the token (the app stops ringing) except in ERR, where every post must be
  // flushed: there the engine gives it back after each flush (true: WQEs arrived meanwhile
  // and the token was taken back; flush again).
  void rung() noexcept { owned_ = true; }
  bool release_notify() noexcept {
    if (!owned_) return false;
    owned_ = ring_.release_notify();
    return owned_;
  }
  uint32_t count() const noexcept { return static_cast<uint32_t>(ring_.available()); }
  bool empty() const noexcept { return count() == 0; }
  bool corrupt() const noexcept { return ring_.corrupt(); }

  // Takes the next receive WQE into w / sg (at most sg_cap SGEs), checked on the copy.
  RecvTake take(RecvWqe &w, Sge *sg, uint32_t sg_cap) noexcept {
    if (ring_.peek(1) == 0) return RecvTake::kEmpty;
    const auto *s = static_cast<const uint8_t *>(ring_.at(0));
    using H = abi::RecvWqeHeader;
    w.wr_id = ring_detail::load<uint64_t>(s, offsetof(H, wr_id));
    const auto num_sge = ring_detail::load<uint32_t>(s, offsetof(H, num_sge));
    const auto reserved = ring_detail::load<uint32_t>(s, offsetof(H, reserved));
    RecvTake r = RecvTake::kOk;
    uint64_t len = 0;
    if (reserved != 0 || num_sge > max_sge_ || num_sge > sg_cap) {
      r = RecvTake::kBad;
    } else {
      for (uint32_t i = 0; i < num_sge; ++i) {
        abi::Sge g;
        std::memcpy(&g, s + sizeof(H) + i * sizeof g, sizeof g);
        sg[i] = Sge{g.addr, g.length, g.lkey};
        len += g.length;
      }
      if (len > kMaxMsgSize + kGrhSize) r = RecvTake::kBad;
    }
    w.num_sge = r == RecvTake::kOk ? num_sge : 0;
    w.length = r == RecvTake::kOk ? static_cast<uint32_t>(len) : 0;
    ring_.consume(1);
    return r;
  }
  // The receive taken longest ago completed (an RQ's WRs complete in order): free its slot.
  void done() noexcept {
    if (srq_) return;
    ring_.release_to(++rel_);
  }
  uint32_t max_sge() const noexcept { return max_sge_; }
  uint32_t capacity() const noexcept { return cap_; }

 private:
  mutable shm::RingConsumer ring_;  // count() reloads the app's index
  uint64_t rel_ = 0;
  uint32_t max_sge_ = 1, cap_ = 0;
  bool srq_ = false;
  bool owned_ = false;  // see rung()
};

class RingCompletionQueue {
 public:
  // event(ctx): called when a completion fires the app's arm (the daemon writes the CQ's
  // eventfd); may be null.
  bool attach(void *mem, size_t bytes, uint32_t slots, void (*event)(void *) = nullptr,
              void *ctx = nullptr) {
    if (mem == nullptr || ring_.attach(mem, bytes, sizeof(abi::Cqe), slots) != shm::RingError::kOk)
      return false;
    depth_ = slots;
    events_ = 0;
    overflow_ = false;
    event_ = event;
    ctx_ = ctx;
    return true;
  }
  void release() noexcept { depth_ = 0; }
  bool in_use() const noexcept { return depth_ != 0; }

  // Writes one completion into the app's ring; false when it is full (or its index broken).
  bool push(const Wc &wc, bool solicited) noexcept {
    // The app's consumer index is read on every completion (as rxe's queue_full does), so a
    // broken one is found at once (IBV_EVENT_CQ_ERR), not only when the ring looks full.
    if (ring_.free_slots(size_t{depth_} + 1) == 0 || ring_.reserve(1) != 1) {
      overflow_ = true;
      return false;
    }
    // Written field by field into the reserved slot: the one copy of the completion.
    auto *e = static_cast<abi::Cqe *>(ring_.slot(0));
    e->wr_id = wc.wr_id;
    e->status = static_cast<uint32_t>(wc.status);
    e->opcode = static_cast<uint32_t>(wc.opcode);
    e->vendor_err = wc.vendor_err;
    e->byte_len = wc.byte_len;
    e->imm_data = wc.imm_data;
    e->qp_num = wc.qp_num;
    e->src_qp = wc.src_qp;
    e->wc_flags = wc.wc_flags;
    e->pkey_index = wc.pkey_index;
    e->slid = wc.slid;
    e->sl = wc.sl;
    e->dlid_path_bits = wc.dlid_path_bits;
    e->reserved0[0] = e->reserved0[1] = 0;
    e->completion_ts = 0;
    std::memset(e->reserved1, 0, sizeof e->reserved1);
    ring_.commit(1);
    if (ring_.take_arm(solicited || wc.status != WcStatus::kSuccess)) fire();
    return true;
  }
  // Moves up to `budget` CQEs that another thread wrote into `from` (a private ring of
  // abi::Cqe: the completions of a QP on another worker, doc/ipc.md "A CQ has one producer")
  // into the app's ring, while it has room; returns how many. Solicited-only arms fire on
  // errors and on every receive completion (a superset, never a miss).
  uint32_t absorb(shm::RingConsumer &from, uint32_t budget) noexcept {
    uint32_t n = 0;
    bool urgent = false;
    const size_t room = ring_.free_slots(budget);
    const size_t k = from.peek(room < budget ? room : budget);
    if (k == 0) return 0;
    const size_t got = ring_.reserve(k);
    for (; n < got; ++n) {
      auto *e = static_cast<abi::Cqe *>(ring_.slot(n));
      std::memcpy(e, from.at(n), sizeof *e);
      if (e->status != static_cast<uint32_t>(WcStatus::kSuccess) ||
          e->opcode >= static_cast<uint32_t>(WcOpcode::kRecv))
        urgent = true;
    }
    ring_.commit(got);
    from.consume(got);
    if (got && ring_.take_arm(urgent)) fire();
    return n;
  }
  bool corrupt() const noexcept { return ring_.corrupt(); }
  // ibv_resize_cq: copies the completions the app has not consumed, in order, into `mem` (a
  // fresh ring of `slots` abi::Cqe slots no one else uses yet), carries the arm over and makes
  // it this CQ's ring. 0; EINVAL when more completions wait than `slots` (rxe's rule) or `mem`
  // is no such ring; EIO when the app's consumer index is impossible. On error nothing changes.
  int move_to(void *mem, size_t bytes, uint32_t slots) noexcept {
    shm::RingConsumer old;
    if (ring_.corrupt() || old.attach(ring_.header(), abi::ring_bytes(sizeof(abi::Cqe), depth_),
                                      sizeof(abi::Cqe), depth_) != shm::RingError::kOk)
      return EIO;
    const size_t waiting = old.peek(depth_);
    if (old.corrupt() || old.index() + waiting != ring_.index()) return EIO;
    shm::RingProducer next;
    if (next.attach(mem, bytes, sizeof(abi::Cqe), slots) != shm::RingError::kOk) return EINVAL;
    if (waiting > slots || next.reserve(waiting) != waiting) return EINVAL;
    for (size_t i = 0; i < waiting; ++i)
      std::memcpy(next.slot(i), old.at(i), sizeof(abi::Cqe));
    next.commit(waiting);
    std::atomic_ref<uint32_t>(next.header()->notify)
        .store(std::atomic_ref<uint32_t>(ring_.header()->notify).load(std::memory_order_relaxed),
               std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    ring_ = next;
    depth_ = slots;
    return 0;
  }
  // The app polls the ring itself (shm::RingConsumer on the same memory).
  uint32_t poll(Wc *, uint32_t) noexcept { return 0; }
  // What the app's ibv_req_notify_cq writes (shm::RingConsumer::arm), for callers of the engine.
  void arm(bool solicited_only) noexcept {
    std::atomic_ref<uint32_t>(ring_.header()->notify)
        .store(solicited_only ? abi::kNotifyArmedSolicited : abi::kNotifyArmedAll,
               std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  uint32_t take_events() noexcept {
    const uint32_t e = events_;
    events_ = 0;
    return e;
  }
  uint32_t size() const noexcept { return 0; }  // unknown to the producer: the app polls
  uint32_t depth() const noexcept { return depth_; }
  bool overflowed() const noexcept { return overflow_; }
  uint32_t refs = 0;
  bool dirty = false;

 private:
  void fire() noexcept {
    ++events_;
    if (event_) event_(ctx_);
  }
  shm::RingProducer ring_;
  uint32_t depth_ = 0;
  uint32_t events_ = 0;
  bool overflow_ = false;
  void (*event_)(void *) = nullptr;
  void *ctx_ = nullptr;
};

struct RingQueues {
  using Sq = RingSendQueue;
  using Rq = RingRecvQueue;
  using Cq = RingCompletionQueue;
  struct Ring {
    void *mem = nullptr;
    size_t bytes = 0;
    uint32_t slot_size = 0, slots = 0;
  };
  struct QpMem {
    Ring sq, rq;  // rq unused with an SRQ
  };
  // slot_size: sizeof(abi::Cqe); event(ctx) when a completion fires the app's arm.
  struct CqMem : Ring {
    CqMem() = default;
    CqMem(const Ring &r) : Ring(r) {}  // NOLINT: a ring without an event hook
    void (*event)(void *) = nullptr;
    void *ctx = nullptr;
  };
  using SrqMem = Ring;
  static constexpr bool kShared = true;

  static bool init_sq(Sq &q, const QpCap &c, const QpMem &m) {
    return m.sq.slots >= c.max_send_wr && q.attach(m.sq.mem, m.sq.bytes, m.sq.slot_size, m.sq.slots,
                                                   c.max_send_sge, c.max_inline_data);
  }
  static bool init_rq(Rq &q, const QpCap &c, const QpMem &m) {
    return m.rq.slots >= c.max_recv_wr &&
           q.attach(m.rq.mem, m.rq.bytes, m.rq.slot_size, m.rq.slots, c.max_recv_sge, false);
  }
  static bool init_srq(Rq &q, uint32_t max_wr, uint32_t max_sge, const SrqMem &m) {
    return m.slots >= max_wr && q.attach(m.mem, m.bytes, m.slot_size, m.slots, max_sge, true);
  }
  static bool init_cq(Cq &q, uint32_t depth, const CqMem &m) {
    return m.slots >= depth && q.attach(m.mem, m.bytes, m.slots, m.event, m.ctx);
  }
};

}  // namespace uroce::transport
