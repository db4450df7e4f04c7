// SPDX-License-Identifier: BSD-3-Clause
// Test ports for an engine that talks to itself (tests and fuzz targets that run a daemon
// in-process): LoopQueue keeps the frames the engine sends and pump() hands them back to its
// rx(); SteadyClock is the engine's clock on real time, StepClock one that moves only when
// told (a loop that runs the engine inline advances it a step per pass). Not thread-safe: push()
// (from the port's tx_commit) and pump() run on the engine's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>

#include "transport/port.h"

namespace uroce::test {

class LoopQueue {
 public:
  static constexpr uint32_t kFrameCap = 9216;
  static constexpr size_t kFrames = 64;

  transport::TxBuf tx_alloc() noexcept { return transport::TxBuf{buf_.get(), kFrameCap, nullptr}; }
  void tx_abort(transport::TxBuf) noexcept {}

  // Queues a copy of the frame; false (dropped) when it is too long or the queue is full. One
  // slot stays free: pump() hands a slot to the engine, which may send meanwhile.
  bool push(const uint8_t *frame, uint32_t n) noexcept {
    if (n > kFrameCap || count_ + 1 >= kFrames) return false;
    const size_t i = (head_ + count_) % kFrames;
    std::memcpy(q_.get() + i * kFrameCap, frame, n);
    len_[i] = n;
    ++count_;
    return true;
  }

  bool empty() const noexcept { return count_ == 0; }

  // Hands every queued frame (at most kFrames) to eng.rx(); returns how many.
  template <class E>
  uint32_t pump(E &eng) noexcept {
    uint32_t n = 0;
    while (count_ != 0 && n < kFrames) {
      const size_t i = head_;
      head_ = (head_ + 1) % kFrames;
      --count_;
      eng.rx(q_.get() + i * kFrameCap, len_[i]);
      ++n;
    }
    return n;
  }

 private:
  std::unique_ptr<uint8_t[]> buf_{new uint8_t[kFrameCap]};
  std::unique_ptr<uint8_t[]> q_{new uint8_t[kFrames * kFrameCap]};
  uint32_t len_[kFrames] = {};
  size_t head_ = 0, count_ = 0;
};

struct SteadyClock {
  uint64_t now_ns() const noexcept {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
};

struct StepClock {
  uint64_t now = 0;
  uint64_t now_ns() const noexcept { return now; }
  void advance(uint64_t ns) noexcept { now += ns; }
};

}  // namespace uroce::test
