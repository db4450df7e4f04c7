// SPDX-License-Identifier: BSD-3-Clause
// One DPDK ethdev port as uroce uses it.
//
// Setup (constructor, not on the fast path, throws PortError): configure with one RX and one TX
// queue per worker, MTU, descriptor counts, start, promiscuous off, all-multicast on (IPv6 ND
// uses solicited-node groups), MAC, GID table, ARP and ND modules.
//
// Fast path (noexcept; no allocation, locks, exceptions or printing):
//   - transport::TxPort: tx_alloc() hands out an mbuf's data room, tx_commit() sets the lengths
//     and appends it to the TX backlog (port/tx_backlog.h), which is offered to the TX queue
//     once a burst's worth is waiting and at every flush(); tx_abort() frees. Frames the TX
//     queue refuses stay in the backlog, in order, and go first at the next flush; while the
//     backlog is full, tx_alloc refuses buffers (back-pressure on the engine). Frames are
//     dropped only when the port stops.
//   - rx_burst(queue, handler): receives a burst and dispatches every frame: ARP -> Arp,
//     IPv6/ICMPv6 -> Nd (replies go out through the TX batch), UDP 4791 -> handler(frame, len)
//     (the transport engine; it returns false to have the frame counted as refused), anything
//     else dropped and counted by reason.
//   - timers(now): ARP/ND retransmissions and expiry.
//   - Same-port loopback (port/loopback.h): a committed frame addressed to the port's own MAC
//     does not leave the port; the next rx_burst on the TX queue's number receives it (counted
//     in tx_loopback and, as received, in rx_packets / rx_bytes). resolve_ipv4/6 of one of the
//     port's own addresses answers the port's MAC at once (Arp/Nd::resolve).
// Optional capture: every frame received and every frame committed is written to a pcap file
// (a buffered stdio write per frame: acceptable for debugging, not for benchmarks).
// One EthPort object is driven by one lcore: its TX queue and batch are not shared.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>

#include "config/config.h"
#include "port/arp.h"
#include "port/classify.h"
#include "port/eal.h"
#include "port/gid_table.h"
#include "port/loopback.h"
#include "port/mbuf_tx.h"
#include "port/nd.h"
#include "port/tx_backlog.h"
#include "transport/port.h"
#include "util/pcap_writer.h"

namespace uroce::port {

struct PortCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;  // handed to the NIC by rte_eth_tx_burst
  uint64_t tx_bytes = 0;
  uint64_t tx_alloc_fail = 0;        // tx_alloc found the pool empty (back-pressure to the caller)
  uint64_t tx_dropped = 0;           // committed but never sent: freed when the port stopped
  uint64_t tx_deferred = 0;          // frames the TX queue refused at least once (kept)
  uint64_t tx_backpressure = 0;      // tx_alloc refused: the TX backlog was full
  uint64_t tx_too_long = 0;          // tx_commit with len > cap (frame freed)
  uint64_t tx_loopback = 0;          // frames to our own MAC handed back to the RX path
  uint64_t tx_loopback_full = 0;     // tx_alloc refused: the loopback queue was full
  uint64_t tx_loopback_dropped = 0;  // tx_commit to our MAC found the queue full (freed)
  uint64_t rx_arp = 0;
  uint64_t rx_nd = 0;
  uint64_t rx_roce = 0;  // handed to the engine and accepted
  uint64_t rx_drops[static_cast<size_t>(RxDrop::kCount)] = {};
};

// What an mbuf-taking RoCE handler did with a frame: kAccepted / kRefused (the port frees the
// mbuf and counts rx_roce / kEngineRefused), kTaken (the handler now owns the mbuf, e.g. it was
// handed to the lcore owning the destination QP; counted in rx_roce).
enum class RxVerdict : uint8_t { kAccepted, kRefused, kTaken };

// Handler type for rx_burst when no transport engine is attached: every RoCE frame is dropped
// and counted as RxDrop::kNoEngine.
struct NoEngine {};

class EthPort {
 public:
  static constexpr uint16_t kBurst = 32;
  static constexpr size_t kTxBacklog = 512;       // committed frames the TX queue has not taken
  static constexpr unsigned kStopDrainTries = 8;  // flushes tried by stop() before dropping
  static constexpr size_t kLoopbackDepth = 1024;  // frames to our own MAC awaiting rx_burst

  // pool must outlive the port. nb_queues: RX and TX queues (one per worker).
  EthPort(const config::PortConfig &pc, const config::DaemonConfig &dc, rte_mempool *pool,
          uint16_t nb_queues, const NeighParams &neigh = {});
  ~EthPort();
  EthPort(const EthPort &) = delete;
  EthPort &operator=(const EthPort &) = delete;

