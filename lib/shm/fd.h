// SPDX-License-Identifier: BSD-3-Clause
// Small building blocks for lib/shm and lib/ctl: an owning file descriptor and an
// errno-carrying result. Nothing here throws; errors are values (negative errno style, stored
// positive in Result::error()).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace uroce::shm {

// Move-only owner of a file descriptor; closes it on destruction. -1 means "none".
class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd &&o) noexcept : fd_(o.release()) {}
  UniqueFd &operator=(UniqueFd &&o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd &) = delete;
  UniqueFd &operator=(const UniqueFd &) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) {
      // close() may fail with EINTR; on Linux the fd is released anyway, so never retry.
      (void)::close(fd_);
    }
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// A value or an errno. `error()` is 0 on success, a positive errno otherwise.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T v) noexcept : value_(std::move(v)), err_(0) {}  // NOLINT: implicit by design
  static Result failure(int err) noexcept { return Result(err, 0); }

  bool ok() const noexcept { return err_ == 0; }
  explicit operator bool() const noexcept { return ok(); }
  int error() const noexcept { return err_; }
  T &value() &noexcept { return value_; }
  T &&value() &&noexcept { return std::move(value_); }
  T *operator->() noexcept { return &value_; }
  T &operator*() &noexcept { return value_; }

 private:
  Result(int err, int) noexcept : value_(), err_(err != 0 ? err : EINVAL) {}
  T value_;
  int err_;
};

}  // namespace uroce::shm
