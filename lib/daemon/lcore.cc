// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/lcore.h"

#include "wire/hdr.h"

namespace uroce::daemon {

uint32_t frame_dest_qpn(const uint8_t *f, uint32_t len) noexcept {
  if (len < 14) return 0;
  uint32_t off = 12;
  uint16_t type = wire::be::load16(f + off);
  if (type == wire::kEtherTypeVlan) {
    if (len < 18) return 0;
    off += 4;
    type = wire::be::load16(f + off);
  }
  off += 2;
  if (type == wire::kEtherTypeIpv4)
    off += wire::Ipv4Hdr::kSize;
  else if (type == wire::kEtherTypeIpv6)
    off += wire::Ipv6Hdr::kSize;
  else
    return 0;
  off += wire::UdpHdr::kSize;
  if (len < off + wire::Bth::kSize) return 0;
  return wire::be::load24(f + off + 5);
}

int place_qp(const int *bound, size_t nbound, const uint32_t *load, size_t nworkers) noexcept {
  for (size_t i = 0; i < nbound; ++i) {
    if (bound[i] == kUnbound) continue;
    if (bound[i] < 0 || static_cast<size_t>(bound[i]) >= nworkers) return kUnbound;
    return bound[i];
  }
  if (nworkers == 0) return kUnbound;
  size_t best = 0;
  for (size_t i = 1; i < nworkers; ++i)
    if (load[i] < load[best]) best = i;
  return static_cast<int>(best);
}

}  // namespace uroce::daemon
