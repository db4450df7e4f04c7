// SPDX-License-Identifier: BSD-3-Clause
// The GID table of a port, filled the way the kernel fills rxe's for its netdev
// (drivers/infiniband/core/roce_gid_mgmt.c with a RoCE-v2-only device):
//   index 0: fe80::/64 + modified EUI-64 of the MAC (the default GID),
//   then one entry per IPv4 address (as ::ffff:a.b.c.d), in configuration order,
//   then one entry per IPv6 address, in configuration order.
// Every entry is of type RoCE v2. An address equal to an entry already present (e.g. the
// link-local configured explicitly) is not added twice, as ib_cache_gid_add() does.
// Pure C++, no DPDK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "wire/gid.h"

namespace uroce::port {

enum class GidType : uint8_t { kIb = 0, kRoceV1 = 1, kRoceV2 = 2 };

struct GidEntry {
  wire::Gid gid;
  GidType type = GidType::kRoceV2;
};

class GidTable {
 public:
  static constexpr size_t kMaxEntries = 1024;  // rxe's RXE_PORT_GID_TBL_LEN

  // ipv4: 4-byte addresses in network order; ipv6: 16-byte addresses. Entries beyond
  // kMaxEntries are ignored (build() reports how many were dropped).
  static GidTable build(const uint8_t mac[6], std::span<const uint8_t *const> ipv4,
                        std::span<const uint8_t *const> ipv6, size_t *dropped = nullptr);

  size_t size() const noexcept { return entries_.size(); }
  const GidEntry &operator[](size_t i) const noexcept { return entries_[i]; }
  const GidEntry *get(size_t i) const noexcept {
    return i < entries_.size() ? &entries_[i] : nullptr;
  }
  // Index of `g`, or -1.
  int find(const wire::Gid &g) const noexcept;

 private:
  bool add(const wire::Gid &g);
  std::vector<GidEntry> entries_;
};

}  // namespace uroce::port
