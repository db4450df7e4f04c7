// SPDX-License-Identifier: BSD-3-Clause
#include "port/eth_port.h"

#include <rte_errno.h>

#include <cstring>
#include <ctime>
#include <vector>

namespace uroce::port {

namespace {

[[noreturn]] void fail(const std::string &port, const std::string &what, int err) {
  throw PortError("port '" + port + "': " + what + ": " + rte_strerror(err < 0 ? -err : err));
}

}  // namespace

uint64_t realtime_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

EthPort::EthPort(const config::PortConfig &pc, const config::DaemonConfig &dc, rte_mempool *pool,
                 uint16_t nb_queues, const NeighParams &neigh)
    : name_(pc.name), pool_(pool), stash_(pool) {
  port_id_ = port_id_of(pc);
  try {
    setup(pc, dc, nb_queues, neigh);
  } catch (...) {
    stop();  // a half-configured ethdev is stopped and closed before the error goes up
    throw;
  }
}

void EthPort::setup(const config::PortConfig &pc, const config::DaemonConfig &dc,
                    uint16_t nb_queues, const NeighParams &neigh) {
  rte_eth_dev_info info{};
  int r = rte_eth_dev_info_get(port_id_, &info);
  if (r != 0) fail(name_, "rte_eth_dev_info_get", r);
  if (nb_queues > info.max_rx_queues || nb_queues > info.max_tx_queues)
    throw PortError("port '" + name_ + "': " + std::to_string(nb_queues) +
                    " queues wanted (one per worker), the device has at most " +
                    std::to_string(info.max_rx_queues) + " RX / " +
                    std::to_string(info.max_tx_queues) + " TX queues");
  if (pc.mtu > info.max_mtu || pc.mtu < info.min_mtu)
    throw PortError("port '" + name_ + "': the PMD (" + std::string(info.driver_name) +
                    ") refuses MTU " + std::to_string(pc.mtu) + ": its range is " +
                    std::to_string(info.min_mtu) + " .. " + std::to_string(info.max_mtu) +
                    " (set [port " + name_ + "] mtu accordingly)");
  // The ethdev layer's own check (eth_dev_get_overhead_len): MTU + L2 overhead must fit the
  // largest frame the PMD receives.
  const uint32_t overhead = (info.max_mtu != UINT16_MAX && info.max_rx_pktlen > info.max_mtu)
                                ? info.max_rx_pktlen - info.max_mtu
                                : RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  bool ethdev_mtu = true;
  if (pc.mtu + overhead > info.max_rx_pktlen) {
    // net_af_packet (22.11) reports max_rx_pktlen 1518 whatever its framesz, yet carries frames
    // up to framesz less its tpacket header: the MTU is then the kernel interface's business.
    const uint32_t framesz = af_packet_framesz(pc);
    if (framesz != 0 && pc.mtu + 14 + 4 + kAfPacketFrameOverhead <= framesz) {
      ethdev_mtu = false;
      note("net_af_packet: ethdev MTU left at its default (the PMD reports max_rx_pktlen " +
           std::to_string(info.max_rx_pktlen) + "); frames up to " +
           std::to_string(framesz - kAfPacketFrameOverhead) +
           " bytes pass, the interface MTU (ip link) must be at least " + std::to_string(pc.mtu));
    } else {
      throw PortError(
          "port '" + name_ + "': the PMD (" + std::string(info.driver_name) + ") refuses MTU " +
          std::to_string(pc.mtu) + ": it receives frames of at most " +
          std::to_string(info.max_rx_pktlen) + " bytes, the MTU needs " +
          std::to_string(pc.mtu + overhead) +
          (framesz != 0 ? " (net_af_packet: raise framesz and blocksz in the device string to at "
                          "least MTU + " +
                              std::to_string(14 + 4 + kAfPacketFrameOverhead) + ")"
                        : ""));
    }
  }
  const uint32_t frame = pc.mtu + 14 + 4;
  const uint32_t room = rte_pktmbuf_data_room_size(pool_) - RTE_PKTMBUF_HEADROOM;
  if (frame > room)
    throw PortError("port '" + name_ + "': MTU " + std::to_string(pc.mtu) + " needs frames of " +
                    std::to_string(frame) + " bytes, the mbufs hold " + std::to_string(room));

  rte_eth_conf conf{};
  if (ethdev_mtu) conf.rxmode.mtu = pc.mtu;
  // RX interrupts where the PMD has them (an idle lcore sleeps on them: port/rx_intr.h);
  // configured again without them if the PMD refuses.
  conf.intr_conf.rxq = 1;
  r = rte_eth_dev_configure(port_id_, nb_queues, nb_queues, &conf);
  if (r != 0) {
    conf.intr_conf.rxq = 0;
    r = rte_eth_dev_configure(port_id_, nb_queues, nb_queues, &conf);
  }
  if (r != 0) fail(name_, "rte_eth_dev_configure (MTU " + std::to_string(pc.mtu) + ")", r);
  uint16_t nrx = dc.rx_desc, ntx = dc.tx_desc;
  r = rte_eth_dev_adjust_nb_rx_tx_desc(port_id_, &nrx, &ntx);
  if (r != 0) fail(name_, "rte_eth_dev_adjust_nb_rx_tx_desc", r);
  const int socket = rte_eth_dev_socket_id(port_id_);
  const unsigned sock = socket < 0 ? 0u : static_cast<unsigned>(socket);
  for (uint16_t q = 0; q < nb_queues; ++q) {
    r = rte_eth_rx_queue_setup(port_id_, q, nrx, sock, nullptr, pool_);
    if (r != 0) fail(name_, "rte_eth_rx_queue_setup queue " + std::to_string(q), r);
    r = rte_eth_tx_queue_setup(port_id_, q, ntx, sock, nullptr);
    if (r != 0) fail(name_, "rte_eth_tx_queue_setup queue " + std::to_string(q), r);
  }
  r = ethdev_mtu ? rte_eth_dev_set_mtu(port_id_, static_cast<uint16_t>(pc.mtu)) : 0;
  if (r != 0 && r != -ENOTSUP)
    fail(name_, "the PMD refused MTU " + std::to_string(pc.mtu) + " (rte_eth_dev_set_mtu)", r);
  mtu_ = static_cast<uint16_t>(pc.mtu);
  r = rte_eth_dev_start(port_id_);
  if (r != 0) fail(name_, "rte_eth_dev_start", r);
  started_ = true;
  r = rte_eth_promiscuous_disable(port_id_);
  if (r != 0) note(std::string("promiscuous mode cannot be turned off: ") + rte_strerror(-r));
  r = rte_eth_allmulticast_enable(port_id_);
  if (r != 0) note(std::string("all-multicast cannot be turned on: ") + rte_strerror(-r));

  rte_ether_addr ea{};
  r = rte_eth_macaddr_get(port_id_, &ea);
  if (r != 0) fail(name_, "rte_eth_macaddr_get", r);
  std::memcpy(mac_, ea.addr_bytes, 6);
  if (!rte_is_valid_assigned_ether_addr(&ea))
    note("the PMD reports no valid unicast MAC address: peers will ignore its ARP / ND");

  std::vector<const uint8_t *> v4, v6;
  std::vector<Ipv4If> a4;
  std::vector<Ipv6If> a6;
  for (const config::Ipv4Prefix &p : pc.ipv4) {
    v4.push_back(p.addr);
    Ipv4If a;
    std::memcpy(a.addr, p.addr, 4);
    a.prefix = p.len;
    a4.push_back(a);
  }
  for (const config::Ipv6Prefix &p : pc.ipv6) {
    v6.push_back(p.addr);
    Ipv6If a;
    std::memcpy(a.addr, p.addr, 16);
    a.prefix = p.len;
    a6.push_back(a);
  }
  gids_ = GidTable::build(mac_, v4, v6);
  arp_.emplace(mac_, a4, neigh);
  nd_.emplace(mac_, a6, neigh);
}

EthPort::~EthPort() {
  stop();
}

void EthPort::note(const std::string &text) {
  if (!notes_.empty()) notes_.append("; ");
  notes_.append(text);
}

void EthPort::stop() noexcept {
  if (closed_) return;
  if (started_) {
    // The backlog gets a few more chances (the peer may still be reading), then the rest is
    // dropped: the only place where the port drops its own frames.
    for (unsigned i = 0; i < kStopDrainTries && !tx_.empty(); ++i)
      flush();
    rte_eth_dev_stop(port_id_);
    started_ = false;
  }
  c_.tx_dropped += tx_.discard([](rte_mbuf *m) { rte_pktmbuf_free(m); });
  {
    rte_mbuf *m[kBurst];
    for (size_t n; (n = loop_.pop(m, kBurst)) != 0;)
      rte_pktmbuf_free_bulk(m, static_cast<unsigned>(n));
  }
  stash_.release();
  rte_eth_dev_close(port_id_);
  closed_ = true;
}

void EthPort::neighbour_stats(const std::function<void(const std::string &, uint64_t)> &f) const {
  const ArpCounters &a = arp_->counters();
  const NdCounters &d = nd_->counters();
  f("arp.tx_requests", a.tx_requests);
  f("arp.rx_replies", a.rx_replies);
  for (size_t i = 0; i < static_cast<size_t>(ArpIgnore::kCount); ++i)
    f(std::string("arp.reply_ignored.") + arp_ignore_str(static_cast<ArpIgnore>(i)),
      a.reply_ignored[i]);
  for (size_t i = 0; i < static_cast<size_t>(ArpDrop::kCount); ++i)
    if (a.drops[i]) f(std::string("drop.") + arp_drop_str(static_cast<ArpDrop>(i)), a.drops[i]);
  f("nd.tx_ns", d.tx_ns);
  f("nd.rx_na", d.rx_na);
  for (size_t i = 0; i < static_cast<size_t>(NdIgnore::kCount); ++i)
    f(std::string("nd.na_ignored.") + nd_ignore_str(static_cast<NdIgnore>(i)), d.na_ignored[i]);
  for (size_t i = 0; i < static_cast<size_t>(NdDrop::kCount); ++i)
    if (d.drops[i]) f(std::string("drop.") + nd_drop_str(static_cast<NdDrop>(i)), d.drops[i]);
  const uint64_t failures = arp_->table().failures() + nd_->table().failures();
  const uint64_t ignored =
      arp_->table().failures_answer_ignored() + nd_->table().failures_answer_ignored();
  f("neigh_failures", failures);
  f("neigh_failures.no_answer", failures - ignored);
  f("neigh_failures.answer_ignored", ignored);
  auto entry = [&](const std::string &ip, NeighState st, const uint8_t mac[6]) {
    if (st == NeighState::kFree) return;
    static const uint8_t kNone[6] = {};
    const bool has_mac = st != NeighState::kIncomplete && st != NeighState::kFailed;
    const uint8_t *m = has_mac ? mac : kNone;
    uint64_t v = uint64_t{static_cast<uint8_t>(st)} << 48;
    for (int i = 0; i < 6; ++i)
      v |= uint64_t{m[i]} << (8 * (5 - i));
    f("neigh." + ip, v);
  };
  for (const auto &e : arp_->table().entries())
    entry(config::format_ipv4(e.ip), e.state, e.mac);
  for (const auto &e : nd_->table().entries())
    entry(config::format_ipv6(e.ip), e.state, e.mac);
}

std::string EthPort::link_status() const {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(port_id_, &link) != 0) return "unknown";
  if (link.link_status == RTE_ETH_LINK_DOWN) return "down";
  std::string s = "up";
  if (link.link_speed != RTE_ETH_SPEED_NUM_NONE && link.link_speed != RTE_ETH_SPEED_NUM_UNKNOWN)
    s.append(" ").append(std::to_string(link.link_speed)).append(" Mb/s");
  s += link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX ? " full-duplex" : " half-duplex";
  return s;
}

