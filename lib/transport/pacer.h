// SPDX-License-Identifier: BSD-3-Clause
// Pacer: a token bucket per QP on the transport's clock. It says whether a packet of a paced QP
// may leave now and, if not, when it may. The bucket fills at the QP's rate up to a burst of a
// few MTUs; a packet of L bytes leaves when the bucket holds L bytes and takes them.
//
// Integer arithmetic with no rounding: tokens are counted in bit-nanoseconds per second
// (1 byte = 8e9 units), so a rate in bit/s times elapsed nanoseconds adds exactly. An unpaced
// pacer (rate 0) lets everything through. Owned by one lcore (no atomics, no locks); no
// allocation, throw or print.
#pragma once

#include <algorithm>
#include <cstdint>

namespace uroce::transport {

class Pacer {
 public:
  static constexpr uint64_t kUnitsPerByte = 8'000'000'000;  // 8 bits x 1e9 ns/s

  bool paced() const noexcept { return rate_bps_ != 0; }
  uint64_t rate_bps() const noexcept { return rate_bps_; }

  // Sets the rate (0: unpaced) and the burst (bytes, >= the largest packet). Tokens already in
  // the bucket are kept up to the new burst; a pacer that was unpaced starts full.
  void set_rate(uint64_t rate_bps, uint32_t burst_bytes, uint64_t now_ns) noexcept {
    refill(now_ns);
    const bool was_paced = paced();
    rate_bps_ = rate_bps;
    cap_ = uint64_t{burst_bytes} * kUnitsPerByte;
    fill_ns_ = rate_bps != 0 ? cap_ / rate_bps + 1 : 0;
    tokens_ = was_paced ? std::min(tokens_, cap_) : cap_;
    last_ns_ = now_ns;
  }

  // True when a packet of `bytes` may leave at now_ns (then call consume(bytes)).
  bool may_send(uint32_t bytes, uint64_t now_ns) noexcept {
    if (!paced()) return true;
    refill(now_ns);
    return tokens_ >= uint64_t{bytes} * kUnitsPerByte;
  }
  void consume(uint32_t bytes) noexcept {
    if (!paced()) return;
    const uint64_t c = uint64_t{bytes} * kUnitsPerByte;
    tokens_ = tokens_ > c ? tokens_ - c : 0;
  }

  // The earliest time a packet of `bytes` may leave (now_ns if it may now).
  uint64_t next_send_ns(uint32_t bytes, uint64_t now_ns) noexcept {
    if (!paced()) return now_ns;
    refill(now_ns);
    const uint64_t need = uint64_t{bytes} * kUnitsPerByte;
    if (tokens_ >= need) return now_ns;
    return now_ns + (need - tokens_ + rate_bps_ - 1) / rate_bps_;
  }

 private:
  void refill(uint64_t now_ns) noexcept {
    if (now_ns <= last_ns_) return;
    const uint64_t dt = now_ns - last_ns_;
    last_ns_ = now_ns;
    if (!paced()) return;
    // dt < fill_ns_ keeps dt * rate below cap_ + rate: no overflow.
    tokens_ = dt >= fill_ns_ ? cap_ : std::min(cap_, tokens_ + dt * rate_bps_);
  }

  uint64_t rate_bps_ = 0;
  uint64_t cap_ = 0;      // burst in units
  uint64_t tokens_ = 0;   // units
  uint64_t fill_ns_ = 0;  // time to fill an empty bucket (+1)
  uint64_t last_ns_ = 0;
};

}  // namespace uroce::transport
