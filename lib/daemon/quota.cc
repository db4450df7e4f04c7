// SPDX-License-Identifier: BSD-3-Clause
// Per-app quotas: the check, and the daemon's refusal counters.
#include "daemon/quota.h"

#include <cerrno>

#include "daemon/objects.h"

namespace uroce::daemon {

namespace {
constexpr const char *kNames[kQuotaKinds] = {
    "qps",       "cqs", "srqs", "mrs",     "mr_bytes", "ctl_outstanding",
    "event_fds", "pds", "ahs",  "ctl_rate"};
}  // namespace

const char *quota_name(QuotaKind k) noexcept {
  const size_t i = static_cast<size_t>(k);
  return i < kQuotaKinds ? kNames[i] : "?";
}

size_t quota_exceeded(const Quota &q, const QuotaUse &u, QuotaKind k, uint64_t more) noexcept {
  auto over = [](uint64_t used, uint64_t add, uint64_t limit) {
    return add > limit || used > limit - add;
  };
  switch (k) {
    case QuotaKind::kQps:
      return over(u.qps, more, q.qps) ? static_cast<size_t>(k) : kQuotaKinds;
    case QuotaKind::kCqs:
      if (over(u.cqs, more, q.cqs)) return static_cast<size_t>(k);
      // Every CQ holds a completion eventfd.
      return over(u.event_fds, more, q.event_fds) ? static_cast<size_t>(QuotaKind::kEventFds)
                                                  : kQuotaKinds;
    case QuotaKind::kSrqs:
      return over(u.srqs, more, q.srqs) ? static_cast<size_t>(k) : kQuotaKinds;
    case QuotaKind::kMrs:
    case QuotaKind::kMrBytes:
      if (over(u.mrs, 1, q.mrs)) return static_cast<size_t>(QuotaKind::kMrs);
      return over(u.mr_bytes, more, q.mr_bytes) ? static_cast<size_t>(QuotaKind::kMrBytes)
                                                : kQuotaKinds;
    case QuotaKind::kEventFds:
      return over(u.event_fds, more, q.event_fds) ? static_cast<size_t>(k) : kQuotaKinds;
    case QuotaKind::kPds:
      return over(u.pds, more, q.pds) ? static_cast<size_t>(k) : kQuotaKinds;
    case QuotaKind::kAhs:
      return over(u.ahs, more, q.ahs) ? static_cast<size_t>(k) : kQuotaKinds;
    case QuotaKind::kCtlOutstanding:
    case QuotaKind::kCtlRate:
      return kQuotaKinds;  // kept by the control server
  }
  return kQuotaKinds;
}

int Daemon::check_quota(Session &s, QuotaKind k, uint64_t more) noexcept {
  QuotaUse u;
  u.qps = s.qps.size();
  u.cqs = s.cqs.size();
  u.srqs = s.srqs.size();
  u.mrs = s.mrs.size() + s.mws.size();  // memory windows count as MRs
  u.mr_bytes = s.mr_bytes;
  u.event_fds = s.cqs.size();
  u.pds = s.pds.size();
  u.ahs = s.ahs.size();
  const size_t i = quota_exceeded(opt_.quota, u, k, more);
  if (i == kQuotaKinds) return 0;
  ++quota_refused_[i];
  ++s.quota_refused;
  return -ENOMEM;
}

void Daemon::on_throttle(ctl::Server &, const ctl::ClientInfo &ci) {
  ++quota_refused_[static_cast<size_t>(QuotaKind::kCtlOutstanding)];
  auto it = sessions_.find(ci.id);
  if (it != sessions_.end()) ++it->second->quota_refused;
}

void Daemon::on_rate_limit(ctl::Server &, const ctl::ClientInfo &ci) {
  ++quota_refused_[static_cast<size_t>(QuotaKind::kCtlRate)];
  auto it = sessions_.find(ci.id);
  if (it != sessions_.end()) ++it->second->quota_refused;
}

}  // namespace uroce::daemon
