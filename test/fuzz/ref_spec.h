// SPDX-License-Identifier: BSD-3-Clause
// The opcode facts the fuzz targets check lib/wire against, written out again from IBTA Vol. 1
// table 38 (9.2.1) and Annex A17 instead of read from lib/wire's opcode table, so that a wrong
// table entry shows up as a round-trip failure.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/opcode.h"

namespace uroce::fuzz {

struct RefOp {
  bool valid = false;
  wire::Transport transport = wire::Transport::kNone;
  bool deth = false, reth = false, atomic_eth = false, aeth = false, atomic_ack = false,
       imm = false, ieth = false, cnp_pad = false;
  bool payload = false;

  // BTH + extended headers, in IBTA order.
  size_t hdr_len() const noexcept {
    return 12 + (deth ? 8 : 0) + (reth ? 16 : 0) + (atomic_eth ? 28 : 0) + (aeth ? 4 : 0) +
           (atomic_ack ? 8 : 0) + (imm ? 4 : 0) + (ieth ? 4 : 0) + (cnp_pad ? 16 : 0);
  }
  size_t off_deth() const noexcept { return 12; }
  size_t off_reth() const noexcept { return 12 + (deth ? 8 : 0); }
  size_t off_atomic_eth() const noexcept { return off_reth() + (reth ? 16 : 0); }
  size_t off_aeth() const noexcept { return off_atomic_eth() + (atomic_eth ? 28 : 0); }
  size_t off_atomic_ack() const noexcept { return off_aeth() + (aeth ? 4 : 0); }
  size_t off_imm() const noexcept { return off_atomic_ack() + (atomic_ack ? 8 : 0); }
  size_t off_ieth() const noexcept { return off_imm() + (imm ? 4 : 0); }
};

constexpr RefOp ref_op(uint8_t op) noexcept {
  RefOp r;
  const uint8_t low = op & 0x1F;
  if (op <= 0x17 && op != 0x15) {
    r.transport = wire::Transport::kRc;
  } else if (op >= 0x20 && op <= 0x2B) {
    r.transport = wire::Transport::kUc;
  } else if (op == 0x64 || op == 0x65) {
    r.transport = wire::Transport::kUd;
  } else if (op == 0x81) {
    r.transport = wire::Transport::kCnp;
  } else {
    return r;
  }
  r.valid = true;
  if (r.transport == wire::Transport::kCnp) {
    r.cnp_pad = true;
    return r;
  }
  if (r.transport == wire::Transport::kUd) {
    r.deth = true;
    r.imm = op == 0x65;
    r.payload = true;
    return r;
  }
  r.reth = low == 0x06 || low == 0x0A || low == 0x0B || low == 0x0C;
  r.imm = low == 0x03 || low == 0x05 || low == 0x09 || low == 0x0B;
  r.aeth = low == 0x0D || low == 0x0F || low == 0x10 || low == 0x11 || low == 0x12;
  r.atomic_ack = low == 0x12;
  r.atomic_eth = low == 0x13 || low == 0x14;
  r.ieth = low == 0x16 || low == 0x17;
  r.payload = !(low == 0x0C || low == 0x11 || low == 0x12 || low == 0x13 || low == 0x14);
  return r;
}

// May a QP of transport `qp` receive `op`? CNPs go to RC and UC QPs.
constexpr bool ref_valid_for(wire::Transport qp, uint8_t op) noexcept {
  const RefOp r = ref_op(op);
  if (!r.valid) return false;
  if (qp == wire::Transport::kNone) return true;
  if (r.transport == wire::Transport::kCnp)
    return qp == wire::Transport::kRc || qp == wire::Transport::kUc;
  return r.transport == qp;
}

inline constexpr wire::Transport kAllExpectations[] = {
    wire::Transport::kNone, wire::Transport::kRc, wire::Transport::kUc,
    wire::Transport::kRd,   wire::Transport::kUd, wire::Transport::kCnp,
};

}  // namespace uroce::fuzz
