// SPDX-License-Identifier: BSD-3-Clause
// uroce-perf: perftest's RC benchmarks (write/read/send/atomic x bw/lat) on uroced, through
// lib/client (doc/uroce-perf.md). A server and a client meet over TCP (port 18515), exchange
// QP numbers, PSNs, keys, addresses and GIDs, connect RC QPs and run; the client prints
// perftest's result table. --loopback runs both in this process, on one uroced.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "oob.h"
#include "options.h"
#include "transport/verbs_types.h"

namespace uroce::perf {

namespace {

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

const char *kLine =
    "---------------------------------------------------------------------------------------";

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// The byte at offset i of a message of `size` bytes on QP q (--check).
inline uint8_t pat(uint32_t q, uint64_t i, uint64_t size) {
  return static_cast<uint8_t>((i * 131u) ^ (q * 29u) ^ (size * 17u) ^ (i >> 8) ^ 0x5a);
}

uint32_t mtu_enum(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return 1;
    case 512:
      return 2;
    case 1024:
      return 3;
    case 2048:
      return 4;
    default:
      return 5;
  }
}
uint32_t mtu_bytes(uint32_t e) {
  return e >= 1 && e <= 5 ? 128u << e : 0;
}

std::string gid_hex(const uint8_t g[16]) {
  char b[33];
  for (int i = 0; i < 16; ++i)
    std::snprintf(b + 2 * i, 3, "%02x", g[i]);
  return b;
}
bool parse_gid(const std::string &s, uint8_t g[16]) {
  if (s.size() != 32) return false;
  for (int i = 0; i < 16; ++i) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    g[i] = static_cast<uint8_t>(v);
  }
  return true;
}

