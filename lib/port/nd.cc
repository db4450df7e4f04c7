// SPDX-License-Identifier: BSD-3-Clause
#include "port/nd.h"

#include <cstring>

#include "wire/gid.h"
#include "wire/hdr.h"

namespace uroce::port {

namespace {

namespace be = wire::be;  // the byte-order helpers of lib/wire/hdr.h

constexpr size_t kEth = wire::EthHdr::kSize;
constexpr size_t kIp6 = wire::Ipv6Hdr::kSize;
constexpr size_t kNdBody = 24;  // type, code, checksum, flags/reserved, target
constexpr uint8_t kOptSlla = 1;
constexpr uint8_t kOptTlla = 2;
constexpr uint8_t kNaRouter = 0x80, kNaSolicited = 0x40, kNaOverride = 0x20;

const uint8_t kAllNodes[16] = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const uint8_t kUnspecified[16] = {};

bool is_multicast(const uint8_t *a) {
  return a[0] == 0xFF;
}
bool is_link_local(const uint8_t *a) {
  return a[0] == 0xFE && (a[1] & 0xC0) == 0x80;
}

bool same_prefix(const uint8_t *a, const uint8_t *b, unsigned prefix) {
  const unsigned full = prefix / 8, rest = prefix % 8;
  if (std::memcmp(a, b, full) != 0) return false;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xFF << (8 - rest));
  return (a[full] & mask) == (b[full] & mask);
}

// Checksum over the pseudo header (RFC 8200 8.1) and the ICMPv6 message.
uint32_t icmpv6_sum(const uint8_t *src, const uint8_t *dst, const uint8_t *msg, size_t n) {
  uint32_t sum = csum_add(0, src, 16);
  sum = csum_add(sum, dst, 16);
  uint8_t tail[8];
  be::store32(tail, static_cast<uint32_t>(n));
  tail[4] = tail[5] = tail[6] = 0;
  tail[7] = Nd::kIcmpv6;
  sum = csum_add(sum, tail, 8);
  return csum_add(sum, msg, n);
}

}  // namespace

const char *nd_drop_str(NdDrop d) noexcept {
  switch (d) {
    case NdDrop::kTruncated:
      return "nd_truncated";
    case NdDrop::kBadIpHeader:
      return "nd_bad_ip_header";
    case NdDrop::kNotIcmpv6:
      return "nd_not_icmpv6";
    case NdDrop::kBadChecksum:
      return "nd_bad_checksum";
    case NdDrop::kBadHopLimit:
      return "nd_bad_hop_limit";
    case NdDrop::kBadCode:
      return "nd_bad_code";
    case NdDrop::kBadLength:
      return "nd_bad_length";
    case NdDrop::kBadOption:
      return "nd_bad_option";
    case NdDrop::kMulticastTarget:
      return "nd_multicast_target";
    case NdDrop::kDadWithSlla:
      return "nd_dad_with_slla";
    case NdDrop::kDadNotSolicited:
      return "nd_dad_not_solicited_node";
    case NdDrop::kSolicitedToMcast:
      return "nd_solicited_na_to_multicast";
    case NdDrop::kBadSourceIp:
      return "nd_bad_source_ip";
    case NdDrop::kLoopedBack:
      return "nd_looped_back";
    case NdDrop::kNotForUs:
      return "nd_not_for_us";
    case NdDrop::kTableFull:
      return "nd_table_full";
    case NdDrop::kCount:
      break;
  }
  return "?";
}

const char *nd_ignore_str(NdIgnore i) noexcept {
  switch (i) {
    case NdIgnore::kNoEntry:
      return "no_entry";
    case NdIgnore::kNoTlla:
      return "no_tlla";
    case NdIgnore::kNotSolicited:
      return "not_solicited";
    case NdIgnore::kOverrideClear:
      return "override_clear";
    case NdIgnore::kCount:
      break;
  }
  return "?";
}

void Nd::solicited_node(const uint8_t ip[16], uint8_t group[16]) noexcept {
  static constexpr uint8_t kPrefix[13] = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xFF};
  std::memcpy(group, kPrefix, 13);
  std::memcpy(group + 13, ip + 13, 3);
}

