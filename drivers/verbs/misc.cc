// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: the rest of libibverbs' public symbols (strings, rates, fork, sysfs helpers,
// kernel-ABI copy helpers, import / ECE), and the IBVERBS_PRIVATE_34 symbols that provider
// libraries (libmlx5, libefa, ...) import. The shim never loads a provider, but perftest links
// libmlx5 and libefa, whose load needs every one of those symbols to resolve (BIND_NOW).
// Their constructors call verbs_register_driver_34, which is accepted and ignored; every other
// private entry point fails the way rdma-core fails for a missing kernel feature (EOPNOTSUPP,
// or NULL with errno EOPNOTSUPP) — no provider can ever reach them with a uroce object.
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include "shim.h"

using namespace uroce::verbs;

// ---------------------------------------------------------------------------------------------
// Strings (the same texts as rdma-core)
// ---------------------------------------------------------------------------------------------
UV_EXPORT const char *ibv_node_type_str(ibv_node_type t) {
  switch (t) {
    case IBV_NODE_CA:
      return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH:
      return "InfiniBand switch";
    case IBV_NODE_ROUTER:
      return "InfiniBand router";
    case IBV_NODE_RNIC:
      return "iWARP NIC";
    case IBV_NODE_USNIC:
      return "usNIC";
    case IBV_NODE_USNIC_UDP:
      return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED:
      return "unspecified";
    default:
      return "unknown";
  }
}

UV_EXPORT const char *ibv_port_state_str(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP:
      return "no state change (NOP)";
    case IBV_PORT_DOWN:
      return "down";
    case IBV_PORT_INIT:
      return "init";
    case IBV_PORT_ARMED:
      return "armed";
    case IBV_PORT_ACTIVE:
      return "active";
    case IBV_PORT_ACTIVE_DEFER:
      return "active defer";
    default:
      return "unknown";
  }
}

UV_EXPORT const char *ibv_event_type_str(ibv_event_type e) {
  switch (e) {
    case IBV_EVENT_CQ_ERR:
      return "CQ error";
    case IBV_EVENT_QP_FATAL:
      return "local work queue catastrophic error";
    case IBV_EVENT_QP_REQ_ERR:
      return "invalid request local work queue error";
    case IBV_EVENT_QP_ACCESS_ERR:
      return "local access violation work queue error";
    case IBV_EVENT_COMM_EST:
      return "communication established";
    case IBV_EVENT_SQ_DRAINED:
      return "send queue drained";
    case IBV_EVENT_PATH_MIG:
      return "path migrated";
    case IBV_EVENT_PATH_MIG_ERR:
      return "path migration request error";
    case IBV_EVENT_DEVICE_FATAL:
      return "local catastrophic error";
    case IBV_EVENT_PORT_ACTIVE:
      return "port active";
    case IBV_EVENT_PORT_ERR:
      return "port error";
    case IBV_EVENT_LID_CHANGE:
      return "LID change";
    case IBV_EVENT_PKEY_CHANGE:
      return "P_Key change";
    case IBV_EVENT_SM_CHANGE:
      return "SM change";
    case IBV_EVENT_SRQ_ERR:
      return "SRQ catastrophic error";
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      return "SRQ limit reached";
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return "last WQE reached";
    case IBV_EVENT_CLIENT_REREGISTER:
      return "client reregistration";
    case IBV_EVENT_GID_CHANGE:
      return "GID table change";
    case IBV_EVENT_WQ_FATAL:
      return "WQ fatal";
    default:
      return "unknown";
  }
}

