// SPDX-License-Identifier: BSD-3-Clause
// Building and parsing whole RoCE v2 frames:
//   Ethernet [802.1Q] / IPv4 | IPv6 / UDP 4791 / BTH / extended headers / payload / pad / ICRC.
//
// Neither side allocates, throws or reads or writes outside the buffer it is given.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/gid.h"
#include "wire/hdr.h"
#include "wire/opcode.h"

namespace uroce::wire {

// The IPv4 TTL / IPv6 hop limit of RoCE v2 frames. Linux replaces the hop limit of every
// unicast RoCE address vector (modify_qp with an AV, create_ah) with its route's, 64 by
// default (ib_resolve_unicast_gid_dmac), whatever the app set: rxe and ConnectX send TTL 64
// for ibv_rc_pingpong's hop_limit = 1. uroce does the same (lib/daemon path_from_ah).
inline constexpr uint8_t kRoceHopLimit = 64;

// Where a QP's packets go: everything below the BTH that stays the same for a connection.
struct PathInfo {
  uint8_t dmac[6] = {};
  uint8_t smac[6] = {};
  bool vlan = false;
  uint16_t vlan_id = 0;
  uint8_t vlan_pcp = 0;
  Gid sgid;  // IPv4-mapped GIDs select IPv4 framing; both GIDs must be of the same family
  Gid dgid;
  uint8_t dscp = 0;                   // IPv4 TOS / IPv6 traffic class, upper six bits
  uint8_t hop_limit = kRoceHopLimit;  // IPv4 TTL / IPv6 hop limit
  uint32_t flow_label = 0;            // IPv6 only
  uint16_t udp_sport = 0xC000;
};

// Every field a RoCE packet can carry above UDP. Only the fields the opcode uses are written.
struct PacketFields {
  // BTH
  uint8_t opcode = 0;
  bool solicited = false;
  bool mig_req = false;
  uint16_t pkey = 0xFFFF;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;
  bool ack_req = false;
  uint32_t psn = 0;
  // RETH (va, rkey, dma_len) and AtomicETH (va, rkey, swap_add, compare)
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;
  // AETH
  uint8_t syndrome = 0;
  uint32_t msn = 0;
  // AtomicAckETH
  uint64_t atomic_orig = 0;
  // ImmDt, kept in network order as ibv_wc.imm_data
  uint32_t imm_be = 0;
  // IETH
  uint32_t inv_rkey = 0;
  // DETH
  uint32_t qkey = 0;
  uint32_t src_qp = 0;
};

struct PacketDesc {
  const PathInfo *path = nullptr;
  Ecn ecn = Ecn::kNotEct;
  uint16_t ip_id = 0;
  PacketFields f;
  uint32_t payload_len = 0;  // without pad
};

enum class BuildError : uint8_t {
  kOk = 0,
  kNoPath,             // desc.path is null
  kInvalidOpcode,      // not in the opcode table
  kPayloadNotAllowed,  // payload_len > 0 on an opcode without payload
  kMixedFamilies,      // sgid and dgid are not both IPv4-mapped or both IPv6
  kTooLong,            // the frame would not fit the IP length fields
  kBufferTooSmall,     // cap is smaller than the frame
};

class IcrcPrefix;  // wire/icrc_prefix.h

struct BuildResult {
  BuildError err = BuildError::kOk;
  uint16_t l3_off = 0;       // offset of the IP header
  uint16_t payload_off = 0;  // where the payload goes
  uint32_t payload_len = 0;  // without pad
  uint32_t frame_len = 0;    // whole frame, ICRC included
  bool ipv6 = false;
  // Set by a QP's header template (transport/hdr_template.h): finalize_frame computes the ICRC
  // from this precomputed state of the headers; null: from the bytes alone (icrc_compute).
  const IcrcPrefix *icrc_prefix = nullptr;
  bool ok() const noexcept { return err == BuildError::kOk; }
};

// Bytes the frame for `d` will occupy.
size_t frame_size(const PacketDesc &d) noexcept;

// Writes every header of the frame (Ethernet through the extended headers, IPv4 checksum
// computed, UDP checksum 0) into buf. The caller then writes d.payload_len payload bytes at
// buf + result.payload_off and calls finalize_frame() to add the pad and the ICRC.
BuildResult build_headers(uint8_t *buf, size_t cap, const PacketDesc &d) noexcept;

// Writes the pad (zeros) and the ICRC of a frame begun by build_headers().
void finalize_frame(uint8_t *buf, const BuildResult &r) noexcept;

// build_headers + copy of the payload (may be null when payload_len is 0) + finalize_frame.
BuildResult build_frame(uint8_t *buf, size_t cap, const PacketDesc &d,
                        const uint8_t *payload) noexcept;

// ---------------------------------------------------------------------------------------------
// Parsing

enum class ParseError : uint8_t {
  kOk = 0,
  kTruncatedEth,        // shorter than an Ethernet (+VLAN) header
  kNotIp,               // EtherType is neither IPv4 nor IPv6
  kTruncatedIp,         // shorter than the IP header, or than the IP length says
  kBadIpVersion,        // version nibble disagrees with the EtherType
  kIpv4Options,         // IHL != 5 (RoCE v2 frames carry no IPv4 options)
  kBadIpChecksum,       // IPv4 header checksum wrong
  kIpFragment,          // IPv4 fragment (RoCE v2 frames are never fragmented)
  kBadIpLength,         // IP length field inconsistent with the UDP datagram
  kNotUdp,              // IP protocol / next header is not UDP
  kNotRoce,             // UDP destination port is not 4791
  kBadUdpLength,        // UDP length field wrong
  kBadUdpChecksum,      // non-zero UDP checksum that does not verify
  kTruncatedBth,        // no room for BTH + ICRC
  kBadTver,             // BTH transport header version is not 0
  kInvalidOpcode,       // not a defined RC / UC / UD / CNP opcode
  kOpcodeNotForQpType,  // opcode of another transport than the one the caller expects
  kTruncatedExt,        // no room for the extended headers the opcode requires
  kBadPadCount,         // pad bytes on a packet without payload, or more pad than payload
  kUnexpectedPayload,   // payload bytes on an opcode that carries none
  kBadIcrc,             // ICRC mismatch
  kCount
};

const char *parse_error_str(ParseError e) noexcept;

enum ParseFlags : uint32_t {
  kParseVerifyIcrc = 1u << 0,
  kParseVerifyUdpChecksum = 1u << 1,  // verify a non-zero UDP checksum
  kParseDefault = kParseVerifyIcrc | kParseVerifyUdpChecksum,
};

// A parsed frame: offsets into the caller's buffer, valid as long as the buffer is.
struct ParsedPacket {
  const uint8_t *frame = nullptr;
  uint32_t frame_len = 0;  // bytes of the frame proper (Ethernet padding after IP excluded)
  bool vlan = false;
  bool ipv6 = false;
  uint16_t vlan_id = 0;
  uint8_t vlan_pcp = 0;
  uint16_t l3_off = 0;
  uint16_t l4_off = 0;
  uint16_t bth_off = 0;
  uint16_t payload_off = 0;
  uint32_t payload_len = 0;  // without pad
  uint8_t pad = 0;
  uint32_t icrc = 0;
  const OpcodeInfo *op = nullptr;

