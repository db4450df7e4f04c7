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
  std::vector<uint64_t> sizes = sizes_of(o);
  const uint64_t max_size = sizes.back();
  const bool send = o.verb == Verb::kSend;
  const bool lat = o.kind == Kind::kLat;
  const bool reliable = o.conn == Conn::kRc;
  Side s(o, false, false);
  const uint32_t want_rx = send && lat ? 1 : send && o.bidir ? o.rx_depth : 0;
  if (!s.setup(o.qps, max_size, o.tx_depth, want_rx)) return die(s.error);
  char hello[256];
  std::snprintf(hello, sizeof hello, "%s %s %u %" PRIu64 " %u %u %u %d %d %d %u %s %d %d %u %u",
                kProto, o.test.c_str(), o.qps, max_size, o.tx_depth, o.rx_depth, o.cq_mod,
                o.inline_size, o.check ? 1 : 0, o.cmp_swap ? 1 : 0, s.active_mtu, conn_name(o.conn),
                o.use_srq ? 1 : 0, o.bidir ? 1 : 0, o.duration, o.post_list);
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
  if (o.conn == Conn::kUd) {
    // perftest: a UD message is at most one MTU (-s is lowered to it; -a stops there).
    const uint64_t mtu = mtu_bytes(s.path_mtu);
    if (sizes.back() > mtu) {
      std::printf(" Max msg size in UD is MTU %" PRIu64 "\n", mtu);
      if (o.all) {
        while (sizes.back() > mtu)
          sizes.pop_back();
      } else {
        sizes.back() = mtu;
      }
    }
  }
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
  std::vector<Row> rows;
  Cqe wc[32];
  auto drain = [&]() -> int {  // -b send_bw: the server's messages
    const int n = s.ctx->poll_cq(*s.cq, wc, 32);
    for (int i = 0; i < n; ++i)
      if (!cqe_ok(s, wc[i], "client") || !s.on_recv(wc[i])) return -1;
    return n;
  };
  for (uint64_t size : sizes) {
    s.cur_size = size;
    s.received = 0;
    // Sources (WRITE, SEND) carry the pattern; READ / atomic targets start zeroed.
    if (o.bidir) {
      prepare_bidir(s, size);
    } else if (o.verb == Verb::kRead || o.verb == Verb::kAtomic) {
      std::memset(s.buf.data(), 0, s.region * o.qps);
    } else {
      fill_pattern(s, size);
      if (lat) std::memset(s.region_ptr(0), 0, s.slot);  // slot 0 receives the peer's WRITE
      if (lat) {
        for (uint64_t b = 0; b < size; ++b)  // slot 1 is the source
          s.region_ptr(0)[s.slot + s.moff + b] = pat(0, b, size);
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
    if (o.check && o.verb == Verb::kRead && !o.bidir) {
      for (uint32_t q = 0; q < o.qps && checked; ++q)
        checked =
            check_slots(s, q, 0, std::min<uint64_t>(r.per_qp[q], lat ? 1 : s.nslots), size, true);
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
    // The server's verdict; -b send_bw keeps taking the server's messages meanwhile.
    const uint64_t end = now_ns() + uint64_t{kWaitMs} * 1'000'000u;
    bool have = false;
    while (!have) {
      if (send && o.bidir && drain() < 0) return die(s.error);
      if (oob.try_line(&line)) break;
      if (oob.closed()) return die("the server went away");
      if (now_ns() > end) return die("no result from the server within 30 s");
      if (!(send && o.bidir)) {
        if (!oob.recv_line(&line, kWaitMs, &why)) return die("no result from the server: " + why);
        have = true;
      }
    }
    // OK RECEIVED MSGS NS PEAK N0 .. N(qps-1)
    const std::vector<std::string> v = words(line);
    uint64_t received = 0;
    std::vector<uint64_t> peer(o.qps, 0);
    if (v.size() == 5 + o.qps && v[0] == "OK") {
      received = std::stoull(v[1]);
      r.peer_msgs = o.bidir ? std::stoull(v[2]) : 0;
      r.peer_ns = o.bidir ? std::stoull(v[3]) : 0;
      r.peer_peak_bps = o.bidir ? std::stod(v[4]) : 0;
      for (uint32_t q = 0; q < o.qps; ++q)
        peer[q] = std::stoull(v[5 + q]);
    } else {
      std::fprintf(stderr, "uroce-perf: the server reports: %s\n", line.c_str());
      status = 1;
    }
    if (o.bidir && status == 0) {
      uint64_t peer_total = 0;
      for (uint64_t n : peer)
        peer_total += n;
      if (send && reliable) {
        const uint64_t until = now_ns() + uint64_t{kWaitMs} * 1'000'000u;
        while (s.received < peer_total && checked) {
          const int n = drain();
          if (n < 0) return die(s.error);
          if (n == 0 && now_ns() > until)
            checked = s.fail("received " + std::to_string(s.received) + " of the server's " +
                             std::to_string(peer_total) + " messages");
        }
      } else if (send && !settle_recvs(s, peer_total)) {
        return die(s.error);
      }
      if (checked && o.check) checked = check_bidir(s, size, peer, r.per_qp);
    }
    if (!checked) {
      std::fprintf(stderr, "uroce-perf: %s\n", s.error.c_str());
      s.error.clear();
      status = 1;
    }
    Row row;
    if (lat) {
      row = lat_row(size, samples);
    } else {
      const uint64_t iters = o.duration != 0 ? r.msgs / o.qps : o.iters;
      row = bw_row(o, size, iters, r);
    }
    if (send && !reliable && !lat) row.received = received;
    print_row(o, row);
    if (send && !reliable && !lat) {
      std::printf(" (%s: the server received %" PRIu64 " of %" PRIu64
                  " messages; lost ones are not retransmitted)\n",
                  conn_name(o.conn), received, r.msgs);
      if (received == 0 && r.msgs != 0) {
        std::fprintf(stderr, "uroce-perf: no message reached the server\n");
        status = 1;
      }
    }
    rows.push_back(row);
  }
  oob.send_line("END");
  std::printf("%s\n", kLine);
  if (o.check && status == 0) std::printf(" Data check      : PASS (--check)\n");
  const char *check = !o.check ? "OFF" : status == 0 ? "PASS" : "FAIL";
  if (o.out_json) {
    const std::string err = write_json(o, s, rows, check);
    if (!err.empty()) {
      std::fprintf(stderr, "uroce-perf: %s\n", err.c_str());
      status = 1;
    }
  }
  if (!o.out_csv_file.empty()) {
    const std::string err = write_csv(o, rows);
    if (!err.empty()) {
      std::fprintf(stderr, "uroce-perf: %s\n", err.c_str());
      status = 1;
    }
  }
  return status;
}

}  // namespace uroce::perf
