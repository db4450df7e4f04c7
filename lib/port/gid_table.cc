// SPDX-License-Identifier: BSD-3-Clause
#include "port/gid_table.h"

namespace uroce::port {

bool GidTable::add(const wire::Gid &g) {
  if (find(g) >= 0) return true;  // already present: not a drop
  if (entries_.size() >= kMaxEntries) return false;
  entries_.push_back(GidEntry{g, GidType::kRoceV2});
  return true;
}

GidTable GidTable::build(const uint8_t mac[6], std::span<const uint8_t *const> ipv4,
                         std::span<const uint8_t *const> ipv6, size_t *dropped) {
  GidTable t;
  size_t drops = 0;
  t.add(wire::Gid::link_local_from_mac(mac));
  for (const uint8_t *a : ipv4)
    drops += t.add(wire::Gid::from_ipv4(a)) ? 0 : 1;
  for (const uint8_t *a : ipv6)
    drops += t.add(wire::Gid::from_bytes(a)) ? 0 : 1;
  if (dropped) *dropped = drops;
  return t;
}

int GidTable::find(const wire::Gid &g) const noexcept {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].gid == g) return static_cast<int>(i);
  return -1;
}

}  // namespace uroce::port
