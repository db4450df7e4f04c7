// SPDX-License-Identifier: BSD-3-Clause
// uroce-perf: perftest's RC benchmarks (write/read/send/atomic x bw/lat) on uroced, through
// lib/client (doc/uroce-perf.md). A server and a client meet over TCP (port 18515), exchange
// QP numbers, PSNs, keys, addresses and GIDs, connect RC QPs and run; the client prints
// perftest's result table. --loopback runs both in this process, on one uroced.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "perf.h"

namespace uroce::perf {

int main_perf(int argc, char **argv) {
  Options o;
  std::string err;
  const int p = parse_options(argc, argv, &o, &err);
  if (p == 1) return 0;
  if (p == 2) {
    std::fprintf(stderr, "uroce-perf: %s\n", err.c_str());
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (o.loopback) {
    ServerStart start;
    int server_rc = 1;
    std::thread t([&] { server_rc = run_server(o, true, &start); });
    while (start.port.load() == -1)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    int rc = 1;
    if (start.port.load() >= 0)
      rc = run_client(o, "127.0.0.1", static_cast<uint16_t>(start.port.load()));
    t.join();
    return rc != 0 || server_rc != 0 ? 1 : 0;
  }
  if (o.server.empty()) return run_server(o, false, nullptr);
  return run_client(o, o.server, o.port);
}

}  // namespace uroce::perf

int main(int argc, char **argv) {
  return uroce::perf::main_perf(argc, argv);
}
