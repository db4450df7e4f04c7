// SPDX-License-Identifier: BSD-3-Clause
// uroce-perf's internals (doc/uroce-perf.md): the Side (one end's context, buffer, CQ and QPs),
// the measurement loops (bw.cc, lat.cc), the result rows (report.cc) and the two roles
// (server.cc, client.cc) meeting over the out-of-band TCP channel (oob.h), and --check (check.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/client.h"
#include "options.h"
#include "transport/verbs_types.h"

namespace uroce::perf {

using abi::Cqe;
using abi::Sge;
using client::Buffer;
using client::Context;
using client::Cq;
using client::Mr;
using client::Qp;
using client::RecvWr;
using client::SendWr;

// ibv_* values
enum : uint8_t { kWrWrite = 0, kWrSend = 2, kWrRead = 4, kWrCmpSwp = 5, kWrFetchAdd = 6 };
enum : uint32_t { kSignaled = 2, kInline = 8 };
enum : uint32_t { kWcRecv = 128 };
enum : uint32_t { kLocalWrite = 1, kRemoteWrite = 2, kRemoteRead = 4, kRemoteAtomic = 8 };
// ibv_qp_attr_mask values: kQpState, kQpAccessFlags, ... (transport/verbs_types.h)
using enum uroce::transport::QpAttrMask;
constexpr uint32_t kRc = 2, kUc = 3, kUd = 4;  // ibv_qp_type
constexpr uint32_t kGrh = 40;                  // UD receives start with the GRH
constexpr uint32_t kQkey = 0x11111111;         // perftest's DEF_QKEY
constexpr int kWaitMs = 30'000;                // no progress for this long: the run fails
constexpr uint64_t kMaxRegion = 64ull << 20;   // bytes of buffer per side, all QPs
constexpr const char *kProto = "UROCE-PERF-2";

inline constexpr const char *kLine =
    "---------------------------------------------------------------------------------------";

inline uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// The byte at offset i of a message of `size` bytes on QP q (--check).
inline uint8_t pat(uint32_t q, uint64_t i, uint64_t size) {
  return static_cast<uint8_t>((i * 131u) ^ (q * 29u) ^ (size * 17u) ^ (i >> 8) ^ 0x5a);
}

uint32_t mtu_enum(uint32_t bytes);    // 256 .. 4096 -> ibv_mtu
uint32_t mtu_bytes(uint32_t e);       // ibv_mtu -> bytes
const char *title(const Options &o);  // perftest's test title
inline const char *conn_name(Conn c) {
  return c == Conn::kRc ? "RC" : c == Conn::kUc ? "UC" : "UD";
}

struct QpInfo {
  uint32_t qpn = 0, psn = 0, rkey = 0;
  uint64_t vaddr = 0;
  uint64_t region = 0;  // bytes of this QP's part of the buffer
  uint8_t gid[16] = {};
};

// One side (server or client): a context on uroced, a buffer split into one region per QP
// (each region: nslots slots of `slot` bytes), one CQ for everything, the QPs.
class Side {
 public:
  Side(const Options &o, bool server, bool quiet) : o_(o), server_(server), quiet_(quiet) {}
  const Options &o_;
  bool server_;
  bool quiet_;  // --loopback's server thread prints errors only
  std::unique_ptr<Context> ctx;
  uint32_t pd = 0;
  Buffer buf;
  Mr mr;
  std::unique_ptr<Cq> cq;
  std::unique_ptr<client::Srq> srq;                 // --use_srq on a receiving side
  std::vector<uint32_t> ahs;                        // UD: the address handle towards each remote QP
  std::unordered_map<uint32_t, uint32_t> index_of;  // QPN -> QP index
  uint64_t events = 0;                              // -e: completion events slept on
  uint64_t src_base = 0, src_n = 1;  // this side's source slots (READ: where data lands)
  uint64_t cur_size = 0;             // the size being run
  uint64_t received = 0;             // messages received since the size began (send tests)
  uint32_t moff = 0;  // where a message starts in its slot (UD: after the 40-byte GRH)
  std::vector<std::unique_ptr<Qp>> qps;
  std::vector<QpInfo> local, remote;
  uint8_t gid[16] = {};
  int gid_index = 0;
  uint32_t active_mtu = 3;
  uint32_t path_mtu = 3;
  uint64_t slot = 64, nslots = 1, region = 64;
  uint32_t rx_depth = 0;  // receives kept posted per QP (send tests), else 0
  std::string error;      // the first failure

