// SPDX-License-Identifier: BSD-3-Clause
// RoCE v2 header layouts and their accessors.
//
// Every header is a struct of byte arrays (alignment 1), so a view may be laid over any byte
// position of a frame. Multi-byte fields are stored in network order and are read and written
// only through the accessors below: this file is the only place in uroce where bytes are
// swapped. Reference: IBTA Vol. 1 ch. 9 (BTH and extended transport headers), Annex A17
// (RoCE v2), RFC 791 / 8200 / 768.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace uroce::wire {

namespace be {
// Big-endian loads and stores on unaligned bytes: one byte swap and one unaligned access each
// (a memcpy the compiler turns into a mov), with a byte-wise path for constant evaluation.
// Used by the header accessors below and by the few other wire formats uroce speaks (ARP, ND).
constexpr uint16_t load16(const uint8_t *p) noexcept {
  if (std::is_constant_evaluated()) return static_cast<uint16_t>((uint16_t{p[0]} << 8) | p[1]);
  uint16_t v;
  std::memcpy(&v, p, 2);
  return __builtin_bswap16(v);
}
constexpr uint32_t load24(const uint8_t *p) noexcept {
  return (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2];
}
constexpr uint32_t load32(const uint8_t *p) noexcept {
  if (std::is_constant_evaluated())
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  uint32_t v;
  std::memcpy(&v, p, 4);
  return __builtin_bswap32(v);
}
constexpr uint64_t load64(const uint8_t *p) noexcept {
  if (std::is_constant_evaluated()) return (uint64_t{load32(p)} << 32) | load32(p + 4);
  uint64_t v;
  std::memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}
constexpr void store16(uint8_t *p, uint16_t v) noexcept {
  if (std::is_constant_evaluated()) {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
    return;
  }
  v = __builtin_bswap16(v);
  std::memcpy(p, &v, 2);
}
constexpr void store24(uint8_t *p, uint32_t v) noexcept {
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}
constexpr void store32(uint8_t *p, uint32_t v) noexcept {
  if (std::is_constant_evaluated()) {
    store16(p, static_cast<uint16_t>(v >> 16));
    store16(p + 2, static_cast<uint16_t>(v));
    return;
  }
  v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}
constexpr void store64(uint8_t *p, uint64_t v) noexcept {
  if (std::is_constant_evaluated()) {
    store32(p, static_cast<uint32_t>(v >> 32));
    store32(p + 4, static_cast<uint32_t>(v));
    return;
  }
  v = __builtin_bswap64(v);
  std::memcpy(p, &v, 8);
}
}  // namespace be

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint16_t kRoceV2Port = 4791;

// ECN codepoints (RFC 3168), the low two bits of IPv4 TOS / IPv6 traffic class.
enum class Ecn : uint8_t { kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3 };

using MacAddr = uint8_t[6];

struct EthHdr {
  static constexpr size_t kSize = 14;
  uint8_t dst_[6];
  uint8_t src_[6];
  uint8_t type_[2];

  const uint8_t *dst() const noexcept { return dst_; }
  const uint8_t *src() const noexcept { return src_; }
  void set_dst(const uint8_t *m) noexcept { std::memcpy(dst_, m, 6); }
  void set_src(const uint8_t *m) noexcept { std::memcpy(src_, m, 6); }
  uint16_t ethertype() const noexcept { return be::load16(type_); }
  void set_ethertype(uint16_t t) noexcept { be::store16(type_, t); }
};

// 802.1Q tag as it follows the source MAC: TPID 0x8100 is the EthHdr type; this is TCI + type.
struct VlanHdr {
  static constexpr size_t kSize = 4;
  uint8_t tci_[2];
  uint8_t type_[2];

