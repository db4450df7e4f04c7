// SPDX-License-Identifier: BSD-3-Clause
// A hierarchical timing wheel for the transport engine: per-QP retransmit (local ACK timeout,
// 4.096 us x 2^timeout, from microseconds to hours), RNR timers, ACK coalescing, DCQCN timers.
//
// Layout: 11 levels x 64 slots of intrusive circular lists, one 64-bit occupancy bitmap per
// level. Time is counted in ticks (tick = floor(ns / tick_ns)); 11 x 6 bits cover every 64-bit
// tick value, so no expiry is ever out of range. A node with tick t sits at the level of the
// highest base-64 digit in which t differs from the current tick, in the slot of that digit
// (level 0 also holds the current tick's nodes). When the current tick enters a new bucket of a
// level, that bucket's slot is cascaded down. advance() jumps from event to event with the
// bitmaps, so a long idle gap costs O(levels), not O(gap / tick).
//
// Firing is exact, not rounded to ticks: advance(now) fires every armed node whose expiry_ns <=
// now (and never one whose expiry_ns > now), in tick order, FIFO within a tick (nodes that were
// already overdue when armed come first, in no particular order among themselves). The one
// exception keeps a callback that re-arms "at now" from looping: a node armed from inside a
// callback with an expiry in (or before) the tick being processed fires at the next advance()
// call, not in the current one.
//
// Fast path (arm, cancel, advance, next_expiry_hint) does not allocate, throw, lock or print.
// Not thread-safe: a wheel belongs to one lcore.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace uroce::transport {

// Intrusive timer node, embedded in its owner. Zero-initialized means "not armed". The owner
// must cancel an armed node (or destroy / clear() the wheel) before the node goes away.
struct TimerNode {
  TimerNode *next = nullptr, *prev = nullptr;
  uint64_t expiry_ns = 0;
  uint32_t kind = 0;  // free for the owner (which timer of the owner this is)
  bool armed() const noexcept { return next != nullptr; }
};

class TimerWheel {
 public:
  static constexpr unsigned kLevelBits = 6;
  static constexpr unsigned kSlots = 1u << kLevelBits;                     // per level
  static constexpr unsigned kLevels = (64 + kLevelBits - 1) / kLevelBits;  // 11: all of uint64

  // Allocates the slot arrays (the only allocation). tick_ns: resolution (0 is taken as 1);
  // a power of two makes tick arithmetic a shift. start_ns: the initial "now".
  explicit TimerWheel(uint64_t tick_ns = 1024, uint64_t start_ns = 0);
  ~TimerWheel();
  TimerWheel(const TimerWheel &) = delete;
  TimerWheel &operator=(const TimerWheel &) = delete;
  TimerWheel(TimerWheel &&) noexcept = default;  // nodes keep pointing at the same heap lists
  TimerWheel &operator=(TimerWheel &&) = delete;

  // (Re)arms t to fire at expiry_ns; re-arming an armed node moves it. An expiry at or before
  // the last advance() time fires at the next advance().
  void arm(TimerNode *t, uint64_t expiry_ns) noexcept {
    if (t->armed())
      unlink(t);
    else
      ++size_;
    t->expiry_ns = expiry_ns;
    const uint64_t tk = to_tick(expiry_ns);
    if (tk > cur_tick_) {
      place(t, tk);
    } else if (in_advance_) {
      link_tail(&slots_[kDeferred], t);
    } else {
      link_current(t);
    }
  }

  // Disarms t; a no-op if it is not armed.
  void cancel(TimerNode *t) noexcept {
    if (!t->armed()) return;
    unlink(t);
    --size_;
  }

