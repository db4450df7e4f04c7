// SPDX-License-Identifier: BSD-3-Clause
// uroce-stat: prints the counters of a running uroced (doc/uroced.md, Counters).
//
//   uroce-stat [-s SOCKET] [-w SECS [-n COUNT]] [FILTER...]
// Prints "name value" per line, every counter whose name contains one of the FILTER strings
// (all counters without a filter); a neighbour entry (port.NAME.neigh.IP) prints as
// "name MAC STATE". With --watch, a block every SECS: a "# t=" header with the measured
// interval, then "name value rate/s" (the change since the previous block divided by that
// interval). Exit 0, 1 if uroced cannot be reached, 2 for a bad option.
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "port/neigh.h"

namespace {

struct Options {
  std::string sock = "/run/uroce/uroced.sock";
  std::vector<std::string> filters;
  double watch_s = 0;       // 0: print once
  unsigned long count = 0;  // blocks in watch mode (0: until interrupted)
};

void usage(FILE *f) {
  std::fprintf(f,
               "usage: uroce-stat [-s SOCKET] [-w|--watch [SECS]] [-n|--count N] [FILTER...]\n"
               "Prints uroced's counters (name value), those whose name contains a FILTER if any\n"
               "are given. Default socket: /run/uroce/uroced.sock. The connection uroce-stat\n"
               "itself opens is counted in daemon.sessions.\n"
               "  -w, --watch [SECS]  print a block every SECS (default 1, 0.05..3600) with the\n"
               "                      rate of each counter: name value rate/s\n"
               "  -n, --count N       stop after N blocks (watch mode; default: until killed)\n");
}

bool parse_double(const char *s, double *out) {
  char *end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (errno || end == s || *end) return false;
  *out = v;
  return true;
}

// 0, or the exit status for a bad command line (2) / --help (-1: exit 0).
int parse(int argc, char **argv, Options *o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-s" || a == "--socket") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "uroce-stat: %s needs a socket path\n", a.c_str());
        return 2;
      }
      o->sock = argv[++i];
    } else if (a == "-w" || a == "--watch" || a.rfind("--watch=", 0) == 0) {
      const char *v = nullptr;
      if (a.size() > 8 && a[7] == '=') {
        v = a.c_str() + 8;
      } else if (i + 1 < argc && (std::isdigit(static_cast<unsigned char>(argv[i + 1][0])) ||
                                  argv[i + 1][0] == '.')) {
        v = argv[++i];
      }
      o->watch_s = 1.0;
      if (v && (!parse_double(v, &o->watch_s) || !(o->watch_s >= 0.05 && o->watch_s <= 3600))) {
        std::fprintf(stderr, "uroce-stat: --watch '%s': seconds between 0.05 and 3600\n", v);
        return 2;
      }
    } else if (a == "-n" || a == "--count") {
      char *end = nullptr;
      if (i + 1 >= argc || (o->count = std::strtoul(argv[i + 1], &end, 10), *end) ||
          argv[i + 1][0] == '-' || argv[i + 1][0] == 0) {
        std::fprintf(stderr, "uroce-stat: %s needs a number of blocks\n", a.c_str());
        return 2;
      }
      ++i;
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return -1;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "uroce-stat: unknown option '%s' (see --help)\n", a.c_str());
      return 2;
    } else {
      o->filters.push_back(a);
    }
  }
  if (o->count && o->watch_s == 0) {
    std::fprintf(stderr, "uroce-stat: --count needs --watch\n");
    return 2;
  }
  return 0;
}

bool wanted(const Options &o, const char *name) {
  if (o.filters.empty()) return true;
  for (const std::string &f : o.filters)
    if (std::strstr(name, f.c_str()) != nullptr) return true;
  return false;
}

void print_neigh(const uroce::ctl::StatEntry &e) {
  const uint64_t m = e.value;
  std::printf("%s %02x:%02x:%02x:%02x:%02x:%02x %s\n", e.name,
              static_cast<unsigned>((m >> 40) & 0xff), static_cast<unsigned>((m >> 32) & 0xff),
              static_cast<unsigned>((m >> 24) & 0xff), static_cast<unsigned>((m >> 16) & 0xff),
              static_cast<unsigned>((m >> 8) & 0xff), static_cast<unsigned>(m & 0xff),
              uroce::port::neigh_state_str(static_cast<uroce::port::NeighState>(m >> 48)));
}

}  // namespace

int main(int argc, char **argv) {
  Options o;
  if (const int rc = parse(argc, argv, &o)) return rc < 0 ? 0 : rc;
  std::unique_ptr<uroce::client::Context> ctx;
  int rc = uroce::client::Context::open(o.sock.c_str(), "uroce-stat", &ctx, 10'000);
  if (rc) {
    std::fprintf(stderr, "uroce-stat: cannot connect to %s: %s\n", o.sock.c_str(),
                 std::strerror(rc));
    return 1;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point prev_t = start;
  std::map<std::string, uint64_t> prev;
  for (unsigned long block = 0;; ++block) {
    std::vector<uroce::ctl::StatEntry> v;
    rc = ctx->stats(&v);
    if (rc) {
      std::fprintf(stderr, "uroce-stat: stats request failed: %s\n", std::strerror(rc));
      return 1;
    }
    const Clock::time_point now = Clock::now();
    const double dt = std::chrono::duration<double>(now - prev_t).count();
    if (o.watch_s > 0)
      std::printf("# t=%.3f s interval %.3f s\n",
                  std::chrono::duration<double>(now - start).count(), block ? dt : 0.0);
    for (const auto &e : v) {
      if (!wanted(o, e.name)) continue;
      if (std::strstr(e.name, ".neigh.") != nullptr) {  // a neighbour entry: MAC and state
        print_neigh(e);
      } else if (o.watch_s == 0) {
        std::printf("%s %lu\n", e.name, static_cast<unsigned long>(e.value));
      } else {
        const auto it = prev.find(e.name);
        const double delta =
            it == prev.end() ? 0.0 : static_cast<double>(e.value) - static_cast<double>(it->second);
        std::printf("%s %lu %.0f/s\n", e.name, static_cast<unsigned long>(e.value),
                    block && dt > 0 ? std::round(delta / dt) : 0.0);
        prev[e.name] = e.value;
      }
    }
    std::fflush(stdout);
    if (o.watch_s == 0 || (o.count && block + 1 >= o.count)) break;
    prev_t = now;
    std::this_thread::sleep_until(now + std::chrono::duration<double>(o.watch_s));
  }
  return 0;
}
