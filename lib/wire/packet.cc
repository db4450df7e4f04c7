// SPDX-License-Identifier: BSD-3-Clause
#include "wire/packet.h"

#include <cassert>
#include <cstring>

#include "wire/icrc.h"
#include "wire/icrc_prefix.h"

namespace uroce::wire {

namespace {

constexpr size_t eth_len(bool vlan) noexcept {
  return EthHdr::kSize + (vlan ? VlanHdr::kSize : 0);
}

constexpr uint32_t pad_for(uint32_t payload_len) noexcept {
  return (4 - (payload_len & 3)) & 3;
}

// Length of the UDP datagram (UDP header through ICRC).
constexpr uint64_t l4_len(const OpcodeInfo &o, uint32_t payload_len) noexcept {
  return uint64_t{UdpHdr::kSize} + o.hdr_len + payload_len + pad_for(payload_len) + kIcrcSize;
}

uint32_t sum16(const uint8_t *p, size_t n, uint32_t sum) noexcept {
  size_t i = 0;
  for (; i + 1 < n; i += 2)
    sum += be::load16(p + i);
  if (i < n) sum += uint32_t{p[i]} << 8;
  return sum;
}

uint16_t fold(uint32_t sum) noexcept {
  while (sum >> 16)
    sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

// The header checksum of the IPv4 header build_headers() writes (IHL 5, DF, protocol UDP,
// checksum field 0), summed from the field values. It equals Ipv4Hdr::fill_checksum() on the
// written header but does not read back bytes that were just stored one or two at a time, a
// read that would stall on store forwarding.
uint16_t ipv4_checksum(uint8_t tos, uint16_t total_len, uint16_t id, uint8_t ttl,
                       const uint8_t *src, const uint8_t *dst) noexcept {
  uint32_t sum = 0x4500u | tos;  // version 4, IHL 5
  sum += total_len;
  sum += id;
  sum += 0x4000u;  // DF, offset 0
  sum += (uint32_t{ttl} << 8) | kIpProtoUdp;
  sum += be::load16(src) + be::load16(src + 2) + be::load16(dst) + be::load16(dst + 2);
  return static_cast<uint16_t>(~fold(sum));
}

}  // namespace

size_t frame_size(const PacketDesc &d) noexcept {
  if (d.path == nullptr) return 0;
  const OpcodeInfo &o = opcode_info(d.f.opcode);
  if (!o.valid()) return 0;
  const bool ipv6 = !d.path->sgid.is_v4mapped();
  return eth_len(d.path->vlan) + (ipv6 ? Ipv6Hdr::kSize : Ipv4Hdr::kSize) +
         static_cast<size_t>(l4_len(o, d.payload_len));
}

BuildResult build_headers(uint8_t *buf, size_t cap, const PacketDesc &d) noexcept {
  BuildResult r;
  if (d.path == nullptr) return r.err = BuildError::kNoPath, r;
  const PathInfo &path = *d.path;
  const PacketFields &f = d.f;
  const OpcodeInfo &o = opcode_info(f.opcode);
  if (!o.valid()) return r.err = BuildError::kInvalidOpcode, r;
  if (d.payload_len != 0 && !o.has(kMaskPayload)) return r.err = BuildError::kPayloadNotAllowed, r;
  const bool v4 = path.sgid.is_v4mapped();
  if (v4 != path.dgid.is_v4mapped()) return r.err = BuildError::kMixedFamilies, r;
  const bool ipv6 = !v4;
  const size_t l3_hdr = ipv6 ? Ipv6Hdr::kSize : Ipv4Hdr::kSize;
  const uint64_t l4 = l4_len(o, d.payload_len);
  if (l4 + (ipv6 ? 0 : l3_hdr) > 0xFFFF) return r.err = BuildError::kTooLong, r;
  const size_t l2 = eth_len(path.vlan);
  const size_t total = l2 + l3_hdr + static_cast<size_t>(l4);
  if (cap < total) return r.err = BuildError::kBufferTooSmall, r;

  auto *eth = hdr_at<EthHdr>(buf);
  eth->set_dst(path.dmac);
  eth->set_src(path.smac);
  const uint16_t l3_type = ipv6 ? kEtherTypeIpv6 : kEtherTypeIpv4;
  if (path.vlan) {
    eth->set_ethertype(kEtherTypeVlan);
    auto *vlan = hdr_at<VlanHdr>(buf + EthHdr::kSize);
    vlan->set_tci(path.vlan_pcp, path.vlan_id);
    vlan->set_ethertype(l3_type);
  } else {
    eth->set_ethertype(l3_type);
  }

  uint8_t *l3 = buf + l2;
  const uint8_t tclass = static_cast<uint8_t>((path.dscp << 2) | static_cast<uint8_t>(d.ecn));
  if (ipv6) {
    auto *ip = hdr_at<Ipv6Hdr>(l3);
    ip->set_vtf(tclass, path.flow_label);
    ip->set_payload_len(static_cast<uint16_t>(l4));
    ip->set_next_header(kIpProtoUdp);
    ip->set_hop_limit(path.hop_limit);
    ip->set_src(path.sgid.raw);
    ip->set_dst(path.dgid.raw);
  } else {
    auto *ip = hdr_at<Ipv4Hdr>(l3);
    const uint16_t total_len = static_cast<uint16_t>(l3_hdr + l4);
    ip->set_version_ihl(4, 5);
    ip->set_tos(path.dscp, d.ecn);
    ip->set_total_len(total_len);
    ip->set_id(d.ip_id);
    ip->set_frag(true, false, 0);
    ip->set_ttl(path.hop_limit);
    ip->set_protocol(kIpProtoUdp);
    ip->set_src(path.sgid.ipv4());
    ip->set_dst(path.dgid.ipv4());
    ip->set_checksum(ipv4_checksum(ip->tos(), total_len, d.ip_id, path.hop_limit, path.sgid.ipv4(),
                                   path.dgid.ipv4()));
  }

  uint8_t *l4p = l3 + l3_hdr;
  auto *udp = hdr_at<UdpHdr>(l4p);
  udp->set_sport(path.udp_sport);
  udp->set_dport(kRoceV2Port);
  udp->set_length(static_cast<uint16_t>(l4));
  udp->set_checksum(0);

  uint8_t *bp = l4p + UdpHdr::kSize;
  auto *bth = hdr_at<Bth>(bp);
  bth->set_opcode(f.opcode);
  bth->set_flags(f.solicited, f.mig_req, static_cast<uint8_t>(pad_for(d.payload_len)), 0);
  bth->set_pkey(f.pkey);
  bth->set_resv8a(0);
  bth->set_fecn_becn(f.fecn, f.becn);
  bth->set_dest_qp(f.dest_qp);
  bth->set_ack_psn(f.ack_req, f.psn);

  if (o.off_deth) hdr_at<Deth>(bp + o.off_deth)->set(f.qkey, f.src_qp);
  if (o.off_reth) hdr_at<Reth>(bp + o.off_reth)->set(f.va, f.rkey, f.dma_len);
  if (o.off_atomic_eth)
    hdr_at<AtomicEth>(bp + o.off_atomic_eth)->set(f.va, f.rkey, f.swap_add, f.compare);
  if (o.off_aeth) hdr_at<Aeth>(bp + o.off_aeth)->set(f.syndrome, f.msn);
  if (o.off_atomic_ack) hdr_at<AtomicAckEth>(bp + o.off_atomic_ack)->set(f.atomic_orig);
  if (o.off_imm) hdr_at<ImmDt>(bp + o.off_imm)->set_raw_be(f.imm_be);
  if (o.off_ieth) hdr_at<Ieth>(bp + o.off_ieth)->set_rkey(f.inv_rkey);
  if (o.has(kMaskCnpPad)) std::memset(bp + o.hdr_len - kCnpPadSize, 0, kCnpPadSize);

  r.l3_off = static_cast<uint16_t>(l2);
  r.payload_off = static_cast<uint16_t>(l2 + l3_hdr + UdpHdr::kSize + o.hdr_len);
  r.payload_len = d.payload_len;
  r.frame_len = static_cast<uint32_t>(total);
  r.ipv6 = ipv6;
  return r;
}

void finalize_frame(uint8_t *buf, const BuildResult &r) noexcept {
  const uint32_t pad_off = r.payload_off + r.payload_len;
  const uint32_t icrc_off = r.frame_len - static_cast<uint32_t>(kIcrcSize);
  if (icrc_off > pad_off) {
    if (icrc_off - pad_off < kIcrcSize) {
      // The usual 1..3 pad bytes: one 4-byte store of zeros instead of a memset call. The
      // bytes it writes past the pad are the ICRC's, which is stored below.
      static constexpr uint8_t kZero[kIcrcSize] = {};
      std::memcpy(buf + pad_off, kZero, kIcrcSize);
    } else {
      std::memset(buf + pad_off, 0, icrc_off - pad_off);
    }
  }
  const uint8_t *l3 = buf + r.l3_off;
  const uint32_t icrc = r.icrc_prefix != nullptr ? r.icrc_prefix->compute(l3, icrc_off - r.l3_off)
                                                 : icrc_compute(l3, icrc_off - r.l3_off, r.ipv6);
  assert(icrc == icrc_compute(l3, icrc_off - r.l3_off, r.ipv6));
  icrc_store(buf + icrc_off, icrc);
}

BuildResult build_frame(uint8_t *buf, size_t cap, const PacketDesc &d,
                        const uint8_t *payload) noexcept {
  BuildResult r = build_headers(buf, cap, d);
  if (!r.ok()) return r;
  if (d.payload_len != 0) {
    if (payload != nullptr)
      std::memcpy(buf + r.payload_off, payload, d.payload_len);
    else
      std::memset(buf + r.payload_off, 0, d.payload_len);
  }
  finalize_frame(buf, r);
  return r;
}

uint16_t udp_checksum(const uint8_t *l3, bool ipv6, const uint8_t *udp, size_t udp_len) noexcept {
  uint32_t sum = 0;
  if (ipv6) {
    const auto *ip = hdr_at<Ipv6Hdr>(l3);
    sum = sum16(ip->src(), 16, sum);
    sum = sum16(ip->dst(), 16, sum);
  } else {
    const auto *ip = hdr_at<Ipv4Hdr>(l3);
    sum = sum16(ip->src(), 4, sum);
    sum = sum16(ip->dst(), 4, sum);
  }
  sum += kIpProtoUdp;
  sum += static_cast<uint32_t>(udp_len & 0xFFFF) + static_cast<uint32_t>(udp_len >> 16);
  sum = sum16(udp, 6, sum);  // header without the checksum field
  sum = sum16(udp + UdpHdr::kSize, udp_len - UdpHdr::kSize, sum);
  const uint16_t c = static_cast<uint16_t>(~fold(sum));
  return c == 0 ? 0xFFFF : c;
}

ParseError parse_frame(const uint8_t *buf, size_t len, ParsedPacket *out, uint32_t flags,
                       Transport expect) noexcept {
  ParsedPacket &p = *out;
  p = ParsedPacket{};
  p.frame = buf;
  if (len < EthHdr::kSize) return ParseError::kTruncatedEth;
  size_t off = EthHdr::kSize;
  uint16_t type = hdr_at<EthHdr>(buf)->ethertype();
  if (type == kEtherTypeVlan) {
    if (len < EthHdr::kSize + VlanHdr::kSize) return ParseError::kTruncatedEth;
    const auto *vlan = hdr_at<VlanHdr>(buf + EthHdr::kSize);
    p.vlan = true;
    p.vlan_id = vlan->vid();
    p.vlan_pcp = vlan->pcp();
    type = vlan->ethertype();
    off += VlanHdr::kSize;
  }
  p.l3_off = static_cast<uint16_t>(off);

  size_t l4_avail;  // bytes of the UDP datagram according to the IP header
  if (type == kEtherTypeIpv4) {
    if (len - off < Ipv4Hdr::kSize) return ParseError::kTruncatedIp;
    const auto *ip = hdr_at<Ipv4Hdr>(buf + off);
    if (ip->version() != 4) return ParseError::kBadIpVersion;
    if (ip->ihl() != 5) return ParseError::kIpv4Options;
    const size_t tot = ip->total_len();
    if (tot < Ipv4Hdr::kSize) return ParseError::kBadIpLength;
    if (tot > len - off) return ParseError::kTruncatedIp;
    if (ip->compute_checksum() != 0) return ParseError::kBadIpChecksum;
    if (ip->more_fragments() || ip->frag_offset() != 0) return ParseError::kIpFragment;
    if (ip->protocol() != kIpProtoUdp) return ParseError::kNotUdp;
    l4_avail = tot - Ipv4Hdr::kSize;
    off += Ipv4Hdr::kSize;
  } else if (type == kEtherTypeIpv6) {
    p.ipv6 = true;
    if (len - off < Ipv6Hdr::kSize) return ParseError::kTruncatedIp;
    const auto *ip = hdr_at<Ipv6Hdr>(buf + off);
    if (ip->version() != 6) return ParseError::kBadIpVersion;
    if (ip->next_header() != kIpProtoUdp) return ParseError::kNotUdp;
    l4_avail = ip->payload_len();
    if (l4_avail > len - off - Ipv6Hdr::kSize) return ParseError::kTruncatedIp;
    off += Ipv6Hdr::kSize;
  } else {
    return ParseError::kNotIp;
  }

  p.l4_off = static_cast<uint16_t>(off);
  if (l4_avail < UdpHdr::kSize) return ParseError::kBadIpLength;
  const auto *udp = hdr_at<UdpHdr>(buf + off);
  if (udp->dport() != kRoceV2Port) return ParseError::kNotRoce;
  if (udp->length() != l4_avail) return ParseError::kBadUdpLength;
  if ((flags & kParseVerifyUdpChecksum) && udp->checksum() != 0) {
    if (udp_checksum(buf + p.l3_off, p.ipv6, buf + off, l4_avail) != udp->checksum())
      return ParseError::kBadUdpChecksum;
  }
  // BTH .. ICRC
  const size_t roce_len = l4_avail - UdpHdr::kSize;
  if (roce_len < Bth::kSize + kIcrcSize) return ParseError::kTruncatedBth;
  // Set only now: a ParsedPacket whose frame_len is set always has room for the masked headers
  // and the ICRC (rewrite_icrc relies on it).
  p.frame_len = static_cast<uint32_t>(off + l4_avail);
  p.bth_off = static_cast<uint16_t>(off + UdpHdr::kSize);
  const size_t icrc_off = p.frame_len - kIcrcSize;
  p.icrc = icrc_load(buf + icrc_off);
  // The ICRC is checked before anything above UDP is believed, as a NIC would.
  if ((flags & kParseVerifyIcrc) &&
      icrc_compute(buf + p.l3_off, icrc_off - p.l3_off, p.ipv6) != p.icrc)
    return ParseError::kBadIcrc;

  const auto *bth = hdr_at<Bth>(buf + p.bth_off);
  if (bth->tver() != 0) return ParseError::kBadTver;
  const OpcodeInfo &o = opcode_info(bth->opcode());
  if (!o.valid()) return ParseError::kInvalidOpcode;
  if (expect != Transport::kNone && !opcode_valid_for(expect, bth->opcode()))
    return ParseError::kOpcodeNotForQpType;
  p.op = &o;
  if (roce_len < size_t{o.hdr_len} + kIcrcSize) return ParseError::kTruncatedExt;
  const size_t body = roce_len - o.hdr_len - kIcrcSize;  // payload + pad
  const uint8_t pad = bth->pad_count();
  if (!o.has(kMaskPayload)) {
    if (pad != 0) return ParseError::kBadPadCount;
    if (body != 0) return ParseError::kUnexpectedPayload;
  } else if (pad > body || (body & 3) != 0) {
    // Payload + pad is a whole number of 4-byte words (IBTA 9.2: PadCnt aligns the payload).
    return ParseError::kBadPadCount;
  }
  p.pad = pad;
  p.payload_off = static_cast<uint16_t>(p.bth_off + o.hdr_len);
  p.payload_len = static_cast<uint32_t>(body - pad);
  return ParseError::kOk;
}

bool rewrite_icrc(uint8_t *frame, const ParsedPacket &p) noexcept {
  if (p.frame_len < size_t{p.l3_off} + icrc_masked_len(p.ipv6) + kIcrcSize) return false;
  const uint32_t icrc_off = p.frame_len - static_cast<uint32_t>(kIcrcSize);
  icrc_store(frame + icrc_off, icrc_compute(frame + p.l3_off, icrc_off - p.l3_off, p.ipv6));
  return true;
}

const char *parse_error_str(ParseError e) noexcept {
  switch (e) {
    case ParseError::kOk:
      return "ok";
    case ParseError::kTruncatedEth:
      return "truncated Ethernet header";
    case ParseError::kNotIp:
      return "EtherType is not IPv4 or IPv6";
    case ParseError::kTruncatedIp:
      return "truncated IP packet";
    case ParseError::kBadIpVersion:
      return "IP version does not match EtherType";
    case ParseError::kIpv4Options:
      return "IPv4 header has options (IHL != 5)";
    case ParseError::kBadIpChecksum:
      return "bad IPv4 header checksum";
    case ParseError::kIpFragment:
      return "IPv4 fragment";
    case ParseError::kBadIpLength:
      return "bad IP length";
    case ParseError::kNotUdp:
      return "not UDP";
    case ParseError::kNotRoce:
      return "UDP destination port is not 4791";
    case ParseError::kBadUdpLength:
      return "bad UDP length";
    case ParseError::kBadUdpChecksum:
      return "bad UDP checksum";
    case ParseError::kTruncatedBth:
      return "truncated BTH";
    case ParseError::kBadTver:
      return "BTH transport version is not 0";
    case ParseError::kInvalidOpcode:
      return "invalid opcode";
    case ParseError::kOpcodeNotForQpType:
      return "opcode not valid for the QP type";
    case ParseError::kTruncatedExt:
      return "truncated extended transport header";
    case ParseError::kBadPadCount:
      return "bad pad count";
    case ParseError::kUnexpectedPayload:
      return "payload on an opcode without payload";
    case ParseError::kBadIcrc:
      return "bad ICRC";
    case ParseError::kCount:
      break;
  }
  return "unknown parse error";
}

}  // namespace uroce::wire
