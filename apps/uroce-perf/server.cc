// SPDX-License-Identifier: BSD-3-Clause
// The server: waits for a client, takes its parameters, serves each size, checks the data.
#include <algorithm>
#include <cerrno>
#include <chrono>
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

int serve(const Options &cli, bool quiet, ServerStart *start);

// Malformed numbers from the client end the run (std::stoul throws).
int run_server(const Options &cli, bool quiet, ServerStart *start) {
  try {
    return serve(cli, quiet, start);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "uroce-perf server: a malformed message from the client (%s)\n", e.what());
    if (start && start->port.load() == -1) start->port = -2;
    return 1;
  }
}

int serve(const Options &cli, bool quiet, ServerStart *start) {
  Oob oob;
  uint16_t bound = 0;
  std::string e = oob.listen(cli.port, quiet, &bound);
  if (!e.empty()) {
    std::fprintf(stderr, "uroce-perf server: %s\n", e.c_str());
    if (start) start->port = -2;
    return 1;
  }
  if (start) start->port = bound;
  if (!quiet) {
    std::printf("\n************************************\n");
    std::printf("* Waiting for client to connect... *\n");
    std::printf("************************************\n");
  }
  e = oob.accept(quiet ? kWaitMs : -1);  // --loopback: the client is this process
  if (!e.empty()) {
    std::fprintf(stderr, "uroce-perf server: %s\n", e.c_str());
    return 1;
  }
  auto die = [&](const std::string &why) {
    std::fprintf(stderr, "uroce-perf server: %s\n", why.c_str());
    oob.send_line("ERR " + why);
    return 1;
  };
  std::string line, why;
  if (!oob.recv_line(&line, kWaitMs, &why)) return die("no hello from the client: " + why);
  // kProto TEST QPS MAXSIZE TX_DEPTH RX_DEPTH CQ_MOD INLINE CHECK CMP_SWAP MTU CONN SRQ BIDIR
  // DURATION POST_LIST
  const std::vector<std::string> w = words(line);
  if (!w.empty() && w[0] == "ABORT") return die("the client gave up before the run");
  if (w.size() != 16 || w[0] != kProto) return die("not a uroce-perf client: '" + line + "'");
  if (w[1] != cli.test) return die("the client runs " + w[1] + ", this server " + cli.test);
  Options o = cli;
  o.qps = static_cast<uint32_t>(std::stoul(w[2]));
  const uint64_t max_size = std::stoull(w[3]);
  o.tx_depth = static_cast<uint32_t>(std::stoul(w[4]));
  o.rx_depth = static_cast<uint32_t>(std::stoul(w[5]));
  o.cq_mod = static_cast<uint32_t>(std::stoul(w[6]));
  o.inline_size = std::stoi(w[7]);
  o.check = w[8] == "1";
  o.cmp_swap = w[9] == "1";
  const uint32_t peer_mtu = static_cast<uint32_t>(std::stoul(w[10]));
  o.conn = w[11] == "UC" ? Conn::kUc : w[11] == "UD" ? Conn::kUd : Conn::kRc;
  o.use_srq = w[12] == "1";
  o.bidir = w[13] == "1";
  o.duration = static_cast<uint32_t>(std::stoul(w[14]));
  o.post_list = static_cast<uint32_t>(std::stoul(w[15]));
  if (o.qps < 1 || o.qps > kMaxQps || max_size < 1 || max_size > kMaxSize || o.tx_depth < 1 ||
      o.tx_depth > kMaxDepth || o.rx_depth < 1 || o.rx_depth > kMaxDepth || o.inline_size < 0 ||
      o.inline_size > static_cast<int>(kMaxInline) || peer_mtu < 1 || peer_mtu > 5 ||
      o.duration > 3600 || o.post_list < 1 || o.post_list > o.tx_depth || o.cq_mod < 1 ||
      o.cq_mod > o.tx_depth || o.cq_mod % o.post_list != 0)
    return die("parameters out of range: '" + line + "'");
  Side s(o, true, quiet);
  const bool send = o.verb == Verb::kSend;
  const bool lat = o.kind == Kind::kLat;
  if (!s.setup(o.qps, max_size, lat ? 1 : o.tx_depth, send ? (lat ? 1 : o.rx_depth) : 0))
    return die(s.error);
  if (!oob.send_line("OK " + std::to_string(s.active_mtu))) return die("the client went away");
  for (uint32_t q = 0; q < o.qps; ++q) {
    if (!oob.recv_line(&line, kWaitMs, &why)) return die("no QP line: " + why);
    if (!s.parse_qp_line(line)) return die(s.error);
  }
  for (uint32_t q = 0; q < o.qps; ++q)
    oob.send_line(s.qp_line(q));
  if (!s.connect(peer_mtu) || !s.post_all_recvs()) return die(s.error);
  s.print_header();
  oob.send_line("READY");
  const bool reliable = o.conn == Conn::kRc;
  uint64_t size = 0;
  uint32_t iters = 0;
  Cqe wc[32];
  // Drains the receive completions of send_bw (checks and reposts).
  auto drain = [&]() -> int {
    const int n = s.ctx->poll_cq(*s.cq, wc, 32);
    for (int i = 0; i < n; ++i)
      if (!cqe_ok(s, wc[i], "server") || !s.on_recv(wc[i])) return -1;
    return n;
  };
  for (;;) {
    // Between runs: wait for the next command (send_bw keeps draining late receives).
    uint64_t idle_since = now_ns();
    bool have = false;
    while (!have) {
      if (send && !lat && drain() < 0) return die(s.error);
      if (oob.try_line(&line)) {
        have = true;
        break;
      }
      if (oob.closed()) return die("the client went away");
      if (now_ns() - idle_since > 600ull * 1'000'000'000u)
        return die("no command from the client for 600 s");
      if (!(send && !lat)) {
        if (!oob.recv_line(&line, 600'000, &why)) return die("the client went away: " + why);
        have = true;
      }
    }
    const std::vector<std::string> c = words(line);
    if (c.empty()) return die("an empty command");
    if (c[0] == "END") break;
    if (c[0] != "SIZE" || c.size() != 3) return die("unexpected command '" + line + "'");
    size = std::stoull(c[1]);
    iters = static_cast<uint32_t>(std::stoul(c[2]));
    if (size < 1 || size > max_size) return die("size out of range");
    if (o.duration == 0) o.iters = iters;
    s.cur_size = size;
    s.received = 0;
    // Prepare the buffer for this size.
    if (o.bidir) {
      prepare_bidir(s, size);
    } else if (o.verb == Verb::kRead) {
      fill_pattern(s, size);
    } else if (o.verb == Verb::kWrite && lat) {
      std::memset(s.buf.data(), 0, s.region * o.qps);
      fill_pattern(s, size);  // slot 1 is the source (its last byte is the sequence)
      std::memset(s.region_ptr(0), 0, s.slot);
    } else if (o.verb == Verb::kSend && lat) {
      for (uint64_t b = 0; b < size; ++b)
        s.region_ptr(0)[s.slot + s.moff + b] = pat(0, b, size);
    } else {
      std::memset(s.buf.data(), 0, s.region * o.qps);
    }
    oob.send_line("GO");
    if (lat && (o.verb == Verb::kWrite || o.verb == Verb::kSend)) {
      if (!serve_lat(s, size, iters)) return die(s.error);
    }
    BwResult mine;  // -b: this side's own run
    mine.per_qp.assign(o.qps, 0);
    if (o.bidir && !run_bw(s, size, &mine)) return die(s.error);
    // Wait for DONE SIZE N0 N1 ...
    bool done = false;
    const uint64_t t_begin = now_ns();
    while (!done) {
      if (send && !lat && drain() < 0) return die(s.error);
      if (oob.try_line(&line)) {
        done = true;
      } else if (oob.closed()) {
        return die("the client went away during the run");
      } else if (!(send && !lat)) {
        if (!oob.recv_line(&line, 3600'000, &why)) return die("no DONE: " + why);
        done = true;
      } else if (now_ns() - t_begin > 3600ull * 1'000'000'000u) {
        return die("no DONE within an hour");
      }
    }
    const std::vector<std::string> d = words(line);
    if (d.empty() || d[0] == "ABORT") return die("the client aborted the run");
    if (d[0] != "DONE" || d.size() != 2 + o.qps) return die("unexpected '" + line + "'");
    std::vector<uint64_t> n(o.qps);
    uint64_t total = 0;
    for (uint32_t q = 0; q < o.qps; ++q)
      total += n[q] = std::stoull(d[2 + q]);
    if (send && !lat) {
      if (reliable) {
        // Every message the client completed was received (its ACK came after placement).
        const uint64_t end = now_ns() + uint64_t{kWaitMs} * 1'000'000u;
        while (s.received < total) {
          const int r = drain();
          if (r < 0) return die(s.error);
          if (r == 0 && now_ns() > end)
            return die("received " + std::to_string(s.received) + " of " + std::to_string(total) +
                       " messages");
        }
      } else if (!settle_recvs(s, total)) {
        return die(s.error);
      }
    }
    bool ok = true;
    if (o.check && o.bidir) {
      ok = check_bidir(s, size, n, mine.per_qp);
    } else if (o.check) {
      for (uint32_t q = 0; q < o.qps && ok; ++q) {
        if (o.verb == Verb::kWrite && !lat) {
          // UC: the client's WRITEs complete once sent; give the last ones time to land.
          const uint64_t end = now_ns() + (reliable ? 0 : 2'000'000'000u);
          while (!(ok = check_slots(s, q, 0, std::min<uint64_t>(n[q], s.nslots), size, true)) &&
                 now_ns() < end) {
            s.error.clear();
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        } else if (o.verb == Verb::kWrite) {
          // The last WRITE of the ping-pong: pattern and the last sequence byte.
          const uint8_t *p = s.region_ptr(0);
          for (uint64_t b = 0; b + 1 < size && ok; ++b)
            ok = p[b] == pat(0, b, size) || s.fail("--check: write_lat data differs");
          ok = ok && (p[size - 1] == static_cast<uint8_t>((iters - 1) % 255 + 1) ||
                      s.fail("--check: write_lat's last sequence byte differs"));
        } else if (o.verb == Verb::kAtomic) {
          uint64_t v = 0;
          std::memcpy(&v, s.region_ptr(q), 8);
          const uint64_t want = o.cmp_swap ? 0 : n[q];
          ok = v == want || s.fail("--check: QP " + std::to_string(q) + " atomic value " +
                                   std::to_string(v) + ", expected " + std::to_string(want));
        }
      }
    }
    if (!ok) {
      std::fprintf(stderr, "uroce-perf server: %s\n", s.error.c_str());
      oob.send_line("FAIL " + s.error);
      s.error.clear();
    } else {
      // OK RECEIVED MSGS NS PEAK_BPS N0 .. (the last four: this side's -b run, else 0)
      char head[128];
      std::snprintf(head, sizeof head, "OK %" PRIu64 " %" PRIu64 " %" PRIu64 " %.0f", s.received,
                    mine.msgs, mine.ns, mine.peak_bps);
      std::string reply = head;
      for (uint64_t k : mine.per_qp) {
        reply += ' ';
        reply += std::to_string(k);
      }
      oob.send_line(reply);
    }
  }
  if (!quiet) std::printf("%s\n", kLine);
  return s.error.empty() ? 0 : 1;
}

}  // namespace uroce::perf
