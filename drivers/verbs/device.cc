// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: devices (one per uroced control socket), contexts, queries, async events.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "shim.h"
#include "transport/verbs_types.h"

using namespace uroce;
using namespace uroce::verbs;

namespace {

constexpr const char *kDefaultSocket = "/run/uroce/uroced.sock";

std::mutex g_dev_mu;
// Every device ever listed; never freed (see shim.h). The vector itself is never destroyed
// either, so the devices stay reachable (and valid for ibv_device pointers an app keeps) through
// exit, after static destructors have run.
std::vector<Device *> &g_devices = *new std::vector<Device *>;

const char *prog_name() {
  return program_invocation_short_name ? program_invocation_short_name : "verbs-app";
}

// The daemons to ask: UROCE_SOCKET (colon-separated), or the default socket.
std::vector<std::string> socket_list() {
  std::vector<std::string> out;
  const char *env = std::getenv("UROCE_SOCKET");
  std::string s = env && *env ? env : kDefaultSocket;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t c = s.find(':', pos);
    std::string one = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    if (!one.empty() && one.size() < sizeof(Device::socket)) out.push_back(one);
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return out;
}

Device *device_for(const std::string &sock, const ctl::DeviceAttrPayload &a) {
  char name[IBV_SYSFS_NAME_MAX];
  std::snprintf(name, sizeof name, "%.*s", static_cast<int>(sizeof a.ibdev_name), a.ibdev_name);
  name[sizeof name - 1] = '\0';
  if (name[0] == '\0') std::snprintf(name, sizeof name, "uroce%zu", g_devices.size());
  for (Device *d : g_devices)
    if (sock == d->socket && std::strcmp(d->dev.name, name) == 0 && d->guid == a.node_guid)
      return d;
  auto *d = new (std::nothrow) Device();
  if (d == nullptr) return nullptr;
  std::memset(d, 0, sizeof *d);
  d->index = static_cast<int>(g_devices.size());
  d->dev.node_type = IBV_NODE_CA;
  d->dev.transport_type = IBV_TRANSPORT_IB;  // RoCE devices report IB transport (as rxe)
  std::snprintf(d->dev.name, sizeof d->dev.name, "%s", name);
  std::snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "uverbs%d", d->index);
  // No sysfs: these paths do not exist, so sysfs reads (ibv_read_sysfs_file) fail cleanly.
  std::snprintf(d->dev.dev_path, sizeof d->dev.dev_path, "/sys/class/infiniband_verbs/uroce-%s",
                name);
  std::snprintf(d->dev.ibdev_path, sizeof d->dev.ibdev_path, "/sys/class/infiniband/uroce-%s",
                name);
  std::snprintf(d->socket, sizeof d->socket, "%s", sock.c_str());
  d->guid = a.node_guid;
  d->provider_ops = nullptr;
  g_devices.push_back(d);
  return d;
}

Device *dev_of(ibv_device *d) {
  return reinterpret_cast<Device *>(d);
}

void fill_device_attr(const ctl::DeviceAttrPayload &a, ibv_device_attr *o) {
  std::memset(o, 0, sizeof *o);
  std::snprintf(o->fw_ver, sizeof o->fw_ver, "%.*s", static_cast<int>(sizeof a.fw_ver), a.fw_ver);
  o->node_guid = a.node_guid;
  o->sys_image_guid = a.sys_image_guid;
  o->max_mr_size = a.max_mr_size;
  o->page_size_cap = a.page_size_cap;
  o->vendor_id = a.vendor_id;
  o->vendor_part_id = a.vendor_part_id;
  o->hw_ver = a.hw_ver;
  o->max_qp = static_cast<int>(a.max_qp);
  o->max_qp_wr = static_cast<int>(a.max_qp_wr);
  // What the engine does: RNR NAKs, a system image GUID, memory windows of type 1 and 2B (as
  // rxe; as many as MRs, lib/transport/tables.h). No port events (PORT_ACTIVE_EVENT), no
  // resizing.
  o->device_cap_flags = a.device_cap_flags | IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID |
                        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  o->max_mw = static_cast<int>(a.max_mr);
  o->max_sge = static_cast<int>(a.max_sge);
  o->max_sge_rd = static_cast<int>(a.max_sge);
  o->max_cq = static_cast<int>(a.max_cq);
  o->max_cqe = static_cast<int>(a.max_cqe);
  o->max_mr = static_cast<int>(a.max_mr);
  o->max_pd = static_cast<int>(a.max_pd);
  o->max_qp_rd_atom = static_cast<int>(a.max_qp_rd_atom);
  o->max_res_rd_atom = static_cast<int>(a.max_qp_rd_atom * a.max_qp);
  o->max_qp_init_rd_atom = static_cast<int>(a.max_qp_init_rd_atom);
  o->atomic_cap = static_cast<ibv_atomic_cap>(a.atomic_cap);
  o->max_ah = static_cast<int>(a.max_ah);
  o->max_srq = static_cast<int>(a.max_srq);
  o->max_srq_wr = static_cast<int>(a.max_srq_wr);
  o->max_srq_sge = static_cast<int>(a.max_srq_sge);
  o->max_pkeys = 1;
  o->local_ca_ack_delay = 15;
  o->phys_port_cnt = static_cast<uint8_t>(a.phys_port_cnt);
}

