// SPDX-License-Identifier: BSD-3-Clause
// The Side: context, GID, buffer, MR, CQ, QPs; the QP exchange lines; RTR / RTS; the header.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "perf.h"
#include "util/csprng.h"

namespace uroce::perf {

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

bool Side::fail(const std::string &e) {
  if (error.empty()) error = e;
  return false;
}

bool Side::setup(uint32_t nqps, uint64_t max_size, uint32_t tx_depth, uint32_t want_rx) {
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

  moff = o_.conn == Conn::kUd ? kGrh : 0;
  slot = (std::max<uint64_t>(max_size + moff, 8) + 63) & ~uint64_t{63};
  const uint64_t room = std::max<uint64_t>(1, kMaxRegion / (slot * nqps));
  rx_depth = want_rx;
  uint64_t want_slots = std::max<uint64_t>(2, std::min<uint64_t>(tx_depth, 16));
  if (o_.bidir) want_slots *= 2;  // sources and the peer's targets apart
  if (want_rx != 0) {
    rx_depth = static_cast<uint32_t>(std::min<uint64_t>(want_rx, room));
    want_slots = std::max<uint64_t>(want_slots, rx_depth + 1);  // + one send slot
  }
  nslots = std::min(want_slots, std::max<uint64_t>(room, 2));
  if (want_rx != 0 && rx_depth + 1 > nslots) rx_depth = static_cast<uint32_t>(nslots - 1);
  region = slot * nslots;
  // Where this side's messages come from (or, for READ, land), bw.cc make_wr.
  src_base = 0;
  src_n = nslots;
  if (o_.verb == Verb::kAtomic) {
    src_base = 1;  // slot 0 is the peer's atomic target
  } else if (o_.verb == Verb::kSend && rx_depth != 0) {
    src_base = rx_depth;  // receives use [0, rx_depth)
  } else if (o_.bidir) {
    src_n = nslots / 2;  // the peer writes / reads [nslots / 2, nslots)
  }
  if (src_base != 0) src_n = nslots - src_base;
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
  if (o_.use_srq && want_rx != 0) {
    // One SRQ for every QP: rx_depth receives per QP's region, all posted to it.
    ctl::CreateSrqPayload sa{};
    sa.pd = pd;
    sa.max_wr = nqps * std::max<uint32_t>(rx_depth, 1);
    sa.max_sge = 1;
    if (sa.max_wr > dev.max_srq_wr)
      return fail("the SRQ would need " + std::to_string(sa.max_wr) + " WRs, uroced allows " +
                  std::to_string(dev.max_srq_wr) + ": lower -r");
    if ((rc = ctx->create_srq(sa, &srq)) != 0)
      return fail(std::string("create_srq: ") + std::strerror(rc));
  }
  const uint32_t type = o_.conn == Conn::kRc ? kRc : o_.conn == Conn::kUc ? kUc : kUd;
  // Initial PSNs an off-path attacker cannot guess (doc/security.md): getrandom(2)-keyed.
  util::Csprng rng;
  for (uint32_t q = 0; q < nqps; ++q) {
    ctl::CreateQpPayload a{};
    a.pd = pd;
    a.qp_type = type;
    a.srq = srq ? srq->handle : 0;
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
    uint32_t mask = kQpState | kQpPkeyIndex | kQpPort;
    if (o_.conn == Conn::kUd) {
      at.qkey = kQkey;
      mask |= kQpQkey;
    } else {
      at.qp_access_flags =
          o_.conn == Conn::kUc ? kRemoteWrite : kRemoteWrite | kRemoteRead | kRemoteAtomic;
      mask |= kQpAccessFlags;
    }
    if ((rc = ctx->modify_qp(*qp, at, mask)) != 0)
      return fail(std::string("modify_qp INIT: ") + std::strerror(rc));
    index_of[qp->qpn] = q;
    QpInfo li;
    li.qpn = qp->qpn;
    li.psn = rng.next_u32() & 0xffffff;
    li.rkey = mr.rkey;
    li.vaddr = region_va(q);
    li.region = region;
    std::memcpy(li.gid, gid, 16);
    local.push_back(li);
    qps.push_back(std::move(qp));
  }
  return true;
}

uint32_t Side::qp_index(uint32_t qpn) const {
  const auto it = index_of.find(qpn);
  return it == index_of.end() ? UINT32_MAX : it->second;
}

std::string Side::qp_line(uint32_t q) const {
  const QpInfo &i = local[q];
  char b[200];
  std::snprintf(b, sizeof b, "QP %u %u %u %" PRIu64 " %" PRIu64 " %s", i.qpn, i.psn, i.rkey,
                i.vaddr, i.region, gid_hex(i.gid).c_str());
  return b;
}

bool Side::parse_qp_line(const std::string &l) {
  std::istringstream s(l);
  std::string tag, g;
  QpInfo i;
  if (!(s >> tag >> i.qpn >> i.psn >> i.rkey >> i.vaddr >> i.region >> g) || tag != "QP" ||
      !parse_gid(g, i.gid) || i.region < slot)
    return fail("bad QP line from the peer: '" + l + "'");
  remote.push_back(i);
  return true;
}

bool Side::connect(uint32_t peer_mtu) {
  path_mtu = std::min(active_mtu, peer_mtu);
  if (o_.mtu != 0) path_mtu = std::min(path_mtu, mtu_enum(o_.mtu));
  if (o_.conn == Conn::kUd) return connect_ud();
  const bool rc_qp = o_.conn == Conn::kRc;
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
    uint32_t mask = kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (rc_qp) mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    int rc = ctx->modify_qp(*qps[q], a, mask);
    if (rc != 0) return fail(std::string("modify_qp RTR: ") + std::strerror(rc));
    a = {};
    a.qp_state = 3;
    a.sq_psn = local[q].psn;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    mask = kQpState | kQpSqPsn;
    if (rc_qp) mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
    rc = ctx->modify_qp(*qps[q], a, mask);
    if (rc != 0) return fail(std::string("modify_qp RTS: ") + std::strerror(rc));
  }
  return true;
}

