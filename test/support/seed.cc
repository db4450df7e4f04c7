// SPDX-License-Identifier: BSD-3-Clause
#include "support/seed.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace uroce::test {

uint64_t test_seed(uint64_t fallback) {
  uint64_t seed = fallback;
  const char *env = std::getenv("UROCE_SEED");
  if (env != nullptr && *env != '\0') {
    char *end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 0);
    if (end == nullptr || *end != '\0') {
      std::fprintf(stderr, "UROCE_SEED=%s is not a number\n", env);
      std::abort();
    }
    seed = v;
  }
  std::printf("uroce seed: %llu%s\n", static_cast<unsigned long long>(seed),
              seed == fallback ? "" : " (from UROCE_SEED)");
  std::fflush(stdout);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

}  // namespace uroce::test
