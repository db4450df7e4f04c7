// SPDX-License-Identifier: BSD-3-Clause
#include "seeds.h"

#include <algorithm>

#include "build_input.h"
#include "wire/hdr.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::fuzz {

namespace {

wire::PathInfo seed_path(bool ipv6, bool vlan) {
  wire::PathInfo p;
  for (uint8_t i = 0; i < 6; ++i) {
    p.dmac[i] = static_cast<uint8_t>(0x10 + i);
    p.smac[i] = static_cast<uint8_t>(0x20 + i);
  }
  p.vlan = vlan;
  p.vlan_id = 100;
  p.vlan_pcp = 5;
  if (ipv6) {
    uint8_t s[16] = {0xFE, 0x80}, d[16] = {0xFE, 0x80};
    s[15] = 1;
    d[15] = 2;
    p.sgid = wire::Gid::from_bytes(s);
    p.dgid = wire::Gid::from_bytes(d);
    p.flow_label = 0x12345;
  } else {
    p.sgid = wire::Gid::from_ipv4(10, 0, 0, 1);
    p.dgid = wire::Gid::from_ipv4(10, 0, 0, 2);
  }
  p.dscp = 26;
  return p;
}

wire::PacketDesc seed_desc(const wire::PathInfo *path, uint8_t opcode, uint32_t payload_len) {
  wire::PacketDesc d;
  d.path = path;
  d.ecn = wire::Ecn::kEct0;
  d.ip_id = 7;
  d.f.opcode = opcode;
  d.f.dest_qp = 0x000123;
  d.f.psn = 0xFFFFF0;
  d.f.ack_req = true;
  d.f.va = 0x00007F0000001000ull;
  d.f.rkey = 0x1234;
  d.f.dma_len = payload_len;
  d.f.swap_add = 1;
  d.f.compare = 2;
  d.f.syndrome = 0x60;
  d.f.msn = 9;
  d.f.atomic_orig = 3;
  d.f.imm_be = 0xAABBCCDD;
  d.f.inv_rkey = 0x4321;
  d.f.qkey = 0x11111111;
  d.f.src_qp = 0x42;
  d.payload_len = payload_len;
  return d;
}

Seed build(const wire::PacketDesc &d) {
  Seed f(wire::frame_size(d));
  std::vector<uint8_t> payload(d.payload_len);
  for (size_t i = 0; i < payload.size(); ++i)
    payload[i] = static_cast<uint8_t>(i);
  const wire::BuildResult r = wire::build_frame(f.data(), f.size(), d, payload.data());
  if (!r.ok()) f.clear();
  return f;
}

Seed with_mode(uint8_t mode, const Seed &frame) {
  Seed s(1 + frame.size());
  s[0] = mode;
  std::copy(frame.begin(), frame.end(), s.begin() + 1);
  return s;
}

}  // namespace