const char *title(const Options &o) {
  switch (o.verb) {
    case Verb::kWrite:
      return o.kind == Kind::kBw ? "RDMA_Write BW Test" : "RDMA_Write Latency Test";
    case Verb::kRead:
      return o.kind == Kind::kBw ? "RDMA_Read BW Test" : "RDMA_Read Latency Test";
    case Verb::kSend:
      return o.kind == Kind::kBw ? "Send BW Test" : "Send Latency Test";
    case Verb::kAtomic:
      if (o.cmp_swap)
        return o.kind == Kind::kBw ? "Atomic CMP_AND_SWAP BW Test"
                                   : "Atomic CMP_AND_SWAP Latency Test";
      return o.kind == Kind::kBw ? "Atomic FETCH_AND_ADD BW Test"
                                 : "Atomic FETCH_AND_ADD Latency Test";
  }
  return "";
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
  std::vector<std::unique_ptr<Qp>> qps;
  std::vector<QpInfo> local, remote;
  uint8_t gid[16] = {};
  int gid_index = 0;
  uint32_t active_mtu = 3;
  uint32_t path_mtu = 3;
  uint64_t slot = 64, nslots = 1, region = 64;
  uint32_t rx_depth = 0;  // receives kept posted per QP (send tests), else 0
  std::string error;      // the first failure

  bool fail(const std::string &e) {
    if (error.empty()) error = e;
    return false;
  }
  uint8_t *region_ptr(uint32_t q) const { return buf.data() + q * region; }
  uint64_t region_va(uint32_t q) const { return mr.addr + q * region; }

  // Opens the context, picks the GID, creates PD, buffer, MR, CQ and `nqps` QPs in INIT.
  bool setup(uint32_t nqps, uint64_t max_size, uint32_t tx_depth, uint32_t want_rx) {
    const char *name = server_ ? "uroce-perf-server" : "uroce-perf-client";
    int rc = Context::open(o_.socket.c_str(), name, &ctx);
    if (rc != 0)
      return fail("cannot open uroced's control socket " + o_.socket + ": " + std::strerror(rc));
    ctl::DeviceAttrPayload dev{};
    ctl::PortAttrPayload port{};
    if ((rc = ctx->query_device(&dev)) != 0 || (rc = ctx->query_port(1, &port)) != 0)
      return fail(std::string("query_device / query_port: ") + std::strerror(rc));
    // A virtual port comes up when its peer connects (net_memif): wait for it, bounded.
    for (int i = 0; port.state != 4 && i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if ((rc = ctx->query_port(1, &port)) != 0)
        return fail(std::string("query_port: ") + std::strerror(rc));
    }
    if (port.state != 4) return fail("port 1 of uroced is not ACTIVE (waited 10 s)");
    active_mtu = port.active_mtu;
    gid_index = o_.gid_index;
    if (gid_index < 0) {
      gid_index = 0;
      for (uint32_t i = 0; i < port.gid_tbl_len; ++i) {
        uint8_t g[16];
        if (ctx->query_gid(1, i, g) != 0) continue;
        static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (std::memcmp(g, v4, 12) == 0) {
          gid_index = static_cast<int>(i);
          break;
        }
      }
    }
    if (static_cast<uint32_t>(gid_index) >= port.gid_tbl_len)
      return fail("GID index " + std::to_string(gid_index) + " is beyond the port's " +
                  std::to_string(port.gid_tbl_len) + " GIDs");
    if ((rc = ctx->query_gid(1, static_cast<uint32_t>(gid_index), gid)) != 0)
      return fail(std::string("query_gid: ") + std::strerror(rc));
    if (nqps > dev.max_qp) return fail("uroced allows " + std::to_string(dev.max_qp) + " QPs");
    if ((rc = ctx->alloc_pd(&pd)) != 0) return fail(std::string("alloc_pd: ") + std::strerror(rc));

    slot = (std::max<uint64_t>(max_size, 8) + 63) & ~uint64_t{63};
    const uint64_t room = std::max<uint64_t>(1, kMaxRegion / (slot * nqps));
    rx_depth = want_rx;
    uint64_t want_slots = std::max<uint64_t>(2, std::min<uint64_t>(tx_depth, 16));
    if (want_rx != 0) {
      rx_depth = static_cast<uint32_t>(std::min<uint64_t>(want_rx, room));
      want_slots = std::max<uint64_t>(want_slots, rx_depth + 1);  // + one send slot
    }
    nslots = std::min(want_slots, std::max<uint64_t>(room, 2));
    if (want_rx != 0 && rx_depth + 1 > nslots) rx_depth = static_cast<uint32_t>(nslots - 1);
    region = slot * nslots;
    if ((rc = Buffer::create(region * nqps, &buf)) != 0)
      return fail(std::string("buffer of ") + std::to_string(region * nqps) +
                  " bytes: " + std::strerror(rc));
    std::memset(buf.data(), 0, region * nqps);
    rc = ctx->reg_mr(pd, buf, 0, region * nqps,
                     kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic, &mr);
    if (rc != 0) return fail(std::string("reg_mr: ") + std::strerror(rc));
    const uint64_t cqe = uint64_t{nqps} * (tx_depth + 2 + rx_depth) + 16;
    if (cqe > dev.max_cqe)
      return fail("the CQ would need " + std::to_string(cqe) + " entries, uroced allows " +
                  std::to_string(dev.max_cqe) + ": lower -q, -t or -r");
    if ((rc = ctx->create_cq(static_cast<uint32_t>(cqe), &cq)) != 0)
      return fail(std::string("create_cq: ") + std::strerror(rc));
    std::mt19937 rng(static_cast<uint32_t>(now_ns() ^ (server_ ? 0x9e3779b9u : 0)));
    for (uint32_t q = 0; q < nqps; ++q) {
      ctl::CreateQpPayload a{};
      a.pd = pd;
      a.qp_type = kRc;
      a.send_cq = cq->handle;
      a.recv_cq = cq->handle;
      a.max_send_wr = tx_depth + 1;
      a.max_recv_wr = std::max<uint32_t>(rx_depth, 1);
      a.max_send_sge = 1;
      a.max_recv_sge = 1;
      a.max_inline_data = static_cast<uint32_t>(o_.inline_size);
      std::unique_ptr<Qp> qp;
      if ((rc = ctx->create_qp(a, &qp)) != 0)
        return fail("create_qp " + std::to_string(q) + ": " + std::strerror(rc));
      ctl::QpAttrPayload at{};
      at.qp_state = 1;
      at.port_num = 1;
      at.qp_access_flags = kRemoteWrite | kRemoteRead | kRemoteAtomic;
      if ((rc = ctx->modify_qp(*qp, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags)) != 0)
        return fail(std::string("modify_qp INIT: ") + std::strerror(rc));
      QpInfo li;
      li.qpn = qp->qpn;
      li.psn = rng() & 0xffffff;
      li.rkey = mr.rkey;
      li.vaddr = region_va(q);
      li.region = region;
      std::memcpy(li.gid, gid, 16);
      local.push_back(li);
      qps.push_back(std::move(qp));
    }
    return true;
  }

  std::string qp_line(uint32_t q) const {
    const QpInfo &i = local[q];
    char b[200];
    std::snprintf(b, sizeof b, "QP %u %u %u %" PRIu64 " %" PRIu64 " %s", i.qpn, i.psn, i.rkey,
                  i.vaddr, i.region, gid_hex(i.gid).c_str());
    return b;
  }
  bool parse_qp_line(const std::string &l) {
    std::istringstream s(l);
    std::string tag, g;
    QpInfo i;
    if (!(s >> tag >> i.qpn >> i.psn >> i.rkey >> i.vaddr >> i.region >> g) || tag != "QP" ||
        !parse_gid(g, i.gid) || i.region < slot)
      return fail("bad QP line from the peer: '" + l + "'");
    remote.push_back(i);
    return true;
  }

  // RTR and RTS towards remote[q].
  bool connect(uint32_t peer_mtu) {
    path_mtu = std::min(active_mtu, peer_mtu);
    if (o_.mtu != 0) path_mtu = std::min(path_mtu, mtu_enum(o_.mtu));
    for (uint32_t q = 0; q < qps.size(); ++q) {
      ctl::QpAttrPayload a{};
      a.qp_state = 2;
      a.path_mtu = path_mtu;
      a.dest_qp_num = remote[q].qpn;
      a.rq_psn = remote[q].psn;
      std::memcpy(a.ah_attr.dgid, remote[q].gid, 16);
      a.ah_attr.sgid_index = static_cast<uint8_t>(gid_index);
      a.ah_attr.is_global = 1;
      a.ah_attr.hop_limit = 64;
      a.ah_attr.port_num = 1;
      a.max_dest_rd_atomic = 16;
      a.min_rnr_timer = 1;
      int rc = ctx->modify_qp(*qps[q], a,
                              kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                  kQpMaxDestRdAtomic | kQpMinRnrTimer);
      if (rc != 0) return fail(std::string("modify_qp RTR: ") + std::strerror(rc));
      a = {};
      a.qp_state = 3;
      a.sq_psn = local[q].psn;
      a.timeout = 14;
      a.retry_cnt = 7;
      a.rnr_retry = 7;
      a.max_rd_atomic = 16;
      rc = ctx->modify_qp(
          *qps[q], a,
          kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic);
      if (rc != 0) return fail(std::string("modify_qp RTS: ") + std::strerror(rc));
    }
    return true;
  }

  // Receives on slots [0, rx_depth) of every QP (send tests). wr_id = q << 32 | slot.
  bool post_recv(uint32_t q, uint64_t s) {
    const Sge sge{region_va(q) + s * slot, static_cast<uint32_t>(slot), mr.lkey};
    RecvWr wr;
    wr.wr_id = (uint64_t{q} << 32) | s;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const int rc = ctx->post_recv(*qps[q], wr);
    if (rc != 0) return fail(std::string("post_recv: ") + std::strerror(rc));
    return true;
  }
  bool post_all_recvs() {
    for (uint32_t q = 0; q < qps.size(); ++q)
      for (uint64_t s = 0; s < rx_depth; ++s)
        if (!post_recv(q, s)) return false;
    return true;
  }

  void print_header() const {
    if (quiet_) return;
    std::printf("%s\n", kLine);
    std::printf("                    %s\n", title(o_));
    std::printf(" Dual-port       : OFF\t\tDevice         : uroce (%s)\n", o_.socket.c_str());
    std::printf(" Number of qps   : %zu\t\tTransport type : IB\n", qps.size());
    std::printf(" Connection type : RC\t\tUsing SRQ      : OFF\n");
    if (o_.kind == Kind::kBw) {
      std::printf(" TX depth        : %u\n", o_.tx_depth);
      std::printf(" CQ Moderation   : %u\n", o_.cq_mod);
      if (o_.post_list > 1) std::printf(" Post List       : %u\n", o_.post_list);
    }
    if (o_.verb == Verb::kSend) std::printf(" RX depth        : %u\n", rx_depth);
    if (o_.kind == Kind::kBw)
      std::printf(" Use events      : %s\n", o_.use_event ? "ON (client)" : "OFF");
    std::printf(" Mtu             : %u[B]\n", mtu_bytes(path_mtu));
    std::printf(" Link type       : Ethernet\n");
    std::printf(" GID index       : %d\n", gid_index);
    std::printf(" Max inline data : %d[B]\n", o_.inline_size);
    std::printf(" rdma_cm QPs\t : OFF\n");
    std::printf(" Data ex. method : Ethernet\n");
    std::printf("%s\n", kLine);
    auto addr = [](const char *who, const QpInfo &i) {
      std::printf(" %s address: LID 0000 QPN %#06x PSN %#08x RKey %#08x VAddr %#016" PRIx64 "\n",
                  who, i.qpn, i.psn, i.rkey, i.vaddr);
      std::printf(" GID: ");
      for (int k = 0; k < 16; ++k)
        std::printf("%02d%s", i.gid[k], k == 15 ? "\n" : ":");
    };
    for (const QpInfo &i : local)
      addr("local", i);
    for (const QpInfo &i : remote)
      addr("remote", i);
    std::printf("%s\n", kLine);
  }
};

