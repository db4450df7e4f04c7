// SPDX-License-Identifier: BSD-3-Clause
// The client: drives the run and prints perftest's table.
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

#include "oob.h"
#include "perf.h"

namespace uroce::perf {

int client_run(const Options &o, const std::string &host, uint16_t port);

int run_client(const Options &o, const std::string &host, uint16_t port) {
  try {
    return client_run(o, host, port);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "uroce-perf: a malformed message from the server (%s)\n", e.what());
    return 1;
  }
}

int client_run(const Options &o, const std::string &host, uint16_t port) {
  Oob oob;
  std::string e = oob.connect(host, port, kWaitMs);
  if (!e.empty()) {
    std::fprintf(stderr, "uroce-perf: %s\n", e.c_str());
    return 1;
  }
  auto die = [&](const std::string &why) {
    std::fprintf(stderr, "uroce-perf: %s\n", why.c_str());
    oob.send_line("ABORT");
    return 1;
  };
  const std::vector<uint64_t> sizes = sizes_of(o);
  const uint64_t max_size = sizes.back();
  const bool send = o.verb == Verb::kSend;
  const bool lat = o.kind == Kind::kLat;
  Side s(o, false, false);
  if (!s.setup(o.qps, max_size, o.tx_depth, send && lat ? 1 : 0)) return die(s.error);
  char hello[256];
  std::snprintf(hello, sizeof hello, "%s %s %u %" PRIu64 " %u %u %u %d %d %d %u", kProto,
                o.test.c_str(), o.qps, max_size, o.tx_depth, o.rx_depth, o.cq_mod, o.inline_size,
                o.check ? 1 : 0, o.cmp_swap ? 1 : 0, s.active_mtu);
  oob.send_line(hello);
  std::string line, why;
  if (!oob.recv_line(&line, kWaitMs, &why)) return die("no answer from the server: " + why);
  std::vector<std::string> w = words(line);
  if (w.size() != 2 || w[0] != "OK") return die("the server refused: " + line);
  const uint32_t peer_mtu = static_cast<uint32_t>(std::stoul(w[1]));
  for (uint32_t q = 0; q < o.qps; ++q)
    oob.send_line(s.qp_line(q));
  for (uint32_t q = 0; q < o.qps; ++q) {
    if (!oob.recv_line(&line, kWaitMs, &why)) return die("no QP line from the server: " + why);
    if (!s.parse_qp_line(line)) return die(s.error);
  }
  if (!s.connect(peer_mtu) || !s.post_all_recvs()) return die(s.error);
  if (!oob.recv_line(&line, kWaitMs, &why) || line != "READY")
    return die("the server is not ready: " + (line.empty() ? why : line));
  s.print_header();
  if (lat) {
    std::printf(
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
        "t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   99.9%% "
        "percentile[usec] \n");
  } else {
    std::printf(" #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]\n",
                o.report_gbits ? "Gb/sec" : "MB/sec", o.report_gbits ? "Gb/sec" : "MB/sec");
  }
  int status = 0;
  std::vector<uint64_t> samples;
  for (uint64_t size : sizes) {
    // Sources (WRITE, SEND) carry the pattern; READ / atomic targets start zeroed.
    if (o.verb == Verb::kRead || o.verb == Verb::kAtomic) {
      std::memset(s.buf.data(), 0, s.region * o.qps);
    } else {
      fill_pattern(s, size);
      if (lat) std::memset(s.region_ptr(0), 0, s.slot);  // slot 0 receives the peer's WRITE
      if (lat && o.verb == Verb::kWrite) {
        for (uint64_t b = 0; b < size; ++b)  // slot 1 is the source
          s.region_ptr(0)[s.slot + b] = pat(0, b, size);
      }
      if (lat && o.verb == Verb::kSend) {
        for (uint64_t b = 0; b < size; ++b)
          s.region_ptr(0)[s.slot + b] = pat(0, b, size);
      }
    }
    oob.send_line("SIZE " + std::to_string(size) + " " + std::to_string(o.iters));
    if (!oob.recv_line(&line, kWaitMs, &why) || line != "GO")
      return die("the server did not start: " + (line.empty() ? why : line));
    BwResult r;
    bool ok;
    if (lat) {
      ok = run_lat(s, size, &samples);
      r.per_qp.assign(1, samples.size());
    } else {
      ok = run_bw(s, size, &r);
    }
    if (!ok) return die(s.error);
    // --check on this side: READ data, atomic results are the server's business.
    bool checked = true;
    if (o.check && o.verb == Verb::kRead) {
      for (uint32_t q = 0; q < o.qps && checked; ++q)
        checked =
            check_slots(s, q, std::min<uint64_t>(r.per_qp[q], lat ? 1 : s.nslots), size, true);
    }
    // Appended piece by piece: "x" + std::to_string() here trips GCC 12's -Wrestrict (a false
    // positive once inlined into this function).
    std::string done = "DONE ";
    done += std::to_string(size);
    for (uint64_t n : r.per_qp) {
      done += ' ';
      done += std::to_string(n);
    }
    oob.send_line(done);
    if (!oob.recv_line(&line, kWaitMs, &why)) return die("no result from the server: " + why);
    if (line.rfind("OK", 0) != 0) {
      std::fprintf(stderr, "uroce-perf: the server reports: %s\n", line.c_str());
      status = 1;
    }
    if (!checked) {
      std::fprintf(stderr, "uroce-perf: %s\n", s.error.c_str());
      s.error.clear();
      status = 1;
    }
    if (lat) {
      print_lat_row(size, samples);
    } else {
      const uint64_t iters = o.duration != 0 ? r.msgs / o.qps : o.iters;
      print_bw_row(o, size, iters, r);
    }
  }
  oob.send_line("END");
  std::printf("%s\n", kLine);
  if (o.check && status == 0) std::printf(" Data check      : PASS (--check)\n");
  return status;
}

}  // namespace uroce::perf
