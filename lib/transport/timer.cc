// SPDX-License-Identifier: BSD-3-Clause
#include "transport/timer.h"

namespace uroce::transport {

TimerWheel::TimerWheel(uint64_t tick_ns, uint64_t start_ns)
    : slots_(new TimerNode[kLists]),
      tick_ns_(tick_ns == 0 ? 1 : tick_ns),
      tick_shift_(std::has_single_bit(tick_ns_) ? std::countr_zero(tick_ns_) : -1),
      cur_tick_(0),
      cur_min_(UINT64_MAX),
      now_ns_(start_ns) {
  for (unsigned i = 0; i < kLists; ++i)
    slots_[i].next = slots_[i].prev = &slots_[i];
  cur_tick_ = to_tick(start_ns);
}

TimerWheel::~TimerWheel() {
  clear();
}

void TimerWheel::clear() noexcept {
  if (!slots_) return;  // moved from
  for (unsigned i = 0; i < kLists; ++i) {
    TimerNode *head = &slots_[i];
    while (head->next != head)
      unlink(head->next);
  }
  for (auto &m : mask_)
    m = 0;
  size_ = 0;
}

void TimerWheel::reset(uint64_t start_ns) noexcept {
  if (size_ != 0) clear();  // (no node armed: every list is empty, every bitmap 0)
  cur_tick_ = to_tick(start_ns);
  cur_min_ = UINT64_MAX;
  now_ns_ = start_ns;
  in_advance_ = false;
}

}  // namespace uroce::transport