uint32_t EthPort::link_speed_mbps() const noexcept {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(port_id_, &link) != 0 || link.link_status == RTE_ETH_LINK_DOWN ||
      link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN)
    return 0;
  return link.link_speed;  // RTE_ETH_SPEED_NUM_NONE is 0
}

bool EthPort::promiscuous() const noexcept {
  return rte_eth_promiscuous_get(port_id_) == 1;
}
bool EthPort::allmulticast() const noexcept {
  return rte_eth_allmulticast_get(port_id_) == 1;
}

transport::TxBuf EthPort::tx_alloc() noexcept {
  return alloc_tx_mbuf(tx_, loop_, stash_, c_, [this] { flush(); });
}

void EthPort::tx_commit(transport::TxBuf b, uint32_t len) noexcept {
  rte_mbuf *m = commit_tx_mbuf(b, len, c_);
  if (m == nullptr) return;
  if (capture_ != nullptr) capture(b.data, len);
  if (is_to_self(b.data, len, mac_)) {  // same-port loopback (port/loopback.h)
    if (loop_.push(m)) {
      ++c_.tx_loopback;
    } else {
      ++c_.tx_loopback_dropped;
      rte_pktmbuf_free(m);
    }
    return;
  }
  if (!tx_.commit(m, len, [this] { flush(); })) {  // tx_alloc saw room: see commit()
    ++c_.tx_dropped;
    rte_pktmbuf_free(m);
  }
}

