// SPDX-License-Identifier: BSD-3-Clause
// Single-producer / single-consumer ring in shared memory (header-only; used by uroced and the
// verbs shim). Layout: abi::RingHeader followed by slot_count slots of slot_size bytes, both
// powers of two, fixed at creation. Indices are free-running 64-bit counters (they never wrap in
// practice, and the arithmetic is modular anyway, which the tests exercise near UINT64_MAX).
//
// Each side keeps its own index in private memory and only *publishes* it to the header, so the
// peer can never rewrite it. The peer's index, read from shared memory, is untrusted: a value
// that runs more than slot_count ahead, or moves backwards, makes the handle "corrupt" (sticky;
// every later call fails with RingError::kCorrupt and no slot is touched). Slot addresses are
// always masked, so no input can make a handle read or write outside the ring.
//
// Each side also caches the peer's last index and reloads it only when the cached value cannot
// satisfy the request, so in steady state the index lines are read once per burst, not per item.
//
// Fast path: no allocation, no locks, no exceptions, no output. All functions are noexcept.
//
// Memory ordering (each acquire names its release):
//  (P) producer: write slots, then prod.store(release)       -- "publish" in commit()
//  (C) consumer: prod.load(acquire) pairs with (P), then read slots, then cons.store(release)
//      -- "retire" in consume()
//  (P') producer: cons.load(acquire) pairs with the consumer's release in consume(), so the
//      consumer's reads of a slot happen-before the producer overwrites it.
// The notification helpers (doorbell, CQ arm) add seq_cst fences; see the comments there and
// doc/ipc.md for the no-lost-wakeup argument.
//
// Untrusted slot *contents*: the producer may keep writing a slot after publishing it. A
// consumer that validates WQE fields must validate a private copy (try_pop/pop_burst copy out;
// with peek()/at() copy before checking), never re-read shared bytes after a check.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "uroce/abi.h"

namespace uroce::shm {

enum class RingError : int {
  kOk = 0,
  kFull,      // push: no free slot
  kEmpty,     // pop: no item
  kCorrupt,   // the peer's index in shared memory is impossible; the handle is now unusable
  kInvalid,   // bad geometry / header / argument (attach, init, consume beyond peek, item size)
  kDetached,  // handle not attached
};

constexpr const char *ring_error_str(RingError e) noexcept {
  switch (e) {
    case RingError::kOk:
      return "ok";
    case RingError::kFull:
      return "full";
    case RingError::kEmpty:
      return "empty";
    case RingError::kCorrupt:
      return "corrupt peer index";
    case RingError::kInvalid:
      return "invalid";
    case RingError::kDetached:
      return "detached";
  }
  return "?";
}

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free);
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);
static_assert(std::atomic_ref<uint64_t>::required_alignment <= alignof(uint64_t));

namespace ring_detail {

constexpr bool is_pow2(uint64_t v) noexcept {
  return v != 0 && (v & (v - 1)) == 0;
}

constexpr uint32_t log2_pow2(uint64_t v) noexcept {
  uint32_t s = 0;
  while ((uint64_t{1} << s) < v)
    ++s;
  return s;
}

// Geometry accepted by every ring: slot size 8..2^20 and count 2..2^31, both powers of two.
constexpr bool valid_geometry(uint32_t slot_size, uint32_t slot_count) noexcept {
  return is_pow2(slot_size) && slot_size >= 8 && slot_size <= (1u << 20) && is_pow2(slot_count) &&
         slot_count >= 2 && slot_count <= (1u << 31);
}

inline std::atomic_ref<uint64_t> ref(uint64_t &v) noexcept {
  return std::atomic_ref<uint64_t>(v);
}
inline std::atomic_ref<uint32_t> ref(uint32_t &v) noexcept {
  return std::atomic_ref<uint32_t>(v);
}

// Checks that `mem` (of `bytes`) holds a ring header matching the expected geometry. Reads only
// immutable line-0 fields; the caller relies on its own expected values afterwards.
inline RingError check_header(const void *mem, size_t bytes, uint32_t slot_size,
                              uint32_t slot_count) noexcept {
  if (mem == nullptr || reinterpret_cast<uintptr_t>(mem) % abi::kCacheLine != 0)
    return RingError::kInvalid;
  if (!valid_geometry(slot_size, slot_count)) return RingError::kInvalid;
  if (bytes < abi::ring_bytes(slot_size, slot_count)) return RingError::kInvalid;
  abi::RingHeader h;
  std::memcpy(&h, mem, sizeof(h));
  if (h.magic != abi::kRingMagic || h.version != abi::kRingVersion ||
      h.header_size != sizeof(abi::RingHeader) || h.slot_size != slot_size ||
      h.slot_count != slot_count || h.data_offset != sizeof(abi::RingHeader))
    return RingError::kInvalid;
  return RingError::kOk;
}

}  // namespace ring_detail

