// SPDX-License-Identifier: BSD-3-Clause
#include "port/classify.h"

#include <cstring>

#include "wire/hdr.h"

namespace uroce::port {

namespace {

constexpr uint8_t kIcmpv6 = 58;

Classified drop(RxDrop d) noexcept {
  return Classified{FrameClass::kDrop, d};
}

// UDP destination port 4791 behind an IPv4 / IPv6 header at `l3`; `avail` bytes from l3.
bool is_roce_v4(const uint8_t *l3, size_t avail, RxDrop *why) noexcept {
  if (avail < wire::Ipv4Hdr::kSize) {
    *why = RxDrop::kIpTruncated;
    return false;
  }
  const auto *ip = wire::hdr_at<wire::Ipv4Hdr>(l3);
  const size_t ihl = size_t{ip->ihl()} * 4;
  if (ip->protocol() != wire::kIpProtoUdp) {
    *why = RxDrop::kIpv4NotRoce;
    return false;
  }
  if (ihl < wire::Ipv4Hdr::kSize || avail < ihl + wire::UdpHdr::kSize) {
    *why = RxDrop::kIpTruncated;
    return false;
  }
  if (wire::hdr_at<wire::UdpHdr>(l3 + ihl)->dport() != wire::kRoceV2Port) {
    *why = RxDrop::kIpv4NotRoce;
    return false;
  }
  return true;
}

FrameClass ipv6_class(const uint8_t *l3, size_t avail, RxDrop *why) noexcept {
  if (avail < wire::Ipv6Hdr::kSize) {
    *why = RxDrop::kIpTruncated;
    return FrameClass::kDrop;
  }
  const auto *ip = wire::hdr_at<wire::Ipv6Hdr>(l3);
  if (ip->next_header() == kIcmpv6) return FrameClass::kNd;
  if (ip->next_header() != wire::kIpProtoUdp) {
    *why = RxDrop::kIpv6NotRoce;
    return FrameClass::kDrop;
  }
  if (avail < wire::Ipv6Hdr::kSize + wire::UdpHdr::kSize) {
    *why = RxDrop::kIpTruncated;
    return FrameClass::kDrop;
  }
  if (wire::hdr_at<wire::UdpHdr>(l3 + wire::Ipv6Hdr::kSize)->dport() != wire::kRoceV2Port) {
    *why = RxDrop::kIpv6NotRoce;
    return FrameClass::kDrop;
  }
  return FrameClass::kRoce;
}

}  // namespace

const char *rx_drop_str(RxDrop d) noexcept {
  switch (d) {
    case RxDrop::kRunt:
      return "runt";
    case RxDrop::kNotForUs:
      return "not_for_us";
    case RxDrop::kEtherType:
      return "unknown_ethertype";
    case RxDrop::kIpv4NotRoce:
      return "ipv4_not_roce";
    case RxDrop::kIpv6NotRoce:
      return "ipv6_not_roce";
    case RxDrop::kIpTruncated:
      return "ip_truncated";
    case RxDrop::kVlanNotRoce:
      return "vlan_not_roce";
    case RxDrop::kBroadcastNotArp:
      return "broadcast_not_arp";
    case RxDrop::kMultiSegment:
      return "multi_segment";
    case RxDrop::kNoEngine:
      return "roce_no_transport_engine_yet";
    case RxDrop::kEngineRefused:
      return "roce_refused_by_engine";
    case RxDrop::kCount:
      break;
  }
  return "?";
}

Classified classify(const uint8_t *frame, size_t len, const uint8_t mac[6]) noexcept {
  if (len < wire::EthHdr::kSize) return drop(RxDrop::kRunt);
  const auto *eth = wire::hdr_at<wire::EthHdr>(frame);
  const uint8_t *dst = eth->dst();
  static constexpr uint8_t kBcast[6] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  const bool unicast_us = std::memcmp(dst, mac, 6) == 0;
  const bool bcast = std::memcmp(dst, kBcast, 6) == 0;
  const bool v6mcast = dst[0] == 0x33 && dst[1] == 0x33;
  if (!unicast_us && !bcast && !v6mcast) return drop(RxDrop::kNotForUs);

  const uint16_t type = eth->ethertype();
  const uint8_t *l3 = frame + wire::EthHdr::kSize;
  const size_t avail = len - wire::EthHdr::kSize;
  RxDrop why = RxDrop::kRunt;
  switch (type) {
    case wire::kEtherTypeArp:
      if (v6mcast) return drop(RxDrop::kNotForUs);
      return Classified{FrameClass::kArp, RxDrop::kRunt};
    case wire::kEtherTypeIpv4:
      if (bcast) return drop(RxDrop::kBroadcastNotArp);
      if (v6mcast) return drop(RxDrop::kNotForUs);
      if (!is_roce_v4(l3, avail, &why)) return drop(why);
      return Classified{FrameClass::kRoce, RxDrop::kRunt};
    case wire::kEtherTypeIpv6: {
      if (bcast) return drop(RxDrop::kBroadcastNotArp);
      const FrameClass c = ipv6_class(l3, avail, &why);
      if (c == FrameClass::kDrop) return drop(why);
      if (c == FrameClass::kRoce && v6mcast) return drop(RxDrop::kNotForUs);
      return Classified{c, RxDrop::kRunt};
    }
    case wire::kEtherTypeVlan: {
      if (avail < wire::VlanHdr::kSize) return drop(RxDrop::kRunt);
      if (!unicast_us) return drop(RxDrop::kVlanNotRoce);
      const auto *vlan = wire::hdr_at<wire::VlanHdr>(l3);
      const uint8_t *in = l3 + wire::VlanHdr::kSize;
      const size_t in_avail = avail - wire::VlanHdr::kSize;
      if (vlan->ethertype() == wire::kEtherTypeIpv4 && is_roce_v4(in, in_avail, &why))
        return Classified{FrameClass::kRoce, RxDrop::kRunt};
      if (vlan->ethertype() == wire::kEtherTypeIpv6 &&
          ipv6_class(in, in_avail, &why) == FrameClass::kRoce)
        return Classified{FrameClass::kRoce, RxDrop::kRunt};
      return drop(RxDrop::kVlanNotRoce);
    }
    default:
      return drop(RxDrop::kEtherType);
  }
}

}  // namespace uroce::port
