// SPDX-License-Identifier: BSD-3-Clause
// Single-bit corruption of valid frames: every bit of every test frame is flipped in turn and
// the parser's verdict is checked against where the bit is (IBTA Annex A17.3.3 says which bytes
// the ICRC covers and which it masks):
//
//   Ethernet header          not covered by the ICRC: MACs and VLAN TCI accepted (only that
//                            field changes); EtherTypes rejected as kNotIp
//   IPv4  +0 ver/IHL         covered: kBadIpVersion / kIpv4Options
//         +1 TOS             masked: kBadIpChecksum; with the IPv4 checksum fixed, accepted
//                            with only DSCP / ECN changed
//         +2..3 total len    covered: a length error or kBadIpChecksum
//         +4..5 id           covered: kBadIpChecksum; checksum fixed: kBadIcrc
//         +6..7 flags/frag   covered: kBadIpChecksum; checksum fixed: kIpFragment (MF, offset)
//                            or kBadIcrc (reserved bit, DF)
//         +8 TTL             masked: kBadIpChecksum; checksum fixed: accepted, TTL changed
//         +9 protocol        covered: kBadIpChecksum; checksum fixed: kNotUdp
//         +10..11 checksum   masked: kBadIpChecksum
//         +12..19 addresses  covered: kBadIpChecksum; checksum fixed: kBadIcrc
//   IPv6  +0 high nibble     version: kBadIpVersion
//         +0 low nibble ..   traffic class (masked): accepted, DSCP / ECN changed
//         +1 high nibble
//         +1 low nibble ..   flow label (masked): accepted, flow label changed
//         +3
//         +4..5 payload len  covered: a length error
//         +6 next header     covered: kNotUdp
//         +7 hop limit       masked: accepted, hop limit changed
//         +8..39 addresses   covered: kBadIcrc
//   UDP   +0..1 sport        covered: kBadIcrc
//         +2..3 dport        covered: kNotRoce
//         +4..5 length       covered: kBadUdpLength
//         +6..7 checksum     masked: kBadUdpChecksum (or accepted if the flip happens to make
//                            it valid); without UDP checksum verification accepted, only the
//                            checksum changed
//   BTH   +4                 masked: accepted, FECN / BECN / reserved bits changed
//         +0..3, +5..11      covered: kBadIcrc
//   after the BTH            extended headers, payload, pad, ICRC: kBadIcrc
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "wire/packet.h"

