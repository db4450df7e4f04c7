// SPDX-License-Identifier: BSD-3-Clause
#include "transport/mw.h"

#include <atomic>
#include <cerrno>

namespace uroce::transport {

namespace {

// Every field is read and written through relaxed atomics: readers race with writers by
// design (the seqlock discards what they read meanwhile).
template <class T>
T ld(const T &v) noexcept {
  return std::atomic_ref<T>(const_cast<T &>(v)).load(std::memory_order_relaxed);
}
template <class T>
void st(T &v, T x) noexcept {
  std::atomic_ref<T>(v).store(x, std::memory_order_relaxed);
}

uint32_t slots_for(uint32_t cap) noexcept {
  uint32_t n = 2;
  while (n < 2 * cap)
    n <<= 1;
  return n;
}

// Local write is accepted and means nothing for a window (rdma-core's tests pass it; rxe
// accepts it).
constexpr uint32_t kMwAccess =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

}  // namespace

MwTable::MwTable(uint32_t capacity, uint64_t seed)
    : cap_(capacity < (1u << 22) ? capacity : (1u << 22)),
      mask_(slots_for(cap_) - 1),
      rng_(seed ? util::Csprng(seed ^ 0x4D57'0000'0000'0000ull) : util::Csprng()),
      mw_(new MemoryWindow[mask_ + 1]()) {}

bool MwTable::try_lock(MemoryWindow &w) noexcept {
  std::atomic_ref<uint32_t> s(w.seq);
  uint32_t cur = s.load(std::memory_order_relaxed);
  if (cur & 1) return false;
  if (!s.compare_exchange_strong(cur, cur + 1, std::memory_order_acquire)) return false;
  std::atomic_thread_fence(std::memory_order_release);  // the odd seq before the field stores
  return true;
}

void MwTable::lock(MemoryWindow &w) noexcept {
  while (!try_lock(w)) {  // control thread only: a worker holds a slot for a few stores
  }
}

void MwTable::unlock(MemoryWindow &w) noexcept {
  std::atomic_ref<uint32_t>(w.seq).fetch_add(1, std::memory_order_release);
}

bool MwTable::snapshot(uint32_t rkey, MemoryWindow *out) const noexcept {
  const MemoryWindow &w = slot(rkey);
  std::atomic_ref<uint32_t> s(const_cast<uint32_t &>(w.seq));
  for (int tries = 0; tries < 64; ++tries) {
    const uint32_t s1 = s.load(std::memory_order_acquire);
    if (s1 & 1) continue;
    out->id = ld(w.id);
    out->key = ld(w.key);
    out->pd = ld(w.pd);
    out->qpn = ld(w.qpn);
    out->mr_key = ld(w.mr_key);
    out->access = ld(w.access);
    out->type = ld(w.type);
    out->state = ld(w.state);
    out->va = ld(w.va);
    out->length = ld(w.length);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.load(std::memory_order_relaxed) == s1) {
      out->seq = s1;
      return out->state != MemoryWindow::State::kUnused && out->key == rkey;
    }
  }
  return false;
}

bool MwTable::id_live(uint32_t id) const noexcept {
  const MemoryWindow &w = mw_[id & mask_];
  return ld(w.state) != MemoryWindow::State::kUnused && ld(w.id) == id;
}

int MwTable::alloc(uint32_t pd, MwType type, const MrTable &mrs, uint32_t *rkey) noexcept {
  if (in_use_ >= cap_) return ENOMEM;
  // At least half the slots are free: ~2 draws (an id shadowed by an MR key is rare).
  for (;;) {
    const uint32_t r = rng_.next_u32();
    const uint32_t id = r >> 8;
    if (id != 0 && id == ld(mw_[id & mask_].id)) continue;  // the slot's next id differs
    if (alloc_with_id(id, static_cast<uint8_t>(r), pd, type, mrs, rkey) == 0) return 0;
  }
}

int MwTable::alloc_with_id(uint32_t id, uint8_t tag, uint32_t pd, MwType type, const MrTable &mrs,
                           uint32_t *rkey) noexcept {
  if (id == 0 || id >= (1u << 24)) return EINVAL;
  if (in_use_ >= cap_) return ENOMEM;
  MemoryWindow &w = mw_[id & mask_];
  if (ld(w.state) != MemoryWindow::State::kUnused) return EBUSY;
  for (uint32_t t = 0; t < 256; ++t)
    if (mrs.find((id << 8) | t) != nullptr) return EBUSY;
  {
    lock(w);
    st(w.id, id);
    st(w.key, (id << 8) | tag);
    st(w.pd, pd);
    st(w.qpn, 0u);
    st(w.mr_key, 0u);
    st(w.access, 0u);
    st(w.type, type);
    st(w.va, uint64_t{0});
    st(w.length, uint64_t{0});
    st(w.state, type == MwType::kType1 ? MemoryWindow::State::kValid : MemoryWindow::State::kFree);
    unlock(w);
  }
  ++in_use_;
  *rkey = ld(w.key);
  return 0;
}

int MwTable::dealloc(uint32_t rkey, uint32_t *pd_out) noexcept {
  MemoryWindow &w = slot(rkey);
  if (ld(w.state) == MemoryWindow::State::kUnused || ld(w.id) != (rkey >> 8)) return EINVAL;
  lock(w);
  *pd_out = ld(w.pd);
  st(w.state, MemoryWindow::State::kUnused);
  st(w.length, uint64_t{0});
  st(w.mr_key, 0u);
  unlock(w);
  --in_use_;
  return 0;
}

int MwTable::bind(const MwBind &b, uint32_t qp_pd, uint32_t qpn, const MrTable &mrs) noexcept {
  MemoryWindow &w = slot(b.mw_rkey);
  if (!try_lock(w)) return EINVAL;  // another QP binds it at this instant
  int rc = EINVAL;
  const MemoryWindow::State s = ld(w.state);
  const MwType type = ld(w.type);
  const uint32_t key = ld(w.key);
  do {
    if (s == MemoryWindow::State::kUnused || key != b.mw_rkey || ld(w.pd) != qp_pd) break;
    if (type == MwType::kType1 ? s != MemoryWindow::State::kValid : s != MemoryWindow::State::kFree)
      break;
    if (type == MwType::kType2 && (b.length == 0 || (b.new_rkey & 0xff) == (key & 0xff))) break;
    if (b.access & ~kMwAccess) break;  // zero-based windows are not provided
    if (b.length != 0) {
      uint8_t *host = nullptr;
      if (mrs.check(b.mr_key, qp_pd, b.va, b.length, kAccessMwBind, &host) != MrCheck::kOk) break;
      const MemoryRegion *mr = mrs.find(b.mr_key);
      if (mr == nullptr) break;
      if ((b.access & (kAccessRemoteWrite | kAccessRemoteAtomic)) &&
          !(ld(mr->access) & kAccessLocalWrite))
        break;
    }
    st(w.key, (key & ~0xffu) | (b.new_rkey & 0xff));
    st(w.access, b.access);
    st(w.va, b.length ? b.va : uint64_t{0});
    st(w.length, b.length);
    st(w.mr_key, b.length ? b.mr_key : 0u);
    st(w.qpn, type == MwType::kType2 ? qpn : 0u);
    st(w.state, MemoryWindow::State::kValid);
    rc = 0;
  } while (false);
  unlock(w);
  return rc;
}

int MwTable::invalidate(uint32_t rkey, uint32_t pd, uint32_t qpn, bool remote) noexcept {
  MemoryWindow &w = slot(rkey);
  if (!try_lock(w)) return EINVAL;
  int rc = EINVAL;
  if (ld(w.state) == MemoryWindow::State::kValid && ld(w.key) == rkey &&
      ld(w.type) == MwType::kType2 && ld(w.pd) == pd && (!remote || ld(w.qpn) == qpn)) {
    st(w.state, MemoryWindow::State::kFree);
    st(w.access, 0u);
    st(w.va, uint64_t{0});
    st(w.length, uint64_t{0});
    st(w.mr_key, 0u);
    st(w.qpn, 0u);
    rc = 0;
  }
  unlock(w);
  return rc;
}

MrCheck MwTable::check(uint32_t rkey, uint32_t pd, uint32_t qpn, uint64_t va, uint64_t len,
                       uint32_t need, const MrTable &mrs, uint8_t **host) const noexcept {
  MemoryWindow m;
  if (!snapshot(rkey, &m) || m.state != MemoryWindow::State::kValid || m.length == 0)
    return MrCheck::kBadKey;
  if (m.pd != pd || (m.type == MwType::kType2 && m.qpn != qpn)) return MrCheck::kWrongPd;
  if ((m.access & need) != need) return MrCheck::kNoAccess;
  if (va < m.va || len > m.length || va - m.va > m.length - len) return MrCheck::kOutOfBounds;
  // The bytes are the MR's: it may have been deregistered or invalidated since the bind.
  return mrs.check(m.mr_key, pd, va, len, 0, host);
}

}  // namespace uroce::transport
