// SPDX-License-Identifier: BSD-3-Clause
// The mbuf side of transport::TxPort shared by EthPort (the main lcore's port) and PortQueue (a
// worker's queue): what their tx_alloc and the start of their tx_commit do alike. Counters: any
// struct with the tx_* fields named below (PortCounters, QueueCounters).
// Fast path: no allocation beyond the mbuf pool, no lock, exception or printing.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "transport/port.h"

namespace uroce::port {

// TX mbufs taken from the pool a burst at a time (one rte_pktmbuf_alloc_bulk per kSize frames
// instead of one rte_pktmbuf_alloc each; mbufs come out reset, as from rte_pktmbuf_alloc).
// When the pool has fewer than kSize left, one at a time: a frame is refused only when the
// pool is empty. release() gives back what is held (port stop, destructor).
class MbufStash {
 public:
  static constexpr unsigned kSize = 32;
  explicit MbufStash(rte_mempool *pool) noexcept : pool_(pool) {}
  ~MbufStash() { release(); }
  MbufStash(const MbufStash &) = delete;
  MbufStash &operator=(const MbufStash &) = delete;
  rte_mbuf *get() noexcept {
    if (n_ == 0) {
      if (rte_pktmbuf_alloc_bulk(pool_, m_, kSize) != 0) return rte_pktmbuf_alloc(pool_);
      n_ = kSize;
    }
    return m_[--n_];
  }
  void release() noexcept {
    if (n_ != 0) rte_pktmbuf_free_bulk(m_, n_);
    n_ = 0;
  }
  unsigned held() const noexcept { return n_; }

 private:
  rte_mempool *pool_;
  rte_mbuf *m_[kSize];
  unsigned n_ = 0;
};

// tx_alloc: room in the TX backlog (after one flush() if it was full; else tx_backpressure),
// room in the loopback queue (any frame may be for our own MAC; else tx_loopback_full), an mbuf
// from the stash or the pool (else tx_alloc_fail). An empty TxBuf is back-pressure for the engine.
template <class Backlog, class Loopback, class Counters, class Flush>
transport::TxBuf alloc_tx_mbuf(Backlog &tx, const Loopback &loop, MbufStash &stash, Counters &c,
                               Flush &&flush) noexcept {
  if (!tx.make_room(flush)) {  // the TX queue refused a backlog's worth
    ++c.tx_backpressure;
    return {};
  }
  if (loop.full()) {  // wait for the RX side to drain the loopback queue
    ++c.tx_loopback_full;
    return {};
  }
  rte_mbuf *m = stash.get();
  if (m == nullptr) {
    ++c.tx_alloc_fail;
    return {};
  }
  return transport::TxBuf{rte_pktmbuf_mtod(m, uint8_t *), rte_pktmbuf_tailroom(m), m};
}

// tx_commit's first step: the mbuf of b with its lengths set to len, or nullptr when len is 0
// or beyond the buffer (the mbuf is freed, tx_too_long counted).
template <class Counters>
rte_mbuf *commit_tx_mbuf(transport::TxBuf b, uint32_t len, Counters &c) noexcept {
  auto *m = static_cast<rte_mbuf *>(b.handle);
  if (len > b.cap || len == 0) {
    ++c.tx_too_long;
    rte_pktmbuf_free(m);
    return nullptr;
  }
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = len;
  return m;
}

}  // namespace uroce::port
