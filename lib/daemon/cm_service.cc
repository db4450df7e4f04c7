// SPDX-License-Identifier: BSD-3-Clause
// CmService: QP 1 (receiving and sending MADs) and the CM's events turned into rdma_cm events.
#include "daemon/cm_service.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cm/cma.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::daemon {

const char *gsi_drop_str(GsiDrop d) noexcept {
  switch (d) {
    case GsiDrop::kParse:
      return "parse";
    case GsiDrop::kNotSendOnly:
      return "not_send_only";
    case GsiDrop::kBadPkey:
      return "bad_pkey";
    case GsiDrop::kBadQkey:
      return "bad_qkey";
    case GsiDrop::kShortMad:
      return "short_mad";
    case GsiDrop::kInternal:
      return "internal";
    case GsiDrop::kCount:
      break;
  }
  return "?";
}

namespace {

uint64_t guid_of(const uint8_t *mac) {
  const uint8_t eui[8] = {
      static_cast<uint8_t>(mac[0] ^ 2), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
  uint64_t g = 0;
  for (uint8_t b : eui)
    g = g << 8 | b;
  return g;
}

std::array<uint8_t, 16> key_of(const wire::Gid &g) {
  std::array<uint8_t, 16> k;
  std::memcpy(k.data(), g.raw, 16);
  return k;
}

}  // namespace

CmService::CmService(PortView &port, TxFn tx, ClockFn clock, uint64_t seed, cm::Limits lim)
    : port_(port),
      tx_(std::move(tx)),
      clock_(std::move(clock)),
      cm_(*this, guid_of(port.mac()), seed, lim),
      psn_(static_cast<uint32_t>(seed >> 40) & 0xffffff),
      rng_(seed ^ 0x5DEECE66Dull) {}

CmService::~CmService() = default;

void CmService::register_types(ctl::TypeTable &t) noexcept {
  for (const ctl::CmSpec &s : ctl::kCmSpecs) {
    t.add({s.type, s.req_payload, s.req_payload, s.req_fds});
    t.add({static_cast<uint16_t>(s.type | ctl::kReplyBit), s.rep_min, s.rep_max, s.rep_fds});
  }
}

void CmService::rx(const uint8_t *f, uint32_t len, uint64_t now) noexcept {
  auto drop = [this](GsiDrop d) { ++gc_.drops[static_cast<size_t>(d)]; };
  wire::ParsedPacket p;
  if (wire::parse_frame(f, len, &p) != wire::ParseError::kOk) return drop(GsiDrop::kParse);
  if (p.bth()->opcode() != wire::op::kUdSendOnly) return drop(GsiDrop::kNotSendOnly);
  if ((p.bth()->pkey() & 0x7fff) != 0x7fff) return drop(GsiDrop::kBadPkey);
  if (p.deth()->qkey() != kGsiQkey) return drop(GsiDrop::kBadQkey);
  if (p.payload_len < cm::kMadSize) return drop(GsiDrop::kShortMad);
  ++gc_.rx;
  try {
    std::array<uint8_t, 6> mac;
    std::memcpy(mac.data(), p.eth()->src(), 6);
    macs_[key_of(p.sgid())] = mac;
    cm_.receive(p.sgid(), p.payload(), p.payload_len, now);
  } catch (...) {
    drop(GsiDrop::kInternal);
  }
}

void CmService::poll(uint64_t now) noexcept {
  try {
    cm_.poll(now);
  } catch (...) {
    ++gc_.drops[static_cast<size_t>(GsiDrop::kInternal)];
  }
}

bool CmService::pick_source(const wire::Gid &to, wire::Gid *out) const noexcept {
  // The port's first address of the peer's family (a link-local IPv6 peer gets fe80::).
  const bool v4 = to.is_v4mapped();
  const bool ll = to.raw[0] == 0xfe && (to.raw[1] & 0xc0) == 0x80;
  for (size_t i = 0; i < port_.gid_count(); ++i) {
    const wire::Gid g = port_.gid(i);
    if (g.is_v4mapped() != v4) continue;
    if (!v4 && ll != (g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80)) continue;
    *out = g;
    return true;
  }
  return false;
}

int CmService::local_gid_index(const wire::Gid &g) const noexcept {
  for (size_t i = 0; i < port_.gid_count(); ++i)
    if (port_.gid(i) == g) return static_cast<int>(i);
  return -1;
}

void CmService::send_mad(const wire::Gid &to, const uint8_t *mad) {
  wire::PathInfo path;
  const auto m = macs_.find(key_of(to));
  if (m == macs_.end() || !pick_source(to, &path.sgid)) {
    ++gc_.tx_no_route;
    return;
  }
  path.dgid = to;
  std::memcpy(path.smac, port_.mac(), 6);
  std::memcpy(path.dmac, m->second.data(), 6);
  path.dscp = port_.dscp();
  wire::PacketDesc d;
  d.path = &path;
  d.f.opcode = wire::op::kUdSendOnly;
  d.f.pkey = cm::kDefaultPkey;
  d.f.dest_qp = kGsiQpn;
  d.f.psn = psn_++ & 0xffffff;
  d.f.qkey = kGsiQkey;
  d.f.src_qp = kGsiQpn;
  d.payload_len = cm::kMadSize;
  uint8_t buf[512];
  const wire::BuildResult r = wire::build_frame(buf, sizeof buf, d, mad);
  if (!r.ok() || !tx_(buf, r.frame_len)) {
    ++gc_.tx_fail;
    return;
  }
  ++gc_.tx;
}

void CmService::queue_event(Id &id, uint32_t event, int32_t status, const cm::Event *e,
                            uint32_t listen_id) {
  const auto ch = channels_.find(id.channel);
  if (ch == channels_.end() || ch->second->q.size() >= Channel::kMaxQueued) {
    ++gc_.events_lost;
    return;
  }
  ctl::CmEventReply r{};
  r.event = event;
  r.status = status;
  r.id = id.handle;
  r.listen_id = listen_id;
  std::memcpy(r.local_gid, id.local.raw, 16);
  std::memcpy(r.peer_gid, id.peer.raw, 16);
  r.local_port = id.local_port;
  r.peer_port = id.peer_port;
  r.gid_index = id.gid_index;
  const bool ip = id.ps != static_cast<uint16_t>(cm::PortSpace::kIb);
  auto priv = [&r](const uint8_t *p, size_t n) {
    if (n > ctl::kCmPrivateMax) n = ctl::kCmPrivateMax;
    std::memcpy(r.private_data, p, n);
    r.private_len = static_cast<uint8_t>(n);
  };
  if (e != nullptr && e->req != nullptr) {
    const cm::Req &q = *e->req;
    r.qpn = q.local_qpn;
    r.psn = q.starting_psn;
    r.qkey = q.local_qkey;
    r.responder_resources = q.responder_resources;
    r.initiator_depth = q.initiator_depth;
    r.retry_count = q.retry_count;
    r.rnr_retry_count = q.rnr_retry_count;
    r.srq = q.srq;
    r.path_mtu = q.path_mtu;
    r.local_ack_timeout = q.primary.local_ack_timeout;
    const size_t skip = ip ? cm::kCmaHdrSize : 0;
    priv(q.private_data.data() + skip, cm::kReqPrivate - skip);
  } else if (e != nullptr && e->rep != nullptr) {
    const cm::Rep &p = *e->rep;
    r.qpn = p.local_qpn;
    r.psn = p.starting_psn;
    r.qkey = p.local_qkey;
    r.responder_resources = p.responder_resources;
    r.initiator_depth = p.initiator_depth;
    r.rnr_retry_count = p.rnr_retry_count;
    r.srq = p.srq;
    priv(p.private_data.data(), cm::kRepPrivate);
  } else if (e != nullptr && e->sidr_req != nullptr) {
    const size_t skip = ip ? cm::kCmaHdrSize : 0;
    priv(e->sidr_req->private_data.data() + skip, cm::kSidrReqPrivate - skip);
  } else if (e != nullptr && e->sidr_rep != nullptr) {
    r.qpn = e->sidr_rep->qpn;
    r.qkey = e->sidr_rep->qkey;
    priv(e->sidr_rep->private_data.data(), cm::kSidrRepPrivate);
  } else if (e != nullptr && e->rej != nullptr) {
    priv(e->rej->private_data.data(), cm::kRejPrivate);
  }
  ch->second->q.push_back(r);
  ++gc_.events;
  const char b = 1;
  (void)::send(ch->second->wake.get(), &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void CmService::on_event(const cm::Event &e) {
  if (e.kind == cm::Event::kReqReceived || e.kind == cm::Event::kSidrReqReceived) {
    const auto l = ids_.find(e.listen_id);
    if (l == ids_.end() || (e.req == nullptr && e.sidr_req == nullptr)) return;
    Id &lis = *l->second;
    const uint8_t *priv =
        e.req != nullptr ? e.req->private_data.data() : e.sidr_req->private_data.data();
    cm::CmaHdr h;
    const bool hdr = cm::read_cma_hdr(priv, &h);
    // As the kernel's cma_match_private_data: a listener bound to one address takes requests
    // for that address only (a wildcard one takes both families); the kernel's rdma_cm finds
    // no id for the others and its ib_cm answers REJ 28 / SIDR_REP "rejected".
    if (lis.ps != static_cast<uint16_t>(cm::PortSpace::kIb) && !lis.any &&
        (!hdr || !(h.dst_gid() == lis.local))) {
      ++gc_.addr_mismatch;
      if (e.req != nullptr) {
        cm_.reject(e.comm_id, cm::kRejConsumerDefined, nullptr, 0);
      } else {
        cm::SidrRep r;
        r.status = cm::kSidrRejected;
        r.service_id = e.sidr_req->service_id;
        cm_.sidr_reply(e.comm_id, r);
      }
      return;
    }
    auto child = std::make_unique<Id>();
    Id &c = *child;
    c.handle = next_handle_++;
    c.session = lis.session;
    c.channel = lis.channel;
    c.ps = lis.ps;
    c.qp_type = lis.qp_type;
    c.bound = c.resolved = true;
    // A REQ's primary path names both ends (the QP's GIDs, which need not be the ones its
    // MAD came from); a SIDR_REQ has none: the MAD's source and our address of its kind.
    c.peer = e.peer;
    if (e.req != nullptr) {
      c.local = e.req->primary.remote_gid;
      c.peer = e.req->primary.local_gid;
    } else if (!pick_source(e.peer, &c.local)) {
      c.local = lis.local;
    }
    c.local_port = lis.local_port;
    if (hdr) c.peer_port = h.port;
    const int gi = local_gid_index(c.local);
    c.gid_index = static_cast<uint16_t>(gi < 0 ? lis.gid_index : gi);
    c.comm_id = e.comm_id;
    c.listen_for = lis.handle;
    by_comm_[c.comm_id] = c.handle;
    ids_[c.handle] = std::move(child);
    queue_event(c, ctl::kEvConnectRequest, 0, &e, lis.handle);
    // As the kernel's rdma_cm: the app may take its time to accept (MRA, 2^24 x 4.096 us).
    if (e.req != nullptr) cm_.mra(e.comm_id, kMraServiceTimeout);
    return;
  }
  const auto bc = by_comm_.find(e.comm_id);
  if (bc == by_comm_.end()) return;
  const auto it = ids_.find(bc->second);
  if (it == ids_.end()) return;
  Id &id = *it->second;
  auto gone = [&] {
    by_comm_.erase(id.comm_id);
    id.comm_id = 0;
  };
  switch (e.kind) {
    case cm::Event::kRepReceived:
      queue_event(id, ctl::kEvConnectResponse, 0, &e);
      break;
    case cm::Event::kEstablished:
      queue_event(id, ctl::kEvEstablished, 0, &e);
      break;
    case cm::Event::kRejected:
      queue_event(id, ctl::kEvRejected, e.reason, &e);
      gone();
      break;
    case cm::Event::kTimeout:
      queue_event(id, ctl::kEvUnreachable, -ETIMEDOUT, &e);
      gone();
      break;
    case cm::Event::kDreqReceived:
    case cm::Event::kDisconnected:
      if (!id.disc_reported) queue_event(id, ctl::kEvDisconnected, 0, &e);
      id.disc_reported = true;
      break;
    case cm::Event::kTimewaitExit:
      gone();
      break;
    case cm::Event::kSidrRepReceived:  // the exchange is over either way
      if (e.sidr_rep != nullptr && e.sidr_rep->status == cm::kSidrOk)
        queue_event(id, ctl::kEvEstablished, 0, &e);
      else
        queue_event(id, ctl::kEvUnreachable, -ECONNREFUSED, &e);
      gone();
      break;
    default:
      break;
  }
}

void CmService::add_stats(std::vector<ctl::StatEntry> &v) const {
  auto add = [&v](const char *what, uint64_t value) {
    ctl::StatEntry e{};
    std::snprintf(e.name, sizeof e.name, "cm.%s", what);
    e.value = value;
    v.push_back(e);
  };
  const cm::Counters &c = cm_.counters();
  add("rx_mads", c.rx_mads);
  add("rx_bad_mads", c.rx_bad);
  add("rx_unmatched", c.rx_unmatched);
  add("tx_mads", c.tx_mads);
  add("retries", c.retries);
  add("timeouts", c.timeouts);
  add("rej_sent", c.rej_sent);
  add("half_open_refused", c.half_open_refused);
  add("connections", cm_.connections());
  add("ids", ids_.size());
  add("channels", channels_.size());
  add("gsi_rx", gc_.rx);
  add("gsi_tx", gc_.tx);
  add("gsi_tx_no_route", gc_.tx_no_route);
  add("gsi_tx_fail", gc_.tx_fail);
  add("events", gc_.events);
  add("events_lost", gc_.events_lost);
  add("req_addr_mismatch", gc_.addr_mismatch);
  char name[48];
  for (size_t i = 0; i < static_cast<size_t>(GsiDrop::kCount); ++i) {
    std::snprintf(name, sizeof name, "gsi_drop_%s", gsi_drop_str(static_cast<GsiDrop>(i)));
    add(name, gc_.drops[i]);
  }
}

}  // namespace uroce::daemon
