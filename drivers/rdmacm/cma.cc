// SPDX-License-Identifier: BSD-3-Clause
// Channels, ids, addresses and events of the drop-in librdmacm (rdmacm.h).
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "rdmacm.h"

namespace uroce::rdmacm {

namespace {

constexpr const char *kDefaultSocket = "/run/uroce/uroced.sock";
constexpr int kTimeoutMs = 30000;  // a daemon resolving an address may take a while

std::mutex g_dev_mu;
bool g_dev_init = false;
std::vector<Dev *> &g_devs = *new std::vector<Dev *>;  // never freed: apps may outlive exit
std::mutex g_ids_mu;
std::map<std::pair<Dev *, uint32_t>, Id *> &g_ids = *new std::map<std::pair<Dev *, uint32_t>, Id *>;

bool open_dev(Dev *d) {
  if (ctl::Client::connect(d->sock.c_str(), "rdmacm", 5000, &d->cli) != ctl::CtlError::kOk)
    return false;
  for (const ctl::VerbsSpec &s : ctl::kVerbsSpecs)
    d->cli.types().add(
        {static_cast<uint16_t>(s.type | ctl::kReplyBit), s.rep_min, s.rep_max, s.rep_fds});
  for (const ctl::CmSpec &s : ctl::kCmSpecs)
    d->cli.types().add(
        {static_cast<uint16_t>(s.type | ctl::kReplyBit), s.rep_min, s.rep_max, s.rep_fds});
  ctl::DeviceAttrPayload a{};
  ctl::Message rep;
  if (d->cli.call(ctl::kQueryDevice, nullptr, 0, nullptr, 0, &rep, 5000) != ctl::CtlError::kOk ||
      rep.hdr.status != 0 || !rep.payload_as(&a))
    return false;
  char name[sizeof a.ibdev_name + 1] = {};
  std::memcpy(name, a.ibdev_name, sizeof a.ibdev_name);
  // The verbs shim's device for the same daemon: same name and node GUID.
  int n = 0;
  ibv_device **list = ibv_get_device_list(&n);
  if (list == nullptr) return false;
  for (int i = 0; i < n && d->ctx == nullptr; ++i)
    if (std::strcmp(ibv_get_device_name(list[i]), name) == 0 &&
        ibv_get_device_guid(list[i]) == a.node_guid)
      d->ctx = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  if (d->ctx == nullptr) return false;
  ibv_query_device(d->ctx, &d->attr);
  ibv_port_attr pa{};
  if (ibv_query_port(d->ctx, 1, &pa) == 0) d->active_mtu = static_cast<uint8_t>(pa.active_mtu);
  return true;
}

// sockaddr <-> 16-byte GID (IPv4-mapped for AF_INET), a port in host order and, for AF_INET6,
// the scope id (a link-local address's only).
bool gid_of(const sockaddr *sa, uint8_t gid[16], uint16_t *port, bool *v6,
            uint32_t *scope = nullptr) {
  std::memset(gid, 0, 16);
  if (sa == nullptr) return false;
  if (sa->sa_family == AF_INET) {
    const auto *in = reinterpret_cast<const sockaddr_in *>(sa);
    if (in->sin_addr.s_addr != 0) {  // INADDR_ANY stays all zero: any address
      gid[10] = gid[11] = 0xff;
      std::memcpy(gid + 12, &in->sin_addr, 4);
    }
    *port = ntohs(in->sin_port);
    *v6 = false;
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const auto *in6 = reinterpret_cast<const sockaddr_in6 *>(sa);
    std::memcpy(gid, &in6->sin6_addr, 16);
    *port = ntohs(in6->sin6_port);
    *v6 = true;
    if (scope != nullptr) *scope = in6->sin6_scope_id;
    return true;
  }
  return false;
}

void sa_of(const uint8_t gid[16], uint16_t port, sockaddr_storage *out, uint32_t scope = 0) {
  std::memset(out, 0, sizeof *out);
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(gid, kMapped, 12) == 0) {
    auto *in = reinterpret_cast<sockaddr_in *>(out);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    std::memcpy(&in->sin_addr, gid + 12, 4);
  } else {
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(out);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    std::memcpy(&in6->sin6_addr, gid, 16);
    if (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80) in6->sin6_scope_id = scope;
  }
}

std::mutex g_chan_mu;

// Registers `c` with `d` (once): its handle there, 0 on failure (errno set).
uint32_t chan_handle(Chan *c, Dev *d) {
  std::lock_guard<std::mutex> g(g_chan_mu);
  const auto it = c->handles.find(d);
  if (it != c->handles.end()) return it->second;
  ctl::HandlePayload h{};
  const int rc = d->call(ctl::kCmCreateChannel, nullptr, 0, &c->wake, 1, &h, sizeof h);
  if (rc != 0) {
    errno = -rc;
    return 0;
  }
  c->handles[d] = h.handle;
  return h.handle;
}

// Creates the id in daemon `d`. 0 or errno.
int materialize(Id *id, Dev *d) {
  const uint32_t ch = chan_handle(id->chan, d);
  if (ch == 0) return errno;
  ctl::CmCreateIdPayload p{};
  p.channel = ch;
  p.port_space = static_cast<uint16_t>(id->id.ps);
  p.qp_type = static_cast<uint8_t>(id->id.qp_type);
  ctl::HandlePayload h{};
  if (const int rc = d->call(ctl::kCmCreateId, &p, sizeof p, nullptr, 0, &h, sizeof h)) return -rc;
  id->dev = d;
  id->handle = h.handle;
  std::lock_guard<std::mutex> g(g_ids_mu);
  g_ids[{d, h.handle}] = id;
  return 0;
}

void unmaterialize(Id *id) {
  if (id->handle == 0) return;
  const ctl::HandlePayload h{id->handle, 0};
  id->dev->call(ctl::kCmDestroyId, &h, sizeof h, nullptr, 0, nullptr, 0);
  {
    std::lock_guard<std::mutex> g(g_ids_mu);
    g_ids.erase({id->dev, id->handle});
  }
  id->handle = 0;
  id->dev = nullptr;
}

// `any`: the app bound a wildcard address (0.0.0.0 or ::, family `v6`): its local address
// stays that (with the port given), as the kernel's; the GID the daemon chose is the QP's.
void set_bound(Id *id, const ctl::CmAddrReply &a, bool any = false, bool v6 = false) {
  id->id.verbs = id->dev->ctx;
  id->id.port_num = 1;
  id->gid_index = a.gid_index;
  sockaddr_storage &src = id->id.route.addr.src_storage;
  sa_of(a.gid, a.port, &src, id->scope);
  if (!any) return;
  std::memset(&src, 0, sizeof src);
  if (v6) {
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&src);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(a.port);
  } else {
    auto *in = reinterpret_cast<sockaddr_in *>(&src);
    in->sin_family = AF_INET;
    in->sin_port = htons(a.port);
  }
}

