// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: arbitrary bytes -> parse_frame, under every combination of the ICRC / UDP
// checksum flags and every Transport expectation.
//
// Input: one mode byte, then the frame. Mode bits ask for fix-ups before parsing, so that the
// fuzzer gets past the checksums to the BTH and extended-header checks:
//   bit 3  set the IP and UDP length fields to the length of the input
//   bit 0  recompute the IPv4 header checksum
//   bit 1  rewrite the ICRC (when the frame has the shape of a RoCE frame up to the UDP length)
//   bit 2  recompute a non-zero UDP checksum (after the ICRC, which it covers)
// (applied in that order). With all four, a mutation that inserts, removes or changes bytes
// still gives a frame whose checksums hold, so the checks after the ICRC get exercised.
// Checked: a kOk result describes a frame that lies within the buffer and adds up
// (payload_off + payload_len + pad + 4 == frame_len, headers where the opcode puts them, every
// accessor readable); results under different flags / expectations relate as the check order
// says; and a parsed frame rebuilt with build_frame parses back to the same fields.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "frame_fixup.h"
#include "fuzz_util.h"
#include "ref_spec.h"
#include "wire/hdr.h"
#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::fuzz {
namespace {

using wire::ParseError;

volatile uint64_t g_sink;

// Checks a kOk result and reads everything it points at.
void check_ok(const uint8_t *buf, size_t len, const wire::ParsedPacket &p, uint32_t flags,
              wire::Transport expect) {
  FUZZ_CHECK(p.frame == buf);
  FUZZ_CHECK(p.frame_len <= len);
  FUZZ_CHECK(p.l3_off == (p.vlan ? 18 : 14));
  FUZZ_CHECK(p.l4_off == p.l3_off + (p.ipv6 ? 40 : 20));
  FUZZ_CHECK(p.bth_off == p.l4_off + 8);
  FUZZ_CHECK(size_t{p.bth_off} + 12 + wire::kIcrcSize <= p.frame_len);

  const wire::EthHdr *eth = p.eth();
  if (p.vlan) {
    FUZZ_CHECK(eth->ethertype() == wire::kEtherTypeVlan);
    const auto *v = wire::hdr_at<wire::VlanHdr>(buf + 14);
    FUZZ_CHECK(v->vid() == p.vlan_id && v->pcp() == p.vlan_pcp);
    FUZZ_CHECK(v->ethertype() == (p.ipv6 ? wire::kEtherTypeIpv6 : wire::kEtherTypeIpv4));
  } else {
    FUZZ_CHECK(eth->ethertype() == (p.ipv6 ? wire::kEtherTypeIpv6 : wire::kEtherTypeIpv4));
  }
  if (p.ipv6) {
    const wire::Ipv6Hdr *ip = p.ipv6h();
    FUZZ_CHECK(ip->version() == 6 && ip->next_header() == wire::kIpProtoUdp);
    FUZZ_CHECK(ip->payload_len() == p.frame_len - p.l4_off);
  } else {
    const wire::Ipv4Hdr *ip = p.ipv4();
    FUZZ_CHECK(ip->version() == 4 && ip->ihl() == 5 && ip->protocol() == wire::kIpProtoUdp);
    FUZZ_CHECK(ip->total_len() == p.frame_len - p.l3_off);
    FUZZ_CHECK(ip->compute_checksum() == 0);
    FUZZ_CHECK(!ip->more_fragments() && ip->frag_offset() == 0);
  }
  const wire::UdpHdr *udp = p.udp();
  FUZZ_CHECK(udp->dport() == wire::kRoceV2Port);
  FUZZ_CHECK(udp->length() == p.frame_len - p.l4_off);

  const wire::Bth *bth = p.bth();
  const uint8_t opcode = bth->opcode();
  const RefOp ref = ref_op(opcode);
  FUZZ_CHECK(ref.valid);
  FUZZ_CHECK(bth->tver() == 0);
  FUZZ_CHECK(ref_valid_for(expect, opcode));
  FUZZ_CHECK(p.op == &wire::opcode_info(opcode) && p.op->valid());
  FUZZ_CHECK(p.op->hdr_len == ref.hdr_len());
  FUZZ_CHECK(p.payload_off == p.bth_off + ref.hdr_len());
  FUZZ_CHECK(size_t{p.payload_off} + p.payload_len + p.pad + wire::kIcrcSize == p.frame_len);
  FUZZ_CHECK(p.pad == bth->pad_count());
  if (!ref.payload) FUZZ_CHECK(p.payload_len == 0 && p.pad == 0);

  const size_t icrc_off = p.frame_len - wire::kIcrcSize;
  FUZZ_CHECK(p.icrc == wire::icrc_load(buf + icrc_off));
  if (flags & wire::kParseVerifyIcrc)
    FUZZ_CHECK(ref_icrc(buf + p.l3_off, icrc_off - p.l3_off, p.ipv6) == p.icrc);

  // Every accessor the opcode allows must be readable (ASan checks the bytes are in the
  // buffer), and must sit where IBTA puts it.
  uint64_t s = eth->dst()[0] + eth->src()[5] + static_cast<uint8_t>(p.ecn());
  s += p.sgid().raw[15] + p.dgid().raw[0];
  s += bth->pkey() + bth->dest_qp() + bth->psn() + bth->fecn() + bth->becn();
  const uint8_t *b = buf + p.bth_off;
  if (ref.deth) {
    FUZZ_CHECK(reinterpret_cast<const uint8_t *>(p.deth()) == b + ref.off_deth());
    s += p.deth()->qkey() + p.deth()->src_qp();
  }
  if (ref.reth) {
    FUZZ_CHECK(reinterpret_cast<const uint8_t *>(p.reth()) == b + ref.off_reth());
    s += p.reth()->va() + p.reth()->rkey() + p.reth()->dma_len();
  }
  if (ref.atomic_eth) {
    FUZZ_CHECK(reinterpret_cast<const uint8_t *>(p.atomic_eth()) == b + ref.off_atomic_eth());
    s += p.atomic_eth()->va() + p.atomic_eth()->compare() + p.atomic_eth()->swap_add();
  }
  if (ref.aeth) {
    FUZZ_CHECK(reinterpret_cast<const uint8_t *>(p.aeth()) == b + ref.off_aeth());
    s += p.aeth()->syndrome() + p.aeth()->msn();
  }
  if (ref.atomic_ack) {
    FUZZ_CHECK(reinterpret_cast<const uint8_t *>(p.atomic_ack()) == b + ref.off_atomic_ack());
    s += p.atomic_ack()->orig();
  }
  if (ref.imm) {
    FUZZ_CHECK(reinterpret_cast<const uint8_t *>(p.imm()) == b + ref.off_imm());
    s += p.imm()->value();
  }
  if (ref.ieth) {
    FUZZ_CHECK(reinterpret_cast<const uint8_t *>(p.ieth()) == b + ref.off_ieth());
    s += p.ieth()->rkey();
  }
  for (uint32_t i = 0; i < p.payload_len + p.pad; ++i)
    s += p.payload()[i];
  g_sink = s;
}

// parse -> build -> parse: the rebuilt frame carries the same fields.
void check_rebuild(const wire::ParsedPacket &p) {
  // An IPv6 frame between IPv4-mapped addresses has no PathInfo: the GID family selects IPv4.
  if (p.ipv6 && (p.sgid().is_v4mapped() || p.dgid().is_v4mapped())) return;
  const RefOp ref = ref_op(p.bth()->opcode());
  wire::PathInfo path;
  std::memcpy(path.dmac, p.eth()->dst(), 6);
  std::memcpy(path.smac, p.eth()->src(), 6);
  path.vlan = p.vlan;
  path.vlan_id = p.vlan_id;
  path.vlan_pcp = p.vlan_pcp;
  path.sgid = p.sgid();
  path.dgid = p.dgid();
  wire::PacketDesc d;
  if (p.ipv6) {
    path.dscp = p.ipv6h()->dscp();
    path.hop_limit = p.ipv6h()->hop_limit();
    path.flow_label = p.ipv6h()->flow_label();
  } else {
    path.dscp = p.ipv4()->dscp();
    path.hop_limit = p.ipv4()->ttl();
    d.ip_id = p.ipv4()->id();
  }
  path.udp_sport = p.udp()->sport();
  d.path = &path;
  d.ecn = p.ecn();
  const wire::Bth *bth = p.bth();
  wire::PacketFields &f = d.f;
  f.opcode = bth->opcode();
  f.solicited = bth->solicited();
  f.mig_req = bth->mig_req();
  f.pkey = bth->pkey();
  f.fecn = bth->fecn();
  f.becn = bth->becn();
  f.dest_qp = bth->dest_qp();
  f.ack_req = bth->ack_req();
  f.psn = bth->psn();
  if (ref.reth) f.va = p.reth()->va(), f.rkey = p.reth()->rkey(), f.dma_len = p.reth()->dma_len();
  if (ref.atomic_eth) {
    f.va = p.atomic_eth()->va();
    f.rkey = p.atomic_eth()->rkey();
    f.swap_add = p.atomic_eth()->swap_add();
    f.compare = p.atomic_eth()->compare();
  }
  if (ref.aeth) f.syndrome = p.aeth()->syndrome(), f.msn = p.aeth()->msn();
  if (ref.atomic_ack) f.atomic_orig = p.atomic_ack()->orig();
  if (ref.imm) f.imm_be = p.imm()->raw_be();
  if (ref.ieth) f.inv_rkey = p.ieth()->rkey();
  if (ref.deth) f.qkey = p.deth()->qkey(), f.src_qp = p.deth()->src_qp();
  d.payload_len = p.payload_len;

  const size_t n = wire::frame_size(d);
  std::unique_ptr<uint8_t[]> out(new uint8_t[n]);
  const wire::BuildResult r = wire::build_frame(out.get(), n, d, p.payload());
  FUZZ_CHECK(r.ok() && r.frame_len == n);
  wire::ParsedPacket q;
  FUZZ_CHECK(wire::parse_frame(out.get(), n, &q) == ParseError::kOk);
  FUZZ_CHECK(q.vlan == p.vlan && q.ipv6 == p.ipv6 && q.op == p.op);
  if (p.vlan) FUZZ_CHECK(q.vlan_id == p.vlan_id && q.vlan_pcp == p.vlan_pcp);
  FUZZ_CHECK(q.sgid() == p.sgid() && q.dgid() == p.dgid() && q.ecn() == p.ecn());
  FUZZ_CHECK(std::memcmp(q.eth()->dst(), p.eth()->dst(), 6) == 0);
  FUZZ_CHECK(std::memcmp(q.eth()->src(), p.eth()->src(), 6) == 0);
  FUZZ_CHECK(q.udp()->sport() == p.udp()->sport());
  const wire::Bth *b2 = q.bth();
  FUZZ_CHECK(b2->opcode() == bth->opcode() && b2->solicited() == bth->solicited());
  FUZZ_CHECK(b2->mig_req() == bth->mig_req() && b2->pkey() == bth->pkey());
  FUZZ_CHECK(b2->fecn() == bth->fecn() && b2->becn() == bth->becn());
  FUZZ_CHECK(b2->dest_qp() == bth->dest_qp() && b2->psn() == bth->psn());
  FUZZ_CHECK(b2->ack_req() == bth->ack_req());
  // The ICRC-covered bytes from the end of the BTH through the payload are identical (the
  // builder zeroes reserved bits: compare field by field where those exist).
  if (ref.deth)
    FUZZ_CHECK(q.deth()->qkey() == p.deth()->qkey() && q.deth()->src_qp() == p.deth()->src_qp());
  const size_t from = ref.off_reth();  // after the DETH
  FUZZ_CHECK(std::memcmp(q.frame + q.bth_off + from, p.frame + p.bth_off + from,
                         ref.hdr_len() - from - (ref.cnp_pad ? 16 : 0)) == 0);
  FUZZ_CHECK(q.payload_len == p.payload_len);
  FUZZ_CHECK(std::memcmp(q.payload(), p.payload(), p.payload_len) == 0);
  FUZZ_CHECK(q.pad == (4 - p.payload_len % 4) % 4);
}

constexpr uint32_t kFlagSets[] = {0, wire::kParseVerifyIcrc, wire::kParseVerifyUdpChecksum,
                                  wire::kParseDefault};

// Errors reported before the transport expectation is looked at.
bool before_expect(ParseError e) {
  return e != ParseError::kOk && e != ParseError::kTruncatedExt && e != ParseError::kBadPadCount &&
         e != ParseError::kUnexpectedPayload;
}

void run_one(const uint8_t *data, size_t size) {
  if (size == 0) return;
  const uint8_t mode = data[0];
  const size_t len = size - 1;
  // Exactly `len` bytes on the heap: a read past the frame is an ASan report.
  std::unique_ptr<uint8_t[]> buf(new uint8_t[len]);
  if (len != 0) std::memcpy(buf.get(), data + 1, len);
  uint8_t *frame = buf.get();

  if (mode & 8) fix_lengths(frame, len);
  if (mode & 1) fix_ipv4_checksum(frame, len);
  if (mode & 6) {
    wire::ParsedPacket shape;
    (void)wire::parse_frame(frame, len, &shape, 0);
    // frame_len is set once the IP and UDP lengths agree; the ICRC needs IP + UDP + BTH + 4.
    const bool roce_shape =
        shape.frame_len != 0 && shape.frame_len <= len &&
        shape.frame_len >= shape.l3_off + wire::icrc_masked_len(shape.ipv6) + wire::kIcrcSize;
    if (roce_shape && (mode & 2)) wire::rewrite_icrc(frame, shape);
    if (roce_shape && (mode & 4)) {
      auto *udp = const_cast<wire::UdpHdr *>(shape.udp());
      if (udp->checksum() != 0)
        udp->set_checksum(wire::udp_checksum(frame + shape.l3_off, shape.ipv6, frame + shape.l4_off,
                                             shape.frame_len - shape.l4_off));
    }
  }

  ParseError res[4][6];
  for (size_t fi = 0; fi < 4; ++fi) {
    for (size_t ti = 0; ti < 6; ++ti) {
      const wire::Transport t = kAllExpectations[ti];
      wire::ParsedPacket p;
      const ParseError e = wire::parse_frame(frame, len, &p, kFlagSets[fi], t);
      FUZZ_CHECK(e < ParseError::kCount);
      res[fi][ti] = e;
      if (e == ParseError::kOk) {
        check_ok(frame, len, p, kFlagSets[fi], t);
        if (fi == 3 && ti == 0) check_rebuild(p);
      }
      // What is set on error is valid.
      FUZZ_CHECK(p.frame == frame && p.frame_len <= len);
      FUZZ_CHECK(p.l3_off <= len && p.l4_off <= len && p.bth_off <= len);
    }
  }
  // Relations between the results.
  for (size_t fi = 0; fi < 4; ++fi) {
    const ParseError none = res[fi][0];
    for (size_t ti = 1; ti < 6; ++ti) {
      const ParseError e = res[fi][ti];
      if (before_expect(none)) {
        FUZZ_CHECK(e == none);
      } else {
        wire::ParsedPacket p;
        (void)wire::parse_frame(frame, len, &p, kFlagSets[fi]);
        FUZZ_CHECK(p.op != nullptr);
        const uint8_t opcode = p.bth()->opcode();
        FUZZ_CHECK(
            e ==
            (ref_valid_for(kAllExpectations[ti], opcode) ? none : ParseError::kOpcodeNotForQpType));
      }
    }
  }
  for (size_t ti = 0; ti < 6; ++ti) {
    // Dropping a verification changes nothing unless that verification was what failed.
    if (res[3][ti] != ParseError::kBadIcrc) FUZZ_CHECK(res[2][ti] == res[3][ti]);
    if (res[1][ti] != ParseError::kBadIcrc) FUZZ_CHECK(res[0][ti] == res[1][ti]);
    if (res[3][ti] != ParseError::kBadUdpChecksum) FUZZ_CHECK(res[1][ti] == res[3][ti]);
    if (res[2][ti] != ParseError::kBadUdpChecksum) FUZZ_CHECK(res[0][ti] == res[2][ti]);
    FUZZ_CHECK(res[0][ti] != ParseError::kBadIcrc && res[0][ti] != ParseError::kBadUdpChecksum);
  }
}

}  // namespace
}  // namespace uroce::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uroce::fuzz::run_one(data, size);
  return 0;
}
