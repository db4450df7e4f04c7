// SPDX-License-Identifier: BSD-3-Clause
// The rest of librdmacm's API: rdma_getaddrinfo over getaddrinfo(3), options, ports, devices,
// event names, SRQs; and what uroce does not do yet (multicast, ECE), which
// fails with ENOSYS / EOPNOTSUPP (doc/cm.md).
#include <netdb.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "rdmacm.h"

using namespace uroce::rdmacm;

namespace {

sockaddr *copy_sa(const sockaddr *sa, socklen_t len) {
  auto *p = static_cast<sockaddr *>(std::calloc(1, sizeof(sockaddr_storage)));
  if (p != nullptr) std::memcpy(p, sa, len);
  return p;
}

}  // namespace

UROCE_EXPORT int rdma_getaddrinfo(const char *node, const char *service, const rdma_addrinfo *hints,
                                  rdma_addrinfo **res) {
  if (res == nullptr || (node == nullptr && service == nullptr)) return fail(EINVAL);
  addrinfo h{};
  h.ai_socktype = SOCK_STREAM;
  h.ai_family = AF_UNSPEC;
  if (hints != nullptr) {
    if (hints->ai_flags & RAI_PASSIVE) h.ai_flags |= AI_PASSIVE;
    if (hints->ai_flags & RAI_NUMERICHOST) h.ai_flags |= AI_NUMERICHOST;
    if (hints->ai_family == AF_INET || hints->ai_family == AF_INET6) h.ai_family = hints->ai_family;
    if (hints->ai_family == AF_IB) return fail(EAFNOSUPPORT);
  }
  addrinfo *ai = nullptr;
  const int rc = getaddrinfo(node, service, &h, &ai);
  if (rc != 0) return rc;  // an EAI_* code, as rdma-core's
  auto *r = static_cast<rdma_addrinfo *>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (r == nullptr) {
    freeaddrinfo(ai);
    return fail(ENOMEM);
  }
  r->ai_family = ai->ai_family;
  r->ai_flags = hints != nullptr ? hints->ai_flags : 0;
  r->ai_qp_type = hints != nullptr && hints->ai_qp_type != 0 ? hints->ai_qp_type : IBV_QPT_RC;
  r->ai_port_space =
      hints != nullptr && hints->ai_port_space != 0 ? hints->ai_port_space : RDMA_PS_TCP;
  if (hints != nullptr && hints->ai_port_space == RDMA_PS_UDP && hints->ai_qp_type == 0)
    r->ai_qp_type = IBV_QPT_UD;
  if (r->ai_flags & RAI_PASSIVE) {
    r->ai_src_addr = copy_sa(ai->ai_addr, ai->ai_addrlen);
    r->ai_src_len = ai->ai_addrlen;
  } else {
    r->ai_dst_addr = copy_sa(ai->ai_addr, ai->ai_addrlen);
    r->ai_dst_len = ai->ai_addrlen;
    if (hints != nullptr && hints->ai_src_addr != nullptr) {
      r->ai_src_addr = copy_sa(hints->ai_src_addr, hints->ai_src_len);
      r->ai_src_len = hints->ai_src_len;
    }
  }
  freeaddrinfo(ai);
  if ((r->ai_flags & RAI_PASSIVE) ? r->ai_src_addr == nullptr : r->ai_dst_addr == nullptr) {
    std::free(r->ai_src_addr);
    std::free(r->ai_dst_addr);
    std::free(r);
    return fail(ENOMEM);
  }
  *res = r;
  return 0;
}