  bool fail(const std::string &e);
  uint8_t *region_ptr(uint32_t q) const { return buf.data() + q * region; }
  uint64_t region_va(uint32_t q) const { return mr.addr + q * region; }

  // Opens the context, picks the GID, creates PD, buffer, MR, CQ and `nqps` QPs in INIT.
  bool setup(uint32_t nqps, uint64_t max_size, uint32_t tx_depth, uint32_t want_rx);

  std::string qp_line(uint32_t q) const;
  bool parse_qp_line(const std::string &l);

  // RTR and RTS towards remote[q].
  bool connect(uint32_t peer_mtu);
  bool connect_ud();
  uint32_t qp_index(uint32_t qpn) const;  // UINT32_MAX: not ours
  // The peer's slot that message k of QP q writes (reads); -b: the peer's second half.
  uint64_t remote_slot(uint32_t q, uint64_t k) const;
  // A receive completion: checks its length (and data with --check), counts it, reposts.
  bool on_recv(const Cqe &c);

  // Receives on slots [0, rx_depth) of every QP (send tests). wr_id = q << 32 | slot.
  bool post_recv(uint32_t q, uint64_t s);
  bool post_all_recvs();

  void print_header() const;
};

// ---- check.cc
// Fills every slot of every QP's region with the pattern of `size`-byte messages (sources of
// WRITE / SEND, and the server's data for READ).
void fill_pattern(Side &s, uint64_t size, uint64_t base = 0, uint64_t n = UINT64_MAX);
// Checks `slots` slots of QP q's region from slot `base` hold the pattern, and (when
// check_tail) that the byte after each message is still 0.
bool check_slots(Side &s, uint32_t q, uint64_t base, uint64_t slots, uint64_t size,
                 bool check_tail);
// -b: both sides' buffers before a size (sources filled, targets zeroed), and this side's
// check after it, given the peer's and its own completions per QP.
void prepare_bidir(Side &s, uint64_t size);
bool check_bidir(Side &s, uint64_t size, const std::vector<uint64_t> &peer,
                 const std::vector<uint64_t> &mine);
// UC / UD send tests: drains receives until `sent` arrived or none came for 200 ms (lost
// messages are not retransmitted); false on an error.
bool settle_recvs(Side &s, uint64_t sent);

// ---- bw.cc
struct BwResult {
  uint64_t msgs = 0;  // completed, all QPs
  uint64_t ns = 0;    // first post to last completion
  double peak_bps = 0;
  std::vector<uint64_t> per_qp;
  uint64_t events = 0;  // -e: completion events waited for
  // -b: the peer's own run, added to the row as perftest does.
  uint64_t peer_msgs = 0, peer_ns = 0;
  double peer_peak_bps = 0;
};
bool cqe_ok(Side &s, const Cqe &c, const char *where);
// -n iterations per QP, or -D seconds. One signaled WR every cq_mod (and the last one).
bool run_bw(Side &s, uint64_t size, BwResult *r);

// ---- lat.cc
// The client's latency loop; samples in ns (RTT / 2 for write and send, as perftest).
bool run_lat(Side &s, uint64_t size, std::vector<uint64_t> *samples);
// The server's half of write_lat / send_lat.
bool serve_lat(Side &s, uint64_t size, uint32_t iters);

// ---- report.cc
// One size's result, in the report's units (bw: MB/s or Gb/s and Mpps; latency: usec).
struct Row {
  uint64_t size = 0, iters = 0;
  double bw_peak = 0, bw_avg = 0, msg_rate = 0;
  double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0;
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, p9999 = 0;
  uint64_t received = UINT64_MAX;  // UC / UD send tests: messages the receiver got
};
Row bw_row(const Options &o, uint64_t size, uint64_t iters, const BwResult &r);
Row lat_row(uint64_t size, std::vector<uint64_t> &v);  // sorts v (samples in ns)
void print_row(const Options &o, const Row &r);        // perftest's table row
// --out_json / --out_csv_file: "" or an error text. check: "PASS", "FAIL" or "OFF".
std::string write_json(const Options &o, const Side &s, const std::vector<Row> &rows,
                       const char *check);
std::string write_csv(const Options &o, const std::vector<Row> &rows);

// ---- server.cc / client.cc
struct ServerStart {
  std::atomic<int> port{-1};  // the bound port once listening (--loopback), -2 on failure
};
// The server (quiet: --loopback's thread, errors only). Returns the exit status.
int run_server(const Options &cli, bool quiet, ServerStart *start);
// The client: connects to host:port, runs, prints the table. Returns the exit status.
int run_client(const Options &o, const std::string &host, uint16_t port);

}  // namespace uroce::perf
