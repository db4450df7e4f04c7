// SPDX-License-Identifier: BSD-3-Clause
// lib/cm: bit fields, the MAD header, every CM message's field positions (hand-computed from
// IBTA Tables 106-120, offsets after the 24-byte MAD header), round trips and decode errors.
#include <gtest/gtest.h>

#include <cstring>

#include "cm/bits.h"
#include "cm/cma.h"
#include "cm/msg.h"

namespace uroce::cm {
namespace {

constexpr size_t D = kMadHeaderSize;  // data offset

TEST(CmBits, MsbFirstPositions) {
  uint8_t b[8] = {};
  set(b, Field{1, 5, 2}, 3);
  EXPECT_EQ(b[1], 0x06);
  set(b, Field{1, 7, 1}, 1);
  EXPECT_EQ(b[1], 0x07);
  set(b, Field{2, 0, 20}, 0xABCDE);  // crosses three bytes
  EXPECT_EQ(b[2], 0xAB);
  EXPECT_EQ(b[3], 0xCD);
  EXPECT_EQ(b[4], 0xE0);
  EXPECT_EQ(get(b, Field{2, 0, 20}), 0xABCDEu);
  set(b, Field{4, 2, 6}, 0x3F);  // the low 6 bits of byte 4, the high nibble kept
  EXPECT_EQ(b[4], 0xFF);
  set(b, Field{4, 0, 4}, 0);  // only the high nibble cleared
  EXPECT_EQ(b[4], 0x0F);
  EXPECT_EQ(get(b, Field{1, 5, 2}), 3u);
  set(b, Field{0, 0, 64}, 0x0102030405060708ull);
  EXPECT_EQ(b[0], 0x01);
  EXPECT_EQ(b[7], 0x08);
  EXPECT_EQ(end_of(Field{43, 5, 2}), 44u);
  EXPECT_EQ(end_of(Field{88, 0, 20}), 91u);
}

TEST(CmMad, HeaderBytes) {
  uint8_t m[kMadSize] = {};
  MadHeader h;
  h.tid = 0x1122334455667788ull;
  h.attr_id = static_cast<uint16_t>(AttrId::kRep);
  h.attr_mod = 0xA1B2C3D4;
  write_header(h, m);
  const uint8_t want[24] = {1,    7,    2,    3,    0,    0,    0, 0, 0x11, 0x22, 0x33, 0x44,
                            0x55, 0x66, 0x77, 0x88, 0x00, 0x13, 0, 0, 0xA1, 0xB2, 0xC3, 0xD4};
  EXPECT_EQ(std::memcmp(m, want, 24), 0);
  const MadHeader r = read_header(m);
  EXPECT_EQ(r.tid, h.tid);
  EXPECT_EQ(r.attr_id, 0x13);
  EXPECT_EQ(r.attr_mod, 0xA1B2C3D4u);
}

Req sample_req() {
  Req q;
  q.local_comm_id = 0x01020304;
  q.service_id = service_id(PortSpace::kTcp, 7471);
  q.local_ca_guid = 0x0A0B0C0D0E0F1011ull;
  q.local_qkey = 0x0;
  q.local_qpn = 0xABCDEF;
  q.responder_resources = 0x12;
  q.initiator_depth = 0x34;
  q.remote_cm_response_timeout = 0x17;
  q.transport = Transport::kUc;
  q.e2e_flow_control = true;
  q.starting_psn = 0x654321;
  q.local_cm_response_timeout = 20;
  q.retry_count = 7;
  q.pkey = 0xFFFF;
  q.path_mtu = 3;
  q.rnr_retry_count = 6;
  q.max_cm_retries = 15;
  q.srq = true;
  q.primary.local_gid = wire::Gid::from_ipv4(10, 77, 0, 1);
  q.primary.remote_gid = wire::Gid::from_ipv4(10, 77, 0, 11);
  q.primary.flow_label = 0xFEDCB;
  q.primary.packet_rate = 0x2A;
  q.primary.traffic_class = 0x68;
  q.primary.hop_limit = 64;
  q.primary.sl = 5;
  q.primary.subnet_local = true;
  q.primary.local_ack_timeout = 18;
  q.alternate.local_lid = 0;
  q.alternate.remote_lid = 0;
  for (size_t i = 0; i < kReqPrivate; ++i)
    q.private_data[i] = static_cast<uint8_t>(i + 1);
  return q;
}

// A REQ with no alternate path has alternate LIDs 0, as Linux's ib_cm writes them: it reads a
// non-zero alternate local LID as an alternate path and rejects the REQ (reason 18, invalid
// alternate GID) when that path's all-zero GIDs do not resolve (found against rxe).
TEST(CmMsg, ReqWithoutAlternatePathHasZeroLids) {
  Req q;
  q.local_qpn = 0x11;
  q.path_mtu = 3;
  uint8_t m[kMadSize];
  encode(q, 1, m);
  EXPECT_EQ(m[D + 52], 0xFF);  // primary local LID: permissive (0xFFFF), as the kernel on RoCE
  EXPECT_EQ(m[D + 53], 0xFF);
  for (size_t i = 96; i < 140; ++i)
    EXPECT_EQ(m[D + i], 0x00) << "alternate path byte " << i;
}

TEST(CmMsg, ReqFieldPositions) {
  uint8_t m[kMadSize];
  encode(sample_req(), 0x99, m);
  EXPECT_EQ(m[18 - 2], 0x00);  // attribute id 0x0010 at header bytes 16..17
  EXPECT_EQ(m[17], 0x10);
  EXPECT_EQ(m[D + 0], 0x01);  // local comm id
  EXPECT_EQ(m[D + 3], 0x04);
  // service id 0x0000000001061D2F at data 8..15 (7471 = 0x1D2F)
  const uint8_t sid[8] = {0, 0, 0, 0, 0x01, 0x06, 0x1D, 0x2F};
  EXPECT_EQ(std::memcmp(m + D + 8, sid, 8), 0);
  EXPECT_EQ(m[D + 16], 0x0A);  // CA GUID
  EXPECT_EQ(m[D + 32], 0xAB);  // local QPN, 24 bits at 32
  EXPECT_EQ(m[D + 34], 0xEF);
  EXPECT_EQ(m[D + 35], 0x12);  // responder resources
  EXPECT_EQ(m[D + 39], 0x34);  // initiator depth
  // byte 43: remote CM response timeout 10111, transport 01, end-to-end flow control 1
  EXPECT_EQ(m[D + 43], 0xBB);
  EXPECT_EQ(m[D + 44], 0x65);  // starting PSN
  EXPECT_EQ(m[D + 46], 0x21);
  EXPECT_EQ(m[D + 47], (20 << 3) | 7);  // local CM response timeout, retry count
  EXPECT_EQ(m[D + 48], 0xFF);           // P_Key
  EXPECT_EQ(m[D + 50], (3 << 4) | 6);   // path MTU, RDC 0, RNR retry count
  EXPECT_EQ(m[D + 51], (15 << 4) | 8);  // max CM retries, SRQ, extended transport 0
  EXPECT_EQ(m[D + 52], 0xFF);           // primary local LID 0xFFFF
  EXPECT_EQ(m[D + 56 + 10], 0xFF);      // primary local GID ::ffff:10.77.0.1
  EXPECT_EQ(m[D + 56 + 12], 10);
  EXPECT_EQ(m[D + 72 + 15], 11);  // primary remote GID
  EXPECT_EQ(m[D + 88], 0xFE);     // flow label 0xFEDCB: 20 bits at 88
  EXPECT_EQ(m[D + 89], 0xDC);
  EXPECT_EQ(m[D + 90], 0xB0);
  EXPECT_EQ(m[D + 91], 0x2A);      // packet rate, low 6 bits
  EXPECT_EQ(m[D + 92], 0x68);      // traffic class
  EXPECT_EQ(m[D + 93], 64);        // hop limit
  EXPECT_EQ(m[D + 94], 0x58);      // SL 5, subnet local
  EXPECT_EQ(m[D + 95], 18 << 3);   // local ACK timeout
  EXPECT_EQ(m[D + 96], 0x00);      // alternate local LID 0
  EXPECT_EQ(m[D + 140], 1);        // private data from 140
  EXPECT_EQ(m[kMadSize - 1], 92);  // to the end of the MAD
}

TEST(CmMsg, OtherMessagesFieldPositions) {
  uint8_t m[kMadSize];
  Rej j;
  j.local_comm_id = 5;
  j.remote_comm_id = 6;
  j.message_rejected = 1;
  j.ari_length = 72;
  j.reason = 28;
  j.ari[0] = 0xEE;
  j.private_data[147] = 0xDD;
  encode(j, 1, m);
  EXPECT_EQ(m[17], 0x12);
  EXPECT_EQ(m[D + 8], 0x40);  // message REJected: REP, top two bits
  EXPECT_EQ(m[D + 9], 72 << 1);
  EXPECT_EQ(m[D + 11], 28);
  EXPECT_EQ(m[D + 12], 0xEE);
  EXPECT_EQ(m[kMadSize - 1], 0xDD);

  Rep p;
  p.local_qpn = 0x123456;
  p.starting_psn = 0xABCDEF;
  p.responder_resources = 3;
  p.initiator_depth = 4;
  p.target_ack_delay = 31;
  p.failover_accepted = 2;
  p.e2e_flow_control = true;
  p.rnr_retry_count = 7;
  p.srq = true;
  p.local_ca_guid = 0x1122334455667788ull;
  encode(p, 1, m);
  EXPECT_EQ(m[D + 12], 0x12);
  EXPECT_EQ(m[D + 20], 0xAB);
  EXPECT_EQ(m[D + 24], 3);
  EXPECT_EQ(m[D + 25], 4);
  EXPECT_EQ(m[D + 26], 0xFD);  // 11111 10 1
  EXPECT_EQ(m[D + 27], 0xF0);  // 111 1 0000
  EXPECT_EQ(m[D + 28], 0x11);  // CA GUID at 28 (4-byte aligned only)
  EXPECT_EQ(m[D + 35], 0x88);

  Dreq d;
  d.remote_qpn = 0xC0FFEE;
  encode(d, 1, m);
  EXPECT_EQ(m[17], 0x15);
  EXPECT_EQ(m[D + 8], 0xC0);
  EXPECT_EQ(m[D + 10], 0xEE);

  SidrRep s;
  s.request_id = 9;
  s.status = 2;
  s.info_length = 4;
  s.qpn = 0x000102;
  s.service_id = service_id(PortSpace::kUdp, 1);
  s.qkey = 0x01234567;
  encode(s, 1, m);
  EXPECT_EQ(m[17], 0x18);
  EXPECT_EQ(m[D + 4], 2);
  EXPECT_EQ(m[D + 5], 4);
  EXPECT_EQ(m[D + 10], 0x02);
  EXPECT_EQ(m[D + 12 + 5], 0x11);  // service id ...0111 0001
  EXPECT_EQ(m[D + 20], 0x01);      // Q_Key
  EXPECT_EQ(m[D + 23], 0x67);
}

template <class M>
void expect_round_trip(const M &in) {
  uint8_t m[kMadSize];
  encode(in, 0xABCDEF0123ull, m);
  MadHeader h;
  Message out;
  ASSERT_EQ(decode(m, sizeof m, &h, &out), DecodeError::kOk);
  EXPECT_EQ(h.tid, 0xABCDEF0123ull);
  ASSERT_TRUE(std::holds_alternative<M>(out));
  uint8_t again[kMadSize];
  encode(std::get<M>(out), 0xABCDEF0123ull, again);
  EXPECT_EQ(std::memcmp(m, again, kMadSize), 0);
}

TEST(CmMsg, RoundTripEveryMessage) {
  expect_round_trip(sample_req());
  Mra a;
  a.local_comm_id = 1;
  a.remote_comm_id = 2;
  a.message_mraed = 1;
  a.service_timeout = 31;
  a.private_data[221] = 7;
  expect_round_trip(a);
  Rej j;
  j.reason = 8;
  j.ari_length = 3;
  expect_round_trip(j);
  Rep p;
  p.local_qpn = 0xFFFFFF;
  expect_round_trip(p);
  Rtu r;
  r.private_data[0] = 1;
  expect_round_trip(r);
  Dreq d;
  d.remote_qpn = 17;
  expect_round_trip(d);
  Drep e;
  e.remote_comm_id = 3;
  expect_round_trip(e);
  SidrReq sq;
  sq.service_id = service_id(PortSpace::kUdp, 7174);
  expect_round_trip(sq);
  SidrRep sp;
  sp.qkey = 0x01234567;
  expect_round_trip(sp);
  // Decoded values, not only bytes: a REQ's fields come back as written.
  uint8_t m[kMadSize];
  const Req q = sample_req();
  encode(q, 1, m);
  MadHeader h;
  Message out;
  ASSERT_EQ(decode(m, sizeof m, &h, &out), DecodeError::kOk);
  const Req &g = std::get<Req>(out);
  EXPECT_EQ(g.local_qpn, q.local_qpn);
  EXPECT_EQ(g.transport, Transport::kUc);
  EXPECT_TRUE(g.e2e_flow_control);
  EXPECT_EQ(g.primary.flow_label, q.primary.flow_label);
  EXPECT_EQ(g.primary.remote_gid, q.primary.remote_gid);
  EXPECT_EQ(g.private_data, q.private_data);
}

TEST(CmMsg, DecodeErrors) {
  uint8_t m[kMadSize];
  encode(Rtu{}, 1, m);
  MadHeader h;
  Message out;
  EXPECT_EQ(decode(m, kMadSize - 1, &h, &out), DecodeError::kShort);
  auto with = [&](size_t off, uint8_t v) {
    uint8_t c[kMadSize];
    std::memcpy(c, m, kMadSize);
    c[off] = v;
    return decode(c, kMadSize, &h, &out);
  };
  EXPECT_EQ(with(0, 2), DecodeError::kBadBaseVersion);
  EXPECT_EQ(with(1, 0x04), DecodeError::kNotCm);
  EXPECT_EQ(with(2, 1), DecodeError::kBadClassVersion);
  EXPECT_EQ(with(3, 0x81), DecodeError::kBadMethod);
  EXPECT_EQ(with(5, 1), DecodeError::kBadStatus);
  EXPECT_EQ(with(17, 0x19), DecodeError::kBadAttr);  // LAP: not handled
  EXPECT_EQ(with(17, 0x01), DecodeError::kBadAttr);  // ClassPortInfo
  EXPECT_EQ(with(17, 0xFF), DecodeError::kBadAttr);
  EXPECT_EQ(decode(m, kMadSize + 40, &h, &out), DecodeError::kOk);  // trailing bytes ignored
  Rej j;
  encode(j, 1, m);
  EXPECT_EQ(with(D + 9, 73 << 1), DecodeError::kBadLength);
  EXPECT_EQ(with(D + 9, 72 << 1), DecodeError::kOk);
  SidrRep s;
  encode(s, 1, m);
  EXPECT_EQ(with(D + 5, 73), DecodeError::kBadLength);
}

TEST(CmCma, ServiceIdsAndHeader) {
  EXPECT_EQ(service_id(PortSpace::kTcp, 7471), 0x01061D2Full);
  EXPECT_EQ(service_id(PortSpace::kUdp, 7174), 0x01111C06ull);
  PortSpace ps;
  uint16_t port;
  ASSERT_TRUE(parse_service_id(0x01061D2Full, &ps, &port));
  EXPECT_EQ(ps, PortSpace::kTcp);
  EXPECT_EQ(port, 7471);
  EXPECT_FALSE(parse_service_id(0x1000000001061D2Full, &ps, &port));
  EXPECT_FALSE(parse_service_id(0x01071D2Full, &ps, &port));
  uint8_t b[kCmaHdrSize];
  const CmaHdr h = CmaHdr::ipv4(0x0B004D0A /* 10.77.0.11 in memory order */, 0x9C40, 0x01004D0A);
  write_cma_hdr(h, b);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x40);
  EXPECT_EQ(b[2], 0x9C);
  EXPECT_EQ(b[3], 0x40);
  const uint8_t src[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 77, 0, 11};
  EXPECT_EQ(std::memcmp(b + 4, src, 16), 0);
  EXPECT_EQ(b[20 + 15], 1);
  CmaHdr r;
  ASSERT_TRUE(read_cma_hdr(b, &r));
  EXPECT_EQ(r.ip_version, 4);
  EXPECT_EQ(r.port, 0x9C40);
  b[1] = 0x50;
  EXPECT_FALSE(read_cma_hdr(b, &r));
  b[1] = 0x60;
  EXPECT_TRUE(read_cma_hdr(b, &r));
  b[0] = 0x10;
  EXPECT_FALSE(read_cma_hdr(b, &r));
}

TEST(CmCma, Ipv6HeaderFromGids) {
  // rdma_cm's header over IPv6 (the kernel's cma_format_hdr): IP version 6 in bits 7:4 of
  // byte 1, the active side's port, then both addresses whole, at bytes 4 and 20.
  wire::Gid src, dst;
  const uint8_t s6[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0xff, 0xfe, 0, 0, 0x02};
  const uint8_t d6[16] = {0xfd, 0, 0, 0x86, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
  std::memcpy(src.raw, s6, 16);
  std::memcpy(dst.raw, d6, 16);
  uint8_t b[kCmaHdrSize];
  std::memset(b, 0xAA, sizeof b);
  write_cma_hdr(CmaHdr::of(src, 0x8123, dst), b);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x60);
  EXPECT_EQ(b[2], 0x81);
  EXPECT_EQ(b[3], 0x23);
  EXPECT_EQ(std::memcmp(b + 4, s6, 16), 0);
  EXPECT_EQ(std::memcmp(b + 20, d6, 16), 0);
  CmaHdr r;
  ASSERT_TRUE(read_cma_hdr(b, &r));
  EXPECT_EQ(r.ip_version, 6);
  EXPECT_EQ(r.port, 0x8123);
  EXPECT_EQ(r.src_gid(), src);
  EXPECT_EQ(r.dst_gid(), dst);

  // IPv4-mapped GIDs: version 4, the 4 address bytes last, the 12 before them zero (not the
  // ::ffff prefix), and the GIDs come back mapped.
  const wire::Gid s4 = wire::Gid::from_ipv4(10, 86, 6, 2), d4 = wire::Gid::from_ipv4(10, 86, 6, 1);
  write_cma_hdr(CmaHdr::of(s4, 7174, d4), b);
  EXPECT_EQ(b[1], 0x40);
  const uint8_t a4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 86, 6, 2};
  EXPECT_EQ(std::memcmp(b + 4, a4, 16), 0);
  EXPECT_EQ(b[20 + 10], 0);
  EXPECT_EQ(b[20 + 15], 1);
  ASSERT_TRUE(read_cma_hdr(b, &r));
  EXPECT_EQ(r.ip_version, 4);
  EXPECT_EQ(r.src_gid(), s4);
  EXPECT_EQ(r.dst_gid(), d4);
}

}  // namespace
}  // namespace uroce::cm