// ---------------------------------------------------------------------------------------------
// The client's measurement loops.

struct BwResult {
  uint64_t msgs = 0;  // completed, all QPs
  uint64_t ns = 0;    // first post to last completion
  double peak_bps = 0;
  std::vector<uint64_t> per_qp;
  uint64_t events = 0;  // -e: completion events waited for
};

bool cqe_ok(Side &s, const Cqe &c, const char *where) {
  if (c.status == 0) return true;
  return s.fail(std::string(" Completion with error at ") + where + ": status " +
                std::to_string(c.status) + " opcode " + std::to_string(c.opcode) + " wr_id " +
                std::to_string(c.wr_id & 0xffffffffu) + " qp " + std::to_string(c.qp_num));
}

// Fills the WR for message k of QP q.
void make_wr(Side &s, uint32_t q, uint64_t k, uint64_t size, Sge *sge, SendWr *wr) {
  const Options &o = s.o_;
  const uint64_t lslot = k % s.nslots;
  const uint64_t rslots = s.remote[q].region / s.slot;
  const uint64_t rslot = k % rslots;
  sge->addr = s.region_va(q) + lslot * s.slot;
  sge->length = static_cast<uint32_t>(size);
  sge->lkey = s.mr.lkey;
  wr->sg_list = sge;
  wr->num_sge = 1;
  wr->send_flags = 0;
  switch (o.verb) {
    case Verb::kWrite:
      wr->opcode = kWrWrite;
      wr->remote_addr = s.remote[q].vaddr + rslot * s.slot;
      wr->rkey = s.remote[q].rkey;
      if (size <= static_cast<uint64_t>(o.inline_size)) wr->send_flags |= kInline;
      break;
    case Verb::kRead:
      wr->opcode = kWrRead;
      wr->remote_addr = s.remote[q].vaddr + rslot * s.slot;
      wr->rkey = s.remote[q].rkey;
      break;
    case Verb::kSend:
      wr->opcode = kWrSend;
      if (size <= static_cast<uint64_t>(o.inline_size)) wr->send_flags |= kInline;
      break;
    case Verb::kAtomic:
      wr->opcode = o.cmp_swap ? kWrCmpSwp : kWrFetchAdd;
      wr->remote_addr = s.remote[q].vaddr;  // the first 8 bytes of the QP's remote region
      wr->rkey = s.remote[q].rkey;
      wr->compare_add = o.cmp_swap ? 0 : 1;
      wr->swap = 0;
      sge->length = 8;
      break;
  }
}

