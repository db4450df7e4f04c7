// SPDX-License-Identifier: BSD-3-Clause
// What uroced's worker lcores share (doc/uroced.md, "Threading"): the QPN <-> owner mapping,
// QP placement, the single-producer / single-consumer rings between lcores (frame hand-off,
// async events) and the command channel that runs control operations on
// the lcore that owns the object.
//
// Every inter-lcore ring is an include/uroce/ring.h ring in private memory with exactly one
// producer thread and one consumer thread. Memory ordering is the ring's (ring.h, doc/ipc.md):
//   (P)  producer: write the slot, then prod.store(release)              -- RingProducer::publish
//   (C)  consumer: prod.load(acquire) pairs with (P); read the slot; cons.store(release)
//   (P') producer: cons.load(acquire) pairs with (C)'s release before it reuses a slot.
// So whatever the producer wrote before a push (an mbuf's bytes, a closure's captures) is
// visible to the consumer after the matching pop, and the consumer is done with a slot before
// the producer overwrites it. Nothing else is shared between lcores on the data path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <type_traits>

#include "uroce/ring.h"

namespace uroce::daemon {

// ---- QPN <-> owner -------------------------------------------------------------------------
// Worker w's engine numbers its QPs from (w << 16) | base: bits 16..23 of a QPN name the
// worker that owns the QP for its whole life, so any lcore can tell where a frame or a
// doorbell belongs from the QPN alone. Worker 0 keeps the single-lcore numbering (base 0x11).
// (The same bits name the QP's doorbell ring: abi::doorbell_ring.)
inline constexpr uint32_t kQpnOwnerShift = abi::kQpnOwnerShift;
inline constexpr uint32_t kMaxWorkers = abi::kMaxDoorbellRings;
inline constexpr uint32_t kMaxQpPerWorker = (1u << kQpnOwnerShift) - 0x11;

constexpr uint32_t worker_qpn_base(uint32_t worker, uint32_t base) noexcept {
  return (worker << kQpnOwnerShift) | base;
}
// The worker owning `qpn`; QPNs naming no worker (QP1, garbage) go to worker 0, whose engine
// drops and counts them like any unknown QPN.
constexpr uint32_t qpn_owner(uint32_t qpn, uint32_t nworkers) noexcept {
  const uint32_t w = (qpn & 0xffffffu) >> kQpnOwnerShift;
  return w < nworkers ? w : 0;
}
static_assert(qpn_owner(0x10011, 2) == abi::doorbell_ring(0x10011, 2));

// The BTH destination QP of an Ethernet frame the port classified as RoCE v2 (IPv4 without
// options or IPv6, optional 802.1Q tag); 0 when the frame is too short to hold a BTH (the
// engine then counts the parse error).
uint32_t frame_dest_qpn(const uint8_t *frame, uint32_t len) noexcept;

// ---- placement -----------------------------------------------------------------------------
inline constexpr int kUnbound = -1;
// A QP lives on the worker its SRQ is bound to (an SRQ ring has one consumer lcore), else on
// the worker of one of its CQs (a CQ bound to another worker gets a forward ring, doc/ipc.md).
// `bound`: the binding of each, in that priority order (kUnbound if none yet); `load`: QPs per
// worker. Returns the first bound worker, or the least loaded one (lowest index on a tie) if
// none is bound; kUnbound only for a binding that names no worker.
int place_qp(const int *bound, size_t nbound, const uint32_t *load, size_t nworkers) noexcept;

// ---- a ring between two threads of this process ---------------------------------------------
template <class T>
class LocalRing {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 8 == 0);

 public:
  static constexpr uint32_t slot_size() noexcept {
    uint32_t s = 8;
    while (s < sizeof(T))
      s <<= 1;
    return s;
  }
  // slots: a power of two >= 2.
  explicit LocalRing(uint32_t slots) : bytes_(abi::ring_bytes(slot_size(), slots)) {
    const size_t alloc = (bytes_ + abi::kCacheLine - 1) / abi::kCacheLine * abi::kCacheLine;
    mem_.reset(std::aligned_alloc(abi::kCacheLine, alloc));
    if (!mem_) throw std::bad_alloc();
    if (shm::ring_init(mem_.get(), bytes_, slot_size(), slots) != shm::RingError::kOk ||
        prod_.attach(mem_.get(), bytes_, slot_size(), slots) != shm::RingError::kOk ||
        cons_.attach(mem_.get(), bytes_, slot_size(), slots) != shm::RingError::kOk)
      throw std::bad_alloc();
  }
  LocalRing(const LocalRing &) = delete;
  LocalRing &operator=(const LocalRing &) = delete;

