// SPDX-License-Identifier: BSD-3-Clause
#include "cm/cma.h"

#include <cstring>

#include "cm/bits.h"

namespace uroce::cm {

namespace {
constexpr Field kVersion{0, 0, 8}, kIpVersion{1, 0, 4}, kPort{2, 0, 16};
constexpr size_t kSrc = 4, kDst = 20;
}  // namespace

bool parse_service_id(uint64_t sid, PortSpace *ps, uint16_t *port) noexcept {
  const uint64_t space = sid >> 16;
  switch (static_cast<PortSpace>(space)) {
    case PortSpace::kIpoib:
    case PortSpace::kIb:
    case PortSpace::kTcp:
    case PortSpace::kUdp:
      if (space > 0xFFFF) return false;
      *ps = static_cast<PortSpace>(space);
      *port = static_cast<uint16_t>(sid & 0xFFFF);
      return true;
  }
  return false;
}

CmaHdr CmaHdr::ipv4(uint32_t src_be, uint16_t port, uint32_t dst_be) noexcept {
  CmaHdr h;
  h.ip_version = 4;
  h.port = port;
  std::memcpy(h.src + 12, &src_be, 4);
  std::memcpy(h.dst + 12, &dst_be, 4);
  return h;
}

CmaHdr CmaHdr::of(const wire::Gid &src, uint16_t port, const wire::Gid &dst) noexcept {
  CmaHdr h;
  h.ip_version = dst.is_v4mapped() ? 4 : 6;
  h.port = port;
  const size_t from = h.ip_version == 4 ? 12 : 0;
  std::memcpy(h.src + from, src.raw + from, 16 - from);
  std::memcpy(h.dst + from, dst.raw + from, 16 - from);
  return h;
}

namespace {
wire::Gid gid_of(uint8_t ip_version, const uint8_t *a) {
  wire::Gid g = wire::Gid::from_bytes(a);
  if (ip_version == 4) {
    std::memset(g.raw, 0, 10);
    g.raw[10] = g.raw[11] = 0xff;
  }
  return g;
}
}  // namespace

wire::Gid CmaHdr::src_gid() const noexcept {
  return gid_of(ip_version, src);
}
wire::Gid CmaHdr::dst_gid() const noexcept {
  return gid_of(ip_version, dst);
}

void write_cma_hdr(const CmaHdr &h, uint8_t *p) noexcept {
  std::memset(p, 0, kCmaHdrSize);
  set(p, kVersion, kCmaVersion);
  set(p, kIpVersion, h.ip_version);
  set(p, kPort, h.port);
  std::memcpy(p + kSrc, h.src, 16);
  std::memcpy(p + kDst, h.dst, 16);
}

bool read_cma_hdr(const uint8_t *p, CmaHdr *h) noexcept {
  if (get(p, kVersion) != kCmaVersion) return false;
  const uint8_t v = static_cast<uint8_t>(get(p, kIpVersion));
  if (v != 4 && v != 6) return false;
  h->ip_version = v;
  h->port = static_cast<uint16_t>(get(p, kPort));
  std::memcpy(h->src, p + kSrc, 16);
  std::memcpy(h->dst, p + kDst, 16);
  return true;
}

}  // namespace uroce::cm