// -n iterations per QP, or -D seconds. One signaled WR every cq_mod (and the last one).
bool run_bw(Side &s, uint64_t size, BwResult *r) {
  const Options &o = s.o_;
  const uint32_t nq = static_cast<uint32_t>(s.qps.size());
  const uint64_t target = o.duration != 0 ? UINT64_MAX : o.iters;
  std::vector<uint64_t> posted(nq, 0), done(nq, 0), unsig(nq, 0);
  std::vector<uint64_t> st, sd;  // (time, completed) at each batch of completions
  st.reserve(1 << 20);
  sd.reserve(1 << 20);
  Cqe wc[32];
  const uint64_t t0 = now_ns();
  const uint64_t t_stop = o.duration != 0 ? t0 + uint64_t{o.duration} * 1'000'000'000u : 0;
  uint64_t last_progress = t0, total_done = 0, t_last = t0, events = 0;
  bool stop = false;
  auto post = [&](uint32_t q, bool signal) -> int {
    Sge sge;
    SendWr wr;
    make_wr(s, q, posted[q], size, &sge, &wr);
    if (signal) {
      wr.send_flags |= kSignaled;
      wr.wr_id = (uint64_t{q} << 32) | (unsig[q] + 1);
    }
    const int rc = s.ctx->post_send(*s.qps[q], wr);
    if (rc != 0) return rc;
    ++posted[q];
    unsig[q] = signal ? 0 : unsig[q] + 1;
    return 0;
  };
  // -l: lists of post_list WRs, one post_send_list call each (perftest --post_list); the
  // signaled WR ends a list (cq_mod is a multiple of post_list, options.cc).
  const uint32_t plist = o.post_list;
  std::vector<Sge> lsge(plist);
  std::vector<SendWr> lwr(plist);
  auto post_list = [&](uint32_t q) -> int {
    uint64_t u = unsig[q];
    for (uint32_t i = 0; i < plist; ++i) {
      make_wr(s, q, posted[q] + i, size, &lsge[i], &lwr[i]);
      const bool signal = u + 1 >= o.cq_mod || posted[q] + i + 1 == target;
      if (signal) {
        lwr[i].send_flags |= kSignaled;
        lwr[i].wr_id = (uint64_t{q} << 32) | (u + 1);
        u = 0;
      } else {
        ++u;
      }
    }
    size_t n = 0;
    const int rc = s.ctx->post_send_list(*s.qps[q], lwr.data(), plist, &n);
    for (size_t i = 0; i < n; ++i)  // what went in, even if the rest did not
      unsig[q] = (lwr[i].send_flags & kSignaled) ? 0 : unsig[q] + 1;
    posted[q] += n;
    return rc;
  };
  for (;;) {
    const uint64_t now = now_ns();
    if (t_stop != 0 && !stop && now >= t_stop) {
      stop = true;
      for (uint32_t q = 0; q < nq; ++q) {
        // The WRs after the last signaled one complete with one more signaled WR.
        while (unsig[q] != 0) {
          const int rc = post(q, true);
          if (rc == ENOMEM) continue;  // the ring drains as the daemon reads it
          if (rc != 0) return s.fail(std::string("post_send: ") + std::strerror(rc));
        }
      }
    }
    bool all_posted = stop || target != UINT64_MAX;
    if (!stop) {
      for (uint32_t q = 0; q < nq; ++q) {
        while (plist > 1 && posted[q] - done[q] + plist <= o.tx_depth &&
               posted[q] + plist <= target) {
          const int rc = post_list(q);
          if (rc == ENOMEM) break;
          if (rc != 0) return s.fail(std::string("post_send: ") + std::strerror(rc));
        }
        while (plist == 1 && posted[q] - done[q] < o.tx_depth && posted[q] < target) {
          const bool signal = unsig[q] + 1 >= o.cq_mod || posted[q] + 1 == target;
          const int rc = post(q, signal);
          if (rc == ENOMEM) break;
          if (rc != 0) return s.fail(std::string("post_send: ") + std::strerror(rc));
        }
        if (posted[q] < target) all_posted = false;
      }
    }
    int n = s.ctx->poll_cq(*s.cq, wc, 32);
    if (n == 0 && o.use_event && !(t_stop != 0 && !stop && now >= t_stop)) {
      // -e: arm, poll once more (a completion committed before the daemon saw the arm), sleep.
      s.ctx->req_notify_cq(*s.cq, false);
      n = s.ctx->poll_cq(*s.cq, wc, 32);
      if (n == 0) {
        const int64_t left_ms =
            t_stop != 0 && !stop ? static_cast<int64_t>((t_stop - now) / 1'000'000) + 1 : 1000;
        const int w =
            s.ctx->wait_cq_event(*s.cq, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
        if (w < 0) return s.fail(std::string("waiting for a CQ event: ") + std::strerror(-w));
        ++events;
        continue;
      }
    }
    if (n > 0) {
      const uint64_t t = now_ns();
      for (int i = 0; i < n; ++i) {
        if (!cqe_ok(s, wc[i], "client")) return false;
        const uint32_t q = static_cast<uint32_t>(wc[i].wr_id >> 32);
        if (q >= nq) return s.fail("a completion with an unknown wr_id");
        done[q] += wc[i].wr_id & 0xffffffffu;
        total_done += wc[i].wr_id & 0xffffffffu;
      }
      if (st.size() < st.capacity()) {
        st.push_back(t);
        sd.push_back(total_done);
      }
      last_progress = t_last = t;
    } else if (now - last_progress > uint64_t{kWaitMs} * 1'000'000u) {
      return s.fail("no completion for " + std::to_string(kWaitMs / 1000) + " s (" +
                    std::to_string(total_done) + " of the messages completed)");
    }
    if (all_posted) {
      bool all_done = true;
      for (uint32_t q = 0; q < nq; ++q)
        all_done = all_done && done[q] == posted[q];
      if (all_done) break;
    }
  }
  r->msgs = total_done;
  r->ns = t_last - t0;
  r->events = events;
  r->per_qp = done;
  // Peak: the best rate over any stretch of 1/20 of the completion batches.
  r->peak_bps = 0;
  if (st.size() >= 2) {
    const size_t w = std::max<size_t>(1, st.size() / 20);
    for (size_t i = 0; i + w < st.size(); ++i) {
      const uint64_t dt = st[i + w] - st[i];
      if (dt == 0) continue;
      r->peak_bps = std::max(r->peak_bps, static_cast<double>(sd[i + w] - sd[i]) * size * 1e9 / dt);
    }
  }
  const double avg = r->ns ? static_cast<double>(r->msgs) * size * 1e9 / r->ns : 0;
  if (r->peak_bps < avg) r->peak_bps = avg;
  return true;
}

// Waits (bounded) until *p == v; the peer's WRITE places it.
bool wait_byte(Side &s, const uint8_t *p, uint8_t v) {
  const uint64_t end = now_ns() + uint64_t{kWaitMs} * 1'000'000u;
  uint32_t spins = 0;
  while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != v) {
    if ((++spins & 1023) == 0 && now_ns() > end)
      return s.fail("the peer's WRITE did not arrive within " + std::to_string(kWaitMs / 1000) +
                    " s");
  }
  return true;
}

