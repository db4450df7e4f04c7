// SPDX-License-Identifier: BSD-3-Clause
// AETH syndromes (IBTA 9.7.5.1, table 45): everything about the 8-bit syndrome in one place.
//   bits 7..5 = 000 ACK, bits 4..0 = credit count code (31 = no flow control)
//             = 001 RNR NAK, bits 4..0 = RNR timer code (see rnr.h)
//             = 011 NAK, bits 4..0 = NAK code
#pragma once

#include <cstdint>

namespace uroce::transport::aeth {

enum class Kind : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };

enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};

inline constexpr uint8_t kCreditsUnlimited = 31;

constexpr Kind kind(uint8_t syndrome) noexcept {
  return static_cast<Kind>((syndrome >> 5) & 3);
}
// bit 7 is reserved (must be 0) in every valid syndrome
constexpr bool reserved_bit(uint8_t syndrome) noexcept {
  return syndrome & 0x80;
}
constexpr uint8_t value(uint8_t syndrome) noexcept {
  return syndrome & 0x1F;
}

constexpr uint8_t ack(uint8_t credit_code) noexcept {
  return credit_code & 0x1F;
}
constexpr uint8_t rnr_nak(uint8_t timer_code) noexcept {
  return static_cast<uint8_t>(0x20 | (timer_code & 0x1F));
}
constexpr uint8_t nak(NakCode c) noexcept {
  return static_cast<uint8_t>(0x60 | static_cast<uint8_t>(c));
}

// Credit count codes (IBTA 9.7.7.2.5, table 47): code -> receive WQEs it stands for.
inline constexpr uint32_t kCreditTable[31] = {
    0,   1,   2,   3,   4,    6,    8,    12,   16,   24,   32,   48,    64,    96,    128,  192,
    256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768};

// The largest code whose credit count does not exceed `n` available receive WQEs.
constexpr uint8_t credit_code(uint32_t n) noexcept {
  uint8_t c = 0;
  while (c + 1 < 31 && kCreditTable[c + 1] <= n)
    ++c;
  return c;
}

constexpr uint32_t credits(uint8_t code) noexcept {
  return code < 31 ? kCreditTable[code] : UINT32_MAX;
}

static_assert(credit_code(0) == 0 && credit_code(5) == 4 && credit_code(6) == 5);
static_assert(credit_code(100000) == 30);
static_assert(nak(NakCode::kRemoteAccessError) == 0x62 && rnr_nak(14) == 0x2E);

}  // namespace uroce::transport::aeth
