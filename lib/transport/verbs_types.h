// SPDX-License-Identifier: BSD-3-Clause
// The verbs-level vocabulary the transport engine speaks.
//
// Every enumerator carries rdma-core's numeric value (libibverbs verbs.h, rdma-core 44), so the
// libibverbs shim passes values through unchanged; the shim static_asserts the equality. This
// header deliberately does not include <infiniband/verbs.h>: lib/transport builds without
// rdma-core.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/packet.h"

namespace uroce::transport {

// ibv_wc_status
enum class WcStatus : uint32_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};

const char *wc_status_str(WcStatus s) noexcept;

// ibv_wc_opcode
enum class WcOpcode : uint32_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInv = 6,
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

// ibv_wc_flags
enum WcFlags : uint32_t {
  kWcGrh = 1u << 0,
  kWcWithImm = 1u << 1,
  kWcIpCsumOk = 1u << 2,
  kWcWithInv = 1u << 3,
};

// ibv_wr_opcode
enum class WrOpcode : uint32_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpAndSwp = 5,
  kAtomicFetchAndAdd = 6,
  kLocalInv = 7,
  kBindMw = 8,
  kSendWithInv = 9,
};

// The completion opcode of a send WR (ibv_wc.opcode on the requester side).
constexpr WcOpcode wc_opcode_of(WrOpcode op) noexcept {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpAndSwp:
      return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAndAdd:
      return WcOpcode::kFetchAdd;
    case WrOpcode::kLocalInv:
      return WcOpcode::kLocalInv;
    case WrOpcode::kBindMw:
      return WcOpcode::kBindMw;
    default:
      return WcOpcode::kSend;
  }
}

// ibv_send_flags
enum SendFlags : uint32_t {
  kSendFence = 1u << 0,
  kSendSignaled = 1u << 1,
  kSendSolicited = 1u << 2,
  kSendInline = 1u << 3,
  kSendIpCsum = 1u << 4,
};

// ibv_access_flags
enum AccessFlags : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
  kAccessRemoteAtomic = 1u << 3,
  kAccessMwBind = 1u << 4,
  kAccessZeroBased = 1u << 5,
  kAccessOnDemand = 1u << 6,
  kAccessHugetlb = 1u << 7,
  kAccessRelaxedOrdering = 1u << 20,  // IBV_ACCESS_OPTIONAL_FIRST: a hint, ignored
};

// ibv_qp_state
enum class QpState : uint32_t {
  kReset = 0,
  kInit = 1,
  kRtr = 2,
  kRts = 3,
  kSqd = 4,
  kSqe = 5,
  kErr = 6,
  kUnknown = 7,
};

const char *qp_state_str(QpState s) noexcept;

// ibv_qp_type
enum class QpType : uint32_t { kRc = 2, kUc = 3, kUd = 4 };

// ibv_qp_attr_mask
enum QpAttrMask : uint32_t {
  kQpState = 1u << 0,
  kQpCurState = 1u << 1,
  kQpEnSqdAsyncNotify = 1u << 2,
  kQpAccessFlags = 1u << 3,
  kQpPkeyIndex = 1u << 4,
  kQpPort = 1u << 5,
  kQpQkey = 1u << 6,
  kQpAv = 1u << 7,
  kQpPathMtu = 1u << 8,
  kQpTimeout = 1u << 9,
  kQpRetryCnt = 1u << 10,
  kQpRnrRetry = 1u << 11,
  kQpRqPsn = 1u << 12,
  kQpMaxQpRdAtomic = 1u << 13,
  kQpAltPath = 1u << 14,
  kQpMinRnrTimer = 1u << 15,
  kQpSqPsn = 1u << 16,
  kQpMaxDestRdAtomic = 1u << 17,
  kQpPathMigState = 1u << 18,
  kQpCap = 1u << 19,
  kQpDestQpn = 1u << 20,
  kQpRateLimit = 1u << 25,
};

// ibv_mtu
enum class Mtu : uint32_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };

constexpr uint32_t mtu_bytes(Mtu m) noexcept {
  return 128u << static_cast<uint32_t>(m);
}
constexpr bool mtu_valid(Mtu m) noexcept {
  return static_cast<uint32_t>(m) >= 1 && static_cast<uint32_t>(m) <= 5;
}

// ibv_event_type values the engine raises (asynchronous events).
enum class AsyncEvent : uint32_t {
  kCqErr = 0,
  kQpFatal = 1,
  kQpReqErr = 2,
  kQpAccessErr = 3,
  kCommEst = 4,
  kSqDrained = 5,
  kDeviceFatal = 8,  // the daemon's only: an app broke its context's doorbell ring
  kSrqErr = 14,
  kSrqLimitReached = 15,
  kQpLastWqeReached = 16,
};