// Polls until `want` completions of the given kind (send side or receive side) arrived.
bool wait_cqes(Side &s, int want_send, int want_recv, Cqe *last_recv) {
  const uint64_t end = now_ns() + uint64_t{kWaitMs} * 1'000'000u;
  // One at a time: a completion that belongs to the next step (the peer may answer before our
  // own send completion is polled) stays in the CQ.
  Cqe wc[1];
  uint32_t spins = 0;
  while (want_send > 0 || want_recv > 0) {
    const int n = s.ctx->poll_cq(*s.cq, wc, 1);
    for (int i = 0; i < n; ++i) {
      if (!cqe_ok(s, wc[i], s.server_ ? "server" : "client")) return false;
      if (wc[i].opcode >= kWcRecv) {
        --want_recv;
        if (last_recv) *last_recv = wc[i];
      } else {
        --want_send;
      }
    }
    if (n == 0 && (++spins & 1023) == 0 && now_ns() > end)
      return s.fail("no completion for " + std::to_string(kWaitMs / 1000) + " s");
  }
  return true;
}

// One ping-pong step of write_lat / send_lat, or one read / atomic (client only).
// Layout of QP 0's region: slot 0 receives the peer's WRITE, slot 1 is the source.
bool lat_post(Side &s, uint64_t size, uint8_t seq) {
  const Options &o = s.o_;
  uint8_t *src = s.region_ptr(0) + s.slot;
  Sge sge{s.region_va(0) + s.slot, static_cast<uint32_t>(size), s.mr.lkey};
  SendWr wr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = kSignaled;
  if (o.verb == Verb::kWrite || o.verb == Verb::kSend) {
    src[size - 1] = seq;
    if (size <= static_cast<uint64_t>(o.inline_size)) wr.send_flags |= kInline;
  }
  switch (o.verb) {
    case Verb::kWrite:
      wr.opcode = kWrWrite;
      wr.remote_addr = s.remote[0].vaddr;
      wr.rkey = s.remote[0].rkey;
      break;
    case Verb::kSend:
      wr.opcode = kWrSend;
      break;
    case Verb::kRead:
      wr.opcode = kWrRead;
      wr.remote_addr = s.remote[0].vaddr;
      wr.rkey = s.remote[0].rkey;
      sge.addr = s.region_va(0);
      break;
    case Verb::kAtomic:
      wr.opcode = o.cmp_swap ? kWrCmpSwp : kWrFetchAdd;
      wr.remote_addr = s.remote[0].vaddr;
      wr.rkey = s.remote[0].rkey;
      wr.compare_add = o.cmp_swap ? 0 : 1;
      sge.addr = s.region_va(0);
      sge.length = 8;
      break;
  }
  const int rc = s.ctx->post_send(*s.qps[0], wr);
  if (rc != 0) return s.fail(std::string("post_send: ") + std::strerror(rc));
  return true;
}