void Nd::multicast_mac(const uint8_t group[16], uint8_t mac[6]) noexcept {
  mac[0] = 0x33;
  mac[1] = 0x33;
  std::memcpy(mac + 2, group + 12, 4);
}

Nd::Nd(const uint8_t mac[6], std::span<const Ipv6If> addrs, const NeighParams &params)
    : table_(params) {
  std::memcpy(mac_, mac, 6);
  Ipv6If ll;
  std::memcpy(ll.addr, wire::Gid::link_local_from_mac(mac).raw, 16);
  ll.prefix = 64;
  addrs_.push_back(ll);
  for (const Ipv6If &a : addrs)
    if (!is_local(a.addr)) addrs_.push_back(a);
}

bool Nd::is_local(const uint8_t ip[16]) const noexcept {
  for (const Ipv6If &a : addrs_)
    if (std::memcmp(a.addr, ip, 16) == 0) return true;
  return false;
}

bool Nd::accepts_dst(const uint8_t ip[16]) const noexcept {
  if (std::memcmp(ip, kAllNodes, 16) == 0) return true;
  uint8_t g[16];
  for (const Ipv6If &a : addrs_) {
    if (std::memcmp(a.addr, ip, 16) == 0) return true;
    solicited_node(a.addr, g);
    if (std::memcmp(g, ip, 16) == 0) return true;
  }
  return false;
}

const uint8_t *Nd::source_for(const uint8_t ip[16]) const noexcept {
  if (is_link_local(ip)) return addrs_[0].addr;
  for (size_t i = 1; i < addrs_.size(); ++i)
    if (same_prefix(addrs_[i].addr, ip, addrs_[i].prefix)) return addrs_[i].addr;
  return addrs_.size() > 1 ? addrs_[1].addr : addrs_[0].addr;
}

size_t Nd::build(uint8_t *out, size_t cap, uint8_t type, const uint8_t *eth_dst,
                 const uint8_t *ip_src, const uint8_t *ip_dst, const uint8_t *target,
                 uint8_t na_flags) const noexcept {
  constexpr size_t kMsg = kNdBody + 8;
  constexpr size_t kLen = kEth + kIp6 + kMsg;
  static_assert(kLen == kNsLen && kLen == kNaLen);
  if (out == nullptr || cap < kLen) return 0;
  std::memset(out, 0, kLen);
  auto *eth = wire::hdr_at<wire::EthHdr>(out);
  eth->set_dst(eth_dst);
  eth->set_src(mac_);
  eth->set_ethertype(wire::kEtherTypeIpv6);
  auto *ip = wire::hdr_at<wire::Ipv6Hdr>(out + kEth);
  ip->set_vtf(0, 0);
  ip->set_payload_len(kMsg);
  ip->set_next_header(kIcmpv6);
  ip->set_hop_limit(255);
  ip->set_src(ip_src);
  ip->set_dst(ip_dst);
  uint8_t *m = out + kEth + kIp6;
  m[0] = type;
  m[1] = 0;
  if (type == kTypeNa) m[4] = na_flags;
  std::memcpy(m + 8, target, 16);
  m[24] = type == kTypeNs ? kOptSlla : kOptTlla;
  m[25] = 1;  // in units of 8 bytes
  std::memcpy(m + 26, mac_, 6);
  be::store16(m + 2, csum_fold(icmpv6_sum(ip_src, ip_dst, m, kMsg)));
  return kLen;
}

