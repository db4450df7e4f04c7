// SPDX-License-Identifier: BSD-3-Clause
// The [daemon] section's quota_* keys (per-app limits, doc/config.md, doc/security.md
// "Quotas"): names, ranges and parsing. Internal to lib/config.
#pragma once

#include <string>
#include <string_view>

#include "config/config.h"

namespace uroce::config::detail {

bool is_quota_key(std::string_view key);
std::string quota_known_keys();  // comma-separated, for "unknown key" messages

// Sets the quota `key` names from `value`. Throws ConfigError "WHERE: key 'KEY' in [daemon]:
// ..." when the value is not a decimal integer in the key's range.
void apply_quota_key(std::string_view key, std::string_view value, const std::string &where,
                     QuotaConfig *q);

}  // namespace uroce::config::detail
