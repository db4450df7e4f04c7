// SPDX-License-Identifier: BSD-3-Clause
// The ICRC of a connected QP's frames from a per-QP precomputed state of its headers.
//
// Between two frames of one QP (same header template, transport/hdr_template.h) the masked
// headers the ICRC covers (wire/icrc.h) differ only in these bytes, counted from the IP header:
//   IPv4: total length (2, 3), identification (4, 5), UDP length (28 + 4, 5 -> 24, 25),
//         BTH opcode (28), SE / M / pad / TVer (29), AckReq (36), PSN (37..39);
//   IPv6: payload length (4, 5), UDP length (44, 45), BTH opcode (48), SE / M / pad / TVer
//         (49), AckReq (56), PSN (57..59).
// (IPv4 TOS / TTL / checksum, IPv6 traffic class / flow label / hop limit, the UDP checksum and
// BTH byte 4 are masked to all ones and so never vary.) CRC-32 is linear: the CRC register after
// the 8 LRH bytes and the masked headers is the register for the template's headers with those
// bytes set to zero, XOR a term per varying byte that depends only on its value and its
// distance to the end of the headers (a 256-entry table per position, built at compile time).
// So a frame's ICRC costs a dozen table lookups plus one CRC call over the bytes after the BTH,
// read in place: no masking, no copy, no CRC of the headers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uroce::wire {

class IcrcPrefix {
 public:
  // Takes the constant bytes from the headers at `l3` (IP header .. BTH, icrc_masked_len(ipv6)
  // bytes, as a header template holds them); the varying bytes listed above are ignored.
  void init(const uint8_t *l3, bool ipv6) noexcept;

  // The ICRC of the region at `l3` (IP header up to, not including, the ICRC: `len` bytes, at
  // least icrc_masked_len(ipv6)) whose masked headers equal the ones given to init() except in
  // the varying bytes. Same result as icrc_compute(l3, len, ipv6) for such a frame.
  uint32_t compute(const uint8_t *l3, size_t len) const noexcept;

  // The CRC (zlib semantics) of the LRH bytes and the masked headers of such a frame: the seed
  // from which a CRC-32 over the region's bytes after the BTH gives the ICRC (compute() uses
  // crc32_dispatch; the benchmark tries each CRC).
  uint32_t headers_crc(const uint8_t *l3) const noexcept;

  bool ipv6() const noexcept { return ipv6_; }

 private:
  uint32_t reg_ = 0;  // CRC register (not inverted) after LRH + headers, varying bytes zero
  bool ipv6_ = false;
};

}  // namespace uroce::wire