void EthPort::tx_abort(transport::TxBuf b) noexcept {
  if (b.handle != nullptr) rte_pktmbuf_free(static_cast<rte_mbuf *>(b.handle));
}

uint32_t EthPort::flush() noexcept {
  if (tx_.empty() || !started_) return 0;
  const TxDrained d = tx_.drain([this](rte_mbuf **pkts, uint16_t n) {
    return rte_eth_tx_burst(port_id_, tx_queue_, pkts, n);
  });
  d.count(c_);
  return d.sent;
}

void EthPort::capture(const uint8_t *frame, uint32_t len) noexcept {
  capture_->write(frame, len, capture_clock_ != nullptr ? capture_clock_->now_ns() : realtime_ns());
}

void EthPort::send_copy(const uint8_t *frame, size_t len) noexcept {
  transport::TxBuf b = tx_alloc();
  if (b.data == nullptr) return;  // counted as tx_alloc_fail
  if (len > b.cap) {
    tx_abort(b);
    ++c_.tx_too_long;
    return;
  }
  std::memcpy(b.data, frame, len);
  tx_commit(b, static_cast<uint32_t>(len));
}

void EthPort::dispatch_local(FrameClass cls, const uint8_t *frame, uint32_t len,
                             uint64_t now) noexcept {
  uint8_t reply[128];
  size_t n = 0;
  if (cls == FrameClass::kArp) {
    ++c_.rx_arp;
    n = arp_->input(frame, len, now, reply, sizeof reply);
  } else {
    ++c_.rx_nd;
    n = nd_->input(frame, len, now, reply, sizeof reply);
  }
  if (n != 0) send_copy(reply, n);
}