// Types accepted by the typed overloads: trivially copyable, non-pointer, a multiple of 8 bytes
// (so a byte buffer always picks the untyped slot-sized overload, never a 1-byte "item").
// (A concept, so the constraints short-circuit: sizeof is never applied to void.)
template <class T>
concept RingItem = !std::is_void_v<T> && std::is_trivially_copyable_v<T> && !std::is_pointer_v<T> &&
                   (sizeof(T) % 8 == 0);

// Creator side: writes a fresh header into `mem` (64-byte aligned, at least ring_bytes(...)
// long) with both indices at `start_index` (tests start near UINT64_MAX to exercise wrap).
// Must happen before any handle attaches; the memory is typically handed to the peer later
// (fd passing), which orders it.
inline RingError ring_init(void *mem, size_t bytes, uint32_t slot_size, uint32_t slot_count,
                           abi::RingKind kind = abi::RingKind::kNone, uint32_t id = 0,
                           uint64_t start_index = 0) noexcept {
  if (mem == nullptr || reinterpret_cast<uintptr_t>(mem) % abi::kCacheLine != 0)
    return RingError::kInvalid;
  if (!ring_detail::valid_geometry(slot_size, slot_count)) return RingError::kInvalid;
  if (bytes < abi::ring_bytes(slot_size, slot_count)) return RingError::kInvalid;
  auto *h = static_cast<abi::RingHeader *>(mem);
  std::memset(static_cast<void *>(h), 0, sizeof(*h));
  h->magic = abi::kRingMagic;
  h->version = abi::kRingVersion;
  h->header_size = sizeof(abi::RingHeader);
  h->slot_size = slot_size;
  h->slot_count = slot_count;
  h->kind = static_cast<uint32_t>(kind);
  h->id = id;
  h->data_offset = sizeof(abi::RingHeader);
  ring_detail::ref(h->prod).store(start_index, std::memory_order_relaxed);
  ring_detail::ref(h->cons).store(start_index, std::memory_order_relaxed);
  ring_detail::ref(h->taken).store(start_index, std::memory_order_relaxed);
  ring_detail::ref(h->notify).store(abi::kNotifyIdle, std::memory_order_relaxed);
  // Orders the header before whatever publishes `mem` to another thread of this process.
  std::atomic_thread_fence(std::memory_order_release);
  return RingError::kOk;
}

// Common state of both handles.
class RingHandle {
 public:
  bool attached() const noexcept { return hdr_ != nullptr; }
  bool corrupt() const noexcept { return corrupt_; }
  uint32_t slot_size() const noexcept { return slot_size_; }
  uint64_t capacity() const noexcept { return count_; }
  abi::RingHeader *header() const noexcept { return hdr_; }

 protected:
  RingError attach_common(void *mem, size_t bytes, uint32_t slot_size,
                          uint32_t slot_count) noexcept {
    RingError e = ring_detail::check_header(mem, bytes, slot_size, slot_count);
    if (e != RingError::kOk) return e;
    hdr_ = static_cast<abi::RingHeader *>(mem);
    data_ = static_cast<std::byte *>(mem) + sizeof(abi::RingHeader);
    slot_size_ = slot_size;
    shift_ = ring_detail::log2_pow2(slot_size);
    count_ = slot_count;
    mask_ = count_ - 1;
    corrupt_ = false;
    return RingError::kOk;
  }
  std::byte *slot_ptr(uint64_t idx) const noexcept { return data_ + ((idx & mask_) << shift_); }

