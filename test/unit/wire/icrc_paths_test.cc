// SPDX-License-Identifier: BSD-3-Clause
// Every way lib/wire computes a CRC-32 or an ICRC, against zlib's crc32 (an independent
// implementation): the CRC routines (ISA-L, libdeflate, the length dispatch), the ICRC layouts
// (ISA-L padded one-call / two-call, libdeflate split, the production dispatch) and the per-QP
// precomputed header state (icrc_prefix.h) with every varying header byte changed per frame.
// All ICRC region lengths 40..1324, IPv4 and IPv6.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <random>
#include <vector>

#include "wire/icrc.h"
#include "wire/icrc_prefix.h"

namespace uroce::wire {
namespace {

constexpr size_t kMaxRegion = 1324;

uint32_t zlib_crc(uint32_t seed, const uint8_t *p, size_t n) {
  return static_cast<uint32_t>(crc32(seed, p, static_cast<uInt>(n)));
}

// The ICRC by the book (IBTA A17.3.3): zlib's CRC-32 of 8 x 0xFF, then the region with the
// variant fields set to all ones field by field.
uint32_t zlib_icrc(const uint8_t *region, size_t len, bool ipv6) {
  std::vector<uint8_t> m(8, 0xFF);
  m.insert(m.end(), region, region + len);
  uint8_t *ip = m.data() + 8;
  uint8_t *udp = ip + (ipv6 ? 40 : 20);
  if (ipv6) {
    ip[0] |= 0x0F;  // traffic class, high nibble
    ip[1] = 0xFF;   // traffic class, low nibble + flow label
    ip[2] = ip[3] = 0xFF;
    ip[7] = 0xFF;  // hop limit
  } else {
    ip[1] = 0xFF;            // TOS
    ip[8] = 0xFF;            // TTL
    ip[10] = ip[11] = 0xFF;  // header checksum
  }
  udp[6] = udp[7] = 0xFF;  // UDP checksum
  udp[8 + 4] = 0xFF;       // BTH FECN / BECN / reserved
  return zlib_crc(zlib_crc(0, nullptr, 0), m.data(), m.size());
}

std::vector<uint8_t> random_bytes(std::mt19937 &rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto &b : v)
    b = static_cast<uint8_t>(rng());
  return v;
}

TEST(CrcPaths, EveryRoutineMatchesZlibForEveryLengthAndSeed) {
  std::mt19937 rng(1);
  const std::vector<uint8_t> buf = random_bytes(rng, 4300);
  for (size_t len = 0; len <= buf.size(); len += (len < 1400 ? 1 : 37)) {
    const size_t off = len % 13;  // misaligned starts too
    if (off + len > buf.size()) break;
    const uint8_t *p = buf.data() + off;
    for (uint32_t seed : {0u, kIcrcLrhCrc, static_cast<uint32_t>(rng())}) {
      const uint32_t want = zlib_crc(seed, p, len);
      ASSERT_EQ(crc32_isal(seed, p, len), want) << len;
      ASSERT_EQ(crc32_libdeflate(seed, p, len), want) << len;
      ASSERT_EQ(crc32_dispatch(seed, p, len), want) << len;
    }
  }
}

void check_icrc_layouts(bool ipv6) {
  std::mt19937 rng(ipv6 ? 66 : 44);
  for (size_t len = icrc_masked_len(ipv6); len <= kMaxRegion; ++len) {
    const std::vector<uint8_t> r = random_bytes(rng, len);
    const uint32_t want = zlib_icrc(r.data(), len, ipv6);
    ASSERT_EQ(icrc_compute(r.data(), len, ipv6), want) << "dispatch len " << len;
    ASSERT_EQ(icrc_compute_with(crc32_isal, r.data(), len, ipv6), want) << "isal len " << len;
    ASSERT_EQ(icrc_compute_split(crc32_libdeflate, r.data(), len, ipv6), want)
        << "libdeflate split len " << len;
    ASSERT_EQ(icrc_compute_split(crc32_isal, r.data(), len, ipv6), want) << "isal split " << len;
  }
}
TEST(IcrcPaths, EveryLayoutMatchesZlibIpv4) {
  check_icrc_layouts(false);
}
TEST(IcrcPaths, EveryLayoutMatchesZlibIpv6) {
  check_icrc_layouts(true);
}

// Offsets (from the IP header) of the bytes a QP's header template patches per packet.
const std::vector<size_t> kVaryV4 = {2, 3, 4, 5, 24, 25, 28, 29, 36, 37, 38, 39};
const std::vector<size_t> kVaryV6 = {4, 5, 44, 45, 48, 49, 56, 57, 58, 59};

// One QP's headers (random constant bytes, as a template holds them); each frame gets random
// values in every varying byte (lengths, IP id, opcode, flags / pad, AckReq, PSN), random masked
// bytes (ECN, TTL, checksum: the ICRC must not see them) and a random rest.
void check_prefix(bool ipv6) {
  std::mt19937 rng(ipv6 ? 606 : 404);
  const size_t n = icrc_masked_len(ipv6);
  const std::vector<uint8_t> tmpl = random_bytes(rng, n);
  IcrcPrefix prefix;
  prefix.init(tmpl.data(), ipv6);
  ASSERT_EQ(prefix.ipv6(), ipv6);
  const std::vector<size_t> &vary = ipv6 ? kVaryV6 : kVaryV4;
  const std::vector<size_t> masked = ipv6 ? std::vector<size_t>{1, 2, 3, 7, 46, 47, 52}
                                          : std::vector<size_t>{1, 8, 10, 11, 26, 27, 32};
  for (size_t len = n; len <= kMaxRegion; ++len) {
    std::vector<uint8_t> r = random_bytes(rng, len);
    std::copy(tmpl.begin(), tmpl.end(), r.begin());
    for (size_t i : vary)
      r[i] = static_cast<uint8_t>(rng());
    for (size_t i : masked)
      r[i] = static_cast<uint8_t>(rng());
    if (ipv6) r[0] = static_cast<uint8_t>((tmpl[0] & 0xF0) | (rng() & 0x0F));  // TC high nibble
    const uint32_t want = zlib_icrc(r.data(), len, ipv6);
    ASSERT_EQ(prefix.compute(r.data(), len), want) << "len " << len;
    ASSERT_EQ(zlib_crc(prefix.headers_crc(r.data()), r.data() + n, len - n), want) << len;
  }
}
TEST(IcrcPrefix, EveryLengthAndVaryingByteMatchesZlibIpv4) {
  check_prefix(false);
}
TEST(IcrcPrefix, EveryLengthAndVaryingByteMatchesZlibIpv6) {
  check_prefix(true);
}

// Every varying byte and value individually (the per-position tables, all 256 entries).
TEST(IcrcPrefix, EveryValueOfEveryVaryingByte) {
  for (bool ipv6 : {false, true}) {
    std::mt19937 rng(ipv6 ? 7 : 8);
    const size_t n = icrc_masked_len(ipv6);
    std::vector<uint8_t> r = random_bytes(rng, n + 20);
    IcrcPrefix prefix;
    prefix.init(r.data(), ipv6);
    for (size_t i : ipv6 ? kVaryV6 : kVaryV4) {
      const uint8_t keep = r[i];
      for (int v = 0; v < 256; ++v) {
        r[i] = static_cast<uint8_t>(v);
        ASSERT_EQ(prefix.compute(r.data(), r.size()), zlib_icrc(r.data(), r.size(), ipv6))
            << "ipv6 " << ipv6 << " byte " << i << " value " << v;
      }
      r[i] = keep;
    }
  }
}

// A byte outside the varying set is part of the precomputed state: a frame that differs from the
// template there (another QP's address, port or QPN) must not get the template's ICRC.
TEST(IcrcPrefix, ConstantBytesAreTheTemplates) {
  std::mt19937 rng(9);
  std::vector<uint8_t> r = random_bytes(rng, 40 + 64);
  IcrcPrefix prefix;
  prefix.init(r.data(), false);
  const uint32_t same = prefix.compute(r.data(), r.size());
  ASSERT_EQ(same, zlib_icrc(r.data(), r.size(), false));
  for (size_t i :
       {0u, 12u, 19u, 20u, 22u, 30u, 33u, 35u}) {  // version, addresses, ports, P_Key, QPN
    r[i] ^= 0x01;
    EXPECT_NE(prefix.compute(r.data(), r.size()), zlib_icrc(r.data(), r.size(), false)) << i;
    r[i] ^= 0x01;
  }
}

}  // namespace
}  // namespace uroce::wire
