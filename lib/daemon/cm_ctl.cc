// SPDX-License-Identifier: BSD-3-Clause
// CmService's control messages (uroce/ctl_cm.h): channels and ids of rdma_cm, as the drop-in
// librdmacm (drivers/rdmacm) asks for them. Every handle is checked to belong to the session.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "cm/cma.h"
#include "daemon/cm_service.h"

namespace uroce::daemon {

namespace {

constexpr size_t kMaxChannelsPerSession = 64;
constexpr size_t kMaxIdsPerSession = 4096;
constexpr uint8_t kQptRc = 2, kQptUd = 4;  // enum ibv_qp_type

bool is_zero(const uint8_t *p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

uint64_t port_key(uint16_t ps, uint16_t port) {
  return uint64_t{ps} << 16 | port;
}

bool ip_ps(uint16_t ps) {  // rdma_cm's IP header leads the private data of all but RDMA_PS_IB
  return ps != static_cast<uint16_t>(cm::PortSpace::kIb);
}

}  // namespace

void CmService::on_message(ctl::Server &srv, const ctl::ClientInfo &ci, ctl::Message &m) {
  alignas(8) uint8_t rep[sizeof(ctl::CmEventReply)];
  size_t len = 0;
  int rc;
  try {
    rc = handle(ci.id, m, rep, &len);
  } catch (const std::bad_alloc &) {
    rc = -ENOMEM;
  }
  srv.reply(ci.id, m.hdr, rc, rc == 0 ? rep : nullptr, rc == 0 ? len : 0);
}

void CmService::on_disconnect(ctl::Server &, const ctl::ClientInfo &ci, ctl::CtlError) {
  close_session(ci.id);
}

void CmService::close_session(uint64_t sess) {
  std::vector<uint32_t> mine;
  for (auto &[h, id] : ids_)
    if (id->session == sess) mine.push_back(h);
  for (uint32_t h : mine)
    destroy_id(*ids_[h]);
  for (auto it = channels_.begin(); it != channels_.end();)
    it = it->second->session == sess ? channels_.erase(it) : std::next(it);
}

int CmService::handle(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *len) {
  switch (m.hdr.type) {
    case ctl::kCmCreateChannel:
      return do_create_channel(sess, m, rep, len);
    case ctl::kCmCreateId:
      return do_create_id(sess, m, rep, len);
    case ctl::kCmBind:
      return do_bind(sess, m, rep, len);
    case ctl::kCmResolveAddr:
      return do_resolve_addr(sess, m, rep, len);
    case ctl::kCmResolveRoute:
      return do_resolve_route(sess, m);
    case ctl::kCmListen:
      return do_listen(sess, m);
    case ctl::kCmConnect:
      return do_connect(sess, m);
    case ctl::kCmAccept:
      return do_accept(sess, m);
    case ctl::kCmReject:
      return do_reject(sess, m);
    case ctl::kCmEstablish:
      return do_establish(sess, m);
    case ctl::kCmDisconnect:
      return do_disconnect(sess, m);
    case ctl::kCmDestroyId:
      return do_destroy_id(sess, m);
    case ctl::kCmGetEvent:
      return do_get_event(sess, m, rep, len);
    case ctl::kCmMigrateId:
      return do_migrate_id(sess, m);
    default:
      return -EOPNOTSUPP;
  }
}

CmService::Id *CmService::id_of(uint64_t sess, uint32_t handle) {
  const auto it = ids_.find(handle);
  if (it == ids_.end() || it->second->session != sess) return nullptr;
  return it->second.get();
}

int CmService::do_create_channel(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *len) {
  if (m.nfds != 1) return -EINVAL;
  const int fd = m.fds[0].get();
  int domain = 0, type = 0;
  socklen_t sl = sizeof domain;
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &sl) != 0 || domain != AF_UNIX) return -EINVAL;
  sl = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &sl) != 0 || type != SOCK_DGRAM) return -EINVAL;
  size_t n = 0;
  for (auto &[h, c] : channels_)
    n += c->session == sess;
  if (n >= kMaxChannelsPerSession) return -EMFILE;
  auto c = std::make_unique<Channel>();
  c->handle = next_handle_++;
  c->session = sess;
  c->wake = std::move(m.fds[0]);
  const ctl::HandlePayload h{c->handle, 0};
  channels_[c->handle] = std::move(c);
  std::memcpy(rep, &h, sizeof h);
  *len = sizeof h;
  return 0;
}

