// SPDX-License-Identifier: BSD-3-Clause
// drivers/verbs: protection domains and memory regions.
#include <errno.h>

#include <cstring>
#include <new>

#include "mr_map.h"
#include "shim.h"

using namespace uroce;
using namespace uroce::verbs;

// ---------------------------------------------------------------------------------------------
// PD
// ---------------------------------------------------------------------------------------------
UV_EXPORT ibv_pd *ibv_alloc_pd(ibv_context *context) {
  if (context == nullptr) return fail_null<ibv_pd>(EINVAL);
  Context *c = ctx_of(context);
  auto *p = new (std::nothrow) Pd();
  if (p == nullptr) return fail_null<ibv_pd>(ENOMEM);
  const int rc = ctl_call(c, [&](client::Context &k) { return k.alloc_pd(&p->handle); });
  if (rc) {
    delete p;
    return fail_null<ibv_pd>(rc);
  }
  p->pd.context = context;
  p->pd.handle = p->handle;
  return &p->pd;
}

UV_EXPORT int ibv_dealloc_pd(ibv_pd *pd) {
  if (pd == nullptr) return EINVAL;
  Pd *p = reinterpret_cast<Pd *>(pd);
  const int rc =
      ctl_call(ctx_of(pd->context), [&](client::Context &k) { return k.dealloc_pd(p->handle); });
  if (rc) return rc;
  delete p;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// MR (mr_map.h: the page range is remapped onto the process's memfd at the same address)
// ---------------------------------------------------------------------------------------------
namespace {
// Remaps [addr, addr + length) onto the process's memfd and registers it with the daemon:
// fills m's keys and page range; 0 or an errno (nothing held then).
int register_range(ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access, Mr *m) {
  int fd = -1;
  const uint64_t a = reinterpret_cast<uintptr_t>(addr);
  int rc = Remapper::get().acquire(a, length, &fd, &m->page_start, &m->page_end);
  if (rc) return rc;
  ctl::RegMrPayload p{};
  p.pd = pd_handle(pd);
  p.access = access;
  p.offset = a;  // the memfd's offset = the virtual address
  p.app_va = iova;
  p.length = length;
  rc = ctl_call(ctx_of(pd->context),
                [&](client::Context &k) { return k.reg_mr_fd(fd, p, &m->cmr); });
  if (rc) Remapper::get().release(m->page_start, m->page_end);
  return rc;
}

void fill_ibv_mr(Mr *m, ibv_pd *pd, void *addr, size_t length) {
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = m->cmr.lkey;
  m->mr.lkey = m->cmr.lkey;
  m->mr.rkey = m->cmr.rkey;
}

ibv_mr *reg_mr_common(ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access) {
  if (pd == nullptr || addr == nullptr || length == 0) return fail_null<ibv_mr>(EINVAL);
  // Optional access flags (IBV_ACCESS_OPTIONAL_RANGE, e.g. RELAXED_ORDERING from perftest)
  // are hints a device may ignore; uroce ignores them.
  access &= ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  constexpr unsigned kOk = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                           IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB | IBV_ACCESS_MW_BIND;
  if (access & ~kOk) return fail_null<ibv_mr>(EOPNOTSUPP);  // ON_DEMAND, FLUSH_*
  auto *m = new (std::nothrow) Mr();
  if (m == nullptr) return fail_null<ibv_mr>(ENOMEM);
  const int rc = register_range(pd, addr, length, iova, access, m);
  if (rc) {
    delete m;
    return fail_null<ibv_mr>(rc);
  }
  m->access = access;
  fill_ibv_mr(m, pd, addr, length);
  return &m->mr;
}
}  // namespace

#undef ibv_reg_mr
UV_EXPORT ibv_mr *ibv_reg_mr(ibv_pd *pd, void *addr, size_t length, int access) {
  return reg_mr_common(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                       static_cast<unsigned>(access));
}

#undef ibv_reg_mr_iova
UV_EXPORT ibv_mr *ibv_reg_mr_iova(ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                  int access) {
  return reg_mr_common(pd, addr, length, iova, static_cast<unsigned>(access));
}

UV_EXPORT ibv_mr *ibv_reg_mr_iova2(ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                   unsigned int access) {
  return reg_mr_common(pd, addr, length, iova, access);
}

UV_EXPORT ibv_mr *ibv_reg_dmabuf_mr(ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
                                    int fd, int access) {
  (void)pd, (void)offset, (void)length, (void)iova, (void)fd, (void)access;
  return fail_null<ibv_mr>(EOPNOTSUPP);  // no device memory to import from
}

// IBV_REREG_MR_CHANGE_TRANSLATION: the new range is registered (with the new PD and access
// when those change too; new keys, as "deregister then register" allows), then the old
// registration is dropped; if the new one cannot be made the old MR stays valid
// (IBV_REREG_MR_ERR_INPUT, errno set). A change of PD and / or access alone is made in place
// by the daemon and keeps the keys, as rdma-core's providers (mlx5, rxe) do.
UV_EXPORT int ibv_rereg_mr(ibv_mr *mr, int flags, ibv_pd *pd, void *addr, size_t length,
                           int access) {
  auto input_error = [](int e) {
    errno = e;
    return IBV_REREG_MR_ERR_INPUT;
  };
  if (mr == nullptr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
      ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (addr == nullptr || length == 0)) ||
      (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)))  // rdma-core's checks
    return input_error(EINVAL);
  if (flags == 0) return 0;
  Mr *m = reinterpret_cast<Mr *>(mr);
  ibv_pd *npd = mr->pd;
  if (flags & IBV_REREG_MR_CHANGE_PD) {
    if (pd == nullptr || pd->context != mr->context) return input_error(EINVAL);
    npd = pd;
  }
  unsigned nacc = m->access;
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
    nacc = static_cast<unsigned>(access) & ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
    constexpr unsigned kOk = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                             IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                             IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB | IBV_ACCESS_MW_BIND;
    if (nacc & ~kOk) return input_error(EOPNOTSUPP);  // ON_DEMAND, FLUSH_*
  }
  if (!(flags & IBV_REREG_MR_CHANGE_TRANSLATION)) {
    const int rc = ctl_call(ctx_of(mr->context), [&](client::Context &k) {
      return k.rereg_mr(m->cmr, pd_handle(npd), nacc);
    });
    if (rc) return input_error(rc);
    m->access = nacc;
    mr->pd = npd;
    return 0;
  }
  Mr fresh;
  int rc = register_range(npd, addr, length, reinterpret_cast<uintptr_t>(addr), nacc, &fresh);
  if (rc == 0) {
    rc = ctl_call(ctx_of(mr->context), [&](client::Context &k) { return k.dereg_mr(m->cmr); });
    if (rc) {  // the old one stays: drop the new one
      ctl_call(ctx_of(mr->context), [&](client::Context &k) { return k.dereg_mr(fresh.cmr); });
      Remapper::get().release(fresh.page_start, fresh.page_end);
    }
  }
  if (rc) return input_error(rc);
  Remapper::get().release(m->page_start, m->page_end);
  m->cmr = fresh.cmr;
  m->page_start = fresh.page_start;
  m->page_end = fresh.page_end;
  m->access = nacc;
  fill_ibv_mr(m, npd, addr, length);
  return 0;
}

UV_EXPORT int ibv_dereg_mr(ibv_mr *mr) {
  if (mr == nullptr) return EINVAL;
  Mr *m = reinterpret_cast<Mr *>(mr);
  const int rc =
      ctl_call(ctx_of(mr->context), [&](client::Context &k) { return k.dereg_mr(m->cmr); });
  if (rc) return rc;
  Remapper::get().release(m->page_start, m->page_end);  // private memory again
  delete m;
  return 0;
}
