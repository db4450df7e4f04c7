// SPDX-License-Identifier: BSD-3-Clause
// Frame fix-ups shared by the fuzz targets that feed whole frames (parse_frame_fuzz,
// engine_rx_fuzz): they make a mutated frame's IP / UDP lengths and IPv4 checksum consistent
// again, so that mutations get past those checks to the BTH and beyond.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/hdr.h"

namespace uroce::fuzz {

// Where the IP header starts and which EtherType it has; false when the frame is too short.
inline bool l3_of(const uint8_t *buf, size_t len, size_t *l3, uint16_t *type) {
  if (len < 14) return false;
  *l3 = 14;
  *type = wire::hdr_at<wire::EthHdr>(buf)->ethertype();
  if (*type == wire::kEtherTypeVlan) {
    if (len < 18) return false;
    *type = wire::hdr_at<wire::VlanHdr>(buf + 14)->ethertype();
    *l3 = 18;
  }
  return true;
}

inline void fix_lengths(uint8_t *buf, size_t len) {
  size_t l3;
  uint16_t type;
  if (!l3_of(buf, len, &l3, &type)) return;
  size_t l4;
  if (type == wire::kEtherTypeIpv4 && len >= l3 + 20 && len - l3 <= 0xFFFF) {
    auto *ip = wire::hdr_at<wire::Ipv4Hdr>(buf + l3);
    ip->set_total_len(static_cast<uint16_t>(len - l3));
    l4 = l3 + size_t{ip->ihl()} * 4;
  } else if (type == wire::kEtherTypeIpv6 && len >= l3 + 40 && len - l3 - 40 <= 0xFFFF) {
    wire::hdr_at<wire::Ipv6Hdr>(buf + l3)->set_payload_len(static_cast<uint16_t>(len - l3 - 40));
    l4 = l3 + 40;
  } else {
    return;
  }
  if (len >= l4 + 8)
    wire::hdr_at<wire::UdpHdr>(buf + l4)->set_length(static_cast<uint16_t>(len - l4));
}

inline void fix_ipv4_checksum(uint8_t *buf, size_t len) {
  size_t l3;
  uint16_t type;
  if (!l3_of(buf, len, &l3, &type)) return;
  if (type != wire::kEtherTypeIpv4 || len < l3 + wire::Ipv4Hdr::kSize) return;
  auto *ip = wire::hdr_at<wire::Ipv4Hdr>(buf + l3);
  if (ip->ihl() < 5 || len < l3 + size_t{ip->ihl()} * 4) return;
  ip->fill_checksum();
}

}  // namespace uroce::fuzz
