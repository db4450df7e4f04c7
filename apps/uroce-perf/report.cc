// SPDX-License-Identifier: BSD-3-Clause
// perftest's result rows.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "perf.h"

namespace uroce::perf {

void print_bw_row(const Options &o, uint64_t size, uint64_t iters, const BwResult &r) {
  const double secs = static_cast<double>(r.ns) / 1e9;
  const double bytes = static_cast<double>(r.msgs) * static_cast<double>(size);
  const double avg = secs > 0 ? bytes / secs : 0;
  const double unit = o.report_gbits ? 1e9 / 8 : 1048576.0;
  const double mpps = secs > 0 ? static_cast<double>(r.msgs) / secs / 1e6 : 0;
  std::printf(" %-7" PRIu64 "    %-10" PRIu64 "       %-7.2f            %-7.2f\t\t   %-7.6f\n",
              size, iters, r.peak_bps / unit, avg / unit, mpps);
}

void print_lat_row(uint64_t size, std::vector<uint64_t> &v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  double sum = 0, sq = 0;
  for (uint64_t x : v)
    sum += static_cast<double>(x);
  const double avg = sum / n;
  for (uint64_t x : v)
    sq += (static_cast<double>(x) - avg) * (static_cast<double>(x) - avg);
  const double stdev = n > 1 ? std::sqrt(sq / (n - 1)) : 0;
  auto pct = [&](double p) {
    size_t i = static_cast<size_t>(std::ceil(p * n));
    if (i > 0) --i;
    return static_cast<double>(v[std::min(i, n - 1)]) / 1000.0;
  };
  std::printf(" %-7" PRIu64
              " %-10zu  %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f"
              "\t\t%-7.2f \t\t%-7.2f\n",
              size, n, v.front() / 1000.0, v.back() / 1000.0, v[n / 2] / 1000.0, avg / 1000.0,
              stdev / 1000.0, pct(0.99), pct(0.999));
}

}  // namespace uroce::perf