Id *lookup(Dev *d, uint32_t h) {
  std::lock_guard<std::mutex> g(g_ids_mu);
  const auto it = g_ids.find({d, h});
  return it == g_ids.end() ? nullptr : it->second;
}

// UD ids (SIDR): the event's rdma_ud_param, with an address vector to the peer.
void copy_ud(const Id *id, const ctl::CmEventReply &r, Event *e) {
  std::memcpy(e->priv, r.private_data, r.private_len);
  rdma_ud_param &u = e->ev.param.ud;
  u.private_data = r.private_len != 0 ? e->priv : nullptr;
  u.private_data_len = r.private_len;
  u.ah_attr.is_global = 1;
  std::memcpy(u.ah_attr.grh.dgid.raw, r.peer_gid, 16);
  u.ah_attr.grh.sgid_index = static_cast<uint8_t>(r.gid_index);
  u.ah_attr.grh.hop_limit = 64;
  u.ah_attr.grh.traffic_class = id->tos;
  u.ah_attr.port_num = 1;
  u.qp_num = r.qpn;
  u.qkey = r.qkey;
}

void copy_conn(const ctl::CmEventReply &r, Event *e) {
  std::memcpy(e->priv, r.private_data, r.private_len);
  rdma_conn_param &c = e->ev.param.conn;
  c.private_data = r.private_len != 0 ? e->priv : nullptr;
  c.private_data_len = r.private_len;
  c.responder_resources = r.responder_resources;
  c.initiator_depth = r.initiator_depth;
  c.retry_count = r.retry_count;
  c.rnr_retry_count = r.rnr_retry_count;
  c.srq = r.srq;
  c.qp_num = r.qpn;
}

