// SPDX-License-Identifier: BSD-3-Clause
// The ICRC computation (wire/icrc.h) against a plain reference: a bitwise CRC-32 over the
// 8 bytes of 0xFF, the masked IP / UDP / BTH headers and the rest, built byte by byte here.
// Every region length on both sides of each 256-byte block boundary of the padded one-call path
// and of the two-call path is covered, for IPv4 and IPv6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "wire/icrc.h"

namespace uroce::wire {
namespace {

uint32_t reference_icrc(const std::vector<uint8_t> &region, bool ipv6) {
  std::vector<uint8_t> m(8, 0xFF);
  m.insert(m.end(), region.begin(), region.end());
  const size_t l3 = 8;
  const size_t udp = l3 + (ipv6 ? Ipv6Hdr::kSize : Ipv4Hdr::kSize);
  if (ipv6) {
    m[l3 + 0] |= 0x0F;  // traffic class (low nibble of byte 0, high nibble of byte 1)
    m[l3 + 1] = 0xFF;   // traffic class + flow label
    m[l3 + 2] = 0xFF;
    m[l3 + 3] = 0xFF;
    m[l3 + 7] = 0xFF;  // hop limit
  } else {
    m[l3 + 1] = 0xFF;   // TOS
    m[l3 + 8] = 0xFF;   // TTL
    m[l3 + 10] = 0xFF;  // header checksum
    m[l3 + 11] = 0xFF;
  }
  m[udp + 6] = 0xFF;  // UDP checksum
  m[udp + 7] = 0xFF;
  m[udp + UdpHdr::kSize + 4] = 0xFF;  // BTH byte 4
  return detail::crc32_bitwise(0, m.data(), m.size());
}

uint32_t bitwise(uint32_t seed, const uint8_t *p, size_t n) noexcept {
  return detail::crc32_bitwise(seed, p, n);
}

void check_lengths(bool ipv6) {
  std::mt19937 rng(ipv6 ? 6 : 4);
  const size_t first = icrc_masked_len(ipv6);
  for (size_t len = first; len <= kIcrcOneCallMax + 300; ++len) {
    std::vector<uint8_t> region(len);
    for (auto &b : region)
      b = static_cast<uint8_t>(rng());
    const uint32_t want = reference_icrc(region, ipv6);
    ASSERT_EQ(icrc_compute(region.data(), len, ipv6), want) << "len " << len << " ipv6 " << ipv6;
    ASSERT_EQ(icrc_compute_with(bitwise, region.data(), len, ipv6), want) << "len " << len;
  }
}

TEST(Icrc, EveryLengthMatchesTheBitwiseReferenceIpv4) {
  check_lengths(false);
}
TEST(Icrc, EveryLengthMatchesTheBitwiseReferenceIpv6) {
  check_lengths(true);
}

// The padded one-call layout rests on two CRC facts; pin them so a change of seed or marker
// fails here with a clear message, not only as a wrong ICRC.
TEST(Icrc, LeadingZerosAfterRegisterZeroAndTheFfMarker) {
  const uint8_t ff[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  // register 0 (seed 0xFFFFFFFF), then FF x4 == seed 0, then FF x8
  EXPECT_EQ(detail::crc32_bitwise(kIcrcZeroRegisterSeed, ff, 4), kIcrcLrhCrc);
  uint8_t z[260] = {};
  for (int i = 256; i < 260; ++i)
    z[i] = 0xFF;
  EXPECT_EQ(detail::crc32_bitwise(kIcrcZeroRegisterSeed, z, sizeof z), kIcrcLrhCrc);
  // the region's bytes must not leak in from outside: a different byte before the marker
  // (not a zero) changes the result
  z[100] = 1;
  EXPECT_NE(detail::crc32_bitwise(kIcrcZeroRegisterSeed, z, sizeof z), kIcrcLrhCrc);
}

// Reads exactly the region: a copy in a buffer of exactly `len` bytes (ASan builds catch an
// over-read) with poison around it gives the same ICRC as the original.
TEST(Icrc, ReadsOnlyTheRegion) {
  for (size_t len : {40u, 44u, 55u, 56u, 57u, 71u, 72u, 120u, 252u, 253u, 1024u, 1025u, 4136u}) {
    std::vector<uint8_t> region(len);
    for (size_t i = 0; i < len; ++i)
      region[i] = static_cast<uint8_t>(i * 37 + 11);
    const uint32_t want = reference_icrc(region, false);
    std::vector<uint8_t> padded(len + 64, 0xA5);
    std::copy(region.begin(), region.end(), padded.begin() + 32);
    EXPECT_EQ(icrc_compute(padded.data() + 32, len, false), want) << len;
    auto exact = std::make_unique<uint8_t[]>(len);
    std::copy(region.begin(), region.end(), exact.get());
    EXPECT_EQ(icrc_compute(exact.get(), len, false), want) << len;
  }
}

}  // namespace
}  // namespace uroce::wire