int lock_call(Context *c, auto &&f) {
  std::lock_guard<std::mutex> g(c->ctl_mu);
  return f(*c->cli);
}

}  // namespace

namespace uroce::verbs {

int query_port_op(ibv_context *ctx, uint8_t port, ibv_port_attr *attr, size_t len) noexcept {
  if (attr == nullptr) return EINVAL;
  Context *c = ctx_of(ctx);
  ctl::PortAttrPayload p{};
  const int rc = lock_call(c, [&](client::Context &k) { return k.query_port(port, &p); });
  if (rc) return rc;
  ibv_port_attr a{};
  a.state = static_cast<ibv_port_state>(p.state);
  a.max_mtu = static_cast<ibv_mtu>(p.max_mtu);
  a.active_mtu = static_cast<ibv_mtu>(p.active_mtu);
  a.gid_tbl_len = static_cast<int>(p.gid_tbl_len);
  a.port_cap_flags = IBV_PORT_CM_SUP;  // as rxe: a connection manager may run over it
  a.max_msg_sz = p.max_msg_sz;
  a.pkey_tbl_len = static_cast<uint16_t>(p.pkey_tbl_len);
  a.max_vl_num = 1;
  a.active_width = static_cast<uint8_t>(p.active_width);
  a.active_speed = static_cast<uint8_t>(p.active_speed);
  a.phys_state = static_cast<uint8_t>(p.phys_state);
  a.link_layer = static_cast<uint8_t>(p.link_layer);
  a.flags = IBV_QPF_GRH_REQUIRED;  // RoCE: every address needs a GRH (is_global)
  std::memset(attr, 0, len);
  std::memcpy(attr, &a, len < sizeof a ? len : sizeof a);
  return 0;
}

int query_device_ex_op(ibv_context *ctx, const ibv_query_device_ex_input *in,
                       ibv_device_attr_ex *attr, size_t len) noexcept {
  if (in && in->comp_mask) return EINVAL;
  if (attr == nullptr || len < sizeof(ibv_device_attr)) return EINVAL;
  Context *c = ctx_of(ctx);
  ctl::DeviceAttrPayload d{};
  const int rc = lock_call(c, [&](client::Context &k) { return k.query_device(&d); });
  if (rc) return rc;
  ibv_device_attr_ex x{};
  fill_device_attr(d, &x.orig_attr);
  // The extended fields: no ODP, no TSO, no RSS, no timestamps, no TM. Packet pacing: the
  // per-QP rate limit (IBV_QP_RATE_LIMIT) of RC and UC QPs, in kbit/s.
  x.max_dm_size = 0;
  x.packet_pacing_caps.qp_rate_limit_min = ctl::kRateLimitMinKbps;
  x.packet_pacing_caps.qp_rate_limit_max = ctl::kRateLimitMaxKbps;
  x.packet_pacing_caps.supported_qpts = (1u << IBV_QPT_RC) | (1u << IBV_QPT_UC);
  x.device_cap_flags_ex = x.orig_attr.device_cap_flags;  // the 64-bit copy, as rdma-core fills it
  x.phys_port_cnt_ex = d.phys_port_cnt;
  std::memset(attr, 0, len);
  std::memcpy(attr, &x, len < sizeof x ? len : sizeof x);
  return 0;
}

}  // namespace uroce::verbs