size_t Nd::input(const uint8_t *frame, size_t len, uint64_t now, uint8_t *out,
                 size_t cap) noexcept {
  ++c_.rx;
  if (len < kEth + kIp6) {
    drop(NdDrop::kTruncated);
    return 0;
  }
  const auto *eth = wire::hdr_at<wire::EthHdr>(frame);
  const auto *ip = wire::hdr_at<wire::Ipv6Hdr>(frame + kEth);
  if (ip->version() != 6) {
    drop(NdDrop::kBadIpHeader);
    return 0;
  }
  const size_t plen = ip->payload_len();
  if (kEth + kIp6 + plen > len) {
    drop(NdDrop::kTruncated);
    return 0;
  }
  if (ip->next_header() != kIcmpv6) {
    drop(NdDrop::kNotIcmpv6);
    return 0;
  }
  if (plen < 4) {
    drop(NdDrop::kTruncated);
    return 0;
  }
  const uint8_t *m = frame + kEth + kIp6;
  if (csum_fold(icmpv6_sum(ip->src(), ip->dst(), m, plen)) != 0) {
    drop(NdDrop::kBadChecksum);
    return 0;
  }
  if (is_multicast(ip->src())) {
    drop(NdDrop::kBadSourceIp);
    return 0;
  }
  if (std::memcmp(eth->src(), mac_, 6) == 0) {
    drop(NdDrop::kLoopedBack);
    return 0;
  }
  if (!accepts_dst(ip->dst())) {
    drop(NdDrop::kNotForUs);
    return 0;
  }
  const uint8_t type = m[0];
  if (type != kTypeNs && type != kTypeNa) {
    ++c_.rx_other_icmpv6;
    return 0;
  }
  // RFC 4861 7.1.1 / 7.1.2.
  if (ip->hop_limit() != 255) {
    drop(NdDrop::kBadHopLimit);
    return 0;
  }
  if (m[1] != 0) {
    drop(NdDrop::kBadCode);
    return 0;
  }
  if (plen < kNdBody) {
    drop(NdDrop::kBadLength);
    return 0;
  }
  const uint8_t *target = m + 8;
  if (is_multicast(target)) {
    drop(NdDrop::kMulticastTarget);
    return 0;
  }
  const uint8_t *lladdr = nullptr;  // SLLA for NS, TLLA for NA
  for (size_t off = kNdBody; off < plen;) {
    if (plen - off < 2 || m[off + 1] == 0 || m[off + 1] * size_t{8} > plen - off) {
      drop(NdDrop::kBadOption);
      return 0;
    }
    const uint8_t otype = m[off], olen = m[off + 1];
    if (otype == (type == kTypeNs ? kOptSlla : kOptTlla)) {
      if (olen != 1) {  // Ethernet link-layer address options are 8 bytes
        drop(NdDrop::kBadOption);
        return 0;
      }
      lladdr = m + off + 2;
    }
    off += olen * size_t{8};
  }

  if (type == kTypeNs) {
    const bool dad = std::memcmp(ip->src(), kUnspecified, 16) == 0;
    if (dad) {
      uint8_t g[16];
      solicited_node(target, g);
      if (std::memcmp(ip->dst(), g, 16) != 0) {
        drop(NdDrop::kDadNotSolicited);
        return 0;
      }
      if (lladdr != nullptr) {
        drop(NdDrop::kDadWithSlla);
        return 0;
      }
    }
    if (!is_local(target)) {
      ++c_.rx_ns_not_for_us;
      return 0;
    }
    ++c_.rx_ns_for_us;
    size_t n = 0;
    if (dad) {
      // Another node wants our address: defend it (RFC 4861 7.2.4, to all nodes, S = 0).
      ++c_.conflicts;
      uint8_t dmac[6];
      multicast_mac(kAllNodes, dmac);
      n = build(out, cap, kTypeNa, dmac, target, kAllNodes, target, kNaOverride);
    } else {
      if (lladdr != nullptr && !table_.learn(ip->src(), lladdr, now, /*create=*/true))
        drop(NdDrop::kTableFull);
      n = build(out, cap, kTypeNa, lladdr ? lladdr : eth->src(), target, ip->src(), target,
                kNaSolicited | kNaOverride);
    }
    if (n == 0) {
      ++c_.tx_no_buffer;
      return 0;
    }
    ++c_.tx_na;
    return n;
  }

  // Neighbor Advertisement: RFC 4861 7.2.5.
  const uint8_t flags = m[4];
  if (is_multicast(ip->dst()) && (flags & kNaSolicited)) {
    drop(NdDrop::kSolicitedToMcast);
    table_.answer_ignored(target);  // an answer, if we were asking: "answer ignored"
    return 0;
  }
  ++c_.rx_na;
  if (is_local(target)) {
    ++c_.conflicts;
    return 0;
  }
  const NeighTable<16>::Entry *e = table_.find(target);
  if (e == nullptr) {  // nothing asked for this target: no entry is created (as Linux)
    ignore(NdIgnore::kNoEntry, target);
    return 0;
  }
  const bool solicited = (flags & kNaSolicited) != 0, override = (flags & kNaOverride) != 0;
  const bool have_mac = e->state != NeighState::kIncomplete && e->state != NeighState::kFailed;
  if (lladdr == nullptr) {
    // Linux answers a unicast NS (our refresh of a stale entry) without the TLLA option: the
    // advertisement is about the MAC we already have (7.2.5: "the link-layer address is the
    // same").
    if (!have_mac) {
      ignore(NdIgnore::kNoTlla, target);
    } else if (solicited) {
      uint8_t mac[6];
      std::memcpy(mac, e->mac, 6);
      table_.confirm(target, mac, now, /*create=*/false);
    } else {
      ignore(NdIgnore::kNotSolicited, target);
    }
    return 0;
  }
  if (!have_mac) {  // first MAC for the entry: taken whatever O says
    if (solicited) {
      table_.confirm(target, lladdr, now, /*create=*/false);
    } else {
      table_.learn(target, lladdr, now, /*create=*/false);
    }
    return 0;
  }
  const bool same = std::memcmp(e->mac, lladdr, 6) == 0;
  if (!override && !same) {
    table_.make_stale(target);
    ignore(NdIgnore::kOverrideClear, target);
    return 0;
  }
  if (solicited) {
    table_.confirm(target, lladdr, now, /*create=*/false);
  } else {
    if (same) ignore(NdIgnore::kNotSolicited, target);
    table_.learn(target, lladdr, now, /*create=*/false);
  }
  (void)kNaRouter;
  return 0;
}

