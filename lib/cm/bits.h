// SPDX-License-Identifier: BSD-3-Clause
// Big-endian bit fields of IBTA management datagrams, addressed as the spec's tables do:
// Byte[Bit] with bit 0 the most significant bit of the byte, a width of 1..64 bits. The only
// place CM and MAD bytes are swapped.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uroce::cm {

struct Field {
  uint16_t byte;  // offset of the field's first byte
  uint8_t bit;    // 0 = that byte's most significant bit
  uint8_t width;  // bits, 1..64
};

// Reads `f` from `p` (which must hold f.byte + (f.bit + f.width + 7) / 8 bytes).
constexpr uint64_t get(const uint8_t *p, Field f) noexcept {
  uint64_t v = 0;
  const unsigned first = f.byte * 8u + f.bit;
  for (unsigned i = 0; i < f.width; ++i) {
    const unsigned b = first + i;
    v = (v << 1) | ((p[b / 8] >> (7 - b % 8)) & 1u);
  }
  return v;
}

// Writes the low f.width bits of `v` into `f`, leaving every other bit of `p` as it was.
constexpr void set(uint8_t *p, Field f, uint64_t v) noexcept {
  const unsigned first = f.byte * 8u + f.bit;
  for (unsigned i = 0; i < f.width; ++i) {
    const unsigned b = first + i;
    const unsigned shift = f.width - 1 - i;
    const uint8_t mask = static_cast<uint8_t>(1u << (7 - b % 8));
    if ((v >> shift) & 1u)
      p[b / 8] = static_cast<uint8_t>(p[b / 8] | mask);
    else
      p[b / 8] = static_cast<uint8_t>(p[b / 8] & ~mask);
  }
}

// The first byte after `f` (for bounds checks).
constexpr size_t end_of(Field f) noexcept {
  return f.byte + (f.bit + f.width + 7u) / 8u;
}

}  // namespace uroce::cm