// Receive slot for send_lat: slot 0 (the source is slot 1); reposted after each message.
bool lat_recv_check(Side &s, const Cqe &c, uint64_t size, uint8_t seq) {
  if (c.byte_len != size)
    return s.fail("a message of " + std::to_string(c.byte_len) + " bytes, expected " +
                  std::to_string(size));
  const uint8_t *d = s.region_ptr(0) + (c.wr_id & 0xffffffffu) * s.slot;
  if (s.o_.check) {
    for (uint64_t i = 0; i + 1 < size; ++i)
      if (d[i] != pat(0, i, size))
        return s.fail("--check: received data differs at byte " + std::to_string(i));
    if (d[size - 1] != seq) return s.fail("--check: the message's sequence byte differs");
  }
  return s.post_recv(0, c.wr_id & 0xffffffffu);
}

// The client's latency loop; samples in ns (RTT / 2 for write and send, as perftest).
bool run_lat(Side &s, uint64_t size, std::vector<uint64_t> *samples) {
  const Options &o = s.o_;
  samples->clear();
  samples->reserve(o.iters);
  uint8_t *dst = s.region_ptr(0);
  for (uint32_t i = 0; i < o.iters; ++i) {
    const uint8_t seq = static_cast<uint8_t>(i % 255 + 1);
    const uint64_t t0 = now_ns();
    if (!lat_post(s, size, seq)) return false;
    uint64_t t1 = 0;
    if (o.verb == Verb::kWrite) {
      if (!wait_byte(s, dst + size - 1, seq)) return false;
      t1 = now_ns();
      if (!wait_cqes(s, 1, 0, nullptr)) return false;
    } else if (o.verb == Verb::kSend) {
      Cqe rc{};
      if (!wait_cqes(s, 1, 1, &rc)) return false;
      t1 = now_ns();
      if (!lat_recv_check(s, rc, size, seq)) return false;
    } else {
      if (!wait_cqes(s, 1, 0, nullptr)) return false;
      t1 = now_ns();
    }
    const uint64_t d = t1 - t0;
    samples->push_back(o.verb == Verb::kWrite || o.verb == Verb::kSend ? d / 2 : d);
  }
  return true;
}