int CmService::do_create_id(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *len) {
  ctl::CmCreateIdPayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  const auto ch = channels_.find(p.channel);
  if (ch == channels_.end() || ch->second->session != sess) return -EINVAL;
  if (p.port_space != static_cast<uint16_t>(cm::PortSpace::kTcp) &&
      p.port_space != static_cast<uint16_t>(cm::PortSpace::kUdp) &&
      p.port_space != static_cast<uint16_t>(cm::PortSpace::kIpoib) &&
      p.port_space != static_cast<uint16_t>(cm::PortSpace::kIb))
    return -EPROTONOSUPPORT;
  if (p.qp_type != kQptRc && p.qp_type != kQptUd) return -EINVAL;
  size_t n = 0;
  for (auto &[h, id] : ids_)
    n += id->session == sess;
  if (n >= kMaxIdsPerSession) return -ENOMEM;
  auto id = std::make_unique<Id>();
  id->handle = next_handle_++;
  id->session = sess;
  id->channel = p.channel;
  id->ps = p.port_space;
  id->qp_type = p.qp_type;
  const ctl::HandlePayload h{id->handle, 0};
  ids_[id->handle] = std::move(id);
  std::memcpy(rep, &h, sizeof h);
  *len = sizeof h;
  return 0;
}

int CmService::bind_id(Id &id, const wire::Gid &gid, bool v6, uint16_t port) {
  if (id.bound) return -EINVAL;
  int gi = -1;
  if (is_zero(gid.raw, 16)) {
    // Any address of the family: IPv4, or the port's first global IPv6 address, else its
    // link-local one (a port without a configured IPv6 address still has fe80::).
    wire::Gid probe, g;
    if (!v6)
      probe = wire::Gid::from_ipv4(1, 1, 1, 1);
    else
      probe.raw[0] = 0x20;
    if (!pick_source(probe, &g)) {
      probe.raw[0] = 0xfe;
      probe.raw[1] = 0x80;
      if (!v6 || !pick_source(probe, &g)) return -EADDRNOTAVAIL;
    }
    gi = local_gid_index(g);
  } else {
    gi = local_gid_index(gid);
  }
  if (gi < 0) return -EADDRNOTAVAIL;
  if (port == 0) {
    for (int i = 0; i < 1000 && port == 0; ++i) {
      rng_ = rng_ * 6364136223846793005ull + 1442695040888963407ull;
      const auto p = static_cast<uint16_t>(32768 + (rng_ >> 33) % 28232);
      if (ports_.count(port_key(id.ps, p)) == 0) port = p;
    }
    if (port == 0) return -EADDRINUSE;
  } else if (ports_.count(port_key(id.ps, port)) != 0) {
    return -EADDRINUSE;
  }
  ports_[port_key(id.ps, port)] = id.handle;
  id.any = is_zero(gid.raw, 16);
  id.local = port_.gid(static_cast<size_t>(gi));
  id.gid_index = static_cast<uint16_t>(gi);
  id.local_port = port;
  id.bound = true;
  return 0;
}

static void addr_reply(const CmService::Id &id, uint8_t *rep, size_t *len) {
  ctl::CmAddrReply a{};
  std::memcpy(a.gid, id.local.raw, 16);
  a.port = id.local_port;
  a.gid_index = id.gid_index;
  std::memcpy(rep, &a, sizeof a);
  *len = sizeof a;
}

