// SPDX-License-Identifier: BSD-3-Clause
// uroce-perf's internals (doc/uroce-perf.md): the Side (one end's context, buffer, CQ and QPs),
// the measurement loops (bw.cc, lat.cc), the result rows (report.cc) and the two roles
// (server.cc, client.cc) meeting over the out-of-band TCP channel (oob.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
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
constexpr uint32_t kRc = 2;
constexpr int kWaitMs = 30'000;               // no progress for this long: the run fails
constexpr uint64_t kMaxRegion = 64ull << 20;  // bytes of buffer per side, all QPs
constexpr const char *kProto = "UROCE-PERF-1";

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

  // Receives on slots [0, rx_depth) of every QP (send tests). wr_id = q << 32 | slot.
  bool post_recv(uint32_t q, uint64_t s);
  bool post_all_recvs();

  void print_header() const;
};

// Fills every slot of every QP's region with the pattern of `size`-byte messages (sources of
// WRITE / SEND, and the server's data for READ).
void fill_pattern(Side &s, uint64_t size);
// Checks `slots` slots of QP q's region hold the pattern, and (when check_tail) that the
// byte after each message is still 0.
bool check_slots(Side &s, uint32_t q, uint64_t slots, uint64_t size, bool check_tail);

// ---- bw.cc
struct BwResult {
  uint64_t msgs = 0;  // completed, all QPs
  uint64_t ns = 0;    // first post to last completion
  double peak_bps = 0;
  std::vector<uint64_t> per_qp;
  uint64_t events = 0;  // -e: completion events waited for
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
void print_bw_row(const Options &o, uint64_t size, uint64_t iters, const BwResult &r);
void print_lat_row(uint64_t size, std::vector<uint64_t> &v);  // sorts v

// ---- server.cc / client.cc
struct ServerStart {
  std::atomic<int> port{-1};  // the bound port once listening (--loopback), -2 on failure
};
// The server (quiet: --loopback's thread, errors only). Returns the exit status.
int run_server(const Options &cli, bool quiet, ServerStart *start);
// The client: connects to host:port, runs, prints the table. Returns the exit status.
int run_client(const Options &o, const std::string &host, uint16_t port);

}  // namespace uroce::perf
