// SPDX-License-Identifier: BSD-3-Clause
#include "port/arp.h"

#include <cstring>

#include "wire/hdr.h"

namespace uroce::port {

namespace {

namespace be = wire::be;  // the byte-order helpers of lib/wire/hdr.h (no swapping of our own)

constexpr uint16_t kHwEthernet = 1;
constexpr uint16_t kOpRequest = 1;
constexpr uint16_t kOpReply = 2;
constexpr size_t kArpLen = 28;

// ARP for IPv4 over Ethernet, RFC 826. Fields in network order, read through lib/wire's helpers.
struct ArpPkt {
  uint8_t htype[2], ptype[2], hlen, plen, op[2], sha[6], spa[4], tha[6], tpa[4];
};
static_assert(sizeof(ArpPkt) == kArpLen);

const uint8_t kBroadcast[6] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
const uint8_t kZeroMac[6] = {};

bool mac_is_group_or_zero(const uint8_t *m) {
  return (m[0] & 1) != 0 || std::memcmp(m, kZeroMac, 6) == 0;
}

bool ip_is_bad_sender(const uint8_t *ip) {
  // 0.0.0.0 is legal (RFC 5227 probe) and handled by the caller.
  return ip[0] == 127 || ip[0] >= 224;
}

bool same_subnet(const uint8_t *a, const uint8_t *b, unsigned prefix) {
  const uint32_t x = be::load32(a), y = be::load32(b);
  const uint32_t mask = prefix == 0 ? 0 : 0xFFFFFFFFu << (32 - prefix);
  return (x & mask) == (y & mask);
}

}  // namespace

const char *arp_drop_str(ArpDrop d) noexcept {
  switch (d) {
    case ArpDrop::kTruncated:
      return "arp_truncated";
    case ArpDrop::kBadHwType:
      return "arp_bad_hw_type";
    case ArpDrop::kBadProtoType:
      return "arp_bad_proto_type";
    case ArpDrop::kBadAddrLengths:
      return "arp_bad_addr_lengths";
    case ArpDrop::kBadOpcode:
      return "arp_bad_opcode";
    case ArpDrop::kBadSenderMac:
      return "arp_bad_sender_mac";
    case ArpDrop::kLoopedBack:
      return "arp_looped_back";
    case ArpDrop::kBadSenderIp:
      return "arp_bad_sender_ip";
    case ArpDrop::kTableFull:
      return "arp_table_full";
    case ArpDrop::kCount:
      break;
  }
  return "?";
}

const char *arp_ignore_str(ArpIgnore i) noexcept {
  switch (i) {
    case ArpIgnore::kNoEntry:
      return "no_entry";
    case ArpIgnore::kLocalSender:
      return "local_sender";
    case ArpIgnore::kZeroSender:
      return "zero_sender";
    case ArpIgnore::kCount:
      break;
  }
  return "?";
}

Arp::Arp(const uint8_t mac[6], std::span<const Ipv4If> addrs, const NeighParams &params)
    : addrs_(addrs.begin(), addrs.end()), table_(params) {
  std::memcpy(mac_, mac, 6);
}

bool Arp::is_local(const uint8_t ip[4]) const noexcept {
  for (const Ipv4If &a : addrs_)
    if (std::memcmp(a.addr, ip, 4) == 0) return true;
  return false;
}

const uint8_t *Arp::source_for(const uint8_t ip[4]) const noexcept {
  for (const Ipv4If &a : addrs_)
    if (same_subnet(a.addr, ip, a.prefix)) return a.addr;
  return addrs_.empty() ? nullptr : addrs_[0].addr;
}

size_t Arp::build(uint8_t *out, size_t cap, uint16_t op, const uint8_t *eth_dst, const uint8_t *tha,
                  const uint8_t *spa, const uint8_t *tpa) const noexcept {
  if (out == nullptr || cap < kFrameLen) return 0;
  std::memset(out, 0, kFrameLen);
  auto *eth = wire::hdr_at<wire::EthHdr>(out);
  eth->set_dst(eth_dst);
  eth->set_src(mac_);
  eth->set_ethertype(wire::kEtherTypeArp);
  auto *a = reinterpret_cast<ArpPkt *>(out + wire::EthHdr::kSize);
  be::store16(a->htype, kHwEthernet);
  be::store16(a->ptype, wire::kEtherTypeIpv4);
  a->hlen = 6;
  a->plen = 4;
  be::store16(a->op, op);
  std::memcpy(a->sha, mac_, 6);
  std::memcpy(a->spa, spa, 4);
  std::memcpy(a->tha, tha, 6);
  std::memcpy(a->tpa, tpa, 4);
  return kFrameLen;
}

size_t Arp::input(const uint8_t *frame, size_t len, uint64_t now, uint8_t *out,
                  size_t cap) noexcept {
  ++c_.rx;
  if (len < wire::EthHdr::kSize + kArpLen) {
    drop(ArpDrop::kTruncated);
    return 0;
  }
  const auto *a = reinterpret_cast<const ArpPkt *>(frame + wire::EthHdr::kSize);
  if (be::load16(a->htype) != kHwEthernet) {
    drop(ArpDrop::kBadHwType);
    return 0;
  }
  if (be::load16(a->ptype) != wire::kEtherTypeIpv4) {
    drop(ArpDrop::kBadProtoType);
    return 0;
  }
  if (a->hlen != 6 || a->plen != 4) {
    drop(ArpDrop::kBadAddrLengths);
    return 0;
  }
  const uint16_t op = be::load16(a->op);
  if (op != kOpRequest && op != kOpReply) {
    drop(ArpDrop::kBadOpcode);
    return 0;
  }
  if (std::memcmp(a->sha, mac_, 6) == 0) {
    drop(ArpDrop::kLoopedBack);
    return 0;
  }
  if (mac_is_group_or_zero(a->sha)) {
    drop(ArpDrop::kBadSenderMac);
    return 0;
  }
  if (ip_is_bad_sender(a->spa)) {
    drop(ArpDrop::kBadSenderIp);
    return 0;
  }
  static constexpr uint8_t kZeroIp[4] = {};
  const bool probe = std::memcmp(a->spa, kZeroIp, 4) == 0;  // RFC 5227 probe: sender IP 0
  if (!probe && is_local(a->spa)) ++c_.conflicts;           // someone else uses our address
  const bool for_us = is_local(a->tpa);

  if (op == kOpReply) {
    ++c_.rx_replies;
    // A reply confirms an entry we asked for; unsolicited ones only update existing entries.
    ArpIgnore why = ArpIgnore::kCount;
    if (probe) {
      why = ArpIgnore::kZeroSender;
    } else if (is_local(a->spa)) {
      why = ArpIgnore::kLocalSender;
    } else if (table_.find(a->spa) == nullptr) {
      why = ArpIgnore::kNoEntry;
    } else {
      table_.confirm(a->spa, a->sha, now, /*create=*/false);
    }
    if (why != ArpIgnore::kCount) ++c_.reply_ignored[static_cast<size_t>(why)];
    return 0;
  }
  if (!for_us) {
    ++c_.rx_not_for_us;
    // A gratuitous request (spa == tpa) refreshes an entry we have; nothing is created.
    if (!probe && !is_local(a->spa)) table_.learn(a->spa, a->sha, now, /*create=*/false);
    return 0;
  }
  ++c_.rx_requests_for_us;
  if (!probe && !table_.learn(a->spa, a->sha, now, /*create=*/true)) drop(ArpDrop::kTableFull);
  // Reply to the requester (for a probe the target IP of the reply is 0, as Linux does).
  const size_t n = build(out, cap, kOpReply, a->sha, a->sha, a->tpa, a->spa);
  if (n == 0) {
    ++c_.tx_no_buffer;
    return 0;
  }
  ++c_.tx_replies;
  return n;
}

Resolve Arp::resolve(const uint8_t ip[4], uint64_t now, uint8_t mac_out[6], uint8_t *out,
                     size_t cap, size_t *out_len) noexcept {
  *out_len = 0;
  if (is_local(ip)) {  // our own address: same-port loopback (port/loopback.h)
    std::memcpy(mac_out, mac_, 6);
    return Resolve::kResolved;
  }
  const uint8_t *src = source_for(ip);
  if (src == nullptr) return Resolve::kNoSource;
  bool probe_now = false, unicast = false;
  const Resolve r = table_.resolve(ip, now, mac_out, &probe_now, &unicast);
  if (probe_now) {
    const NeighTable<4>::Entry *e = table_.find(ip);
    *out_len = build(out, cap, kOpRequest, unicast ? e->mac : kBroadcast, kZeroMac, src, ip);
    if (*out_len) {
      ++c_.tx_requests;
    } else {
      ++c_.tx_no_buffer;
    }
  }
  return r;
}

size_t Arp::poll(uint64_t now, uint8_t *out, size_t cap) noexcept {
  for (;;) {
    const NeighTable<4>::Entry *e = nullptr;
    const auto act = table_.poll(now, &e);
    if (act == NeighTable<4>::Action::kNone) return 0;
    const uint8_t *src = source_for(e->ip);
    if (src == nullptr) continue;
    const size_t n = build(out, cap, kOpRequest,
                           act == NeighTable<4>::Action::kUnicastProbe ? e->mac : kBroadcast,
                           kZeroMac, src, e->ip);
    if (n == 0) {
      ++c_.tx_no_buffer;
      continue;
    }
    ++c_.tx_requests;
    return n;
  }
}

size_t Arp::build_gratuitous(size_t i, uint8_t *out, size_t cap) noexcept {
  if (i >= addrs_.size()) return 0;
  const size_t n =
      build(out, cap, kOpRequest, kBroadcast, kZeroMac, addrs_[i].addr, addrs_[i].addr);
  if (n) ++c_.tx_gratuitous;
  return n;
}

}  // namespace uroce::port
