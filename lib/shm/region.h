// SPDX-License-Identifier: BSD-3-Clause
// The context region (abi::RegionHeader + descriptor table + rings), built by uroced and looked
// up by the shim. The writer keeps private copies of everything (header fields, descriptors,
// allocation cursor) and never reads the shared table back; the reader validates every
// descriptor it returns (offset alignment, bounds with overflow-safe arithmetic, geometry).
#pragma once

#include <cstddef>
#include <cstdint>

#include "shm/fd.h"
#include "uroce/abi.h"

namespace uroce::shm {

// Bytes needed for a region with `desc_capacity` descriptors and rings totalling `ring_bytes`
// (each ring rounded up to 64 bytes).
constexpr uint64_t region_table_end(uint32_t desc_capacity) noexcept {
  const uint64_t t = sizeof(abi::RegionHeader) + uint64_t{desc_capacity} * sizeof(abi::RingDesc);
  return (t + abi::kCacheLine - 1) & ~uint64_t{abi::kCacheLine - 1};
}

class RegionWriter {
 public:
  RegionWriter() noexcept = default;
  // Formats `mem` (64-byte aligned, `bytes` long, zero or not) as an empty region.
  static Result<RegionWriter> init(void *mem, size_t bytes, uint32_t desc_capacity) noexcept;

  // Carves out and initializes a ring, then publishes its descriptor. ENOSPC if the table or
  // the region is full, EINVAL on bad geometry, EEXIST if (kind, id) is already present.
  Result<abi::RingDesc> add_ring(abi::RingKind kind, uint32_t id, uint32_t slot_size,
                                 uint32_t slot_count, uint64_t start_index = 0) noexcept;

  void *ring_addr(const abi::RingDesc &d) const noexcept {
    return static_cast<std::byte *>(base_) + d.offset;
  }
  uint32_t count() const noexcept { return count_; }
  uint64_t used_bytes() const noexcept { return alloc_; }

 private:
  void *base_ = nullptr;
  uint64_t bytes_ = 0;
  uint32_t capacity_ = 0;
  uint32_t count_ = 0;
  uint64_t alloc_ = 0;
  // Private copy of the published (kind, id) pairs, for the duplicate check. Regions hold a
  // bounded number of rings; the table is small.
  static constexpr uint32_t kMaxTracked = 1024;
  struct Key {
    uint32_t kind, id;
  } keys_[kMaxTracked] = {};
};

class RegionReader {
 public:
  RegionReader() noexcept = default;
  // Validates the header of a mapped region (magic, versions, sizes, table bounds).
  static Result<RegionReader> open(void *mem, size_t bytes) noexcept;

  // Finds the ring (kind, id). ENOENT if absent; EBADMSG if its descriptor is malformed.
  Result<abi::RingDesc> find(abi::RingKind kind, uint32_t id) const noexcept;
  // Descriptor i (< count()), validated.
  Result<abi::RingDesc> at(uint32_t i) const noexcept;
  // Published descriptors (acquire load pairing with the writer's release of desc_count),
  // clamped to the capacity seen at open().
  uint32_t count() const noexcept;

  void *ring_addr(const abi::RingDesc &d) const noexcept {
    return static_cast<std::byte *>(base_) + d.offset;
  }

 private:
  void *base_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t desc_offset_ = 0;
  uint32_t capacity_ = 0;
};

}  // namespace uroce::shm
