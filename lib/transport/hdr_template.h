// SPDX-License-Identifier: BSD-3-Clause
// A per-QP pre-built header template for the frames of a connected (RC / UC) QP.
//
// Everything from the Ethernet header to the BTH that does not change from packet to packet
// (MACs, VLAN, IP version / TTL / DSCP / addresses / flow label, UDP ports, P_Key, destination
// QP) is written once by lib/wire's build_headers into `b`; a packet then copies those bytes
// and patches what varies: IP total / payload length, IPv4 identification and ECN, the IPv4
// header checksum (from the constant part's partial sum, as build_headers sums it), UDP length,
// BTH opcode / SE / pad count / AckReq / PSN. The caller writes the extended headers and the
// payload and calls wire::finalize_frame as after build_headers. The bytes are identical to
// build_headers' output for the same fields (checked per packet in builds without NDEBUG, see
// req.h / resp_tx.h). finalize_frame takes the ICRC of the headers from `icrc`, the template's
// precomputed state (wire/icrc_prefix.h: exactly the patched bytes above may vary).
//
// The template is built lazily on the first packet and must be invalidated whenever the path,
// the UDP source port or the destination QPN change (modify_qp invalidates it on every call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "wire/hdr.h"
#include "wire/icrc_prefix.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::transport {

struct HdrTemplate {
  // Ethernet + VLAN + IPv6 + UDP + BTH
  static constexpr uint32_t kMaxLen = 14 + 4 + 40 + 8 + 12;
  static constexpr uint32_t kCopy = 80;  // copied whole when the buffer has room (>= kMaxLen)

  uint8_t len = 0;  // bytes up to the end of the BTH; 0: not built
  uint8_t l3_off = 0;
  uint8_t bth_off = 0;
  bool ipv6 = false;
  uint32_t ip_sum = 0;  // IPv4: one's complement sum of the constant header words
  uint8_t b[kCopy] = {};
  wire::IcrcPrefix icrc;  // the ICRC state of these headers, given to finalize_frame

  void invalidate() noexcept { len = 0; }
  bool valid() const noexcept { return len != 0; }

  // False when lib/wire cannot build headers for this path (e.g. mixed address families); the
  // caller then takes the generic path, which reports the same error.
  bool build(const wire::PathInfo &path, uint32_t dest_qp) noexcept {
    len = 0;
    wire::PacketDesc d;
    d.path = &path;
    d.f.opcode = wire::op::kRcAck;  // any valid opcode without payload
    d.f.dest_qp = dest_qp;
    uint8_t tmp[kMaxLen + 16];
    const wire::BuildResult r = wire::build_headers(tmp, sizeof tmp, d);
    if (!r.ok()) return false;
    const uint32_t n = r.payload_off - (wire::opcode_info(d.f.opcode).hdr_len - wire::Bth::kSize);
    std::memcpy(b, tmp, n);
    l3_off = static_cast<uint8_t>(r.l3_off);
    ipv6 = r.ipv6;
    bth_off = static_cast<uint8_t>(n - wire::Bth::kSize);
    if (!ipv6) {
      const uint8_t *ip = b + l3_off;
      // build_headers' ipv4_checksum: 0x4500 | tos, total_len, id, DF, TTL | proto, src, dst.
      ip_sum = 0x4500u + wire::be::load16(ip + 6) + wire::be::load16(ip + 8) +
               wire::be::load16(ip + 12) + wire::be::load16(ip + 14) + wire::be::load16(ip + 16) +
               wire::be::load16(ip + 18);
    }
    icrc.init(b + l3_off, ipv6);
    len = static_cast<uint8_t>(n);
    return true;
  }

  // Writes Ethernet .. BTH for one packet. `o` is opcode_info(opcode) (which must be valid and
  // allow a payload when payload_len > 0, as build_headers checks). The result is what
  // build_headers would return (kBufferTooSmall when cap is too small).
  wire::BuildResult write(uint8_t *buf, size_t cap, const wire::OpcodeInfo &o, uint8_t opcode,
                          uint32_t payload_len, wire::Ecn ecn, uint16_t ip_id, bool se,
                          bool ack_req, uint32_t psn) const noexcept {
    wire::BuildResult r;
    const uint32_t pad = (4 - (payload_len & 3)) & 3;
    const uint32_t l4 = wire::UdpHdr::kSize + o.hdr_len + payload_len + pad + wire::kIcrcSize;
    const uint32_t l3_hdr = ipv6 ? wire::Ipv6Hdr::kSize : wire::Ipv4Hdr::kSize;
    const uint32_t total = l3_off + l3_hdr + l4;
    if (l4 + (ipv6 ? 0 : l3_hdr) > 0xFFFF) return r.err = wire::BuildError::kTooLong, r;
    if (cap < total) return r.err = wire::BuildError::kBufferTooSmall, r;
    if (cap >= kCopy)
      std::memcpy(buf, b, kCopy);
    else
      std::memcpy(buf, b, len);
    uint8_t *ip = buf + l3_off;
    if (ipv6) {
      ip[1] = static_cast<uint8_t>(ip[1] | (static_cast<uint8_t>(ecn) << 4));
      wire::be::store16(ip + 4, static_cast<uint16_t>(l4));
    } else {
      const uint16_t tot = static_cast<uint16_t>(l3_hdr + l4);
      const uint8_t tos = static_cast<uint8_t>(ip[1] | static_cast<uint8_t>(ecn));
      ip[1] = tos;
      wire::be::store16(ip + 2, tot);
      wire::be::store16(ip + 4, ip_id);
      uint32_t sum = ip_sum + tos + tot + ip_id;
      sum = (sum & 0xFFFF) + (sum >> 16);
      sum = (sum & 0xFFFF) + (sum >> 16);
      wire::be::store16(ip + 10, static_cast<uint16_t>(~sum));
    }
    wire::be::store16(ip + l3_hdr + 4, static_cast<uint16_t>(l4));  // UDP length
    uint8_t *bth = buf + bth_off;
    bth[0] = opcode;
    bth[1] = static_cast<uint8_t>((se ? 0x80 : 0) | (pad << 4));
    wire::be::store32(bth + 8, (ack_req ? 0x80000000u : 0u) | (psn & 0xFFFFFF));
    r.l3_off = l3_off;
    r.payload_off = static_cast<uint16_t>(bth_off + o.hdr_len);
    r.payload_len = payload_len;
    r.frame_len = total;
    r.ipv6 = ipv6;
    r.icrc_prefix = &icrc;
    return r;
  }
};

// The cross-check of builds without NDEBUG: are the headers at `buf`, written from a template
// (result `r`), the bytes build_headers writes for the same description `d`?
inline bool same_as_build_headers(const uint8_t *buf, const wire::BuildResult &r,
                                  const wire::PacketDesc &d) noexcept {
  uint8_t ref[HdrTemplate::kMaxLen + 64];
  // Headers only: ref holds them all (at most 78 + 28 bytes); the cap passed is the frame's, so
  // that the size check sees what it saw for the real buffer.
  const wire::BuildResult g = wire::build_headers(ref, r.frame_len, d);
  return g.ok() && g.payload_off == r.payload_off && g.frame_len == r.frame_len &&
         g.l3_off == r.l3_off && g.ipv6 == r.ipv6 && std::memcmp(ref, buf, r.payload_off) == 0;
}

}  // namespace uroce::transport
