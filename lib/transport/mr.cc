// SPDX-License-Identifier: BSD-3-Clause
#include "transport/mr.h"

#include <cerrno>

namespace uroce::transport {

PdTable::PdTable(uint32_t capacity) : cap_(capacity), used_(new uint32_t[capacity]()) {}

uint32_t PdTable::alloc() noexcept {
  for (uint32_t i = 0; i < cap_; ++i)
    if (used_[i] == 0) {
      used_[i] = 1;
      return i + 1;
    }
  return 0;
}

int PdTable::dealloc(uint32_t pd) noexcept {
  if (!valid(pd)) return EINVAL;
  if (used_[pd - 1] != 1) return EBUSY;
  used_[pd - 1] = 0;
  return 0;
}

namespace {
uint32_t slots_for(uint32_t cap) noexcept {
  uint32_t n = 2;
  while (n < 2 * cap)
    n <<= 1;
  return n;
}
}  // namespace

MrTable::MrTable(uint32_t capacity, uint64_t seed)
    : cap_(capacity < (1u << 24) ? capacity : (1u << 24)),
      mask_(slots_for(cap_) - 1),
      rng_(seed ? util::Csprng(seed) : util::Csprng()),
      mr_(new MemoryRegion[mask_ + 1]()) {}

bool MrTable::valid_args(uint8_t *host, uint64_t va, uint64_t len, uint32_t access) noexcept {
  if (host == nullptr || len == 0 || va + len < va) return false;
  // IBTA 10.6.3.1 / ib_check_mr_access: remote write or atomic needs local write.
  if ((access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(access & kAccessLocalWrite))
    return false;
  constexpr uint32_t kKnown = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                              kAccessRemoteAtomic | kAccessMwBind | kAccessZeroBased |
                              kAccessHugetlb | kAccessRelaxedOrdering;
  return (access & ~kKnown) == 0;
}

void MrTable::fill(MemoryRegion &m, uint32_t key, uint32_t pd, uint8_t *host, uint64_t va,
                   uint64_t len, uint32_t access) noexcept {
  m.host = host;
  m.va = (access & kAccessZeroBased) ? 0 : va;
  m.length = len;
  m.access = access;
  m.pd = pd;
  m.key = key;
  set_state(m, MemoryRegion::State::kValid);  // publishes the fields to readers
  ++in_use_;
}

int MrTable::reg(uint32_t pd, uint8_t *host, uint64_t va, uint64_t len, uint32_t access,
                 uint32_t *key) noexcept {
  if (!valid_args(host, va, len, access)) return EINVAL;
  if (in_use_ >= cap_) return ENOMEM;
  // At least half the slots are free: each draw lands on one with probability >= 1/2, so the
  // loop ends after 2 draws on average (2^-64 to need more than 64).
  for (;;) {
    const uint32_t k = rng_.next_u32();
    MemoryRegion &m = mr_[k & mask_];
    // Key 0 is "none" to callers (the daemon's replication, verbs apps); a slot's next key
    // differs from its last one so that a stale key stays dead.
    if (state(m, std::memory_order_relaxed) != MemoryRegion::State::kFree || k == 0 || k == m.key)
      continue;
    fill(m, k, pd, host, va, len, access);
    *key = k;
    return 0;
  }
}

int MrTable::reg_with_key(uint32_t key, uint32_t pd, uint8_t *host, uint64_t va, uint64_t len,
                          uint32_t access) noexcept {
  if (key == 0 || !valid_args(host, va, len, access)) return EINVAL;
  MemoryRegion &m = mr_[key & mask_];
  if (state(m, std::memory_order_relaxed) != MemoryRegion::State::kFree || in_use_ >= cap_)
    return EBUSY;
  fill(m, key, pd, host, va, len, access);
  return 0;
}

int MrTable::dereg(uint32_t key, uint32_t *pd_out) noexcept {
  const int rc = retire(key, pd_out);
  if (rc == 0) release(key);
  return rc;
}

int MrTable::retire(uint32_t key, uint32_t *pd_out) noexcept {
  MemoryRegion &m = mr_[key & mask_];
  std::atomic_ref<MemoryRegion::State> st(m.state);
  MemoryRegion::State cur = st.load(std::memory_order_relaxed);
  // A reader may invalidate the region meanwhile (kValid -> kInvalid): retry the exchange.
  do {
    if (cur == MemoryRegion::State::kFree || cur == MemoryRegion::State::kRetired || m.key != key)
      return EINVAL;
  } while (!st.compare_exchange_weak(cur, MemoryRegion::State::kRetired, std::memory_order_acq_rel,
                                     std::memory_order_relaxed));
  *pd_out = m.pd;
  return 0;
}

void MrTable::release(uint32_t key) noexcept {
  MemoryRegion &m = mr_[key & mask_];
  if (m.key != key || state(m, std::memory_order_relaxed) != MemoryRegion::State::kRetired) return;
  m.host = nullptr;
  set_state(m, MemoryRegion::State::kFree);
  --in_use_;
}

int MrTable::modify(uint32_t key, uint32_t pd, uint32_t access, uint32_t *old_pd) noexcept {
  MemoryRegion &m = mr_[key & mask_];
  const MemoryRegion::State st = state(m, std::memory_order_acquire);
  if (st == MemoryRegion::State::kFree || st == MemoryRegion::State::kRetired || m.key != key)
    return EINVAL;
  if (pd == 0 || !valid_args(m.host, m.va, m.length, access)) return EINVAL;
  *old_pd = m.pd;
  std::atomic_ref<uint32_t>(m.pd).store(pd, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(m.access).store(access, std::memory_order_relaxed);
  return 0;
}

int MrTable::invalidate(uint32_t key, uint32_t pd) noexcept {
  MemoryRegion &m = mr_[key & mask_];
  MemoryRegion::State cur = MemoryRegion::State::kValid;
  if (state(m, std::memory_order_acquire) != cur || m.key != key || m.pd != pd) return EINVAL;
  // Only kValid -> kInvalid: a concurrent retire() wins or sees kInvalid and retries.
  return std::atomic_ref<MemoryRegion::State>(m.state).compare_exchange_strong(
             cur, MemoryRegion::State::kInvalid, std::memory_order_acq_rel)
             ? 0
             : EINVAL;
}

const char *mr_check_str(MrCheck c) noexcept {
  switch (c) {
    case MrCheck::kOk:
      return "ok";
    case MrCheck::kBadKey:
      return "bad key";
    case MrCheck::kWrongPd:
      return "wrong PD";
    case MrCheck::kNoAccess:
      return "missing access flag";
    case MrCheck::kOutOfBounds:
      return "out of bounds";
  }
  return "?";
}

}  // namespace uroce::transport
