// SPDX-License-Identifier: BSD-3-Clause
// The object tables of one verbs device: PDs, MRs and AHs. uroced shares one among every
// worker's engine (EngineConfig::tables; doc/uroced.md, "Shared object tables"): the workers
// read them on the fast path without locks, the control thread writes them and frees an MR or
// AH only after a grace period (retire, wait, release; lib/daemon/grace.h). An engine without
// shared tables owns its own (tests, further ports).
#pragma once

#include <cerrno>
#include <cstdint>

#include "transport/ah.h"
#include "transport/mr.h"

namespace uroce::transport {

struct ObjectTables {
  // seed: MrTable's (0: keys from getrandom(2)).
  ObjectTables(uint32_t max_pd, uint32_t max_mr, uint32_t max_ah, uint64_t seed)
      : pds(max_pd), mrs(max_mr, seed), ahs(max_ah) {}

  // Control thread. 0 / EINVAL / ENOMEM; lkey == rkey.
  int reg_mr(uint32_t pd, void *host, uint64_t app_va, uint64_t len, uint32_t access,
             uint32_t *key) noexcept {
    if (!pds.valid(pd)) return EINVAL;
    const int rc = mrs.reg(pd, static_cast<uint8_t *>(host), app_va, len, access, key);
    if (rc == 0) pds.ref(pd);
    return rc;
  }
  // The key stops matching now; release_mr(key) after a grace period. 0 / EINVAL.
  int retire_mr(uint32_t key) noexcept {
    uint32_t pd = 0;
    const int rc = mrs.retire(key, &pd);
    if (rc == 0) pds.unref(pd);
    return rc;
  }
  void release_mr(uint32_t key) noexcept { mrs.release(key); }
  // ibv_rereg_mr of PD / access in place, the key kept: 0 or EINVAL.
  int rereg_mr(uint32_t key, uint32_t pd, uint32_t access) noexcept {
    if (!pds.valid(pd)) return EINVAL;
    uint32_t old = 0;
    const int rc = mrs.modify(key, pd, access, &old);
    if (rc) return rc;
    pds.ref(pd);
    pds.unref(old);
    return 0;
  }
  // A handle >= 1, or 0 (bad PD, IPv4 / IPv6 GID mix, table full).
  uint32_t create_ah(uint32_t pd, const AhAttr &attr) noexcept {
    if (!pds.valid(pd)) return 0;
    if (attr.path.sgid.is_v4mapped() != attr.path.dgid.is_v4mapped()) return 0;
    const uint32_t ah = ahs.create(pd, attr);
    if (ah != 0) pds.ref(pd);
    return ah;
  }
  int retire_ah(uint32_t ah) noexcept {
    uint32_t pd = 0;
    const int rc = ahs.retire(ah, &pd);
    if (rc == 0) pds.unref(pd);
    return rc;
  }
  void release_ah(uint32_t ah) noexcept { ahs.release(ah); }

  PdTable pds;
  MrTable mrs;
  AhTable ahs;
};

}  // namespace uroce::transport
