// SPDX-License-Identifier: BSD-3-Clause
// The lcore poll loop of uroced (doc/uroced.md, "The poll loop"): one PollLoop per lcore, the
// same step() on the main lcore (worker 0, Port = port::EthPort) and on every worker lcore
// (Port = port::PortQueue, its own queue of the first port). One pass:
//   control commands -> doorbells / rung rings -> RX burst (RoCE to the owner's engine, the
//   rest to main) -> hand-off rings from other lcores -> ARP / ND timers -> engine poll and
//   completions -> TX burst -> capture drain.
// run() repeats it until told to stop; IdlePolicy is the one place that sees whether a pass
// did work. Data path: no allocation, lock, exception or output (the control operations a
// worker runs between passes may allocate).
#pragma once

#include <rte_mbuf.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "ctl/server.h"
#include "daemon/cm_service.h"
#include "daemon/daemon.h"
#include "daemon/lcore.h"
#include "daemon/qsbr.h"
#include "daemon/sleeper.h"
#include "port/eth_port.h"
#include "port/port_queue.h"
#include "transport/engine.h"
#include "util/capture_ring.h"
#include "util/pcap_writer.h"

namespace uroce::daemon {

// worker 0 (main), workers 1..n-1: over the apps' rings (transport::RingQueues)
using RoceEngine = transport::Engine<port::EthPort, port::TscClock, transport::RingQueues>;
using QueueEngine = transport::Engine<port::PortQueue, port::TscClock, transport::RingQueues>;

// Frames between lcores (doc/uroced.md, Threading): the mbuf travels, and with it its ownership.
struct MbufRef {
  rte_mbuf *m;
};
using HandOffRing = LocalRing<MbufRef>;

// ring(from, to): one single-producer / single-consumer ring per ordered pair of workers.
class HandOff {
 public:
  HandOff(unsigned n, uint32_t slots);
  HandOffRing *ring(unsigned from, unsigned to) noexcept {
    return rings_[size_t{from} * n_ + to].get();
  }
  unsigned workers() const noexcept { return n_; }
  // Frees what is left in the rings (every lcore has stopped).
  void drain_all() noexcept;

 private:
  unsigned n_;
  std::vector<std::unique_ptr<HandOffRing>> rings_;
};

// Hand-off counters of one lcore, written by that lcore only.
struct LaneCounters {
  uint64_t handoff_out = 0;   // RoCE frames passed to the worker owning their QP
  uint64_t handoff_in = 0;    // frames received from another lcore's queue
  uint64_t handoff_drop = 0;  // the ring to the owner was full: freed (the transport recovers)
  uint64_t to_main = 0;       // frames that are not RoCE, passed to the main lcore (ARP, ND, ...)
  uint64_t to_main_drop = 0;  // the ring to main was full: freed
  uint64_t misrouted = 0;     // handed a frame for a QP that is not its own (never expected): freed
};

// The TX side of one lane's queue (EthPort for worker 0, PortQueue for the others).
struct LaneQueue {
  uint64_t rx = 0, tx = 0, tx_deferred = 0, tx_backpressure = 0, tx_dropped = 0, tx_pending = 0;
  uint64_t capture_dropped = 0;  // frames the lane's capture ring had no room for
};
// Appends worker.W.* (uroce-stat) for one lane.
void add_lane_stats(unsigned w, const LaneCounters &c, const LaneQueue &q,
                    std::vector<ctl::StatEntry> &v);

// A further port's verbs device (ports[i], i >= 1; doc/uroced.md, Ports and devices): its own
// engine and bridge, run by the main lcore's loop on every RX queue of that port.
struct PortDevice {
  port::EthPort *port = nullptr;
  RoceEngine *engine = nullptr;
  Daemon *daemon = nullptr;  // nullptr until the bridge exists (and again at shutdown)
  CmService *cm = nullptr;   // QP 1 of the port (nullptr: its frames go to the engine)
};

// One lcore's loop. Port is port::EthPort on the main lcore (worker 0: ARP / ND, timers, the
// further ports' devices, the control servers, the capture file) or port::PortQueue on a
// worker lcore w >= 1. Explicitly instantiated for those two in poll_loop.cc.
template <class Port>
class PollLoop {
 public:
  static constexpr bool kMain = std::is_same_v<Port, port::EthPort>;
  using EngineT = transport::Engine<Port, port::TscClock, transport::RingQueues>;
  static constexpr uint64_t kTimerNs = 1'000'000;     // ARP / ND timers every millisecond
  static constexpr uint64_t kServeEveryNs = 100'000;  // control servers (main)

  struct Config {
    unsigned id = 0;       // worker index (0: the main lcore)
    Port *port = nullptr;  // main: ports[0]; worker w: its queue w of ports[0]
    EngineT *engine = nullptr;
    const port::TscClock *clock = nullptr;
    HandOff *ho = nullptr;         // nullptr with one worker
    uint16_t nb_queues = 1;        // main: RX queues per port (with one worker, all of them)
    const uint8_t *mac = nullptr;  // worker: ports[0]'s MAC (frame classification)
    // Sleeping when idle (doc/uroced.md): this lcore's Sleeper (nullptr: never sleeps) and
    // every lcore's, indexed by worker (rung after pushing frames to that lcore).
    Sleeper *sleeper = nullptr;
    const std::vector<Sleeper *> *sleepers = nullptr;
    IdleParams idle;
    // Readers of ports[0]'s shared object tables (qsbr.h; reader id == id); nullptr: none.
    Qsbr *qsbr = nullptr;
  };
  explicit PollLoop(const Config &c) noexcept;