UROCE_EXPORT void rdma_freeaddrinfo(rdma_addrinfo *res) {
  while (res != nullptr) {
    rdma_addrinfo *next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

UROCE_EXPORT const char *rdma_event_str(rdma_cm_event_type e) {
  switch (e) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE:
      return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED:
      return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED:
      return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED:
      return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN:
      return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR:
      return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE:
      return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}

UROCE_EXPORT int rdma_set_option(rdma_cm_id *cid, int level, int name, void *val, size_t len) {
  auto *id = reinterpret_cast<Id *>(cid);
  if (id == nullptr || val == nullptr) return fail(EINVAL);
  if (level == RDMA_OPTION_ID) {
    switch (name) {
      case RDMA_OPTION_ID_TOS:
        if (len != sizeof(uint8_t)) return fail(EINVAL);
        id->tos = *static_cast<uint8_t *>(val);
        id->tos_set = true;
        return 0;
      case RDMA_OPTION_ID_REUSEADDR:  // ports are reusable once their id is destroyed
      case RDMA_OPTION_ID_AFONLY:     // an id binds one family anyway
        return len == sizeof(int) ? 0 : fail(EINVAL);
      case RDMA_OPTION_ID_ACK_TIMEOUT:
        if (len != sizeof(uint8_t)) return fail(EINVAL);
        id->ack_timeout = *static_cast<uint8_t *>(val) & 31;
        return 0;
      default:
        break;
    }
  }
  return fail(ENOSYS);
}

UROCE_EXPORT __be16 rdma_get_src_port(rdma_cm_id *id) {
  const sockaddr *sa = &id->route.addr.src_addr;
  if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in *>(sa)->sin_port;
  if (sa->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_port;
  return 0;
}

UROCE_EXPORT __be16 rdma_get_dst_port(rdma_cm_id *id) {
  const sockaddr *sa = &id->route.addr.dst_addr;
  if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in *>(sa)->sin_port;
  if (sa->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_port;
  return 0;
}

UROCE_EXPORT ibv_context **rdma_get_devices(int *num) {
  std::vector<Dev *> &ds = devices();
  auto **list = static_cast<ibv_context **>(std::calloc(ds.size() + 1, sizeof(ibv_context *)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < ds.size(); ++i)
    list[i] = ds[i]->ctx;
  if (num != nullptr) *num = static_cast<int>(ds.size());
  return list;
}

UROCE_EXPORT void rdma_free_devices(ibv_context **list) {
  std::free(list);
}

// IBV_EVENT_COMM_EST: the RTU (or REP) is what establishes a uroce connection; nothing to do.
UROCE_EXPORT int rdma_notify(rdma_cm_id *, ibv_event_type) {
  return 0;
}

UROCE_EXPORT int rdma_create_srq_ex(rdma_cm_id *cid, ibv_srq_init_attr_ex *attr) {
  auto *id = reinterpret_cast<Id *>(cid);
  if (id == nullptr || id->dev == nullptr || attr == nullptr) return fail(EINVAL);
  ibv_pd *pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) != 0 ? attr->pd : nullptr;
  if (pd == nullptr) {
    if (id->dev->pd == nullptr) id->dev->pd = ibv_alloc_pd(id->dev->ctx);
    pd = id->dev->pd;
  }
  if (pd == nullptr) return -1;
  ibv_srq_init_attr a{};
  a.srq_context = attr->srq_context;
  a.attr = attr->attr;
  ibv_srq *srq = ibv_create_srq(pd, &a);
  if (srq == nullptr) return -1;
  cid->srq = srq;
  cid->pd = pd;
  return 0;
}

UROCE_EXPORT int rdma_create_srq(rdma_cm_id *cid, ibv_pd *pd, ibv_srq_init_attr *attr) {
  if (attr == nullptr) return fail(EINVAL);
  ibv_srq_init_attr_ex x{};
  x.srq_context = attr->srq_context;
  x.attr = attr->attr;
  x.comp_mask = pd != nullptr ? IBV_SRQ_INIT_ATTR_PD : 0;
  x.pd = pd;
  return rdma_create_srq_ex(cid, &x);
}

UROCE_EXPORT void rdma_destroy_srq(rdma_cm_id *cid) {
  if (cid == nullptr || cid->srq == nullptr) return;
  ibv_destroy_srq(cid->srq);
  cid->srq = nullptr;
}

// Not supported yet (doc/cm.md).
UROCE_EXPORT int rdma_join_multicast(rdma_cm_id *, sockaddr *, void *) {
  return fail(ENOSYS);
}
UROCE_EXPORT int rdma_join_multicast_ex(rdma_cm_id *, rdma_cm_join_mc_attr_ex *, void *) {
  return fail(ENOSYS);
}
UROCE_EXPORT int rdma_leave_multicast(rdma_cm_id *, sockaddr *) {
  return fail(ENOSYS);
}
UROCE_EXPORT int rdma_set_local_ece(rdma_cm_id *, ibv_ece *) {
  return fail(EOPNOTSUPP);
}
UROCE_EXPORT int rdma_get_remote_ece(rdma_cm_id *, ibv_ece *) {
  return fail(EOPNOTSUPP);
}
