// SPDX-License-Identifier: BSD-3-Clause
#include "shm/eventfd.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace uroce::shm {

Result<EventFd> EventFd::create(bool semaphore) noexcept {
  int flags = EFD_CLOEXEC | EFD_NONBLOCK | (semaphore ? EFD_SEMAPHORE : 0);
  int fd = ::eventfd(0, flags);
  if (fd < 0) return Result<EventFd>::failure(errno);
  EventFd e;
  e.fd_.reset(fd);
  return e;
}

Result<EventFd> EventFd::adopt(UniqueFd fd) noexcept {
  if (!fd) return Result<EventFd>::failure(EBADF);
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd.get());
  UniqueFd info(::open(path, O_RDONLY | O_CLOEXEC));
  if (!info) return Result<EventFd>::failure(errno);
  char buf[512];
  ssize_t n = ::read(info.get(), buf, sizeof(buf) - 1);
  if (n <= 0) return Result<EventFd>::failure(n < 0 ? errno : EINVAL);
  buf[n] = '\0';
  if (std::strstr(buf, "eventfd-count:") == nullptr) return Result<EventFd>::failure(EINVAL);
  // Non-blocking regardless of how the peer created it: the lcore must never block on it.
  int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl < 0 || ::fcntl(fd.get(), F_SETFL, fl | O_NONBLOCK) != 0)
    return Result<EventFd>::failure(errno);
  EventFd e;
  e.fd_ = std::move(fd);
  return e;
}

int EventFd::signal(uint64_t n) const noexcept {
  if (n == 0) return EINVAL;
  for (;;) {
    ssize_t r = ::write(fd_.get(), &n, sizeof(n));
    if (r == static_cast<ssize_t>(sizeof(n))) return 0;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return 0;  // counter saturated: already signalled
    return r < 0 ? errno : EIO;
  }
}

int64_t EventFd::drain() const noexcept {
  uint64_t v = 0;
  for (;;) {
    ssize_t r = ::read(fd_.get(), &v, sizeof(v));
    if (r == static_cast<ssize_t>(sizeof(v))) return static_cast<int64_t>(v);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return 0;
    if (r >= 0) errno = EIO;
    return -1;
  }
}

int EventFd::wait(int timeout_ms) const noexcept {
  struct pollfd p = {fd_.get(), POLLIN, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r >= 0) return r > 0 ? 1 : 0;
    if (errno != EINTR) return -errno;
  }
}

}  // namespace uroce::shm