  // Copies n items between the ring (starting at index idx) and a flat array with `stride`
  // bytes per item, `len` bytes each (len <= slot_size). Contiguous runs use at most two memcpy.
  template <bool kToRing>
  void copy(uint64_t idx, std::byte *flat, size_t n, size_t stride, size_t len) const noexcept {
    if (stride == slot_size_ && len == slot_size_) {
      const uint64_t first = (idx & mask_);
      const size_t run1 = static_cast<size_t>(count_ - first) < n ? count_ - first : n;
      std::byte *s = slot_ptr(idx);
      if constexpr (kToRing) {
        std::memcpy(s, flat, run1 << shift_);
        if (run1 < n) std::memcpy(data_, flat + (run1 << shift_), (n - run1) << shift_);
      } else {
        std::memcpy(flat, s, run1 << shift_);
        if (run1 < n) std::memcpy(flat + (run1 << shift_), data_, (n - run1) << shift_);
      }
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      if constexpr (kToRing)
        std::memcpy(slot_ptr(idx + i), flat + i * stride, len);
      else
        std::memcpy(flat + i * stride, slot_ptr(idx + i), len);
    }
  }

  abi::RingHeader *hdr_ = nullptr;
  std::byte *data_ = nullptr;
  uint64_t count_ = 0;
  uint64_t mask_ = 0;
  uint32_t slot_size_ = 0;
  uint32_t shift_ = 0;
  bool corrupt_ = false;
};

class RingProducer : public RingHandle {
 public:
  // Attaches to an initialized ring. The expected geometry comes from the attacher's own trusted
  // source (the creator's parameters, or a validated descriptor), never from the header alone.
  // The starting indices are read from the header and must be consistent.
  RingError attach(void *mem, size_t bytes, uint32_t slot_size, uint32_t slot_count) noexcept {
    RingError e = attach_common(mem, bytes, slot_size, slot_count);
    if (e != RingError::kOk) return e;
    // Acquire pairs with the consumer's release store in consume() (a re-attach may follow
    // consumption by a previous handle).
    prod_ = ring_detail::ref(hdr_->prod).load(std::memory_order_relaxed);
    cons_cache_ = ring_detail::ref(hdr_->cons).load(std::memory_order_acquire);
    reserved_ = 0;
    if (prod_ - cons_cache_ > count_) {
      hdr_ = nullptr;
      return RingError::kInvalid;
    }
    return RingError::kOk;
  }

  // Free slots, reloading the consumer's index only if the cached one shows fewer than `want`.
  size_t free_slots(size_t want = ~size_t{0}) noexcept {
    if (hdr_ == nullptr || corrupt_) return 0;
    const uint64_t used = prod_ - cons_cache_;
    if (count_ - used >= want) return count_ - used;
    // Acquire pairs with the consumer's release store of cons in consume(): the consumer has
    // finished reading every slot below c before we reuse it.
    const uint64_t c = ring_detail::ref(hdr_->cons).load(std::memory_order_acquire);
    const uint64_t nused = prod_ - c;
    if (nused > used) {  // c moved backwards, or past prod_ (modular: both make nused > used)
      corrupt_ = true;
      return 0;
    }
    cons_cache_ = c;
    return count_ - nused;
  }

  RingError try_push(const void *item) noexcept {
    if (hdr_ == nullptr) return RingError::kDetached;
    if (free_slots(1) == 0) return corrupt_ ? RingError::kCorrupt : RingError::kFull;
    std::memcpy(slot_ptr(prod_), item, slot_size_);
    publish(1);
    return RingError::kOk;
  }

  // Typed push: copies sizeof(T) bytes (must not exceed slot_size) into the next slot.
  template <class T>
  RingError try_push(const T &item) noexcept requires RingItem<T> {
    if (hdr_ == nullptr) return RingError::kDetached;
    if (sizeof(T) > slot_size_) return RingError::kInvalid;
    if (free_slots(1) == 0) return corrupt_ ? RingError::kCorrupt : RingError::kFull;
    std::memcpy(slot_ptr(prod_), &item, sizeof(T));
    publish(1);
    return RingError::kOk;
  }

  // Pushes up to n items of slot_size bytes each from a flat array; returns how many.
  size_t push_burst(const void *items, size_t n) noexcept {
    if (hdr_ == nullptr) return 0;
    const size_t fr = free_slots(n);
    if (n > fr) n = fr;
    if (n == 0) return 0;
    copy<true>(prod_, const_cast<std::byte *>(static_cast<const std::byte *>(items)), n, slot_size_,
               slot_size_);
    publish(n);
    return n;
  }

  template <class T>
  size_t push_burst(const T *items, size_t n) noexcept requires RingItem<T> {
    if (hdr_ == nullptr || sizeof(T) > slot_size_) return 0;
    const size_t fr = free_slots(n);
    if (n > fr) n = fr;
    if (n == 0) return 0;
    copy<true>(prod_, reinterpret_cast<std::byte *>(const_cast<T *>(items)), n, sizeof(T),
               sizeof(T));
    publish(n);
    return n;
  }

