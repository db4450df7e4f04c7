// SPDX-License-Identifier: BSD-3-Clause
#include "shm/memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace uroce::shm {

int add_seals(int fd, int seals) noexcept {
  if (::fcntl(fd, F_ADD_SEALS, seals) != 0) return errno;
  return 0;
}

int get_seals(int fd) noexcept {
  int s = ::fcntl(fd, F_GET_SEALS);
  return s < 0 ? -errno : s;
}

Result<Memfd> Memfd::create(const char *name, size_t size, MemfdOptions opt) noexcept {
  if (size == 0) return Result<Memfd>::failure(EINVAL);
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return Result<Memfd>::failure(errno);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return Result<Memfd>::failure(errno);
  int seals = 0;
  if (opt.seal_size) seals |= F_SEAL_GROW | F_SEAL_SHRINK;
  if (opt.seal_seals) seals |= F_SEAL_SEAL;
  if (seals != 0) {
    if (int e = add_seals(fd.get(), seals)) return Result<Memfd>::failure(e);
  }
  Memfd m;
  m.fd_ = std::move(fd);
  m.size_ = size;
  return m;
}

Result<Memfd> Memfd::adopt(UniqueFd fd, size_t min_size) noexcept {
  if (!fd) return Result<Memfd>::failure(EBADF);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Result<Memfd>::failure(errno);
  if (!S_ISREG(st.st_mode)) return Result<Memfd>::failure(EINVAL);
  const int seals = get_seals(fd.get());
  if (seals < 0) return Result<Memfd>::failure(-seals);  // not a sealable file (EINVAL)
  if ((seals & F_SEAL_SHRINK) == 0) return Result<Memfd>::failure(EPERM);
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) < min_size)
    return Result<Memfd>::failure(ERANGE);
  Memfd m;
  m.fd_ = std::move(fd);
  m.size_ = static_cast<size_t>(st.st_size);
  return m;
}

Result<UniqueFd> Memfd::dup() const noexcept {
  int d = ::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0);
  if (d < 0) return Result<UniqueFd>::failure(errno);
  return UniqueFd(d);
}

static int prot_bits(MapProt p) noexcept {
  return p == MapProt::kRead ? PROT_READ : PROT_READ | PROT_WRITE;
}

Result<Mapping> Mapping::map(int fd, size_t len, MapProt prot, off_t offset) noexcept {
  if (len == 0) return Result<Mapping>::failure(EINVAL);
  void *p = ::mmap(nullptr, len, prot_bits(prot), MAP_SHARED, fd, offset);
  if (p == MAP_FAILED) return Result<Mapping>::failure(errno);
  return Mapping::adopt(p, len);
}

Result<Mapping> Mapping::map_fixed(int fd, size_t len, void *addr, MapProt prot,
                                   off_t offset) noexcept {
  if (len == 0 || addr == nullptr || reinterpret_cast<uintptr_t>(addr) % kPageSize != 0)
    return Result<Mapping>::failure(EINVAL);
  void *p = ::mmap(addr, len, prot_bits(prot), MAP_SHARED | MAP_FIXED_NOREPLACE, fd, offset);
  if (p == MAP_FAILED) return Result<Mapping>::failure(errno);
  if (p != addr) {  // pre-4.17 kernel: the flag was ignored and addr used as a hint
    ::munmap(p, len);
    return Result<Mapping>::failure(EEXIST);
  }
  return Mapping::adopt(p, len);
}

Result<Mapping> Mapping::replace(int fd, void *addr, size_t len) noexcept {
  if (len == 0 || addr == nullptr || reinterpret_cast<uintptr_t>(addr) % kPageSize != 0 ||
      len % kPageSize != 0)
    return Result<Mapping>::failure(EINVAL);
  void *tmp = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (tmp == MAP_FAILED) return Result<Mapping>::failure(errno);
  std::memcpy(tmp, addr, len);
  void *p = ::mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, addr);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::munmap(tmp, len);
    return Result<Mapping>::failure(e);
  }
  return Mapping::adopt(p, len);
}

void Mapping::reset() noexcept {
  if (addr_ != nullptr) (void)::munmap(addr_, len_);
  addr_ = nullptr;
  len_ = 0;
}

Result<SharedRegion> SharedRegion::create(const char *name, size_t size,
                                          MemfdOptions opt) noexcept {
  auto mf = Memfd::create(name, size, opt);
  if (!mf) return Result<SharedRegion>::failure(mf.error());
  auto mp = Mapping::map(mf->fd(), size);
  if (!mp) return Result<SharedRegion>::failure(mp.error());
  SharedRegion r;
  r.memfd = std::move(mf).value();
  r.map = std::move(mp).value();
  return r;
}

}  // namespace uroce::shm
