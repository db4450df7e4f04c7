// SPDX-License-Identifier: BSD-3-Clause
// Work queues: the send queue of a QP and the receive queue of a QP or an SRQ. Fixed rings
// allocated at creation (WQE headers, their SGEs, and for the SQ the inline data), indexed by
// free-running 32-bit counters.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

#include "transport/verbs_types.h"

namespace uroce::transport {

constexpr uint32_t round_pow2(uint32_t v) noexcept {
  uint32_t p = 1;
  while (p < v)
    p <<= 1;
  return p;
}

// ---------------------------------------------------------------------------------------------
// Receive side

// What taking a receive WQE gave: one (kOk), none, or one that is malformed (shared rings).
enum class RecvTake : uint8_t { kOk = 0, kEmpty, kBad };

struct RecvWqe {
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
  uint32_t length = 0;  // sum of the SGE lengths
};

class RecvQueue {
 public:
  void init(uint32_t depth, uint32_t max_sge) {
    cap_ = depth;
    max_sge_ = max_sge ? max_sge : 1;
    size_ = round_pow2(depth ? depth : 1);
    wqe_.reset(new RecvWqe[size_]);
    sge_.reset(new Sge[size_t{size_} * max_sge_]);
    head_ = tail_ = 0;
  }
  void release() noexcept {
    wqe_.reset();
    sge_.reset();
    cap_ = 0;
  }
  // 0, ENOMEM (full) or EINVAL (too many SGEs / length overflow).
  int post(const RecvWr &wr) noexcept {
    if (wr.num_sge > max_sge_) return EINVAL;
    if (head_ - tail_ >= cap_) return ENOMEM;
    const uint32_t i = head_ & (size_ - 1);
    uint64_t len = 0;
    for (uint32_t k = 0; k < wr.num_sge; ++k)
      len += wr.sg_list[k].length;
    if (len > kMaxMsgSize + kGrhSize) return EINVAL;
    wqe_[i] = RecvWqe{wr.wr_id, wr.num_sge, static_cast<uint32_t>(len)};
    if (wr.num_sge) std::memcpy(&sge_[size_t{i} * max_sge_], wr.sg_list, wr.num_sge * sizeof(Sge));
    ++head_;
    return 0;
  }
  bool empty() const noexcept { return head_ == tail_; }
  uint32_t count() const noexcept { return head_ - tail_; }
  const RecvWqe &front() const noexcept { return wqe_[tail_ & (size_ - 1)]; }
  // The next WQE into w / sg (at most sg_cap SGEs: the QP's receive SGE capacity).
  RecvTake take(RecvWqe &w, Sge *sg, uint32_t sg_cap) noexcept {
    if (empty()) return RecvTake::kEmpty;
    w = front();
    if (w.num_sge > sg_cap) w.num_sge = sg_cap;  // cannot be: post() checked max_sge
    if (w.num_sge) std::memcpy(sg, front_sges(), w.num_sge * sizeof(Sge));
    pop();
    return RecvTake::kOk;
  }
  void done() noexcept {}  // slots are freed at take
  bool corrupt() const noexcept { return false; }
  // The doorbell token (shared rings only, see RingRecvQueue): nothing here.
  void rung() noexcept {}
  bool release_notify() noexcept { return false; }
  void reset() noexcept { head_ = tail_ = 0; }
  const Sge *front_sges() const noexcept { return &sge_[size_t{tail_ & (size_ - 1)} * max_sge_]; }
  void pop() noexcept { ++tail_; }
  uint32_t max_sge() const noexcept { return max_sge_; }
  uint32_t capacity() const noexcept { return cap_; }

 private:
  std::unique_ptr<RecvWqe[]> wqe_;
  std::unique_ptr<Sge[]> sge_;
  uint32_t cap_ = 0, size_ = 1, max_sge_ = 1;
  uint32_t head_ = 0, tail_ = 0;
};

// A shared receive queue (ibv_srq): a RecvQueue with the limit event (IBTA 10.2.9.4: armed by
// modify_srq(srq_limit); raised once when the number of WQEs drops below the limit).
template <class Rq>
struct SharedRecvQueueT {
  Rq rq;
  uint32_t pd = 0;
  uint32_t limit = 0;  // 0: disarmed
  uint32_t refs = 0;   // QPs attached
  bool in_use = false;
  bool broken = false;  // its shared ring's index is corrupt (IBV_EVENT_SRQ_ERR sent once)
};

// ---------------------------------------------------------------------------------------------
// Send side

enum class WqeState : uint8_t {
  kPosted = 0,  // not (or no longer, after a rewind) being transmitted
  kSending,     // some packets sent, more to go
  kSent,        // every packet sent, waiting for its acknowledgement / response
  kDone,        // completed
};

struct SendWqe {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t flags = 0;
  uint32_t num_sge = 0;
  uint32_t length = 0;  // message length in bytes
  uint32_t imm_be = 0;
  uint32_t inv_rkey = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint32_t ah = 0;
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  // progress
  WqeState state = WqeState::kPosted;
  bool checked = false;  // local keys verified
  uint8_t fault = 0;     // a WcStatus: the copied WQE is malformed (shared rings only)
  uint32_t first_psn = 0;
  uint32_t last_psn = 0;
  uint32_t next_off = 0;  // byte offset of the next packet to send
};

class SendQueue {
 public:
  void init(uint32_t depth, uint32_t max_sge, uint32_t max_inline) {
    cap_ = depth;
    max_sge_ = max_sge ? max_sge : 1;
    max_inline_ = max_inline;
    size_ = round_pow2(depth ? depth : 1);
    wqe_.reset(new SendWqe[size_]);
    sge_.reset(new Sge[size_t{size_} * max_sge_]);
    if (max_inline_) inl_.reset(new uint8_t[size_t{size_} * max_inline_]);
    head_ = tail_ = 0;
  }
  void release() noexcept {
    wqe_.reset();
    sge_.reset();
    inl_.reset();
    cap_ = 0;
  }
  bool full() const noexcept { return head_ - tail_ >= cap_; }
  void reset() noexcept { head_ = tail_ = 0; }
  uint32_t pull(uint32_t) noexcept { return 0; }  // post_send copied every WQE already
  bool corrupt() const noexcept { return false; }
  // The doorbell token (shared rings only, see RingSendQueue): nothing here.
  void rung() noexcept {}
  bool release_notify() noexcept { return false; }
  SendWqe &at(uint32_t c) noexcept { return wqe_[c & (size_ - 1)]; }
  Sge *sges(uint32_t c) noexcept { return &sge_[size_t{c & (size_ - 1)} * max_sge_]; }
  uint8_t *inl(uint32_t c) noexcept { return &inl_[size_t{c & (size_ - 1)} * max_inline_]; }
  uint32_t head() const noexcept { return head_; }
  uint32_t tail() const noexcept { return tail_; }
  void push() noexcept { ++head_; }
  void pop() noexcept { ++tail_; }
  uint32_t max_sge() const noexcept { return max_sge_; }
  uint32_t max_inline() const noexcept { return max_inline_; }
  uint32_t capacity() const noexcept { return cap_; }
  size_t bytes() const noexcept {
    return size_t{size_} * (sizeof(SendWqe) + max_sge_ * sizeof(Sge) + max_inline_);
  }

 private:
  std::unique_ptr<SendWqe[]> wqe_;
  std::unique_ptr<Sge[]> sge_;
  std::unique_ptr<uint8_t[]> inl_;
  uint32_t cap_ = 0, size_ = 1, max_sge_ = 1, max_inline_ = 0;
  uint32_t head_ = 0, tail_ = 0;
};

}  // namespace uroce::transport