UV_EXPORT const char *ibv_wc_status_str(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS:
      return "success";
    case IBV_WC_LOC_LEN_ERR:
      return "local length error";
    case IBV_WC_LOC_QP_OP_ERR:
      return "local QP operation error";
    case IBV_WC_LOC_EEC_OP_ERR:
      return "local EE context operation error";
    case IBV_WC_LOC_PROT_ERR:
      return "local protection error";
    case IBV_WC_WR_FLUSH_ERR:
      return "Work Request Flushed Error";
    case IBV_WC_MW_BIND_ERR:
      return "memory management operation error";
    case IBV_WC_BAD_RESP_ERR:
      return "bad response error";
    case IBV_WC_LOC_ACCESS_ERR:
      return "local access error";
    case IBV_WC_REM_INV_REQ_ERR:
      return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR:
      return "remote access error";
    case IBV_WC_REM_OP_ERR:
      return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR:
      return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "RNR retry counter exceeded";
    case IBV_WC_LOC_RDD_VIOL_ERR:
      return "local RDD violation error";
    case IBV_WC_REM_INV_RD_REQ_ERR:
      return "remote invalid RD request";
    case IBV_WC_REM_ABORT_ERR:
      return "aborted error";
    case IBV_WC_INV_EECN_ERR:
      return "invalid EE context number";
    case IBV_WC_INV_EEC_STATE_ERR:
      return "invalid EE context state";
    case IBV_WC_FATAL_ERR:
      return "fatal error";
    case IBV_WC_RESP_TIMEOUT_ERR:
      return "response timeout error";
    case IBV_WC_GENERAL_ERR:
      return "general error";
    case IBV_WC_TM_ERR:
      return "TM error";
    case IBV_WC_TM_RNDV_INCOMPLETE:
      return "TM software rendezvous";
    default:
      return "unknown";
  }
}

// ---------------------------------------------------------------------------------------------
// Rates (IBTA static rate encodings)
// ---------------------------------------------------------------------------------------------
namespace {
struct RateRow {
  ibv_rate rate;
  int mult;  // multiple of 2.5 Gb/s, 0 if not an integer multiple
  int mbps;
};
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},     {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},  {IBV_RATE_14_GBPS, 0, 14062},
    {IBV_RATE_56_GBPS, 0, 56250},     {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750},   {IBV_RATE_25_GBPS, 10, 25781},
    {IBV_RATE_100_GBPS, 40, 103125},  {IBV_RATE_200_GBPS, 80, 206250},
    {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},    {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},
};
}  // namespace

UV_EXPORT int ibv_rate_to_mult(ibv_rate rate) {
  for (const RateRow &r : kRates)
    if (r.rate == rate) return r.mult ? r.mult : -1;
  return rate == IBV_RATE_MAX ? 0 : -1;
}

UV_EXPORT ibv_rate mult_to_ibv_rate(int mult) {
  for (const RateRow &r : kRates)
    if (r.mult == mult && r.mult) return r.rate;
  return IBV_RATE_MAX;
}

UV_EXPORT int ibv_rate_to_mbps(ibv_rate rate) {
  for (const RateRow &r : kRates)
    if (r.rate == rate) return r.mbps;
  return rate == IBV_RATE_MAX ? 0 : -1;
}

UV_EXPORT ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const RateRow &r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}

// ---------------------------------------------------------------------------------------------
// Fork: registered pages are MAP_SHARED memfd pages; a fork handler in mr_map.cc gives the
// child private copies of them, so fork is safe without ibv_fork_init (doc/verbs.md).
// ---------------------------------------------------------------------------------------------
UV_EXPORT int ibv_fork_init(void) {
  return 0;
}
UV_EXPORT ibv_fork_status ibv_is_fork_initialized(void) {
  return IBV_FORK_UNNEEDED;
}
UV_EXPORT int ibv_dontfork_range(void *base, size_t size) {
  (void)base, (void)size;
  return 0;  // as rdma-core when fork support is not initialised: nothing to do
}
UV_EXPORT int ibv_dofork_range(void *base, size_t size) {
  (void)base, (void)size;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// sysfs helpers (real: uroce devices simply have no sysfs directory)
// ---------------------------------------------------------------------------------------------
UV_EXPORT const char *ibv_get_sysfs_path(void) {
  static char path[256];
  static std::once_flag once;
  std::call_once(once, [] {
    const char *env = getenv("SYSFS_PATH");
    std::snprintf(path, sizeof path, "%s", env && *env ? env : "/sys");
    size_t n = std::strlen(path);
    while (n > 1 && path[n - 1] == '/')
      path[--n] = '\0';
  });
  return path;
}

UV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size) {
  if (dir == nullptr || file == nullptr || buf == nullptr || size == 0) {
    errno = EINVAL;
    return -1;
  }
  char path[512];
  std::snprintf(path, sizeof path, "%s/%s", dir, file);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = ::read(fd, buf, size);
  ::close(fd);
  if (n <= 0) return -1;
  size_t len = static_cast<size_t>(n);
  if (len == size) --len;
  if (len > 0 && buf[len - 1] == '\n') --len;
  buf[len] = '\0';
  return static_cast<int>(len);
}