  uint16_t vid() const noexcept { return be::load16(tci_) & 0x0FFF; }
  uint8_t pcp() const noexcept { return static_cast<uint8_t>(tci_[0] >> 5); }
  void set_tci(uint8_t pcp, uint16_t vid) noexcept {
    be::store16(tci_, static_cast<uint16_t>((uint16_t{pcp} << 13) | (vid & 0x0FFF)));
  }
  uint16_t ethertype() const noexcept { return be::load16(type_); }
  void set_ethertype(uint16_t t) noexcept { be::store16(type_, t); }
};

struct Ipv4Hdr {
  static constexpr size_t kSize = 20;  // without options
  uint8_t ver_ihl_;
  uint8_t tos_;
  uint8_t total_len_[2];
  uint8_t id_[2];
  uint8_t frag_[2];
  uint8_t ttl_;
  uint8_t proto_;
  uint8_t csum_[2];
  uint8_t src_[4];
  uint8_t dst_[4];

  uint8_t version() const noexcept { return ver_ihl_ >> 4; }
  uint8_t ihl() const noexcept { return ver_ihl_ & 0x0F; }  // in 32-bit words
  void set_version_ihl(uint8_t v, uint8_t ihl) noexcept {
    ver_ihl_ = static_cast<uint8_t>((v << 4) | (ihl & 0x0F));
  }
  uint8_t tos() const noexcept { return tos_; }
  uint8_t dscp() const noexcept { return tos_ >> 2; }
  Ecn ecn() const noexcept { return static_cast<Ecn>(tos_ & 3); }
  void set_tos(uint8_t dscp, Ecn ecn) noexcept {
    tos_ = static_cast<uint8_t>((dscp << 2) | static_cast<uint8_t>(ecn));
  }
  void set_ecn(Ecn ecn) noexcept {
    tos_ = static_cast<uint8_t>((tos_ & 0xFC) | static_cast<uint8_t>(ecn));
  }
  uint16_t total_len() const noexcept { return be::load16(total_len_); }
  void set_total_len(uint16_t v) noexcept { be::store16(total_len_, v); }
  uint16_t id() const noexcept { return be::load16(id_); }
  void set_id(uint16_t v) noexcept { be::store16(id_, v); }
  bool dont_fragment() const noexcept { return frag_[0] & 0x40; }
  bool more_fragments() const noexcept { return frag_[0] & 0x20; }
  uint16_t frag_offset() const noexcept { return be::load16(frag_) & 0x1FFF; }
  void set_frag(bool df, bool mf, uint16_t off) noexcept {
    be::store16(frag_,
                static_cast<uint16_t>((df ? 0x4000 : 0) | (mf ? 0x2000 : 0) | (off & 0x1FFF)));
  }
  uint8_t ttl() const noexcept { return ttl_; }
  void set_ttl(uint8_t v) noexcept { ttl_ = v; }
  uint8_t protocol() const noexcept { return proto_; }
  void set_protocol(uint8_t v) noexcept { proto_ = v; }
  uint16_t checksum() const noexcept { return be::load16(csum_); }
  void set_checksum(uint16_t v) noexcept { be::store16(csum_, v); }
  // Addresses are kept as 4 bytes in network order (a.b.c.d == src()[0..3]).
  const uint8_t *src() const noexcept { return src_; }
  const uint8_t *dst() const noexcept { return dst_; }
  void set_src(const uint8_t *a) noexcept { std::memcpy(src_, a, 4); }
  void set_dst(const uint8_t *a) noexcept { std::memcpy(dst_, a, 4); }
  uint32_t src_u32() const noexcept { return be::load32(src_); }
  uint32_t dst_u32() const noexcept { return be::load32(dst_); }

  // One's-complement sum over the header as it stands (checksum field included); 0 when valid.
  uint16_t compute_checksum() const noexcept {
    const uint8_t *p = &ver_ihl_;
    uint32_t sum = 0;
    const size_t n = size_t{ihl()} * 4;
    for (size_t i = 0; i + 1 < n; i += 2)
      sum += be::load16(p + i);
    while (sum >> 16)
      sum = (sum & 0xFFFF) + (sum >> 16);
    return static_cast<uint16_t>(~sum);
  }
  void fill_checksum() noexcept {
    set_checksum(0);
    set_checksum(compute_checksum());
  }
};

