// SPDX-License-Identifier: BSD-3-Clause
#include "shm/region.h"

#include <atomic>
#include <cerrno>
#include <cstring>

#include "uroce/ring.h"

namespace uroce::shm {

namespace {

abi::RegionHeader *hdr_of(void *base) noexcept {
  return static_cast<abi::RegionHeader *>(base);
}

}  // namespace

Result<RegionWriter> RegionWriter::init(void *mem, size_t bytes, uint32_t desc_capacity) noexcept {
  if (mem == nullptr || reinterpret_cast<uintptr_t>(mem) % abi::kCacheLine != 0 ||
      desc_capacity == 0 || desc_capacity > kMaxTracked)
    return Result<RegionWriter>::failure(EINVAL);
  const uint64_t table_end = region_table_end(desc_capacity);
  if (bytes < table_end) return Result<RegionWriter>::failure(ENOSPC);
  std::memset(mem, 0, table_end);
  abi::RegionHeader *h = hdr_of(mem);
  h->magic = abi::kRegionMagic;
  h->version = abi::kRegionVersion;
  h->header_size = sizeof(abi::RegionHeader);
  h->abi_version = abi::kAbiVersion;
  h->desc_size = sizeof(abi::RingDesc);
  h->region_bytes = bytes;
  h->desc_offset = sizeof(abi::RegionHeader);
  h->desc_capacity = desc_capacity;
  h->alloc_offset = table_end;
  std::atomic_ref<uint32_t>(h->desc_count).store(0, std::memory_order_release);
  RegionWriter w;
  w.base_ = mem;
  w.bytes_ = bytes;
  w.capacity_ = desc_capacity;
  w.alloc_ = table_end;
  return w;
}

Result<abi::RingDesc> RegionWriter::add_ring(abi::RingKind kind, uint32_t id, uint32_t slot_size,
                                             uint32_t slot_count, uint64_t start_index) noexcept {
  if (base_ == nullptr) return Result<abi::RingDesc>::failure(EINVAL);
  if (!ring_detail::valid_geometry(slot_size, slot_count))
    return Result<abi::RingDesc>::failure(EINVAL);
  for (uint32_t i = 0; i < count_; ++i) {
    if (keys_[i].kind == static_cast<uint32_t>(kind) && keys_[i].id == id)
      return Result<abi::RingDesc>::failure(EEXIST);
  }
  if (count_ >= capacity_) return Result<abi::RingDesc>::failure(ENOSPC);
  const uint64_t rb = abi::ring_bytes(slot_size, slot_count);
  const uint64_t rounded = (rb + abi::kCacheLine - 1) & ~uint64_t{abi::kCacheLine - 1};
  if (rounded > bytes_ - alloc_) return Result<abi::RingDesc>::failure(ENOSPC);
  abi::RingDesc d{};
  d.kind = static_cast<uint32_t>(kind);
  d.id = id;
  d.offset = alloc_;
  d.bytes = rb;
  d.slot_size = slot_size;
  d.slot_count = slot_count;
  void *ring = static_cast<std::byte *>(base_) + d.offset;
  if (ring_init(ring, rb, slot_size, slot_count, kind, id, start_index) != RingError::kOk)
    return Result<abi::RingDesc>::failure(EINVAL);
  abi::RegionHeader *h = hdr_of(base_);
  auto *table = reinterpret_cast<abi::RingDesc *>(static_cast<std::byte *>(base_) +
                                                  sizeof(abi::RegionHeader));
  std::memcpy(&table[count_], &d, sizeof(d));
  keys_[count_] = {d.kind, d.id};
  alloc_ += rounded;
  ++count_;
  h->alloc_offset = alloc_;
  // Release pairs with RegionReader::count()'s acquire load: the ring header and descriptor are
  // visible before the count that covers them.
  std::atomic_ref<uint32_t>(h->desc_count).store(count_, std::memory_order_release);
  return d;
}

Result<RegionReader> RegionReader::open(void *mem, size_t bytes) noexcept {
  if (mem == nullptr || reinterpret_cast<uintptr_t>(mem) % abi::kCacheLine != 0 ||
      bytes < sizeof(abi::RegionHeader))
    return Result<RegionReader>::failure(EINVAL);
  abi::RegionHeader h;
  std::memcpy(&h, mem, sizeof(h));
  if (h.magic != abi::kRegionMagic || h.header_size != sizeof(abi::RegionHeader) ||
      h.desc_size != sizeof(abi::RingDesc))
    return Result<RegionReader>::failure(EBADMSG);
  if (h.version != abi::kRegionVersion || h.abi_version != abi::kAbiVersion)
    return Result<RegionReader>::failure(EPROTO);
  if (h.region_bytes != bytes || h.desc_offset != sizeof(abi::RegionHeader) ||
      h.desc_capacity == 0 || region_table_end(h.desc_capacity) > bytes)
    return Result<RegionReader>::failure(EBADMSG);
  RegionReader r;
  r.base_ = mem;
  r.bytes_ = bytes;
  r.desc_offset_ = h.desc_offset;
  r.capacity_ = h.desc_capacity;
  return r;
}

uint32_t RegionReader::count() const noexcept {
  if (base_ == nullptr) return 0;
  // Acquire pairs with the release store of desc_count in RegionWriter::add_ring().
  const uint32_t n =
      std::atomic_ref<uint32_t>(hdr_of(base_)->desc_count).load(std::memory_order_acquire);
  return n < capacity_ ? n : capacity_;
}

Result<abi::RingDesc> RegionReader::at(uint32_t i) const noexcept {
  if (i >= count()) return Result<abi::RingDesc>::failure(ENOENT);
  abi::RingDesc d;
  std::memcpy(&d, static_cast<std::byte *>(base_) + desc_offset_ + uint64_t{i} * sizeof(d),
              sizeof(d));
  const uint64_t table_end = region_table_end(capacity_);
  if (!ring_detail::valid_geometry(d.slot_size, d.slot_count) ||
      d.bytes != abi::ring_bytes(d.slot_size, d.slot_count) || d.offset % abi::kCacheLine != 0 ||
      d.offset < table_end || d.offset > bytes_ || d.bytes > bytes_ - d.offset)
    return Result<abi::RingDesc>::failure(EBADMSG);
  return d;
}

Result<abi::RingDesc> RegionReader::find(abi::RingKind kind, uint32_t id) const noexcept {
  const uint32_t n = count();
  for (uint32_t i = 0; i < n; ++i) {
    abi::RingDesc d;
    std::memcpy(&d, static_cast<std::byte *>(base_) + desc_offset_ + uint64_t{i} * sizeof(d),
                sizeof(d));
    if (d.kind == static_cast<uint32_t>(kind) && d.id == id) return at(i);
  }
  return Result<abi::RingDesc>::failure(ENOENT);
}

}  // namespace uroce::shm
