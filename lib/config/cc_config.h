// SPDX-License-Identifier: BSD-3-Clause
// The [cc] and [cc PORT] sections of uroced's configuration (congestion control,
// doc/config.md): keys, value parsing and presets. Internal to lib/config.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace uroce::config::detail {

// One "key = value" of a [cc] or [cc PORT] section (or a cc.* --set).
struct CcItem {
  std::string key, value;
  std::string where;    // "FILE:LINE" or "--set #N '...'"
  std::string section;  // "[cc]" or "[cc PORT]", for messages
};

bool is_cc_key(std::string_view key);
std::string cc_known_keys();  // comma-separated, for "unknown key" messages

// Applies one section's items on top of *cc: its `preset` first (it replaces every DCQCN
// parameter), then the other keys in order. Throws ConfigError naming the item.
void apply_cc_items(const std::vector<CcItem> &items, CcConfig *cc);

}  // namespace uroce::config::detail