  // Fires every armed node with expiry_ns <= now_ns (see the exception above), calling
  // on_expire(TimerNode *) with the node already disarmed. The callback may arm, re-arm or
  // cancel any node, including the one it was called for; it must not call advance(). Returns
  // how many fired. now_ns going backwards is allowed (fires only what is due at now_ns).
  template <class F>
  uint32_t advance(uint64_t now_ns, F &&on_expire) noexcept {
    uint64_t target = to_tick(now_ns);
    if (target < cur_tick_) target = cur_tick_;
    if (now_ns > now_ns_) now_ns_ = now_ns;
    if (size_ == 0) {
      if (target != cur_tick_) move_empty(target);
      return 0;
    }
    // Fast exit: still in the current tick and nothing in it can be due yet.
    if (target == cur_tick_ && (!slot_bit(0, digit(cur_tick_, 0)) || now_ns < cur_min_)) return 0;

    uint32_t fired = 0;
    in_advance_ = true;
    for (;;) {
      const bool last = cur_tick_ == target;
      if (slot_bit(0, digit(cur_tick_, 0))) {
        if (!last)
          fired += run_current(UINT64_MAX, on_expire);
        else if (now_ns >= cur_min_)
          fired += run_current(now_ns, on_expire);
      }
      if (last) break;
      uint64_t next = next_event_tick();
      if (next > target) next = target;
      move_to(next);
    }
    in_advance_ = false;
    flush_deferred();
    return fired;
  }

  // A lower bound on the earliest expiry of any armed node, UINT64_MAX if none: advance(now)
  // with now < hint fires nothing, and advance(hint) either fires something or raises the hint
  // (it is exact for the current tick after an advance() that scanned it, otherwise the start
  // of the tick or of the wheel bucket the earliest node sits in).
  uint64_t next_expiry_hint() const noexcept {
    if (size_ == 0) return UINT64_MAX;
    if (slots_[kDeferred].next != &slots_[kDeferred]) return now_ns_;  // only inside advance()
    if (slot_bit(0, digit(cur_tick_, 0))) return cur_min_;
    const uint64_t next = next_event_tick();
    if (next == UINT64_MAX) return UINT64_MAX;
    return next * tick_ns_;  // <= some node's expiry_ns, so no overflow
  }

  size_t size() const noexcept { return size_; }
  uint64_t tick_ns() const noexcept { return tick_ns_; }
  // The latest now_ns passed to advance() (or start_ns).
  uint64_t now_ns() const noexcept { return now_ns_; }

  // Disarms every node (not for the fast path: walks every slot).
  void clear() noexcept;
  // clear(), and the wheel is as its constructor left it with start_ns (the tick kept).
  void reset(uint64_t start_ns) noexcept;

 private:
  static constexpr unsigned kWheelSlots = kLevels * kSlots;
  static constexpr unsigned kPending = kWheelSlots;       // list being fired
  static constexpr unsigned kDeferred = kWheelSlots + 1;  // armed in a callback, due now
  static constexpr unsigned kLists = kWheelSlots + 2;

  static constexpr unsigned digit(uint64_t tick, unsigned level) noexcept {
    return static_cast<unsigned>(tick >> (level * kLevelBits)) & (kSlots - 1);
  }
  uint64_t to_tick(uint64_t ns) const noexcept {
    return tick_shift_ >= 0 ? ns >> tick_shift_ : ns / tick_ns_;
  }
  bool slot_bit(unsigned level, unsigned s) const noexcept { return (mask_[level] >> s) & 1; }

  static void link_tail(TimerNode *head, TimerNode *n) noexcept {
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
  }
  // Unlinks n and disarms it; clears the slot's bitmap bit if its list became empty.
  void unlink(TimerNode *n) noexcept {
    TimerNode *p = n->prev, *nx = n->next;
    p->next = nx;
    nx->prev = p;
    n->next = n->prev = nullptr;
    if (p == nx) {  // only the sentinel is left: that list is empty
      const size_t idx = static_cast<size_t>(p - slots_.get());
      if (idx < kWheelSlots) mask_[idx / kSlots] &= ~(uint64_t{1} << (idx % kSlots));
    }
  }
  void link_slot(unsigned level, unsigned s, TimerNode *n) noexcept {
    link_tail(&slots_[level * kSlots + s], n);
    mask_[level] |= uint64_t{1} << s;
  }
  // Into the current tick's slot (expiry in the current tick or earlier). Overdue nodes (tick
  // before the current one) go to the front so that they fire before the current tick's.
  void link_current(TimerNode *n) noexcept {
    const unsigned s = digit(cur_tick_, 0);
    TimerNode *head = &slots_[s];
    if (to_tick(n->expiry_ns) < cur_tick_) head = head->next;  // insert before the first node
    link_tail(head, n);
    mask_[0] |= uint64_t{1} << s;
    if (n->expiry_ns < cur_min_) cur_min_ = n->expiry_ns;
  }
  // tk > cur_tick_: the level of the highest differing digit, the slot of that digit.
  void place(TimerNode *n, uint64_t tk) noexcept {
    const unsigned level =
        static_cast<unsigned>(63 - std::countl_zero(tk ^ cur_tick_)) / kLevelBits;
    link_slot(level, digit(tk, level), n);
  }

