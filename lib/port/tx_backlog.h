// SPDX-License-Identifier: BSD-3-Clause
// TX back-pressure: the frames a port has committed and its TX ring has not taken yet.
//
// EthPort and PortQueue (one per lcore, no sharing) append every committed frame to a
// TxBacklog and offer it to rte_eth_tx_burst at flush(), oldest first. What the ring refuses
// stays queued, in order, and is offered first at the next flush (the next loop iteration): a
// reliable transport does not lose its own frames in its own port. While the backlog is full
// the port's tx_alloc refuses buffers, which the transport engine treats as back-pressure
// (transport/port.h): it stops generating frames for that poll and keeps the work (unsent
// WQEs, queued ACKs / READ responses) for a later one. Frames are dropped only at teardown.
// A fixed ring of handles and lengths: no allocation, no lock, no exception.
// Pure C++ (no DPDK) so that it is unit-tested with a fake TX ring.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uroce::port {

// What one drain did.
struct TxDrained {
  uint32_t sent = 0;      // frames the ring took (they left the backlog)
  uint64_t bytes = 0;     // their lengths, summed
  bool refused = false;   // the ring refused some: they are still queued
  uint32_t deferred = 0;  // of those, the frames refused for the first time (each counts once)

  // Adds this drain to a port's counters (tx_packets, tx_bytes, tx_deferred).
  template <class Counters>
  void count(Counters &c) const noexcept {
    c.tx_packets += sent;
    c.tx_bytes += bytes;  // the frames now belong to the ring: the backlog kept the lengths
    c.tx_deferred += deferred;
  }
};

// A FIFO of committed frames (rte_mbuf pointers in the ports). N: a power of two.
template <class T, size_t N>
class TxBacklog {
  static_assert(N > 0 && (N & (N - 1)) == 0, "capacity must be a power of two");

 public:
  static constexpr size_t kCapacity = N;
  static constexpr uint16_t kMaxBurst = 32;  // frames per burst call

  bool empty() const noexcept { return head_ == tail_; }
  bool full() const noexcept { return tail_ - head_ == N; }
  size_t size() const noexcept { return static_cast<size_t>(tail_ - head_); }
  // Frames appended since the last drain (the ports drain once a burst's worth is waiting).
  size_t fresh() const noexcept { return fresh_; }

  // Appends a frame of `len` bytes; false (nothing stored) when full.
  bool push(T *p, uint32_t len) noexcept {
    if (full()) return false;
    const size_t i = static_cast<size_t>(tail_++ & (N - 1));
    slots_[i] = p;
    lens_[i] = len;
    ++fresh_;
    return true;
  }

  // The ports' tx_alloc check: true when a frame can be appended, after one flush() (the
  // port's drain into its TX queue) if the backlog was full; false: back-pressure.
  template <class Flush>
  bool make_room(Flush &&flush) noexcept {
    if (!full()) return true;
    flush();
    return !full();
  }

  // The ports' tx_commit: appends the frame (if the backlog is full, after one flush()), then
  // flushes once a burst's worth of fresh frames waits. false: still full, nothing stored (the
  // caller frees the frame and counts it dropped; only a caller holding several buffers
  // from tx_alloc can get there).
  template <class Flush>
  bool commit(T *p, uint32_t len, Flush &&flush) noexcept {
    if (!push(p, len)) {
      flush();
      if (!push(p, len)) return false;
    }
    if (fresh() >= kMaxBurst) flush();
    return true;
  }

  // Offers the queued frames, oldest first, in contiguous slices of at most kMaxBurst to
  // burst(T **pkts, uint16_t n) -> uint16_t, which takes the first k of them (k <= n) and owns
  // them from then on (rte_eth_tx_burst's contract). Stops at the first slice not taken whole:
  // the rest stays queued, in order.
  template <class Burst>
  TxDrained drain(Burst &&burst) noexcept {
    TxDrained d;
    fresh_ = 0;
    while (!empty()) {
      const size_t h = static_cast<size_t>(head_ & (N - 1));
      size_t n = size();
      if (n > N - h) n = N - h;  // up to the end of the array: the slice must be contiguous
      if (n > kMaxBurst) n = kMaxBurst;
      uint16_t k = burst(slots_ + h, static_cast<uint16_t>(n));
      if (k > n) k = static_cast<uint16_t>(n);  // a broken burst function cannot overrun
      for (uint16_t i = 0; i < k; ++i)
        d.bytes += lens_[h + i];
      d.sent += k;
      head_ += k;
      if (k < n) {
        d.refused = true;
        if (deferred_to_ < head_) deferred_to_ = head_;
        d.deferred = static_cast<uint32_t>(tail_ - deferred_to_);
        deferred_to_ = tail_;
        break;
      }
    }
    return d;
  }

  // Teardown: hands every queued frame to f(T *) (which frees it), oldest first; returns how
  // many there were.
  template <class F>
  size_t discard(F &&f) noexcept {
    size_t n = 0;
    for (; !empty(); ++n)
      f(slots_[head_++ & (N - 1)]);
    fresh_ = 0;
    return n;
  }

 private:
  uint64_t head_ = 0;         // oldest frame
  uint64_t tail_ = 0;         // next free slot
  uint64_t deferred_to_ = 0;  // frames before this index were already counted as deferred
  size_t fresh_ = 0;
  T *slots_[N] = {};
  uint32_t lens_[N] = {};
};

}  // namespace uroce::port
