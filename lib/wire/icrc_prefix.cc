// SPDX-License-Identifier: BSD-3-Clause
#include "wire/icrc_prefix.h"

#include <array>

#include "wire/icrc.h"

namespace uroce::wire {
namespace {

constexpr size_t kLenV4 = icrc_masked_len(false);  // 40
constexpr size_t kLenV6 = icrc_masked_len(true);   // 60
constexpr size_t kVaryV4 = 12;
constexpr size_t kVaryV6 = 10;
// Offsets from the IP header of the bytes that vary between frames of one QP (icrc_prefix.h).
constexpr std::array<uint8_t, kVaryV4> kPosV4 = {2, 3, 4, 5, 24, 25, 28, 29, 36, 37, 38, 39};
constexpr std::array<uint8_t, kVaryV6> kPosV6 = {4, 5, 44, 45, 48, 49, 56, 57, 58, 59};

constexpr std::array<uint32_t, 256> make_byte_table() noexcept {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kByte = make_byte_table();

// T[k][v]: the CRC register at the end of `hdr_len` header bytes, started from register 0, when
// every header byte is zero except the one at pos[k], which is v. Linearity makes the register
// of any headers the XOR of such terms (plus the one of the non-zero constant bytes).
template <size_t N>
constexpr std::array<std::array<uint32_t, 256>, N> make_terms(const std::array<uint8_t, N> &pos,
                                                              size_t hdr_len) noexcept {
  std::array<std::array<uint32_t, 256>, N> t{};
  for (size_t k = 0; k < N; ++k) {
    for (uint32_t v = 0; v < 256; ++v) {
      uint32_t r = kByte[v];  // register after the byte v from register 0
      for (size_t i = pos[k] + 1; i < hdr_len; ++i)
        r = (r >> 8) ^ kByte[r & 0xFF];  // one zero byte
      t[k][v] = r;
    }
  }
  return t;
}
constexpr auto kTermsV4 = make_terms(kPosV4, kLenV4);
constexpr auto kTermsV6 = make_terms(kPosV6, kLenV6);

}  // namespace

void IcrcPrefix::init(const uint8_t *l3, bool ipv6) noexcept {
  uint8_t m[kLenV6];
  icrc_mask_headers(l3, ipv6, m);
  if (ipv6) {
    for (uint8_t p : kPosV6)
      m[p] = 0;
  } else {
    for (uint8_t p : kPosV4)
      m[p] = 0;
  }
  ipv6_ = ipv6;
  // zlib semantics: the result is the inverted register.
  reg_ = ~crc32_libdeflate(kIcrcLrhCrc, m, icrc_masked_len(ipv6));
}

uint32_t IcrcPrefix::headers_crc(const uint8_t *l3) const noexcept {
  uint32_t r = reg_;
  if (ipv6_) {
    for (size_t k = 0; k < kVaryV6; ++k)
      r ^= kTermsV6[k][l3[kPosV6[k]]];
  } else {
    for (size_t k = 0; k < kVaryV4; ++k)
      r ^= kTermsV4[k][l3[kPosV4[k]]];
  }
  return ~r;
}

uint32_t IcrcPrefix::compute(const uint8_t *l3, size_t len) const noexcept {
  const size_t n = ipv6_ ? kLenV6 : kLenV4;
  return crc32_dispatch(headers_crc(l3), l3 + n, len - n);
}

}  // namespace uroce::wire