// One daemon event as the app's event; nullptr when it is for an id that is gone.
Event *convert(Dev *d, const ctl::CmEventReply &r) {
  auto *e = new (std::nothrow) Event;
  if (e == nullptr) return nullptr;
  e->ev.event = static_cast<rdma_cm_event_type>(r.event);
  e->ev.status = r.status;
  if (r.event == ctl::kEvConnectRequest) {
    Id *lis = lookup(d, r.listen_id);
    auto *c = lis != nullptr ? new (std::nothrow) Id : nullptr;
    if (c == nullptr) {
      const ctl::HandlePayload h{r.id, 0};
      d->call(ctl::kCmDestroyId, &h, sizeof h, nullptr, 0, nullptr, 0);
      delete e;
      return nullptr;
    }
    c->dev = d;
    c->handle = r.id;
    c->chan = lis->chan;
    c->id.verbs = d->ctx;
    c->id.channel = lis->id.channel;
    c->id.context = lis->id.context;
    c->id.ps = lis->id.ps;
    c->id.qp_type = lis->id.qp_type;
    c->id.port_num = 1;
    c->tos = lis->tos;
    c->tos_set = lis->tos_set;
    sa_of(r.local_gid, r.local_port, &c->id.route.addr.src_storage);
    sa_of(r.peer_gid, r.peer_port, &c->id.route.addr.dst_storage);
    std::memcpy(c->peer_gid, r.peer_gid, 16);
    c->gid_index = r.gid_index;
    c->peer_qpn = r.qpn;
    c->peer_psn = r.psn;
    c->path_mtu = clamp(r.path_mtu, d->active_mtu);
    c->resp_res = clamp(r.initiator_depth, d->attr.max_qp_rd_atom);
    c->init_depth = clamp(r.responder_resources, d->attr.max_qp_init_rd_atom);
    c->retry = r.retry_count;
    c->rnr_retry = r.rnr_retry_count;
    if (r.local_ack_timeout != 0) c->ack_timeout = r.local_ack_timeout;
    {
      std::lock_guard<std::mutex> g(g_ids_mu);
      g_ids[{d, r.id}] = c;
    }
    e->ev.id = &c->id;
    e->ev.listen_id = &lis->id;
    if (c->id.qp_type == IBV_QPT_UD)
      copy_ud(c, r, e);
    else
      copy_conn(r, e);
    return e;
  }
  Id *id = lookup(d, r.id);
  if (id == nullptr) {
    delete e;
    return nullptr;
  }
  e->ev.id = &id->id;
  if (id->id.qp_type == IBV_QPT_UD) {
    copy_ud(id, r, e);
    return e;
  }
  copy_conn(r, e);
  if (r.event == ctl::kEvConnectResponse) {
    id->peer_qpn = r.qpn;
    id->peer_psn = r.psn;
    // The REP's initiator depth bounds our responder resources, its responder resources our
    // initiator depth (IBTA 12.7.30, as the kernel's cm_rep_handler).
    id->resp_res = clamp(r.initiator_depth, id->resp_res);
    id->init_depth = clamp(r.responder_resources, id->init_depth);
    id->rnr_retry = r.rnr_retry_count;
    if (id->id.qp != nullptr) {
      // As librdmacm: the QP to RTR and RTS, the RTU, and the app sees ESTABLISHED.
      int rc = modify_to(id, IBV_QPS_RTR);
      if (rc == 0) rc = modify_to(id, IBV_QPS_RTS);
      const ctl::HandlePayload h{id->handle, 0};
      if (rc == 0) rc = -d->call(ctl::kCmEstablish, &h, sizeof h, nullptr, 0, nullptr, 0);
      if (rc == 0) {
        e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
      } else {
        ctl::CmConnPayload p{};
        p.id = id->handle;
        d->call(ctl::kCmReject, &p, sizeof p, nullptr, 0, nullptr, 0);
        e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
        e->ev.status = -rc;
      }
    }
  }
  return e;
}

}  // namespace

