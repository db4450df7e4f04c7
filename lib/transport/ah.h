// SPDX-License-Identifier: BSD-3-Clause
// Address handles: the path (MACs, GIDs, DSCP, flow label) a UD send takes, by handle.
//
// Readers on other threads, as MrTable (mr.h): a slot's fields are written only while it is
// free and published by a release store of its state; path() loads it with acquire. destroy in
// two steps, retire() (path() fails at once) and release() (the slot may be reused), lets the
// writer wait for a grace period between them, so that no reader is still copying the path
// when the slot is refilled. One writer thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "transport/verbs_types.h"

namespace uroce::transport {

class AhTable {
 public:
  explicit AhTable(uint32_t capacity) : cap_(capacity), ah_(new Entry[capacity ? capacity : 1]) {}

  // A handle >= 1, or 0 (table full).
  uint32_t create(uint32_t pd, const AhAttr &attr) noexcept {
    for (uint32_t i = 0; i < cap_; ++i) {
      Entry &e = ah_[i];
      if (state(e, std::memory_order_relaxed) != kFree) continue;
      e.pd = pd;
      e.attr = attr;
      set_state(e, kValid);
      return i + 1;
    }
    return 0;
  }
  // path() stops finding `ah`; its PD through *pd_out. 0 or EINVAL.
  int retire(uint32_t ah, uint32_t *pd_out) noexcept {
    if (ah < 1 || ah > cap_ || state(ah_[ah - 1], std::memory_order_relaxed) != kValid)
      return EINVAL;
    set_state(ah_[ah - 1], kRetired);
    *pd_out = ah_[ah - 1].pd;
    return 0;
  }
  // The slot of a retired handle may be reused (no reader holds its path any more).
  void release(uint32_t ah) noexcept {
    if (ah >= 1 && ah <= cap_ && state(ah_[ah - 1], std::memory_order_relaxed) == kRetired)
      set_state(ah_[ah - 1], kFree);
  }
  // retire + release, for a table no other thread reads.
  int destroy(uint32_t ah, uint32_t *pd_out) noexcept {
    const int rc = retire(ah, pd_out);
    if (rc == 0) release(ah);
    return rc;
  }

  // Fast path, any thread: the path of `ah` if it exists and belongs to `pd`, else nullptr.
  // Valid until the reader's next quiescent state.
  const wire::PathInfo *path(uint32_t ah, uint32_t pd) const noexcept {
    if (ah < 1 || ah > cap_) return nullptr;
    const Entry &e = ah_[ah - 1];
    if (state(e, std::memory_order_acquire) != kValid || e.pd != pd) return nullptr;
    return &e.attr.path;
  }
  uint32_t capacity() const noexcept { return cap_; }

 private:
  enum State : uint8_t { kFree = 0, kValid, kRetired };
  struct Entry {
    State st = kFree;
    uint32_t pd = 0;
    AhAttr attr;
  };
  static State state(const Entry &e, std::memory_order o) noexcept {
    return std::atomic_ref<State>(const_cast<State &>(e.st)).load(o);
  }
  static void set_state(Entry &e, State s) noexcept {
    std::atomic_ref<State>(e.st).store(s, std::memory_order_release);
  }

  uint32_t cap_;
  std::unique_ptr<Entry[]> ah_;
};

}  // namespace uroce::transport
