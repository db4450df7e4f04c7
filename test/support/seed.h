// SPDX-License-Identifier: BSD-3-Clause
// Reproducible randomized tests: every seeded test takes its seed from here, so a failure
// prints the seed and `UROCE_SEED=N ./test --gtest_filter=...` replays the same run.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

namespace uroce::test {

// UROCE_SEED from the environment (decimal or 0x-hex) when set, else `fallback`. Prints the
// seed in use to stdout and records it as the test property "seed".
uint64_t test_seed(uint64_t fallback);

}  // namespace uroce::test

// Declares `const uint64_t var` = test_seed(fallback) and adds "seed=N" to every failure
// message in the enclosing scope.
#define UROCE_SEED(var, fallback)                          \
  const uint64_t var = ::uroce::test::test_seed(fallback); \
  SCOPED_TRACE(::testing::Message() << "seed=" << var << " (rerun with UROCE_SEED=" << var << ")")
