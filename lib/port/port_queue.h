// SPDX-License-Identifier: BSD-3-Clause
// One RX / TX queue pair of an ethdev port, driven by one worker lcore other than the main one
// (doc/uroced.md, "Threading"). It is the transport::TxPort of that worker's engine (its own TX
// batch on its own queue: no sharing with the main lcore's EthPort) and receives raw bursts;
// what to do with each frame (the engine, another lcore, the main lcore) is the caller's.
// ARP / ND and capture stay with the main lcore's EthPort. Same-port loopback (port/loopback.h)
// as in EthPort: a frame to the port's own MAC goes to a queue that the next rx() returns
// first, instead of leaving the port (a full queue makes tx_alloc refuse: back-pressure).
// Fast path: no allocation, locks, exceptions or printing.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstdint>

#include "port/loopback.h"
#include "transport/port.h"

namespace uroce::port {

struct QueueCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_alloc_fail = 0;
  uint64_t tx_dropped = 0;
  uint64_t tx_too_long = 0;
  uint64_t tx_loopback = 0;       // frames to our own MAC returned by rx()
  uint64_t tx_loopback_full = 0;  // tx_alloc refused: the loopback queue was full
};

class PortQueue {
 public:
  static constexpr uint16_t kBurst = 32;
  static constexpr unsigned kTxRetries = 8;

  PortQueue(uint16_t port_id, uint16_t queue, rte_mempool *pool, const uint8_t mac[6]) noexcept
      : port_id_(port_id), queue_(queue), pool_(pool) {
    for (int i = 0; i < 6; ++i)
      mac_[i] = mac[i];
  }
  ~PortQueue() {
    for (uint16_t i = 0; i < tx_n_; ++i)
      rte_pktmbuf_free(tx_batch_[i]);
    rte_mbuf *m[kBurst];
    for (size_t n; (n = loop_.pop(m, kBurst)) != 0;)
      for (size_t i = 0; i < n; ++i)
        rte_pktmbuf_free(m[i]);
  }
  PortQueue(const PortQueue &) = delete;
  PortQueue &operator=(const PortQueue &) = delete;

  // --- transport::TxPort ---
  transport::TxBuf tx_alloc() noexcept {
    if (loop_.full()) {  // any frame may be for us: wait for rx() to drain the loopback queue
      ++c_.tx_loopback_full;
      return {};
    }
    rte_mbuf *m = rte_pktmbuf_alloc(pool_);
    if (m == nullptr) {
      ++c_.tx_alloc_fail;
      return {};
    }
    return transport::TxBuf{rte_pktmbuf_mtod(m, uint8_t *), rte_pktmbuf_tailroom(m), m};
  }
  void tx_commit(transport::TxBuf b, uint32_t len) noexcept {
    auto *m = static_cast<rte_mbuf *>(b.handle);
    if (len > b.cap || len == 0) {
      ++c_.tx_too_long;
      rte_pktmbuf_free(m);
      return;
    }
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = len;
    if (is_to_self(b.data, len, mac_) && loop_.push(m)) {  // not full: tx_alloc checked
      ++c_.tx_loopback;
      return;
    }
    tx_len_[tx_n_] = len;
    tx_batch_[tx_n_++] = m;
    if (tx_n_ == kBurst) flush();
  }
  void tx_abort(transport::TxBuf b) noexcept {
    if (b.handle != nullptr) rte_pktmbuf_free(static_cast<rte_mbuf *>(b.handle));
  }
  // Sends the batch (retried kTxRetries times; what the queue still refuses is freed, counted).
  void flush() noexcept {
    uint16_t sent = 0;
    for (unsigned attempt = 0; sent < tx_n_ && attempt <= kTxRetries; ++attempt)
      sent += rte_eth_tx_burst(port_id_, queue_, tx_batch_ + sent, tx_n_ - sent);
    for (uint16_t i = 0; i < sent; ++i)
      c_.tx_bytes += tx_len_[i];
    for (uint16_t i = sent; i < tx_n_; ++i) {
      ++c_.tx_dropped;
      rte_pktmbuf_free(tx_batch_[i]);
    }
    c_.tx_packets += sent;
    tx_n_ = 0;
  }

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
    return n;
  }

  uint16_t queue() const noexcept { return queue_; }
  const QueueCounters &counters() const noexcept { return c_; }

 private:
  uint16_t port_id_;
  uint16_t queue_;
  rte_mempool *pool_;
  uint8_t mac_[6];
  LoopbackQueue<rte_mbuf, 1024> loop_;
  uint16_t tx_n_ = 0;
  rte_mbuf *tx_batch_[kBurst];
  uint32_t tx_len_[kBurst];
  QueueCounters c_;
};

static_assert(transport::TxPort<PortQueue>);

}  // namespace uroce::port
