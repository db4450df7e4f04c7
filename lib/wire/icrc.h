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

// Copies the masked prefix of a packet starting at its IP header into `out` with the variant
// fields set to all ones. `l3` must hold at least icrc_masked_len(ipv6) bytes.
inline void icrc_mask_headers(const uint8_t *l3, bool ipv6, uint8_t *out) noexcept {
  const size_t n = icrc_masked_len(ipv6);
  std::memcpy(out, l3, n);
  size_t udp;
  if (ipv6) {
    out[0] |= 0x0F;                   // traffic class (high nibble) ...
    out[1] = out[2] = out[3] = 0xFF;  // ... and flow label
    out[7] = 0xFF;                    // hop limit
    udp = Ipv6Hdr::kSize;
  } else {
    out[1] = 0xFF;             // TOS
    out[8] = 0xFF;             // TTL
    out[10] = out[11] = 0xFF;  // header checksum
    udp = Ipv4Hdr::kSize;
  }
  out[udp + 6] = out[udp + 7] = 0xFF;   // UDP checksum
  out[udp + UdpHdr::kSize + 4] = 0xFF;  // BTH byte 4
}

// The ICRC with a caller-chosen CRC-32 routine: crc(seed, buf, len) must have zlib crc32's
// semantics (seed 0 starts a new CRC, a previous result continues it). The benchmark uses this
// to compare CRC implementations; everything else calls icrc_compute().
// `l3` points at the IP header; `len` counts the bytes from there up to (not including) the ICRC
// and must be at least icrc_masked_len(ipv6).
template <typename CrcFn>
inline uint32_t icrc_compute_with(CrcFn &&crc, const uint8_t *l3, size_t len, bool ipv6) noexcept {
  static constexpr uint8_t kLrh[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  uint8_t masked[Ipv6Hdr::kSize + UdpHdr::kSize + Bth::kSize];
  const size_t n = icrc_masked_len(ipv6);
  icrc_mask_headers(l3, ipv6, masked);
  uint32_t c = crc(0u, kLrh, sizeof(kLrh));
  c = crc(c, masked, n);
  return crc(c, l3 + n, len - n);
}

// ISA-L (crc32_gzip_refl).
uint32_t icrc_compute(const uint8_t *l3, size_t len, bool ipv6) noexcept;

// CRC-32 with zlib semantics through ISA-L; exposed for tests and benchmarks.
uint32_t crc32_isal(uint32_t seed, const uint8_t *buf, size_t len) noexcept;

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
