// SPDX-License-Identifier: BSD-3-Clause
// The responder's response queue and ACK coalescing (IBTA 9.7.5.1).
//
// An RC responder must send its responses in PSN order: ACK/NAKs, RDMA READ responses and
// atomic ACKs. Each QP keeps a small FIFO of pending responses, drained by the engine's poll:
//   - kAck entries carry an AETH syndrome (ACK, RNR NAK or NAK) and a PSN. A new plain ACK that
//     follows a plain ACK replaces it (ACKs are cumulative): that is the coalescing. Requests
//     with the AckReq bit clear produce no ACK at all; a burst of AckReq packets received
//     between two polls produces one ACK.
//   - kReadReply / kAtomicAck entries point at a responder resource (qp.h); a READ reply is
//     sent a few packets per poll, and nothing queued behind it overtakes it.
// When the queue is full, a new ACK is dropped (the requester's timer or a later ACK covers it)
// and a new READ/atomic is not accepted (the requester retries it).
#pragma once

#include <cstdint>

#include "transport/aeth.h"

namespace uroce::transport {

struct RespOp {
  enum class Kind : uint8_t { kAck = 0, kReadReply, kAtomicAck };
  Kind kind = Kind::kAck;
  uint8_t syndrome = 0;
  uint8_t res = 0;  // responder resource index for kReadReply / kAtomicAck
  uint32_t psn = 0;
  uint32_t msn = 0;
};

class AckQueue {
 public:
  static constexpr uint32_t kCap = 40;

  bool empty() const noexcept { return head_ == tail_; }
  uint32_t size() const noexcept { return head_ - tail_; }
  RespOp &front() noexcept { return ops_[tail_ % kCap]; }
  // An emptied queue starts again at entry 0: a QP with one response at a time keeps using the
  // entry beside the indices (one cache line, qp.h) instead of walking all kCap entries.
  void pop() noexcept {
    if (++tail_ == head_) head_ = tail_ = 0;
  }
  void clear() noexcept { head_ = tail_ = 0; }

  // Queues an ACK / NAK / RNR NAK. Returns false when the queue was full and it was dropped.
  bool push_ack(uint8_t syndrome, uint32_t psn, uint32_t msn) noexcept {
    if (!empty() && aeth::kind(syndrome) == aeth::Kind::kAck) {
      RespOp &last = ops_[(head_ - 1) % kCap];
      // Coalesce with a queued plain ACK (not with the one being transmitted right now, which
      // is never an ACK: ACKs go out whole).
      if (last.kind == RespOp::Kind::kAck && aeth::kind(last.syndrome) == aeth::Kind::kAck) {
        last.syndrome = syndrome;
        last.psn = psn;
        last.msn = msn;
        ++coalesced_;
        return true;
      }
    }
    if (size() >= kCap) return false;
    ops_[head_ % kCap] = RespOp{RespOp::Kind::kAck, syndrome, 0, psn, msn};
    ++head_;
    return true;
  }
  // Queues a READ reply or an atomic ACK; keeps room for one ACK behind it.
  bool push_resource(RespOp::Kind kind, uint8_t res, uint32_t psn, uint32_t msn) noexcept {
    if (size() + 1 >= kCap) return false;
    ops_[head_ % kCap] = RespOp{kind, 0, res, psn, msn};
    ++head_;
    return true;
  }
  // Is resource `res` already queued (a duplicate READ must not be queued twice)?
  bool has_resource(uint8_t res) const noexcept {
    for (uint32_t i = tail_; i != head_; ++i) {
      const RespOp &o = ops_[i % kCap];
      if (o.kind != RespOp::Kind::kAck && o.res == res) return true;
    }
    return false;
  }
  uint64_t coalesced() const noexcept { return coalesced_; }

 private:
  // Indices first: empty() / size() then share a cache line with the QP fields before the queue.
  uint32_t head_ = 0, tail_ = 0;
  uint64_t coalesced_ = 0;
  RespOp ops_[kCap];
};

}  // namespace uroce::transport
