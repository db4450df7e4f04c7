// SPDX-License-Identifier: BSD-3-Clause
// Connections of the drop-in librdmacm (rdmacm.h): connect, accept, reject, establish,
// disconnect, and the id's QP (created over the verbs shim, moved to INIT; RTR / RTS in qp.cc).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm.h"

using namespace uroce;
using namespace uroce::rdmacm;

namespace {

// A CQ of `depth` entries (at least 1) with its own completion channel.
int make_cq(rdma_cm_id *cid, ibv_comp_channel **ch, ibv_cq **cq, uint32_t depth) {
  *ch = ibv_create_comp_channel(cid->verbs);
  if (*ch == nullptr) return -1;
  *cq = ibv_create_cq(cid->verbs, depth != 0 ? static_cast<int>(depth) : 1, cid, *ch, 0);
  return *cq != nullptr ? 0 : -1;
}

// The caller's private data (if any) into *p: false when it is missing or longer than a CM
// message carries.
bool set_private(const rdma_conn_param *param, ctl::CmConnPayload *p) {
  if (param == nullptr || param->private_data_len == 0) return true;
  if (param->private_data == nullptr || param->private_data_len > ctl::kCmPrivateMax) return false;
  p->private_len = param->private_data_len;
  std::memcpy(p->private_data, param->private_data, p->private_len);
  return true;
}

void free_cqs(rdma_cm_id *cid) {
  for (ibv_cq **cq : {&cid->send_cq, &cid->recv_cq})
    if (*cq != nullptr) ibv_destroy_cq(*cq), *cq = nullptr;
  for (ibv_comp_channel **ch : {&cid->send_cq_channel, &cid->recv_cq_channel})
    if (*ch != nullptr) ibv_destroy_comp_channel(*ch), *ch = nullptr;
}

}  // namespace