  // Zero-copy: reserve up to n slots (returns how many), fill slot(0..k-1), then commit(k).
  size_t reserve(size_t n) noexcept {
    if (hdr_ == nullptr) return 0;
    const size_t fr = free_slots(n);
    reserved_ = n < fr ? n : fr;
    return reserved_;
  }
  void *slot(size_t i) const noexcept { return slot_ptr(prod_ + i); }
  RingError commit(size_t n) noexcept {
    if (hdr_ == nullptr) return RingError::kDetached;
    if (n > reserved_) return RingError::kInvalid;
    publish(n);
    reserved_ = 0;
    return RingError::kOk;
  }

  uint64_t index() const noexcept { return prod_; }
  // Whether the consumer has read every item published (the header's informational `taken`
  // index; with deferred release their slots may still be in use). Tests and diagnostics only.
  bool all_taken() const noexcept {
    return hdr_ != nullptr &&
           ring_detail::ref(hdr_->taken).load(std::memory_order_relaxed) == prod_;
  }

  // ---- Doorbell protocol, app (SQ producer) side --------------------------------------------
  // Call after committing WQEs. Returns true iff the caller must push a Doorbell{qpn} to the
  // lcore's doorbell ring (i.e. this call moved notify from idle to queued).
  //   app:   W(prod) [commit]  ; F_a (seq_cst fence) ; R/RMW(notify)
  //   lcore: W(notify = idle)  ; F_l (seq_cst fence) ; R(prod)       [see RingConsumer]
  // If F_a precedes F_l in the seq_cst order S, the lcore's R(prod) sees our W(prod) and it
  // keeps the QP; otherwise our R(notify) sees its idle store (or a later value). So either the
  // lcore sees the new WQEs or we see idle and ring; a 1 we read is a token whose owner will
  // run the same check after releasing it. No wakeup is lost.
  bool claim_notify() noexcept {
    if (hdr_ == nullptr) return false;
    std::atomic_thread_fence(std::memory_order_seq_cst);  // F_a
    auto n = ring_detail::ref(hdr_->notify);
    if (n.load(std::memory_order_relaxed) != abi::kNotifyIdle) return false;
    return n.exchange(abi::kNotifyQueued, std::memory_order_acq_rel) == abi::kNotifyIdle;
  }

  // ---- CQ arm protocol, lcore (CQ producer) side ---------------------------------------------
  // Call after committing CQEs. Returns true iff the caller must signal the CQ's eventfd; the
  // arm is consumed. `solicited_or_error`: the new completions include a solicited or error
  // one (an arm with kNotifyArmedSolicited fires only then).
  //   lcore: W(prod) ; F ; R/RMW(notify)     app: W(notify = armed) ; F ; R(prod) [poll]
  // Same fence argument as claim_notify: the app either polls the CQE or we see the arm.
  bool take_arm(bool solicited_or_error) noexcept {
    if (hdr_ == nullptr) return false;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    auto n = ring_detail::ref(hdr_->notify);
    uint32_t v = n.load(std::memory_order_relaxed);
    // Bounded: an app rewriting the word concurrently only loses its own event.
    for (int tries = 0; tries < 4; ++tries) {
      if (v == abi::kNotifyIdle) return false;
      if (v == abi::kNotifyArmedSolicited && !solicited_or_error) return false;
      if (v != abi::kNotifyArmedAll && v != abi::kNotifyArmedSolicited) return false;
      if (n.compare_exchange_weak(v, abi::kNotifyIdle, std::memory_order_acq_rel,
                                  std::memory_order_relaxed))
        return true;
    }
    return false;
  }

  // ---- Sleeping consumer (doorbell rings), producer side --------------------------------------
  // Call after pushing. Returns true iff the consumer declared itself asleep and this call took
  // that flag back (the caller then writes the consumer's eventfd; one writer per sleep).
  //   producer: W(prod) [push] ; F (seq_cst) ; R/RMW(notify)
  //   consumer: W(notify = asleep) ; F (seq_cst) ; R(prod) [its last pass before blocking]
  // Either the consumer's last pass sees the item, or this call sees asleep and wakes it.
  bool wake_consumer() noexcept {
    if (hdr_ == nullptr) return false;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    auto n = ring_detail::ref(hdr_->notify);
    if (n.load(std::memory_order_relaxed) != abi::kNotifyAsleep) return false;
    return n.exchange(abi::kNotifyIdle, std::memory_order_relaxed) == abi::kNotifyAsleep;
  }