struct Ipv6Hdr {
  static constexpr size_t kSize = 40;
  uint8_t vtf_[4];  // version 4 | traffic class 8 | flow label 20
  uint8_t payload_len_[2];
  uint8_t next_hdr_;
  uint8_t hop_limit_;
  uint8_t src_[16];
  uint8_t dst_[16];

  uint8_t version() const noexcept { return vtf_[0] >> 4; }
  uint8_t traffic_class() const noexcept {
    return static_cast<uint8_t>((be::load32(vtf_) >> 20) & 0xFF);
  }
  uint8_t dscp() const noexcept { return traffic_class() >> 2; }
  Ecn ecn() const noexcept { return static_cast<Ecn>(traffic_class() & 3); }
  uint32_t flow_label() const noexcept { return be::load32(vtf_) & 0xFFFFF; }
  void set_vtf(uint8_t tclass, uint32_t flow) noexcept {
    be::store32(vtf_, (6u << 28) | (uint32_t{tclass} << 20) | (flow & 0xFFFFF));
  }
  void set_ecn(Ecn ecn) noexcept {
    const uint8_t tc = static_cast<uint8_t>((traffic_class() & 0xFC) | static_cast<uint8_t>(ecn));
    set_vtf(tc, flow_label());
  }
  uint16_t payload_len() const noexcept { return be::load16(payload_len_); }
  void set_payload_len(uint16_t v) noexcept { be::store16(payload_len_, v); }
  uint8_t next_header() const noexcept { return next_hdr_; }
  void set_next_header(uint8_t v) noexcept { next_hdr_ = v; }
  uint8_t hop_limit() const noexcept { return hop_limit_; }
  void set_hop_limit(uint8_t v) noexcept { hop_limit_ = v; }
  const uint8_t *src() const noexcept { return src_; }
  const uint8_t *dst() const noexcept { return dst_; }
  void set_src(const uint8_t *a) noexcept { std::memcpy(src_, a, 16); }
  void set_dst(const uint8_t *a) noexcept { std::memcpy(dst_, a, 16); }
};

struct UdpHdr {
  static constexpr size_t kSize = 8;
  uint8_t sport_[2];
  uint8_t dport_[2];
  uint8_t len_[2];
  uint8_t csum_[2];

  uint16_t sport() const noexcept { return be::load16(sport_); }
  uint16_t dport() const noexcept { return be::load16(dport_); }
  uint16_t length() const noexcept { return be::load16(len_); }
  uint16_t checksum() const noexcept { return be::load16(csum_); }
  void set_sport(uint16_t v) noexcept { be::store16(sport_, v); }
  void set_dport(uint16_t v) noexcept { be::store16(dport_, v); }
  void set_length(uint16_t v) noexcept { be::store16(len_, v); }
  void set_checksum(uint16_t v) noexcept { be::store16(csum_, v); }
};

// Base Transport Header, IBTA 9.2.
struct Bth {
  static constexpr size_t kSize = 12;
  uint8_t opcode_;
  uint8_t flags_;  // SE | MigReq | PadCnt(2) | TVer(4)
  uint8_t pkey_[2];
  uint8_t resv8a_;  // byte 4: masked (all ones) in the ICRC
  uint8_t dqpn_[3];
  uint8_t apsn_[4];  // AckReq | resv7 | PSN(24)