namespace uroce::wire {

// gtest prints ParseError values by name.
[[maybe_unused]] static void PrintTo(ParseError e, std::ostream *os) {
  *os << parse_error_str(e);
}

namespace {

struct Case {
  const char *name;
  bool ipv6;
  bool vlan;
  uint8_t opcode;
  uint32_t payload_len;
  bool fecn, becn;
};

const Case kCases[] = {
    {"v4 RC_SEND_ONLY 5", false, false, op::kRcSendOnly, 5, false, false},
    {"v4 vlan RC_WRITE_ONLY_IMM 64", false, true, op::kRcWriteOnlyImm, 64, false, false},
    {"v4 RC_SEND_ONLY 0", false, false, op::kRcSendOnly, 0, false, false},
    {"v4 CNP", false, false, op::kCnp, 0, false, true},
    {"v4 vlan RC_CMP_SWAP", false, true, op::kRcCompareSwap, 0, true, false},
    {"v4 RC_READ_RESPONSE_FIRST 1024", false, false, op::kRcReadResponseFirst, 1024, false, false},
    {"v6 UD_SEND_ONLY_IMM 2", true, false, op::kUdSendOnlyImm, 2, false, false},
    {"v6 vlan RC_ACK", true, true, op::kRcAck, 0, false, false},
    {"v6 RC_ATOMIC_ACK", true, false, op::kRcAtomicAck, 0, true, true},
    {"v6 vlan RC_SEND_LAST_INV 1023", true, true, op::kRcSendLastInv, 1023, false, false},
    {"v6 CNP", true, false, op::kCnp, 0, false, true},
    {"v6 UC_WRITE_FIRST 3", true, false, op::kUcWriteFirst, 3, false, false},
};

std::vector<uint8_t> build_case(const Case &c, PathInfo *path) {
  const uint8_t dmac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  const uint8_t smac[6] = {0x02, 0x66, 0x77, 0x88, 0x99, 0xAA};
  std::memcpy(path->dmac, dmac, 6);
  std::memcpy(path->smac, smac, 6);
  path->vlan = c.vlan;
  path->vlan_id = 0x5A5;
  path->vlan_pcp = 5;
  if (c.ipv6) {
    uint8_t a[16] = {0xfd, 0x12, 0x34, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0, 1};
    path->sgid = Gid::from_bytes(a);
    a[15] = 2;
    path->dgid = Gid::from_bytes(a);
  } else {
    path->sgid = Gid::from_ipv4(192, 168, 7, 1);
    path->dgid = Gid::from_ipv4(192, 168, 7, 2);
  }
  path->dscp = 26;
  path->hop_limit = 64;
  path->flow_label = 0x5A5A5;
  path->udp_sport = 0xC123;
  PacketDesc d;
  d.path = path;
  d.ecn = Ecn::kEct0;
  d.ip_id = 0x1234;
  d.f.opcode = c.opcode;
  d.f.solicited = true;
  d.f.pkey = 0xFFFF;
  d.f.fecn = c.fecn;
  d.f.becn = c.becn;
  d.f.dest_qp = 0xABCDEF;
  d.f.ack_req = true;
  d.f.psn = 0x123456;
  d.f.va = 0x1000;
  d.f.rkey = 0x77;
  d.f.dma_len = c.payload_len;
  d.f.swap_add = 1;
  d.f.compare = 2;
  d.f.msn = 3;
  d.f.atomic_orig = 4;
  d.f.imm_be = 0x05060708;
  d.f.inv_rkey = 9;
  d.f.qkey = 0x11111111;
  d.f.src_qp = 0x222;
  d.payload_len = c.payload_len;
  std::vector<uint8_t> payload(c.payload_len);
  for (size_t i = 0; i < payload.size(); ++i)
    payload[i] = static_cast<uint8_t>(i * 13 + 1);
  std::vector<uint8_t> f(frame_size(d));
  const BuildResult r = build_frame(f.data(), f.size(), d, payload.data());
  EXPECT_TRUE(r.ok());
  return f;
}

// What a parse produced, field by field, so that "only this field changed" can be checked.
using Summary = std::map<std::string, uint64_t>;

uint64_t bytes_u64(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v = (v << 8) | p[i];
  return v;
}

Summary summarize(const ParsedPacket &p) {
  Summary s;
  s["frame_len"] = p.frame_len;
  s["vlan"] = p.vlan;
  s["ipv6"] = p.ipv6;
  s["vid"] = p.vlan_id;
  s["pcp"] = p.vlan_pcp;
  s["l3_off"] = p.l3_off;
  s["l4_off"] = p.l4_off;
  s["bth_off"] = p.bth_off;
  s["payload_off"] = p.payload_off;
  s["payload_len"] = p.payload_len;
  s["pad"] = p.pad;
  s["icrc"] = p.icrc;
  s["dmac"] = bytes_u64(p.eth()->dst(), 6);
  s["smac"] = bytes_u64(p.eth()->src(), 6);
  if (p.ipv6) {
    s["dscp"] = p.ipv6h()->dscp();
    s["ecn"] = static_cast<uint64_t>(p.ipv6h()->ecn());
    s["hop"] = p.ipv6h()->hop_limit();
    s["flow"] = p.ipv6h()->flow_label();
  } else {
    s["dscp"] = p.ipv4()->dscp();
    s["ecn"] = static_cast<uint64_t>(p.ipv4()->ecn());
    s["hop"] = p.ipv4()->ttl();
    s["ipid"] = p.ipv4()->id();
  }
  s["sgid_hi"] = bytes_u64(p.sgid().raw, 8);
  s["sgid_lo"] = bytes_u64(p.sgid().raw + 8, 8);
  s["dgid_hi"] = bytes_u64(p.dgid().raw, 8);
  s["dgid_lo"] = bytes_u64(p.dgid().raw + 8, 8);
  s["sport"] = p.udp()->sport();
  s["udp_csum"] = p.udp()->checksum();
  const Bth *b = p.bth();
  s["opcode"] = b->opcode();
  s["se"] = b->solicited();
  s["mig"] = b->mig_req();
  s["pkey"] = b->pkey();
  s["fecn"] = b->fecn();
  s["becn"] = b->becn();
  s["bth_resv6"] = b->resv8a() & 0x3F;
  s["dqpn"] = b->dest_qp();
  s["ackreq"] = b->ack_req();
  s["psn"] = b->psn();
  s["op"] = reinterpret_cast<uintptr_t>(p.op);
  return s;
}

std::set<std::string> changed_keys(const Summary &a, const Summary &b) {
  std::set<std::string> out;
  for (const auto &[k, v] : a) {
    auto it = b.find(k);
    if (it == b.end() || it->second != v) out.insert(k);
  }
  for (const auto &[k, v] : b)
    if (!a.count(k)) out.insert(k);
  return out;
}

// Recomputes the IPv4 header checksum (RFC 791), written here rather than taken from lib/wire.
void reseal_ipv4(uint8_t *ip) {
  ip[10] = ip[11] = 0;
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2)
    sum += (uint32_t{ip[i]} << 8) | ip[i + 1];
  while (sum >> 16)
    sum = (sum & 0xFFFF) + (sum >> 16);
  const uint16_t c = static_cast<uint16_t>(~sum);
  ip[10] = static_cast<uint8_t>(c >> 8);
  ip[11] = static_cast<uint8_t>(c);
}

using Errs = std::set<ParseError>;

class Corruption {
 public:
  explicit Corruption(const Case &c) : c_(c) {
    frame_ = build_case(c, &path_);
    l2_ = c.vlan ? 18 : 14;
    l4_ = l2_ + (c.ipv6 ? 40 : 20);
    bth_ = l4_ + 8;
    ParsedPacket p;
    EXPECT_EQ(parse_frame(frame_.data(), frame_.size(), &p), ParseError::kOk) << c.name;
    base_ = summarize(p);
  }