  const EthHdr *eth() const noexcept { return hdr_at<EthHdr>(frame); }
  const Ipv4Hdr *ipv4() const noexcept { return hdr_at<Ipv4Hdr>(frame + l3_off); }
  const Ipv6Hdr *ipv6h() const noexcept { return hdr_at<Ipv6Hdr>(frame + l3_off); }
  const UdpHdr *udp() const noexcept { return hdr_at<UdpHdr>(frame + l4_off); }
  const Bth *bth() const noexcept { return hdr_at<Bth>(frame + bth_off); }
  // The extended-header accessors must only be called when op->mask has the header.
  const Reth *reth() const noexcept { return hdr_at<Reth>(frame + bth_off + op->off_reth); }
  const Aeth *aeth() const noexcept { return hdr_at<Aeth>(frame + bth_off + op->off_aeth); }
  const AtomicEth *atomic_eth() const noexcept {
    return hdr_at<AtomicEth>(frame + bth_off + op->off_atomic_eth);
  }
  const AtomicAckEth *atomic_ack() const noexcept {
    return hdr_at<AtomicAckEth>(frame + bth_off + op->off_atomic_ack);
  }
  const ImmDt *imm() const noexcept { return hdr_at<ImmDt>(frame + bth_off + op->off_imm); }
  const Ieth *ieth() const noexcept { return hdr_at<Ieth>(frame + bth_off + op->off_ieth); }
  const Deth *deth() const noexcept { return hdr_at<Deth>(frame + bth_off + op->off_deth); }
  const uint8_t *payload() const noexcept { return frame + payload_off; }

  Ecn ecn() const noexcept { return ipv6 ? ipv6h()->ecn() : ipv4()->ecn(); }
  Gid sgid() const noexcept {
    return ipv6 ? Gid::from_bytes(ipv6h()->src()) : Gid::from_ipv4(ipv4()->src());
  }
  Gid dgid() const noexcept {
    return ipv6 ? Gid::from_bytes(ipv6h()->dst()) : Gid::from_ipv4(ipv4()->dst());
  }
};

// Validates a frame and fills `out`. Reads only buf[0, len). On error, `out` holds whatever was
// parsed before the failing check (offsets that are set are valid).
ParseError parse_frame(const uint8_t *buf, size_t len, ParsedPacket *out,
                       uint32_t flags = kParseDefault,
                       Transport expect = Transport::kNone) noexcept;

// Recomputes and rewrites the ICRC of a parsed frame (used by tests and fault injection). Works on
// any ParsedPacket whose frame_len is set (parse got at least past the UDP and BTH length
// checks); returns false, writing nothing, otherwise.
bool rewrite_icrc(uint8_t *frame, const ParsedPacket &p) noexcept;

// UDP checksum over the pseudo header (RFC 768 / RFC 8200 8.1); returns the value to store.
uint16_t udp_checksum(const uint8_t *l3, bool ipv6, const uint8_t *udp, size_t udp_len) noexcept;

}  // namespace uroce::wire
