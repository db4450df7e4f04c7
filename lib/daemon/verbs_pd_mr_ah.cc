// SPDX-License-Identifier: BSD-3-Clause
// Verbs handlers: protection domains, memory regions, address handles.
#include "daemon/objects.h"

#include <cerrno>

namespace uroce::daemon {

int Daemon::do_alloc_pd(Session &s, ctl::Message &, Reply &r) {
  const uint32_t pd = replicate([](DaemonEngine &e) { return e.create_pd(); },
                                [](DaemonEngine &e, uint32_t h) { e.dealloc_pd(h); });
  if (pd == 0) return -ENOMEM;
  s.pds.insert(pd);
  r.set(ctl::HandlePayload{pd, 0});
  return 0;
}

int Daemon::do_dealloc_pd(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h) || !s.pds.count(h.handle)) return -EINVAL;
  // QPs exist in their owner's engine only: check here so that every engine agrees.
  if (s.pd_qps.count(h.handle)) return -EBUSY;
  int rc = 0;
  run_on(0, [&] { rc = w_[0]->eng->dealloc_pd(h.handle); });
  if (rc) return -rc;
  for (unsigned w = 1; w < w_.size(); ++w)
    run_on(w, [&] { w_[w]->eng->dealloc_pd(h.handle); });
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
  uint32_t lkey = 0, rkey = 0;
  int rc = 0;
  // The first engine draws the key (random, doc/security.md); the others register the region
  // under that key, so every worker finds it by the same lkey / rkey.
  uint32_t minted = 0;
  const uint32_t key = replicate(
      [&](DaemonEngine &e) -> uint32_t {
        uint32_t l = 0, k = 0;
        const int e_rc = minted
                             ? e.reg_mr_with_key(minted, p.pd, host, p.app_va, p.length, p.access)
                             : e.reg_mr(p.pd, host, p.app_va, p.length, p.access, &l, &k);
        if (e_rc) {
          rc = e_rc;
          return 0;
        }
        if (!minted) minted = l;
        return minted;
      },
      [](DaemonEngine &e, uint32_t h) { e.dereg_mr(h); });
  if (key == 0) return rc ? -rc : -EIO;
  lkey = rkey = key;
  s.mr_bytes += map->size();
  s.mrs[lkey] = std::move(map.value());
  r.set(ctl::RegMrReply{lkey, rkey});
  return 0;
}

int Daemon::do_dereg_mr(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h)) return -EINVAL;
  auto it = s.mrs.find(h.handle);
  if (it == s.mrs.end()) return -EINVAL;
  int rc = 0;
  run_on(0, [&] { rc = w_[0]->eng->dereg_mr(h.handle); });
  if (rc) return -rc;
  for (unsigned w = 1; w < w_.size(); ++w)
    run_on(w, [&] { w_[w]->eng->dereg_mr(h.handle); });
  s.mr_bytes -= it->second.size();
  s.mrs.erase(it);
  return 0;
}

// The MR keeps its keys (rdma-core's providers, rxe); every engine changes it in place, the
// first one checking the arguments for all.
int Daemon::do_rereg_mr(Session &s, ctl::Message &m, Reply &) {
  ctl::ReregMrPayload p{};
  if (!m.payload_as(&p) || !s.mrs.count(p.lkey) || !s.pds.count(p.pd)) return -EINVAL;
  int rc = 0;
  run_on(0, [&] { rc = w_[0]->eng->rereg_mr(p.lkey, p.pd, p.access); });
  if (rc) return -rc;
  for (unsigned w = 1; w < w_.size(); ++w)
    run_on(w, [&] { w_[w]->eng->rereg_mr(p.lkey, p.pd, p.access); });
  return 0;
}

int Daemon::do_create_ah(Session &s, ctl::Message &m, Reply &r) {
  ctl::CreateAhPayload p{};
  if (!m.payload_as(&p) || !s.pds.count(p.pd)) return -EINVAL;
  transport::AhAttr a;
  const int rc = path_from_ah(p.attr, &a.path);
  if (rc) return rc;
  const uint32_t ah = replicate([&](DaemonEngine &e) { return e.create_ah(p.pd, a); },
                                [](DaemonEngine &e, uint32_t h) { e.destroy_ah(h); });
  if (ah == 0) return -ENOMEM;
  s.ahs.insert(ah);
  r.set(ctl::HandlePayload{ah, 0});
  return 0;
}

int Daemon::do_destroy_ah(Session &s, ctl::Message &m, Reply &) {
  ctl::HandlePayload h{};
  if (!m.payload_as(&h) || !s.ahs.count(h.handle)) return -EINVAL;
  int rc = 0;
  run_on(0, [&] { rc = w_[0]->eng->destroy_ah(h.handle); });
  if (rc) return -rc;
  for (unsigned w = 1; w < w_.size(); ++w)
    run_on(w, [&] { w_[w]->eng->destroy_ah(h.handle); });
  s.ahs.erase(h.handle);
  return 0;
}

}  // namespace uroce::daemon
