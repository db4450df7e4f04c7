// SPDX-License-Identifier: BSD-3-Clause
// Same-port loopback: a frame a port would send to its own MAC address (both ends of a QP on
// one uroced, as rxe and ConnectX allow) is handed back to the port's receive path instead of
// leaving the port.
//
// EthPort::tx_commit checks the destination MAC (is_to_self) and pushes such a frame's buffer
// into a LoopbackQueue instead of its TX batch; the next EthPort::rx_burst on the port's own
// queue drains the frames that were queued when it started and dispatches them like received
// frames (the engine's rx then runs outside of its own poll / rx: no re-entry). The queue is a
// fixed ring of pointers: no allocation, no lock (the TX and RX sides of one EthPort object run
// on one lcore). When it is full, EthPort::tx_alloc refuses buffers (back-pressure, as a full
// TX ring) until the next drain, so no looped-back frame is dropped.
// Pure C++ (no DPDK) so that it is unit-tested on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace uroce::port {

// True when `frame` (an Ethernet frame of `len` bytes) is addressed to `mac`: the first six
// bytes are the destination MAC, with or without a VLAN tag after the source.
inline bool is_to_self(const uint8_t *frame, uint32_t len, const uint8_t mac[6]) noexcept {
  return len >= 6 && std::memcmp(frame, mac, 6) == 0;
}

// A fixed-capacity FIFO of frame handles (rte_mbuf pointers in EthPort). N: a power of two.
template <class T, size_t N>
class LoopbackQueue {
  static_assert(N > 0 && (N & (N - 1)) == 0, "capacity must be a power of two");

 public:
  static constexpr size_t kCapacity = N;

  bool empty() const noexcept { return head_ == tail_; }
  bool full() const noexcept { return tail_ - head_ == N; }
  size_t size() const noexcept { return static_cast<size_t>(tail_ - head_); }

  // False (nothing stored) when full.
  bool push(T *p) noexcept {
    if (full()) return false;
    slots_[tail_++ & (N - 1)] = p;
    return true;
  }
  // Moves up to `max` of the oldest entries to out[]; returns how many.
  size_t pop(T **out, size_t max) noexcept {
    size_t n = 0;
    while (n < max && head_ != tail_)
      out[n++] = slots_[head_++ & (N - 1)];
    return n;
  }

 private:
  uint64_t head_ = 0;  // next to pop
  uint64_t tail_ = 0;  // next to push
  T *slots_[N] = {};
};

}  // namespace uroce::port
