// SPDX-License-Identifier: BSD-3-Clause
// How an idle lcore sleeps and what wakes it (doc/uroced.md, "Sleeping when idle"; the memory
// ordering: doc/ipc.md, "Sleeping consumers"). No DPDK: unit-tested with threads and eventfds.
//
// Sleeper: one per lcore. An epoll set of the fds that can wake the lcore (app doorbell
// eventfds, ports' RX interrupt fds, control sockets) plus its own bell, an eventfd other
// threads write through ring() only while the lcore has declared itself asleep.
// IdleGate: the policy run after every pass of the loop. Busy: spin; after `threshold_ns`
// without work, every idle pass yields the core (sched_yield: returns at once when nothing else
// is runnable there, else lets it run; doc/uroced.md). Adaptive: spin while there is work;
// after `threshold_ns` without work, arm every source (flags the producers check after
// publishing), fence, run one more pass, and block only if that pass found nothing, until the
// earliest deadline the loop reports (timers), a nap's end (sources that cannot interrupt), or
// a wake-up. Naps stay at their shortest while the last work is recent (recent_ns: a transfer
// that paused) and double only after that.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

namespace uroce::daemon {

enum class WakeSource : uint8_t {
  kTimeout,   // the wait's deadline: a timer, a nap, or the safety cap
  kBell,      // another thread: hand-off / command / event rings, stop
  kDoorbell,  // an app's doorbell eventfd
  kRx,        // a port's RX interrupt
  kControl,   // a control socket (connection, request)
  kCount
};
inline constexpr const char *kWakeSourceNames[] = {"timeout", "bell", "doorbell", "rx", "control"};

struct IdleCounters {
  uint64_t sleeps = 0;    // waits that blocked (or tried to: a wake-up already pending)
  uint64_t naps = 0;      // of those, bounded by a nap (a source that cannot interrupt)
  uint64_t aborted = 0;   // armed, but the last pass found work: no sleep
  uint64_t slept_ns = 0;  // time from the start of each wait to the pass after it (loop clock)
  uint64_t wakeups[static_cast<unsigned>(WakeSource::kCount)] = {};
};

class Sleeper {
 public:
  // Creates the epoll set and the bell; throws std::system_error (start-up only).
  Sleeper();
  ~Sleeper();
  Sleeper(const Sleeper &) = delete;
  Sleeper &operator=(const Sleeper &) = delete;

  // Adds / removes an fd (any thread). edge: EPOLLET, for fds nobody reads here (eventfds,
  // RX queues the PMD reads); level-triggered otherwise (control sockets' epoll fds).
  // 0 or -errno.
  int watch(int fd, WakeSource src, bool edge) noexcept;
  int unwatch(int fd) noexcept;

  // Any other thread, after publishing work for this lcore (a ring push): wakes it if it
  // declared itself asleep. Fence, then the flag: pairs with arm()'s store and the owner's
  // fence before its last pass.
  void ring() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (asleep_.load(std::memory_order_relaxed) != 0 &&
        asleep_.exchange(0, std::memory_order_relaxed) != 0)
      signal();
  }
  // Async-signal-safe: writes the bell unconditionally (SIGTERM while asleep).
  void signal() noexcept;

  // Owner thread.
  void arm() noexcept { asleep_.store(1, std::memory_order_relaxed); }
  void disarm() noexcept { asleep_.store(0, std::memory_order_relaxed); }
  // Blocks up to timeout_ns (UINT64_MAX: no limit) or until a watched fd fires; counts the
  // sources that woke it. Returns how many fired (0: the timeout).
  unsigned wait(uint64_t timeout_ns) noexcept;
  IdleCounters &counters() noexcept { return ctr_; }
  const IdleCounters &counters() const noexcept { return ctr_; }

 private:
  int ep_ = -1;
  int bell_ = -1;
  alignas(64) std::atomic<uint32_t> asleep_{0};  // written by other threads: own line
  alignas(64) IdleCounters ctr_;
};