  // Producer thread only.
  bool push(const T &v) noexcept { return prod_.try_push(v) == shm::RingError::kOk; }
  size_t push_burst(const T *v, size_t n) noexcept { return prod_.push_burst(v, n); }
  // Consumer thread only.
  bool pop(T *v) noexcept { return cons_.try_pop(v) == shm::RingError::kOk; }
  size_t pop_burst(T *v, size_t n) noexcept { return cons_.pop_burst(v, n); }
  uint64_t capacity() const noexcept { return prod_.capacity(); }
  // The ring memory, for a producer handle of another module (the engine's forward CQ);
  // then only consumer() is used here.
  void *mem() noexcept { return mem_.get(); }
  size_t bytes() const noexcept { return bytes_; }
  shm::RingConsumer &consumer() noexcept { return cons_; }

 private:
  struct Free {
    void operator()(void *p) const noexcept { std::free(p); }
  };
  size_t bytes_;
  std::unique_ptr<void, Free> mem_;
  alignas(64) shm::RingProducer prod_;  // separate lines: two threads
  alignas(64) shm::RingConsumer cons_;
};

// ---- command channel: control thread -> one worker lcore ------------------------------------
// call(f, wait) runs f() on the worker (its loop calls serve() between iterations) and returns
// once it has run; an exception f throws on the worker is rethrown by call(). The control thread
// has at most one command outstanding (call waits for its reply), so neither ring can fill.
// Ordering: the control thread's writes before call() happen-before f() runs (the request ring's
// release push / acquire pop), and f()'s writes happen-before call() returns (the reply ring's
// release push in serve() / acquire pop in call()).
class CmdChannel {
 public:
  CmdChannel() : req_(8), rep_(8) {}

  // Control thread. wait() runs while the worker has not answered (e.g. the caller's own loop
  // step); the worker never blocks, so the wait ends.
  template <class F, class Wait>
  void call(F &f, Wait &&wait) {
    call(
        f, [] {}, static_cast<Wait &&>(wait));
  }
  // kick() runs after the push (uroced: wakes the worker if it sleeps).
  template <class F, class Kick, class Wait>
  void call(F &f, Kick &&kick, Wait &&wait) {
    Slot<F> s{&f, nullptr};
    const Cmd c{&Slot<F>::run, &s, ++seq_};
    while (!req_.push(c))
      wait();
    kick();
    for (;;) {
      Done d{};
      if (rep_.pop(&d)) {
        if (d.seq == c.seq) break;
        continue;  // cannot happen: one command at a time
      }
      wait();
    }
    ++calls_;
    if (s.error) std::rethrow_exception(s.error);
  }

  // Worker thread: runs every pending command. Returns how many ran.
  unsigned serve() noexcept {
    unsigned n = 0;
    Cmd c{};
    while (req_.pop(&c)) {
      c.fn(c.arg);
      while (!rep_.push(Done{c.seq})) {
      }  // cannot be full: one command at a time
      ++n;
    }
    return n;
  }
  uint64_t calls() const noexcept { return calls_; }

 private:
  struct Cmd {
    void (*fn)(void *) noexcept;
    void *arg;
    uint64_t seq;
  };
  struct Done {
    uint64_t seq;
  };
  template <class F>
  struct Slot {
    F *f;
    std::exception_ptr error;
    static void run(void *p) noexcept {
      auto *s = static_cast<Slot *>(p);
      try {
        (*s->f)();
      } catch (...) {
        s->error = std::current_exception();
      }
    }
  };
  LocalRing<Cmd> req_;
  LocalRing<Done> rep_;
  uint64_t seq_ = 0;
  uint64_t calls_ = 0;
};

}  // namespace uroce::daemon
