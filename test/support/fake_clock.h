// SPDX-License-Identifier: BSD-3-Clause
// A manually driven nanosecond clock for tests; satisfies transport::Clock.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "transport/port.h"

namespace uroce::test {

class FakeClock {
 public:
  explicit FakeClock(uint64_t start_ns = 0) noexcept : now_(start_ns) {}
  uint64_t now_ns() const noexcept { return now_; }
  // The clock is monotonic: setting it backwards is a test bug and aborts.
  void set(uint64_t t) noexcept {
    if (t < now_) {
      std::fprintf(stderr, "FakeClock::set(%llu) before now (%llu)\n",
                   static_cast<unsigned long long>(t), static_cast<unsigned long long>(now_));
      std::abort();
    }
    now_ = t;
  }
  void advance(uint64_t d) noexcept { set(now_ + d); }

 private:
  uint64_t now_;
};

static_assert(transport::Clock<FakeClock>);

}  // namespace uroce::test