int Dev::call(uint16_t type, const void *p, size_t len, const int *fds, size_t nfds, void *rep,
              size_t rep_len) {
  std::lock_guard<std::mutex> g(mu);
  ctl::Message m;
  if (cli.call(type, p, len, fds, nfds, &m, kTimeoutMs) != ctl::CtlError::kOk) return -EIO;
  if (m.hdr.status != 0) return m.hdr.status;
  if (rep != nullptr) {
    if (m.payload_len != rep_len) return -EPROTO;
    std::memcpy(rep, m.payload, rep_len);
  }
  return 0;
}

std::vector<Dev *> &devices() {
  std::lock_guard<std::mutex> g(g_dev_mu);
  if (g_dev_init) return g_devs;
  g_dev_init = true;
  const char *env = std::getenv("UROCE_SOCKET");
  const std::string s = env != nullptr && *env != '\0' ? env : kDefaultSocket;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t c = s.find(':', pos);
    const std::string one = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    if (!one.empty()) {
      auto *d = new Dev;
      d->sock = one;
      if (open_dev(d)) {
        g_devs.push_back(d);
      } else {
        if (d->ctx != nullptr) ibv_close_device(d->ctx);
        delete d;
      }
    }
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return g_devs;
}

}  // namespace uroce::rdmacm

using namespace uroce;
using namespace uroce::rdmacm;

UROCE_EXPORT rdma_event_channel *rdma_create_event_channel(void) {
  if (devices().empty()) {
    errno = ENODEV;
    return nullptr;
  }
  auto *c = new (std::nothrow) Chan;
  if (c == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) {
    delete c;
    return nullptr;
  }
  c->ch.fd = sv[0];
  c->wake = sv[1];
  return &c->ch;
}

UROCE_EXPORT void rdma_destroy_event_channel(rdma_event_channel *channel) {
  if (channel == nullptr) return;
  auto *c = reinterpret_cast<Chan *>(channel);
  close(c->ch.fd);
  close(c->wake);
  delete c;
}

UROCE_EXPORT int rdma_create_id(rdma_event_channel *channel, rdma_cm_id **out, void *context,
                                rdma_port_space ps) {
  if (out == nullptr) return fail(EINVAL);
  ibv_qp_type t;
  switch (ps) {
    case RDMA_PS_TCP:
    case RDMA_PS_IB:
      t = IBV_QPT_RC;
      break;
    case RDMA_PS_UDP:
    case RDMA_PS_IPOIB:  // udaddy's default: UD with SIDR, like RDMA_PS_UDP
      t = IBV_QPT_UD;
      break;
    default:
      return fail(EPROTONOSUPPORT);
  }
  const bool sync = channel == nullptr;
  if (sync) {  // a synchronous id: a channel of its own, its calls wait (sync.cc)
    channel = rdma_create_event_channel();
    if (channel == nullptr) return -1;
  }
  auto *id = new (std::nothrow) Id;
  if (id == nullptr) {
    if (sync) rdma_destroy_event_channel(channel);
    return fail(ENOMEM);
  }
  id->chan = reinterpret_cast<Chan *>(channel);
  id->sync = id->own_chan = sync;
  id->id.channel = channel;
  id->id.context = context;
  id->id.ps = ps;
  id->id.qp_type = t;
  *out = &id->id;
  return 0;
}

