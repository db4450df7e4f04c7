// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: any PacketDesc / PathInfo (any opcode byte, any field values, payload up to 9000
// bytes, any buffer capacity) -> build_frame. The result must be the BuildError an independent
// reading of the rules predicts; a built frame must be exactly frame_size() bytes, parse with
// kOk, give back every field (as its wire width truncates it), carry the ICRC a separate CRC-32
// computes, be refused by expectations of other transports and, cut short, never parse.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "build_input.h"
#include "fuzz_util.h"
#include "ref_spec.h"
#include "wire/hdr.h"
#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::fuzz {
namespace {

using wire::BuildError;
using wire::ParseError;

struct Expected {
  BuildError err = BuildError::kOk;
  size_t total = 0;  // frame length when the opcode is valid and the path present
};

Expected expect_build(const BuildInput &in, const wire::PacketDesc &d, size_t cap) {
  Expected e;
  const RefOp op = ref_op(in.f.opcode);
  if (d.path == nullptr) return e.err = BuildError::kNoPath, e;
  if (!op.valid) return e.err = BuildError::kInvalidOpcode, e;
  const bool v4 = in.path.sgid.is_v4mapped();
  const size_t pad = (4 - in.payload_len % 4) % 4;
  const size_t l4 = 8 + op.hdr_len() + in.payload_len + pad + 4;
  e.total = (in.vlan ? 18 : 14) + (v4 ? 20 : 40) + l4;
  if (in.payload_len != 0 && !op.payload) return e.err = BuildError::kPayloadNotAllowed, e;
  if (v4 != in.path.dgid.is_v4mapped()) return e.err = BuildError::kMixedFamilies, e;
  if (l4 + (v4 ? 20 : 0) > 0xFFFF) return e.err = BuildError::kTooLong, e;
  if (cap < e.total) return e.err = BuildError::kBufferTooSmall, e;
  return e;
}

size_t capacity(const BuildInput &in, size_t total) {
  switch (in.cap_mode) {
    case 0:
      return total;
    case 1:
      return total > size_t{in.slack} + 1 ? total - in.slack - 1 : 0;
    case 2:
      return total + in.slack;
    default:
      return 0;
  }
}

// Every field of the parsed frame against what was asked for.
void check_fields(const BuildInput &in, const RefOp &op, const wire::ParsedPacket &p,
                  const uint8_t *payload) {
  const wire::PathInfo &path = in.path;
  const wire::PacketFields &f = in.f;
  FUZZ_CHECK(std::memcmp(p.eth()->dst(), path.dmac, 6) == 0);
  FUZZ_CHECK(std::memcmp(p.eth()->src(), path.smac, 6) == 0);
  FUZZ_CHECK(p.vlan == path.vlan);
  if (path.vlan) {
    FUZZ_CHECK(p.vlan_id == (path.vlan_id & 0x0FFF));
    FUZZ_CHECK(p.vlan_pcp == (path.vlan_pcp & 7));
  }
  FUZZ_CHECK(p.ipv6 == !path.sgid.is_v4mapped());
  FUZZ_CHECK(p.sgid() == path.sgid);
  FUZZ_CHECK(p.dgid() == path.dgid);
  FUZZ_CHECK(p.ecn() == in.ecn);
  if (p.ipv6) {
    const wire::Ipv6Hdr *ip = p.ipv6h();
    FUZZ_CHECK(ip->dscp() == (path.dscp & 0x3F));
    FUZZ_CHECK(ip->hop_limit() == path.hop_limit);
    FUZZ_CHECK(ip->flow_label() == (path.flow_label & 0xFFFFF));
    FUZZ_CHECK(ip->payload_len() == p.frame_len - p.l4_off);
  } else {
    const wire::Ipv4Hdr *ip = p.ipv4();
    FUZZ_CHECK(ip->dscp() == (path.dscp & 0x3F));
    FUZZ_CHECK(ip->ttl() == path.hop_limit);
    FUZZ_CHECK(ip->id() == in.ip_id);
    FUZZ_CHECK(ip->dont_fragment() && !ip->more_fragments() && ip->frag_offset() == 0);
    FUZZ_CHECK(ip->total_len() == p.frame_len - p.l3_off);
    FUZZ_CHECK(ip->compute_checksum() == 0);
  }
  FUZZ_CHECK(p.udp()->sport() == path.udp_sport);
  FUZZ_CHECK(p.udp()->dport() == wire::kRoceV2Port);
  FUZZ_CHECK(p.udp()->length() == p.frame_len - p.l4_off);
  FUZZ_CHECK(p.udp()->checksum() == 0);

  const wire::Bth *bth = p.bth();
  FUZZ_CHECK(bth->opcode() == f.opcode);
  FUZZ_CHECK(bth->solicited() == f.solicited);
  FUZZ_CHECK(bth->mig_req() == f.mig_req);
  FUZZ_CHECK(bth->tver() == 0);
  FUZZ_CHECK(bth->pkey() == f.pkey);
  FUZZ_CHECK(bth->fecn() == f.fecn);
  FUZZ_CHECK(bth->becn() == f.becn);
  FUZZ_CHECK((bth->resv8a() & 0x3F) == 0);
  FUZZ_CHECK(bth->dest_qp() == (f.dest_qp & 0xFFFFFF));
  FUZZ_CHECK(bth->ack_req() == f.ack_req);
  FUZZ_CHECK(bth->psn() == (f.psn & 0xFFFFFF));
  FUZZ_CHECK((p.frame[p.bth_off + 8] & 0x7F) == 0);  // resv7

  FUZZ_CHECK(p.op == &wire::opcode_info(f.opcode));
  FUZZ_CHECK(p.op->hdr_len == op.hdr_len());
  const uint8_t *b = p.frame + p.bth_off;
  if (op.deth) {
    const auto *h = wire::hdr_at<wire::Deth>(b + op.off_deth());
    FUZZ_CHECK(p.deth() == h);
    FUZZ_CHECK(h->qkey() == f.qkey);
    FUZZ_CHECK(h->src_qp() == (f.src_qp & 0xFFFFFF));
    FUZZ_CHECK(b[op.off_deth() + 4] == 0);
  }
  if (op.reth) {
    const auto *h = wire::hdr_at<wire::Reth>(b + op.off_reth());
    FUZZ_CHECK(p.reth() == h);
    FUZZ_CHECK(h->va() == f.va && h->rkey() == f.rkey && h->dma_len() == f.dma_len);
  }
  if (op.atomic_eth) {
    const auto *h = wire::hdr_at<wire::AtomicEth>(b + op.off_atomic_eth());
    FUZZ_CHECK(p.atomic_eth() == h);
    FUZZ_CHECK(h->va() == f.va && h->rkey() == f.rkey);
    FUZZ_CHECK(h->swap_add() == f.swap_add && h->compare() == f.compare);
  }
  if (op.aeth) {
    const auto *h = wire::hdr_at<wire::Aeth>(b + op.off_aeth());
    FUZZ_CHECK(p.aeth() == h);
    FUZZ_CHECK(h->syndrome() == f.syndrome && h->msn() == (f.msn & 0xFFFFFF));
  }
  if (op.atomic_ack) {
    const auto *h = wire::hdr_at<wire::AtomicAckEth>(b + op.off_atomic_ack());
    FUZZ_CHECK(p.atomic_ack() == h);
    FUZZ_CHECK(h->orig() == f.atomic_orig);
  }
  if (op.imm) {
    const auto *h = wire::hdr_at<wire::ImmDt>(b + op.off_imm());
    FUZZ_CHECK(p.imm() == h);
    FUZZ_CHECK(h->raw_be() == f.imm_be);
  }
  if (op.ieth) {
    const auto *h = wire::hdr_at<wire::Ieth>(b + op.off_ieth());
    FUZZ_CHECK(p.ieth() == h);
    FUZZ_CHECK(h->rkey() == f.inv_rkey);
  }
  if (op.cnp_pad) {
    for (size_t i = 12; i < 28; ++i)
      FUZZ_CHECK(b[i] == 0);
  }

  FUZZ_CHECK(p.payload_len == in.payload_len);
  FUZZ_CHECK(p.pad == (4 - in.payload_len % 4) % 4);
  FUZZ_CHECK(bth->pad_count() == p.pad);
  FUZZ_CHECK(p.payload_off == p.bth_off + op.hdr_len());
  FUZZ_CHECK(size_t{p.payload_off} + p.payload_len + p.pad + wire::kIcrcSize == p.frame_len);
  for (uint32_t i = 0; i < p.payload_len; ++i)
    FUZZ_CHECK(p.payload()[i] == (payload != nullptr ? payload[i] : 0));
  for (uint32_t i = 0; i < p.pad; ++i)
    FUZZ_CHECK(p.payload()[p.payload_len + i] == 0);

  const size_t icrc_off = p.frame_len - wire::kIcrcSize;
  FUZZ_CHECK(p.icrc == wire::icrc_load(p.frame + icrc_off));
  FUZZ_CHECK(ref_icrc(p.frame + p.l3_off, icrc_off - p.l3_off, p.ipv6) == p.icrc);
}

void run_one(const uint8_t *data, size_t size) {
  const BuildInput in = decode_build_input(data, size);
  const RefOp op = ref_op(in.f.opcode);
  wire::PacketDesc d;
  d.path = in.null_path ? nullptr : &in.path;
  d.ecn = in.ecn;
  d.ip_id = in.ip_id;
  d.f = in.f;
  d.payload_len = in.payload_len;

  std::vector<uint8_t> payload(in.payload_len);
  for (size_t i = 0; i < payload.size(); ++i)
    payload[i] = in.payload_bytes.empty() ? 0 : in.payload_bytes[i % in.payload_bytes.size()];
  const uint8_t *pl = in.null_payload ? nullptr : payload.data();

  const Expected probe = expect_build(in, d, SIZE_MAX);
  const size_t cap = capacity(in, probe.total);
  const Expected want = expect_build(in, d, cap);
  if (d.path != nullptr && op.valid) FUZZ_CHECK(wire::frame_size(d) == want.total);

  // Exactly `cap` bytes on the heap, so that any write past it is caught by ASan.
  std::unique_ptr<uint8_t[]> buf(new uint8_t[cap]);
  std::memset(buf.get(), 0xA5, cap);
  const wire::BuildResult r = wire::build_frame(buf.get(), cap, d, pl);
  FUZZ_CHECK(r.err == want.err);
  if (!r.ok()) {
    for (size_t i = 0; i < cap; ++i)  // a refused build writes nothing
      FUZZ_CHECK(buf[i] == 0xA5);
    return;
  }
  FUZZ_CHECK(r.frame_len == want.total);
  FUZZ_CHECK(r.l3_off == (in.vlan ? 18 : 14));
  FUZZ_CHECK(r.ipv6 == !in.path.sgid.is_v4mapped());
  FUZZ_CHECK(r.payload_len == in.payload_len);
  FUZZ_CHECK(r.payload_off == r.l3_off + (r.ipv6 ? 40 : 20) + 8 + op.hdr_len());

  // The two-step path (headers, payload, finalize) writes the same bytes.
  std::unique_ptr<uint8_t[]> buf2(new uint8_t[r.frame_len]);
  const wire::BuildResult r2 = wire::build_headers(buf2.get(), r.frame_len, d);
  FUZZ_CHECK(r2.ok() && r2.frame_len == r.frame_len && r2.payload_off == r.payload_off);
  if (in.payload_len != 0) {
    if (pl != nullptr)
      std::memcpy(buf2.get() + r2.payload_off, pl, in.payload_len);
    else
      std::memset(buf2.get() + r2.payload_off, 0, in.payload_len);
  }
  wire::finalize_frame(buf2.get(), r2);
  FUZZ_CHECK(std::memcmp(buf.get(), buf2.get(), r.frame_len) == 0);

  // Parse the frame in a buffer of exactly its size.
  const uint8_t *frame = buf2.get();
  wire::ParsedPacket p;
  FUZZ_CHECK(wire::parse_frame(frame, r.frame_len, &p) == ParseError::kOk);
  FUZZ_CHECK(p.frame == frame && p.frame_len == r.frame_len);
  FUZZ_CHECK(p.l3_off == r.l3_off && p.payload_off == r.payload_off);
  check_fields(in, op, p, pl);

  for (const wire::Transport t : kAllExpectations) {
    wire::ParsedPacket q;
    const ParseError e = wire::parse_frame(frame, r.frame_len, &q, wire::kParseDefault, t);
    FUZZ_CHECK(e ==
               (ref_valid_for(t, in.f.opcode) ? ParseError::kOk : ParseError::kOpcodeNotForQpType));
  }

  // Trailing bytes (Ethernet padding, FCS) are not part of the frame.
  if (cap > r.frame_len) {
    wire::ParsedPacket q;
    FUZZ_CHECK(wire::parse_frame(buf.get(), cap, &q) == ParseError::kOk);
    FUZZ_CHECK(q.frame_len == r.frame_len && q.payload_len == in.payload_len);
  }

  // Any strict prefix must fail to parse (and be read only within its length).
  const size_t cut = r.frame_len - 1 - (size_t{in.slack} * 37) % r.frame_len;
  std::unique_ptr<uint8_t[]> prefix(new uint8_t[cut]);
  std::memcpy(prefix.get(), frame, cut);
  wire::ParsedPacket q;
  FUZZ_CHECK(wire::parse_frame(prefix.get(), cut, &q) != ParseError::kOk);

  // A flipped bit anywhere the ICRC covers is caught.
  if (r.frame_len > r.payload_off) {
    std::unique_ptr<uint8_t[]> bad(new uint8_t[r.frame_len]);
    std::memcpy(bad.get(), frame, r.frame_len);
    const size_t at = r.payload_off + (size_t{in.slack} * 131) % (r.frame_len - r.payload_off);
    bad[at] ^= static_cast<uint8_t>(1u << (in.slack % 8));
    FUZZ_CHECK(wire::parse_frame(bad.get(), r.frame_len, &q) == ParseError::kBadIcrc);
  }
}

}  // namespace
}  // namespace uroce::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uroce::fuzz::run_one(data, size);
  return 0;
}
