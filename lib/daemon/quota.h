// SPDX-License-Identifier: BSD-3-Clause
// Per-app quotas (doc/security.md, Quotas; the [daemon] quota_* keys of doc/config.md): what
// one app session may hold in uroced. A verb over quota is refused as rdma-core's providers
// refuse a request beyond a resource limit (ENOMEM), before anything is created, and counted
// per kind. The quotas on outstanding control requests and on their rate are kept by the
// control server (ctl::ServerOptions::max_outstanding, max_rate): it stops reading an app that
// has that many replies unread, or sends faster, so the app's own sends wait (EAGAIN on a
// non-blocking socket).
#pragma once

#include <cstddef>
#include <cstdint>

namespace uroce::daemon {

struct Quota {
  uint32_t qps = 256;
  uint32_t cqs = 256;
  uint32_t srqs = 64;
  uint32_t mrs = 1024;
  uint64_t mr_bytes = uint64_t{1} << 36;  // bytes of app memory mapped for its MRs (pages)
  uint32_t ctl_outstanding = 8;           // control replies the app may leave unread
  uint32_t event_fds = 256;               // completion eventfds (one per CQ)
  uint32_t pds = 64;                      // protection domains
  uint32_t ahs = 256;                     // address handles
  uint32_t ctl_rate = 0;                  // control messages per second (0: no limit)
};

enum class QuotaKind : uint8_t {
  kQps,
  kCqs,
  kSrqs,
  kMrs,
  kMrBytes,
  kCtlOutstanding,
  kEventFds,
  kPds,
  kAhs,
  kCtlRate
};
inline constexpr size_t kQuotaKinds = 10;

// "qps", "cqs", "srqs", "mrs", "mr_bytes", "ctl_outstanding", "event_fds", "pds", "ahs",
// "ctl_rate".
const char *quota_name(QuotaKind k) noexcept;

// What a session holds, as far as its quota goes.
struct QuotaUse {
  size_t qps = 0, cqs = 0, srqs = 0, mrs = 0;
  uint64_t mr_bytes = 0;
  size_t event_fds = 0;
  size_t pds = 0, ahs = 0;
};

// The first kind `use` + `more` of kind `k` (`more` = 1 object, or the bytes of a new MR) would
// exceed, or kQuotaKinds (as size_t) when it fits. An MR is checked for kMrs and kMrBytes.
size_t quota_exceeded(const Quota &q, const QuotaUse &use, QuotaKind k, uint64_t more) noexcept;

}  // namespace uroce::daemon
