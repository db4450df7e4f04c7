// SPDX-License-Identifier: BSD-3-Clause
// One RX / TX queue pair of an ethdev port, driven by one worker lcore other than the main one
// (doc/uroced.md, "Threading"). It is the transport::TxPort of that worker's engine (its own TX
// batch on its own queue: no sharing with the main lcore's EthPort) and receives raw bursts;
// what to do with each frame (the engine, another lcore, the main lcore) is the caller's.
// ARP / ND stay with the main lcore's EthPort. Capture (set_capture): every frame received from
// the queue and every frame committed is copied, stamped, into a CaptureRing that the main lcore
// drains into the capture file (a full ring drops the copy and counts it, never waits). Same-port
// loopback (port/loopback.h) as in EthPort: a frame to the port's own MAC goes to a queue that the
// next rx() returns first, instead of leaving the port (a full queue makes tx_alloc refuse:
// back-pressure). TX back-pressure as in EthPort (port/tx_backlog.h): frames the TX queue refuses
// stay queued, in order, for the next flush; a full backlog makes tx_alloc refuse. Frames are
// dropped only by drop_pending() / the destructor, when the lcore stops. Fast path: no allocation,
// locks, exceptions or printing.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstdint>

#include "port/eal.h"
#include "port/loopback.h"
#include "port/mbuf_tx.h"
#include "port/tx_backlog.h"
#include "transport/port.h"
#include "util/capture_ring.h"

namespace uroce::port {

struct QueueCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_alloc_fail = 0;
  uint64_t tx_dropped = 0;       // committed but never sent: dropped when the lcore stopped
  uint64_t tx_deferred = 0;      // frames the TX queue refused at least once (kept)
  uint64_t tx_backpressure = 0;  // tx_alloc refused: the TX backlog was full
  uint64_t tx_too_long = 0;
  uint64_t tx_loopback = 0;       // frames to our own MAC returned by rx()
  uint64_t tx_loopback_full = 0;  // tx_alloc refused: the loopback queue was full
};

class PortQueue {
 public:
  static constexpr uint16_t kBurst = 32;
  static constexpr size_t kTxBacklog = 512;

  PortQueue(uint16_t port_id, uint16_t queue, rte_mempool *pool, const uint8_t mac[6]) noexcept
      : port_id_(port_id), queue_(queue), pool_(pool), stash_(pool) {
    for (int i = 0; i < 6; ++i)
      mac_[i] = mac[i];
  }
  // Frees what is still queued without touching the ethdev (it may be closed by now).
  ~PortQueue() {
    drop_pending();
    rte_mbuf *m[kBurst];
    for (size_t n; (n = loop_.pop(m, kBurst)) != 0;)
      for (size_t i = 0; i < n; ++i)
        rte_pktmbuf_free(m[i]);
  }
  PortQueue(const PortQueue &) = delete;
  PortQueue &operator=(const PortQueue &) = delete;

  // --- transport::TxPort ---
  transport::TxBuf tx_alloc() noexcept {
    return alloc_tx_mbuf(tx_, loop_, stash_, c_, [this] { flush(); });
  }
  void tx_commit(transport::TxBuf b, uint32_t len) noexcept {
    rte_mbuf *m = commit_tx_mbuf(b, len, c_);
    if (m == nullptr) return;
    if (capture_ != nullptr) capture_->push(b.data, len, capture_clock_->now_ns());
    if (is_to_self(b.data, len, mac_) && loop_.push(m)) {  // not full: tx_alloc checked
      ++c_.tx_loopback;
      return;
    }
    if (!tx_.commit(m, len, [this] { flush(); })) {  // tx_alloc saw room: see commit()
      ++c_.tx_dropped;
      rte_pktmbuf_free(m);
    }
  }
  void tx_abort(transport::TxBuf b) noexcept {
    if (b.handle != nullptr) rte_pktmbuf_free(static_cast<rte_mbuf *>(b.handle));
  }
  // Offers the TX backlog to the queue, oldest first; what it refuses stays queued for the
  // next flush (each frame counted once in tx_deferred). Returns the number of frames sent.
  uint32_t flush() noexcept {
    if (tx_.empty()) return 0;
    const TxDrained d = tx_.drain([this](rte_mbuf **pkts, uint16_t n) {
      return rte_eth_tx_burst(port_id_, queue_, pkts, n);
    });
    d.count(c_);
    return d.sent;
  }
  // Teardown (the lcore stops): frees the frames still queued, counted in tx_dropped.
  void drop_pending() noexcept {
    c_.tx_dropped += tx_.discard([](rte_mbuf *m) { rte_pktmbuf_free(m); });
  }
  size_t tx_pending() const noexcept { return tx_.size(); }

  // Receives up to kBurst frames into pkts (ownership passes to the caller): looped-back frames
  // first, then the queue's.
  uint16_t rx(rte_mbuf **pkts) noexcept {
    const uint16_t k = static_cast<uint16_t>(loop_.pop(pkts, kBurst));
    const uint16_t n =
        static_cast<uint16_t>(k + rte_eth_rx_burst(port_id_, queue_, pkts + k, kBurst - k));
    for (uint16_t i = 0; i < n; ++i) {
      ++c_.rx_packets;
      c_.rx_bytes += rte_pktmbuf_pkt_len(pkts[i]);
    }
    if (capture_ != nullptr) {  // looped-back frames were captured when committed
      const uint64_t ts = n > k ? capture_clock_->now_ns() : 0;
      for (uint16_t i = k; i < n; ++i)
        capture_->push(rte_pktmbuf_mtod(pkts[i], const uint8_t *), rte_pktmbuf_data_len(pkts[i]),
                       ts);
    }
    return n;
  }

  // Capture (before the lcore starts): copies of the frames into ring (nullptr: off), stamped by
  // clock; both must outlive the queue's use.
  void set_capture(util::CaptureRing *ring, const CaptureClock *clock) noexcept {
    capture_ = clock != nullptr ? ring : nullptr;
    capture_clock_ = clock;
  }
  uint64_t capture_dropped() const noexcept {
    return capture_ != nullptr ? capture_->dropped() : 0;
  }

  uint16_t queue() const noexcept { return queue_; }
  uint16_t port_id() const noexcept { return port_id_; }
  bool capturing() const noexcept { return capture_ != nullptr; }
  const QueueCounters &counters() const noexcept { return c_; }

 private:
  uint16_t port_id_;
  uint16_t queue_;
  rte_mempool *pool_;
  MbufStash stash_;  // TX mbufs, a burst at a time (mbuf_tx.h)
  uint8_t mac_[6];
  LoopbackQueue<rte_mbuf, 1024> loop_;
  TxBacklog<rte_mbuf, kTxBacklog> tx_;
  QueueCounters c_;
  util::CaptureRing *capture_ = nullptr;
  const CaptureClock *capture_clock_ = nullptr;
};

static_assert(transport::TxPort<PortQueue>);

}  // namespace uroce::port
