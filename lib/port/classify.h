// SPDX-License-Identifier: BSD-3-Clause
// First look at a received frame: which module gets it (ARP, ND, the RoCE engine) or why it is
// dropped. Only the headers needed to decide are read; the owner validates the rest (Arp::input,
// Nd::input, wire::parse_frame in the engine). Pure C++, no DPDK, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uroce::port {

enum class FrameClass : uint8_t { kArp, kNd, kRoce, kDrop };

// Why the RX path dropped a frame. The ARP and ND modules count their own drops
// (ArpDrop, NdDrop); these are the frames that never reached a module.
enum class RxDrop : uint8_t {
  kRunt,             // shorter than an Ethernet header (+ VLAN tag)
  kNotForUs,         // unicast to another MAC, or a multicast group we do not listen to
  kEtherType,        // neither ARP, IPv4, IPv6 nor 802.1Q
  kIpv4NotRoce,      // IPv4 that is not UDP to port 4791 (ICMP echo, TCP, other UDP ...)
  kIpv6NotRoce,      // IPv6 that is neither ICMPv6 nor UDP to port 4791
  kIpTruncated,      // IP header (or UDP header) cut short
  kVlanNotRoce,      // 802.1Q-tagged frame that is not RoCE (ARP / ND over VLAN unsupported)
  kBroadcastNotArp,  // IP frame to the Ethernet broadcast address
  kMultiSegment,     // chained mbuf (the RX path expects one segment per frame)
  kNoEngine,         // RoCE frame, but no transport engine is attached yet
  kEngineRefused,    // RoCE frame the engine did not accept
  kCount
};
const char *rx_drop_str(RxDrop d) noexcept;

struct Classified {
  FrameClass cls = FrameClass::kDrop;
  RxDrop drop = RxDrop::kRunt;  // valid when cls == kDrop
};

// mac: our port's address. Accepts unicast to mac, broadcast (ARP only) and IPv6 multicast
// (33:33:*, ND only: Nd::input checks the group).
Classified classify(const uint8_t *frame, size_t len, const uint8_t mac[6]) noexcept;

}  // namespace uroce::port
