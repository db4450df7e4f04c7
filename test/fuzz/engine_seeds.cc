// SPDX-License-Identifier: BSD-3-Clause
// Seeds of engine_rx_fuzz (layout in engine_rx_fuzz.h): frames from the peer built with lib/wire's
// builder, each behind a record header that steers it to the right QP, the expected PSN and an
// MR, for every opcode; plus multi-packet messages, responses to the requests in flight, NAKs,
// and clock steps that fire the timers.
#include <cstring>

#include "engine_rx_fuzz.h"
#include "fuzz_util.h"
#include "seeds.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::fuzz {

namespace {

using namespace engine_rx;

struct Rec {
  uint8_t mode = 0xFF & ~kPollBefore;  // every fix-up and steering, poll after
  uint8_t qp = 0;
  int8_t psn_delta = 0;
  uint8_t mr = 0;
  uint16_t va_off = 64;  // VA = the MR's first byte
  uint8_t tick = 0;
  uint8_t opcode = 0;
  uint32_t payload = 0;
  uint8_t syndrome = 0;  // AETH
  uint32_t dma_len = 0;  // RETH; 0: the payload length
};

wire::PathInfo peer_to_eng() {
  wire::PathInfo p;
  std::memcpy(p.smac, kPeerMac, 6);
  std::memcpy(p.dmac, kEngMac, 6);
  p.sgid = wire::Gid::from_ipv4(kPeerIp);
  p.dgid = wire::Gid::from_ipv4(kEngIp);
  return p;
}

void append(Seed *s, const Rec &r) {
  ByteWriter w(s);
  w.u8(r.mode);
  w.u8(r.qp);
  w.u8(static_cast<uint8_t>(r.psn_delta));
  w.u8(r.mr);
  w.u16(r.va_off);
  w.u8(r.tick);
  if (r.opcode == 0xFF) {  // a clock step only
    w.u16(0);
    return;
  }
  const wire::PathInfo path = peer_to_eng();
  wire::PacketDesc d;
  d.path = &path;
  d.f.opcode = r.opcode;
  d.f.dest_qp = kQpnBase + r.qp;
  d.f.psn = 0;
  d.f.ack_req = true;
  d.f.va = kMrVa[r.mr];
  d.f.dma_len = r.dma_len ? r.dma_len : r.payload;
  d.f.swap_add = 3;
  d.f.compare = 0;
  d.f.syndrome = r.syndrome;
  d.f.msn = 1;
  d.f.atomic_orig = 9;
  d.f.imm_be = 0x0A0B0C0D;
  d.f.inv_rkey = 0x1234;
  d.f.qkey = kUdQkey;
  d.f.src_qp = kPeerQpnBase + 3;
  d.payload_len = r.payload;
  std::vector<uint8_t> f(wire::frame_size(d));
  std::vector<uint8_t> pay(r.payload);
  for (size_t i = 0; i < pay.size(); ++i)
    pay[i] = static_cast<uint8_t>(i ^ r.opcode);
  if (!wire::build_frame(f.data(), f.size(), d, pay.data()).ok()) f.clear();
  w.u16(static_cast<uint16_t>(f.size()));
  w.bytes(f.data(), f.size());
}

Seed seed_of(std::initializer_list<Rec> recs, uint8_t global = 0) {
  Seed s{global};
  for (const Rec &r : recs)
    append(&s, r);
  return s;
}

}  // namespace