UROCE_EXPORT int rdma_connect(rdma_cm_id *cid, rdma_conn_param *param) {
  Id *id = to_id(cid);
  if (id == nullptr || id->handle == 0) return fail(EINVAL);
  Dev *d = id->dev;
  ctl::CmConnPayload p{};
  p.id = id->handle;
  if (cid->qp_type == IBV_QPT_UD) {  // SIDR: ask the peer for its QPN and Q_Key
    if (!set_private(param, &p)) return fail(EINVAL);
    if (const int rc = d->call(ctl::kCmConnect, &p, sizeof p, nullptr, 0, nullptr, 0))
      return fail(-rc);
    return id->sync ? sync_wait(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
  }
  if (cid->qp == nullptr && param == nullptr) return fail(EINVAL);
  p.qpn = cid->qp != nullptr ? cid->qp->qp_num : param->qp_num;
  id->psn = random_psn();
  p.psn = id->psn;
  const int max_rr = d->attr.max_qp_rd_atom, max_id = d->attr.max_qp_init_rd_atom;
  id->resp_res = param != nullptr && param->responder_resources != RDMA_MAX_RESP_RES
                     ? clamp(param->responder_resources, max_rr)
                     : static_cast<uint8_t>(max_rr);
  id->init_depth = param != nullptr && param->initiator_depth != RDMA_MAX_INIT_DEPTH
                       ? clamp(param->initiator_depth, max_id)
                       : static_cast<uint8_t>(max_id);
  id->retry = param != nullptr ? clamp(param->retry_count, 7) : 7;
  id->path_mtu = d->active_mtu;
  p.responder_resources = id->resp_res;
  p.initiator_depth = id->init_depth;
  p.retry_count = id->retry;
  p.rnr_retry_count = param != nullptr ? clamp(param->rnr_retry_count, 7) : 7;
  p.srq = cid->srq != nullptr || (param != nullptr && param->srq);
  p.path_mtu = id->path_mtu;
  if (!set_private(param, &p)) return fail(EINVAL);
  if (const int rc = d->call(ctl::kCmConnect, &p, sizeof p, nullptr, 0, nullptr, 0))
    return fail(-rc);
  return id->sync ? sync_wait(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

UROCE_EXPORT int rdma_accept(rdma_cm_id *cid, rdma_conn_param *param) {
  Id *id = to_id(cid);
  if (id == nullptr || id->handle == 0) return fail(EINVAL);
  if (cid->qp == nullptr && param == nullptr) return fail(EINVAL);
  Dev *d = id->dev;
  if (cid->qp_type == IBV_QPT_UD) {  // the SIDR_REP: our QPN and Q_Key
    ctl::CmConnPayload p{};
    p.id = id->handle;
    p.qpn = cid->qp != nullptr ? cid->qp->qp_num : param->qp_num;
    p.qkey = RDMA_UDP_QKEY;
    if (!set_private(param, &p)) return fail(EINVAL);
    if (const int rc = d->call(ctl::kCmAccept, &p, sizeof p, nullptr, 0, nullptr, 0))
      return fail(-rc);
    return 0;
  }
  if (param != nullptr && param->responder_resources != RDMA_MAX_RESP_RES)
    id->resp_res = clamp(param->responder_resources, d->attr.max_qp_rd_atom);
  if (param != nullptr && param->initiator_depth != RDMA_MAX_INIT_DEPTH)
    id->init_depth = clamp(param->initiator_depth, d->attr.max_qp_init_rd_atom);
  id->psn = random_psn();
  if (cid->qp != nullptr) {
    int rc = modify_to(id, IBV_QPS_RTR);
    if (rc == 0) rc = modify_to(id, IBV_QPS_RTS);
    if (rc != 0) {
      rdma_reject(cid, nullptr, 0);
      return fail(rc);
    }
  }
  ctl::CmConnPayload p{};
  p.id = id->handle;
  p.qpn = cid->qp != nullptr ? cid->qp->qp_num : param->qp_num;
  p.psn = id->psn;
  p.responder_resources = id->resp_res;
  p.initiator_depth = id->init_depth;
  p.rnr_retry_count = param != nullptr ? clamp(param->rnr_retry_count, 7) : 7;
  p.srq = cid->srq != nullptr || (param != nullptr && param->srq);
  if (!set_private(param, &p)) return fail(EINVAL);
  if (const int rc = d->call(ctl::kCmAccept, &p, sizeof p, nullptr, 0, nullptr, 0))
    return fail(-rc);
  return id->sync ? sync_wait(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

UROCE_EXPORT int rdma_reject(rdma_cm_id *cid, const void *data, uint8_t len) {
  Id *id = to_id(cid);
  if (id == nullptr || id->handle == 0 || (len != 0 && data == nullptr)) return fail(EINVAL);
  ctl::CmConnPayload p{};
  p.id = id->handle;
  p.private_len = len;
  if (len != 0) std::memcpy(p.private_data, data, std::min<size_t>(len, ctl::kCmPrivateMax));
  if (const int rc = id->dev->call(ctl::kCmReject, &p, sizeof p, nullptr, 0, nullptr, 0))
    return fail(-rc);
  return 0;
}

UROCE_EXPORT int rdma_reject_ece(rdma_cm_id *cid, const void *data, uint8_t len) {
  return rdma_reject(cid, data, len);
}

UROCE_EXPORT int rdma_establish(rdma_cm_id *cid) {
  Id *id = to_id(cid);
  if (id == nullptr || id->handle == 0) return fail(EINVAL);
  const ctl::HandlePayload h{id->handle, 0};
  if (const int rc = id->dev->call(ctl::kCmEstablish, &h, sizeof h, nullptr, 0, nullptr, 0))
    return fail(-rc);
  return 0;
}

UROCE_EXPORT int rdma_disconnect(rdma_cm_id *cid) {
  Id *id = to_id(cid);
  if (id == nullptr || id->handle == 0) return fail(EINVAL);
  if (cid->qp != nullptr && cid->qp_type == IBV_QPT_RC) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(cid->qp, &a, IBV_QP_STATE);
  }
  const ctl::HandlePayload h{id->handle, 0};
  if (const int rc = id->dev->call(ctl::kCmDisconnect, &h, sizeof h, nullptr, 0, nullptr, 0))
    return fail(-rc);
  return 0;
}

UROCE_EXPORT int rdma_create_qp_ex(rdma_cm_id *cid, ibv_qp_init_attr_ex *attr) {
  Id *id = to_id(cid);
  if (id == nullptr || id->handle == 0 || attr == nullptr) return fail(EINVAL);
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr->pd == nullptr) {
    if (id->dev->pd == nullptr) id->dev->pd = ibv_alloc_pd(id->dev->ctx);
    if (id->dev->pd == nullptr) return -1;
    attr->pd = id->dev->pd;
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  // No CQs given: one per direction, each with its completion channel, as librdmacm (the
  // inline rdma_get_send_comp / rdma_get_recv_comp of <rdma/rdma_verbs.h> wait on them).
  const bool make_cqs = attr->send_cq == nullptr && attr->recv_cq == nullptr;
  if (make_cqs) {
    if (make_cq(cid, &cid->send_cq_channel, &cid->send_cq, attr->cap.max_send_wr) != 0 ||
        make_cq(cid, &cid->recv_cq_channel, &cid->recv_cq, attr->cap.max_recv_wr) != 0) {
      const int e = errno;
      free_cqs(cid);
      return fail(e);
    }
    attr->send_cq = cid->send_cq;
    attr->recv_cq = cid->recv_cq;
  } else if (attr->send_cq == nullptr || attr->recv_cq == nullptr) {
    return fail(EINVAL);
  }
  ibv_qp *qp = ibv_create_qp_ex(cid->verbs, attr);
  if (qp == nullptr) {
    const int e = errno;
    if (make_cqs) free_cqs(cid);
    return fail(e);
  }
  id->own_cqs = make_cqs;
  cid->qp = qp;
  cid->pd = attr->pd;
  cid->send_cq = attr->send_cq;
  cid->recv_cq = attr->recv_cq;
  cid->srq = attr->srq;
  int rc = modify_to(id, IBV_QPS_INIT);
  if (rc == 0 && cid->qp_type == IBV_QPT_UD) {
    rc = modify_to(id, IBV_QPS_RTR);
    if (rc == 0) rc = modify_to(id, IBV_QPS_RTS);
  }
  if (rc != 0) {
    rdma_destroy_qp(cid);
    return fail(rc);
  }
  return 0;
}

UROCE_EXPORT int rdma_create_qp(rdma_cm_id *cid, ibv_pd *pd, ibv_qp_init_attr *attr) {
  if (cid == nullptr || attr == nullptr) return fail(EINVAL);
  ibv_qp_init_attr_ex x{};
  std::memcpy(&x, attr, sizeof *attr);
  x.comp_mask = pd != nullptr ? IBV_QP_INIT_ATTR_PD : 0;
  x.pd = pd;
  if (rdma_create_qp_ex(cid, &x) != 0) return -1;
  attr->cap = x.cap;
  return 0;
}

UROCE_EXPORT void rdma_destroy_qp(rdma_cm_id *cid) {
  if (cid == nullptr || cid->qp == nullptr) return;
  ibv_destroy_qp(cid->qp);
  cid->qp = nullptr;
  if (to_id(cid)->own_cqs) free_cqs(cid);
  to_id(cid)->own_cqs = false;
}