UROCE_EXPORT int rdma_destroy_id(rdma_cm_id *cid) {
  if (cid == nullptr) return fail(EINVAL);
  Id *id = to_id(cid);
  if (cid->event != nullptr) rdma_ack_cm_event(cid->event);  // rdma_get_request's
  unmaterialize(id);
  drop_pending(id->chan, id);
  if (id->own_chan) rdma_destroy_event_channel(cid->channel);
  delete id;
  return 0;
}

// As librdmacm: the id's later events, and those queued for it that the app has not fetched,
// come from `channel`; NULL makes the id synchronous with a channel of its own. A channel the
// id owned (a synchronous id's) is destroyed. Unlike librdmacm, this does not wait for the
// app to ack the events of the id it already fetched (nothing of them refers to the channel).
UROCE_EXPORT int rdma_migrate_id(rdma_cm_id *cid, rdma_event_channel *channel) {
  Id *id = to_id(cid);
  if (id == nullptr) return fail(EINVAL);
  const bool sync = channel == nullptr;
  if (sync) {
    channel = rdma_create_event_channel();
    if (channel == nullptr) return -1;
  }
  auto *to = reinterpret_cast<Chan *>(channel);
  Chan *from = id->chan;
  if (to == from) return 0;
  if (id->handle != 0) {
    ctl::CmMigratePayload p{id->handle, chan_handle(to, id->dev)};
    int rc = p.channel == 0 ? -errno : 0;
    if (rc == 0) rc = id->dev->call(ctl::kCmMigrateId, &p, sizeof p, nullptr, 0, nullptr, 0);
    if (rc != 0) {
      if (sync) rdma_destroy_event_channel(channel);
      return fail(-rc);
    }
  }
  move_pending(from, to, id);
  id->chan = to;
  cid->channel = channel;
  if (id->own_chan) rdma_destroy_event_channel(&from->ch);
  id->sync = id->own_chan = sync;
  return 0;
}

UROCE_EXPORT int rdma_bind_addr(rdma_cm_id *cid, sockaddr *addr) {
  Id *id = to_id(cid);
  ctl::CmAddrPayload p{};
  bool v6 = false;
  uint32_t scope = 0;
  if (id == nullptr || id->handle != 0 || !gid_of(addr, p.gid, &p.port, &v6, &scope))
    return fail(EINVAL);
  p.v6 = v6;
  static const uint8_t kZero[16] = {};
  const bool any = std::memcmp(p.gid, kZero, 16) == 0;
  id->scope = scope;
  int err = ENODEV;
  for (Dev *d : devices()) {
    if ((err = materialize(id, d)) != 0) continue;
    p.id = id->handle;
    ctl::CmAddrReply a{};
    const int rc = d->call(ctl::kCmBind, &p, sizeof p, nullptr, 0, &a, sizeof a);
    if (rc == 0) {
      set_bound(id, a, any, v6);
      return 0;
    }
    err = -rc;
    unmaterialize(id);
  }
  return fail(err);
}

UROCE_EXPORT int rdma_resolve_addr(rdma_cm_id *cid, sockaddr *src, sockaddr *dst, int) {
  Id *id = to_id(cid);
  ctl::CmResolvePayload p{};
  bool v6 = false, sv6 = false;
  uint16_t sport = 0;
  uint32_t dscope = 0, sscope = 0;
  if (id == nullptr || !gid_of(dst, p.dst_gid, &p.dst_port, &v6, &dscope)) return fail(EINVAL);
  if (src != nullptr && !gid_of(src, p.src_gid, &sport, &sv6, &sscope)) return fail(EINVAL);
  if (id->handle == 0) id->scope = sscope != 0 ? sscope : dscope;
  std::vector<Dev *> cands;
  if (id->handle != 0)
    cands.push_back(id->dev);
  else
    cands = devices();
  int err = ENODEV;
  for (Dev *d : cands) {
    const bool fresh = id->handle == 0;
    if (fresh && (err = materialize(id, d)) != 0) continue;
    p.id = id->handle;
    ctl::CmAddrReply a{};
    const int rc = d->call(ctl::kCmResolveAddr, &p, sizeof p, nullptr, 0, &a, sizeof a);
    if (rc == 0) {
      set_bound(id, a);
      std::memcpy(id->peer_gid, p.dst_gid, 16);
      sa_of(p.dst_gid, p.dst_port, &id->id.route.addr.dst_storage, dscope);
      return id->sync ? sync_wait(id, RDMA_CM_EVENT_ADDR_RESOLVED) : 0;
    }
    err = -rc;
    if (fresh) unmaterialize(id);
  }
  return fail(err);
}

