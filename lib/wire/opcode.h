// SPDX-License-Identifier: BSD-3-Clause
// The IBTA BTH opcode table (IBTA Vol. 1, 9.2.1 table 38) for RC, UC, UD and the RoCE v2 CNP.
//
// One 256-entry table answers, for any opcode byte: is it valid, which transport it belongs to,
// which extended headers follow the BTH and where, whether it carries payload, and its place in
// a message (first / middle / last; "only" is first|last). Unknown opcodes have mask 0.
#pragma once

#include <array>
#include <cstdint>

#include "wire/hdr.h"

namespace uroce::wire {

enum class Transport : uint8_t { kRc = 0, kUc = 1, kRd = 2, kUd = 3, kCnp = 4, kNone = 7 };

// Opcode values. The top three bits select the transport (RC 000, UC 001, RD 010, UD 011,
// CNP 100).
namespace op {
inline constexpr uint8_t kRcSendFirst = 0x00;
inline constexpr uint8_t kRcSendMiddle = 0x01;
inline constexpr uint8_t kRcSendLast = 0x02;
inline constexpr uint8_t kRcSendLastImm = 0x03;
inline constexpr uint8_t kRcSendOnly = 0x04;
inline constexpr uint8_t kRcSendOnlyImm = 0x05;
inline constexpr uint8_t kRcWriteFirst = 0x06;
inline constexpr uint8_t kRcWriteMiddle = 0x07;
inline constexpr uint8_t kRcWriteLast = 0x08;
inline constexpr uint8_t kRcWriteLastImm = 0x09;
inline constexpr uint8_t kRcWriteOnly = 0x0A;
inline constexpr uint8_t kRcWriteOnlyImm = 0x0B;
inline constexpr uint8_t kRcReadRequest = 0x0C;
inline constexpr uint8_t kRcReadResponseFirst = 0x0D;
inline constexpr uint8_t kRcReadResponseMiddle = 0x0E;
inline constexpr uint8_t kRcReadResponseLast = 0x0F;
inline constexpr uint8_t kRcReadResponseOnly = 0x10;
inline constexpr uint8_t kRcAck = 0x11;
inline constexpr uint8_t kRcAtomicAck = 0x12;
inline constexpr uint8_t kRcCompareSwap = 0x13;
inline constexpr uint8_t kRcFetchAdd = 0x14;
inline constexpr uint8_t kRcSendLastInv = 0x16;
inline constexpr uint8_t kRcSendOnlyInv = 0x17;

inline constexpr uint8_t kUcSendFirst = 0x20;
inline constexpr uint8_t kUcSendMiddle = 0x21;
inline constexpr uint8_t kUcSendLast = 0x22;
inline constexpr uint8_t kUcSendLastImm = 0x23;
inline constexpr uint8_t kUcSendOnly = 0x24;
inline constexpr uint8_t kUcSendOnlyImm = 0x25;
inline constexpr uint8_t kUcWriteFirst = 0x26;
inline constexpr uint8_t kUcWriteMiddle = 0x27;
inline constexpr uint8_t kUcWriteLast = 0x28;
inline constexpr uint8_t kUcWriteLastImm = 0x29;
inline constexpr uint8_t kUcWriteOnly = 0x2A;
inline constexpr uint8_t kUcWriteOnlyImm = 0x2B;

inline constexpr uint8_t kUdSendOnly = 0x64;
inline constexpr uint8_t kUdSendOnlyImm = 0x65;

inline constexpr uint8_t kCnp = 0x81;
}  // namespace op

// What an opcode carries and means. Masks combine.
enum OpMask : uint32_t {
  kMaskReth = 1u << 0,
  kMaskAeth = 1u << 1,
  kMaskAtomicEth = 1u << 2,
  kMaskAtomicAckEth = 1u << 3,
  kMaskImm = 1u << 4,
  kMaskIeth = 1u << 5,
  kMaskDeth = 1u << 6,
  kMaskPayload = 1u << 7,  // may carry payload bytes
  kMaskFirst = 1u << 8,    // first packet of a message
  kMaskMiddle = 1u << 9,
  kMaskLast = 1u << 10,  // last packet of a message ("only" = first | last)
  kMaskReq = 1u << 11,   // requester -> responder
  kMaskResp = 1u << 12,  // responder -> requester (ACKs, read responses, atomic ACKs)
  kMaskSend = 1u << 13,
  kMaskWrite = 1u << 14,
  kMaskRead = 1u << 15,  // read request or read response
  kMaskAtomic = 1u << 16,
  kMaskRecvWqe = 1u << 17,  // consumes a receive WQE at the responder (SEND*, WRITE w/ imm)
  kMaskComp = 1u << 18,     // completes a message at the responder (generates a receive CQE)
  kMaskCnp = 1u << 19,
  kMaskCnpPad = 1u << 20,  // CNP: 16 reserved bytes follow the BTH
};

inline constexpr size_t kCnpPadSize = 16;

struct OpcodeInfo {
  const char *name;     // nullptr for an invalid opcode
  uint32_t mask;        // 0 for an invalid opcode
  uint8_t hdr_len;      // BTH + every extended header, bytes
  Transport transport;  // kNone for an invalid opcode
  // Offsets of the extended headers from the start of the BTH; 0 when absent.
  uint8_t off_reth, off_aeth, off_atomic_eth, off_atomic_ack, off_imm, off_ieth, off_deth;

