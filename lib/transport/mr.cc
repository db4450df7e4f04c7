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

MrTable::MrTable(uint32_t capacity, uint64_t seed)
    : cap_(capacity < (1u << 24) ? capacity : (1u << 24)),
      rng_(seed | 1),
      mr_(new MemoryRegion[cap_]()) {}

uint8_t MrTable::next_tag(uint8_t old) noexcept {
  // xorshift64*: not cryptographic, but not derivable from the index either.
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  const uint64_t r = rng_ * 0x2545F4914F6CDD1Dull;
  // 1..255: a tag is never 0, so no key is 0 (callers, the daemon's replication among them, and
  // verbs apps read a zero key as "none").
  uint8_t t = static_cast<uint8_t>(1 + (r >> 56) % 255);
  if (t == old) t = static_cast<uint8_t>(1 + t % 255);  // the next non-zero value
  return t;
}

int MrTable::reg(uint32_t pd, uint8_t *host, uint64_t va, uint64_t len, uint32_t access,
                 uint32_t *key) noexcept {
  if (host == nullptr || len == 0 || va + len < va) return EINVAL;
  // IBTA 10.6.3.1 / ib_check_mr_access: remote write or atomic needs local write.
  if ((access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(access & kAccessLocalWrite))
    return EINVAL;
  constexpr uint32_t kKnown = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                              kAccessRemoteAtomic | kAccessMwBind | kAccessZeroBased |
                              kAccessHugetlb | kAccessRelaxedOrdering;
  if (access & ~kKnown) return EINVAL;
  for (uint32_t i = 0; i < cap_; ++i) {
    MemoryRegion &m = mr_[i];
    if (m.state != MemoryRegion::State::kFree) continue;
    const uint8_t tag = next_tag(static_cast<uint8_t>(m.key));
    m.host = host;
    m.va = (access & kAccessZeroBased) ? 0 : va;
    m.length = len;
    m.access = access;
    m.pd = pd;
    m.key = (i << 8) | tag;
    m.state = MemoryRegion::State::kValid;
    ++in_use_;
    *key = m.key;
    return 0;
  }
  return ENOMEM;
}

int MrTable::dereg(uint32_t key, uint32_t *pd_out) noexcept {
  const uint32_t idx = key >> 8;
  if (idx >= cap_) return EINVAL;
  MemoryRegion &m = mr_[idx];
  if (m.state == MemoryRegion::State::kFree || m.key != key) return EINVAL;
  *pd_out = m.pd;
  m.state = MemoryRegion::State::kFree;
  m.host = nullptr;
  --in_use_;
  return 0;
}

int MrTable::invalidate(uint32_t key, uint32_t pd) noexcept {
  const uint32_t idx = key >> 8;
  if (idx >= cap_) return EINVAL;
  MemoryRegion &m = mr_[idx];
  if (m.state != MemoryRegion::State::kValid || m.key != key || m.pd != pd) return EINVAL;
  m.state = MemoryRegion::State::kInvalid;
  return 0;
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