  // The first tick after cur_tick_ at which a level-0 slot fires or a slot cascades;
  // UINT64_MAX if the wheel holds nothing beyond the current tick.
  uint64_t next_event_tick() const noexcept {
    const uint64_t c = cur_tick_;
    for (unsigned level = 0; level < kLevels; ++level) {
      const unsigned d = digit(c, level);
      if (d == kSlots - 1) continue;
      const uint64_t m = mask_[level] & (~uint64_t{0} << (d + 1));
      if (m == 0) continue;
      const unsigned shift = level * kLevelBits;
      const unsigned up = shift + kLevelBits;
      const uint64_t base = up >= 64 ? 0 : (c >> up) << up;
      return base | (uint64_t{static_cast<unsigned>(std::countr_zero(m))} << shift);
    }
    return UINT64_MAX;
  }

  // Moves the current tick forward to `tk` (no event in between), cascading the buckets it
  // enters, top level first.
  void move_to(uint64_t tk) noexcept {
    const uint64_t diff = tk ^ cur_tick_;
    cur_tick_ = tk;
    // A lower bound for whatever already sits in the new tick's slot.
    cur_min_ = slot_bit(0, digit(tk, 0)) ? tk * tick_ns_ : UINT64_MAX;
    if (diff == 0) return;
    const unsigned top = static_cast<unsigned>(63 - std::countl_zero(diff)) / kLevelBits;
    for (unsigned level = top; level >= 1; --level) {
      const unsigned s = digit(tk, level);
      if (!slot_bit(level, s)) continue;
      TimerNode *head = &slots_[level * kSlots + s];
      while (head->next != head) {
        TimerNode *n = head->next;
        unlink(n);
        const uint64_t ntk = to_tick(n->expiry_ns);
        if (ntk > cur_tick_)
          place(n, ntk);  // always to a lower level
        else
          link_current(n);
      }
    }
  }
  void move_empty(uint64_t tk) noexcept {
    cur_tick_ = tk;
    cur_min_ = UINT64_MAX;
  }

  // Fires the current tick's nodes with expiry_ns <= limit; the others stay.
  template <class F>
  uint32_t run_current(uint64_t limit, F &on_expire) noexcept {
    TimerNode *slot = &slots_[digit(cur_tick_, 0)];
    TimerNode *pend = &slots_[kPending];
    // Splice the whole slot onto the (empty) pending list.
    pend->next = slot->next;
    pend->prev = slot->prev;
    pend->next->prev = pend;
    pend->prev->next = pend;
    slot->next = slot->prev = slot;
    mask_[0] &= ~(uint64_t{1} << digit(cur_tick_, 0));
    uint64_t new_min = UINT64_MAX;
    uint32_t fired = 0;
    while (pend->next != pend) {
      TimerNode *n = pend->next;
      unlink(n);
      if (n->expiry_ns <= limit) {
        --size_;
        ++fired;
        on_expire(n);
      } else {
        link_slot(0, digit(cur_tick_, 0), n);
        if (n->expiry_ns < new_min) new_min = n->expiry_ns;
      }
    }
    cur_min_ = new_min;
    return fired;
  }

  void flush_deferred() noexcept {
    TimerNode *def = &slots_[kDeferred];
    while (def->next != def) {
      TimerNode *n = def->next;
      unlink(n);
      link_current(n);
    }
  }

  std::unique_ptr<TimerNode[]> slots_;  // kLists circular sentinels
  uint64_t mask_[kLevels] = {};
  uint64_t tick_ns_;
  int tick_shift_;  // log2(tick_ns_) when it is a power of two, else -1
  uint64_t cur_tick_;
  uint64_t cur_min_;  // lower bound on the expiries in the current tick's slot
  uint64_t now_ns_;
  size_t size_ = 0;
  bool in_advance_ = false;
};

}  // namespace uroce::transport
