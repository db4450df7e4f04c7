// SPDX-License-Identifier: BSD-3-Clause
// ARP (RFC 826, RFC 5227 for probes and announcements) for a port's IPv4 addresses.
//
// Pure C++ over byte frames: input() takes a received Ethernet frame and writes the reply, if
// one is due, into a buffer the caller provides; poll() produces retransmissions one frame at a
// time; resolve() looks a peer up (kPending: a request goes out on the next poll() call or at
// once through `out`). Frames are padded to the 60-byte Ethernet minimum. No allocation after
// construction, no exceptions, no locks, no printing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "port/neigh.h"

namespace uroce::port {

struct Ipv4If {
  uint8_t addr[4] = {};
  uint8_t prefix = 32;
};

enum class ArpDrop : uint8_t {
  kTruncated,       // shorter than Ethernet + 28-byte ARP for IPv4
  kBadHwType,       // hardware type != 1 (Ethernet)
  kBadProtoType,    // protocol type != 0x0800
  kBadAddrLengths,  // hlen != 6 or plen != 4
  kBadOpcode,       // neither request (1) nor reply (2)
  kBadSenderMac,    // sender hardware address multicast, broadcast or zero
  kLoopedBack,      // sender MAC is our own (our frame came back)
  kBadSenderIp,     // sender IP multicast / broadcast / loopback
  kTableFull,       // could not learn the sender: neighbour table full
  kCount
};
const char *arp_drop_str(ArpDrop d) noexcept;

// A valid ARP reply that resolved nothing, by reason.
enum class ArpIgnore : uint8_t {
  kNoEntry,      // sender IP we have no entry for (not asked, or another address): Linux too
  kLocalSender,  // sender IP is one of ours (also counted in conflicts)
  kZeroSender,   // sender IP 0.0.0.0
  kCount
};
const char *arp_ignore_str(ArpIgnore i) noexcept;

struct ArpCounters {
  uint64_t rx = 0;  // ARP frames handed to input()
  uint64_t rx_requests_for_us = 0;
  uint64_t rx_replies = 0;
  uint64_t rx_not_for_us = 0;  // valid, but neither for our addresses nor a known peer
  uint64_t tx_replies = 0;
  uint64_t tx_requests = 0;  // resolution probes (broadcast and unicast)
  uint64_t tx_gratuitous = 0;
  uint64_t tx_no_buffer = 0;  // a reply was due but `out` was too small / absent
  uint64_t conflicts = 0;     // someone else claims one of our addresses
  uint64_t drops[static_cast<size_t>(ArpDrop::kCount)] = {};
  uint64_t reply_ignored[static_cast<size_t>(ArpIgnore::kCount)] = {};
};

class Arp {
 public:
  static constexpr size_t kFrameLen = 60;  // 14 + 28, padded to the Ethernet minimum

  Arp(const uint8_t mac[6], std::span<const Ipv4If> addrs, const NeighParams &params = {});

  // Handles one received ARP frame (Ethernet header included, EtherType already 0x0806).
  // Returns the length of the reply written to `out` (0: nothing to send).
  size_t input(const uint8_t *frame, size_t len, uint64_t now, uint8_t *out, size_t cap) noexcept;

  // Looks up ip (4 bytes, network order). kPending with a nonzero *out_len: send `out` now.
  // One of our own addresses resolves to our MAC at once (same-port loopback).
  Resolve resolve(const uint8_t ip[4], uint64_t now, uint8_t mac_out[6], uint8_t *out, size_t cap,
                  size_t *out_len) noexcept;

  // Timer work: returns one frame to send (a retransmitted request), or 0 when done for now.
  // Call repeatedly until it returns 0.
  size_t poll(uint64_t now, uint8_t *out, size_t cap) noexcept;

  // Gratuitous ARP announcing address `i` (RFC 5227: request, sender IP = target IP).
  size_t build_gratuitous(size_t i, uint8_t *out, size_t cap) noexcept;

  bool is_local(const uint8_t ip[4]) const noexcept;
  size_t num_addrs() const noexcept { return addrs_.size(); }
  const ArpCounters &counters() const noexcept { return c_; }
  const NeighTable<4> &table() const noexcept { return table_; }

 private:
  size_t build(uint8_t *out, size_t cap, uint16_t op, const uint8_t *eth_dst, const uint8_t *tha,
               const uint8_t *spa, const uint8_t *tpa) const noexcept;
  const uint8_t *source_for(const uint8_t ip[4]) const noexcept;
  void drop(ArpDrop d) noexcept { ++c_.drops[static_cast<size_t>(d)]; }

  uint8_t mac_[6];
  std::vector<Ipv4If> addrs_;
  NeighTable<4> table_;
  ArpCounters c_;
};

}  // namespace uroce::port
