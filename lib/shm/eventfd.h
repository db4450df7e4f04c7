// SPDX-License-Identifier: BSD-3-Clause
// eventfd wrapper: the completion-event channel (ibv_get_cq_event). The lcore signals it only
// when a CQ is armed (RingProducer::take_arm); the app polls/epolls fd() and drains it.
#pragma once

#include <cstdint>

#include "shm/fd.h"

namespace uroce::shm {

class EventFd {
 public:
  EventFd() noexcept = default;
  // Non-blocking, close-on-exec. `semaphore`: drain() takes one count at a time.
  static Result<EventFd> create(bool semaphore = false) noexcept;
  // Adopts a received fd; checks that it really is an eventfd (/proc/self/fdinfo has
  // "eventfd-count") so a peer cannot make us write to a pipe or socket of its choosing.
  static Result<EventFd> adopt(UniqueFd fd) noexcept;

  // Adds n (>= 1) to the counter. Returns 0, or an errno. A counter already at its maximum
  // (EAGAIN) counts as success: the reader is signalled either way.
  int signal(uint64_t n = 1) const noexcept;
  // Reads and resets the counter (or takes 1 in semaphore mode). Returns the value read, 0 if
  // nothing was pending, or -1 with errno set on another error.
  int64_t drain() const noexcept;
  // Waits up to timeout_ms (-1: forever) for the fd to become readable. Returns 1 readable,
  // 0 timeout, -errno on error.
  int wait(int timeout_ms) const noexcept;

  int fd() const noexcept { return fd_.get(); }
  bool valid() const noexcept { return fd_.valid(); }
  UniqueFd release() noexcept { return std::move(fd_); }

 private:
  UniqueFd fd_;
};

}  // namespace uroce::shm
