// SPDX-License-Identifier: BSD-3-Clause
// The QP state machine (IBTA 10.3.1, figure 124): RESET -> INIT -> RTR -> RTS <-> SQD,
// RTS -> SQE -> RTS, any -> ERR, any -> RESET; and, per transition and QP type, the attribute
// mask bits that are required and those that are allowed (the table of the Linux kernel's
// ib_modify_qp_is_ok(), which rdma-core users and rxe obey). A missing required bit, a bit that
// is neither required nor allowed, an illegal transition or an out-of-range value fails the
// modify with EINVAL and leaves the QP untouched.
#pragma once

#include <cstdint>

#include "transport/verbs_types.h"

namespace uroce::transport {

struct QpTransition {
  bool valid = false;
  uint32_t required = 0;  // mask bits that must be set (besides IBV_QP_STATE)
  uint32_t optional = 0;  // mask bits that may be set
};

// The rule for cur -> next on a QP of the given type.
QpTransition qp_transition(QpType type, QpState cur, QpState next) noexcept;

// Checks a modify request without applying it: the transition, the mask and every value the
// mask selects. `cur` is the QP's state now. Returns 0 or EINVAL. `next_out` receives the state
// the QP will be in (the current one when IBV_QP_STATE is not in the mask).
int qp_check_modify(QpType type, QpState cur, const QpAttr &attr, uint32_t mask,
                    QpState *next_out) noexcept;

}  // namespace uroce::transport