UROCE_EXPORT int rdma_resolve_route(rdma_cm_id *cid, int) {
  Id *id = to_id(cid);
  if (id == nullptr || id->handle == 0) return fail(EINVAL);
  const ctl::HandlePayload h{id->handle, 0};
  if (const int rc = id->dev->call(ctl::kCmResolveRoute, &h, sizeof h, nullptr, 0, nullptr, 0))
    return fail(-rc);
  ibv_sa_path_rec &r = id->path;
  std::memset(&r, 0, sizeof r);
  std::memcpy(r.dgid.raw, id->peer_gid, 16);
  ibv_gid sgid{};
  ibv_query_gid(id->dev->ctx, 1, id->gid_index, &sgid);
  r.sgid = sgid;
  r.hop_limit = 64;
  r.traffic_class = id->tos;
  r.pkey = htons(0xffff);
  r.mtu = id->dev->active_mtu;
  r.mtu_selector = 2;
  r.packet_life_time = 18;
  r.reversible = 1;
  r.numb_path = 1;
  id->id.route.path_rec = &id->path;
  id->id.route.num_paths = 1;
  return id->sync ? sync_wait(id, RDMA_CM_EVENT_ROUTE_RESOLVED) : 0;
}

UROCE_EXPORT int rdma_listen(rdma_cm_id *cid, int) {
  Id *id = to_id(cid);
  if (id == nullptr) return fail(EINVAL);
  if (id->handle == 0) {  // not bound: any address, a port of the daemon's choice
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (rdma_bind_addr(cid, reinterpret_cast<sockaddr *>(&any)) != 0) return -1;
  }
  const ctl::HandlePayload h{id->handle, 0};
  if (const int rc = id->dev->call(ctl::kCmListen, &h, sizeof h, nullptr, 0, nullptr, 0))
    return fail(-rc);
  return 0;
}

UROCE_EXPORT int rdma_get_cm_event(rdma_event_channel *channel, rdma_cm_event **out) {
  if (channel == nullptr || out == nullptr) return fail(EINVAL);
  auto *c = reinterpret_cast<Chan *>(channel);
  if (Event *e = pop_pending(c)) {  // taken by a synchronous call, not its own
    *out = &e->ev;
    return 0;
  }
  for (;;) {
    char buf[64];
    while (recv(c->ch.fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
    std::map<Dev *, uint32_t> hs;
    {
      std::lock_guard<std::mutex> g(g_chan_mu);
      hs = c->handles;
    }
    for (auto &[d, h] : hs) {
      for (;;) {
        const ctl::HandlePayload hp{h, 0};
        ctl::CmEventReply r{};
        const int rc = d->call(ctl::kCmGetEvent, &hp, sizeof hp, nullptr, 0, &r, sizeof r);
        if (rc != 0) break;
        if (r.pending != 0) {
          const char b = 1;
          send(c->wake, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);  // keep the fd readable
        }
        if (Event *e = convert(d, r)) {
          *out = &e->ev;
          return 0;
        }
      }
    }
    const int fl = fcntl(c->ch.fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK) != 0) return fail(EAGAIN);
    pollfd pfd{c->ch.fd, POLLIN, 0};
    if (poll(&pfd, 1, -1) < 0 && errno != EINTR) return -1;
  }
}

UROCE_EXPORT int rdma_ack_cm_event(rdma_cm_event *event) {
  if (event == nullptr) return fail(EINVAL);
  delete reinterpret_cast<Event *>(event);
  return 0;
}
