// SPDX-License-Identifier: BSD-3-Clause
// --check's data: the pattern in the buffers before a run, the checks after it (-b: both
// sides), and the late receives of UC / UD.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "perf.h"

namespace uroce::perf {

void fill_pattern(Side &s, uint64_t size, uint64_t base, uint64_t n) {
  const uint64_t end = std::min(s.nslots, n == UINT64_MAX ? s.nslots : base + n);
  for (uint32_t q = 0; q < s.qps.size(); ++q)
    for (uint64_t k = base; k < end; ++k) {
      uint8_t *p = s.region_ptr(q) + k * s.slot + s.moff;
      for (uint64_t i = 0; i < size; ++i)
        p[i] = pat(q, i, size);
    }
}

bool check_slots(Side &s, uint32_t q, uint64_t base, uint64_t slots, uint64_t size,
                 bool check_tail) {
  for (uint64_t k = base; k < base + slots; ++k) {
    const uint8_t *p = s.region_ptr(q) + k * s.slot;
    for (uint64_t i = 0; i < size; ++i)
      if (p[i] != pat(q, i, size))
        return s.fail("--check: QP " + std::to_string(q) + " slot " + std::to_string(k) + " byte " +
                      std::to_string(i) + " differs (size " + std::to_string(size) + ")");
    if (check_tail && size < s.slot && p[size] != 0)
      return s.fail("--check: a message of " + std::to_string(size) + " bytes wrote past its end");
  }
  return true;
}

void prepare_bidir(Side &s, uint64_t size) {
  std::memset(s.buf.data(), 0, s.region * s.qps.size());
  if (s.o_.verb == Verb::kWrite || s.o_.verb == Verb::kSend)
    fill_pattern(s, size, s.src_base, s.src_n);
  if (s.o_.verb == Verb::kRead) fill_pattern(s, size, s.nslots / 2, s.nslots - s.nslots / 2);
}

bool check_bidir(Side &s, uint64_t size, const std::vector<uint64_t> &peer,
                 const std::vector<uint64_t> &mine) {
  const Options &o = s.o_;
  for (uint32_t q = 0; q < s.qps.size(); ++q) {
    bool ok = true;
    if (o.verb == Verb::kWrite) {
      const uint64_t h = s.nslots / 2;
      ok = check_slots(s, q, h, std::min(peer[q], h), size, true);
    } else if (o.verb == Verb::kRead) {
      ok = check_slots(s, q, 0, std::min(mine[q], s.src_n), size, true);
    } else if (o.verb == Verb::kAtomic) {
      uint64_t v = 0;
      std::memcpy(&v, s.region_ptr(q), 8);
      const uint64_t want = o.cmp_swap ? 0 : peer[q];
      ok = v == want || s.fail("--check: QP " + std::to_string(q) + " atomic value " +
                               std::to_string(v) + ", expected " + std::to_string(want));
    }
    if (!ok) return false;
  }
  return true;
}

bool settle_recvs(Side &s, uint64_t sent) {
  Cqe wc[32];
  uint64_t quiet_since = now_ns();
  while (s.received < sent && now_ns() - quiet_since < 200'000'000u) {
    const int n = s.ctx->poll_cq(*s.cq, wc, 32);
    for (int i = 0; i < n; ++i)
      if (!cqe_ok(s, wc[i], s.server_ ? "server" : "client") || !s.on_recv(wc[i])) return false;
    if (n > 0) quiet_since = now_ns();
  }
  return true;
}

}  // namespace uroce::perf
