// SPDX-License-Identifier: BSD-3-Clause
// Lost wake-up stress test of lib/daemon/sleeper.h (doc/uroced.md, Sleeping when idle): a worker
// thread that tries to sleep after every item (idle threshold 0) and an "app" thread that posts
// the next item the moment the previous one completes, i.e. exactly as the worker goes to
// sleep, 100,000 times in a row, once for each wake-up source: an app doorbell (the doorbell
// ring's asleep flag + eventfd, as lib/client rings it), the bell of an inter-lcore ring
// (hand-off, forwarded doorbells, commands), an RX queue's interrupt fd (a pipe the "PMD"
// reads, edge-triggered), a control socket (level-triggered) and the timing wheel's deadline.
// The worker's sleep is capped at 60 s, so a lost wake-up shows as an item that does not
// complete within its bounded wait (10 s); no other timing is asserted.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "daemon/lcore.h"
#include "daemon/sleeper.h"
#include "shm/eventfd.h"
#include "uroce/ring.h"

namespace uroce::daemon {
namespace {

constexpr int kRounds = 100'000;
constexpr auto kItemWait = std::chrono::seconds(10);

uint64_t mono_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The worker's side of every source; each test uses one.
struct Worker {
  enum Kind { kDoorbell, kBell, kRx, kControl, kTimer };
  explicit Worker(Kind k) : kind(k), bell_ring(1024) {
    const size_t bytes = abi::ring_bytes(sizeof(abi::Doorbell), 64);
    mem.reset(static_cast<std::byte *>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    EXPECT_EQ(shm::ring_init(mem.get(), bytes, sizeof(abi::Doorbell), 64), shm::RingError::kOk);
    EXPECT_EQ(db_cons.attach(mem.get(), bytes, sizeof(abi::Doorbell), 64), shm::RingError::kOk);
    EXPECT_EQ(db_prod.attach(mem.get(), bytes, sizeof(abi::Doorbell), 64), shm::RingError::kOk);
    auto ev = shm::EventFd::create();
    EXPECT_TRUE(ev);
    db_ev = std::move(ev.value());
    int p[2];
    EXPECT_EQ(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    rx_r = p[0];
    rx_w = p[1];
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    ctl_r = sv[0];
    ctl_w = sv[1];
    EXPECT_EQ(sleeper.watch(db_ev.fd(), WakeSource::kDoorbell, true), 0);
    EXPECT_EQ(sleeper.watch(rx_r, WakeSource::kRx, true), 0);
    EXPECT_EQ(sleeper.watch(ctl_r, WakeSource::kControl, false), 0);
  }
  ~Worker() {
    close(rx_r);
    close(rx_w);
    close(ctl_r);
    close(ctl_w);
  }

  // One pass: everything the worker has to do now. Returns the work done.
  unsigned pass() {
    unsigned work = 0;
    abi::Doorbell d[16];
    if (const size_t n = db_cons.pop_burst(d, 16)) {
      work += static_cast<unsigned>(n);
      done.fetch_add(n, std::memory_order_release);
    }
    uint64_t v[16];
    if (const size_t n = bell_ring.pop_burst(v, 16)) {
      work += static_cast<unsigned>(n);
      done.fetch_add(n, std::memory_order_release);
    }
    char buf[64];
    for (ssize_t n; (n = read(rx_r, buf, sizeof buf)) > 0;) {  // the "PMD" drains its queue
      work += static_cast<unsigned>(n);
      done.fetch_add(static_cast<uint64_t>(n), std::memory_order_release);
    }
    for (ssize_t n; (n = recv(ctl_r, buf, sizeof buf, 0)) > 0;) {
      ++work;
      done.fetch_add(1, std::memory_order_release);
    }
    if (kind == kTimer) {
      const uint64_t a = timer_req.load(std::memory_order_acquire);
      if (a != timer_seen) {  // a new request: the timer is armed 5 us from now
        timer_seen = a;
        timer_due = mono_ns() + 5'000;
        ++work;
      }
      if (timer_due != 0 && mono_ns() >= timer_due) {
        timer_due = 0;
        ++work;
        done.fetch_add(1, std::memory_order_release);
      }
    }
    return work;
  }

  // IdleGate's view.
  void arm(bool on) { db_cons.set_asleep(on); }
  unsigned recheck() { return pass(); }
  uint64_t now() const { return mono_ns(); }
  uint64_t deadline(bool *nap) const {
    *nap = false;
    return timer_due != 0 ? timer_due : UINT64_MAX;
  }

  void run() {
    IdleParams p;
    p.threshold_ns = 0;  // every idle pass tries to sleep
    p.max_sleep_ns = 60'000'000'000;
    IdleGate gate(&sleeper, p);
    while (!stop.load(std::memory_order_acquire)) {
      const unsigned w = pass();
      gate.after_pass(w, mono_ns(), *this);
    }
  }

  Kind kind;
  Sleeper sleeper;
  struct Free {
    void operator()(std::byte *p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> mem;
  shm::RingConsumer db_cons;
  shm::RingProducer db_prod;  // the app's
  shm::EventFd db_ev;
  LocalRing<uint64_t> bell_ring;
  int rx_r = -1, rx_w = -1, ctl_r = -1, ctl_w = -1;
  std::atomic<uint64_t> timer_req{0};
  uint64_t timer_seen = 0, timer_due = 0;
  std::atomic<uint64_t> done{0};
  std::atomic<bool> stop{false};
};

// The app: post one item, wait (bounded) for it, post the next at once.
void stress(Worker::Kind kind, WakeSource src) {
  Worker w(kind);
  std::thread t([&] { w.run(); });
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  int failed_at = -1;
  for (int i = 0; i < kRounds; ++i) {
    switch (kind) {
      case Worker::kDoorbell:  // lib/client's ring_doorbell
        ASSERT_EQ(w.db_prod.try_push(abi::Doorbell{1, abi::kDoorbellSq}), shm::RingError::kOk);
        if (w.db_prod.wake_consumer()) w.db_ev.signal();
        break;
      case Worker::kBell:  // a hand-off / forward / command ring and the owner's bell
        ASSERT_TRUE(w.bell_ring.push(uint64_t(i)));
        w.sleeper.ring();
        break;
      case Worker::kRx:
        ASSERT_EQ(write(w.rx_w, "x", 1), 1);
        break;
      case Worker::kControl:
        ASSERT_EQ(send(w.ctl_w, "x", 1, 0), 1);
        break;
      case Worker::kTimer:
        w.timer_req.store(uint64_t(i) + 1, std::memory_order_release);
        w.sleeper.ring();  // the request itself arrives like a command
        break;
    }
    const auto until = std::chrono::steady_clock::now() + kItemWait;
    while (w.done.load(std::memory_order_acquire) != uint64_t(i) + 1) {
      if (std::chrono::steady_clock::now() > until) {
        failed_at = i;
        break;
      }
      std::this_thread::yield();
    }
    if (failed_at >= 0) break;
    // Sweep the window: most rounds post at once, some after a few hundred ns.
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    for (unsigned s = 0, n = (rng & 3) == 0 ? (rng >> 8) % 512 : 0; s < n; ++s)
      asm volatile("" ::: "memory");
  }
  w.stop.store(true, std::memory_order_release);
  w.sleeper.signal();
  t.join();
  EXPECT_EQ(failed_at, -1) << "item " << failed_at << " did not complete within 10 s: lost wake-up";
  const IdleCounters &c = w.sleeper.counters();
  EXPECT_GT(c.sleeps, 0u);
  EXPECT_GT(c.wakeups[static_cast<unsigned>(src)], 0u) << "the source never woke the worker";
  std::printf("sleeps %lu aborted %lu wake-ups by this source %lu (timeout %lu)\n",
              static_cast<unsigned long>(c.sleeps), static_cast<unsigned long>(c.aborted),
              static_cast<unsigned long>(c.wakeups[static_cast<unsigned>(src)]),
              static_cast<unsigned long>(c.wakeups[0]));
}

TEST(SleeperStress, AppDoorbell) {
  stress(Worker::kDoorbell, WakeSource::kDoorbell);
}
TEST(SleeperStress, LcoreBell) {
  stress(Worker::kBell, WakeSource::kBell);
}
TEST(SleeperStress, RxInterrupt) {
  stress(Worker::kRx, WakeSource::kRx);
}
TEST(SleeperStress, ControlSocket) {
  stress(Worker::kControl, WakeSource::kControl);
}
TEST(SleeperStress, TimerDeadline) {
  stress(Worker::kTimer, WakeSource::kTimeout);
}

TEST(IdleGate, BusyNeverSleeps) {
  Sleeper s;
  IdleParams p;
  p.adaptive = false;
  p.threshold_ns = 0;
  IdleGate g(&s, p);
  struct L {
    void arm(bool) { ADD_FAILURE() << "armed in busy mode"; }
    unsigned recheck() { return 0; }
    uint64_t now() const { return 1'000'000'000; }
    uint64_t deadline(bool *nap) const {
      *nap = false;
      return UINT64_MAX;
    }
  } l;
  for (int i = 0; i < 1000; ++i)
    g.after_pass(0, 1'000'000'000 + i, l);
  EXPECT_EQ(s.counters().sleeps, 0u);
  EXPECT_EQ(g.yields(), 1000u);  // threshold 0: every idle pass gives the core away
}

// Busy mode spins while there is work and for threshold_ns after it; later idle passes yield
// the core (so busy daemons do not starve apps on shared cores: doc/uroced.md).
TEST(IdleGate, BusyYieldsOnlyAfterTheThreshold) {
  IdleParams p;
  p.adaptive = false;
  p.threshold_ns = 100'000;
  IdleGate g(nullptr, p);
  struct L {
    void arm(bool) { ADD_FAILURE() << "armed in busy mode"; }
    unsigned recheck() { return 0; }
    uint64_t now() const { return 0; }
    uint64_t deadline(bool *nap) const {
      *nap = false;
      return UINT64_MAX;
    }
  } l;
  const uint64_t t0 = 5'000'000;
  g.after_pass(1, t0, l);
  g.after_pass(0, t0 + 50'000, l);
  g.after_pass(0, t0 + 99'999, l);
  EXPECT_EQ(g.yields(), 0u);
  g.after_pass(0, t0 + 100'000, l);
  g.after_pass(0, t0 + 150'000, l);
  EXPECT_EQ(g.yields(), 2u);
  g.after_pass(3, t0 + 160'000, l);  // work again: spin for another threshold
  g.after_pass(0, t0 + 200'000, l);
  EXPECT_EQ(g.yields(), 2u);
  g.after_pass(0, t0 + 260'000, l);
  EXPECT_EQ(g.yields(), 3u);
}

TEST(IdleGate, NapsDoubleUpToTheCapAndRestartAfterWork) {
  Sleeper s;
  IdleParams p;
  p.threshold_ns = 0;
  p.nap_min_ns = 1'000;
  p.nap_max_ns = 8'000;
  IdleGate g(&s, p);
  struct L {
    unsigned rechecks = 0;
    void arm(bool) {}
    unsigned recheck() {
      ++rechecks;
      return 0;
    }
    uint64_t now() const { return mono_ns(); }
    uint64_t deadline(bool *nap) const {
      *nap = true;
      return UINT64_MAX;
    }
  } l;
  for (int i = 0; i < 6; ++i)
    g.after_pass(0, mono_ns(), l);
  EXPECT_EQ(s.counters().sleeps, 6u);
  EXPECT_EQ(s.counters().naps, 6u);
  EXPECT_EQ(s.counters().wakeups[0], 6u) << "every nap ends by its timeout";
  // A pass with work, then the threshold: no sleep while it is not reached.
  p.threshold_ns = 60'000'000'000;
  IdleGate g2(&s, p);
  g2.after_pass(1, mono_ns(), l);
  g2.after_pass(0, mono_ns(), l);
  EXPECT_EQ(s.counters().sleeps, 6u);
}

// A transfer over a link without RX interrupt (memif) that pauses, e.g. while the peer's lcore
// is descheduled: its naps must stay at the shortest while the last work is recent, or the
// lcore is in a 1 ms nap when the peer resumes (issue 17, doc/perf.md "Naps during a bulk
// transfer"). A fake clock drives the policy; the real waits last a few microseconds.
TEST(IdleGate, NapsStayShortWhileWorkIsRecent) {
  Sleeper s;
  IdleParams p;
  p.threshold_ns = 100'000;
  p.nap_min_ns = 1'000;
  p.nap_max_ns = 8'000;
  p.recent_ns = 2'000'000;
  IdleGate g(&s, p);
  struct L {
    uint64_t t = 0;  // the fake clock
    void arm(bool) {}
    unsigned recheck() { return 0; }
    uint64_t now() const { return t; }
    uint64_t deadline(bool *nap) const {
      *nap = true;  // an RX queue without interrupt: every wait is a nap
      return UINT64_MAX;
    }
  } l;
  const uint64_t t0 = 1'000'000'000;
  l.t = t0;
  g.after_pass(16, t0, l);  // a burst of the transfer
  l.t = t0 + 99'999;
  g.after_pass(0, l.t, l);
  EXPECT_EQ(s.counters().sleeps, 0u) << "spins for the idle threshold";
  uint64_t naps = 0;
  for (uint64_t dt = 100'000; dt < 2'000'000; dt += 50'000) {
    l.t = t0 + dt;
    g.after_pass(0, l.t, l);
    ++naps;
    EXPECT_EQ(g.next_nap_ns(), 1'000u) << dt << " ns after the last work";
  }
  EXPECT_EQ(s.counters().naps, naps);
  // Quiet for recent_ns: naps double up to the cap, as on an idle link.
  const uint64_t want[] = {2'000, 4'000, 8'000, 8'000};
  for (uint64_t w : want) {
    l.t += 100'000;
    g.after_pass(0, l.t, l);
    EXPECT_EQ(g.next_nap_ns(), w);
  }
  // The transfer resumes, then pauses again: short naps again.
  l.t += 10'000;
  g.after_pass(3, l.t, l);
  EXPECT_EQ(g.next_nap_ns(), 1'000u);
  l.t += 500'000;
  g.after_pass(0, l.t, l);
  l.t += 500'000;
  g.after_pass(0, l.t, l);
  EXPECT_EQ(g.next_nap_ns(), 1'000u);
  EXPECT_EQ(s.counters().naps, naps + 6);
}

TEST(Ring, DoorbellAsleepFlag) {
  const size_t bytes = abi::ring_bytes(sizeof(abi::Doorbell), 8);
  alignas(64) static std::byte mem[4096];
  ASSERT_LE(bytes, sizeof mem);
  ASSERT_EQ(shm::ring_init(mem, bytes, sizeof(abi::Doorbell), 8), shm::RingError::kOk);
  shm::RingConsumer c;
  shm::RingProducer p;
  ASSERT_EQ(c.attach(mem, bytes, sizeof(abi::Doorbell), 8), shm::RingError::kOk);
  ASSERT_EQ(p.attach(mem, bytes, sizeof(abi::Doorbell), 8), shm::RingError::kOk);
  EXPECT_FALSE(p.wake_consumer()) << "awake consumer: no system call";
  c.set_asleep(true);
  EXPECT_TRUE(p.wake_consumer()) << "asleep: the producer wakes it";
  EXPECT_FALSE(p.wake_consumer()) << "once per sleep";
  c.set_asleep(true);
  c.set_asleep(false);
  EXPECT_FALSE(p.wake_consumer());
}

}  // namespace
}  // namespace uroce::daemon