Resolve Nd::resolve(const uint8_t ip[16], uint64_t now, uint8_t mac_out[6], uint8_t *out,
                    size_t cap, size_t *out_len) noexcept {
  *out_len = 0;
  if (is_local(ip)) {  // our own address (the link-local included): same-port loopback
    std::memcpy(mac_out, mac_, 6);
    return Resolve::kResolved;
  }
  bool probe_now = false, unicast = false;
  const Resolve r = table_.resolve(ip, now, mac_out, &probe_now, &unicast);
  if (probe_now) {
    const NeighTable<16>::Entry *e = table_.find(ip);
    uint8_t group[16], dmac[6];
    const uint8_t *dst = ip;
    if (unicast) {
      std::memcpy(dmac, e->mac, 6);
    } else {
      solicited_node(ip, group);
      multicast_mac(group, dmac);
      dst = group;
    }
    *out_len = build(out, cap, kTypeNs, dmac, source_for(ip), dst, ip, 0);
    if (*out_len) {
      ++c_.tx_ns;
    } else {
      ++c_.tx_no_buffer;
    }
  }
  return r;
}

size_t Nd::poll(uint64_t now, uint8_t *out, size_t cap) noexcept {
  for (;;) {
    const NeighTable<16>::Entry *e = nullptr;
    const auto act = table_.poll(now, &e);
    if (act == NeighTable<16>::Action::kNone) return 0;
    uint8_t group[16], dmac[6];
    const uint8_t *dst = e->ip;
    if (act == NeighTable<16>::Action::kUnicastProbe) {
      std::memcpy(dmac, e->mac, 6);
    } else {
      solicited_node(e->ip, group);
      multicast_mac(group, dmac);
      dst = group;
    }
    const size_t n = build(out, cap, kTypeNs, dmac, source_for(e->ip), dst, e->ip, 0);
    if (n == 0) {
      ++c_.tx_no_buffer;
      continue;
    }
    ++c_.tx_ns;
    return n;
  }
}

size_t Nd::build_unsolicited_na(size_t i, uint8_t *out, size_t cap) noexcept {
  if (i >= addrs_.size()) return 0;
  uint8_t dmac[6];
  multicast_mac(kAllNodes, dmac);
  const size_t n =
      build(out, cap, kTypeNa, dmac, addrs_[i].addr, kAllNodes, addrs_[i].addr, kNaOverride);
  if (n) ++c_.tx_unsolicited_na;
  return n;
}

}  // namespace uroce::port
