// SPDX-License-Identifier: BSD-3-Clause
// The RNR NAK timer encoding (IBTA 9.7.5.2.8, table 46): the 5-bit code carried in an RNR NAK
// (and set as min_rnr_timer on the responder) -> how long the requester waits before retrying.
#pragma once

#include <cstdint>

namespace uroce::transport {

// Nanoseconds for each code. Code 0 is the longest (655.36 ms), code 1 the shortest (10 us).
inline constexpr uint64_t kRnrTimerNs[32] = {
    655'360'000, 10'000,      20'000,      30'000,     40'000,     60'000,     80'000,
    120'000,     160'000,     240'000,     320'000,    480'000,    640'000,    960'000,
    1'280'000,   1'920'000,   2'560'000,   3'840'000,  5'120'000,  7'680'000,  10'240'000,
    15'360'000,  20'480'000,  30'720'000,  40'960'000, 61'440'000, 81'920'000, 122'880'000,
    163'840'000, 245'760'000, 327'680'000, 491'520'000};

constexpr uint64_t rnr_timer_ns(uint8_t code) noexcept {
  return kRnrTimerNs[code & 31];
}

// The local ACK timeout (IBTA 9.7.6.1.3): 4.096 us * 2^timeout; 0 disables the timer.
constexpr uint64_t ack_timeout_ns(uint8_t timeout) noexcept {
  return timeout == 0 ? 0 : 4096ull << (timeout & 31);
}

// retry_cnt / rnr_retry encoding: rnr_retry 7 means "retry forever" (IBTA 9.7.5.2.8);
// retry_cnt 7 is seven retries.
inline constexpr uint8_t kRnrRetryInfinite = 7;

static_assert(rnr_timer_ns(14) == 1'280'000 && rnr_timer_ns(31) == 491'520'000);
static_assert(ack_timeout_ns(14) == 67'108'864);

}  // namespace uroce::transport