// ---------------------------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------------------------
UV_EXPORT ibv_device **ibv_get_device_list(int *num_devices) {
  std::vector<Device *> found;
  for (const std::string &sock : socket_list()) {
    ctl::DeviceAttrPayload a{};
    // A daemon that is not there (or not answering) is simply not a device.
    if (client::Context::probe(sock.c_str(), prog_name(), &a, kProbeTimeoutMs) != 0) continue;
    std::lock_guard<std::mutex> g(g_dev_mu);
    Device *d = device_for(sock, a);
    if (d) found.push_back(d);
  }
  auto **list = static_cast<ibv_device **>(std::calloc(found.size() + 1, sizeof(ibv_device *)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < found.size(); ++i)
    list[i] = &found[i]->dev;
  if (num_devices) *num_devices = static_cast<int>(found.size());
  return list;
}

UV_EXPORT void ibv_free_device_list(ibv_device **list) {
  std::free(list);
}

UV_EXPORT const char *ibv_get_device_name(ibv_device *device) {
  return device ? device->name : nullptr;
}

UV_EXPORT __be64 ibv_get_device_guid(ibv_device *device) {
  return device ? dev_of(device)->guid : 0;
}

UV_EXPORT int ibv_get_device_index(ibv_device *device) {
  return device ? dev_of(device)->index : -1;
}

UV_EXPORT ibv_context *ibv_open_device(ibv_device *device) {
  if (device == nullptr) return fail_null<ibv_context>(EINVAL);
  Device *d = dev_of(device);
  auto *c = new (std::nothrow) Context();
  if (c == nullptr) return fail_null<ibv_context>(ENOMEM);
  int rc = client::Context::open(d->socket, prog_name(), &c->cli, kCtlTimeoutMs);
  if (rc == 0) rc = c->cli->query_device(&c->dattr);
  if (rc) {
    delete c;
    return fail_null<ibv_context>(rc);
  }
  std::memset(&c->vctx, 0, sizeof c->vctx);
  ibv_context &x = c->vctx.context;
  x.device = device;
  // cmd_fd: no kernel uverbs device; a duplicate of the session's control socket, so that it
  // is a real descriptor (apps dup it, e.g. to hand it to ibv_import_device: EOPNOTSUPP).
  c->cmd_fd = ::fcntl(c->cli->ctl_fd(), F_DUPFD_CLOEXEC, 0);
  c->async_ep = ::epoll_create1(EPOLL_CLOEXEC);
  c->async_pending = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev0{}, ev1{};
  ev0.events = ev1.events = EPOLLIN;
  if (c->cmd_fd < 0 || c->async_ep < 0 || c->async_pending < 0 ||
      ::epoll_ctl(c->async_ep, EPOLL_CTL_ADD, c->cli->async_fd(), &ev0) != 0 ||
      ::epoll_ctl(c->async_ep, EPOLL_CTL_ADD, c->async_pending, &ev1) != 0) {
    const int e = errno;
    delete c;
    return fail_null<ibv_context>(e);
  }
  x.cmd_fd = c->cmd_fd;
  x.async_fd = c->async_ep;
  x.num_comp_vectors = 1;
  pthread_mutex_init(&x.mutex, nullptr);
  x.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c->vctx.sz = sizeof(verbs_context);
  c->dev = d;
  fill_context_ops(c);
  return &x;
}

Context::~Context() {
  for (int fd : {cmd_fd, async_ep, async_pending})
    if (fd >= 0) ::close(fd);
}

UV_EXPORT int ibv_close_device(ibv_context *context) {
  if (context == nullptr) return EINVAL;
  Context *c = ctx_of(context);
  pthread_mutex_destroy(&context->mutex);
  delete c;  // closes the session: the daemon frees whatever the app did not destroy
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------------------------
UV_EXPORT int ibv_query_device(ibv_context *context, ibv_device_attr *device_attr) {
  if (context == nullptr || device_attr == nullptr) return EINVAL;
  Context *c = ctx_of(context);
  ctl::DeviceAttrPayload d{};
  const int rc = lock_call(c, [&](client::Context &k) { return k.query_device(&d); });
  if (rc) return rc;
  fill_device_attr(d, device_attr);
  return 0;
}

// The exported symbol takes rdma-core's _compat_ibv_port_attr (ibv_port_attr up to `flags`);
// programs built against current headers call the context's query_port op instead.
#undef ibv_query_port
UV_EXPORT int ibv_query_port(ibv_context *context, uint8_t port_num,
                             struct _compat_ibv_port_attr *port_attr) {
  if (context == nullptr) return EINVAL;
  return query_port_op(context, port_num, reinterpret_cast<ibv_port_attr *>(port_attr),
                       offsetof(ibv_port_attr, flags) + sizeof(uint8_t));
}

namespace {
int query_gid_entry(ibv_context *context, uint32_t port_num, uint32_t index, uint8_t gid[16],
                    uint32_t *type) {
  Context *c = ctx_of(context);
  return lock_call(c, [&](client::Context &k) {
    const int rc = k.query_gid(port_num, index, gid);
    if (type) *type = 2;  // every uroce GID is RoCE v2 (ctl::GidPayload::gid_type)
    return rc;
  });
}
}  // namespace

UV_EXPORT int ibv_query_gid(ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid) {
  if (context == nullptr || gid == nullptr || index < 0) {
    errno = EINVAL;
    return -1;
  }
  const int rc =
      query_gid_entry(context, port_num, static_cast<uint32_t>(index), gid->raw, nullptr);
  if (rc) {
    errno = rc;
    return -1;
  }
  return 0;
}

// rdma-core's private (driver.h) call, used by ibv_devinfo and the providers: 0 = IB / RoCE v1,
// 1 = RoCE v2 (enum ibv_gid_type_sysfs).
UV_EXPORT int ibv_query_gid_type(ibv_context *context, uint8_t port_num, unsigned int index,
                                 int *type) {
  if (context == nullptr || type == nullptr) {
    errno = EINVAL;
    return -1;
  }
  uint8_t g[16];
  uint32_t t = 0;
  const int rc = query_gid_entry(context, port_num, index, g, &t);
  if (rc) {
    errno = rc;
    return -1;
  }
  *type = t == 2 ? 1 : 0;
  return 0;
}

UV_EXPORT int _ibv_query_gid_ex(ibv_context *context, uint32_t port_num, uint32_t gid_index,
                                ibv_gid_entry *entry, uint32_t flags, size_t entry_size) {
  if (context == nullptr || entry == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry))
    return EINVAL;
  ibv_gid_entry e{};
  uint32_t t = 0;
  const int rc = query_gid_entry(context, port_num, gid_index, e.gid.raw, &t);
  if (rc) return rc == EINVAL ? ENODATA : rc;  // no such entry: as an empty slot in rdma-core
  e.gid_index = gid_index;
  e.port_num = port_num;
  e.gid_type = t == 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
  e.ndev_ifindex = 0;  // the port is a DPDK port, not a kernel netdev
  std::memcpy(entry, &e, sizeof e);
  return 0;
}

UV_EXPORT ssize_t _ibv_query_gid_table(ibv_context *context, ibv_gid_entry *entries,
                                       size_t max_entries, uint32_t flags, size_t entry_size) {
  if (context == nullptr || (entries == nullptr && max_entries) || flags != 0 ||
      entry_size < sizeof(ibv_gid_entry))
    return -EINVAL;
  Context *c = ctx_of(context);
  size_t n = 0;
  for (uint32_t port = 1; port <= c->dattr.phys_port_cnt; ++port) {
    ctl::PortAttrPayload p{};
    int rc = lock_call(c, [&](client::Context &k) { return k.query_port(port, &p); });
    if (rc) return -rc;
    for (uint32_t i = 0; i < p.gid_tbl_len; ++i) {
      if (n >= max_entries) return -EINVAL;  // rdma-core: the table does not fit
      auto *e =
          reinterpret_cast<ibv_gid_entry *>(reinterpret_cast<char *>(entries) + n * entry_size);
      rc = _ibv_query_gid_ex(context, port, i, e, 0, entry_size);
      if (rc) return -rc;
      ++n;
    }
  }
  return static_cast<ssize_t>(n);
}

UV_EXPORT int ibv_query_pkey(ibv_context *context, uint8_t port_num, int index, __be16 *pkey) {
  if (context == nullptr || pkey == nullptr || port_num != 1 || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = 0xffff;  // the default partition, the only one (RoCE)
  return 0;
}

UV_EXPORT int ibv_get_pkey_index(ibv_context *context, uint8_t port_num, __be16 pkey) {
  if (context == nullptr || port_num != 1) return -EINVAL;
  return (pkey & 0xff7f) == 0xff7f ? 0 : -ENOENT;  // full or limited default partition
}

// ---------------------------------------------------------------------------------------------
// Async events: the daemon queues them per session and writes the session's async eventfd;
// ibv_get_async_event fetches them (kGetAsyncEvents) and returns them one at a time, fails with
// EAGAIN when none is pending and the app made ctx->async_fd (Context::async_ep) non-blocking,
// else waits on it. Events of objects destroyed before they were returned are dropped, as the
// kernel drops them (purge_async_events).
// ---------------------------------------------------------------------------------------------
// The daemon queues the engine's event numbers as they are: they must be rdma-core's.
namespace {
using uroce::transport::AsyncEvent;
static_assert(static_cast<uint32_t>(AsyncEvent::kCqErr) == IBV_EVENT_CQ_ERR &&
              static_cast<uint32_t>(AsyncEvent::kQpFatal) == IBV_EVENT_QP_FATAL &&
              static_cast<uint32_t>(AsyncEvent::kQpReqErr) == IBV_EVENT_QP_REQ_ERR &&
              static_cast<uint32_t>(AsyncEvent::kQpAccessErr) == IBV_EVENT_QP_ACCESS_ERR &&
              static_cast<uint32_t>(AsyncEvent::kCommEst) == IBV_EVENT_COMM_EST &&
              static_cast<uint32_t>(AsyncEvent::kSqDrained) == IBV_EVENT_SQ_DRAINED &&
              static_cast<uint32_t>(AsyncEvent::kSrqErr) == IBV_EVENT_SRQ_ERR &&
              static_cast<uint32_t>(AsyncEvent::kSrqLimitReached) == IBV_EVENT_SRQ_LIMIT_REACHED &&
              static_cast<uint32_t>(AsyncEvent::kQpLastWqeReached) ==
                  IBV_EVENT_QP_LAST_WQE_REACHED &&
              static_cast<uint32_t>(AsyncEvent::kDeviceFatal) == IBV_EVENT_DEVICE_FATAL);
}  // namespace

namespace {

EventObj event_object(uint32_t type) {
  switch (type) {
    case IBV_EVENT_CQ_ERR:
      return EventObj::kCq;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      return EventObj::kSrq;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_GID_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_DEVICE_FATAL:
      return EventObj::kNone;
    default:
      return EventObj::kQp;
  }
}

// Keeps async_pending readable exactly while async_q holds events (under async_mu).
void update_pending(Context *c) noexcept {
  uint64_t v = 1;
  if (!c->async_q.empty() && !c->pending_set) {
    if (::write(c->async_pending, &v, sizeof v) == sizeof v) c->pending_set = true;
  } else if (c->async_q.empty() && c->pending_set) {
    if (::read(c->async_pending, &v, sizeof v) == sizeof v) c->pending_set = false;
  }
}

// Moves the events the daemon queued for this session into async_q (under async_mu). The
// daemon signals its eventfd when it queues and drains it when they are fetched: not readable
// means nothing queued, and no round trip is made.
int fetch_async(Context *c) noexcept {
  pollfd p{c->cli->async_fd(), POLLIN, 0};
  if (::poll(&p, 1, 0) != 1) return 0;
  std::vector<ctl::AsyncEventEntry> got;
  uint32_t lost = 0;
  const int rc = lock_call(c, [&](client::Context &k) { return k.get_async_events(&got, &lost); });
  for (const auto &e : got)
    c->async_q.push_back(e);
  update_pending(c);
  return rc;
}

// Turns e into *event if its object still exists (under async_mu). False: destroyed meanwhile.
bool deliver(Context *c, const ctl::AsyncEventEntry &e, ibv_async_event *event) {
  std::lock_guard<std::mutex> g(c->ctl_mu);
  event->event_type = static_cast<ibv_event_type>(e.event_type);
  switch (event_object(e.event_type)) {
    case EventObj::kCq: {
      auto it = c->cqs.find(e.handle);
      if (it == c->cqs.end()) return false;
      Cq *q = it->second;
      pthread_mutex_lock(&q->cq.mutex);
      ++q->async_events;
      pthread_mutex_unlock(&q->cq.mutex);
      event->element.cq = ibv_cq_ex_to_cq(&q->cq);
      return true;
    }
    case EventObj::kSrq: {
      auto it = c->srqs.find(e.handle);
      if (it == c->srqs.end()) return false;
      Srq *s = it->second;
      pthread_mutex_lock(&s->srq.mutex);
      ++s->async_events;
      pthread_mutex_unlock(&s->srq.mutex);
      // The limit event disarms the limit (IBTA 10.2.9.4; rxe sets srq->limit = 0), as the
      // daemon did: ibv_query_srq reports 0 from now on.
      if (e.event_type == IBV_EVENT_SRQ_LIMIT_REACHED) s->limit = 0;
      event->element.srq = &s->srq;
      return true;
    }
    case EventObj::kNone:
      if (e.event_type != IBV_EVENT_DEVICE_FATAL)
        event->element.port_num = static_cast<int>(e.handle);
      return true;
    case EventObj::kQp: {
      auto it = c->qps.find(e.handle);
      if (it == c->qps.end()) return false;
      Qp *q = it->second;
      pthread_mutex_lock(&q->qpx.qp_base.mutex);
      ++q->async_events;
      pthread_mutex_unlock(&q->qpx.qp_base.mutex);
      event->element.qp = &q->qpx.qp_base;
      return true;
    }
  }
  return false;
}

}  // namespace

void uroce::verbs::purge_async_events(Context *c, EventObj kind, uint32_t handle) noexcept {
  std::lock_guard<std::mutex> ga(c->async_mu);
  (void)fetch_async(c);  // the daemon's queue too (it queues no new ones: the object is gone)
  std::erase_if(c->async_q, [&](const ctl::AsyncEventEntry &e) {
    return e.handle == handle && event_object(e.event_type) == kind;
  });
  update_pending(c);
}

UV_EXPORT int ibv_get_async_event(ibv_context *context, ibv_async_event *event) {
  if (context == nullptr || event == nullptr) {
    errno = EINVAL;
    return -1;
  }
  Context *c = ctx_of(context);
  for (;;) {
    {
      std::lock_guard<std::mutex> ga(c->async_mu);
      int rc = 0;
      for (int round = 0; round < 2; ++round) {
        while (!c->async_q.empty()) {
          const ctl::AsyncEventEntry e = c->async_q.front();
          c->async_q.pop_front();
          if (deliver(c, e, event)) {
            update_pending(c);
            return 0;
          }
        }
        if (round == 0) rc = fetch_async(c);
      }
      update_pending(c);
      if (rc) {
        errno = rc;
        return -1;
      }
    }
    // Nothing to return: as rdma-core's read() of the async fd, EAGAIN if the app made it
    // non-blocking, else wait until the daemon queues one.
    const int fl = ::fcntl(c->async_ep, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK)) {
      errno = EAGAIN;
      return -1;
    }
    epoll_event ev;
    if (::epoll_wait(c->async_ep, &ev, 1, -1) < 0) return -1;  // EINTR: as an interrupted read
  }
}

UV_EXPORT void ibv_ack_async_event(ibv_async_event *event) {
  if (event == nullptr) return;
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR: {
      ibv_cq *cq = event->element.cq;
      pthread_mutex_lock(&cq->mutex);
      ++cq->async_events_completed;
      pthread_cond_signal(&cq->cond);
      pthread_mutex_unlock(&cq->mutex);
      return;
    }
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: {
      ibv_qp *qp = event->element.qp;
      pthread_mutex_lock(&qp->mutex);
      ++qp->events_completed;
      pthread_cond_signal(&qp->cond);
      pthread_mutex_unlock(&qp->mutex);
      return;
    }
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: {
      ibv_srq *srq = event->element.srq;
      pthread_mutex_lock(&srq->mutex);
      ++srq->events_completed;
      pthread_cond_signal(&srq->cond);
      pthread_mutex_unlock(&srq->mutex);
      return;
    }
    default:
      return;
  }
}
