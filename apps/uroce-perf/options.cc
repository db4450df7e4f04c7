// SPDX-License-Identifier: BSD-3-Clause
#include "options.h"

#include <getopt.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "uroce_version.h"

namespace uroce::perf {

namespace {

struct TestName {
  const char *name;
  Verb verb;
  Kind kind;
};
constexpr TestName kTests[] = {
    {"write_bw", Verb::kWrite, Kind::kBw},   {"read_bw", Verb::kRead, Kind::kBw},
    {"send_bw", Verb::kSend, Kind::kBw},     {"atomic_bw", Verb::kAtomic, Kind::kBw},
    {"write_lat", Verb::kWrite, Kind::kLat}, {"read_lat", Verb::kRead, Kind::kLat},
    {"send_lat", Verb::kSend, Kind::kLat},   {"atomic_lat", Verb::kAtomic, Kind::kLat},
};

bool find_test(const char *s, Options *o) {
  if (std::strncmp(s, "ib_", 3) == 0) s += 3;  // ib_write_bw is accepted too
  for (const TestName &t : kTests)
    if (std::strcmp(s, t.name) == 0) {
      o->test = t.name;
      o->verb = t.verb;
      o->kind = t.kind;
      return true;
    }
  return false;
}

// A whole decimal (or 0x hex) number in [lo, hi].
bool number(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  if (s == nullptr || *s == '\0' || *s == '-' || *s == '+') return false;
  errno = 0;
  char *end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 0);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

enum LongOnly : int {
  kOptReportGbits = 1000,
  kOptLoopback,
  kOptCheck,
  kOptSocket,
  kOptUseSrq,
  kOptProgress,
  kOptOutJson,
  kOptOutJsonFile,
  kOptOutCsvFile,
};

}  // namespace

void print_usage() {
  std::printf(
      "usage: uroce-perf TEST [options] [SERVER]\n"
      "       uroce-perf -T TEST [options] [SERVER]\n"
      "       uroce-perf TEST --loopback [options]\n"
      "       uroce-perf --help | --version\n"
      "\n"
      "perftest-compatible RDMA benchmarks over uroced (lib/client). TEST is one of\n"
      "write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat atomic_lat (an ib_\n"
      "prefix is accepted). Without SERVER this is the server side and waits for a client;\n"
      "with SERVER (a host name or address) it is the client. Both exchange QP numbers,\n"
      "PSNs, keys and GIDs over TCP (port 18515); the client's parameters are used.\n"
      "\n"
      "  -d, --ib-dev, --socket PATH   uroced's control socket (default %s)\n"
      "  -s, --size BYTES        message size (bw 65536, lat 2; atomics 8)\n"
      "  -a, --all               every size 2, 4, ... 2^23 (not with atomics or -D)\n"
      "  -n, --iters N           iterations per QP (bw 5000, lat 1000; 5 .. 100000000)\n"
      "  -q, --qp N              QPs (bw tests; 1 .. %u)\n"
      "  -t, --tx-depth N        outstanding WRs per QP (bw 128, lat 1; 1 .. %u)\n"
      "  -r, --rx-depth N        receive WRs per QP, send tests (512; 1 .. %u)\n"
      "  -Q, --cq-mod N          one signaled WR every N, bw tests (100; at most tx-depth)\n"
      "  -l, --post_list N       bw tests: post lists of N WRs, one call each (1; 1 .. 1024;\n"
      "                          -Q defaults to N and must be a multiple of it, -n too)\n"
      "  -D, --duration SECS     run for SECS seconds instead of -n (bw tests)\n"
      "  -p, --port PORT         TCP port of the out-of-band exchange (default 18515)\n"
      "  -x, --gid-index N       local GID index (default: the first IPv4-mapped GID)\n"
      "  -m, --mtu BYTES         path MTU 256/512/1024/2048/4096 (default: the port's)\n"
      "  -I, --inline_size N     inline up to N bytes (bw 0; write_lat 220, send_lat 236)\n"
      "  -c, --connection T      RC (default), UC (write, send) or UD (send)\n"
      "  -b, --bidirectional     bw tests: both sides send, the sum is reported\n"
      "      --use_srq           send tests: the receiving QPs share one SRQ\n"
      "  -R, --rdma_cm           not supported yet (an error)\n"
      "  -A, --atomic_type T     FETCH_AND_ADD (default) or CMP_AND_SWAP\n"
      "  -F, --CPU-freq          accepted and ignored (perftest compatibility)\n"
      "  -e, --events            sleep on the CQ's completion event (eventfd) instead of\n"
      "                          busy polling the CQ\n"
      "      --report_gbits      bandwidth in Gb/s instead of MB/s (1 MB = 2^20 bytes)\n"
      "      --progress          bw tests: print the rate of the last second, every second\n"
      "      --out_json          write perftest's JSON report (default perftest_out.json)\n"
      "      --out_json_file=F   the JSON report's file (implies --out_json)\n"
      "      --out_csv_file=F    write the result rows as CSV\n"
      "      --loopback          run server and client in this process, both on one uroced\n"
      "      --check             verify the data that arrived (write/read/send/atomic)\n"
      "  -h, --help              this text\n"
      "  -V, --version           print the version\n"
      "\n"
      "Exit status: 0 success, 1 a run-time failure (connection, verbs call, completion\n"
      "error, data mismatch with --check, timeout), 2 bad command line.\n",
      kDefaultSocket, kMaxQps, kMaxDepth, kMaxDepth);
}

int parse_options(int argc, char **argv, Options *o, std::string *err) {
  static const option kLong[] = {
      {"size", required_argument, nullptr, 's'},
      {"all", no_argument, nullptr, 'a'},
      {"iters", required_argument, nullptr, 'n'},
      {"qp", required_argument, nullptr, 'q'},
      {"tx-depth", required_argument, nullptr, 't'},
      {"rx-depth", required_argument, nullptr, 'r'},
      {"cq-mod", required_argument, nullptr, 'Q'},
      {"post_list", required_argument, nullptr, 'l'},
      {"duration", required_argument, nullptr, 'D'},
      {"port", required_argument, nullptr, 'p'},
      {"ib-dev", required_argument, nullptr, 'd'},
      {"socket", required_argument, nullptr, kOptSocket},
      {"gid-index", required_argument, nullptr, 'x'},
      {"mtu", required_argument, nullptr, 'm'},
      {"inline_size", required_argument, nullptr, 'I'},
      {"connection", required_argument, nullptr, 'c'},
      {"atomic_type", required_argument, nullptr, 'A'},
      {"CPU-freq", no_argument, nullptr, 'F'},
      {"events", no_argument, nullptr, 'e'},
      {"test", required_argument, nullptr, 'T'},
      {"report_gbits", no_argument, nullptr, kOptReportGbits},
      {"loopback", no_argument, nullptr, kOptLoopback},
      {"check", no_argument, nullptr, kOptCheck},
      {"bidirectional", no_argument, nullptr, 'b'},
      {"use_srq", no_argument, nullptr, kOptUseSrq},
      {"rdma_cm", no_argument, nullptr, 'R'},
      {"progress", no_argument, nullptr, kOptProgress},
      {"out_json", no_argument, nullptr, kOptOutJson},
      {"out_json_file", required_argument, nullptr, kOptOutJsonFile},
      {"out_csv_file", required_argument, nullptr, kOptOutCsvFile},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, 'V'},
      {nullptr, 0, nullptr, 0},
  };
  *o = Options{};
  bool iters_set = false, tx_set = false, size_set = false, cq_mod_set = false;
  bool rdma_cm = false, rx_set = false;
  // The test name may come first (uroce-perf write_bw ...) or with -T.
  int first = 1;
  if (argc > 1 && argv[1][0] != '-') {
    if (!find_test(argv[1], o)) {
      *err = std::string("unknown test '") + argv[1] +
             "' (write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat atomic_lat)";
      return 2;
    }
    first = 2;
  }
  optind = 1;
  opterr = 0;
  // getopt_long permutes argv; give it the arguments after the test name.
  const int n = argc - first + 1;
  char **args = argv + first - 1;
  const char *prog = argv[0];
  args[0] = const_cast<char *>(prog);
  int c;
  uint64_t v = 0;
  auto bad = [&](const char *flag, const char *what) {
    *err = std::string("invalid value '") + (optarg ? optarg : "") + "' for " + flag + ": " + what;
    return 2;
  };
  while ((c = getopt_long(n, args, ":s:an:q:t:r:Q:l:D:p:d:x:m:I:c:A:FeT:hVbR", kLong, nullptr)) !=
         -1) {
    switch (c) {
      case 's':
        if (!number(optarg, 1, kMaxSize, &v)) return bad("-s/--size", "1 .. 8388608 bytes");
        o->size = v;
        size_set = true;
        break;
      case 'a':
        o->all = true;
        break;
      case 'n':
        if (!number(optarg, 5, 100000000, &v)) return bad("-n/--iters", "5 .. 100000000");
        o->iters = static_cast<uint32_t>(v);
        iters_set = true;
        break;
      case 'q':
        if (!number(optarg, 1, kMaxQps, &v)) return bad("-q/--qp", "1 .. 1024");
        o->qps = static_cast<uint32_t>(v);
        break;
      case 't':
        if (!number(optarg, 1, kMaxDepth, &v)) return bad("-t/--tx-depth", "1 .. 16384");
        o->tx_depth = static_cast<uint32_t>(v);
        tx_set = true;
        break;
      case 'r':
        if (!number(optarg, 1, kMaxDepth, &v)) return bad("-r/--rx-depth", "1 .. 16384");
        o->rx_depth = static_cast<uint32_t>(v);
        rx_set = true;
        break;
      case 'Q':
        if (!number(optarg, 1, 1024, &v)) return bad("-Q/--cq-mod", "1 .. 1024");
        o->cq_mod = static_cast<uint32_t>(v);
        cq_mod_set = true;
        break;
      case 'l':
        if (!number(optarg, 1, 1024, &v)) return bad("-l/--post_list", "1 .. 1024");
        o->post_list = static_cast<uint32_t>(v);
        break;
      case 'D':
        if (!number(optarg, 1, 3600, &v)) return bad("-D/--duration", "1 .. 3600 seconds");
        o->duration = static_cast<uint32_t>(v);
        break;
      case 'p':
        if (!number(optarg, 1, 65535, &v)) return bad("-p/--port", "1 .. 65535");
        o->port = static_cast<uint16_t>(v);
        o->port_set = true;
        break;
      case 'd':
      case kOptSocket:
        if (optarg[0] == '\0') return bad("-d/--socket", "an empty path");
        o->socket = optarg;
        break;
      case 'x':
        if (!number(optarg, 0, 255, &v)) return bad("-x/--gid-index", "0 .. 255");
        o->gid_index = static_cast<int>(v);
        break;
      case 'm':
        if (!number(optarg, 256, 4096, &v) || (v & (v - 1)) != 0)
          return bad("-m/--mtu", "256, 512, 1024, 2048 or 4096");
        o->mtu = static_cast<uint32_t>(v);
        break;
      case 'I':
        if (!number(optarg, 0, kMaxInline, &v)) return bad("-I/--inline_size", "0 .. 960");
        o->inline_size = static_cast<int>(v);
        break;
      case 'c':
        if (std::strcmp(optarg, "RC") == 0) {
          o->conn = Conn::kRc;
        } else if (std::strcmp(optarg, "UC") == 0) {
          o->conn = Conn::kUc;
        } else if (std::strcmp(optarg, "UD") == 0) {
          o->conn = Conn::kUd;
        } else {
          return bad("-c/--connection", "RC, UC or UD");
        }
        break;
      case 'b':
        o->bidir = true;
        break;
      case 'R':
        rdma_cm = true;
        break;
      case kOptUseSrq:
        o->use_srq = true;
        break;
      case kOptProgress:
        o->progress = true;
        break;
      case kOptOutJson:
        o->out_json = true;
        break;
      case kOptOutJsonFile:
        if (optarg[0] == '\0') return bad("--out_json_file", "an empty path");
        o->out_json_file = optarg;
        o->out_json = true;
        break;
      case kOptOutCsvFile:
        if (optarg[0] == '\0') return bad("--out_csv_file", "an empty path");
        o->out_csv_file = optarg;
        break;
      case 'A':
        if (std::strcmp(optarg, "CMP_AND_SWAP") == 0) {
          o->cmp_swap = true;
        } else if (std::strcmp(optarg, "FETCH_AND_ADD") != 0) {
          return bad("-A/--atomic_type", "CMP_AND_SWAP or FETCH_AND_ADD");
        }
        break;
      case 'F':
        break;
      case 'e':
        o->use_event = true;
        break;
      case 'T':
        if (!o->test.empty() && first == 2) {
          *err = "the test is given twice (first argument and -T)";
          return 2;
        }
        if (!find_test(optarg, o)) return bad("-T/--test", "an unknown test");
        break;
      case kOptReportGbits:
        o->report_gbits = true;
        break;
      case kOptLoopback:
        o->loopback = true;
        break;
      case kOptCheck:
        o->check = true;
        break;
      case 'h':
        print_usage();
        return 1;
      case 'V':
        std::printf("uroce-perf %s\n", UROCE_VERSION);
        return 1;
      case ':':
        *err = std::string("option '") + args[optind - 1] + "' needs a value";
        return 2;
      default:
        if (optopt != 0 && optopt < 256) {
          *err = std::string("unknown option '-") + static_cast<char>(optopt) + "'";
        } else {
          *err = std::string("unknown option '") + args[optind - 1] + "'";
        }
        return 2;
    }
  }
  if (o->test.empty()) {
    *err = "no test given (e.g. uroce-perf write_bw; see --help)";
    return 2;
  }
  if (optind < n) o->server = args[optind++];
  if (optind < n) {
    *err = std::string("unexpected argument '") + args[optind] + "'";
    return 2;
  }
  if (rdma_cm) {
    *err =
        "-R/--rdma_cm: rdma_cm not supported yet (uroced has no connection manager; the "
        "out-of-band TCP exchange is used without -R)";
    return 2;
  }
  if (o->loopback && !o->server.empty()) {
    *err = "--loopback runs both sides here: give no SERVER";
    return 2;
  }
  const bool bw = o->kind == Kind::kBw;
  if (o->verb == Verb::kAtomic) {
    if (size_set && o->size != 8) {
      *err = "atomic tests move 8 bytes: -s must be 8 (or absent)";
      return 2;
    }
    if (o->all) {
      *err = "-a is not supported with atomic tests (their size is 8)";
      return 2;
    }
    o->size = 8;
  }
  if (o->all && size_set) {
    *err = "-a and -s exclude each other";
    return 2;
  }
  if (o->duration != 0) {
    if (!bw) {
      *err = "-D is supported by the bw tests only";
      return 2;
    }
    if (iters_set) {
      *err = "-D and -n exclude each other";
      return 2;
    }
    if (o->all) {
      *err = "-D and -a exclude each other";
      return 2;
    }
  }
  if (!bw && o->qps != 1) {
    *err = "latency tests use one QP (-q 1)";
    return 2;
  }
  // perftest's rules (perftest_parameters.c change_conn_type, force_dependecies).
  if (o->conn == Conn::kUc && (o->verb == Verb::kRead || o->verb == Verb::kAtomic)) {
    *err = "-c UC: UC connection not possible in READ/ATOMIC tests";
    return 2;
  }
  if (o->conn == Conn::kUd && o->verb != Verb::kSend) {
    *err = "-c UD: UD connection only possible in SEND tests";
    return 2;
  }
  if (o->bidir && !bw) {
    *err = "-b: bidirectional is only available in BW tests";
    return 2;
  }
  if (o->use_srq && o->verb != Verb::kSend) {
    *err = "--use_srq: SRQ is only available in SEND tests";
    return 2;
  }
  if (o->use_srq && o->qps > o->rx_depth) {
    *err = "--use_srq: the SRQ depth (-r) must be at least the number of QPs (-q)";
    return 2;
  }
  if (o->progress && !bw) {
    *err = "--progress is supported by the bw tests only";
    return 2;
  }
  if (!bw && o->post_list != 1) {
    *err = "-l/--post_list is supported by the bw tests only";
    return 2;
  }
  if (!bw && tx_set && o->tx_depth != 1) {
    *err = "latency tests have one outstanding WR (-t 1)";
    return 2;
  }
  if (o->size == 0) o->size = bw ? 65536 : 2;
  if (o->iters == 0) o->iters = bw ? 5000 : 1000;
  // perftest: UC / UD receivers keep min(iters, 16000) receives posted unless -r says (no RNR
  // retry on those transports: a receive missing is a message lost).
  if (o->conn != Conn::kRc && o->verb == Verb::kSend && !rx_set && o->duration == 0)
    o->rx_depth = std::min<uint32_t>(o->iters, 16000);
  if (o->tx_depth == 0) o->tx_depth = bw ? 128 : 1;
  if (!bw) o->cq_mod = 1;
  if (o->post_list > 1) {
    // perftest: the CQ moderation is the list size unless -Q says otherwise; here the signaled
    // WR must also end a list, so -Q is a multiple of it, and so is -n (whole lists).
    if (!cq_mod_set) o->cq_mod = o->post_list;
    if (o->cq_mod % o->post_list != 0) {
      *err = "-Q/--cq-mod must be a multiple of -l/--post_list";
      return 2;
    }
    if (o->post_list > o->tx_depth) {
      *err = "-l/--post_list must not exceed the tx depth (-t)";
      return 2;
    }
    if (!iters_set) o->iters = (o->iters + o->post_list - 1) / o->post_list * o->post_list;
    if (o->duration == 0 && o->iters % o->post_list != 0) {
      *err = "-n/--iters must be a multiple of -l/--post_list";
      return 2;
    }
  }
  if (o->cq_mod > o->tx_depth) {
    if (cq_mod_set) {
      *err = "-Q/--cq-mod must not exceed the tx depth (-t)";
      return 2;
    }
    o->cq_mod = o->tx_depth;
  }
  if (o->inline_size < 0) {
    o->inline_size = 0;
    if (!bw && o->verb == Verb::kWrite) o->inline_size = 220;
    if (!bw && o->verb == Verb::kSend) o->inline_size = o->conn == Conn::kUd ? 188 : 236;
  }
  if (o->loopback && !o->port_set) o->port = 0;  // an ephemeral port on 127.0.0.1
  return 0;
}

std::vector<uint64_t> sizes_of(const Options &o) {
  std::vector<uint64_t> v;
  if (o.all) {
    for (uint64_t s = 2; s <= kMaxSize; s *= 2)
      v.push_back(s);
  } else {
    v.push_back(o.size);
  }
  return v;
}

}  // namespace uroce::perf