int CmService::do_bind(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *len) {
  ctl::CmAddrPayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  Id *id = id_of(sess, p.id);
  if (id == nullptr) return -EINVAL;
  if (const int rc = bind_id(*id, wire::Gid::from_bytes(p.gid), p.v6 != 0, p.port)) return rc;
  addr_reply(*id, rep, len);
  return 0;
}

int CmService::do_resolve_addr(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *len) {
  ctl::CmResolvePayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  Id *id = id_of(sess, p.id);
  if (id == nullptr || id->listening || id->comm_id != 0) return -EINVAL;
  const wire::Gid dst = wire::Gid::from_bytes(p.dst_gid);
  if (!id->bound) {
    // No source address: the port's first of the destination's kind, as a route would give
    // (a link-local destination gets fe80::, a global one a global address).
    wire::Gid src = wire::Gid::from_bytes(p.src_gid);
    if (is_zero(src.raw, 16) && !pick_source(dst, &src)) return -EADDRNOTAVAIL;
    if (const int rc = bind_id(*id, src, !dst.is_v4mapped(), 0)) return rc;
  }
  if (id->local.is_v4mapped() != dst.is_v4mapped()) return -EINVAL;
  id->peer = dst;
  id->peer_port = p.dst_port;
  const uint32_t h = id->handle;
  uint8_t mac[6];
  // Runs the poll loop while it waits (bounded): `id` may go meanwhile only through this
  // session's own messages, which wait for this reply.
  const int rc = port_.resolve(dst, mac);
  id = id_of(sess, h);
  if (id == nullptr) return -EINVAL;
  if (rc != 0) {
    queue_event(*id, ctl::kEvAddrError, -EHOSTUNREACH);
  } else {
    std::array<uint8_t, 6> a;
    std::memcpy(a.data(), mac, 6);
    std::array<uint8_t, 16> k;
    std::memcpy(k.data(), dst.raw, 16);
    macs_[k] = a;
    id->resolved = true;
    queue_event(*id, ctl::kEvAddrResolved, 0);
  }
  addr_reply(*id, rep, len);
  return 0;
}

int CmService::do_resolve_route(uint64_t sess, ctl::Message &m) {
  ctl::HandlePayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  Id *id = id_of(sess, p.handle);
  if (id == nullptr || !id->resolved) return -EINVAL;
  queue_event(*id, ctl::kEvRouteResolved, 0);
  return 0;
}

int CmService::do_listen(uint64_t sess, ctl::Message &m) {
  ctl::HandlePayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  Id *id = id_of(sess, p.handle);
  if (id == nullptr || !id->bound || id->comm_id != 0 || id->resolved) return -EINVAL;
  if (id->listening) return 0;
  const int rc =
      cm_.listen(cm::service_id(static_cast<cm::PortSpace>(id->ps), id->local_port), id->handle);
  if (rc != 0) return -rc;
  id->listening = true;
  return 0;
}