  uint8_t opcode() const noexcept { return opcode_; }
  void set_opcode(uint8_t v) noexcept { opcode_ = v; }
  bool solicited() const noexcept { return flags_ & 0x80; }
  bool mig_req() const noexcept { return flags_ & 0x40; }
  uint8_t pad_count() const noexcept { return (flags_ >> 4) & 3; }
  uint8_t tver() const noexcept { return flags_ & 0x0F; }
  void set_flags(bool se, bool mig, uint8_t pad, uint8_t tver) noexcept {
    flags_ =
        static_cast<uint8_t>((se ? 0x80 : 0) | (mig ? 0x40 : 0) | ((pad & 3) << 4) | (tver & 0x0F));
  }
  uint16_t pkey() const noexcept { return be::load16(pkey_); }
  void set_pkey(uint16_t v) noexcept { be::store16(pkey_, v); }
  uint8_t resv8a() const noexcept { return resv8a_; }
  void set_resv8a(uint8_t v) noexcept { resv8a_ = v; }
  uint32_t dest_qp() const noexcept { return be::load24(dqpn_); }
  void set_dest_qp(uint32_t v) noexcept { be::store24(dqpn_, v & 0xFFFFFF); }
  bool ack_req() const noexcept { return apsn_[0] & 0x80; }
  uint32_t psn() const noexcept { return be::load32(apsn_) & 0xFFFFFF; }
  void set_ack_psn(bool ackreq, uint32_t psn) noexcept {
    be::store32(apsn_, (ackreq ? 0x80000000u : 0u) | (psn & 0xFFFFFF));
  }
  // FECN / BECN are bits 7 and 6 of byte 4 (IBA 1.2.1 congestion control; the rest of the
  // byte is reserved). Byte 4 is masked in the ICRC, so a switch may set them in flight.
  bool fecn() const noexcept { return resv8a_ & 0x80; }
  bool becn() const noexcept { return resv8a_ & 0x40; }
  void set_fecn_becn(bool f, bool b) noexcept {
    resv8a_ = static_cast<uint8_t>((resv8a_ & 0x3F) | (f ? 0x80 : 0) | (b ? 0x40 : 0));
  }
};

// RDMA Extended Transport Header, IBTA 9.3.3.
struct Reth {
  static constexpr size_t kSize = 16;
  uint8_t va_[8];
  uint8_t rkey_[4];
  uint8_t dmalen_[4];

  uint64_t va() const noexcept { return be::load64(va_); }
  uint32_t rkey() const noexcept { return be::load32(rkey_); }
  uint32_t dma_len() const noexcept { return be::load32(dmalen_); }
  void set(uint64_t va, uint32_t rkey, uint32_t len) noexcept {
    be::store64(va_, va);
    be::store32(rkey_, rkey);
    be::store32(dmalen_, len);
  }
};

// ACK Extended Transport Header, IBTA 9.3.5. Syndrome: bits 7..5 = type (000 ACK, 001 RNR NAK,
// 011 NAK), bits 4..0 = credit count / timer / NAK code.
struct Aeth {
  static constexpr size_t kSize = 4;
  uint8_t smsn_[4];

  uint8_t syndrome() const noexcept { return smsn_[0]; }
  uint32_t msn() const noexcept { return be::load24(smsn_ + 1); }
  void set(uint8_t syndrome, uint32_t msn) noexcept {
    smsn_[0] = syndrome;
    be::store24(smsn_ + 1, msn & 0xFFFFFF);
  }
};

// Atomic Extended Transport Header, IBTA 9.3.4.
struct AtomicEth {
  static constexpr size_t kSize = 28;
  uint8_t va_[8];
  uint8_t rkey_[4];
  uint8_t swap_add_[8];
  uint8_t compare_[8];

  uint64_t va() const noexcept { return be::load64(va_); }
  uint32_t rkey() const noexcept { return be::load32(rkey_); }
  uint64_t swap_add() const noexcept { return be::load64(swap_add_); }
  uint64_t compare() const noexcept { return be::load64(compare_); }
  void set(uint64_t va, uint32_t rkey, uint64_t swap_add, uint64_t compare) noexcept {
    be::store64(va_, va);
    be::store32(rkey_, rkey);
    be::store64(swap_add_, swap_add);
    be::store64(compare_, compare);
  }
};

