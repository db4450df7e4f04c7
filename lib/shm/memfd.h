// SPDX-License-Identifier: BSD-3-Clause
// memfd-backed shared memory: create / seal / verify a memfd, and map it (at any address, at a
// fixed address without replacing anything, or over an existing mapping of the caller's own).
// Creation returns errors as values; the RAII types never throw, and destroying them unmaps /
// closes. Not on the fast path (syscalls), but nothing here allocates either.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "shm/fd.h"

namespace uroce::shm {

inline constexpr size_t kPageSize = 4096;

constexpr size_t round_up_page(size_t n) noexcept {
  return (n + kPageSize - 1) & ~(kPageSize - 1);
}

struct MemfdOptions {
  bool seal_size = true;    // apply F_SEAL_GROW | F_SEAL_SHRINK after sizing
  bool seal_seals = false;  // also F_SEAL_SEAL (no further seals can be added or removed)
};

// A memfd of a fixed size. `name` shows up in /proc/PID/fd and /proc/PID/maps ("memfd:NAME").
class Memfd {
 public:
  Memfd() noexcept = default;
  static Result<Memfd> create(const char *name, size_t size, MemfdOptions opt = {}) noexcept;
  // Adopts a received fd (e.g. from SCM_RIGHTS). Checks that it is a memfd-like regular file of
  // at least `min_size` bytes whose size cannot shrink any more (F_SEAL_SHRINK): without that
  // seal the sender could truncate it and make the receiver's accesses SIGBUS.
  static Result<Memfd> adopt(UniqueFd fd, size_t min_size) noexcept;

  int fd() const noexcept { return fd_.get(); }
  size_t size() const noexcept { return size_; }
  bool valid() const noexcept { return fd_.valid(); }
  UniqueFd release() noexcept {
    size_ = 0;
    return std::move(fd_);
  }
  // Duplicates the fd (F_DUPFD_CLOEXEC), e.g. to pass it while keeping ours.
  Result<UniqueFd> dup() const noexcept;

 private:
  UniqueFd fd_;
  size_t size_ = 0;
};

// Adds seals (F_ADD_SEALS); returns 0 or an errno.
int add_seals(int fd, int seals) noexcept;
// Current seals (F_GET_SEALS) or -errno.
int get_seals(int fd) noexcept;

enum class MapProt { kRead, kReadWrite };

// An owned mmap'ed range. Unmapped on destruction.
class Mapping {
 public:
  Mapping() noexcept = default;
  ~Mapping() { reset(); }
  Mapping(Mapping &&o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0)) {}
  Mapping &operator=(Mapping &&o) noexcept {
    if (this != &o) {
      reset();
      addr_ = std::exchange(o.addr_, nullptr);
      len_ = std::exchange(o.len_, 0);
    }
    return *this;
  }
  Mapping(const Mapping &) = delete;
  Mapping &operator=(const Mapping &) = delete;

  // MAP_SHARED mapping of [offset, offset + len) of fd at a kernel-chosen address.
  static Result<Mapping> map(int fd, size_t len, MapProt prot = MapProt::kReadWrite,
                             off_t offset = 0) noexcept;
  // Same, but exactly at `addr` (page-aligned) and only if nothing is mapped there
  // (MAP_FIXED_NOREPLACE). Fails with EEXIST if any page of the range is taken; on kernels
  // older than 4.17, which ignore the flag and treat `addr` as a hint, a mapping elsewhere is
  // detected, undone, and reported as EEXIST too. The caller's fallback is to map anywhere
  // (map()) and translate addresses by the constant delta (doc/ipc.md).
  static Result<Mapping> map_fixed(int fd, size_t len, void *addr,
                                   MapProt prot = MapProt::kReadWrite, off_t offset = 0) noexcept;
  // Replaces the caller's *own* pages [addr, addr + len) (page-aligned) by a shared mapping of
  // fd, after copying their current contents into the fd: maps fd elsewhere, memcpy's, then
  // mremap(MREMAP_FIXED)s it over addr, which swaps the pages atomically (no instant where addr
  // is unmapped, so other threads never fault on a hole; writes they make to the old pages
  // during the copy are lost, which is why the shim does this inside ibv_reg_mr before the
  // buffer is in use by the network). The range must be readable. fd must be >= len bytes.
  // The returned Mapping owns [addr, addr + len).
  static Result<Mapping> replace(int fd, void *addr, size_t len) noexcept;
  // Adopts an existing mapping (e.g. for tests).
  static Mapping adopt(void *addr, size_t len) noexcept {
    Mapping m;
    m.addr_ = addr;
    m.len_ = len;
    return m;
  }

  void *addr() const noexcept { return addr_; }
  std::byte *data() const noexcept { return static_cast<std::byte *>(addr_); }
  size_t size() const noexcept { return len_; }
  bool valid() const noexcept { return addr_ != nullptr; }
  // Gives up ownership without unmapping.
  void *release() noexcept {
    len_ = 0;
    return std::exchange(addr_, nullptr);
  }
  void reset() noexcept;

 private:
  void *addr_ = nullptr;
  size_t len_ = 0;
};

// Convenience: a sealed memfd plus a read-write mapping of all of it.
struct SharedRegion {
  Memfd memfd;
  Mapping map;
  static Result<SharedRegion> create(const char *name, size_t size, MemfdOptions opt = {}) noexcept;
};

}  // namespace uroce::shm
