// SPDX-License-Identifier: BSD-3-Clause
// uroce-perf's command line (doc/uroce-perf.md): perftest's flags where they make sense on
// uroce, plus --socket, --loopback and --check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace uroce::perf {

enum class Verb { kWrite, kRead, kSend, kAtomic };
enum class Kind { kBw, kLat };
enum class Conn { kRc, kUc, kUd };  // -c

inline constexpr uint16_t kDefaultPort = 18515;  // perftest's out-of-band TCP port
inline constexpr const char *kDefaultSocket = "/run/uroce/uroced.sock";
inline constexpr uint64_t kMaxSize = 1ull << 23;  // -a runs 2 .. 2^23 bytes, as perftest
inline constexpr uint32_t kMaxQps = 1024;
inline constexpr uint32_t kMaxDepth = 16384;  // uroced's max_qp_wr
inline constexpr uint32_t kMaxInline = 960;   // uroced's max_inline

struct Options {
  std::string test;  // "write_bw", ...
  Verb verb = Verb::kWrite;
  Kind kind = Kind::kBw;
  std::string socket = kDefaultSocket;  // uroced's control socket (-d / --ib-dev / --socket)
  std::string server;                   // empty: this is the server
  uint16_t port = kDefaultPort;
  bool port_set = false;
  uint64_t size = 0;   // bytes per message (defaults: bw 65536, lat 2, atomic 8)
  bool all = false;    // -a: every power of two from 2 to 2^23
  uint32_t iters = 0;  // defaults: bw 5000, lat 1000
  uint32_t qps = 1;
  uint32_t tx_depth = 0;  // defaults: bw 128, lat 1
  uint32_t rx_depth = 512;
  uint32_t cq_mod = 100;   // bw: one signaled WR every cq_mod
  uint32_t post_list = 1;  // bw: WRs per post call (perftest --post_list)
  uint32_t duration = 0;   // seconds; 0: iterations
  int gid_index = -1;      // -1: the first IPv4-mapped GID, else 0
  uint32_t mtu = 0;        // 0: the port's active MTU
  int inline_size = -1;    // -1: perftest's defaults (bw 0; write_lat 220, send_lat 236)
  bool report_gbits = false;
  bool loopback = false;   // server and client in this process, over one uroced
  bool check = false;      // verify the data (doc/uroce-perf.md)
  bool cmp_swap = false;   // atomic: CMP_AND_SWAP instead of FETCH_AND_ADD
  bool use_event = false;  // -e: sleep on the CQ's completion event instead of busy polling
  Conn conn = Conn::kRc;   // -c RC|UC|UD (UC: write / send; UD: send)
  bool bidir = false;      // -b: both sides send (bw tests)
  bool use_srq = false;    // --use_srq: the receiving side's QPs share one SRQ (send tests)
  bool progress = false;   // --progress: a line per second while a bw test runs
  bool out_json = false;   // --out_json: perftest's JSON report (plus every row, "uroce")
  std::string out_json_file = "perftest_out.json";  // --out_json_file=FILE (implies --out_json)
  std::string out_csv_file;                         // --out_csv_file=FILE: one row per size
};

// Parses argv. Returns 0 (run), 1 (--help / --version printed: exit 0), 2 (error: *err says
// what; the caller prints it and exits 2).
int parse_options(int argc, char **argv, Options *o, std::string *err);
void print_usage();
std::vector<uint64_t> sizes_of(const Options &o);  // the message sizes of the run (-a, -s)

}  // namespace uroce::perf
