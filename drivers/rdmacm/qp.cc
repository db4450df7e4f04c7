// SPDX-License-Identifier: BSD-3-Clause
// The QP transitions the connection manager makes (as librdmacm does with the kernel's
// rdma_init_qp_attr): INIT at rdma_create_qp, RTR and RTS when the connection is accepted (the
// passive side) or the REP arrives (the active side), with the negotiated PSNs, responder
// resources, initiator depth and retry counts. UD QPs go to RTS at once, Q_Key RDMA_UDP_QKEY.
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "rdmacm.h"

namespace uroce::rdmacm {

uint32_t random_psn() {
  uint32_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v)
    v = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(&v));
  return v & 0xffffff;
}

int qp_attr_for(Id *id, ibv_qp_state state, ibv_qp_attr *a, int *mask) {
  std::memset(a, 0, sizeof *a);
  a->qp_state = state;
  const bool ud = id->id.qp_type == IBV_QPT_UD;
  switch (state) {
    case IBV_QPS_INIT:
      a->pkey_index = 0;
      a->port_num = 1;
      if (ud) {
        a->qkey = RDMA_UDP_QKEY;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
      } else {
        a->qp_access_flags =
            IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
      if (ud) {
        *mask = IBV_QP_STATE;
        return 0;
      }
      a->path_mtu = static_cast<ibv_mtu>(id->path_mtu);
      a->dest_qp_num = id->peer_qpn;
      a->rq_psn = id->psn;  // the PSN our REQ / REP announced: the peer sends from it
      a->max_dest_rd_atomic = id->resp_res;
      a->min_rnr_timer = 12;
      a->ah_attr.is_global = 1;
      std::memcpy(a->ah_attr.grh.dgid.raw, id->peer_gid, 16);
      a->ah_attr.grh.sgid_index = static_cast<uint8_t>(id->gid_index);
      a->ah_attr.grh.hop_limit = 64;
      a->ah_attr.grh.traffic_class = id->tos;
      a->ah_attr.port_num = 1;
      *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      return 0;
    case IBV_QPS_RTS:
      a->sq_psn = id->peer_psn;  // the peer's REQ / REP: we send from it (as Linux's ib_cm)
      if (ud) {
        *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        return 0;
      }
      a->timeout = id->ack_timeout;
      a->retry_cnt = id->retry;
      a->rnr_retry = id->rnr_retry;
      a->max_rd_atomic = id->init_depth;
      *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
              IBV_QP_MAX_QP_RD_ATOMIC;
      return 0;
    default:
      return EINVAL;
  }
}

int modify_to(Id *id, ibv_qp_state state) {
  ibv_qp_attr a;
  int mask = 0;
  if (const int rc = qp_attr_for(id, state, &a, &mask)) return rc;
  return ibv_modify_qp(id->id.qp, &a, mask);
}

}  // namespace uroce::rdmacm

UROCE_EXPORT int rdma_init_qp_attr(rdma_cm_id *cid, ibv_qp_attr *attr, int *mask) {
  if (cid == nullptr || attr == nullptr || mask == nullptr) {
    errno = EINVAL;
    return -1;
  }
  const int rc = uroce::rdmacm::qp_attr_for(reinterpret_cast<uroce::rdmacm::Id *>(cid),
                                            attr->qp_state, attr, mask);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  return 0;
}