// Engine limits shared with the shim (device attributes).
inline constexpr uint32_t kMaxSge = 32;            // per WR, send and receive
inline constexpr uint32_t kMaxInline = 512;        // bytes of inline data per send WR
inline constexpr uint32_t kMaxMsgSize = 1u << 31;  // IBTA: 2^31 bytes
// RDMA READ / atomic depth. As responder a QP keeps kMaxRdAtomic responder resources
// (max_dest_rd_atomic, the device's max_qp_rd_atom). As requester it only counts the READ /
// atomic WQEs in flight, so max_rd_atomic (max_qp_init_rd_atom) can follow a peer with more
// responder resources, as Linux rxe (128).
inline constexpr uint32_t kMaxRdAtomic = 16;       // max_qp_rd_atom, max_dest_rd_atomic
inline constexpr uint32_t kMaxInitRdAtomic = 128;  // max_qp_init_rd_atom, max_rd_atomic
inline constexpr uint32_t kMaxWr = 1u << 14;       // per work queue
inline constexpr uint32_t kGrhSize = 40;           // UD receive buffers start with a GRH
inline constexpr uint32_t kDefaultQkeyMsbMask = 0x80000000u;

// ibv_sge
struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

// An address handle's contents: where a UD send goes.
struct AhAttr {
  wire::PathInfo path;
};

// ibv_send_wr, flattened: the engine copies it into its send queue at post time.
// BIND_MW (as the shared ring's slot, include/uroce/abi.h): rkey = the window's current rkey,
// invalidate_rkey = its new rkey, remote_addr / compare_add = the bound range's address and
// length, ah = the MR's lkey, remote_qkey = the window's access flags. LOCAL_INV:
// invalidate_rkey.
struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;
  uint32_t num_sge = 0;
  Sge sg_list[kMaxSge];
  uint32_t imm_data_be = 0;      // ibv_send_wr.imm_data (network order, opaque)
  uint32_t invalidate_rkey = 0;  // SEND_WITH_INV, LOCAL_INV; BIND_MW: the new rkey
  // RDMA READ / WRITE
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  // atomics (remote_addr / rkey above)
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  // UD
  uint32_t ah = 0;  // handle from create_ah
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
};

// ibv_recv_wr
struct RecvWr {
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
  Sge sg_list[kMaxSge];
};

// ibv_wc, every field.
struct Wc {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;  // network order (WITH_IMM); the invalidated rkey (WITH_INV), host order
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;
  uint32_t wc_flags = 0;
  uint16_t pkey_index = 0;
  uint16_t slid = 0;
  uint8_t sl = 0;  // receives: the frame's RoCE L3 type, as mlx5 reports it (below)
  uint8_t dlid_path_bits = 0;
};
inline constexpr uint8_t kWcSlRoceIpv6 = 1, kWcSlRoceIpv4 = 2;  // mlx5 CQE roce_hdr_type

struct QpCap {
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t max_send_sge = 1;
  uint32_t max_recv_sge = 1;
  uint32_t max_inline_data = 0;
};

// ibv_qp_init_attr. Handles are the engine's (CQ, SRQ, PD).
struct QpInitAttr {
  QpType qp_type = QpType::kRc;
  uint32_t pd = 0;
  uint32_t send_cq = 0;
  uint32_t recv_cq = 0;
  uint32_t srq = 0;  // 0: none
  bool has_srq = false;
  QpCap cap;
  bool sq_sig_all = false;
};

// ibv_qp_attr, the fields the engine honours. Address vector = a PathInfo (the daemon resolves
// GID index / MAC), plus the remote QPN.
struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  Mtu path_mtu = Mtu::k1024;
  uint32_t qkey = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  QpCap cap;
  wire::PathInfo ah;  // IBV_QP_AV
  uint16_t pkey_index = 0;
  bool en_sqd_async_notify = false;
  bool sq_draining = false;  // query only
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  uint8_t min_rnr_timer = 0;
  uint8_t port_num = 1;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  uint32_t path_mig_state = 0;
  uint32_t rate_limit_kbps = 0;  // IBV_QP_RATE_LIMIT: the QP's maximum send rate, 0 = none
};

// packet_pacing_caps (ibv_query_device_ex): the IBV_QP_RATE_LIMIT values accepted, in kbit/s,
// besides 0 (no limit), for RC and UC QPs; the pacer (pacer.h) holds them (doc/congestion.md).
constexpr uint32_t kRateLimitMinKbps = 1000;
constexpr uint32_t kRateLimitMaxKbps = 400'000'000;

}  // namespace uroce::transport