std::vector<Seed> engine_rx_seeds() {
  std::vector<Seed> out;
  // Every valid opcode on a QP of its transport, one packet (payload sized for its place in a
  // message), and on the QPs in other states.
  for (int code = 0; code < 256; ++code) {
    const uint8_t c = static_cast<uint8_t>(code);
    const wire::OpcodeInfo &o = wire::opcode_info(c);
    if (!o.valid()) continue;
    Rec r;
    r.opcode = c;
    r.qp = code < 0x20 ? 0 : code < 0x40 ? 2 : code < 0x80 ? 3 : 0;
    if (o.has(wire::kMaskPayload))
      r.payload =
          (o.any(wire::kMaskFirst | wire::kMaskMiddle) && !o.has(wire::kMaskLast)) ? kMtu : 64;
    if (o.any(wire::kMaskAtomic)) r.mr = 2;
    if (o.any(wire::kMaskRead) && o.any(wire::kMaskReq)) r.dma_len = 1500;
    if (o.any(wire::kMaskResp)) r.psn_delta = -1;
    out.push_back(seed_of({r}));
    if (code < 0x20) {
      for (const uint8_t q : {1, 4, 5, 6}) {
        r.qp = q;
        out.push_back(seed_of({r}));
      }
    }
  }
  // Multi-packet messages (the steered PSN is always the next expected one).
  using namespace wire::op;
  out.push_back(seed_of({{.opcode = kRcSendFirst, .payload = kMtu},
                         {.opcode = kRcSendMiddle, .payload = kMtu},
                         {.opcode = kRcSendLast, .payload = 100}}));
  out.push_back(seed_of({{.qp = 1, .opcode = kRcSendFirst, .payload = kMtu},
                         {.qp = 1, .opcode = kRcSendLastImm, .payload = 10}}));
  out.push_back(seed_of({{.opcode = kRcWriteFirst, .payload = kMtu, .dma_len = 2500},
                         {.opcode = kRcWriteMiddle, .payload = kMtu},
                         {.opcode = kRcWriteLastImm, .payload = 452}}));
  out.push_back(seed_of({{.qp = 2, .opcode = kUcWriteFirst, .payload = kMtu, .dma_len = 1100},
                         {.qp = 2, .opcode = kUcWriteLast, .payload = 76}}));
  out.push_back(seed_of({{.qp = 2, .opcode = kUcSendFirst, .payload = kMtu},
                         {.qp = 2, .opcode = kUcSendLast, .payload = 3}}));
  // READ and atomics against each MR, a duplicate READ, a READ past the end.
  for (uint8_t mr = 0; mr < kNumMrs; ++mr) {
    out.push_back(seed_of({{.mr = mr, .opcode = kRcReadRequest, .dma_len = kMrLen[mr]},
                           {.psn_delta = -1, .mr = mr, .opcode = kRcReadRequest, .dma_len = 8}}));
    out.push_back(seed_of({{.mr = mr, .va_off = 60, .opcode = kRcReadRequest, .dma_len = 16}}));
    out.push_back(seed_of({{.mr = mr, .opcode = kRcFetchAdd},
                           {.mr = mr, .va_off = 68, .opcode = kRcCompareSwap},
                           {.psn_delta = -2, .mr = mr, .opcode = kRcFetchAdd}}));
  }
  // Responses to the requests in flight (QP 0: SEND, WRITE x2, SEND_IMM, CMP_SWP; QP 1: READ x2,
  // FETCH_ADD), in order, then NAKs of every kind.
  out.push_back(
      seed_of({{.psn_delta = -2, .opcode = kRcAck},
               {.psn_delta = -1, .opcode = kRcAtomicAck},
               {.qp = 1, .psn_delta = -3, .opcode = kRcReadResponseFirst, .payload = kMtu},
               {.qp = 1, .psn_delta = -2, .opcode = kRcReadResponseLast, .payload = 476},
               {.qp = 1, .psn_delta = -1, .opcode = kRcAtomicAck}}));
  out.push_back(
      seed_of({{.qp = 1, .psn_delta = -3, .opcode = kRcReadResponseOnly, .payload = 1500}}));
  for (const uint8_t syn : {0x20, 0x3F, 0x60, 0x61, 0x62, 0x63, 0x64, 0x1F, 0x40}) {
    out.push_back(seed_of({{.psn_delta = -4, .opcode = kRcAck, .syndrome = syn},
                           {.mode = kPollBefore, .tick = 21, .opcode = 0xFF}}));
    out.push_back(seed_of({{.qp = 1, .psn_delta = -3, .opcode = kRcAck, .syndrome = syn}}));
  }
  // Nothing from the peer: timeouts and retries, with and without TX back-pressure.
  out.push_back(seed_of({{.mode = kPollBefore, .tick = 20, .opcode = 0xFF},
                         {.mode = kPollBefore, .tick = 21, .opcode = 0xFF}}));
  out.push_back(seed_of({{.mode = kPollBefore, .tick = 20, .opcode = 0xFF}}, 1));
  out.push_back(seed_of({{.opcode = kRcSendOnly, .payload = 2000}}, 1));
  return out;
}

}  // namespace uroce::fuzz
