// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/sleeper.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <system_error>

namespace uroce::daemon {

namespace {
// epoll_event.data.u64: the source in the low byte.
uint64_t tag(WakeSource s) noexcept {
  return static_cast<uint64_t>(s);
}
}  // namespace

Sleeper::Sleeper() {
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  if (ep_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
  bell_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (bell_ < 0) {
    const int e = errno;
    close(ep_);
    throw std::system_error(e, std::generic_category(), "eventfd");
  }
  if (const int rc = watch(bell_, WakeSource::kBell, true); rc != 0) {
    close(bell_);
    close(ep_);
    throw std::system_error(-rc, std::generic_category(), "epoll_ctl");
  }
}

Sleeper::~Sleeper() {
  close(bell_);
  close(ep_);
}

int Sleeper::watch(int fd, WakeSource src, bool edge) noexcept {
  epoll_event ev{};
  ev.events = EPOLLIN | (edge ? EPOLLET : 0u);
  ev.data.u64 = tag(src);
  return epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

int Sleeper::unwatch(int fd) noexcept {
  return epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr) == 0 ? 0 : -errno;
}

void Sleeper::signal() noexcept {
  const uint64_t one = 1;
  // Non-blocking; EAGAIN only with the counter at its maximum, which counts as signalled.
  [[maybe_unused]] const ssize_t n = write(bell_, &one, sizeof one);
}

unsigned Sleeper::wait(uint64_t timeout_ns) noexcept {
  // The bell and the doorbell eventfds are edge-triggered and never read: each write is one
  // edge, and a write that lands before epoll_pwait2 leaves the fd on the ready list, so the
  // wait returns at once (doc/ipc.md, Sleeping consumers).
  epoll_event ev[16];
  timespec ts{};
  const timespec *tp = nullptr;
  if (timeout_ns != UINT64_MAX) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000u);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000u);
    tp = &ts;
  }
  const int n = epoll_pwait2(ep_, ev, 16, tp, nullptr);
  if (n <= 0) {
    // 0: the deadline; -1: EINTR (a signal: the loop looks at its stop flag).
    ++ctr_.wakeups[static_cast<unsigned>(WakeSource::kTimeout)];
    return 0;
  }
  unsigned seen = 0;
  for (int i = 0; i < n; ++i) {
    const unsigned s = static_cast<unsigned>(ev[i].data.u64 & 0xff);
    if (s >= static_cast<unsigned>(WakeSource::kCount) || (seen & (1u << s))) continue;
    seen |= 1u << s;
    ++ctr_.wakeups[s];
  }
  return static_cast<unsigned>(n);
}

}  // namespace uroce::daemon