  // --- transport::TxPort ---
  transport::TxBuf tx_alloc() noexcept;
  void tx_commit(transport::TxBuf b, uint32_t len) noexcept;
  void tx_abort(transport::TxBuf b) noexcept;
  // TX mbufs taken from the pool and not handed out yet (mbuf_tx.h MbufStash; tests count
  // them with the pool's free ones).
  unsigned tx_mbufs_held() const noexcept { return stash_.held(); }
  // Offers the TX backlog to the TX queue (rte_eth_tx_burst), oldest first; what it refuses
  // stays queued for the next flush (each frame counted once in tx_deferred). Returns the
  // number of frames the queue took.
  uint32_t flush() noexcept;
  size_t tx_pending() const noexcept { return tx_.size(); }  // frames in the TX backlog

  // Receives up to kBurst frames from `queue` and dispatches them; on the port's TX queue number
  // it first dispatches the frames looped back (to our own MAC) that were queued before the
  // call. Returns the number of frames dispatched.
  // Handler: bool(const uint8_t *frame, uint32_t len) noexcept, or
  // RxVerdict(rte_mbuf *m, const uint8_t *frame, uint32_t len) noexcept, or NoEngine.
  template <class Handler>
  uint16_t rx_burst(uint16_t queue, Handler &&h, uint64_t now_ns) noexcept;
  // Dispatches one frame another lcore received and passed to this port's lcore (ownership
  // of m passes to the port), exactly as rx_burst dispatches a received one.
  template <class Handler>
  void rx_handed(rte_mbuf *m, Handler &&h, uint64_t now_ns) noexcept {
    if (rx_one(m, h, now_ns)) rte_pktmbuf_free(m);
  }

  // ARP/ND timers (retransmissions, expiry); sends what is due. Call every millisecond or so.
  void timers(uint64_t now_ns) noexcept;
  // Gratuitous ARP for every IPv4 address and unsolicited NA for every IPv6 address (the
  // link-local included). Returns the number of frames queued; call flush() after.
  unsigned announce() noexcept;

  // Sends an ARP request / NS for `ip` if needed (see Arp::resolve / Nd::resolve).
  Resolve resolve_ipv4(const uint8_t ip[4], uint64_t now_ns, uint8_t mac_out[6]) noexcept;
  Resolve resolve_ipv6(const uint8_t ip[16], uint64_t now_ns, uint8_t mac_out[6]) noexcept;

  // Capture every frame received and committed to w (nullptr: off), stamped by clock (nullptr:
  // CLOCK_REALTIME per frame).
  void set_capture(util::PcapWriter *w, const CaptureClock *clock = nullptr) noexcept {
    capture_ = w;
    capture_clock_ = clock;
  }

  // Not fast path.
  const std::string &name() const noexcept { return name_; }
  uint16_t port_id() const noexcept { return port_id_; }
  const uint8_t *mac() const noexcept { return mac_; }
  const GidTable &gids() const noexcept { return gids_; }
  const Arp &arp() const noexcept { return *arp_; }
  const Nd &nd() const noexcept { return *nd_; }
  const PortCounters &counters() const noexcept { return c_; }
  std::string link_status() const;            // "up 10000 Mb/s full-duplex" / "down"
  uint32_t link_speed_mbps() const noexcept;  // 0 when the PMD reports none (or link down)
  // The neighbour side for uroce-stat: f(name, value) for the ARP / ND resolution counters
  // (arp.tx_requests arp.rx_replies arp.reply_ignored.REASON nd.tx_ns nd.rx_na
  // nd.na_ignored.REASON neigh_failures neigh_failures.no_answer neigh_failures.answer_ignored,
  // drop.arp_* / drop.nd_* when non-zero) and for every neighbour entry: "neigh.IP" (IPv4
  // dotted, IPv6 RFC 5952) with the MAC in bits 0-47 (first byte highest; zero while
  // incomplete or failed) and the NeighState in bits 48-55.
  void neighbour_stats(const std::function<void(const std::string &, uint64_t)> &f) const;
  bool promiscuous() const noexcept;
  bool allmulticast() const noexcept;
  uint16_t mtu() const noexcept { return mtu_; }
  std::string setup_notes() const { return notes_; }  // PMD limitations met during setup
  void stop() noexcept;  // stops and closes the ethdev (idempotent; the destructor calls it)