int CmService::do_connect(uint64_t sess, ctl::Message &m) {
  ctl::CmConnPayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  Id *id = id_of(sess, p.id);
  if (id == nullptr || !id->resolved || id->listening || id->comm_id != 0 || id->listen_for != 0)
    return -EINVAL;
  const size_t hdr = ip_ps(id->ps) ? cm::kCmaHdrSize : 0;
  auto write_hdr = [&](uint8_t *priv) {
    if (hdr == 0) return;
    cm::write_cma_hdr(cm::CmaHdr::of(id->local, id->local_port, id->peer), priv);
  };
  uint32_t comm = 0;
  if (id->qp_type == kQptUd) {  // SIDR: the peer's QPN and Q_Key for a service id
    if (p.private_len > cm::kSidrReqPrivate - hdr) return -EINVAL;
    cm::SidrReq s;
    s.service_id = cm::service_id(static_cast<cm::PortSpace>(id->ps), id->peer_port);
    write_hdr(s.private_data.data());
    std::memcpy(s.private_data.data() + hdr, p.private_data, p.private_len);
    const int rc = cm_.sidr_query(s, id->peer, clock_(), &comm);
    if (rc != 0) return -rc;
    id->comm_id = comm;
    by_comm_[comm] = id->handle;
    return 0;
  }
  if (p.private_len > cm::kReqPrivate - hdr) return -EINVAL;
  if (p.path_mtu < 1 || p.path_mtu > 5) return -EINVAL;
  cm::Req q;
  q.service_id = cm::service_id(static_cast<cm::PortSpace>(id->ps), id->peer_port);
  q.local_qpn = p.qpn & 0xffffff;
  q.starting_psn = p.psn & 0xffffff;
  q.responder_resources = p.responder_resources;
  q.initiator_depth = p.initiator_depth;
  q.retry_count = p.retry_count & 7;
  q.rnr_retry_count = p.rnr_retry_count & 7;
  q.srq = p.srq != 0;
  q.path_mtu = p.path_mtu;
  q.primary.local_gid = id->local;
  q.primary.remote_gid = id->peer;
  q.primary.hop_limit = wire::kRoceHopLimit;
  q.primary.traffic_class = static_cast<uint8_t>(port_.dscp() << 2);
  q.primary.local_ack_timeout = kReqLocalAckTimeout;
  write_hdr(q.private_data.data());
  std::memcpy(q.private_data.data() + hdr, p.private_data, p.private_len);
  const int rc = cm_.connect(q, id->peer, clock_(), &comm);
  if (rc != 0) return -rc;
  id->comm_id = comm;
  id->disc_reported = false;
  by_comm_[comm] = id->handle;
  return 0;
}

int CmService::do_accept(uint64_t sess, ctl::Message &m) {
  ctl::CmConnPayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  Id *id = id_of(sess, p.id);
  if (id == nullptr || id->comm_id == 0 || id->listen_for == 0) return -EINVAL;
  if (id->qp_type == kQptUd) return sidr_answer(*id, cm::kSidrOk, p);
  if (p.private_len > cm::kRepPrivate) return -EINVAL;
  cm::Rep r;
  r.local_qpn = p.qpn & 0xffffff;
  r.starting_psn = p.psn & 0xffffff;
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.target_ack_delay = 15;
  r.rnr_retry_count = p.rnr_retry_count & 7;
  r.srq = p.srq != 0;
  std::memcpy(r.private_data.data(), p.private_data, p.private_len);
  const int rc = cm_.accept(id->comm_id, r, clock_());
  return rc == 0 ? 0 : -rc;
}

int CmService::sidr_answer(Id &id, uint8_t status, const ctl::CmConnPayload &p) {
  if (p.private_len > cm::kSidrRepPrivate) return -EINVAL;
  cm::SidrRep r;
  r.status = status;
  r.qpn = status == cm::kSidrOk ? p.qpn & 0xffffff : 0;
  r.qkey = status == cm::kSidrOk ? p.qkey : 0;
  r.service_id = cm::service_id(static_cast<cm::PortSpace>(id.ps), id.local_port);
  std::memcpy(r.private_data.data(), p.private_data, p.private_len);
  const int rc = cm_.sidr_reply(id.comm_id, r);
  if (rc != 0) return -rc;
  by_comm_.erase(id.comm_id);  // a SIDR exchange ends with its answer
  id.comm_id = 0;
  return 0;
}

int CmService::do_reject(uint64_t sess, ctl::Message &m) {
  ctl::CmConnPayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  Id *id = id_of(sess, p.id);
  if (id == nullptr || id->comm_id == 0) return -EINVAL;
  if (id->qp_type == kQptUd && id->listen_for != 0) return sidr_answer(*id, cm::kSidrRejected, p);
  if (p.private_len > cm::kRejPrivate) return -EINVAL;
  const int rc = cm_.reject(id->comm_id, cm::kRejConsumerDefined, p.private_data, p.private_len);
  if (rc != 0) return -rc;
  by_comm_.erase(id->comm_id);
  id->comm_id = 0;
  return 0;
}

