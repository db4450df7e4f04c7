// SPDX-License-Identifier: BSD-3-Clause
// Protection domains and memory regions: every key check on a local SGE or a remote
// (rkey, va, length) triple happens here, before any byte moves.
//
// Keys (doc/security.md): lkey == rkey, 32 bits drawn from a CSPRNG (util/csprng.h, keyed
// from getrandom(2) unless the table is seeded for a test). The table has 2^b slots, at least
// twice the capacity; a key's low b bits name its slot, so lookup is one index and one
// comparison of the whole key. A new key is drawn uniformly among the keys whose slot is free
// (at most half are taken, so ~2 draws): the high 32 - b bits are uniform and the low b bits
// uniform over the free slots, >= 31 bits an attacker must guess. No key is 0, and a slot's
// next key always differs from its previous one, so a key kept after dereg_mr never matches
// the slot's next region. Bounds checks are written so that no intermediate value can
// overflow: va >= mr.va && len <= mr.len && va - mr.va <= mr.len - len.
//
// Readers on other threads (uroced: every worker reads one device's table, doc/uroced.md
// "Shared object tables"): a slot's fields are written only while it is kFree, then published
// by a release store of `state`, which check() loads with acquire. dereg in two steps, retire()
// (the key stops matching at once) and release() (the slot may be reused), lets the writer
// wait for a grace period between them, so that no reader still holds the region's `host`
// when it is unmapped or the slot refilled. invalidate() may run on any reader thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "transport/verbs_types.h"
#include "util/csprng.h"

namespace uroce::transport {

enum class MrCheck : uint8_t {
  kOk = 0,
  kBadKey,       // no such region, stale tag, or invalidated
  kWrongPd,      // region belongs to another protection domain
  kNoAccess,     // region lacks the access flag the operation needs
  kOutOfBounds,  // [va, va + len) is not inside the region
};

const char *mr_check_str(MrCheck c) noexcept;

struct MemoryRegion {
  // kRetired: deregistered, not reusable until release() (readers may still hold it).
  enum class State : uint8_t { kFree = 0, kValid, kInvalid, kRetired };
  uint8_t *host = nullptr;  // where app_va maps in this process
  uint64_t va = 0;          // the application's address of the first byte
  uint64_t length = 0;
  uint32_t access = 0;
  uint32_t pd = 0;
  uint32_t key = 0;
  State state = State::kFree;
};

class PdTable {
 public:
  explicit PdTable(uint32_t capacity);
  // Returns a handle >= 1, or 0 when the table is full.
  uint32_t alloc() noexcept;
  // 0, EINVAL (no such PD) or EBUSY (objects still use it).
  int dealloc(uint32_t pd) noexcept;
  bool valid(uint32_t pd) const noexcept { return pd >= 1 && pd <= cap_ && used_[pd - 1] != 0; }
  void ref(uint32_t pd) noexcept { ++used_[pd - 1]; }
  void unref(uint32_t pd) noexcept { --used_[pd - 1]; }

 private:
  uint32_t cap_;
  std::unique_ptr<uint32_t[]> used_;  // 0 free, else 1 + number of users
};

class MrTable {
 public:
  // seed 0: keys from a getrandom(2)-keyed CSPRNG (uroced); else reproducible (tests).
  MrTable(uint32_t capacity, uint64_t seed);

  // Registers [va, va + len) of the application, reachable at `host` here. Returns 0, EINVAL
  // (bad flags: remote write/atomic without local write, length 0 or va + len overflowing) or
  // ENOMEM (table full). The key is written to *key (lkey == rkey).
  int reg(uint32_t pd, uint8_t *host, uint64_t va, uint64_t len, uint32_t access,
          uint32_t *key) noexcept;
  // The same with the key chosen by the caller (one key for a region replicated in several
  // engines): 0, EINVAL (as reg, or key 0) or EBUSY (the key's slot is taken).
  int reg_with_key(uint32_t key, uint32_t pd, uint8_t *host, uint64_t va, uint64_t len,
                   uint32_t access) noexcept;
  // 0 or EINVAL (unknown key). Returns the region's PD through *pd_out for refcounting.
  // retire + release, for a table no other thread reads.
  int dereg(uint32_t key, uint32_t *pd_out) noexcept;
  // The key stops matching (check fails kBadKey from now on); the slot stays taken until
  // release(key), which the writer calls once no reader can still use the region. 0 or EINVAL.
  int retire(uint32_t key, uint32_t *pd_out) noexcept;
  void release(uint32_t key) noexcept;
  // ibv_rereg_mr of PD / access: the region keeps its key, range and state, and every later
  // check uses the new PD and access (written in place: a worker
  // checking the region at that moment sees the old or the new values, as with a WR the app
  // posts while it re-registers). 0 or EINVAL (unknown key, bad flags as reg). The old PD
  // is written to *old_pd.
  int modify(uint32_t key, uint32_t pd, uint32_t access, uint32_t *old_pd) noexcept;
  // Remote invalidation (SEND_WITH_INV), any thread: the region stops matching its rkey.
  // 0 or EINVAL.
  int invalidate(uint32_t key, uint32_t pd) noexcept;

  // The fast-path check. On kOk, *host points at the byte for `va`.
  MrCheck check(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t need,
                uint8_t **host) const noexcept {
    const MemoryRegion &m = mr_[key & mask_];
    if (state(m, std::memory_order_acquire) != MemoryRegion::State::kValid || m.key != key)
      return MrCheck::kBadKey;
    if (m.pd != pd) return MrCheck::kWrongPd;
    if ((m.access & need) != need) return MrCheck::kNoAccess;
    if (va < m.va || len > m.length || va - m.va > m.length - len) return MrCheck::kOutOfBounds;
    *host = m.host + (va - m.va);
    return MrCheck::kOk;
  }

  const MemoryRegion *find(uint32_t key) const noexcept {
    const MemoryRegion &m = mr_[key & mask_];
    const MemoryRegion::State st = state(m, std::memory_order_acquire);
    if (st == MemoryRegion::State::kFree || st == MemoryRegion::State::kRetired || m.key != key)
      return nullptr;
    return &m;
  }
  uint32_t in_use() const noexcept { return in_use_; }
  uint32_t capacity() const noexcept { return cap_; }

 private:
  static MemoryRegion::State state(const MemoryRegion &m, std::memory_order o) noexcept {
    return std::atomic_ref<MemoryRegion::State>(const_cast<MemoryRegion::State &>(m.state)).load(o);
  }
  static void set_state(MemoryRegion &m, MemoryRegion::State s) noexcept {
    std::atomic_ref<MemoryRegion::State>(m.state).store(s, std::memory_order_release);
  }
  static bool valid_args(uint8_t *host, uint64_t va, uint64_t len, uint32_t access) noexcept;
  void fill(MemoryRegion &m, uint32_t key, uint32_t pd, uint8_t *host, uint64_t va, uint64_t len,
            uint32_t access) noexcept;

  uint32_t cap_;   // regions at most (<= half the slots)
  uint32_t mask_;  // slots - 1
  uint32_t in_use_ = 0;
  util::Csprng rng_;
  std::unique_ptr<MemoryRegion[]> mr_;  // mask_ + 1 slots
};

}  // namespace uroce::transport