// Atomic Acknowledge Extended Transport Header, IBTA 9.3.6.
struct AtomicAckEth {
  static constexpr size_t kSize = 8;
  uint8_t orig_[8];

  uint64_t orig() const noexcept { return be::load64(orig_); }
  void set(uint64_t v) noexcept { be::store64(orig_, v); }
};

// Immediate Data Extended Transport Header, IBTA 9.3.7. The value is opaque: it is carried in
// network order end to end (ibv_wc.imm_data is __be32), so no swap happens here.
struct ImmDt {
  static constexpr size_t kSize = 4;
  uint8_t imm_[4];

  uint32_t raw_be() const noexcept {
    uint32_t v;
    std::memcpy(&v, imm_, 4);
    return v;
  }
  void set_raw_be(uint32_t v) noexcept { std::memcpy(imm_, &v, 4); }
  uint32_t value() const noexcept { return be::load32(imm_); }
  void set_value(uint32_t v) noexcept { be::store32(imm_, v); }
};

// Invalidate Extended Transport Header, IBTA 9.3.8.
struct Ieth {
  static constexpr size_t kSize = 4;
  uint8_t rkey_[4];

  uint32_t rkey() const noexcept { return be::load32(rkey_); }
  void set_rkey(uint32_t v) noexcept { be::store32(rkey_, v); }
};

// Datagram Extended Transport Header, IBTA 9.3.2.
struct Deth {
  static constexpr size_t kSize = 8;
  uint8_t qkey_[4];
  uint8_t srcqp_[4];  // resv8 | source QP (24)

  uint32_t qkey() const noexcept { return be::load32(qkey_); }
  uint32_t src_qp() const noexcept { return be::load32(srcqp_) & 0xFFFFFF; }
  void set(uint32_t qkey, uint32_t src_qp) noexcept {
    be::store32(qkey_, qkey);
    be::store32(srcqp_, src_qp & 0xFFFFFF);
  }
};

inline constexpr size_t kIcrcSize = 4;

static_assert(sizeof(EthHdr) == EthHdr::kSize && alignof(EthHdr) == 1);
static_assert(sizeof(VlanHdr) == VlanHdr::kSize && alignof(VlanHdr) == 1);
static_assert(sizeof(Ipv4Hdr) == Ipv4Hdr::kSize && alignof(Ipv4Hdr) == 1);
static_assert(sizeof(Ipv6Hdr) == Ipv6Hdr::kSize && alignof(Ipv6Hdr) == 1);
static_assert(sizeof(UdpHdr) == UdpHdr::kSize && alignof(UdpHdr) == 1);
static_assert(sizeof(Bth) == Bth::kSize && alignof(Bth) == 1);
static_assert(sizeof(Reth) == Reth::kSize && alignof(Reth) == 1);
static_assert(sizeof(Aeth) == Aeth::kSize && alignof(Aeth) == 1);
static_assert(sizeof(AtomicEth) == AtomicEth::kSize && alignof(AtomicEth) == 1);
static_assert(sizeof(AtomicAckEth) == AtomicAckEth::kSize && alignof(AtomicAckEth) == 1);
static_assert(sizeof(ImmDt) == ImmDt::kSize && alignof(ImmDt) == 1);
static_assert(sizeof(Ieth) == Ieth::kSize && alignof(Ieth) == 1);
static_assert(sizeof(Deth) == Deth::kSize && alignof(Deth) == 1);

// Views: lay a header over bytes. The caller guarantees the bytes are there (the parser checks).
template <typename H>
inline H *hdr_at(uint8_t *p) noexcept {
  return reinterpret_cast<H *>(p);
}
template <typename H>
inline const H *hdr_at(const uint8_t *p) noexcept {
  return reinterpret_cast<const H *>(p);
}

}  // namespace uroce::wire
