// SPDX-License-Identifier: BSD-3-Clause
// Captured frames on their way from one lcore to the lcore that writes the capture file
// (uroced's daemon.pcap with several workers, doc/uroced.md "Capture").
//
// A single-producer / single-consumer ring of variable-length records in private memory: the
// producer (a worker lcore) copies each frame it receives or sends, with its timestamp, into
// the ring and never waits; the consumer (the main lcore) drains the ring into its PcapWriter.
// A frame that does not fit is not stored and is counted (dropped()): the capture loses it, the
// data path does not slow down. Copying (rather than holding the mbuf) keeps the capture from
// tying up the mbuf pool while the writer is behind.
//
// Layout: a power-of-two byte array; each record is a 16-byte header (timestamp, length) and the
// frame, padded to 16 bytes; a record never wraps around the end (a wrap marker sends the
// consumer back to the start). Indices are free-running 64-bit byte counters.
// Ordering (each acquire names its release):
//  (P) push: record bytes, then head_.store(release);
//  (C) drain: head_.load(acquire) pairs with (P), then read the records, then
//      tail_.store(release);
//  (P') push: tail_.load(acquire) pairs with (C)'s release, so the consumer's reads of a record
//      happen-before the producer overwrites it.
// push / drain: no allocation, lock, exception or output (the constructor allocates).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>

namespace uroce::util {

class CaptureRing {
 public:
  static constexpr uint32_t kMaxFrame = 65535;  // longer frames are cut (an mbuf segment's max)
  static constexpr size_t kMinBytes = 256 * 1024;

  // bytes: a power of two, at least kMinBytes (room for several of the largest records).
  explicit CaptureRing(size_t bytes) : cap_(bytes), mask_(bytes - 1) {
    if (bytes < kMinBytes || (bytes & (bytes - 1)) != 0)
      throw std::invalid_argument("CaptureRing: size must be a power of two >= 256 KiB");
    buf_.reset(static_cast<uint8_t *>(::operator new (bytes, std::align_val_t{64})));
  }
  CaptureRing(const CaptureRing &) = delete;
  CaptureRing &operator=(const CaptureRing &) = delete;

  // Producer thread only. Copies the frame (cut at kMaxFrame) stamped ts_ns; false when the
  // ring has no room (counted in dropped()).
  bool push(const uint8_t *frame, uint32_t len, uint64_t ts_ns) noexcept {
    const uint32_t incl = len < kMaxFrame ? len : kMaxFrame;
    const uint64_t need = record_bytes(incl);
    uint64_t at = prod_.head;
    const uint64_t off = at & mask_;
    const uint64_t skip = cap_ - off < need ? cap_ - off : 0;  // no room before the end
    if (at + skip + need - prod_.tail_cache > cap_) {
      prod_.tail_cache = tail_.load(std::memory_order_acquire);  // (P')
      if (at + skip + need - prod_.tail_cache > cap_) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return false;
      }
    }
    if (skip != 0) {  // a wrap marker (there are always >= 16 bytes left: records are aligned)
      const Header w{0, kWrap};
      std::memcpy(buf_.get() + off, &w, sizeof w);
      at += skip;
    }
    uint8_t *p = buf_.get() + (at & mask_);
    const Header h{ts_ns, incl};
    std::memcpy(p, &h, sizeof h);
    std::memcpy(p + sizeof h, frame, incl);
    prod_.head = at + need;
    head_.store(prod_.head, std::memory_order_release);  // (P)
    return true;
  }

  // Consumer thread only. Hands every record published so far to
  // f(const uint8_t *frame, uint32_t len, uint64_t ts_ns), oldest first; returns how many.
  template <class F>
  size_t drain(F &&f) noexcept {
    const uint64_t head = head_.load(std::memory_order_acquire);  // (C)
    uint64_t at = cons_tail_;
    size_t n = 0;
    while (at != head) {
      const uint64_t off = at & mask_;
      Header h;
      std::memcpy(&h, buf_.get() + off, sizeof h);
      if (h.len == kWrap) {
        at += cap_ - off;
        continue;
      }
      f(static_cast<const uint8_t *>(buf_.get() + off + sizeof h), h.len, h.ts_ns);
      at += record_bytes(h.len);
      ++n;
    }
    if (at != cons_tail_) {
      cons_tail_ = at;
      tail_.store(at, std::memory_order_release);  // (C)
    }
    return n;
  }

  // Frames push() refused (any thread; exact once the producer has stopped).
  uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  size_t bytes() const noexcept { return cap_; }

 private:
  struct Header {
    uint64_t ts_ns;
    uint64_t len;  // kWrap: the rest of the array is unused, the next record is at offset 0
  };
  static_assert(sizeof(Header) == 16);
  static constexpr uint64_t kWrap = ~uint64_t{0};
  static constexpr uint64_t record_bytes(uint32_t incl) noexcept {
    return (sizeof(Header) + incl + 15) & ~uint64_t{15};
  }
  struct Free {
    void operator()(uint8_t *p) const noexcept { ::operator delete (p, std::align_val_t{64}); }
  };

  const uint64_t cap_;
  const uint64_t mask_;
  std::unique_ptr<uint8_t, Free> buf_;
  struct alignas(64) Producer {
    uint64_t head = 0;        // next free byte
    uint64_t tail_cache = 0;  // the consumer's tail as last read
  } prod_;
  alignas(64) std::atomic<uint64_t> head_{0};     // published by the producer
  alignas(64) std::atomic<uint64_t> dropped_{0};  // written by the producer only
  alignas(64) std::atomic<uint64_t> tail_{0};     // published by the consumer
  uint64_t cons_tail_ = 0;                        // the consumer's own copy
};

}  // namespace uroce::util
