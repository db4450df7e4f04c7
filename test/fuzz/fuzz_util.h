// SPDX-License-Identifier: BSD-3-Clause
// Helpers shared by the fuzz targets: a check that aborts (so libFuzzer and the standalone replay
// both report the input), a byte reader that never runs dry, and an independent ICRC (bitwise
// CRC-32 and masking written here from IBTA Annex A17, not lib/wire's ISA-L path).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace uroce::fuzz {

// Reads fixed-size fields from the front of the input; past the end every byte reads as 0.
class ByteReader {
 public:
  ByteReader(const uint8_t *data, size_t size) noexcept : p_(data), n_(size) {}
  uint8_t u8() noexcept {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  uint16_t u16() noexcept { return static_cast<uint16_t>((u8() << 8) | u8()); }
  uint32_t u32() noexcept { return (uint32_t{u16()} << 16) | u16(); }
  uint64_t u64() noexcept { return (uint64_t{u32()} << 32) | u32(); }
  void bytes(uint8_t *out, size_t k) noexcept {
    for (size_t i = 0; i < k; ++i)
      out[i] = u8();
  }
  const uint8_t *rest() const noexcept { return p_; }
  size_t remaining() const noexcept { return n_; }

 private:
  const uint8_t *p_;
  size_t n_;
};

// Appends fields in ByteReader's order (used to write seeds).
template <typename Vec>
class ByteWriter {
 public:
  explicit ByteWriter(Vec *v) noexcept : v_(v) {}
  void u8(uint8_t x) { v_->push_back(x); }
  void u16(uint16_t x) { u8(static_cast<uint8_t>(x >> 8)), u8(static_cast<uint8_t>(x)); }
  void u32(uint32_t x) { u16(static_cast<uint16_t>(x >> 16)), u16(static_cast<uint16_t>(x)); }
  void u64(uint64_t x) { u32(static_cast<uint32_t>(x >> 32)), u32(static_cast<uint32_t>(x)); }
  void bytes(const uint8_t *p, size_t k) { v_->insert(v_->end(), p, p + k); }

 private:
  Vec *v_;
};

// Plain reflected CRC-32 (polynomial 0xEDB88320), zlib semantics, one table built at start-up.
inline uint32_t ref_crc32(uint32_t crc, const uint8_t *p, size_t n) noexcept {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i)
    crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

// ICRC of the packet whose IP header is at l3, over `len` bytes (up to the ICRC): 8 bytes of
// 0xFF, then IP / UDP / BTH with the variant fields set to ones, then the rest unchanged.
inline uint32_t ref_icrc(const uint8_t *l3, size_t len, bool ipv6) noexcept {
  uint8_t head[60];
  const size_t ip = ipv6 ? 40 : 20;
  const size_t n = ip + 8 + 12;
  std::memcpy(head, l3, n);
  if (ipv6) {
    head[0] |= 0x0F;
    head[1] = head[2] = head[3] = 0xFF;
    head[7] = 0xFF;
  } else {
    head[1] = 0xFF;
    head[8] = 0xFF;
    head[10] = head[11] = 0xFF;
  }
  head[ip + 6] = head[ip + 7] = 0xFF;
  head[ip + 8 + 4] = 0xFF;
  static const uint8_t kOnes[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  uint32_t c = ref_crc32(0, kOnes, 8);
  c = ref_crc32(c, head, n);
  return ref_crc32(c, l3 + n, len - n);
}

}  // namespace uroce::fuzz
