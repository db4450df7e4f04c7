// SPDX-License-Identifier: BSD-3-Clause
// RoCE v2 GIDs: a GID is the port's IP address as 16 bytes. An IPv4 address is carried as the
// IPv4-mapped IPv6 address ::ffff:a.b.c.d (RFC 4291 2.5.5.2), which is also how rxe and
// ConnectX fill their GID tables; the packet builder picks IPv4 or IPv6 framing from it.
#pragma once

#include <cstdint>
#include <cstring>

namespace uroce::wire {

struct Gid {
  uint8_t raw[16] = {};

  static Gid from_ipv4(const uint8_t *a) noexcept {
    Gid g;
    g.raw[10] = 0xFF;
    g.raw[11] = 0xFF;
    std::memcpy(g.raw + 12, a, 4);
    return g;
  }
  static Gid from_ipv4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) noexcept {
    const uint8_t v[4] = {a, b, c, d};
    return from_ipv4(v);
  }
  static Gid from_bytes(const uint8_t *p) noexcept {
    Gid g;
    std::memcpy(g.raw, p, 16);
    return g;
  }
  // fe80::/64 with the modified EUI-64 of the MAC (RFC 4291 appendix A), as rxe's GID 0.
  static Gid link_local_from_mac(const uint8_t *mac) noexcept {
    Gid g;
    g.raw[0] = 0xFE;
    g.raw[1] = 0x80;
    g.raw[8] = mac[0] ^ 0x02;
    g.raw[9] = mac[1];
    g.raw[10] = mac[2];
    g.raw[11] = 0xFF;
    g.raw[12] = 0xFE;
    g.raw[13] = mac[3];
    g.raw[14] = mac[4];
    g.raw[15] = mac[5];
    return g;
  }

  bool is_v4mapped() const noexcept {
    static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    return std::memcmp(raw, kPrefix, 12) == 0;
  }
  const uint8_t *ipv4() const noexcept { return raw + 12; }  // valid when is_v4mapped()

  friend bool operator==(const Gid &a, const Gid &b) noexcept {
    return std::memcmp(a.raw, b.raw, 16) == 0;
  }
};

static_assert(sizeof(Gid) == 16);

}  // namespace uroce::wire
