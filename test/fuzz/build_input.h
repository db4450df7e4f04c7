// SPDX-License-Identifier: BSD-3-Clause
// The input format of build_parse_fuzz: a byte string decoded field by field into a PacketDesc,
// its PathInfo, a buffer capacity and a payload. Every byte string decodes (missing bytes read
// as 0), and encode() writes the bytes decode() reads back, so seeds can be made from
// descriptions.
#pragma once

#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "wire/gid.h"
#include "wire/packet.h"

namespace uroce::fuzz {

inline constexpr uint32_t kMaxFuzzPayload = 9000;

struct BuildInput {
  // flags
  bool solicited = false, mig_req = false, fecn = false, becn = false, ack_req = false;
  bool vlan = false, sgid_v6 = false, dgid_v6 = false;
  // ctl
  uint8_t cap_mode = 0;  // 0 exact, 1 short by 1 + slack, 2 long by slack, 3 zero
  bool null_path = false;
  bool null_payload = false;
  uint8_t slack = 0;

  wire::PacketFields f;
  wire::PathInfo path;
  wire::Ecn ecn = wire::Ecn::kNotEct;
  uint16_t ip_id = 0;
  uint32_t payload_len = 0;            // decoded modulo kMaxFuzzPayload + 1
  std::vector<uint8_t> payload_bytes;  // cycled to payload_len; empty: zeros
};

inline BuildInput decode_build_input(const uint8_t *data, size_t size) {
  ByteReader r(data, size);
  BuildInput in;
  in.f.opcode = r.u8();
  const uint8_t fl = r.u8();
  in.solicited = fl & 1;
  in.mig_req = fl & 2;
  in.fecn = fl & 4;
  in.becn = fl & 8;
  in.ack_req = fl & 16;
  in.vlan = fl & 32;
  in.sgid_v6 = fl & 64;
  in.dgid_v6 = fl & 128;
  const uint8_t ctl = r.u8();
  in.cap_mode = ctl & 3;
  in.null_path = ctl & 4;
  in.null_payload = ctl & 8;
  in.slack = r.u8();
  in.f.solicited = in.solicited;
  in.f.mig_req = in.mig_req;
  in.f.fecn = in.fecn;
  in.f.becn = in.becn;
  in.f.ack_req = in.ack_req;
  in.f.pkey = r.u16();
  in.f.dest_qp = r.u32();
  in.f.psn = r.u32();
  in.f.va = r.u64();
  in.f.rkey = r.u32();
  in.f.dma_len = r.u32();
  in.f.swap_add = r.u64();
  in.f.compare = r.u64();
  in.f.syndrome = r.u8();
  in.f.msn = r.u32();
  in.f.atomic_orig = r.u64();
  in.f.imm_be = r.u32();
  in.f.inv_rkey = r.u32();
  in.f.qkey = r.u32();
  in.f.src_qp = r.u32();
  r.bytes(in.path.dmac, 6);
  r.bytes(in.path.smac, 6);
  in.path.vlan = in.vlan;
  in.path.vlan_id = r.u16();
  in.path.vlan_pcp = r.u8();
  uint8_t g[16];
  r.bytes(g, in.sgid_v6 ? 16 : 4);
  in.path.sgid = in.sgid_v6 ? wire::Gid::from_bytes(g) : wire::Gid::from_ipv4(g);
  r.bytes(g, in.dgid_v6 ? 16 : 4);
  in.path.dgid = in.dgid_v6 ? wire::Gid::from_bytes(g) : wire::Gid::from_ipv4(g);
  in.path.dscp = r.u8();
  in.path.hop_limit = r.u8();
  in.path.flow_label = r.u32();
  in.path.udp_sport = r.u16();
  in.ecn = static_cast<wire::Ecn>(r.u8() & 3);
  in.ip_id = r.u16();
  in.payload_len = r.u16() % (kMaxFuzzPayload + 1);
  in.payload_bytes.assign(r.rest(), r.rest() + r.remaining());
  return in;
}

inline std::vector<uint8_t> encode_build_input(const BuildInput &in) {
  std::vector<uint8_t> v;
  ByteWriter<std::vector<uint8_t>> w(&v);
  w.u8(in.f.opcode);
  w.u8(static_cast<uint8_t>(in.solicited | in.mig_req << 1 | in.fecn << 2 | in.becn << 3 |
                            in.ack_req << 4 | in.vlan << 5 | in.sgid_v6 << 6 | in.dgid_v6 << 7));
  w.u8(static_cast<uint8_t>((in.cap_mode & 3) | in.null_path << 2 | in.null_payload << 3));
  w.u8(in.slack);
  w.u16(in.f.pkey);
  w.u32(in.f.dest_qp);
  w.u32(in.f.psn);
  w.u64(in.f.va);
  w.u32(in.f.rkey);
  w.u32(in.f.dma_len);
  w.u64(in.f.swap_add);
  w.u64(in.f.compare);
  w.u8(in.f.syndrome);
  w.u32(in.f.msn);
  w.u64(in.f.atomic_orig);
  w.u32(in.f.imm_be);
  w.u32(in.f.inv_rkey);
  w.u32(in.f.qkey);
  w.u32(in.f.src_qp);
  w.bytes(in.path.dmac, 6);
  w.bytes(in.path.smac, 6);
  w.u16(in.path.vlan_id);
  w.u8(in.path.vlan_pcp);
  if (in.sgid_v6)
    w.bytes(in.path.sgid.raw, 16);
  else
    w.bytes(in.path.sgid.ipv4(), 4);
  if (in.dgid_v6)
    w.bytes(in.path.dgid.raw, 16);
  else
    w.bytes(in.path.dgid.ipv4(), 4);
  w.u8(in.path.dscp);
  w.u8(in.path.hop_limit);
  w.u32(in.path.flow_label);
  w.u16(in.path.udp_sport);
  w.u8(static_cast<uint8_t>(in.ecn));
  w.u16(in.ip_id);
  w.u16(static_cast<uint16_t>(in.payload_len));
  w.bytes(in.payload_bytes.data(), in.payload_bytes.size());
  return v;
}

}  // namespace uroce::fuzz
