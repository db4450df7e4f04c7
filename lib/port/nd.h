// SPDX-License-Identifier: BSD-3-Clause
// IPv6 Neighbor Discovery (RFC 4861 sections 4.3, 4.4, 7) for a port's IPv6 addresses and its
// link-local address (fe80:: + modified EUI-64 of the MAC).
//
// Same shape as Arp: input() takes a received Ethernet frame carrying ICMPv6 and writes the
// Neighbor Advertisement due, if any; resolve() and poll() send Neighbor Solicitations
// (multicast to the solicited-node group while incomplete, unicast when refreshing);
// build_unsolicited_na() announces an address to all nodes. Every received ND message is
// validated as RFC 4861 7.1.1 / 7.1.2 require (hop limit 255, ICMPv6 checksum, code 0, length,
// options, target not multicast, DAD rules). Other ICMPv6 types are counted and ignored.
// No allocation after construction, no exceptions, no locks, no printing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "port/neigh.h"

namespace uroce::port {

struct Ipv6If {
  uint8_t addr[16] = {};
  uint8_t prefix = 64;
};

enum class NdDrop : uint8_t {
  kTruncated,         // shorter than the IPv6 header + the ND message it claims
  kBadIpHeader,       // IPv6 version != 6, or payload length beyond the frame
  kNotIcmpv6,         // next header is not ICMPv6 (extension headers are not supported)
  kBadChecksum,       // ICMPv6 checksum wrong
  kBadHopLimit,       // ND message with hop limit != 255 (RFC 4861: came through a router)
  kBadCode,           // ND message with ICMPv6 code != 0
  kBadLength,         // ND message shorter than 24 bytes
  kBadOption,         // option with length 0 or running past the message
  kMulticastTarget,   // target address is multicast
  kDadWithSlla,       // NS from :: carrying a source link-layer address option
  kDadNotSolicited,   // NS from :: not sent to a solicited-node multicast address
  kSolicitedToMcast,  // NA with the Solicited flag sent to a multicast address
  kBadSourceIp,       // source address multicast
  kLoopedBack,        // Ethernet source is our own MAC
  kNotForUs,          // IPv6 destination is none of ours (nor a group we listen to)
  kTableFull,         // could not learn the sender: neighbour table full
  kCount
};
const char *nd_drop_str(NdDrop d) noexcept;

// A valid Neighbor Advertisement that resolved nothing (RFC 4861 7.2.5), by reason.
enum class NdIgnore : uint8_t {
  kNoEntry,        // target we have no entry for (not asked, or another address): Linux too
  kNoTlla,         // no target link-layer option while we have no MAC for the target
  kNotSolicited,   // S clear with the MAC we already have: not a confirmation
  kOverrideClear,  // O clear and a MAC other than ours: not taken (a reachable entry -> stale)
  kCount
};
const char *nd_ignore_str(NdIgnore i) noexcept;

struct NdCounters {
  uint64_t rx = 0;  // frames handed to input()
  uint64_t rx_ns_for_us = 0;
  uint64_t rx_ns_not_for_us = 0;
  uint64_t rx_na = 0;
  uint64_t rx_other_icmpv6 = 0;  // valid ICMPv6 that is not NS / NA (echo, RA, MLD, ...)
  uint64_t tx_na = 0;
  uint64_t tx_ns = 0;
  uint64_t tx_unsolicited_na = 0;
  uint64_t tx_no_buffer = 0;
  uint64_t conflicts = 0;  // NA or DAD NS for one of our addresses from another node
  uint64_t drops[static_cast<size_t>(NdDrop::kCount)] = {};
  uint64_t na_ignored[static_cast<size_t>(NdIgnore::kCount)] = {};
};

class Nd {
 public:
  static constexpr size_t kNsLen = 14 + 40 + 24 + 8;  // with the source link-layer option
  static constexpr size_t kNaLen = 14 + 40 + 24 + 8;  // with the target link-layer option
  static constexpr uint8_t kIcmpv6 = 58;
  static constexpr uint8_t kTypeNs = 135;
  static constexpr uint8_t kTypeNa = 136;

  // The link-local address is derived from `mac` and always added first.
  Nd(const uint8_t mac[6], std::span<const Ipv6If> addrs, const NeighParams &params = {});

  // Handles one received IPv6 frame whose next header is ICMPv6 (Ethernet header included,
  // untagged). Returns the length of the NA written to `out` (0: nothing to send).
  size_t input(const uint8_t *frame, size_t len, uint64_t now, uint8_t *out, size_t cap) noexcept;

  // As Arp::resolve; one of our own addresses (the link-local included) resolves to our MAC.
  Resolve resolve(const uint8_t ip[16], uint64_t now, uint8_t mac_out[6], uint8_t *out, size_t cap,
                  size_t *out_len) noexcept;
  size_t poll(uint64_t now, uint8_t *out, size_t cap) noexcept;

  // Unsolicited NA (RFC 4861 7.2.6) for address `i` (0 = link-local) to ff02::1, O flag set.
  size_t build_unsolicited_na(size_t i, uint8_t *out, size_t cap) noexcept;

  // Addresses we answer for: [0] is the link-local one.
  size_t num_addrs() const noexcept { return addrs_.size(); }
  const uint8_t *addr(size_t i) const noexcept { return addrs_[i].addr; }
  bool is_local(const uint8_t ip[16]) const noexcept;
  // Whether a frame to this destination is ours: a local address, ff02::1, or the
  // solicited-node group of a local address.
  bool accepts_dst(const uint8_t ip[16]) const noexcept;
  const NdCounters &counters() const noexcept { return c_; }
  const NeighTable<16> &table() const noexcept { return table_; }

  // ff02::1:ffXX:XXXX for `ip`, and the Ethernet group 33:33:ff:XX:XX:XX it maps to.
  static void solicited_node(const uint8_t ip[16], uint8_t group[16]) noexcept;
  static void multicast_mac(const uint8_t group[16], uint8_t mac[6]) noexcept;

 private:
  size_t build(uint8_t *out, size_t cap, uint8_t type, const uint8_t *eth_dst,
               const uint8_t *ip_src, const uint8_t *ip_dst, const uint8_t *target,
               uint8_t na_flags) const noexcept;
  const uint8_t *source_for(const uint8_t ip[16]) const noexcept;
  void drop(NdDrop d) noexcept { ++c_.drops[static_cast<size_t>(d)]; }
  void ignore(NdIgnore i, const uint8_t *target) noexcept {
    ++c_.na_ignored[static_cast<size_t>(i)];
    table_.answer_ignored(target);
  }

  uint8_t mac_[6];
  std::vector<Ipv6If> addrs_;
  NeighTable<16> table_;
  NdCounters c_;
};

}  // namespace uroce::port
