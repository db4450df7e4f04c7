// SPDX-License-Identifier: BSD-3-Clause
// The object tables of one verbs device: PDs, MRs, memory windows and AHs. uroced shares one among
// every worker's engine (EngineConfig::tables; doc/uroced.md, "Shared object tables"): the workers
// read them on the fast path without locks, the control thread writes them and frees an MR or
// AH only after a grace period (retire, wait, release; lib/daemon/grace.h). An engine without
// shared tables owns its own (tests, further ports).
#pragma once

#include <cerrno>
#include <cstdint>

#include "transport/ah.h"
#include "transport/mr.h"
#include "transport/mw.h"

namespace uroce::transport {

struct ObjectTables {
  // seed: MrTable's (0: keys from getrandom(2)). max_mw 0: as many windows as MRs.
  ObjectTables(uint32_t max_pd, uint32_t max_mr, uint32_t max_ah, uint64_t seed,
               uint32_t max_mw = 0)
      : pds(max_pd), mrs(max_mr, seed), mws(max_mw ? max_mw : max_mr, seed), ahs(max_ah) {}

  // Control thread. 0 / EINVAL / ENOMEM; lkey == rkey.
  int reg_mr(uint32_t pd, void *host, uint64_t app_va, uint64_t len, uint32_t access,
             uint32_t *key) noexcept {
    if (!pds.valid(pd)) return EINVAL;
    for (;;) {
      const int rc = mrs.reg(pd, static_cast<uint8_t *>(host), app_va, len, access, key);
      if (rc) return rc;
      // A key a window's rkeys could take (mw.h): draw again (no reader knows it yet).
      if (!mws.id_live(*key >> 8)) break;
      uint32_t unused = 0;
      mrs.dereg(*key, &unused);
    }
    pds.ref(pd);
    return 0;
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
  // Memory windows, control thread. 0 / EINVAL (bad PD or type) / ENOMEM.
  int alloc_mw(uint32_t pd, MwType type, uint32_t *rkey) noexcept {
    if (!pds.valid(pd) || (type != MwType::kType1 && type != MwType::kType2)) return EINVAL;
    const int rc = mws.alloc(pd, type, mrs, rkey);
    if (rc == 0) pds.ref(pd);
    return rc;
  }
  int dealloc_mw(uint32_t rkey) noexcept {
    uint32_t pd = 0;
    const int rc = mws.dealloc(rkey, &pd);
    if (rc == 0) pds.unref(pd);
    return rc;
  }
  // The responder's check of a remote key (MR, else window) for an access through QP `qpn`
  // of PD `pd`; on kOk *host is the byte for va. Any worker.
  MrCheck check_rkey(uint32_t rkey, uint32_t pd, uint32_t qpn, uint64_t va, uint64_t len,
                     uint32_t need, uint8_t **host) const noexcept {
    const MrCheck c = mrs.check(rkey, pd, va, len, need, host);
    if (c != MrCheck::kBadKey) return c;
    return mws.check(rkey, pd, qpn, va, len, need, mrs, host);
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
  MwTable mws;
  AhTable ahs;
};

}  // namespace uroce::transport