 private:
  void publish(size_t n) noexcept {
    prod_ += n;
    reserved_ = 0;
    // Release pairs with the consumer's acquire load of prod in available().
    ring_detail::ref(hdr_->prod).store(prod_, std::memory_order_release);
  }

  uint64_t prod_ = 0;        // own index (authoritative, private)
  uint64_t cons_cache_ = 0;  // last validated consumer index
  size_t reserved_ = 0;
};

class RingConsumer : public RingHandle {
 public:
  RingError attach(void *mem, size_t bytes, uint32_t slot_size, uint32_t slot_count) noexcept {
    RingError e = attach_common(mem, bytes, slot_size, slot_count);
    if (e != RingError::kOk) return e;
    cons_ = ring_detail::ref(hdr_->cons).load(std::memory_order_relaxed);
    rel_ = cons_;
    deferred_ = false;
    // Acquire pairs with the producer's release store of prod in publish().
    prod_cache_ = ring_detail::ref(hdr_->prod).load(std::memory_order_acquire);
    peeked_ = 0;
    if (prod_cache_ - cons_ > count_) {
      hdr_ = nullptr;
      return RingError::kInvalid;
    }
    return RingError::kOk;
  }

  // Items available, reloading the producer's index only if the cached one shows fewer than
  // `want`. Validates the untrusted index: it must stay within [prod_cache_, cons_ + count].
  size_t available(size_t want = ~size_t{0}) noexcept {
    if (hdr_ == nullptr || corrupt_) return 0;
    const uint64_t avail = prod_cache_ - cons_;
    if (avail >= want) return avail;
    // Acquire pairs with the producer's release store of prod in publish(): every slot below p
    // is fully written before we read it.
    const uint64_t p = ring_detail::ref(hdr_->prod).load(std::memory_order_acquire);
    const uint64_t navail = p - cons_;
    // Too far ahead of what the app may have in the ring (every slot from the published
    // index on; with deferred release that includes the slots taken and not yet released),
    // behind what was taken, or moved backwards.
    if (p - rel_ > count_ || navail > count_ || navail < avail) {
      corrupt_ = true;
      return 0;
    }
    prod_cache_ = p;
    return navail;
  }

  RingError try_pop(void *out) noexcept {
    if (hdr_ == nullptr) return RingError::kDetached;
    if (available(1) == 0) return corrupt_ ? RingError::kCorrupt : RingError::kEmpty;
    std::memcpy(out, slot_ptr(cons_), slot_size_);
    retire(1);
    peeked_ = 0;
    return RingError::kOk;
  }

  template <class T>
  RingError try_pop(T *out) noexcept requires RingItem<T> {
    if (hdr_ == nullptr) return RingError::kDetached;
    if (sizeof(T) > slot_size_) return RingError::kInvalid;
    if (available(1) == 0) return corrupt_ ? RingError::kCorrupt : RingError::kEmpty;
    std::memcpy(out, slot_ptr(cons_), sizeof(T));
    retire(1);
    peeked_ = 0;
    return RingError::kOk;
  }

  // Pops up to n items (slot_size bytes each) into a flat array; returns how many.
  size_t pop_burst(void *out, size_t n) noexcept {
    if (hdr_ == nullptr) return 0;
    const size_t av = available(n);
    if (n > av) n = av;
    if (n == 0) return 0;
    copy<false>(cons_, static_cast<std::byte *>(out), n, slot_size_, slot_size_);
    retire(n);
    peeked_ = 0;
    return n;
  }

  template <class T>
  size_t pop_burst(T *out, size_t n) noexcept requires RingItem<T> {
    if (hdr_ == nullptr || sizeof(T) > slot_size_) return 0;
    const size_t av = available(n);
    if (n > av) n = av;
    if (n == 0) return 0;
    copy<false>(cons_, reinterpret_cast<std::byte *>(out), n, sizeof(T), sizeof(T));
    retire(n);
    peeked_ = 0;
    return n;
  }

  // In-place access: peek(n) returns how many items (<= n) are readable as at(0..k-1); then
  // consume(m) with m <= k releases them. Copy before validating (see the header comment).
  size_t peek(size_t n) noexcept {
    if (hdr_ == nullptr) return 0;
    const size_t av = available(n);
    peeked_ = n < av ? n : av;
    return peeked_;
  }
  const void *at(size_t i) const noexcept { return slot_ptr(cons_ + i); }
  RingError consume(size_t n) noexcept {
    if (hdr_ == nullptr) return RingError::kDetached;
    if (corrupt_) return RingError::kCorrupt;
    if (n > peeked_) return RingError::kInvalid;
    retire(n);
    peeked_ = 0;
    return RingError::kOk;
  }