 private:
  void setup(const config::PortConfig &pc, const config::DaemonConfig &dc, uint16_t nb_queues,
             const NeighParams &neigh);
  void note(const std::string &text);
  void capture(const uint8_t *frame, uint32_t len) noexcept;
  void send_copy(const uint8_t *frame, size_t len) noexcept;  // slow path: ARP/ND replies
  void dispatch_local(FrameClass cls, const uint8_t *frame, uint32_t len, uint64_t now) noexcept;
  // Dispatches m; true: the caller frees it (rx_burst frees a burst's frames in one bulk call),
  // false: the handler took it.
  template <class Handler>
  bool rx_one(rte_mbuf *m, Handler &h, uint64_t now_ns) noexcept;

  std::string name_;
  uint16_t port_id_ = 0;
  uint16_t tx_queue_ = 0;
  uint16_t mtu_ = 0;
  bool started_ = false;
  bool closed_ = false;
  rte_mempool *pool_ = nullptr;
  MbufStash stash_;  // TX mbufs, a burst at a time (mbuf_tx.h)
  uint8_t mac_[6] = {};
  GidTable gids_;
  std::optional<Arp> arp_;
  std::optional<Nd> nd_;
  util::PcapWriter *capture_ = nullptr;
  const CaptureClock *capture_clock_ = nullptr;
  std::string notes_;
  TxBacklog<rte_mbuf, kTxBacklog> tx_;
  LoopbackQueue<rte_mbuf, kLoopbackDepth> loop_;
  PortCounters c_;
};

static_assert(transport::TxPort<EthPort>);

uint64_t realtime_ns() noexcept;  // for capture timestamps

template <class Handler>
bool EthPort::rx_one(rte_mbuf *m, Handler &h, uint64_t now_ns) noexcept {
  const uint8_t *frame = rte_pktmbuf_mtod(m, const uint8_t *);
  const uint32_t len = rte_pktmbuf_data_len(m);
  ++c_.rx_packets;
  c_.rx_bytes += rte_pktmbuf_pkt_len(m);
  if (m->nb_segs != 1) {
    ++c_.rx_drops[static_cast<size_t>(RxDrop::kMultiSegment)];
    return true;
  }
  const Classified k = classify(frame, len, mac_);
  switch (k.cls) {
    case FrameClass::kRoce:
      if constexpr (std::is_same_v<std::decay_t<Handler>, NoEngine>) {
        ++c_.rx_drops[static_cast<size_t>(RxDrop::kNoEngine)];
      } else if constexpr (std::is_invocable_r_v<RxVerdict, Handler &, rte_mbuf *, const uint8_t *,
                                                 uint32_t>) {
        const RxVerdict v = h(m, frame, len);
        if (v == RxVerdict::kRefused) {
          ++c_.rx_drops[static_cast<size_t>(RxDrop::kEngineRefused)];
        } else {
          ++c_.rx_roce;
          if (v == RxVerdict::kTaken) return false;
        }
      } else {
        if (h(frame, len)) {
          ++c_.rx_roce;
        } else {
          ++c_.rx_drops[static_cast<size_t>(RxDrop::kEngineRefused)];
        }
      }
      break;
    case FrameClass::kArp:
    case FrameClass::kNd:
      dispatch_local(k.cls, frame, len, now_ns);
      break;
    case FrameClass::kDrop:
      ++c_.rx_drops[static_cast<size_t>(k.drop)];
      break;
  }
  return true;
}

template <class Handler>
uint16_t EthPort::rx_burst(uint16_t queue, Handler &&h, uint64_t now_ns) noexcept {
  rte_mbuf *pkts[kBurst];
  rte_mbuf *done[kBurst];  // handled frames, freed with one rte_pktmbuf_free_bulk per burst
  uint16_t total = 0;
  if (queue == tx_queue_ && !loop_.empty()) {
    // Only the frames queued before this call (what the handler sends meanwhile waits for the
    // next call); they were captured when committed.
    for (size_t left = loop_.size(); left != 0;) {
      const size_t n = loop_.pop(pkts, left < kBurst ? left : kBurst);
      left -= n;
      unsigned nd = 0;
      for (size_t i = 0; i < n; ++i) {
        if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
        if (rx_one(pkts[i], h, now_ns)) done[nd++] = pkts[i];
      }
      if (nd != 0) rte_pktmbuf_free_bulk(done, nd);
      total = static_cast<uint16_t>(total + n);
    }
  }
  const uint16_t n = rte_eth_rx_burst(port_id_, queue, pkts, kBurst);
  unsigned nd = 0;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf *m = pkts[i];
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
    if (capture_ != nullptr) capture(rte_pktmbuf_mtod(m, const uint8_t *), rte_pktmbuf_data_len(m));
    if (rx_one(m, h, now_ns)) done[nd++] = m;
  }
  if (nd != 0) rte_pktmbuf_free_bulk(done, nd);
  return static_cast<uint16_t>(total + n);
}

}  // namespace uroce::port