// The server's half of write_lat / send_lat.
bool serve_lat(Side &s, uint64_t size, uint32_t iters) {
  uint8_t *dst = s.region_ptr(0);
  for (uint32_t i = 0; i < iters; ++i) {
    const uint8_t seq = static_cast<uint8_t>(i % 255 + 1);
    if (s.o_.verb == Verb::kWrite) {
      if (!wait_byte(s, dst + size - 1, seq)) return false;
      if (!lat_post(s, size, seq)) return false;
      if (!wait_cqes(s, 1, 0, nullptr)) return false;
    } else {
      Cqe rc{};
      if (!wait_cqes(s, 0, 1, &rc)) return false;
      if (!lat_recv_check(s, rc, size, seq)) return false;
      if (!lat_post(s, size, seq)) return false;
      if (!wait_cqes(s, 1, 0, nullptr)) return false;
    }
  }
  return true;
}

// Fills every slot of every QP's region with the pattern of `size`-byte messages (sources of
// WRITE / SEND, and the server's data for READ).
void fill_pattern(Side &s, uint64_t size) {
  for (uint32_t q = 0; q < s.qps.size(); ++q)
    for (uint64_t k = 0; k < s.nslots; ++k) {
      uint8_t *p = s.region_ptr(q) + k * s.slot;
      for (uint64_t i = 0; i < size; ++i)
        p[i] = pat(q, i, size);
    }
}

// Checks `slots` slots of QP q's region hold the pattern, and (when check_tail) that the
// byte after each message is still 0.
bool check_slots(Side &s, uint32_t q, uint64_t slots, uint64_t size, bool check_tail) {
  for (uint64_t k = 0; k < slots; ++k) {
    const uint8_t *p = s.region_ptr(q) + k * s.slot;
    for (uint64_t i = 0; i < size; ++i)
      if (p[i] != pat(q, i, size))
        return s.fail("--check: QP " + std::to_string(q) + " slot " + std::to_string(k) + " byte " +
                      std::to_string(i) + " differs (size " + std::to_string(size) + ")");
    if (check_tail && size < s.slot && p[size] != 0)
      return s.fail("--check: a message of " + std::to_string(size) + " bytes wrote past its end");
  }
  return true;
}

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