  void run() {
    for (size_t byte = 0; byte < frame_.size(); ++byte)
      for (int bit = 0; bit < 8; ++bit) {
        classified_ = false;
        check(byte, bit);
        n_classified_ += classified_;
      }
    // Every bit fell into one of the ranges below.
    EXPECT_EQ(n_classified_, frame_.size() * 8) << c_.name;
    EXPECT_GT(n_accepted_, 0u);
    EXPECT_GT(n_icrc_, 0u);
  }

 private:
  // Flips `bit` of `byte` and returns the parse result; `fix_ipv4` recomputes the IPv4
  // checksum after the flip so that only the checks after it can object.
  ParseError parse_flipped(size_t byte, int bit, bool fix_ipv4, Summary *s,
                           uint32_t flags = kParseDefault) {
    std::vector<uint8_t> f = frame_;
    f[byte] ^= static_cast<uint8_t>(1u << bit);
    if (fix_ipv4) reseal_ipv4(f.data() + l2_);
    ParsedPacket p;
    const ParseError e = parse_frame(f.data(), f.size(), &p, flags);
    if (e == ParseError::kOk && s != nullptr) *s = summarize(p);
    return e;
  }

  std::string where(size_t byte, int bit, const char *region) const {
    return std::string(c_.name) + ": byte " + std::to_string(byte) + " bit " + std::to_string(bit) +
           " (" + region + ")";
  }

  void reject(size_t byte, int bit, const char *region, const Errs &allowed, bool fix = false) {
    const ParseError e = parse_flipped(byte, bit, fix, nullptr);
    EXPECT_TRUE(allowed.count(e)) << where(byte, bit, region) << (fix ? " checksum fixed" : "")
                                  << ": got " << parse_error_str(e);
    classified_ = true;
    if (e == ParseError::kBadIcrc) ++n_icrc_;
  }