// What IdleGate needs from the loop it runs in.
//   arm(bool on)        set / clear the asleep flags the loop owns besides the Sleeper's own
//                       (e.g. every app doorbell ring's notify word) and the RX interrupts
//   recheck()           one more pass of the loop; returns the work it did
//   now()               the loop's clock, ns
//   deadline(&nap)      the earliest absolute time (ns) something must run (UINT64_MAX: none);
//                       *nap = true when a source cannot wake the lcore (RX queue without an
//                       interrupt, work the loop must come back to): then naps bound the wait
//   blocking(bool on)   optional: around the wait (on before, off after; e.g. a reader of the
//                       shared object tables goes offline, daemon/qsbr.h)
struct IdleParams {
  bool adaptive = true;                // false: busy polling, never sleeps (but yields, below)
  uint64_t threshold_ns = 100'000;     // no work for this long -> sleep
  uint64_t nap_min_ns = 20'000;        // first nap when a source cannot interrupt
  uint64_t nap_max_ns = 1'000'000;     // naps double up to this, once work is not recent:
  uint64_t recent_ns = 2'000'000;      // naps stay at nap_min_ns until this long after work
  uint64_t max_sleep_ns = 50'000'000;  // safety cap of every wait
};

class IdleGate {
 public:
  // s == nullptr: busy polling whatever p says.
  IdleGate(Sleeper *s, const IdleParams &p) noexcept : s_(s), p_(p), nap_(p.nap_min_ns) {
    if (s_ == nullptr) p_.adaptive = false;
  }

  // After every pass that did `work`, at `now`.
  template <class Loop>
  void after_pass(unsigned work, uint64_t now, Loop &l) noexcept {
    if (work != 0) {
      last_work_ = now;
      nap_ = p_.nap_min_ns;
      return;
    }
    if (now - last_work_ < p_.threshold_ns) return;
    if (!p_.adaptive) {
      sched_yield();
      ++yields_;
      return;
    }
    s_->arm();
    l.arm(true);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // flags before the last look
    if (l.recheck() != 0) {
      l.arm(false);
      s_->disarm();
      ++s_->counters().aborted;
      last_work_ = l.now();
      nap_ = p_.nap_min_ns;
      return;
    }
    bool nap = false;
    const uint64_t t = l.now();
    const uint64_t dl = l.deadline(&nap);
    uint64_t timeout = p_.max_sleep_ns;
    if (dl != UINT64_MAX) timeout = dl > t ? (dl - t < timeout ? dl - t : timeout) : 0;
    if (nap) {
      ++s_->counters().naps;
      if (nap_ < timeout) timeout = nap_;
      // A transfer that paused (the peer descheduled, ACKs on their way) resumes within a
      // short nap; only a link quiet for recent_ns earns the longer ones (doc/uroced.md).
      if (t - last_work_ >= p_.recent_ns)
        nap_ = nap_ * 2 < p_.nap_max_ns ? nap_ * 2 : p_.nap_max_ns;
    }
    ++s_->counters().sleeps;
    if constexpr (requires { l.blocking(true); }) l.blocking(true);
    const unsigned woke = s_->wait(timeout);
    if constexpr (requires { l.blocking(false); }) l.blocking(false);
    s_->counters().slept_ns += l.now() - t;
    if (woke != 0) nap_ = p_.nap_min_ns;  // woken by an event: naps start over
    l.arm(false);
    s_->disarm();
  }

  const IdleParams &params() const noexcept { return p_; }
  // The bound of the next nap (nap_min_ns .. nap_max_ns).
  uint64_t next_nap_ns() const noexcept { return nap_; }
  // Busy mode: the idle passes that yielded the core.
  uint64_t yields() const noexcept { return yields_; }

 private:
  Sleeper *s_;
  IdleParams p_;
  uint64_t last_work_ = 0;
  uint64_t nap_;
  uint64_t yields_ = 0;
};

}  // namespace uroce::daemon
