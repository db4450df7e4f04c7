// SPDX-License-Identifier: BSD-3-Clause
#include "transport/qp_state.h"

#include <cerrno>

namespace uroce::transport {

namespace {

constexpr uint32_t kNumStates = 7;  // RESET .. ERR
constexpr uint32_t type_index(QpType t) noexcept {
  return t == QpType::kRc ? 0 : t == QpType::kUc ? 1 : 2;
}

struct Rule {
  bool valid;
  uint32_t req[3];  // RC, UC, UD
  uint32_t opt[3];
};

// Indexed [cur][next]. Transitions absent here are invalid.
constexpr Rule kAny{true, {0, 0, 0}, {0, 0, 0}};

struct Table {
  Rule r[kNumStates][kNumStates] = {};
};

constexpr Table make_table() {
  Table t;
  constexpr uint32_t RESET = 0, INIT = 1, RTR = 2, RTS = 3, SQD = 4, SQE = 5, ERR = 6;
  // Every state may go to RESET and ERR.
  for (uint32_t s = 0; s < kNumStates; ++s) {
    t.r[s][RESET] = kAny;
    t.r[s][ERR] = kAny;
  }
  t.r[RESET][INIT] =
      Rule{true,
           {kQpPkeyIndex | kQpPort | kQpAccessFlags, kQpPkeyIndex | kQpPort | kQpAccessFlags,
            kQpPkeyIndex | kQpPort | kQpQkey},
           {0, 0, 0}};
  t.r[INIT][INIT] =
      Rule{true,
           {0, 0, 0},
           {kQpPkeyIndex | kQpPort | kQpAccessFlags, kQpPkeyIndex | kQpPort | kQpAccessFlags,
            kQpPkeyIndex | kQpPort | kQpQkey}};
  t.r[INIT][RTR] =
      Rule{true,
           {kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer,
            kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn, 0},
           {kQpAltPath | kQpAccessFlags | kQpPkeyIndex, kQpAltPath | kQpAccessFlags | kQpPkeyIndex,
            kQpPkeyIndex | kQpQkey}};
  t.r[RTR][RTS] = Rule{
      true,
      {kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic, kQpSqPsn, kQpSqPsn},
      {kQpCurState | kQpAltPath | kQpAccessFlags | kQpMinRnrTimer | kQpPathMigState,
       kQpCurState | kQpAltPath | kQpAccessFlags | kQpPathMigState, kQpCurState | kQpQkey}};
  t.r[RTS][RTS] =
      Rule{true,
           {0, 0, 0},
           {kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState | kQpMinRnrTimer,
            kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState, kQpCurState | kQpQkey}};
  t.r[RTS][SQD] =
      Rule{true, {0, 0, 0}, {kQpEnSqdAsyncNotify, kQpEnSqdAsyncNotify, kQpEnSqdAsyncNotify}};
  t.r[SQD][RTS] =
      Rule{true,
           {0, 0, 0},
           {kQpCurState | kQpAltPath | kQpAccessFlags | kQpMinRnrTimer | kQpPathMigState,
            kQpCurState | kQpAltPath | kQpAccessFlags | kQpPathMigState, kQpCurState | kQpQkey}};
  t.r[SQD][SQD] = Rule{true,
                       {0, 0, 0},
                       {kQpPort | kQpAv | kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                            kQpMaxQpRdAtomic | kQpMaxDestRdAtomic | kQpAltPath | kQpAccessFlags |
                            kQpPkeyIndex | kQpMinRnrTimer | kQpPathMigState,
                        kQpAv | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpPathMigState,
                        kQpPkeyIndex | kQpQkey}};
  t.r[SQE][RTS] =
      Rule{true,
           {0, 0, 0},
           {kQpCurState | kQpAccessFlags, kQpCurState | kQpAccessFlags, kQpCurState | kQpQkey}};
  return t;
}

constexpr Table kTable = make_table();

// Bits the engine understands at all; anything else (e.g. IBV_QP_CAP) is refused
// through the table, which never allows them.
constexpr uint32_t kAccessAllowed = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                                    kAccessRemoteAtomic | kAccessMwBind | kAccessRelaxedOrdering;

}  // namespace

QpTransition qp_transition(QpType type, QpState cur, QpState next) noexcept {
  const uint32_t c = static_cast<uint32_t>(cur), n = static_cast<uint32_t>(next);
  if (c >= kNumStates || n >= kNumStates) return {};
  const Rule &r = kTable.r[c][n];
  const uint32_t ti = type_index(type);
  return QpTransition{r.valid, r.req[ti], r.opt[ti]};
}

int qp_check_modify(QpType type, QpState cur, const QpAttr &attr, uint32_t mask,
                    QpState *next_out) noexcept {
  // IBV_QP_CUR_STATE is only a hint, accepted from RTR/RTS/SQD/SQE, and must match.
  if (mask & kQpCurState) {
    if (cur != QpState::kRtr && cur != QpState::kRts && cur != QpState::kSqd &&
        cur != QpState::kSqe)
      return EINVAL;
    if (attr.cur_qp_state != cur) return EINVAL;
  }
  const QpState next = (mask & kQpState) ? attr.qp_state : cur;
  // IBV_QP_RATE_LIMIT (as on ConnectX, outside the IBTA table): RC / UC QPs that are or go to
  // RTR, RTS or SQD; 0 or a rate in packet_pacing_caps' range.
  if (mask & kQpRateLimit) {
    if (type != QpType::kRc && type != QpType::kUc) return EINVAL;
    if (next != QpState::kRtr && next != QpState::kRts && next != QpState::kSqd) return EINVAL;
    if (attr.rate_limit_kbps != 0 &&
        (attr.rate_limit_kbps < kRateLimitMinKbps || attr.rate_limit_kbps > kRateLimitMaxKbps))
      return EINVAL;
    mask &= ~kQpRateLimit;
    if (mask == 0) {
      *next_out = cur;
      return 0;
    }
  }
  const QpTransition tr = qp_transition(type, cur, next);
  if (!tr.valid) return EINVAL;
  if ((mask & tr.required) != tr.required) return EINVAL;
  if (mask & ~(tr.required | tr.optional | kQpState)) return EINVAL;

  // Values (rxe_qp_chk_attr and the device limits).
  if ((mask & kQpPort) && attr.port_num != 1) return EINVAL;
  if ((mask & kQpPkeyIndex) && attr.pkey_index != 0) return EINVAL;
  if ((mask & kQpAccessFlags) && (attr.qp_access_flags & ~kAccessAllowed)) return EINVAL;
  if ((mask & kQpPathMtu) && !mtu_valid(attr.path_mtu)) return EINVAL;
  if ((mask & kQpMaxQpRdAtomic) && attr.max_rd_atomic > kMaxInitRdAtomic) return EINVAL;
  if ((mask & kQpMaxDestRdAtomic) && attr.max_dest_rd_atomic > kMaxRdAtomic) return EINVAL;
  if ((mask & kQpTimeout) && attr.timeout > 31) return EINVAL;
  if ((mask & kQpRetryCnt) && attr.retry_cnt > 7) return EINVAL;
  if ((mask & kQpRnrRetry) && attr.rnr_retry > 7) return EINVAL;
  if ((mask & kQpMinRnrTimer) && attr.min_rnr_timer > 31) return EINVAL;
  if ((mask & kQpDestQpn) && attr.dest_qp_num > 0xFFFFFF) return EINVAL;
  if ((mask & kQpPathMigState) && attr.path_mig_state > 2) return EINVAL;
  if (mask & kQpAv) {
    if (attr.ah.sgid.is_v4mapped() != attr.ah.dgid.is_v4mapped()) return EINVAL;
  }
  *next_out = next;
  return 0;
}

const char *qp_state_str(QpState s) noexcept {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kSqd:
      return "SQD";
    case QpState::kSqe:
      return "SQE";
    case QpState::kErr:
      return "ERR";
    case QpState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

const char *wc_status_str(WcStatus s) noexcept {
  static constexpr const char *kNames[] = {"success",
                                           "local length error",
                                           "local QP operation error",
                                           "local EE context operation error",
                                           "local protection error",
                                           "Work Request Flushed Error",
                                           "memory management operation error",
                                           "bad response error",
                                           "local access error",
                                           "remote invalid request error",
                                           "remote access error",
                                           "remote operation error",
                                           "transport retry counter exceeded",
                                           "RNR retry counter exceeded",
                                           "local RDD violation error",
                                           "remote invalid RD request",
                                           "operation aborted",
                                           "invalid EE context number",
                                           "invalid EE context state",
                                           "fatal error",
                                           "response timeout error",
                                           "general error"};
  const auto i = static_cast<uint32_t>(s);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "unknown";
}

}  // namespace uroce::transport