  // Accepted, and the parse differs from the original in exactly `fields`.
  void accept(size_t byte, int bit, const char *region, const std::set<std::string> &fields,
              bool fix = false, uint32_t flags = kParseDefault) {
    Summary s;
    const ParseError e = parse_flipped(byte, bit, fix, &s, flags);
    classified_ = true;
    ++n_accepted_;
    ASSERT_EQ(e, ParseError::kOk) << where(byte, bit, region) << ": " << parse_error_str(e);
    EXPECT_EQ(changed_keys(base_, s), fields) << where(byte, bit, region);
  }

  void check(size_t byte, int bit) {
    const size_t n = frame_.size();
    // ---- Ethernet: [0, 6) dst MAC, [6, 12) src MAC, [12, 14) EtherType,
    //      with VLAN [14, 16) TCI, [16, 18) inner EtherType. No ICRC coverage.
    if (byte < 6) return accept(byte, bit, "dst MAC", {"dmac"});
    if (byte < 12) return accept(byte, bit, "src MAC", {"smac"});
    if (byte < 14) return reject(byte, bit, "EtherType", {ParseError::kNotIp});
    if (c_.vlan && byte < 18) {
      if (byte >= 16) return reject(byte, bit, "VLAN EtherType", {ParseError::kNotIp});
      const int tci_bit = (byte == 14 ? 8 : 0) + bit;
      if (tci_bit < 12) return accept(byte, bit, "VLAN VID", {"vid"});
      if (tci_bit == 12) return accept(byte, bit, "VLAN DEI", {});
      return accept(byte, bit, "VLAN PCP", {"pcp"});
    }
    // ---- IP header: [l2_, l4_)
    if (byte < l4_) {
      const size_t o = byte - l2_;
      if (!c_.ipv6) {
        const Errs csum = {ParseError::kBadIpChecksum};
        switch (o) {
          case 0:
            return reject(byte, bit, "IPv4 version/IHL",
                          {bit >= 4 ? ParseError::kBadIpVersion : ParseError::kIpv4Options});
          case 1:
            reject(byte, bit, "IPv4 TOS", csum);
            return accept(byte, bit, "IPv4 TOS", {bit >= 2 ? "dscp" : "ecn"}, true);
          case 2:
          case 3:
            reject(
                byte, bit, "IPv4 total length",
                {ParseError::kTruncatedIp, ParseError::kBadIpLength, ParseError::kBadIpChecksum});
            return reject(
                byte, bit, "IPv4 total length",
                {ParseError::kTruncatedIp, ParseError::kBadIpLength, ParseError::kBadUdpLength},
                true);
          case 4:
          case 5:
            reject(byte, bit, "IPv4 id", csum);
            return reject(byte, bit, "IPv4 id", {ParseError::kBadIcrc}, true);
          case 6:
          case 7: {
            reject(byte, bit, "IPv4 flags/fragment", csum);
            const bool rsv_or_df = o == 6 && bit >= 6;
            return reject(byte, bit, "IPv4 flags/fragment",
                          {rsv_or_df ? ParseError::kBadIcrc : ParseError::kIpFragment}, true);
          }
          case 8:
            reject(byte, bit, "IPv4 TTL", csum);
            return accept(byte, bit, "IPv4 TTL", {"hop"}, true);
          case 9:
            reject(byte, bit, "IPv4 protocol", csum);
            return reject(byte, bit, "IPv4 protocol", {ParseError::kNotUdp}, true);
          case 10:
          case 11:
            return reject(byte, bit, "IPv4 checksum", csum);
          default:  // 12..19
            reject(byte, bit, "IPv4 address", csum);
            return reject(byte, bit, "IPv4 address", {ParseError::kBadIcrc}, true);
        }
      }
      if (o == 0 && bit >= 4) return reject(byte, bit, "IPv6 version", {ParseError::kBadIpVersion});
      if (o == 0) return accept(byte, bit, "IPv6 traffic class", {"dscp"});
      if (o == 1 && bit >= 4)
        return accept(byte, bit, "IPv6 traffic class", {bit >= 6 ? "dscp" : "ecn"});
      if (o <= 3) return accept(byte, bit, "IPv6 flow label", {"flow"});
      if (o <= 5)
        return reject(
            byte, bit, "IPv6 payload length",
            {ParseError::kTruncatedIp, ParseError::kBadIpLength, ParseError::kBadUdpLength});
      if (o == 6) return reject(byte, bit, "IPv6 next header", {ParseError::kNotUdp});
      if (o == 7) return accept(byte, bit, "IPv6 hop limit", {"hop"});
      return reject(byte, bit, "IPv6 address", {ParseError::kBadIcrc});  // 8..39
    }
    // ---- UDP header: [l4_, l4_ + 8)
    if (byte < bth_) {
      const size_t o = byte - l4_;
      if (o < 2) return reject(byte, bit, "UDP sport", {ParseError::kBadIcrc});
      if (o < 4) return reject(byte, bit, "UDP dport", {ParseError::kNotRoce});
      if (o < 6) return reject(byte, bit, "UDP length", {ParseError::kBadUdpLength});
      // The checksum was 0 (none); a flipped bit makes it a checksum that almost never
      // verifies. Either way the ICRC does not look at it.
      Summary s;
      const ParseError e = parse_flipped(byte, bit, false, &s);
      EXPECT_TRUE(e == ParseError::kBadUdpChecksum || e == ParseError::kOk)
          << where(byte, bit, "UDP checksum") << ": " << parse_error_str(e);
      if (e == ParseError::kOk) {
        EXPECT_EQ(changed_keys(base_, s), std::set<std::string>{"udp_csum"});
      }
      return accept(byte, bit, "UDP checksum, not verified", {"udp_csum"}, false, kParseVerifyIcrc);
    }
    // ---- BTH: [bth_, bth_ + 12); byte 4 is masked in the ICRC.
    if (byte == bth_ + 4) {
      if (bit == 7) return accept(byte, bit, "BTH FECN", {"fecn"});
      if (bit == 6) return accept(byte, bit, "BTH BECN", {"becn"});
      return accept(byte, bit, "BTH reserved (byte 4)", {"bth_resv6"});
    }
    if (byte < bth_ + 12) return reject(byte, bit, "BTH", {ParseError::kBadIcrc});
    // ---- Extended headers, payload, pad: [bth_ + 12, n - 4); ICRC: [n - 4, n)
    if (byte < n - 4) return reject(byte, bit, "ext headers/payload/pad", {ParseError::kBadIcrc});
    if (byte < n) return reject(byte, bit, "ICRC", {ParseError::kBadIcrc});
    ADD_FAILURE() << where(byte, bit, "unclassified");
  }