std::vector<std::string> words(const std::string &l) {
  std::istringstream s(l);
  std::vector<std::string> w;
  for (std::string x; s >> x;)
    w.push_back(x);
  return w;
}

// ---------------------------------------------------------------------------------------------
// Server

struct ServerStart {
  std::atomic<int> port{-1};  // the bound port once listening (--loopback), -2 on failure
};

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
  // UROCE-PERF-1 TEST QPS MAXSIZE TX_DEPTH RX_DEPTH CQ_MOD INLINE CHECK CMP_SWAP MTU
  const std::vector<std::string> w = words(line);
  if (!w.empty() && w[0] == "ABORT") return die("the client gave up before the run");
  if (w.size() != 11 || w[0] != kProto) return die("not a uroce-perf client: '" + line + "'");
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
  if (o.qps < 1 || o.qps > kMaxQps || max_size < 1 || max_size > kMaxSize || o.tx_depth < 1 ||
      o.tx_depth > kMaxDepth || o.rx_depth < 1 || o.rx_depth > kMaxDepth || o.inline_size < 0 ||
      o.inline_size > static_cast<int>(kMaxInline) || peer_mtu < 1 || peer_mtu > 5)
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
  uint64_t received = 0;  // send_bw: messages received since SIZE
  uint64_t size = 0;
  uint32_t iters = 0;
  Cqe wc[32];
  // Drains the receive completions of send_bw (checks and reposts).
  auto drain = [&]() -> int {
    const int n = s.ctx->poll_cq(*s.cq, wc, 32);
    for (int i = 0; i < n; ++i) {
      if (!cqe_ok(s, wc[i], "server")) return -1;
      const uint32_t q = static_cast<uint32_t>(wc[i].wr_id >> 32);
      const uint64_t k = wc[i].wr_id & 0xffffffffu;
      if (wc[i].opcode < kWcRecv || q >= o.qps || k >= s.rx_depth) {
        s.fail("an unexpected completion at the server");
        return -1;
      }
      if (wc[i].byte_len != size) {
        s.fail("a message of " + std::to_string(wc[i].byte_len) + " bytes, expected " +
               std::to_string(size));
        return -1;
      }
      if (o.check) {
        const uint8_t *p = s.region_ptr(q) + k * s.slot;
        for (uint64_t b = 0; b < size; ++b)
          if (p[b] != pat(q, b, size)) {
            s.fail("--check: a received message differs at byte " + std::to_string(b));
            return -1;
          }
        std::memset(s.region_ptr(q) + k * s.slot, 0, size);
      }
      ++received;
      if (!s.post_recv(q, k)) return -1;
    }
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
    received = 0;
    // Prepare the buffer for this size.
    if (o.verb == Verb::kRead) {
      fill_pattern(s, size);
    } else if (o.verb == Verb::kWrite && lat) {
      std::memset(s.buf.data(), 0, s.region * o.qps);
      fill_pattern(s, size);  // slot 1 is the source (its last byte is the sequence)
      std::memset(s.region_ptr(0), 0, s.slot);
    } else if (o.verb == Verb::kSend && lat) {
      for (uint64_t b = 0; b < size; ++b)
        s.region_ptr(0)[s.slot + b] = pat(0, b, size);
    } else {
      std::memset(s.buf.data(), 0, s.region * o.qps);
    }
    oob.send_line("GO");
    if (lat && (o.verb == Verb::kWrite || o.verb == Verb::kSend)) {
      if (!serve_lat(s, size, iters)) return die(s.error);
    }
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
      // Every message the client completed was received (its ACK came after placement).
      const uint64_t end = now_ns() + uint64_t{kWaitMs} * 1'000'000u;
      while (received < total) {
        const int r = drain();
        if (r < 0) return die(s.error);
        if (r == 0 && now_ns() > end)
          return die("received " + std::to_string(received) + " of " + std::to_string(total) +
                     " messages");
      }
    }
    bool ok = true;
    if (o.check) {
      for (uint32_t q = 0; q < o.qps && ok; ++q) {
        if (o.verb == Verb::kWrite && !lat) {
          ok = check_slots(s, q, std::min<uint64_t>(n[q], s.nslots), size, true);
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
      oob.send_line(send && !lat ? "OK " + std::to_string(received) : "OK");
    }
  }
  if (!quiet) std::printf("%s\n", kLine);
  return s.error.empty() ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// Client

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
    std::string done = "DONE " + std::to_string(size);
    for (uint64_t n : r.per_qp)
      done += " " + std::to_string(n);
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

}  // namespace

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