// UD: RTR and RTS need no peer; each QP sends through an address handle towards its peer's GID.
bool Side::connect_ud() {
  for (uint32_t q = 0; q < qps.size(); ++q) {
    ctl::QpAttrPayload a{};
    a.qp_state = 2;
    int rc = ctx->modify_qp(*qps[q], a, kQpState);
    if (rc != 0) return fail(std::string("modify_qp RTR: ") + std::strerror(rc));
    a = {};
    a.qp_state = 3;
    a.sq_psn = local[q].psn;
    rc = ctx->modify_qp(*qps[q], a, kQpState | kQpSqPsn);
    if (rc != 0) return fail(std::string("modify_qp RTS: ") + std::strerror(rc));
    ctl::AhAttrPayload ah{};
    std::memcpy(ah.dgid, remote[q].gid, 16);
    ah.sgid_index = static_cast<uint8_t>(gid_index);
    ah.is_global = 1;
    ah.hop_limit = 64;
    ah.port_num = 1;
    uint32_t h = 0;
    if ((rc = ctx->create_ah(pd, ah, &h)) != 0)
      return fail(std::string("create_ah: ") + std::strerror(rc));
    ahs.push_back(h);
  }
  return true;
}

bool Side::post_recv(uint32_t q, uint64_t s) {
  const Sge sge{region_va(q) + s * slot, static_cast<uint32_t>(slot), mr.lkey};
  RecvWr wr;
  wr.wr_id = (uint64_t{q} << 32) | s;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  const int rc = srq ? ctx->post_srq_recv(*srq, wr) : ctx->post_recv(*qps[q], wr);
  if (rc != 0) return fail(std::string("post_recv: ") + std::strerror(rc));
  return true;
}

bool Side::post_all_recvs() {
  for (uint32_t q = 0; q < qps.size(); ++q)
    for (uint64_t s = 0; s < rx_depth; ++s)
      if (!post_recv(q, s)) return false;
  return true;
}

void Side::print_header() const {
  if (quiet_) return;
  std::printf("%s\n", kLine);
  std::printf("                    %s\n", title(o_));
  std::printf(" Dual-port       : OFF\t\tDevice         : uroce (%s)\n", o_.socket.c_str());
  std::printf(" Number of qps   : %zu\t\tTransport type : IB\n", qps.size());
  std::printf(" Connection type : %s\t\tUsing SRQ      : %s\n", conn_name(o_.conn),
              srq ? "ON" : "OFF");
  if (o_.kind == Kind::kBw) {
    std::printf(" TX depth        : %u\n", o_.tx_depth);
    std::printf(" CQ Moderation   : %u\n", o_.cq_mod);
    if (o_.post_list > 1) std::printf(" Post List       : %u\n", o_.post_list);
  }
  if (o_.verb == Verb::kSend) std::printf(" RX depth        : %u\n", rx_depth);
  std::printf(" Use events      : %s\n", o_.use_event ? "ON" : "OFF");
  std::printf(" Mtu             : %u[B]\n", mtu_bytes(path_mtu));
  std::printf(" Link type       : Ethernet\n");
  std::printf(" GID index       : %d\n", gid_index);
  std::printf(" Max inline data : %d[B]\n", o_.inline_size);
  std::printf(" rdma_cm QPs\t : OFF\n");
  std::printf(" Data ex. method : Ethernet\n");
  std::printf("%s\n", kLine);
  auto addr = [](const char *who, const QpInfo &i) {
    std::printf(" %s address: LID 0000 QPN %#06x PSN %#08x RKey %#08x VAddr %#016" PRIx64 "\n", who,
                i.qpn, i.psn, i.rkey, i.vaddr);
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

uint64_t Side::remote_slot(uint32_t q, uint64_t k) const {
  const uint64_t rslots = remote[q].region / slot;
  if (!o_.bidir) return k % rslots;
  return rslots / 2 + k % (rslots / 2);
}

bool Side::on_recv(const Cqe &c) {
  const uint32_t q = static_cast<uint32_t>(c.wr_id >> 32);  // the buffer's region
  const uint64_t k = c.wr_id & 0xffffffffu;
  const uint32_t from = srq ? qp_index(c.qp_num) : q;  // the QP it came on: its pattern
  if (c.opcode < kWcRecv || q >= qps.size() || k >= rx_depth || from >= qps.size())
    return fail("an unexpected receive completion");
  if (c.byte_len != cur_size + moff)
    return fail("a message of " + std::to_string(c.byte_len - moff) + " bytes, expected " +
                std::to_string(cur_size));
  if (o_.check) {
    uint8_t *p = region_ptr(q) + k * slot + moff;
    for (uint64_t b = 0; b < cur_size; ++b)
      if (p[b] != pat(from, b, cur_size))
        return fail("--check: a received message differs at byte " + std::to_string(b));
    std::memset(p, 0, cur_size);
  }
  ++received;
  return post_recv(q, k);
}

}  // namespace uroce::perf
