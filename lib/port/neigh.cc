// SPDX-License-Identifier: BSD-3-Clause
#include "port/neigh.h"

#include "wire/hdr.h"

namespace uroce::port {

namespace be = wire::be;  // the byte-order helpers of lib/wire/hdr.h

uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t n) noexcept {
  size_t i = 0;
  for (; i + 1 < n; i += 2)
    sum += be::load16(p + i);
  if (i < n) sum += uint32_t{p[i]} << 8;
  while (sum >> 16)
    sum = (sum & 0xFFFF) + (sum >> 16);
  return sum;
}

uint16_t csum_fold(uint32_t sum) noexcept {
  while (sum >> 16)
    sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

const char *neigh_state_str(NeighState s) noexcept {
  switch (s) {
    case NeighState::kFree:
      return "free";
    case NeighState::kIncomplete:
      return "incomplete";
    case NeighState::kReachable:
      return "reachable";
    case NeighState::kStale:
      return "stale";
    case NeighState::kProbe:
      return "probe";
    case NeighState::kFailed:
      return "failed";
  }
  return "?";
}

}  // namespace uroce::port