  const Case &c_;
  PathInfo path_;
  std::vector<uint8_t> frame_;
  size_t l2_ = 0, l4_ = 0, bth_ = 0;
  Summary base_;
  bool classified_ = false;
  size_t n_classified_ = 0, n_accepted_ = 0, n_icrc_ = 0;
};

TEST(Corruption, EverySingleBitFlipIsCaughtOrHarmless) {
  for (const Case &c : kCases) {
    SCOPED_TRACE(c.name);
    Corruption t(c);
    t.run();
  }
}

// The frames above really have the shapes the cases claim (a case that built the wrong frame
// would make the bit table above check the wrong ranges).
TEST(Corruption, CasesHaveTheIntendedShape) {
  for (const Case &c : kCases) {
    SCOPED_TRACE(c.name);
    PathInfo path;
    const auto f = build_case(c, &path);
    ParsedPacket p;
    ASSERT_EQ(parse_frame(f.data(), f.size(), &p), ParseError::kOk);
    EXPECT_EQ(p.ipv6, c.ipv6);
    EXPECT_EQ(p.vlan, c.vlan);
    EXPECT_EQ(p.l3_off, c.vlan ? 18 : 14);
    EXPECT_EQ(p.bth_off, p.l3_off + (c.ipv6 ? 40 : 20) + 8);
    EXPECT_EQ(p.payload_len, c.payload_len);
    EXPECT_EQ(p.bth()->opcode(), c.opcode);
    EXPECT_EQ(p.bth()->fecn(), c.fecn);
    EXPECT_EQ(p.bth()->becn(), c.becn);
  }
}

}  // namespace
}  // namespace uroce::wire