  // One pass over everything this lcore polls; returns the work done (0: nothing to do).
  unsigned step() noexcept;
  // Steps until `stop` (acquire) is set, then (worker) drains or drops its TX backlog.
  void run(const std::atomic<bool> &stop) noexcept;
  // Watches this lcore's wake-up sources (its RX queues' interrupts, main: the control
  // servers). Call once the ports run and the servers listen, before run(). Returns how many
  // of its RX queues have no interrupt (they are napped on).
  unsigned watch_sources();
  // Any thread: wakes the lcore if it sleeps (stop).
  void wake() noexcept {
    if (sleeper_ != nullptr) sleeper_->signal();
  }
  const IdleCounters *idle_counters() const noexcept {
    return sleeper_ != nullptr ? &sleeper_->counters() : nullptr;
  }
  // Busy mode: idle passes that yielded the core (this lcore's thread, or run_on).
  uint64_t busy_yields() const noexcept { return gate_.yields(); }

  // IdleGate's view of the loop (daemon/sleeper.h).
  void arm(bool on) noexcept;
  unsigned recheck() noexcept;
  uint64_t now() const noexcept { return clock_->now_ns(); }
  uint64_t deadline(bool *nap) noexcept;
  // Around the Sleeper's wait: a sleeping lcore is an offline reader of the object tables.
  void blocking(bool on) noexcept {
    if (qsbr_ != nullptr) on ? qsbr_->offline(id_) : qsbr_->online(id_);
  }

  // Wiring (before run, or on this lcore's thread).
  void set_daemon(Daemon *d) noexcept { daemon_ = d; }
  // Main: QP 1 of ports[0] (frames for QP 1 go there instead of the engine; its timers run
  // with the ARP / ND ones).
  void set_cm(CmService *c) noexcept { cm_ = c; }
  std::vector<PortDevice> &devices() noexcept { return devices_; }  // main
  // Main: control server i serves daemon i, polled every kServeEveryNs of the loop's clock.
  void set_servers(std::vector<ctl::Server *> servers, std::vector<Daemon *> daemons);
  // Main, capture with several workers: the workers' rings, drained into one file.
  void set_capture(util::PcapWriter *pcap, std::vector<util::CaptureRing *> rings);
  // Writes the frames the workers captured since the last call (in each worker's order).
  unsigned drain_captures() noexcept;

  unsigned id() const noexcept { return id_; }
  Port &port() noexcept { return *port_; }
  const port::TscClock &clock() const noexcept { return *clock_; }
  const LaneCounters &lane_counters() const noexcept { return lc_; }

 private:
  port::RxVerdict main_frame(rte_mbuf *m, const uint8_t *f, uint32_t len, uint64_t now) noexcept;
  unsigned rx(uint64_t now) noexcept;
  unsigned handoff_in(uint64_t now) noexcept;
  unsigned serve_control(bool force = false) noexcept;
  void note_push(unsigned to) noexcept { pushed_ |= uint64_t{1} << to; }
  void ring_pushed() noexcept;
  // An RX queue this lcore polls: its interrupt fd (-1: none).
  struct RxSource {
    uint16_t port_id;
    uint16_t queue;
    int fd;
  };

  unsigned id_;
  Port *port_;
  EngineT *engine_;
  const port::TscClock *clock_;
  HandOff *ho_;
  uint16_t nb_queues_;
  const uint8_t *mac_;
  Daemon *daemon_ = nullptr;
  CmService *cm_ = nullptr;
  Sleeper *sleeper_;
  const std::vector<Sleeper *> *sleepers_;
  Qsbr *qsbr_;
  IdleGate gate_;
  uint64_t pushed_ = 0;  // lcores this pass pushed frames to (rung at its end)
  std::vector<RxSource> rx_sources_;
  LaneCounters lc_;
  uint64_t next_timer_ = 0;
  uint64_t last_now_ = 0;  // the clock at the start of the last step()
  uint64_t next_serve_ = 0;
  std::vector<PortDevice> devices_;
  std::vector<ctl::Server *> servers_;
  std::vector<Daemon *> server_daemons_;
  util::PcapWriter *pcap_ = nullptr;
  std::vector<util::CaptureRing *> capture_rings_;
};

using MainLoop = PollLoop<port::EthPort>;
using WorkerLoop = PollLoop<port::PortQueue>;
extern template class PollLoop<port::EthPort>;
extern template class PollLoop<port::PortQueue>;

// rte_eal_remote_launch entry of a worker lcore: arg is a WorkerLane.
struct WorkerLane {
  std::unique_ptr<WorkerLoop> loop;
  std::atomic<bool> stop{false};
};
int worker_lcore_main(void *arg);

// Stops the worker lcores and waits for them (also when start-up fails after their launch).
struct WorkerGuard {
  std::vector<std::unique_ptr<WorkerLane>> &lanes;
  void stop() noexcept;
  ~WorkerGuard() { stop(); }
};

}  // namespace uroce::daemon
