// SPDX-License-Identifier: BSD-3-Clause
// uroce-stat: prints the counters of a running uroced (doc/uroced.md, Counters).
//
//   uroce-stat [-s SOCKET] [FILTER...]
// Prints "name value" per line, every counter whose name contains one of the FILTER strings
// (all counters without a filter); a neighbour entry (port.NAME.neigh.IP) prints as
// "name MAC STATE". Exit 0, or 1 if uroced cannot be reached.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client/client.h"
#include "port/neigh.h"

int main(int argc, char **argv) {
  std::string sock = "/run/uroce/uroced.sock";
  std::vector<std::string> filters;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "-s" || a == "--socket") && i + 1 < argc) {
      sock = argv[++i];
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: uroce-stat [-s SOCKET] [FILTER...]\n"
          "Prints uroced's counters (name value), those whose name contains a FILTER if any\n"
          "are given. Default socket: /run/uroce/uroced.sock. The connection uroce-stat\n"
          "itself opens is counted in daemon.sessions.\n");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "uroce-stat: unknown option '%s' (see --help)\n", a.c_str());
      return 2;
    } else {
      filters.push_back(a);
    }
  }
  std::unique_ptr<uroce::client::Context> ctx;
  int rc = uroce::client::Context::open(sock.c_str(), "uroce-stat", &ctx, 10'000);
  if (rc) {
    std::fprintf(stderr, "uroce-stat: cannot connect to %s: %s\n", sock.c_str(), std::strerror(rc));
    return 1;
  }
  std::vector<uroce::ctl::StatEntry> v;
  rc = ctx->stats(&v);
  if (rc) {
    std::fprintf(stderr, "uroce-stat: stats request failed: %s\n", std::strerror(rc));
    return 1;
  }
  for (const auto &e : v) {
    bool show = filters.empty();
    for (const std::string &f : filters)
      if (std::strstr(e.name, f.c_str()) != nullptr) show = true;
    if (!show) continue;
    if (std::strstr(e.name, ".neigh.") != nullptr) {  // a neighbour entry: MAC and state
      const uint64_t m = e.value;
      std::printf("%s %02x:%02x:%02x:%02x:%02x:%02x %s\n", e.name,
                  static_cast<unsigned>((m >> 40) & 0xff), static_cast<unsigned>((m >> 32) & 0xff),
                  static_cast<unsigned>((m >> 24) & 0xff), static_cast<unsigned>((m >> 16) & 0xff),
                  static_cast<unsigned>((m >> 8) & 0xff), static_cast<unsigned>(m & 0xff),
                  uroce::port::neigh_state_str(static_cast<uroce::port::NeighState>(m >> 48)));
    } else {
      std::printf("%s %lu\n", e.name, static_cast<unsigned long>(e.value));
    }
  }
  return 0;
}
