// SPDX-License-Identifier: BSD-3-Clause
#include "client/client.h"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <new>

namespace uroce::client {

namespace {

int ctl_errno(ctl::CtlError e, int io_err) noexcept {
  switch (e) {
    case ctl::CtlError::kOk:
      return 0;
    case ctl::CtlError::kTimeout:
      return ETIMEDOUT;
    case ctl::CtlError::kClosed:
      return ECONNRESET;
    case ctl::CtlError::kVersionMismatch:
      return EPROTO;
    case ctl::CtlError::kIo:
      return io_err ? io_err : EIO;
    default:
      return EPROTO;
  }
}

// Maps a ring the daemon created (fd from the reply) and attaches a handle of type H with the
// geometry the reply announced, after checking it against what this kind of ring must be.
template <class H>
int map_ring(shm::UniqueFd fd, const ctl::RingGeometry &g, shm::Mapping *map, H *h) noexcept {
  if (g.bytes < abi::ring_bytes(g.slot_size, g.slot_count) || g.bytes > (uint64_t{1} << 34))
    return EPROTO;
  auto m = shm::Memfd::adopt(std::move(fd), g.bytes);
  if (!m) return m.error();
  auto mp = shm::Mapping::map(m->fd(), g.bytes);
  if (!mp) return mp.error();
  if (h->attach(mp->addr(), g.bytes, g.slot_size, g.slot_count) != shm::RingError::kOk)
    return EPROTO;
  *map = std::move(mp.value());
  return 0;
}

}  // namespace

int Buffer::create(size_t len, Buffer *out) noexcept {
  if (len == 0) return EINVAL;
  const size_t bytes = shm::round_up_page(len);
  auto r = shm::SharedRegion::create("uroce-mr", bytes);
  if (!r) return r.error();
  out->memfd = std::move(r->memfd);
  out->map = std::move(r->map);
  return 0;
}

int Context::open(const char *path, const char *name, std::unique_ptr<Context> *out,
                  int timeout_ms) noexcept {
  std::unique_ptr<Context> c(new (std::nothrow) Context());
  if (!c || !c->msg_) return ENOMEM;
  c->timeout_ms_ = timeout_ms;
  int io = 0;
  const ctl::CtlError e = ctl::Client::connect(path, name, timeout_ms, &c->ctl_, &io);
  if (e != ctl::CtlError::kOk) return ctl_errno(e, io);
  for (const ctl::VerbsSpec &s : ctl::kVerbsSpecs)
    c->ctl_.types().add(
        {static_cast<uint16_t>(s.type | ctl::kReplyBit), s.rep_min, s.rep_max, s.rep_fds});
  ctl::Message &m = *c->msg_;
  int rc = c->call(ctl::kOpenContext, nullptr, 0, nullptr, 0, &m);
  if (rc) return rc;
  ctl::OpenContextReply rep{};
  const ctl::RingGeometry &g = rep.doorbell;
  if (!m.payload_as(&rep) || m.nfds != 3 || g.slot_size != sizeof(abi::Doorbell) ||
      rep.doorbell_rings == 0 || rep.doorbell_rings > abi::kMaxDoorbellRings ||
      g.bytes % abi::kCacheLine != 0 || g.bytes < abi::ring_bytes(g.slot_size, g.slot_count) ||
      g.bytes > (uint64_t{1} << 28))
    return EPROTO;
  // The doorbell rings: one memfd, ring w at w * g.bytes (uroce/ctl_verbs.h).
  c->db_.reset(new (std::nothrow) DbRing[rep.doorbell_rings]);
  if (!c->db_) return ENOMEM;
  auto dm = shm::Memfd::adopt(std::move(m.fds[0]), g.bytes * rep.doorbell_rings);
  if (!dm) return dm.error();
  auto dmap = shm::Mapping::map(dm->fd(), g.bytes * rep.doorbell_rings);
  if (!dmap) return dmap.error();
  for (uint32_t w = 0; w < rep.doorbell_rings; ++w)
    if (c->db_[w].ring.attach(static_cast<uint8_t *>(dmap->addr()) + w * g.bytes, g.bytes,
                              g.slot_size, g.slot_count) != shm::RingError::kOk)
      return EPROTO;
  c->db_map_ = std::move(dmap.value());
  c->db_rings_ = rep.doorbell_rings;
  auto ev = shm::EventFd::adopt(std::move(m.fds[1]));
  if (!ev) return ev.error();
  c->async_ev_ = std::move(ev.value());
  auto dbe = shm::EventFd::adopt(std::move(m.fds[2]));
  if (!dbe) return dbe.error();
  c->db_[0].ev = std::move(dbe.value());
  *out = std::move(c);
  return 0;
}

int Context::probe(const char *path, const char *name, ctl::DeviceAttrPayload *out,
                   int timeout_ms) noexcept {
  std::unique_ptr<Context> c(new (std::nothrow) Context());
  if (!c || !c->msg_) return ENOMEM;
  c->timeout_ms_ = timeout_ms;
  int io = 0;
  const ctl::CtlError e = ctl::Client::connect(path, name, timeout_ms, &c->ctl_, &io);
  if (e != ctl::CtlError::kOk) return ctl_errno(e, io);
  for (const ctl::VerbsSpec &s : ctl::kVerbsSpecs)
    c->ctl_.types().add(
        {static_cast<uint16_t>(s.type | ctl::kReplyBit), s.rep_min, s.rep_max, s.rep_fds});
  return c->query_device(out);
}

int Context::call(uint16_t type, const void *payload, size_t len, const int *fds, size_t nfds,
                  ctl::Message *reply) noexcept {
  const ctl::CtlError e = ctl_.call(type, payload, len, fds, nfds, reply, timeout_ms_);
  if (e != ctl::CtlError::kOk) return ctl_errno(e, errno);
  if (reply->hdr.status < 0) return -reply->hdr.status;
  if (reply->hdr.status > 0) return EPROTO;
  return 0;
}

int Context::query_device(ctl::DeviceAttrPayload *out) noexcept {
  const int rc = call(ctl::kQueryDevice, nullptr, 0, nullptr, 0, msg_.get());
  if (rc) return rc;
  return msg_->payload_as(out) ? 0 : EPROTO;
}

int Context::query_port(uint32_t port_num, ctl::PortAttrPayload *out) noexcept {
  const ctl::PortNumPayload p{port_num, 0};
  const int rc = call(ctl::kQueryPort, &p, sizeof p, nullptr, 0, msg_.get());
  if (rc) return rc;
  return msg_->payload_as(out) ? 0 : EPROTO;
}

int Context::query_gid(uint32_t port_num, uint32_t index, uint8_t gid[16]) noexcept {
  const ctl::QueryGidPayload p{port_num, index};
  const int rc = call(ctl::kQueryGid, &p, sizeof p, nullptr, 0, msg_.get());
  if (rc) return rc;
  ctl::GidPayload g{};
  if (!msg_->payload_as(&g)) return EPROTO;
  std::memcpy(gid, g.gid, 16);
  return 0;
}

int Context::alloc_pd(uint32_t *pd) noexcept {
  const int rc = call(ctl::kAllocPd, nullptr, 0, nullptr, 0, msg_.get());
  if (rc) return rc;
  ctl::HandlePayload h{};
  if (!msg_->payload_as(&h)) return EPROTO;
  *pd = h.handle;
  return 0;
}

int Context::dealloc_pd(uint32_t pd) noexcept {
  const ctl::HandlePayload h{pd, 0};
  return call(ctl::kDeallocPd, &h, sizeof h, nullptr, 0, msg_.get());
}

int Context::reg_mr(uint32_t pd, const Buffer &buf, size_t offset, size_t len, uint32_t access,
                    Mr *out) noexcept {
  if (offset > buf.size() || len > buf.size() - offset || len == 0) return EINVAL;
  ctl::RegMrPayload p{};
  p.pd = pd;
  p.access = access;
  p.offset = offset;
  p.app_va = buf.va() + offset;
  p.length = len;
  return reg_mr_fd(buf.memfd.fd(), p, out);
}

int Context::reg_mr_fd(int fd, const ctl::RegMrPayload &p, Mr *out) noexcept {
  const int rc = call(ctl::kRegMr, &p, sizeof p, &fd, 1, msg_.get());
  if (rc) return rc;
  ctl::RegMrReply r{};
  if (!msg_->payload_as(&r)) return EPROTO;
  out->lkey = r.lkey;
  out->rkey = r.rkey;
  out->addr = p.app_va;
  out->length = p.length;
  return 0;
}

int Context::dereg_mr(const Mr &mr) noexcept {
  const ctl::HandlePayload h{mr.lkey, 0};
  return call(ctl::kDeregMr, &h, sizeof h, nullptr, 0, msg_.get());
}

int Context::rereg_mr(const Mr &mr, uint32_t pd, uint32_t access) noexcept {
  const ctl::ReregMrPayload p{mr.lkey, pd, access, 0};
  return call(ctl::kReregMr, &p, sizeof p, nullptr, 0, msg_.get());
}

int Context::alloc_mw(uint32_t pd, uint32_t type, uint32_t *rkey) noexcept {
  const ctl::AllocMwPayload p{pd, type};
  const int rc = call(ctl::kAllocMw, &p, sizeof p, nullptr, 0, msg_.get());
  if (rc) return rc;
  ctl::HandlePayload h{};
  if (!msg_->payload_as(&h)) return EPROTO;
  *rkey = h.handle;
  return 0;
}

int Context::dealloc_mw(uint32_t rkey) noexcept {
  const ctl::HandlePayload h{rkey, 0};
  return call(ctl::kDeallocMw, &h, sizeof h, nullptr, 0, msg_.get());
}

int Context::create_cq(uint32_t cqe, std::unique_ptr<Cq> *out) noexcept {
  const ctl::CreateCqPayload p{cqe, 0};
  ctl::Message &m = *msg_;
  int rc = call(ctl::kCreateCq, &p, sizeof p, nullptr, 0, &m);
  if (rc) return rc;
  ctl::CreateCqReply r{};
  std::unique_ptr<Cq> cq(new (std::nothrow) Cq());
  if (!cq) return ENOMEM;
  if (!m.payload_as(&r) || m.nfds != 2 || r.ring.slot_size != sizeof(abi::Cqe)) {
    const ctl::HandlePayload h{r.cq, 0};
    call(ctl::kDestroyCq, &h, sizeof h, nullptr, 0, msg_.get());
    return EPROTO;
  }
  shm::UniqueFd evfd = std::move(m.fds[1]);
  rc = map_ring(std::move(m.fds[0]), r.ring, &cq->map, &cq->ring);
  if (rc == 0) {
    auto ev = shm::EventFd::adopt(std::move(evfd));
    if (ev)
      cq->ev = std::move(ev.value());
    else
      rc = ev.error();
  }
  if (rc) {
    const ctl::HandlePayload h{r.cq, 0};
    call(ctl::kDestroyCq, &h, sizeof h, nullptr, 0, msg_.get());
    return rc;
  }
  cq->handle = r.cq;
  cq->depth = r.cqe;
  *out = std::move(cq);
  return 0;
}

int Context::destroy_cq(Cq &cq) noexcept {
  const ctl::HandlePayload h{cq.handle, 0};
  return call(ctl::kDestroyCq, &h, sizeof h, nullptr, 0, msg_.get());
}

int Context::resize_cq(Cq &cq, uint32_t cqe) noexcept {
  const ctl::ResizeCqPayload p{cq.handle, cqe};
  ctl::Message &m = *msg_;
  int rc = call(ctl::kResizeCq, &p, sizeof p, nullptr, 0, &m);
  if (rc) return rc;
  ctl::CreateCqReply r{};
  if (!m.payload_as(&r) || m.nfds != 1 || r.cq != cq.handle || r.ring.slot_size != sizeof(abi::Cqe))
    return EPROTO;
  shm::Mapping map;
  shm::RingConsumer ring;
  rc = map_ring(std::move(m.fds[0]), r.ring, &map, &ring);
  if (rc) return rc;
  cq.ring = ring;
  cq.map = std::move(map);  // the old ring's mapping goes
  cq.depth = r.cqe;
  return 0;
}

int Context::create_qp(const ctl::CreateQpPayload &attr, std::unique_ptr<Qp> *out) noexcept {
  ctl::Message &m = *msg_;
  int rc = call(ctl::kCreateQp, &attr, sizeof attr, nullptr, 0, &m);
  if (rc) return rc;
  std::unique_ptr<Qp> qp(new (std::nothrow) Qp());
  if (!qp) return ENOMEM;
  ctl::CreateQpReply r{};
  const bool has_rq = attr.srq == 0;
  const uint32_t nring = has_rq ? 2u : 1u;  // the fds: SQ, RQ, then the doorbell ring's eventfd
  if (!m.payload_as(&r) || m.nfds != nring + 1 || r.sq.slot_size < 128 || r.sq.slot_size > 1024 ||
      (has_rq && (r.rq.slot_size < 64 || r.rq.slot_size > 512))) {
    rc = EPROTO;
  } else {
    rc = map_ring(std::move(m.fds[0]), r.sq, &qp->sq_map, &qp->sq);
    if (rc == 0 && has_rq) rc = map_ring(std::move(m.fds[1]), r.rq, &qp->rq_map, &qp->rq);
    // The eventfd of the worker owning the QP, kept the first time (the same file each time).
    DbRing &d = db_[abi::doorbell_ring(r.qpn, db_rings_)];
    if (rc == 0 && !d.ev.valid()) {
      auto ev = shm::EventFd::adopt(std::move(m.fds[nring]));
      if (ev)
        d.ev = std::move(ev.value());
      else
        rc = ev.error();
    }
  }
  if (rc) {
    const ctl::HandlePayload h{r.qpn, 0};
    if (r.qpn) call(ctl::kDestroyQp, &h, sizeof h, nullptr, 0, msg_.get());
    return rc;
  }
  qp->qpn = r.qpn;
  qp->qp_type = attr.qp_type;
  qp->state = 0;
  qp->caps = r;
  qp->has_rq = has_rq;
  *out = std::move(qp);
  return 0;
}

int Context::modify_qp(Qp &qp, const ctl::QpAttrPayload &attr, uint32_t mask) noexcept {
  ctl::ModifyQpPayload p{};
  p.qpn = qp.qpn;
  p.attr_mask = mask;
  p.attr = attr;
  const int rc = call(ctl::kModifyQp, &p, sizeof p, nullptr, 0, msg_.get());
  if (rc == 0 && (mask & 1u)) qp.state = attr.qp_state;
  return rc;
}

int Context::query_qp(const Qp &qp, ctl::QueryQpReply *out) noexcept {
  const ctl::HandlePayload h{qp.qpn, 0};
  const int rc = call(ctl::kQueryQp, &h, sizeof h, nullptr, 0, msg_.get());
  if (rc) return rc;
  return msg_->payload_as(out) ? 0 : EPROTO;
}

int Context::destroy_qp(Qp &qp) noexcept {
  const ctl::HandlePayload h{qp.qpn, 0};
  return call(ctl::kDestroyQp, &h, sizeof h, nullptr, 0, msg_.get());
}

int Context::create_srq(const ctl::CreateSrqPayload &attr, std::unique_ptr<Srq> *out) noexcept {
  ctl::Message &m = *msg_;
  int rc = call(ctl::kCreateSrq, &attr, sizeof attr, nullptr, 0, &m);
  if (rc) return rc;
  std::unique_ptr<Srq> s(new (std::nothrow) Srq());
  if (!s) return ENOMEM;
  ctl::CreateSrqReply r{};
  if (!m.payload_as(&r) || m.nfds != 1 || r.ring.slot_size < 64 || r.ring.slot_size > 512)
    rc = EPROTO;
  else
    rc = map_ring(std::move(m.fds[0]), r.ring, &s->map, &s->ring);
  if (rc) {
    const ctl::HandlePayload h{r.srq, 0};
    if (r.srq) call(ctl::kDestroySrq, &h, sizeof h, nullptr, 0, msg_.get());
    return rc;
  }
  s->handle = r.srq;
  s->caps = r;
  *out = std::move(s);
  return 0;
}

int Context::destroy_srq(Srq &srq) noexcept {
  const ctl::HandlePayload h{srq.handle, 0};
  return call(ctl::kDestroySrq, &h, sizeof h, nullptr, 0, msg_.get());
}

int Context::modify_srq(Srq &srq, uint32_t srq_limit) noexcept {
  const ctl::ModifySrqPayload p{srq.handle, srq_limit};
  return call(ctl::kModifySrq, &p, sizeof p, nullptr, 0, msg_.get());
}

int Context::create_ah(uint32_t pd, const ctl::AhAttrPayload &attr, uint32_t *ah) noexcept {
  ctl::CreateAhPayload p{};
  p.pd = pd;
  p.attr = attr;
  const int rc = call(ctl::kCreateAh, &p, sizeof p, nullptr, 0, msg_.get());
  if (rc) return rc;
  ctl::HandlePayload h{};
  if (!msg_->payload_as(&h)) return EPROTO;
  *ah = h.handle;
  return 0;
}

int Context::destroy_ah(uint32_t ah) noexcept {
  const ctl::HandlePayload h{ah, 0};
  return call(ctl::kDestroyAh, &h, sizeof h, nullptr, 0, msg_.get());
}

int Context::get_async_events(std::vector<ctl::AsyncEventEntry> *out, uint32_t *lost) noexcept {
  const int rc = call(ctl::kGetAsyncEvents, nullptr, 0, nullptr, 0, msg_.get());
  if (rc) return rc;
  ctl::AsyncEventsReply r{};
  const uint32_t hdr = offsetof(ctl::AsyncEventsReply, events);
  if (msg_->payload_len < hdr) return EPROTO;
  std::memcpy(&r, msg_->payload, msg_->payload_len);
  if (r.count > ctl::kMaxAsyncEvents ||
      msg_->payload_len != hdr + r.count * sizeof(ctl::AsyncEventEntry))
    return EPROTO;
  try {
    out->assign(r.events, r.events + r.count);
  } catch (const std::bad_alloc &) {
    return ENOMEM;
  }
  if (lost) *lost = r.lost;
  return 0;
}

int Context::stats(std::vector<ctl::StatEntry> *out) noexcept {
  try {
    for (int attempt = 0; attempt < 5; ++attempt) {
      out->clear();
      uint32_t first = 0, gen = 0;
      bool restart = false;
      for (;;) {
        const ctl::StatsRequest q{first, 0};
        const int rc = call(ctl::kStats, &q, sizeof q, nullptr, 0, msg_.get());
        if (rc) return rc;
        ctl::StatsReply r{};
        const uint32_t hdr = offsetof(ctl::StatsReply, entries);
        if (msg_->payload_len < hdr) return EPROTO;
        std::memcpy(&r, msg_->payload, msg_->payload_len);
        if (r.count > ctl::kStatsPerReply ||
            msg_->payload_len != hdr + r.count * sizeof(ctl::StatEntry) || r.first != first)
          return EPROTO;
        if (first == 0)
          gen = r.generation;
        else if (r.generation != gen) {
          restart = true;
          break;
        }
        for (uint32_t i = 0; i < r.count; ++i) {
          r.entries[i].name[ctl::kStatNameLen - 1] = '\0';
          out->push_back(r.entries[i]);
        }
        first += r.count;
        if (first >= r.total || r.count == 0) break;
      }
      if (!restart) return 0;
    }
    return EAGAIN;
  } catch (const std::bad_alloc &) {
    return ENOMEM;
  }
}

// ---- data path ----

void Context::ring_doorbell(uint32_t qpn, uint32_t kind) noexcept {
  // Cannot be full: each ring's token allows one outstanding doorbell, and the doorbell ring
  // holds two per QP / SRQ the daemon allows.
  DbRing &r = db_[abi::doorbell_ring(qpn, db_rings_)];
  (void)r.ring.try_push(abi::Doorbell{qpn, kind});
  // The ring's consumer lcore declared itself asleep: wake it (doc/ipc.md, Sleeping consumers).
  if (r.ring.wake_consumer() && r.ev.valid()) r.ev.signal();
}

namespace {
template <class T>
void store_field(uint8_t *slot, size_t off, T v) noexcept {
  std::memcpy(slot + off, &v, sizeof v);
}
}  // namespace

// Validates wr against the QP's slot class and writes it into `slot`; 0 or EINVAL. The header
// is stored field by field into the slot: built on the stack and copied, its pieces were read
// back across the 16-byte stores that wrote them (a store-forwarding stall per WQE).
static int write_send_slot(const Qp &qp, const SendWr &wr, uint8_t *slot) noexcept {
  using H = abi::SendWqeHeader;
  const uint32_t tail = qp.caps.sq.slot_size - sizeof(H);
  const bool inl = (wr.send_flags & (1u << 3)) != 0;  // IBV_SEND_INLINE
  uint64_t inline_len = 0;
  if (inl) {
    for (uint32_t i = 0; i < wr.num_sge; ++i)
      inline_len += wr.sg_list[i].length;
    if (inline_len > tail || inline_len > qp.caps.max_inline_data) return EINVAL;
  } else if (wr.num_sge > tail / sizeof(abi::Sge) || wr.num_sge > qp.caps.max_send_sge) {
    return EINVAL;
  }
  store_field<uint64_t>(slot, offsetof(H, wr_id), wr.wr_id);
  store_field<uint8_t>(slot, offsetof(H, opcode), wr.opcode);
  store_field<uint8_t>(slot, offsetof(H, reserved), 0);
  store_field<uint16_t>(slot, offsetof(H, inline_len), static_cast<uint16_t>(inline_len));
  store_field<uint32_t>(slot, offsetof(H, send_flags), wr.send_flags);
  store_field<uint32_t>(slot, offsetof(H, num_sge), inl ? 0 : wr.num_sge);
  store_field<uint32_t>(slot, offsetof(H, imm_data), wr.imm_data);
  store_field<uint64_t>(slot, offsetof(H, remote_addr), wr.remote_addr);
  store_field<uint32_t>(slot, offsetof(H, rkey), wr.rkey);
  store_field<uint32_t>(slot, offsetof(H, ud_ah), wr.ah);
  store_field<uint64_t>(slot, offsetof(H, compare_add), wr.compare_add);
  store_field<uint64_t>(slot, offsetof(H, swap), wr.swap);
  store_field<uint32_t>(slot, offsetof(H, remote_qpn), wr.remote_qpn);
  store_field<uint32_t>(slot, offsetof(H, remote_qkey), wr.remote_qkey);
  static_assert(sizeof(H) == 64, "every SendWqeHeader field is stored above");
  uint8_t *p = slot + sizeof(H);
  if (inl) {
    for (uint32_t i = 0; i < wr.num_sge; ++i) {
      std::memcpy(p, reinterpret_cast<const void *>(wr.sg_list[i].addr), wr.sg_list[i].length);
      p += wr.sg_list[i].length;
    }
  } else {
    for (uint32_t i = 0; i < wr.num_sge; ++i)
      std::memcpy(p + i * sizeof(abi::Sge), &wr.sg_list[i], sizeof(abi::Sge));
  }
  return 0;
}

int Context::post_send(Qp &qp, const SendWr &wr) noexcept {
  size_t posted = 0;
  return post_send_list(qp, &wr, 1, &posted);
}

int Context::post_send_list(Qp &qp, const SendWr *wrs, size_t n, size_t *posted) noexcept {
  *posted = 0;
  // ibv_post_send refuses RESET, INIT and RTR.
  if (qp.state < 3 || qp.state == 7) return EINVAL;
  if (n == 0) return 0;
  const size_t room = qp.sq.reserve(n);
  // The daemon read these slots last, on its own core: ask for all their lines at once rather
  // than one store miss after the other (the first two lines: header and the first SGEs).
  for (size_t i = 0; i < room; ++i) {
    auto *slot = static_cast<uint8_t *>(qp.sq.slot(i));
    __builtin_prefetch(slot, 1);
    if (qp.caps.sq.slot_size > 64) __builtin_prefetch(slot + 64, 1);
  }
  int rc = 0;
  size_t k = 0;
  for (; k < room; ++k) {
    rc = write_send_slot(qp, wrs[k], static_cast<uint8_t *>(qp.sq.slot(k)));
    if (rc != 0) break;
  }
  if (rc == 0 && k < n) rc = ENOMEM;  // the ring is full
  if (k != 0) {
    // One publish and at most one doorbell for the whole list.
    qp.sq.commit(k);
    if (qp.sq.claim_notify()) ring_doorbell(qp.qpn, abi::kDoorbellSq);
  }
  *posted = k;
  return rc;
}

int Context::post_send_raw(Qp &qp, const void *slot) noexcept {
  if (qp.sq.reserve(1) != 1) return ENOMEM;
  std::memcpy(qp.sq.slot(0), slot, qp.caps.sq.slot_size);
  qp.sq.commit(1);
  if (qp.sq.claim_notify()) ring_doorbell(qp.qpn, abi::kDoorbellSq);
  return 0;
}

int Context::post_recv(Qp &qp, const RecvWr &wr) noexcept {
  if (!qp.has_rq || qp.state == 0) return EINVAL;  // ibv_post_recv refuses RESET
  const uint32_t slot_size = qp.caps.rq.slot_size;
  if (wr.num_sge > (slot_size - sizeof(abi::RecvWqeHeader)) / sizeof(abi::Sge) ||
      wr.num_sge > qp.caps.max_recv_sge)
    return EINVAL;
  if (qp.rq.reserve(1) != 1) return ENOMEM;
  uint8_t *slot = static_cast<uint8_t *>(qp.rq.slot(0));
  const abi::RecvWqeHeader h{wr.wr_id, wr.num_sge, 0};
  std::memcpy(slot, &h, sizeof h);
  if (wr.num_sge) std::memcpy(slot + sizeof h, wr.sg_list, wr.num_sge * sizeof(abi::Sge));
  qp.rq.commit(1);
  if (qp.rq.claim_notify()) ring_doorbell(qp.qpn, abi::kDoorbellRq);
  return 0;
}

int Context::post_srq_recv(Srq &srq, const RecvWr &wr) noexcept {
  const uint32_t slot_size = srq.caps.ring.slot_size;
  if (wr.num_sge > (slot_size - sizeof(abi::RecvWqeHeader)) / sizeof(abi::Sge) ||
      wr.num_sge > srq.caps.max_sge)
    return EINVAL;
  if (srq.ring.reserve(1) != 1) return ENOMEM;
  uint8_t *slot = static_cast<uint8_t *>(srq.ring.slot(0));
  const abi::RecvWqeHeader h{wr.wr_id, wr.num_sge, 0};
  std::memcpy(slot, &h, sizeof h);
  if (wr.num_sge) std::memcpy(slot + sizeof h, wr.sg_list, wr.num_sge * sizeof(abi::Sge));
  srq.ring.commit(1);
  if (srq.ring.claim_notify()) ring_doorbell(abi::kSrqDoorbellBit | srq.handle, abi::kDoorbellRq);
  return 0;
}

int Context::poll_cq(Cq &cq, abi::Cqe *out, int n) noexcept {
  if (n <= 0) return 0;
  return static_cast<int>(cq.ring.pop_burst(out, static_cast<size_t>(n)));
}

void Context::req_notify_cq(Cq &cq, bool solicited_only) noexcept {
  cq.ring.arm(solicited_only);
}

int Context::wait_cq_event(Cq &cq, int timeout_ms) noexcept {
  const int r = cq.ev.wait(timeout_ms);
  if (r <= 0) return r;
  cq.ev.drain();
  return 1;
}

}  // namespace uroce::client
