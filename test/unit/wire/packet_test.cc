// SPDX-License-Identifier: BSD-3-Clause
// Round trips and error paths of the frame builder and parser. Byte-exactness against
// independent implementations (scapy, tshark) is checked in scapy_vectors_test and the
// wire_tshark test.
#include "wire/packet.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "wire/icrc.h"

namespace uroce::wire {
namespace {

PathInfo v4_path() {
  PathInfo p;
  const uint8_t d[6] = {0x02, 0, 0, 0, 0, 2}, s[6] = {0x02, 0, 0, 0, 0, 1};
  std::memcpy(p.dmac, d, 6);
  std::memcpy(p.smac, s, 6);
  p.sgid = Gid::from_ipv4(10, 0, 0, 1);
  p.dgid = Gid::from_ipv4(10, 0, 0, 2);
  p.udp_sport = 49152 + 17;
  return p;
}

PathInfo v6_path() {
  PathInfo p = v4_path();
  uint8_t a[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  p.sgid = Gid::from_bytes(a);
  a[15] = 2;
  p.dgid = Gid::from_bytes(a);
  p.flow_label = 0x12345;
  return p;
}

std::vector<uint8_t> build(const PacketDesc &d, BuildResult *res = nullptr) {
  std::vector<uint8_t> buf(frame_size(d) + 16, 0xAA);
  std::vector<uint8_t> payload(d.payload_len);
  for (size_t i = 0; i < payload.size(); ++i)
    payload[i] = static_cast<uint8_t>(i * 7 + 3);
  BuildResult r = build_frame(buf.data(), buf.size(), d, payload.data());
  EXPECT_TRUE(r.ok()) << static_cast<int>(r.err);
  buf.resize(r.frame_len);
  if (res) *res = r;
  return buf;
}

TEST(Packet, WriteOnlyRoundTripIpv4) {
  PathInfo path = v4_path();
  PacketDesc d;
  d.path = &path;
  d.ecn = Ecn::kEct0;
  d.f.opcode = op::kRcWriteOnly;
  d.f.dest_qp = 0x123456;
  d.f.psn = 0xFFFFFF;
  d.f.ack_req = true;
  d.f.va = 0x1122334455667788ull;
  d.f.rkey = 0xdeadbeef;
  d.f.dma_len = 61;
  d.payload_len = 61;
  auto f = build(d);
  EXPECT_EQ(f.size(), 14u + 20 + 8 + 12 + 16 + 61 + 3 + 4);

  ParsedPacket p;
  ASSERT_EQ(parse_frame(f.data(), f.size(), &p), ParseError::kOk);
  EXPECT_FALSE(p.ipv6);
  EXPECT_EQ(p.op, &opcode_info(op::kRcWriteOnly));
  EXPECT_EQ(p.bth()->dest_qp(), 0x123456u);
  EXPECT_EQ(p.bth()->psn(), 0xFFFFFFu);
  EXPECT_TRUE(p.bth()->ack_req());
  EXPECT_EQ(p.bth()->pad_count(), 3);
  EXPECT_EQ(p.reth()->va(), 0x1122334455667788ull);
  EXPECT_EQ(p.reth()->rkey(), 0xdeadbeefu);
  EXPECT_EQ(p.reth()->dma_len(), 61u);
  EXPECT_EQ(p.payload_len, 61u);
  EXPECT_EQ(p.payload()[5], static_cast<uint8_t>(5 * 7 + 3));
  EXPECT_EQ(p.ecn(), Ecn::kEct0);
  EXPECT_EQ(p.udp()->sport(), 49152 + 17);
  EXPECT_EQ(p.udp()->checksum(), 0);
  EXPECT_TRUE(p.ipv4()->dont_fragment());
  EXPECT_EQ(p.sgid(), path.sgid);
  EXPECT_EQ(p.dgid(), path.dgid);
}

TEST(Packet, EveryOpcodeRoundTripsBothFamiliesAndVlan) {
  for (int fam = 0; fam < 2; ++fam) {
    for (int vlan = 0; vlan < 2; ++vlan) {
      PathInfo path = fam ? v6_path() : v4_path();
      path.vlan = vlan;
      path.vlan_id = 100;
      path.vlan_pcp = 3;
      for (int i = 0; i < 256; ++i) {
        const OpcodeInfo &o = opcode_info(static_cast<uint8_t>(i));
        if (!o.valid()) continue;
        PacketDesc d;
        d.path = &path;
        d.f.opcode = static_cast<uint8_t>(i);
        d.f.dest_qp = 77;
        d.f.psn = 12345;
        d.f.imm_be = 0x01020304;
        d.f.syndrome = 0x1F;
        d.f.msn = 0xABCDEF;
        d.f.atomic_orig = 42;
        d.f.qkey = 0x11111111;
        d.f.src_qp = 0x222222;
        d.f.inv_rkey = 0x99;
        d.f.swap_add = 5;
        d.f.compare = 6;
        d.payload_len = o.has(kMaskPayload) ? 1025 : 0;
        auto f = build(d);
        ParsedPacket p;
        ASSERT_EQ(parse_frame(f.data(), f.size(), &p), ParseError::kOk) << o.name;
        EXPECT_EQ(p.ipv6, fam == 1);
        EXPECT_EQ(p.vlan, vlan == 1);
        if (vlan) {
          EXPECT_EQ(p.vlan_id, 100);
        }
        EXPECT_EQ(p.payload_len, d.payload_len);
        EXPECT_EQ(p.bth()->opcode(), i);
        if (o.off_imm) {
          EXPECT_EQ(p.imm()->raw_be(), 0x01020304u);
        }
        if (o.off_aeth) {
          EXPECT_EQ(p.aeth()->msn(), 0xABCDEFu);
        }
        if (o.off_deth) {
          EXPECT_EQ(p.deth()->src_qp(), 0x222222u);
        }
        if (o.off_ieth) {
          EXPECT_EQ(p.ieth()->rkey(), 0x99u);
        }
        if (o.off_atomic_eth) {
          EXPECT_EQ(p.atomic_eth()->compare(), 6u);
        }
        if (o.off_atomic_ack) {
          EXPECT_EQ(p.atomic_ack()->orig(), 42u);
        }
      }
    }
  }
}

TEST(Packet, BuilderRejectsBadDescriptions) {
  PathInfo path = v4_path();
  PacketDesc d;
  uint8_t buf[256];
  EXPECT_EQ(build_frame(buf, sizeof buf, d, nullptr).err, BuildError::kNoPath);
  d.path = &path;
  d.f.opcode = 0x15;
  EXPECT_EQ(build_frame(buf, sizeof buf, d, nullptr).err, BuildError::kInvalidOpcode);
  d.f.opcode = op::kRcAck;
  d.payload_len = 4;
  EXPECT_EQ(build_frame(buf, sizeof buf, d, nullptr).err, BuildError::kPayloadNotAllowed);
  d.f.opcode = op::kRcSendOnly;
  d.payload_len = 1000;
  EXPECT_EQ(build_frame(buf, sizeof buf, d, nullptr).err, BuildError::kBufferTooSmall);
  d.payload_len = 70000;
  EXPECT_EQ(build_frame(buf, sizeof buf, d, nullptr).err, BuildError::kTooLong);
  PathInfo mixed = v4_path();
  mixed.dgid = v6_path().dgid;
  d.path = &mixed;
  d.payload_len = 0;
  EXPECT_EQ(build_frame(buf, sizeof buf, d, nullptr).err, BuildError::kMixedFamilies);
}

class ParseErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = v4_path();
    d_.path = &path_;
    d_.f.opcode = op::kRcSendOnly;
    d_.payload_len = 8;
    frame_ = build(d_);
  }
  ParseError parse(const std::vector<uint8_t> &f, uint32_t flags = kParseDefault) {
    ParsedPacket p;
    return parse_frame(f.data(), f.size(), &p, flags);
  }
  // Fixes IP checksum and ICRC after an edit so that only the intended check fails.
  void reseal(std::vector<uint8_t> &f) {
    hdr_at<Ipv4Hdr>(f.data() + 14)->fill_checksum();
    const size_t icrc_off = f.size() - 4;
    icrc_store(f.data() + icrc_off, icrc_compute(f.data() + 14, icrc_off - 14, false));
  }
  PathInfo path_;
  PacketDesc d_;
  std::vector<uint8_t> frame_;
};

TEST_F(ParseErrors, EveryTruncationIsRejectedWithoutOverread) {
  for (size_t n = 0; n < frame_.size(); ++n) {
    // A heap copy of exactly n bytes so that ASan catches any read past the end.
    std::vector<uint8_t> cut(frame_.begin(), frame_.begin() + static_cast<long>(n));
    cut.shrink_to_fit();
    EXPECT_NE(parse(cut), ParseError::kOk) << n;
  }
}

TEST_F(ParseErrors, PreciseReasons) {
  auto f = frame_;
  f[12] = 0x88;  // EtherType
  EXPECT_EQ(parse(f), ParseError::kNotIp);

  f = frame_;
  f[14] = 0x46;  // IHL 6
  EXPECT_EQ(parse(f), ParseError::kIpv4Options);

  f = frame_;
  f[14 + 10] ^= 1;  // IP checksum
  EXPECT_EQ(parse(f), ParseError::kBadIpChecksum);

  f = frame_;
  f[14 + 9] = 6;  // TCP
  reseal(f);
  EXPECT_EQ(parse(f), ParseError::kNotUdp);

  f = frame_;
  f[14 + 6] |= 0x20;  // more fragments
  reseal(f);
  EXPECT_EQ(parse(f), ParseError::kIpFragment);

  f = frame_;
  f[34 + 3] = 0xB8;  // dport 4792
  EXPECT_EQ(parse(f), ParseError::kNotRoce);

  f = frame_;
  f[34 + 5] -= 1;  // UDP length
  EXPECT_EQ(parse(f), ParseError::kBadUdpLength);

  f = frame_;
  f[34 + 7] = 1;  // non-zero, wrong UDP checksum
  EXPECT_EQ(parse(f), ParseError::kBadUdpChecksum);
  EXPECT_EQ(parse(f, kParseVerifyIcrc), ParseError::kOk);

  f = frame_;
  f[42 + 1] |= 0x01;  // TVer 1
  reseal(f);
  EXPECT_EQ(parse(f), ParseError::kBadTver);

  f = frame_;
  f[42] = 0x15;  // reserved RC opcode
  reseal(f);
  EXPECT_EQ(parse(f), ParseError::kInvalidOpcode);

  f = frame_;
  f[42] = op::kRcAck;  // ACK carrying 8 bytes
  reseal(f);
  EXPECT_EQ(parse(f), ParseError::kUnexpectedPayload);

  f = frame_;
  f[42] = op::kRcWriteOnly;  // needs a RETH: 16 bytes, only 8 + 0 pad are there
  reseal(f);
  EXPECT_EQ(parse(f), ParseError::kTruncatedExt);

  f = frame_;
  f[f.size() - 1] ^= 0x80;
  EXPECT_EQ(parse(f), ParseError::kBadIcrc);
  EXPECT_EQ(parse(f, 0), ParseError::kOk);

  ParsedPacket p;
  EXPECT_EQ(parse_frame(frame_.data(), frame_.size(), &p, kParseDefault, Transport::kUd),
            ParseError::kOpcodeNotForQpType);
}

TEST_F(ParseErrors, PadLargerThanPayload) {
  d_.payload_len = 2;
  auto f = build(d_);                                           // pad 2
  f[42 + 1] = static_cast<uint8_t>((f[42 + 1] & 0xCF) | 0x30);  // claim pad 3 > 2+2? no: body 4
  reseal(f);
  EXPECT_EQ(parse(f), ParseError::kOk);  // pad 3 of body 4 is legal: payload becomes 1 byte
  d_.f.opcode = op::kRcSendOnly;
  d_.payload_len = 0;
  f = build(d_);
  f[42 + 1] |= 0x10;  // pad 1 on an empty body
  reseal(f);
  EXPECT_EQ(parse(f), ParseError::kBadPadCount);
}

TEST_F(ParseErrors, PayloadPlusPadMustBeWholeWords) {
  // 8 payload bytes, pad 0: shorten the body by 3 bytes (IP and UDP lengths follow), so 5 bytes
  // of payload with pad 0 remain: not a multiple of 4.
  auto f = frame_;
  f.erase(f.begin() + 42 + 12 + 5, f.begin() + 42 + 12 + 8);
  hdr_at<Ipv4Hdr>(f.data() + 14)->set_total_len(static_cast<uint16_t>(f.size() - 14));
  hdr_at<UdpHdr>(f.data() + 34)->set_length(static_cast<uint16_t>(f.size() - 34));
  reseal(f);
  EXPECT_EQ(parse(f), ParseError::kBadPadCount);
  // Whatever the pad count says, a 5-byte body is not whole words.
  f[42 + 1] |= 0x10;
  reseal(f);
  EXPECT_EQ(parse(f), ParseError::kBadPadCount);
}

TEST_F(ParseErrors, RewriteIcrcRefusesFramesWithoutRoomForBthAndIcrc) {
  // UDP datagram of 8 + 10 bytes: parse stops at kTruncatedBth and leaves frame_len unset.
  auto f = frame_;
  f.resize(42 + 10);
  hdr_at<Ipv4Hdr>(f.data() + 14)->set_total_len(static_cast<uint16_t>(f.size() - 14));
  hdr_at<Ipv4Hdr>(f.data() + 14)->fill_checksum();
  hdr_at<UdpHdr>(f.data() + 34)->set_length(18);
  f.shrink_to_fit();
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f.data(), f.size(), &p), ParseError::kTruncatedBth);
  EXPECT_EQ(p.frame_len, 0u);
  EXPECT_FALSE(rewrite_icrc(f.data(), p));
  // A frame that parsed far enough is rewritten.
  auto g = frame_;
  g[g.size() - 1] ^= 0xFF;
  ASSERT_EQ(parse_frame(g.data(), g.size(), &p), ParseError::kBadIcrc);
  EXPECT_TRUE(rewrite_icrc(g.data(), p));
  EXPECT_EQ(parse_frame(g.data(), g.size(), &p), ParseError::kOk);
}

