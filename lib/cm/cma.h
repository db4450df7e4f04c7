// SPDX-License-Identifier: BSD-3-Clause
// What Linux's rdma_cm puts into CM messages over IP (drivers/infiniband/core/cma.c): the
// service id of a port space and port, and the 36-byte header at the start of a REQ's (and a
// SIDR_REQ's) private data naming the IP version, the active side's port and both addresses.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/gid.h"

namespace uroce::cm {

// librdmacm's port spaces (enum rdma_ucm_port_space).
enum class PortSpace : uint16_t { kIpoib = 0x0002, kIb = 0x013F, kTcp = 0x0106, kUdp = 0x0111 };

constexpr uint64_t service_id(PortSpace ps, uint16_t port) noexcept {
  return (uint64_t{static_cast<uint16_t>(ps)} << 16) | port;
}
// The port space and port of an IP service id; false for any other service id.
bool parse_service_id(uint64_t sid, PortSpace *ps, uint16_t *port) noexcept;

inline constexpr size_t kCmaHdrSize = 36;
inline constexpr uint8_t kCmaVersion = 0x00;

struct CmaHdr {
  uint8_t ip_version = 4;  // 4 or 6
  uint16_t port = 0;       // the active side's (source) port
  uint8_t src[16] = {};    // IPv4: the address in bytes 12..15, the rest zero
  uint8_t dst[16] = {};

  static CmaHdr ipv4(uint32_t src_be, uint16_t port, uint32_t dst_be) noexcept;
  // From the connection's GIDs: IP version 4 when the destination is IPv4-mapped (then only
  // the last 4 bytes of each address are written), else 6 with the GIDs as they are.
  static CmaHdr of(const wire::Gid &src, uint16_t port, const wire::Gid &dst) noexcept;
  // The addresses as GIDs (IPv4: ::ffff:a.b.c.d again).
  wire::Gid src_gid() const noexcept;
  wire::Gid dst_gid() const noexcept;
};

void write_cma_hdr(const CmaHdr &h, uint8_t *p) noexcept;  // p: kCmaHdrSize bytes
// False when the header is not one rdma_cm writes (version, IP version).
bool read_cma_hdr(const uint8_t *p, CmaHdr *h) noexcept;

}  // namespace uroce::cm
