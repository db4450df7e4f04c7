// SPDX-License-Identifier: BSD-3-Clause
// A plain table-driven CRC-32 (reflected, polynomial 0xEDB88320, zlib semantics), one byte per
// step through a 256-entry table. It is the reference point the ISA-L CRC is measured against
// in wire_bench; nothing outside bench/ uses it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace uroce::bench {

namespace detail {
constexpr std::array<uint32_t, 256> make_crc32_table() noexcept {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    t[i] = c;
  }
  return t;
}
}  // namespace detail

inline constexpr std::array<uint32_t, 256> kCrc32Table = detail::make_crc32_table();

// Same contract as zlib's crc32(): seed 0 starts a CRC, a previous result continues it.
inline uint32_t crc32_table(uint32_t seed, const uint8_t *buf, size_t len) noexcept {
  uint32_t c = ~seed;
  for (size_t i = 0; i < len; ++i)
    c = kCrc32Table[(c ^ buf[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

static_assert(kCrc32Table[1] == 0x77073096u && kCrc32Table[255] == 0x2D02EF8Du);

}  // namespace uroce::bench
