// SPDX-License-Identifier: BSD-3-Clause
// A cryptographically secure generator for the identifiers an off-path attacker must not guess
// (memory keys, QPNs, initial PSNs; doc/security.md): the ChaCha20 block function of RFC 8439
// in counter mode, keyed with 256 bits from getrandom(2). Header-only, no allocation; a draw
// costs one 64-byte block per 16 words. Not thread-safe: one instance per owner.
//
// `Csprng(seed)` derives the key from a 64-bit seed instead: reproducible runs for tests and
// fuzzers only, never where an attacker is assumed.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <system_error>

namespace uroce::util {

// Fills buf from the kernel's CSPRNG (getrandom(2), blocking until it is seeded). Returns 0 or
// the errno of the failure.
inline int getrandom_bytes(void *buf, size_t len) noexcept {
  auto *p = static_cast<uint8_t *>(buf);
  while (len > 0) {
    const ssize_t n = ::getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return 0;
}

// The ChaCha20 block function (RFC 8439 2.3): 16 words out of key, counter and nonce.
inline void chacha20_block(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3],
                           uint32_t out[16]) noexcept {
  uint32_t s[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u, key[0], key[1],
                    key[2],      key[3],      key[4],      key[5],      key[6], key[7],
                    counter,     nonce[0],    nonce[1],    nonce[2]};
  uint32_t x[16];
  std::memcpy(x, s, sizeof(x));
  auto rotl = [](uint32_t v, int c) { return (v << c) | (v >> (32 - c)); };
  auto qr = [&](int a, int b, int c, int d) {
    x[a] += x[b], x[d] = rotl(x[d] ^ x[a], 16);
    x[c] += x[d], x[b] = rotl(x[b] ^ x[c], 12);
    x[a] += x[b], x[d] = rotl(x[d] ^ x[a], 8);
    x[c] += x[d], x[b] = rotl(x[b] ^ x[c], 7);
  };
  for (int i = 0; i < 10; ++i) {
    qr(0, 4, 8, 12), qr(1, 5, 9, 13), qr(2, 6, 10, 14), qr(3, 7, 11, 15);
    qr(0, 5, 10, 15), qr(1, 6, 11, 12), qr(2, 7, 8, 13), qr(3, 4, 9, 14);
  }
  for (int i = 0; i < 16; ++i)
    out[i] = x[i] + s[i];
}

class Csprng {
 public:
  // Keyed from getrandom(2). Start-up code: throws std::system_error if the kernel refuses.
  Csprng() {
    const int rc = getrandom_bytes(key_, sizeof(key_));
    if (rc) throw std::system_error(rc, std::generic_category(), "getrandom");
  }
  // Reproducible (tests, fuzzers): the key is a function of `seed`, so not secret.
  explicit Csprng(uint64_t seed) noexcept {
    uint64_t z = seed;
    for (uint32_t &k : key_) {  // splitmix64 spreads the seed over the key
      z += 0x9E3779B97F4A7C15ull;
      uint64_t v = z;
      v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
      v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
      k = static_cast<uint32_t>(v ^ (v >> 31));
    }
  }

  uint32_t next_u32() noexcept {
    if (used_ == 16) refill();
    return buf_[used_++];
  }
  uint64_t next_u64() noexcept { return (uint64_t{next_u32()} << 32) | next_u32(); }
  // Uniform in [0, bound) without modulo bias; bound >= 1.
  uint32_t uniform(uint32_t bound) noexcept {
    const uint32_t limit = static_cast<uint32_t>(-bound) % bound;  // 2^32 mod bound
    for (;;) {
      const uint64_t m = uint64_t{next_u32()} * bound;
      if (static_cast<uint32_t>(m) >= limit) return static_cast<uint32_t>(m >> 32);
    }
  }

 private:
  void refill() noexcept {
    chacha20_block(key_, counter_, nonce_, buf_);
    if (++counter_ == 0) ++nonce_[0];  // 2^32 blocks per nonce: move on, never repeat
    used_ = 0;
  }

  uint32_t key_[8] = {};
  uint32_t nonce_[3] = {};
  uint32_t counter_ = 0;
  uint32_t buf_[16] = {};
  uint32_t used_ = 16;
};

}  // namespace uroce::util
