// SPDX-License-Identifier: BSD-3-Clause
// Verbs handlers: protection domains, memory regions, address handles.
#include "daemon/objects.h"

#include <cerrno>

namespace uroce::daemon {

// PDs, MRs and AHs live in the table every worker's engine reads (transport/tables.h): the
// control thread writes it directly. An MR or AH is retired (no worker finds it any more),
// then released after a grace period (grace.h), so no worker can still be using it when its
// slot is reused or its memory unmapped.
int Daemon::do_alloc_pd(Session &s, ctl::Message &, Reply &r) {
  if (const int q = check_quota(s, QuotaKind::kPds)) return q;
  const uint32_t pd = tab_->pds.alloc();
  if (pd == 0) return -ENOMEM;
  s.pds.insert(pd);
  r.set(ctl::HandlePayload{pd, 0});
  return 0;
}

int Daemon::do_dealloc_pd(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h) || !s.pds.count(h.handle)) return -EINVAL;
  // QPs and SRQs hold a reference in the table too; the session's set answers first.
  if (s.pd_qps.count(h.handle)) return -EBUSY;
  if (const int rc = tab_->pds.dealloc(h.handle)) return -rc;
  s.pds.erase(h.handle);
  return 0;
}

int Daemon::do_reg_mr(Session &s, ctl::Message &m, Reply &r) {
  ctl::RegMrPayload p{};
  if (!m.payload_as(&p) || m.nfds != 1 || !s.pds.count(p.pd)) return -EINVAL;
  if (p.length == 0 || p.offset > (uint64_t{1} << 57) || p.length > (uint64_t{1} << 40) ||
      p.app_va + p.length < p.app_va)
    return -EINVAL;
  const uint64_t pages =
      shm::round_up_page(p.offset + p.length) - (p.offset & ~uint64_t{shm::kPageSize - 1});
  if (const int q = check_quota(s, QuotaKind::kMrBytes, pages)) return q;
  // Sealed against shrinking, or the app could truncate it under our mapping (SIGBUS).
  auto fd = shm::Memfd::adopt(std::move(m.fds[0]), p.offset + p.length);
  if (!fd) return -fd.error();
  const uint64_t start = p.offset & ~uint64_t{shm::kPageSize - 1};
  const uint64_t end = shm::round_up_page(p.offset + p.length);
  auto map =
      shm::Mapping::map(fd->fd(), end - start, shm::MapProt::kReadWrite, static_cast<off_t>(start));
  if (!map) return -map.error();
  uint8_t *host = reinterpret_cast<uint8_t *>(map->data()) + (p.offset - start);
  uint32_t key = 0;  // random (doc/security.md); lkey == rkey
  if (const int rc = tab_->reg_mr(p.pd, host, p.app_va, p.length, p.access, &key)) return -rc;
  s.mr_bytes += map->size();
  s.mrs[key] = std::move(map.value());
  r.set(ctl::RegMrReply{key, key});
  return 0;
}

int Daemon::do_dereg_mr(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h)) return -EINVAL;
  auto it = s.mrs.find(h.handle);
  if (it == s.mrs.end()) return -EINVAL;
  if (const int rc = tab_->retire_mr(h.handle)) return -rc;
  // After this no worker touches the region: the reply tells the app it is deregistered.
  synchronize();
  tab_->release_mr(h.handle);
  s.mr_bytes -= it->second.size();
  s.mrs.erase(it);  // unmaps
  return 0;
}

// The MR keeps its keys (rdma-core's providers, rxe); every engine changes it in place, the
// first one checking the arguments for all.
int Daemon::do_rereg_mr(Session &s, ctl::Message &m, Reply &) {
  ctl::ReregMrPayload p{};
  if (!m.payload_as(&p) || !s.mrs.count(p.lkey) || !s.pds.count(p.pd)) return -EINVAL;
  return -tab_->rereg_mr(p.lkey, p.pd, p.access);
}

// Memory windows (transport/mw.h): allocated and freed here, bound and invalidated by the
// workers running the QPs. A window's memory is its MR's, so freeing one needs no grace
// period. They count against the MR quota.
int Daemon::do_alloc_mw(Session &s, ctl::Message &m, Reply &r) {
  ctl::AllocMwPayload p{};
  if (!m.payload_as(&p) || !s.pds.count(p.pd)) return -EINVAL;
  if (p.type != 1 && p.type != 2) return -EINVAL;
  if (const int q = check_quota(s, QuotaKind::kMrs, 0)) return q;  // no bytes
  uint32_t rkey = 0;
  if (const int rc = tab_->alloc_mw(p.pd, static_cast<transport::MwType>(p.type), &rkey))
    return -rc;
  s.mws.insert(rkey >> 8);
  r.set(ctl::HandlePayload{rkey, 0});
  return 0;
}

int Daemon::do_dealloc_mw(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h) || !s.mws.count(h.handle >> 8)) return -EINVAL;
  if (const int rc = tab_->dealloc_mw(h.handle)) return -rc;
  s.mws.erase(h.handle >> 8);
  return 0;
}

int Daemon::do_create_ah(Session &s, ctl::Message &m, Reply &r) {
  ctl::CreateAhPayload p{};
  if (!m.payload_as(&p) || !s.pds.count(p.pd)) return -EINVAL;
  if (const int q = check_quota(s, QuotaKind::kAhs)) return q;
  transport::AhAttr a;
  const int rc = path_from_ah(p.attr, &a.path);
  if (rc) return rc;
  const uint32_t ah = tab_->create_ah(p.pd, a);
  if (ah == 0) return -ENOMEM;
  s.ahs.insert(ah);
  r.set(ctl::HandlePayload{ah, 0});
  return 0;
}

int Daemon::do_destroy_ah(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h) || !s.ahs.count(h.handle)) return -EINVAL;
  if (const int rc = tab_->retire_ah(h.handle)) return -rc;
  synchronize();
  tab_->release_ah(h.handle);
  s.ahs.erase(h.handle);
  return 0;
}

}  // namespace uroce::daemon