void EthPort::timers(uint64_t now_ns) noexcept {
  uint8_t frame[128];
  size_t n;
  while ((n = arp_->poll(now_ns, frame, sizeof frame)) != 0)
    send_copy(frame, n);
  while ((n = nd_->poll(now_ns, frame, sizeof frame)) != 0)
    send_copy(frame, n);
}

unsigned EthPort::announce() noexcept {
  uint8_t frame[128];
  unsigned count = 0;
  for (size_t i = 0; i < arp_->num_addrs(); ++i) {
    const size_t n = arp_->build_gratuitous(i, frame, sizeof frame);
    if (n) {
      send_copy(frame, n);
      ++count;
    }
  }
  for (size_t i = 0; i < nd_->num_addrs(); ++i) {
    const size_t n = nd_->build_unsolicited_na(i, frame, sizeof frame);
    if (n) {
      send_copy(frame, n);
      ++count;
    }
  }
  return count;
}

Resolve EthPort::resolve_ipv4(const uint8_t ip[4], uint64_t now_ns, uint8_t mac_out[6]) noexcept {
  uint8_t frame[128];
  size_t n = 0;
  const Resolve r = arp_->resolve(ip, now_ns, mac_out, frame, sizeof frame, &n);
  if (n) send_copy(frame, n);
  return r;
}

Resolve EthPort::resolve_ipv6(const uint8_t ip[16], uint64_t now_ns, uint8_t mac_out[6]) noexcept {
  uint8_t frame[128];
  size_t n = 0;
  const Resolve r = nd_->resolve(ip, now_ns, mac_out, frame, sizeof frame, &n);
  if (n) send_copy(frame, n);
  return r;
}

}  // namespace uroce::port