// ---------------------------------------------------------------------------------------------
// Kernel-ABI copy helpers (historical exports used by librdmacm)
// ---------------------------------------------------------------------------------------------
UV_EXPORT void ibv_copy_ah_attr_from_kern(ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

UV_EXPORT void ibv_copy_qp_attr_from_kern(ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src) {
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

UV_EXPORT void ibv_copy_path_rec_from_kern(ibv_sa_path_rec *dst, struct ib_user_path_rec *src) {
  std::memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid);
  std::memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid);
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = src->raw_traffic;
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = src->reversible;
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = src->mtu;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}

UV_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, ibv_sa_path_rec *src) {
  std::memcpy(dst->dgid, src->dgid.raw, sizeof src->dgid);
  std::memcpy(dst->sgid, src->sgid.raw, sizeof src->sgid);
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = src->raw_traffic ? 1 : 0;
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = src->reversible ? 1 : 0;
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = src->mtu;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}

// The Ethernet address of a GID: uroced resolves it (ARP / ND) when an AH or a connected QP is
// created; it is not exposed to apps.
UV_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context *context, ibv_ah_attr *attr,
                                          uint8_t eth_mac[6], uint16_t *vid) {
  (void)context, (void)attr, (void)eth_mac, (void)vid;
  return EOPNOTSUPP;
}

// ---------------------------------------------------------------------------------------------
// Import (sharing objects between processes through the kernel's cmd_fd) and ECE: no kernel
// device, so not supported (rdma-core's answer without kernel support).
// ---------------------------------------------------------------------------------------------
UV_EXPORT ibv_context *ibv_import_device(int cmd_fd) {
  (void)cmd_fd;
  return fail_null<ibv_context>(EOPNOTSUPP);
}
UV_EXPORT ibv_pd *ibv_import_pd(ibv_context *context, uint32_t pd_handle) {
  (void)context, (void)pd_handle;
  return fail_null<ibv_pd>(EOPNOTSUPP);
}
UV_EXPORT void ibv_unimport_pd(ibv_pd *pd) {
  (void)pd;
}
UV_EXPORT ibv_mr *ibv_import_mr(ibv_pd *pd, uint32_t mr_handle) {
  (void)pd, (void)mr_handle;
  return fail_null<ibv_mr>(EOPNOTSUPP);
}
UV_EXPORT void ibv_unimport_mr(ibv_mr *mr) {
  (void)mr;
}
UV_EXPORT ibv_dm *ibv_import_dm(ibv_context *context, uint32_t dm_handle) {
  (void)context, (void)dm_handle;
  return fail_null<ibv_dm>(EOPNOTSUPP);
}
UV_EXPORT void ibv_unimport_dm(ibv_dm *dm) {
  (void)dm;
}
UV_EXPORT int ibv_set_ece(ibv_qp *qp, ibv_ece *ece) {
  (void)qp, (void)ece;
  return EOPNOTSUPP;
}
UV_EXPORT int ibv_query_ece(ibv_qp *qp, ibv_ece *ece) {
  (void)qp, (void)ece;
  return EOPNOTSUPP;
}

// ---------------------------------------------------------------------------------------------
// IBVERBS_PRIVATE_34: the provider interface (driver.h). See the comment at the top.
// ---------------------------------------------------------------------------------------------
extern "C" {
__attribute__((visibility("default"))) bool verbs_allow_disassociate_destroy = false;
}

UV_EXPORT void verbs_register_driver_34(const void *ops) {
  (void)ops;
}
UV_EXPORT void __verbs_log(void *ctx, uint32_t level, const char *fmt, ...) {
  (void)ctx, (void)level, (void)fmt;
}
UV_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link) {
  (void)link;
  return num_attrs;
}
UV_EXPORT void *_verbs_init_and_alloc_context(void *device, int cmd_fd, size_t alloc_size,
                                              void *context_offset, uint32_t driver_id) {
  (void)device, (void)cmd_fd, (void)alloc_size, (void)context_offset, (void)driver_id;
  return fail_null(EOPNOTSUPP);
}
UV_EXPORT ibv_context *verbs_open_device(ibv_device *device, void *private_data) {
  (void)device, (void)private_data;
  return fail_null<ibv_context>(EOPNOTSUPP);
}
UV_EXPORT void verbs_set_ops(void *vctx, const void *ops) {
  (void)vctx, (void)ops;
}
UV_EXPORT void verbs_uninit_context(void *vctx) {
  (void)vctx;
}
UV_EXPORT void verbs_init_cq(ibv_cq *cq, ibv_context *context, ibv_comp_channel *channel,
                             void *cq_context) {
  (void)cq, (void)context, (void)channel, (void)cq_context;
}
UV_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev, const char *fnfmt,
                                        ...) {
  (void)buf, (void)size, (void)sysfs_dev, (void)fnfmt;
  errno = ENOENT;
  return -1;
}

