// SPDX-License-Identifier: BSD-3-Clause
#include "wire/icrc.h"

#include <isa-l/crc.h>
#include <libdeflate.h>

namespace uroce::wire {

uint32_t crc32_isal(uint32_t seed, const uint8_t *buf, size_t len) noexcept {
  return crc32_gzip_refl(seed, buf, static_cast<uint64_t>(len));
}

uint32_t crc32_libdeflate(uint32_t seed, const uint8_t *buf, size_t len) noexcept {
  return libdeflate_crc32(seed, buf, len);
}

uint32_t crc32_dispatch(uint32_t seed, const uint8_t *buf, size_t len) noexcept {
  if (len < kCrcIsalFrom) return libdeflate_crc32(seed, buf, len);
  return crc32_gzip_refl(seed, buf, static_cast<uint64_t>(len));
}

uint32_t icrc_compute(const uint8_t *l3, size_t len, bool ipv6) noexcept {
  if (len >= kIcrcSplitFrom && len < kIcrcIsalFrom)
    return icrc_compute_split(crc32_libdeflate, l3, len, ipv6);
  return icrc_compute_with(crc32_isal, l3, len, ipv6);
}

}  // namespace uroce::wire
