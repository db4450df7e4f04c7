// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/eth_port_view.h"

#include "port/neigh_wait.h"

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <string>

namespace uroce::daemon {

namespace {
transport::Mtu mtu_enum(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return transport::Mtu::k256;
    case 512:
      return transport::Mtu::k512;
    case 1024:
      return transport::Mtu::k1024;
    case 2048:
      return transport::Mtu::k2048;
    default:
      return transport::Mtu::k4096;
  }
}
}  // namespace

transport::Mtu EthPortView::ib_mtu() const noexcept {
  return mtu_enum(pc_.ib_mtu());
}

int EthPortView::resolve(const wire::Gid &dgid, uint8_t mac_out[6]) noexcept {
  const timespec nap{0, 50'000};
  const port::Resolve r = port::wait_resolution(
      [this] { return loop_.clock().now_ns(); },
      [&](uint64_t now) {
        return dgid.is_v4mapped() ? p_.resolve_ipv4(dgid.ipv4(), now, mac_out)
                                  : p_.resolve_ipv6(dgid.raw, now, mac_out);
      },
      [this] {
        p_.flush();
        return loop_.step();
      },
      [&nap] { nanosleep(&nap, nullptr); }, uint64_t{pc_.neigh_wait_ms} * 1'000'000);
  return r == port::Resolve::kResolved ? 0 : EHOSTUNREACH;
}

void add_port_stats(const port::EthPort &p, std::vector<ctl::StatEntry> &v) {
  auto add = [&](const char *what, uint64_t value) {
    ctl::StatEntry e{};
    std::snprintf(e.name, sizeof e.name, "port.%s.%s", p.name().c_str(), what);
    e.value = value;
    v.push_back(e);
  };
  const port::PortCounters &c = p.counters();
  add("rx_packets", c.rx_packets);
  add("rx_bytes", c.rx_bytes);
  add("tx_packets", c.tx_packets);
  add("tx_bytes", c.tx_bytes);
  add("tx_alloc_fail", c.tx_alloc_fail);
  add("tx_dropped", c.tx_dropped);
  add("tx_deferred", c.tx_deferred);
  add("tx_backpressure", c.tx_backpressure);
  add("tx_pending", p.tx_pending());
  add("tx_too_long", c.tx_too_long);
  add("tx_loopback", c.tx_loopback);
  add("tx_loopback_full", c.tx_loopback_full);
  add("tx_loopback_dropped", c.tx_loopback_dropped);
  add("rx_arp", c.rx_arp);
  add("rx_nd", c.rx_nd);
  add("rx_roce", c.rx_roce);
  for (size_t i = 0; i < static_cast<size_t>(port::RxDrop::kCount); ++i)
    if (c.rx_drops[i]) {
      char n[48];
      std::snprintf(n, sizeof n, "drop.%s", port::rx_drop_str(static_cast<port::RxDrop>(i)));
      add(n, c.rx_drops[i]);
    }
  // ARP / ND resolution and the neighbour entries (a name that would not fit is left out).
  p.neighbour_stats([&](const std::string &n, uint64_t value) {
    if (6 + p.name().size() + n.size() < sizeof(ctl::StatEntry::name)) add(n.c_str(), value);
  });
}

void print_port_counters(const port::EthPort &p) {
  const port::PortCounters &c = p.counters();
  std::printf(
      "port %s counters: rx_packets=%lu rx_bytes=%lu tx_packets=%lu tx_bytes=%lu "
      "tx_alloc_fail=%lu tx_dropped=%lu tx_deferred=%lu tx_backpressure=%lu tx_too_long=%lu "
      "rx_arp=%lu rx_nd=%lu rx_roce=%lu\n",
      p.name().c_str(), c.rx_packets, c.rx_bytes, c.tx_packets, c.tx_bytes, c.tx_alloc_fail,
      c.tx_dropped, c.tx_deferred, c.tx_backpressure, c.tx_too_long, c.rx_arp, c.rx_nd, c.rx_roce);
  for (size_t i = 0; i < static_cast<size_t>(port::RxDrop::kCount); ++i)
    if (c.rx_drops[i])
      std::printf("port %s drop %s=%lu\n", p.name().c_str(),
                  port::rx_drop_str(static_cast<port::RxDrop>(i)), c.rx_drops[i]);
  const port::ArpCounters &a = p.arp().counters();
  std::printf(
      "port %s arp: rx=%lu rx_requests_for_us=%lu rx_replies=%lu rx_not_for_us=%lu "
      "tx_replies=%lu tx_requests=%lu tx_gratuitous=%lu tx_no_buffer=%lu "
      "conflicts=%lu\n",
      p.name().c_str(), a.rx, a.rx_requests_for_us, a.rx_replies, a.rx_not_for_us, a.tx_replies,
      a.tx_requests, a.tx_gratuitous, a.tx_no_buffer, a.conflicts);
  for (size_t i = 0; i < static_cast<size_t>(port::ArpDrop::kCount); ++i)
    if (a.drops[i])
      std::printf("port %s drop %s=%lu\n", p.name().c_str(),
                  port::arp_drop_str(static_cast<port::ArpDrop>(i)), a.drops[i]);
  const port::NdCounters &n = p.nd().counters();
  std::printf(
      "port %s nd: rx=%lu rx_ns_for_us=%lu rx_ns_not_for_us=%lu rx_na=%lu "
      "rx_other_icmpv6=%lu tx_na=%lu tx_ns=%lu tx_unsolicited_na=%lu tx_no_buffer=%lu "
      "conflicts=%lu\n",
      p.name().c_str(), n.rx, n.rx_ns_for_us, n.rx_ns_not_for_us, n.rx_na, n.rx_other_icmpv6,
      n.tx_na, n.tx_ns, n.tx_unsolicited_na, n.tx_no_buffer, n.conflicts);
  for (size_t i = 0; i < static_cast<size_t>(port::NdDrop::kCount); ++i)
    if (n.drops[i])
      std::printf("port %s drop %s=%lu\n", p.name().c_str(),
                  port::nd_drop_str(static_cast<port::NdDrop>(i)), n.drops[i]);
}

}  // namespace uroce::daemon
