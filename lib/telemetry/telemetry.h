// SPDX-License-Identifier: BSD-3-Clause
// uroced's counters as DPDK telemetry commands under /uroce/ (doc/uroced.md, Telemetry), read
// with Debian's dpdk-telemetry.py. A command's callback runs on a DPDK telemetry thread: it
// asks uroced's own control socket for the counters (the kStats message uroce-stat uses), so
// no daemon state is shared with that thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "uroce/ctl_verbs.h"

namespace uroce::telemetry {

// One /uroce/ command: the counters whose names start with `prefix`.
//   kGroup: every such counter, keyed by the name without the prefix (/uroce/engine);
//   kList:  the distinct next name components (/uroce/qps: the QPNs);
//   kItem:  needs a parameter P: the counters under prefix + P + "." + sub (/uroce/qp,17;
//           /uroce/cc,p0: port.p0.cc.*).
struct Command {
  const char *name;    // "/uroce/engine"
  const char *prefix;  // "engine."
  enum Kind { kGroup, kList, kItem } kind;
  const char *help;
  const char *sub;  // kItem: below the item ("cc.", or "")
};
extern const Command kCommands[];
extern const unsigned kNumCommands;

using Entries = std::vector<std::pair<std::string, uint64_t>>;

// What `c` answers with `param` over the counters `stats` (pure; tested without DPDK).
// kList entries carry the component as key and the number of counters under it as value.
// Returns 0, or -EINVAL (a missing or unexpected parameter).
int select(const Command &c, const char *param, const std::vector<ctl::StatEntry> &stats,
           Entries *out);

// Registers every command; `ctl_socket` is the daemon's control socket. Call once, after
// rte_eal_init and before the control socket is served. Returns 0 or a negative errno.
int register_commands(const std::string &ctl_socket);

}  // namespace uroce::telemetry
