// SPDX-License-Identifier: BSD-3-Clause
#include "config/quota_config.h"

#include <cstdint>

#include "config/number.h"

namespace uroce::config::detail {

namespace {

struct QuotaKey {
  const char *name;
  uint64_t lo, hi;
  void (*set)(QuotaConfig *, uint64_t);
};

// The engine's own limits bound qps too (doc/uroced.md); 32 control replies fit uroced's
// socket buffer (ctl_outstanding); ctl_rate 0 means no limit.
constexpr QuotaKey kQuotaKeys[] = {
    {"quota_qps", 1, 16384, [](QuotaConfig *q, uint64_t v) { q->qps = uint32_t(v); }},
    {"quota_cqs", 1, 16384, [](QuotaConfig *q, uint64_t v) { q->cqs = uint32_t(v); }},
    {"quota_srqs", 0, 16384, [](QuotaConfig *q, uint64_t v) { q->srqs = uint32_t(v); }},
    {"quota_mrs", 1, 1u << 20, [](QuotaConfig *q, uint64_t v) { q->mrs = uint32_t(v); }},
    {"quota_mr_bytes", 4096, uint64_t{1} << 46,
     [](QuotaConfig *q, uint64_t v) { q->mr_bytes = v; }},
    {"quota_ctl_outstanding", 1, 32,
     [](QuotaConfig *q, uint64_t v) { q->ctl_outstanding = uint32_t(v); }},
    {"quota_event_fds", 1, 16384, [](QuotaConfig *q, uint64_t v) { q->event_fds = uint32_t(v); }},
    {"quota_pds", 1, 16384, [](QuotaConfig *q, uint64_t v) { q->pds = uint32_t(v); }},
    {"quota_ahs", 1, 16384, [](QuotaConfig *q, uint64_t v) { q->ahs = uint32_t(v); }},
    {"quota_ctl_rate", 0, 1000000, [](QuotaConfig *q, uint64_t v) { q->ctl_rate = uint32_t(v); }},
};

const QuotaKey *find(std::string_view key) {
  for (const QuotaKey &k : kQuotaKeys)
    if (key == k.name) return &k;
  return nullptr;
}

}  // namespace

bool is_quota_key(std::string_view key) {
  return find(key) != nullptr;
}

std::string quota_known_keys() {
  std::string out;
  for (const QuotaKey &k : kQuotaKeys)
    out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

void apply_quota_key(std::string_view key, std::string_view value, const std::string &where,
                     QuotaConfig *q) {
  const QuotaKey *k = find(key);
  std::string why = "unknown key";
  uint64_t v = 0;
  if (k != nullptr && parse_decimal(value, k->lo, k->hi, &v, &why)) return k->set(q, v);
  throw ConfigError(where + ": key '" + std::string(key) + "' in [daemon]: " + why);
}

}  // namespace uroce::config::detail