  // The index of the next item to take (items before it have been taken).
  uint64_t index() const noexcept { return cons_; }

  // ---- Deferred release (the daemon's send / receive queues) ----------------------------------
  // By default taking items (consume, pop) also releases their slots to the producer. With
  // deferred release, taken slots stay the consumer's until release_to(): a work queue's slot
  // is freed when its work request completes, not when the lcore has read it, so the app can
  // never have more than capacity() requests outstanding (ibv_post_send's ENOMEM, as rxe).
  // Call right after attach().
  void defer_release() noexcept { deferred_ = true; }
  // Items taken and not yet released.
  uint64_t unreleased() const noexcept { return cons_ - rel_; }
  // Releases every taken slot but the last `held` (the WRs still in work); nothing when more
  // are held than are unreleased.
  void release_all_but(uint64_t held) noexcept {
    if (held <= cons_ - rel_) release_to(cons_ - held);
  }
  // Releases every slot before index `idx` (rel_ <= idx <= index(); others are ignored).
  void release_to(uint64_t idx) noexcept {
    if (hdr_ == nullptr || idx - rel_ > cons_ - rel_ || idx == rel_) return;
    rel_ = idx;
    // Release pairs with the producer's acquire load of cons in free_slots().
    ring_detail::ref(hdr_->cons).store(rel_, std::memory_order_release);
  }

  // ---- Doorbell protocol, lcore (SQ consumer) side -------------------------------------------
  // Call when the SQ looks empty and the lcore wants to drop the QP from its active list.
  // Returns true iff the QP must stay active (WQEs arrived meanwhile and this call took the
  // token back); false means the token is released (or, if it returns false with items present,
  // the app has already re-claimed it and a doorbell is on its way).
  //   lcore: W(notify = idle) ; F_l (seq_cst) ; R(prod)   -- pairs with claim_notify()'s F_a.
  bool release_notify() noexcept {
    if (hdr_ == nullptr || corrupt_) return false;
    auto n = ring_detail::ref(hdr_->notify);
    n.store(abi::kNotifyIdle, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // F_l
    if (available(1) == 0) return false;
    return n.exchange(abi::kNotifyQueued, std::memory_order_acq_rel) == abi::kNotifyIdle;
  }

  // ---- CQ arm protocol, app (CQ consumer) side (ibv_req_notify_cq) ---------------------------
  // After arming, the caller polls the CQ once more: anything committed before the lcore saw
  // the arm is found by that poll (fence pairs with take_arm()'s fence).
  void arm(bool solicited_only) noexcept {
    if (hdr_ == nullptr) return;
    ring_detail::ref(hdr_->notify)
        .store(solicited_only ? abi::kNotifyArmedSolicited : abi::kNotifyArmedAll,
               std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

  // ---- Sleeping consumer (doorbell rings), consumer side --------------------------------------
  // set_asleep(true) before the lcore's last pass ahead of blocking (the caller issues the
  // seq_cst fence after setting every flag it owns, then re-reads the rings: see wake_consumer);
  // set_asleep(false) once awake (producers then push without a system call).
  void set_asleep(bool asleep) noexcept {
    if (hdr_ == nullptr) return;
    ring_detail::ref(hdr_->notify)
        .store(asleep ? abi::kNotifyAsleep : abi::kNotifyIdle, std::memory_order_relaxed);
  }

 private:
  void retire(size_t n) noexcept {
    cons_ += n;
    ring_detail::ref(hdr_->taken).store(cons_, std::memory_order_relaxed);  // informational
    if (deferred_) return;  // released later, by release_to()
    rel_ = cons_;
    // Release pairs with the producer's acquire load of cons in free_slots().
    ring_detail::ref(hdr_->cons).store(cons_, std::memory_order_release);
  }

  uint64_t cons_ = 0;        // own index (authoritative, private): the next item to take
  uint64_t rel_ = 0;         // the index published to the producer (rel_ <= cons_)
  bool deferred_ = false;    // see defer_release()
  uint64_t prod_cache_ = 0;  // last validated producer index
  size_t peeked_ = 0;
};

}  // namespace uroce::shm