// The ibv_cmd_* kernel-command wrappers: every one returns EOPNOTSUPP (C calling convention:
// the arguments are ignored).
#define UV_CMD(name)         \
  UV_EXPORT int name(void) { \
    return EOPNOTSUPP;       \
  }
UV_CMD(execute_ioctl)
UV_CMD(ibv_cmd_advise_mr)
UV_CMD(ibv_cmd_alloc_dm)
UV_CMD(ibv_cmd_alloc_mw)
UV_CMD(ibv_cmd_alloc_pd)
UV_CMD(ibv_cmd_attach_mcast)
UV_CMD(ibv_cmd_close_xrcd)
UV_CMD(ibv_cmd_create_ah)
UV_CMD(ibv_cmd_create_counters)
UV_CMD(ibv_cmd_create_cq)
UV_CMD(ibv_cmd_create_cq_ex)
UV_CMD(ibv_cmd_create_flow)
UV_CMD(ibv_cmd_create_flow_action_esp)
UV_CMD(ibv_cmd_create_qp)
UV_CMD(ibv_cmd_create_qp_ex)
UV_CMD(ibv_cmd_create_qp_ex2)
UV_CMD(ibv_cmd_create_rwq_ind_table)
UV_CMD(ibv_cmd_create_srq)
UV_CMD(ibv_cmd_create_srq_ex)
UV_CMD(ibv_cmd_create_wq)
UV_CMD(ibv_cmd_dealloc_mw)
UV_CMD(ibv_cmd_dealloc_pd)
UV_CMD(ibv_cmd_dereg_mr)
UV_CMD(ibv_cmd_destroy_ah)
UV_CMD(ibv_cmd_destroy_counters)
UV_CMD(ibv_cmd_destroy_cq)
UV_CMD(ibv_cmd_destroy_flow)
UV_CMD(ibv_cmd_destroy_flow_action)
UV_CMD(ibv_cmd_destroy_qp)
UV_CMD(ibv_cmd_destroy_rwq_ind_table)
UV_CMD(ibv_cmd_destroy_srq)
UV_CMD(ibv_cmd_destroy_wq)
UV_CMD(ibv_cmd_detach_mcast)
UV_CMD(ibv_cmd_free_dm)
UV_CMD(ibv_cmd_get_context)
UV_CMD(ibv_cmd_modify_cq)
UV_CMD(ibv_cmd_modify_flow_action_esp)
UV_CMD(ibv_cmd_modify_qp)
UV_CMD(ibv_cmd_modify_qp_ex)
UV_CMD(ibv_cmd_modify_srq)
UV_CMD(ibv_cmd_modify_wq)
UV_CMD(ibv_cmd_open_qp)
UV_CMD(ibv_cmd_open_xrcd)
UV_CMD(ibv_cmd_poll_cq)
UV_CMD(ibv_cmd_post_recv)
UV_CMD(ibv_cmd_post_send)
UV_CMD(ibv_cmd_post_srq_recv)
UV_CMD(ibv_cmd_query_context)
UV_CMD(ibv_cmd_query_device_any)
UV_CMD(ibv_cmd_query_mr)
UV_CMD(ibv_cmd_query_port)
UV_CMD(ibv_cmd_query_qp)
UV_CMD(ibv_cmd_query_srq)
UV_CMD(ibv_cmd_read_counters)
UV_CMD(ibv_cmd_reg_dm_mr)
UV_CMD(ibv_cmd_reg_dmabuf_mr)
UV_CMD(ibv_cmd_reg_mr)
UV_CMD(ibv_cmd_req_notify_cq)
UV_CMD(ibv_cmd_rereg_mr)
UV_CMD(ibv_cmd_resize_cq)