TEST(Packet, EthernetPaddingAfterIpIsIgnored) {
  PathInfo path = v4_path();
  PacketDesc d;
  d.path = &path;
  d.f.opcode = op::kRcAck;
  auto f = build(d);
  f.resize(f.size() + 10, 0);  // trailing Ethernet pad / FCS
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f.data(), f.size(), &p), ParseError::kOk);
  EXPECT_EQ(p.frame_len, f.size() - 10);
}

TEST(Packet, UdpChecksumWhenPresentIsVerified) {
  for (auto path : {v4_path(), v6_path()}) {
    PacketDesc d;
    d.path = &path;
    d.f.opcode = op::kRcSendOnly;
    d.payload_len = 33;
    auto f = build(d);
    ParsedPacket p;
    ASSERT_EQ(parse_frame(f.data(), f.size(), &p), ParseError::kOk);
    auto *udp = const_cast<UdpHdr *>(p.udp());
    udp->set_checksum(
        udp_checksum(f.data() + p.l3_off, p.ipv6, f.data() + p.l4_off, udp->length()));
    EXPECT_EQ(parse_frame(f.data(), f.size(), &p), ParseError::kOk);
    f[p.payload_off] ^= 1;  // breaks both: the UDP checksum is checked first
    EXPECT_EQ(parse_frame(f.data(), f.size(), &p), ParseError::kBadUdpChecksum);
  }
}

TEST(Packet, ParseErrorStringsAreDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < static_cast<int>(ParseError::kCount); ++i)
    EXPECT_TRUE(seen.insert(parse_error_str(static_cast<ParseError>(i))).second) << i;
}

}  // namespace
}  // namespace uroce::wire
