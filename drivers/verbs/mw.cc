// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: memory windows (the context's alloc_mw / dealloc_mw / bind_mw ops). The
// daemon allocates a window (ctl kAllocMw) and the engine binds it when the bind WR reaches
// the head of the QP's send queue (lib/transport/mw.h). ibv_bind_mw (type 1) is a BIND_MW WR
// posted on the QP, as rdma-core's rxe provider does: the window's next rkey is
// ibv_inc_rkey(mw->rkey), written to mw->rkey once the WR is posted (if the bind then
// completes in error, the app restores it, as with rxe).
#include <errno.h>

#include <new>

#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

namespace uroce::verbs {

ibv_mw *alloc_mw_op(ibv_pd *pd, ibv_mw_type type) {
  if (pd == nullptr) return fail_null<ibv_mw>(EINVAL);
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) return fail_null<ibv_mw>(EINVAL);
  auto *mw = new (std::nothrow) ibv_mw();
  if (mw == nullptr) return fail_null<ibv_mw>(ENOMEM);
  uint32_t rkey = 0;
  const int rc = ctl_call(ctx_of(pd->context), [&](client::Context &k) {
    return k.alloc_mw(pd_handle(pd), static_cast<uint32_t>(type), &rkey);
  });
  if (rc) {
    delete mw;
    return fail_null<ibv_mw>(rc);
  }
  mw->context = pd->context;
  mw->pd = pd;
  mw->rkey = rkey;
  mw->handle = rkey;
  mw->type = type;
  return mw;
}

int dealloc_mw_op(ibv_mw *mw) {
  if (mw == nullptr) return EINVAL;
  const int rc =
      ctl_call(ctx_of(mw->context), [&](client::Context &k) { return k.dealloc_mw(mw->rkey); });
  if (rc) return rc;
  delete mw;
  return 0;
}

int bind_mw_op(ibv_qp *qp, ibv_mw *mw, ibv_mw_bind *b) {
  // verbs.h's ibv_bind_mw checked the type (1), the MR / range pairing and the MR's PD.
  if (qp == nullptr || mw == nullptr || b == nullptr) return EINVAL;
  if (b->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED) return EINVAL;  // as rxe
  ibv_send_wr wr{};
  wr.wr_id = b->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = b->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = b->bind_info;
  ibv_send_wr *bad = nullptr;
  const int rc = qp->context->ops.post_send(qp, &wr, &bad);
  if (rc) return rc;
  mw->rkey = wr.bind_mw.rkey;
  return 0;
}

}  // namespace uroce::verbs
