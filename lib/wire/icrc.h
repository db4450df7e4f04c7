// SPDX-License-Identifier: BSD-3-Clause
// The RoCE v2 Invariant CRC (IBTA Annex A17.3.3).
//
// ICRC = CRC-32 (reflected, polynomial 0x04C11DB7, as zlib's crc32) over:
//   8 bytes of 0xFF (standing in for the InfiniBand LRH),
//   the IP header with its variant fields set to all ones
//     (IPv4: TOS, TTL, header checksum; IPv6: traffic class, flow label, hop limit),
//   the UDP header with its checksum set to all ones,
//   the BTH with byte 4 (FECN/BECN/reserved) set to all ones,
//   every byte after the BTH up to the ICRC (extended headers, payload, pad).
// It is appended least-significant byte first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "wire/hdr.h"

namespace uroce::wire {

// Size of the leading bytes that the ICRC masks: IP header + UDP header + BTH.
constexpr size_t icrc_masked_len(bool ipv6) noexcept {
  return (ipv6 ? Ipv6Hdr::kSize : Ipv4Hdr::kSize) + UdpHdr::kSize + Bth::kSize;
}

namespace detail {
// Bytes OR-ed into the masked prefix: 0xFF over each variant field, 0x0F over the low nibble
// of the IPv6 traffic class (the high nibble of that byte is the IP version).
// clang-format off
inline constexpr uint8_t kIcrcMaskV4[Ipv4Hdr::kSize + UdpHdr::kSize + Bth::kSize] = {
    0x00, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // IPv4: TOS
    0xFF, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00,  //       TTL, header checksum
    0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF,  // UDP: checksum
    0x00, 0x00, 0x00, 0x00, 0xFF, 0x00, 0x00, 0x00,  // BTH: byte 4
    0x00, 0x00, 0x00, 0x00};
inline constexpr uint8_t kIcrcMaskV6[Ipv6Hdr::kSize + UdpHdr::kSize + Bth::kSize] = {
    0x0F, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0xFF,  // IPv6: traffic class, flow label, hop limit
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF,  // UDP: checksum
    0x00, 0x00, 0x00, 0x00, 0xFF, 0x00, 0x00, 0x00,  // BTH: byte 4
    0x00, 0x00, 0x00, 0x00};
// clang-format on

// Bitwise CRC-32 (reflected 0xEDB88320, zlib semantics) for compile-time constants.
constexpr uint32_t crc32_bitwise(uint32_t seed, const uint8_t *p, size_t n) noexcept {
  uint32_t c = ~seed;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}
inline constexpr uint8_t kIcrcLrh[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
}  // namespace detail

// CRC-32 of the 8 bytes of 0xFF that stand in for the LRH: every ICRC starts from this state.
inline constexpr uint32_t kIcrcLrhCrc = detail::crc32_bitwise(0, detail::kIcrcLrh, 8);
static_assert(kIcrcLrhCrc == 0x2144DF1Cu);  // zlib.crc32(b"\xff" * 8)

// ICRC regions (IP header to ICRC) up to this size are masked into one stack buffer and handed
// to the CRC in a single call; longer ones take two calls (masked prefix, rest). Each CRC call
// has a fixed cost (~20 ns for ISA-L on small inputs) that outweighs copying up to about 1 KB
// (see doc/perf.md).
inline constexpr size_t kIcrcOneCallMax = 1024;

// ISA-L's crc32_gzip_refl folds whole 256-byte blocks in parallel but the part of a buffer
// below 256 bytes (or the remainder after the blocks) 16 bytes at a time, one dependent step
// each: on this machine 120 bytes took 34 ns and 256 bytes 23 ns (doc/perf.md, ICRC). The
// one-call path therefore lays the region out at the END of a buffer whose length is a
// multiple of 256, preceded by zeros:
//   [ zeros ... ][ FF FF FF FF ][ masked region (len bytes) ]
// and runs the CRC from seed 0xFFFFFFFF (zlib semantics: CRC register 0). With the register at
// 0, zero bytes leave it at 0, so the zeros change nothing; the CRC of the 8 LRH bytes of 0xFF
// from seed 0 passes through register 0 after its first four (a reflected CRC register XOR-ed
// with the same four bytes is 0), so "register 0, then FF FF FF FF" is exactly the state after
// the LRH stand-in. Same result as crc(kIcrcLrhCrc, region), checked by the unit tests against
// the two-call form and a bitwise CRC for every length.
// Padding costs the zero stores and the CRC of a longer buffer (a few ns), so it is used only
// when the region leaves at least kIcrcPadFrom bytes over a multiple of 256 (below that the
// 16-byte steps are cheaper): a 64-byte RDMA WRITE (120-byte region) is padded, a 2-byte one
// (58 bytes) and an ACK (44 bytes) are not.
inline constexpr size_t kIcrcBlock = 256;
inline constexpr size_t kIcrcPadFrom = 96;
inline constexpr uint32_t kIcrcZeroRegisterSeed = 0xFFFFFFFFu;

namespace detail {
// Copies n bytes; below 256 without a variable-length memcpy (GCC turns a bounded one into
// `rep movsq`, whose start-up cost dominated this copy, doc/perf.md): 16-byte chunks and one
// overlapping tail chunk; below 16 bytes, two overlapping 8- or 4-byte copies, or single bytes.
inline void copy_short(uint8_t *dst, const uint8_t *src, size_t n) noexcept {
  if (n >= 256) {  // long enough for `rep movsq` to pay off
    std::memcpy(dst, src, n);
  } else if (n >= 16) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
      std::memcpy(dst + i, src + i, 16);
    if (i != n) std::memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else {
    for (size_t i = 0; i < n; ++i)
      dst[i] = src[i];
  }
}
}  // namespace detail

// Copies the masked prefix of a packet starting at its IP header into `out` with the variant
// fields set to all ones. `l3` must hold at least icrc_masked_len(ipv6) bytes.
inline void icrc_mask_headers(const uint8_t *l3, bool ipv6, uint8_t *out) noexcept {
  // Whole-byte ORs over a fixed length: compiled to a few vector loads, ORs and stores, so the
  // CRC's wide loads of `out` are forwarded from equally wide stores.
  if (ipv6) {
    for (size_t i = 0; i < sizeof(detail::kIcrcMaskV6); ++i)
      out[i] = static_cast<uint8_t>(l3[i] | detail::kIcrcMaskV6[i]);
  } else {
    for (size_t i = 0; i < sizeof(detail::kIcrcMaskV4); ++i)
      out[i] = static_cast<uint8_t>(l3[i] | detail::kIcrcMaskV4[i]);
  }
}

// The ICRC with a caller-chosen CRC-32 routine: crc(seed, buf, len) must have zlib crc32's
// semantics (seed 0 starts a new CRC, a previous result continues it). The benchmark uses this
// to compare CRC implementations; everything else calls icrc_compute().
// `l3` points at the IP header; `len` counts the bytes from there up to (not including) the ICRC
// and must be at least icrc_masked_len(ipv6).
template <typename CrcFn>
inline uint32_t icrc_compute_with(CrcFn &&crc, const uint8_t *l3, size_t len, bool ipv6) noexcept {
  const size_t n = icrc_masked_len(ipv6);
  if (len <= kIcrcOneCallMax && len % kIcrcBlock < kIcrcPadFrom) {
    alignas(64) uint8_t buf[kIcrcOneCallMax];
    icrc_mask_headers(l3, ipv6, buf);
    detail::copy_short(buf + n, l3 + n, len - n);
    return crc(kIcrcLrhCrc, buf, len);
  }
  if (len <= kIcrcOneCallMax) {
    alignas(64) uint8_t buf[kIcrcOneCallMax + kIcrcBlock];
    const size_t total = (len + 4 + kIcrcBlock - 1) & ~(kIcrcBlock - 1);
    uint8_t *region = buf + total - len;
    // Zeros in whole 32-byte stores from the start; the last may run into the marker and the
    // region, which are written afterwards, and ends by total - len + 27 <= total (len >= n).
    static constexpr uint8_t kZero[32] = {};
    for (size_t i = 0; i < total - len - 4; i += 32)
      std::memcpy(buf + i, kZero, 32);
    std::memset(region - 4, 0xFF, 4);
    icrc_mask_headers(l3, ipv6, region);
    detail::copy_short(region + n, l3 + n, len - n);
    return crc(kIcrcZeroRegisterSeed, buf, total);
  }
  alignas(16) uint8_t masked[Ipv6Hdr::kSize + UdpHdr::kSize + Bth::kSize];
  icrc_mask_headers(l3, ipv6, masked);
  return crc(crc(kIcrcLrhCrc, masked, n), l3 + n, len - n);
}

// The ICRC in two CRC calls and no copy of the region: the masked headers from a small stack
// buffer, then the rest of the region in place (for a CRC without a large per-call cost).
template <typename CrcFn>
inline uint32_t icrc_compute_split(CrcFn &&crc, const uint8_t *l3, size_t len, bool ipv6) noexcept {
  const size_t n = icrc_masked_len(ipv6);
  alignas(16) uint8_t masked[Ipv6Hdr::kSize + UdpHdr::kSize + Bth::kSize];
  icrc_mask_headers(l3, ipv6, masked);
  return crc(crc(kIcrcLrhCrc, masked, n), l3 + n, len - n);
}

// CRC-32 with zlib semantics (seed 0 starts, a previous result continues), through ISA-L's
// crc32_gzip_refl and through libdeflate_crc32; exposed for the tests and benchmarks.
uint32_t crc32_isal(uint32_t seed, const uint8_t *buf, size_t len) noexcept;
uint32_t crc32_libdeflate(uint32_t seed, const uint8_t *buf, size_t len) noexcept;

// Which CRC serves which length (measured: bench/icrc_bench.cc, doc/perf.md "ICRC of short
// frames"). icrc_compute, by ICRC region length (IP header .. pad): below kIcrcSplitFrom ISA-L
// (icrc_compute_with, padded to a 256-byte block), from there to kIcrcIsalFrom libdeflate
// (icrc_compute_split), from there ISA-L again (a tie). crc32_dispatch (the CRC continued after
// a precomputed header state, icrc_prefix.h): libdeflate below kCrcIsalFrom bytes, ISA-L above.
inline constexpr size_t kIcrcSplitFrom = 256;
inline constexpr size_t kIcrcIsalFrom = 2048;
inline constexpr size_t kCrcIsalFrom = 2048;

// CRC-32 (zlib semantics) by libdeflate below kCrcIsalFrom bytes, by ISA-L from there.
uint32_t crc32_dispatch(uint32_t seed, const uint8_t *buf, size_t len) noexcept;

// The ICRC of the region at `l3` (see icrc_compute_with), by the fastest method for its length.
uint32_t icrc_compute(const uint8_t *l3, size_t len, bool ipv6) noexcept;

inline void icrc_store(uint8_t *p, uint32_t icrc) noexcept {
  p[0] = static_cast<uint8_t>(icrc);
  p[1] = static_cast<uint8_t>(icrc >> 8);
  p[2] = static_cast<uint8_t>(icrc >> 16);
  p[3] = static_cast<uint8_t>(icrc >> 24);
}
inline uint32_t icrc_load(const uint8_t *p) noexcept {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

}  // namespace uroce::wire