int CmService::do_establish(uint64_t sess, ctl::Message &m) {
  ctl::HandlePayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  Id *id = id_of(sess, p.handle);
  if (id == nullptr || id->comm_id == 0) return -EINVAL;
  const int rc = cm_.rtu(id->comm_id, nullptr, 0, clock_());
  return rc == 0 ? 0 : -rc;
}

int CmService::do_disconnect(uint64_t sess, ctl::Message &m) {
  ctl::HandlePayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  Id *id = id_of(sess, p.handle);
  if (id == nullptr || id->comm_id == 0) return -EINVAL;
  cm::State s;
  if (cm_.state_of(id->comm_id, &s) && (s == cm::State::kDreqSent || s == cm::State::kTimewait))
    return 0;  // already on its way down
  const int rc = cm_.disconnect(id->comm_id, clock_());
  return rc == 0 ? 0 : -rc;
}

void CmService::destroy_id(Id &id) {
  if (id.comm_id != 0) {
    cm_.destroy(id.comm_id);
    by_comm_.erase(id.comm_id);
  }
  if (id.listening) cm_.unlisten(id.handle);
  if (id.bound && id.listen_for == 0) {
    const auto it = ports_.find(port_key(id.ps, id.local_port));
    if (it != ports_.end() && it->second == id.handle) ports_.erase(it);
  }
  ids_.erase(id.handle);
}

int CmService::do_destroy_id(uint64_t sess, ctl::Message &m) {
  ctl::HandlePayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  Id *id = id_of(sess, p.handle);
  if (id == nullptr) return -EINVAL;
  destroy_id(*id);
  return 0;
}

int CmService::do_get_event(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *len) {
  ctl::HandlePayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  const auto ch = channels_.find(p.handle);
  if (ch == channels_.end() || ch->second->session != sess) return -EINVAL;
  auto &q = ch->second->q;
  while (!q.empty()) {
    ctl::CmEventReply r = q.front();
    q.pop_front();
    if (ids_.count(r.id) == 0) continue;  // destroyed since
    r.pending = static_cast<uint16_t>(std::min<size_t>(q.size(), 0xffff));
    std::memcpy(rep, &r, sizeof r);
    *len = sizeof r;
    return 0;
  }
  return -EAGAIN;
}

int CmService::do_migrate_id(uint64_t sess, ctl::Message &m) {
  ctl::CmMigratePayload p{};
  if (!m.payload_as(&p)) return -EINVAL;
  Id *id = id_of(sess, p.id);
  const auto to = channels_.find(p.channel);
  if (id == nullptr || to == channels_.end() || to->second->session != sess) return -EINVAL;
  const auto from = channels_.find(id->channel);
  id->channel = p.channel;
  if (from == channels_.end() || from == to) return 0;
  // The id's queued events go along in order, and so do its listener's CONNECT_REQUESTs with
  // their new ids (as the kernel's ucma_migrate_id): those ids report to the new channel too.
  auto &q = from->second->q;
  size_t moved = 0;
  for (auto it = q.begin(); it != q.end();) {
    const bool req = it->event == ctl::kEvConnectRequest && it->listen_id == p.id;
    if (it->id != p.id && !req) {
      ++it;
      continue;
    }
    if (req) {
      const auto c = ids_.find(it->id);
      if (c != ids_.end()) c->second->channel = p.channel;
    }
    if (to->second->q.size() < Channel::kMaxQueued) {
      to->second->q.push_back(*it);
      ++moved;
    } else {
      ++gc_.events_lost;
    }
    it = q.erase(it);
  }
  if (moved != 0) {
    const char b = 1;
    (void)::send(to->second->wake.get(), &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  return 0;
}

}  // namespace uroce::daemon