std::vector<Seed> parse_frame_seeds() {
  std::vector<Seed> out;
  for (int code = 0; code < 256; ++code) {
    const wire::OpcodeInfo &o = wire::opcode_info(static_cast<uint8_t>(code));
    if (!o.valid()) continue;
    for (const bool ipv6 : {false, true}) {
      for (const bool vlan : {false, true}) {
        const wire::PathInfo path = seed_path(ipv6, vlan);
        for (const uint32_t len : {0u, 5u, 64u}) {
          if (len != 0 && !o.has(wire::kMaskPayload)) continue;
          const Seed f = build(seed_desc(&path, static_cast<uint8_t>(code), len));
          if (f.empty()) continue;
          out.push_back(with_mode(0, f));    // as built: every check passes
          out.push_back(with_mode(0xF, f));  // every fix-up: mutations stay consistent
          if (vlan || len != (o.has(wire::kMaskPayload) ? 5u : 0u)) continue;
          // Damaged copies, parsed after the ICRC / checksum fix-ups.
          Seed g = f;
          g[g.size() - 5] ^= 0x40;  // payload / header byte: bad ICRC as is
          out.push_back(with_mode(0, g));
          out.push_back(with_mode(0xF, g));
          Seed h = f;
          const size_t bth = 14 + (ipv6 ? 40 : 20) + 8;
          h[bth + 1] |= 0x01;  // TVer 1
          out.push_back(with_mode(0xF, h));
          h = f;
          h[bth + 1] |= 0x30;  // pad count 3
          out.push_back(with_mode(0xF, h));
        }
      }
    }
  }
  // Invalid opcodes in a valid frame shape (the ICRC rewritten so the opcode check is reached).
  const wire::PathInfo path = seed_path(false, false);
  Seed f = build(seed_desc(&path, wire::op::kRcSendOnly, 8));
  for (const uint8_t bad : {0x15, 0x18, 0x2C, 0x40, 0x63, 0x66, 0x80, 0x82, 0xFF}) {
    Seed g = f;
    g[14 + 20 + 8] = bad;
    out.push_back(with_mode(0xF, g));
  }
  // A UDP checksum the fix-up must make valid, and not-RoCE shapes.
  Seed u = f;
  u[14 + 20 + 6] = 0x12;
  out.push_back(with_mode(0xF, u));
  out.push_back(with_mode(0, Seed(f.begin(), f.begin() + 14)));
  Seed arp(42, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  out.push_back(with_mode(0, arp));
  return out;
}

std::vector<Seed> build_parse_seeds() {
  std::vector<Seed> out;
  for (int code = 0; code < 256; ++code) {
    const bool valid = wire::opcode_info(static_cast<uint8_t>(code)).valid();
    if (!valid && code % 17 != 3) continue;  // a sample of invalid opcodes
    const bool payload = wire::opcode_info(static_cast<uint8_t>(code)).has(wire::kMaskPayload);
    for (int variant = 0; variant < 4; ++variant) {
      BuildInput in;
      const bool ipv6 = variant & 1;
      in.path = seed_path(ipv6, variant & 2);
      in.vlan = variant & 2;
      in.sgid_v6 = in.dgid_v6 = ipv6;
      in.f = seed_desc(&in.path, static_cast<uint8_t>(code), 0).f;
      in.f.solicited = variant == 1;
      in.f.fecn = in.f.becn = variant == 2;
      in.solicited = in.f.solicited;
      in.fecn = in.becn = in.f.fecn;
      in.ack_req = in.f.ack_req;
      in.ecn = static_cast<wire::Ecn>(variant);
      in.ip_id = static_cast<uint16_t>(code * 4 + variant);
      in.cap_mode = static_cast<uint8_t>(variant == 3 ? 2 : 0);
      in.slack = static_cast<uint8_t>(code);
      in.payload_len = payload ? static_cast<uint32_t>((code * 131 + variant * 1000) % 9001) : 0;
      in.payload_bytes = {static_cast<uint8_t>(code), 0x5A, 0xA5};
      out.push_back(encode_build_input(in));
    }
  }
  // The error paths: null path, payload on a payload-less opcode, mixed families, short buffer,
  // zero capacity, the largest payload, a null payload pointer.
  BuildInput in;
  in.path = seed_path(false, false);
  in.f = seed_desc(&in.path, wire::op::kRcSendOnly, 0).f;
  in.payload_len = 9000;
  out.push_back(encode_build_input(in));
  in.null_payload = true;
  out.push_back(encode_build_input(in));
  in.null_payload = false;
  in.cap_mode = 1;
  in.slack = 3;
  out.push_back(encode_build_input(in));
  in.cap_mode = 3;
  out.push_back(encode_build_input(in));
  in.cap_mode = 0;
  in.null_path = true;
  out.push_back(encode_build_input(in));
  in.null_path = false;
  in.f.opcode = wire::op::kRcAck;
  in.payload_len = 4;
  out.push_back(encode_build_input(in));
  in.f.opcode = wire::op::kRcSendOnly;
  in.dgid_v6 = true;
  in.path.dgid = seed_path(true, false).dgid;
  out.push_back(encode_build_input(in));
  return out;
}

}  // namespace uroce::fuzz
