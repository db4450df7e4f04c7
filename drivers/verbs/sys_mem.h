// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: the memory system calls of the MR path, made as raw system calls.
//
// Applications interpose libc's memory functions: UCX's memory hooks replace mmap, munmap,
// mremap, madvise (and brk, shmat) with versions that notify its registration cache, and its
// mremap takes four arguments, so the target address of mremap(MREMAP_FIXED) never reaches the
// kernel. The shim's remapping must reach the kernel exactly as written, whatever symbols the
// process interposes (doc/verbs.md, "Memory regions"): these call syscall(2) directly. Each
// returns what the libc function returns (MAP_FAILED / -1 with errno set).
#pragma once

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace uroce::verbs::sys {

inline void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) noexcept {
  return reinterpret_cast<void *>(::syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}
inline int munmap(void *addr, size_t len) noexcept {
  return static_cast<int>(::syscall(SYS_munmap, addr, len));
}
inline void *mremap(void *old, size_t old_len, size_t new_len, int flags, void *to) noexcept {
  return reinterpret_cast<void *>(::syscall(SYS_mremap, old, old_len, new_len, flags, to));
}
inline int mprotect(void *addr, size_t len, int prot) noexcept {
  return static_cast<int>(::syscall(SYS_mprotect, addr, len, prot));
}
inline int madvise(void *addr, size_t len, int advice) noexcept {
  return static_cast<int>(::syscall(SYS_madvise, addr, len, advice));
}
inline int memfd_create(const char *name, unsigned flags) noexcept {
  return static_cast<int>(::syscall(SYS_memfd_create, name, flags));
}
inline int ftruncate(int fd, off_t len) noexcept {
  return static_cast<int>(::syscall(SYS_ftruncate, fd, len));
}
inline int fallocate(int fd, int mode, off_t off, off_t len) noexcept {
  return static_cast<int>(::syscall(SYS_fallocate, fd, mode, off, len));
}

}  // namespace uroce::verbs::sys