  constexpr bool valid() const noexcept { return mask != 0; }
  constexpr bool has(uint32_t m) const noexcept { return (mask & m) == m; }
  constexpr bool any(uint32_t m) const noexcept { return (mask & m) != 0; }
};

namespace detail {

// Builds an entry; extended headers are laid out in IBTA order: DETH, RETH | AtomicETH, ImmDt,
// IETH for requests, AETH then AtomicAckETH for responses.
constexpr OpcodeInfo make_op(const char *name, uint32_t mask) {
  OpcodeInfo o{name, mask, static_cast<uint8_t>(Bth::kSize), Transport::kNone, 0, 0, 0, 0, 0, 0, 0};
  uint8_t off = Bth::kSize;
  if (mask & kMaskDeth) o.off_deth = off, off += Deth::kSize;
  if (mask & kMaskReth) o.off_reth = off, off += Reth::kSize;
  if (mask & kMaskAtomicEth) o.off_atomic_eth = off, off += AtomicEth::kSize;
  if (mask & kMaskAeth) o.off_aeth = off, off += Aeth::kSize;
  if (mask & kMaskAtomicAckEth) o.off_atomic_ack = off, off += AtomicAckEth::kSize;
  if (mask & kMaskImm) o.off_imm = off, off += ImmDt::kSize;
  if (mask & kMaskIeth) o.off_ieth = off, off += Ieth::kSize;
  if (mask & kMaskCnpPad) off += kCnpPadSize;
  o.hdr_len = off;
  return o;
}

constexpr std::array<OpcodeInfo, 256> make_table() {
  std::array<OpcodeInfo, 256> t{};
  for (auto &e : t)
    e = OpcodeInfo{nullptr, 0, 0, Transport::kNone, 0, 0, 0, 0, 0, 0, 0};

  constexpr uint32_t F = kMaskFirst, M = kMaskMiddle, L = kMaskLast, P = kMaskPayload;
  constexpr uint32_t RQ = kMaskReq, RS = kMaskResp;
  constexpr uint32_t SEND = kMaskSend | kMaskRecvWqe, WR = kMaskWrite, RD = kMaskRead;
  constexpr uint32_t C = kMaskComp;

  // Sends and writes are the same for RC and UC; only the base differs.
  struct Common {
    uint8_t code;
    uint32_t mask;
  };
  constexpr Common common[] = {
      {0x00, RQ | SEND | P | F},
      {0x01, RQ | SEND | P | M},
      {0x02, RQ | SEND | P | L | C},
      {0x03, RQ | SEND | P | L | C | kMaskImm},
      {0x04, RQ | SEND | P | F | L | C},
      {0x05, RQ | SEND | P | F | L | C | kMaskImm},
      {0x06, RQ | WR | P | F | kMaskReth},
      {0x07, RQ | WR | P | M},
      {0x08, RQ | WR | P | L},
      {0x09, RQ | WR | P | L | C | kMaskImm | kMaskRecvWqe},
      {0x0A, RQ | WR | P | F | L | kMaskReth},
      {0x0B, RQ | WR | P | F | L | C | kMaskReth | kMaskImm | kMaskRecvWqe},
  };
  // RC names are spelled out so that each entry has a static string.
  constexpr const char *rc_names[] = {"RC_SEND_FIRST",       "RC_SEND_MIDDLE",
                                      "RC_SEND_LAST",        "RC_SEND_LAST_WITH_IMMEDIATE",
                                      "RC_SEND_ONLY",        "RC_SEND_ONLY_WITH_IMMEDIATE",
                                      "RC_RDMA_WRITE_FIRST", "RC_RDMA_WRITE_MIDDLE",
                                      "RC_RDMA_WRITE_LAST",  "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
                                      "RC_RDMA_WRITE_ONLY",  "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"};
  constexpr const char *uc_names[] = {"UC_SEND_FIRST",       "UC_SEND_MIDDLE",
                                      "UC_SEND_LAST",        "UC_SEND_LAST_WITH_IMMEDIATE",
                                      "UC_SEND_ONLY",        "UC_SEND_ONLY_WITH_IMMEDIATE",
                                      "UC_RDMA_WRITE_FIRST", "UC_RDMA_WRITE_MIDDLE",
                                      "UC_RDMA_WRITE_LAST",  "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
                                      "UC_RDMA_WRITE_ONLY",  "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"};
  for (size_t i = 0; i < 12; ++i) {
    t[common[i].code] = make_op(rc_names[i], common[i].mask);
    t[common[i].code].transport = Transport::kRc;
    t[0x20 + common[i].code] = make_op(uc_names[i], common[i].mask);
    t[0x20 + common[i].code].transport = Transport::kUc;
  }

  auto rc = [&t](uint8_t code, const char *name, uint32_t mask) {
    t[code] = make_op(name, mask);
    t[code].transport = Transport::kRc;
  };
  rc(op::kRcReadRequest, "RC_RDMA_READ_REQUEST", RQ | RD | F | L | kMaskReth);
  rc(op::kRcReadResponseFirst, "RC_RDMA_READ_RESPONSE_FIRST", RS | RD | P | F | kMaskAeth);
  rc(op::kRcReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", RS | RD | P | M);
  rc(op::kRcReadResponseLast, "RC_RDMA_READ_RESPONSE_LAST", RS | RD | P | L | kMaskAeth);
  rc(op::kRcReadResponseOnly, "RC_RDMA_READ_RESPONSE_ONLY", RS | RD | P | F | L | kMaskAeth);
  rc(op::kRcAck, "RC_ACKNOWLEDGE", RS | F | L | kMaskAeth);
  rc(op::kRcAtomicAck, "RC_ATOMIC_ACKNOWLEDGE",
     RS | kMaskAtomic | F | L | kMaskAeth | kMaskAtomicAckEth);
  rc(op::kRcCompareSwap, "RC_CMP_SWAP", RQ | kMaskAtomic | F | L | kMaskAtomicEth);
  rc(op::kRcFetchAdd, "RC_FETCH_ADD", RQ | kMaskAtomic | F | L | kMaskAtomicEth);
  rc(op::kRcSendLastInv, "RC_SEND_LAST_WITH_INVALIDATE", RQ | SEND | P | L | C | kMaskIeth);
  rc(op::kRcSendOnlyInv, "RC_SEND_ONLY_WITH_INVALIDATE", RQ | SEND | P | F | L | C | kMaskIeth);

  t[op::kUdSendOnly] = make_op("UD_SEND_ONLY", RQ | SEND | P | F | L | C | kMaskDeth);
  t[op::kUdSendOnly].transport = Transport::kUd;
  t[op::kUdSendOnlyImm] =
      make_op("UD_SEND_ONLY_WITH_IMMEDIATE", RQ | SEND | P | F | L | C | kMaskDeth | kMaskImm);
  t[op::kUdSendOnlyImm].transport = Transport::kUd;

  t[op::kCnp] = make_op("CNP", kMaskCnp | kMaskCnpPad | F | L);
  t[op::kCnp].transport = Transport::kCnp;
  return t;
}

}  // namespace detail

inline constexpr std::array<OpcodeInfo, 256> kOpcodeTable = detail::make_table();

constexpr const OpcodeInfo &opcode_info(uint8_t opcode) noexcept {
  return kOpcodeTable[opcode];
}

// Is this opcode allowed on a QP of the given transport? (CNPs are addressed to any RC/UC QP.)
constexpr bool opcode_valid_for(Transport qp_transport, uint8_t opcode) noexcept {
  const OpcodeInfo &o = opcode_info(opcode);
  if (!o.valid()) return false;
  if (o.transport == Transport::kCnp)
    return qp_transport == Transport::kRc || qp_transport == Transport::kUc;
  return o.transport == qp_transport;
}

const char *transport_name(Transport t) noexcept;

}  // namespace uroce::wire
