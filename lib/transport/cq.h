// SPDX-License-Identifier: BSD-3-Clause
// Completion queues: a fixed ring of ibv_wc allocated at creation, with the notification arm
// (ibv_req_notify_cq: next completion or next solicited one). An overflowing CQ drops the entry
// and latches the error (IBV_EVENT_CQ_ERR), as a hardware CQ would.
#pragma once

#include <cstdint>
#include <memory>

#include "transport/verbs_types.h"

namespace uroce::transport {

class CompletionQueue {
 public:
  CompletionQueue() = default;
  void init(uint32_t depth) {
    depth_ = depth;
    ring_.reset(new Wc[depth]);
    head_ = tail_ = 0;
    overflow_ = false;
    armed_ = false;
    events_ = 0;
  }
  void release() noexcept {
    ring_.reset();
    depth_ = 0;
  }
  bool in_use() const noexcept { return ring_ != nullptr; }

  // Adds a completion; `solicited` marks a receive completion of a message with the SE bit.
  // Returns false on overflow (the entry is lost).
  bool push(const Wc &wc, bool solicited) noexcept {
    if (head_ - tail_ == depth_) {
      overflow_ = true;
      return false;
    }
    ring_[head_ % depth_] = wc;
    ++head_;
    if (armed_ && (!solicited_only_ || solicited || wc.status != WcStatus::kSuccess)) {
      armed_ = false;
      ++events_;
    }
    return true;
  }
  uint32_t poll(Wc *out, uint32_t n) noexcept {
    uint32_t k = 0;
    while (k < n && tail_ != head_) {
      out[k++] = ring_[tail_ % depth_];
      ++tail_;
    }
    return k;
  }
  void arm(bool solicited_only) noexcept {
    armed_ = true;
    solicited_only_ = solicited_only;
  }
  // Completion events raised since the last call (what the completion channel would deliver).
  uint32_t take_events() noexcept {
    const uint32_t e = events_;
    events_ = 0;
    return e;
  }
  uint32_t size() const noexcept { return head_ - tail_; }
  uint32_t depth() const noexcept { return depth_; }
  bool overflowed() const noexcept { return overflow_; }
  uint32_t refs = 0;   // QPs using this CQ
  bool dirty = false;  // on the engine's dirty list (EngineCore::take_dirty_cqs)

 private:
  std::unique_ptr<Wc[]> ring_;
  uint32_t depth_ = 0;
  uint32_t head_ = 0, tail_ = 0;
  uint32_t events_ = 0;
  bool overflow_ = false;
  bool armed_ = false;
  bool solicited_only_ = false;
};

}  // namespace uroce::transport
