// SPDX-License-Identifier: BSD-3-Clause
// uroced: the uroce daemon (doc/uroced.md).
//
// It parses its configuration, starts the DPDK EAL, brings the ports up, builds their GID
// tables, announces its addresses (gratuitous ARP, unsolicited NA), serves the control socket
// (lib/daemon: one session per app) and runs the poll loop on the main lcore: RX (ARP, ND, RoCE
// into the transport engine), the bridge between the apps' shared-memory rings and the engine,
// engine.poll() on the TSC clock, TX flush, and the control server every few iterations.
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <sys/prctl.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "config/config.h"
#include "ctl/server.h"
#include "daemon/daemon.h"
#include "daemon/lcore.h"
#include "env_check.h"
#include "port/eal.h"
#include "port/eth_port.h"
#include "port/neigh_wait.h"
#include "port/port_queue.h"
#include "telemetry/telemetry.h"
#include "transport/engine.h"
#include "uroce_version.h"
#include "util/capture_ring.h"
#include "util/pcap_writer.h"

namespace uroce::daemon {

namespace {

// Exit codes (doc/uroced.md).
constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;  // EAL, port, capture or control socket setup failed
constexpr int kExitUsage = 2;    // bad command line or configuration
constexpr int kExitEnv = 3;      // refused to start: foreign libibverbs in reach

constexpr const char *kDefaultConfig = "/etc/uroce/uroced.conf";

std::atomic<bool> g_stop{false};

extern "C" void on_signal(int) {
  g_stop.store(true, std::memory_order_relaxed);
}

void usage(FILE *f) {
  std::fprintf(f,
               "usage: uroced [-c FILE] [--set SECTION.KEY=VALUE]... [--check]\n"
               "       uroced --help | --version\n"
               "\n"
               "The uroce daemon: a user-space RoCE v2 stack on DPDK.\n"
               "\n"
               "  -c, --config FILE   configuration file (default %s)\n"
               "  --set S.K=V         override a key, e.g. --set daemon.pcap=/tmp/u.pcap or\n"
               "                      --set port.p0.mtu=4200 (repeatable; see doc/config.md)\n"
               "  --check             parse and validate the configuration, print it, exit\n"
               "  -h, --help          this text\n"
               "  -V, --version       print the version\n"
               "\n"
               "uroced brings its ports up, builds the GID tables, sends gratuitous ARP and\n"
               "unsolicited NA, answers ARP and IPv6 neighbour solicitations, runs the RoCE v2\n"
               "transport engine on every port (each port is one verbs device) and serves apps\n"
               "(lib/client, the verbs shim) on one control socket per port: daemon.socket for\n"
               "the first, port.NAME.socket for the others. uroce-stat prints its counters.\n"
               "SIGTERM or SIGINT stops it cleanly; counters are printed on exit.\n"
               "\n"
               "Exit status: 0 clean shutdown, 1 EAL/port/capture/control-socket failure, 2 bad\n"
               "command line or configuration, 3 refused to start (a non-system libibverbs.so.1\n"
               "reachable through LD_LIBRARY_PATH or LD_PRELOAD).\n",
               kDefaultConfig);
}

std::string mac_str(const uint8_t *m) {
  char b[18];
  std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return b;
}

void print_config(const config::Config &c) {
  std::printf("eal args:");
  for (const std::string &a : c.eal_args)
    std::printf(" %s", a.c_str());
  std::printf("\ndaemon: socket=%s workers=", c.daemon.socket.c_str());
  for (size_t i = 0; i < c.daemon.workers.size(); ++i)
    std::printf("%s%u", i ? "," : "", c.daemon.workers[i]);
  std::printf(" mbufs=%u rx_desc=%u tx_desc=%u pcap=%s idle_sleep_us=%u\n", c.daemon.mbufs,
              c.daemon.rx_desc, c.daemon.tx_desc,
              c.daemon.pcap.empty() ? "(off)" : c.daemon.pcap.c_str(), c.daemon.idle_sleep_us);
  for (const config::PortConfig &p : c.ports) {
    std::printf("port %s: device=%s mtu=%u (IB MTU %u) dscp=%u ecn=%s ibdev=%s socket=%s\n",
                p.name.c_str(), p.device.c_str(), p.mtu, p.ib_mtu(), p.dscp, p.ecn ? "on" : "off",
                p.ibdev.c_str(), p.socket.c_str());
    for (const config::Ipv4Prefix &a : p.ipv4)
      std::printf("  ipv4 %s/%u\n", config::format_ipv4(a.addr).c_str(), a.len);
    for (const config::Ipv6Prefix &a : p.ipv6)
      std::printf("  ipv6 %s/%u\n", config::format_ipv6(a.addr).c_str(), a.len);
  }
}

void print_counters(const port::EthPort &p) {
  const port::PortCounters &c = p.counters();
  std::printf(
      "port %s counters: rx_packets=%lu rx_bytes=%lu tx_packets=%lu tx_bytes=%lu "
      "tx_alloc_fail=%lu tx_dropped=%lu tx_deferred=%lu tx_backpressure=%lu tx_too_long=%lu "
      "rx_arp=%lu rx_nd=%lu rx_roce=%lu\n",
      p.name().c_str(), c.rx_packets, c.rx_bytes, c.tx_packets, c.tx_bytes, c.tx_alloc_fail,
      c.tx_dropped, c.tx_deferred, c.tx_backpressure, c.tx_too_long, c.rx_arp, c.rx_nd, c.rx_roce);
  for (size_t i = 0; i < static_cast<size_t>(port::RxDrop::kCount); ++i)
    if (c.rx_drops[i])
      std::printf("port %s drop %s=%lu\n", p.name().c_str(),
                  port::rx_drop_str(static_cast<port::RxDrop>(i)), c.rx_drops[i]);
  const port::ArpCounters &a = p.arp().counters();
  std::printf(
      "port %s arp: rx=%lu rx_requests_for_us=%lu rx_replies=%lu rx_not_for_us=%lu "
      "tx_replies=%lu tx_requests=%lu tx_gratuitous=%lu tx_no_buffer=%lu "
      "conflicts=%lu\n",
      p.name().c_str(), a.rx, a.rx_requests_for_us, a.rx_replies, a.rx_not_for_us, a.tx_replies,
      a.tx_requests, a.tx_gratuitous, a.tx_no_buffer, a.conflicts);
  for (size_t i = 0; i < static_cast<size_t>(port::ArpDrop::kCount); ++i)
    if (a.drops[i])
      std::printf("port %s drop %s=%lu\n", p.name().c_str(),
                  port::arp_drop_str(static_cast<port::ArpDrop>(i)), a.drops[i]);
  const port::NdCounters &n = p.nd().counters();
  std::printf(
      "port %s nd: rx=%lu rx_ns_for_us=%lu rx_ns_not_for_us=%lu rx_na=%lu "
      "rx_other_icmpv6=%lu tx_na=%lu tx_ns=%lu tx_unsolicited_na=%lu tx_no_buffer=%lu "
      "conflicts=%lu\n",
      p.name().c_str(), n.rx, n.rx_ns_for_us, n.rx_ns_not_for_us, n.rx_na, n.rx_other_icmpv6,
      n.tx_na, n.tx_ns, n.tx_unsolicited_na, n.tx_no_buffer, n.conflicts);
  for (size_t i = 0; i < static_cast<size_t>(port::NdDrop::kCount); ++i)
    if (n.drops[i])
      std::printf("port %s drop %s=%lu\n", p.name().c_str(),
                  port::nd_drop_str(static_cast<port::NdDrop>(i)), n.drops[i]);
}

// Capture ring of each worker >= 1 (only with daemon.pcap): about 16 000 frames of 1 KiB, the
// slack for main's drain (every loop iteration) falling behind (doc/uroced.md, Capture).
constexpr size_t kCaptureRingBytes = size_t{16} << 20;

using RoceEngine = transport::Engine<port::EthPort, port::TscClock>;     // worker 0 (main)
using QueueEngine = transport::Engine<port::PortQueue, port::TscClock>;  // workers 1..n-1

// Frames between lcores (doc/uroced.md, Threading): the mbuf travels, and with it its ownership.
struct MbufRef {
  rte_mbuf *m;
};
using HandOffRing = LocalRing<MbufRef>;

// Hand-off counters of one worker lcore, written by that lcore only.
struct LaneCounters {
  uint64_t handoff_out = 0;   // RoCE frames passed to the worker owning their QP
  uint64_t handoff_in = 0;    // frames received from another lcore's queue
  uint64_t handoff_drop = 0;  // the ring to the owner was full: freed (the transport recovers)
  uint64_t to_main = 0;       // frames that are not RoCE, passed to the main lcore (ARP, ND, ...)
  uint64_t to_main_drop = 0;  // the ring to main was full: freed
  uint64_t misrouted = 0;     // handed a frame for a QP that is not its own (never expected): freed
};

// ring(from, to): one single-producer / single-consumer ring per ordered pair of workers.
class HandOff {
 public:
  HandOff(unsigned n, uint32_t slots) : n_(n), rings_(size_t{n} * n) {
    for (unsigned f = 0; f < n; ++f)
      for (unsigned t = 0; t < n; ++t)
        if (f != t) rings_[size_t{f} * n + t] = std::make_unique<HandOffRing>(slots);
  }
  HandOffRing *ring(unsigned from, unsigned to) noexcept {
    return rings_[size_t{from} * n_ + to].get();
  }
  unsigned workers() const noexcept { return n_; }
  // Frees what is left in the rings (every lcore has stopped).
  void drain_all() noexcept {
    for (auto &r : rings_) {
      MbufRef m{};
      while (r && r->pop(&m))
        rte_pktmbuf_free(m.m);
    }
  }

 private:
  unsigned n_;
  std::vector<std::unique_ptr<HandOffRing>> rings_;
};

transport::Mtu mtu_enum(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return transport::Mtu::k256;
    case 512:
      return transport::Mtu::k512;
    case 1024:
      return transport::Mtu::k1024;
    case 2048:
      return transport::Mtu::k2048;
    default:
      return transport::Mtu::k4096;
  }
}

// The verbs device of ports[i], i >= 1 (doc/uroced.md, Ports and devices): its own engine,
// bridge (Daemon) and control socket, all on the main lcore.
struct PortDevice {
  RoceEngine *engine = nullptr;
  Daemon *daemon = nullptr;  // nullptr until the bridge exists (and again at shutdown)
};

// Everything one poll-loop iteration of the main lcore (worker 0) touches. Data path: no
// allocation, printing, locks or exceptions. Each port is one verbs device with its own engine:
// ports[0]'s is spread over the workers; the engines of ports[1..] run here, on main, fed
// from every RX queue of their port. With several workers (ho != nullptr) main polls queue 0
// of ports[0] (worker w polls queue w), hands RoCE frames for other workers' QPs to them, and
// takes the frames the workers pass to it.
struct Loop {
  std::vector<std::unique_ptr<port::EthPort>> &ports;
  uint16_t nb_queues;
  RoceEngine &engine;
  Daemon *daemon = nullptr;
  const port::TscClock &clock;
  uint64_t next_timer = 0;
  uint64_t last_now = 0;  // the clock at the start of the last step()
  HandOff *ho = nullptr;
  LaneCounters lc;
  // Capture with several workers: what workers 1..n-1 captured, drained into main's file.
  util::PcapWriter *pcap = nullptr;
  std::vector<util::CaptureRing *> capture_rings;
  std::vector<PortDevice> devices;  // devices[i - 1]: ports[i]'s device, i >= 1

  static constexpr uint64_t kTimerNs = 1'000'000;  // ARP/ND timers every millisecond

  // Writes the frames the workers captured since the last call (in each worker's order).
  unsigned drain_captures() noexcept {
    size_t n = 0;
    for (util::CaptureRing *r : capture_rings)
      n += r->drain(
          [this](const uint8_t *f, uint32_t len, uint64_t ts) { pcap->write(f, len, ts); });
    return static_cast<unsigned>(n);
  }

  unsigned step() noexcept {
    unsigned work = 0;
    // The apps' rings first: a receive posted before a request was sent is in the engine
    // before that request's packet can be taken from the RX queue below.
    if (daemon != nullptr) work += daemon->bridge_in();
    for (PortDevice &d : devices)
      if (d.daemon != nullptr) work += d.daemon->bridge_in();
    // One clock read for the RX burst, taken after the bridge so that timers armed by the
    // frames start from when the burst is handled; poll() reads its own.
    const uint64_t now = clock.now_ns();
    last_now = now;
    auto to_engine = [this, now](rte_mbuf *m, const uint8_t *f, uint32_t len) noexcept {
      if (ho != nullptr) {
        const uint32_t o = qpn_owner(frame_dest_qpn(f, len), ho->workers());
        if (o != 0) {
          if (ho->ring(0, o)->push(MbufRef{m})) {
            ++lc.handoff_out;
            return port::RxVerdict::kTaken;
          }
          ++lc.handoff_drop;
          return port::RxVerdict::kRefused;
        }
      }
      engine.rx(f, len, now);  // one clock read per loop iteration, not per frame
      return port::RxVerdict::kAccepted;
    };
    for (size_t i = 0; i < ports.size(); ++i) {
      port::EthPort &p = *ports[i];
      if (i == 0) {
        const uint16_t nq = ho != nullptr ? 1 : nb_queues;
        for (uint16_t q = 0; q < nq; ++q)
          work += p.rx_burst(q, to_engine, now);
      } else {
        RoceEngine &e = *devices[i - 1].engine;
        auto to_port_engine = [&e, now](rte_mbuf *, const uint8_t *f, uint32_t len) noexcept {
          e.rx(f, len, now);
          return port::RxVerdict::kAccepted;
        };
        for (uint16_t q = 0; q < nb_queues; ++q)
          work += p.rx_burst(q, to_port_engine, now);
      }
      if (now >= next_timer) p.timers(now);
    }
    if (ho != nullptr) {
      // What the workers passed to main: ARP / ND / other frames, RoCE for worker 0's QPs.
      for (unsigned from = 1; from < ho->workers(); ++from) {
        MbufRef r[port::EthPort::kBurst];
        const size_t k = ho->ring(from, 0)->pop_burst(r, port::EthPort::kBurst);
        for (size_t j = 0; j < k; ++j)
          ports[0]->rx_handed(r[j].m, to_engine, now);
        lc.handoff_in += k;
        work += static_cast<unsigned>(k);
      }
    }
    if (now >= next_timer) next_timer = now + kTimerNs;
    work += engine.poll();
    if (daemon != nullptr) work += daemon->bridge_out();
    for (PortDevice &d : devices) {
      work += d.engine->poll();
      if (d.daemon != nullptr) work += d.daemon->bridge_out();
    }
    for (auto &p : ports)
      p->flush();
    if (!capture_rings.empty()) work += drain_captures();
    return work;
  }
};

// Worker lcore w >= 1: its commands, doorbells and rings, RX on queue w of ports[0] (RoCE
// frames for its own QPs to its engine, for other workers' QPs to their ring, everything else
// to main), the frames other lcores handed to it, its engine's timers and active QPs, its CQs,
// TX flush of its own queue. Data path: no allocation, printing, locks or exceptions (the
// control operations main sends run between iterations and may allocate).
struct WorkerLoop {
  unsigned id = 0;
  Daemon *daemon = nullptr;
  QueueEngine *engine = nullptr;
  const port::TscClock *clock = nullptr;
  port::PortQueue *q = nullptr;
  HandOff *ho = nullptr;
  const uint8_t *mac = nullptr;
  uint32_t idle_sleep_us = 0;
  std::atomic<bool> stop{false};
  LaneCounters lc;

  unsigned step() noexcept {
    unsigned work = daemon->serve_commands(id);
    work += daemon->bridge_in(id);
    const uint64_t now = clock->now_ns();  // one clock read for the RX burst (poll reads its own)
    const unsigned nw = ho->workers();
    rte_mbuf *pkts[port::PortQueue::kBurst];
    const uint16_t n = q->rx(pkts);
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf *m = pkts[i];
      const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
      const uint32_t len = rte_pktmbuf_data_len(m);
      if (m->nb_segs == 1 && port::classify(f, len, mac).cls == port::FrameClass::kRoce) {
        const uint32_t o = qpn_owner(frame_dest_qpn(f, len), nw);
        if (o == id) {
          engine->rx(f, len, now);
          rte_pktmbuf_free(m);
        } else if (ho->ring(id, o)->push(MbufRef{m})) {
          ++lc.handoff_out;
        } else {
          ++lc.handoff_drop;
          rte_pktmbuf_free(m);
        }
        continue;
      }
      if (ho->ring(id, 0)->push(MbufRef{m})) {  // main's EthPort handles and counts it
        ++lc.to_main;
      } else {
        ++lc.to_main_drop;
        rte_pktmbuf_free(m);
      }
    }
    work += n;
    for (unsigned from = 0; from < nw; ++from) {
      if (from == id) continue;
      MbufRef r[port::PortQueue::kBurst];
      const size_t k = ho->ring(from, id)->pop_burst(r, port::PortQueue::kBurst);
      for (size_t j = 0; j < k; ++j) {
        const uint8_t *f = rte_pktmbuf_mtod(r[j].m, const uint8_t *);
        const uint32_t len = rte_pktmbuf_data_len(r[j].m);
        if (qpn_owner(frame_dest_qpn(f, len), nw) == id)
          engine->rx(f, len, now);
        else
          ++lc.misrouted;
        rte_pktmbuf_free(r[j].m);
      }
      lc.handoff_in += k;
      work += static_cast<unsigned>(k);
    }
    work += engine->poll();
    work += daemon->bridge_out(id);
    q->flush();
    return work;
  }
};

int worker_main(void *arg) {
  auto *w = static_cast<WorkerLoop *>(arg);
  constexpr unsigned kIdleSpins = 1024;
  unsigned idle = 0;
  const timespec nap{0, static_cast<long>(w->idle_sleep_us) * 1000};
  // Acquire: pairs with main's release store of stop (everything main did before is seen).
  while (!w->stop.load(std::memory_order_acquire)) {
    if (w->step() != 0) {
      idle = 0;
    } else if (w->idle_sleep_us != 0 && ++idle >= kIdleSpins) {
      nanosleep(&nap, nullptr);
    }
  }
  // The backlog gets a few more chances (the peer may still be reading); what is left is
  // dropped and counted (tx_dropped): the only place a worker drops its own frames.
  for (unsigned i = 0; i < port::EthPort::kStopDrainTries && w->q->tx_pending() != 0; ++i)
    w->q->flush();
  w->q->drop_pending();
  return 0;
}

// Stops the worker lcores and waits for them (also when start-up fails after their launch).
struct WorkerGuard {
  std::vector<std::unique_ptr<WorkerLoop>> &loops;
  void stop() noexcept {
    for (auto &w : loops)
      w->stop.store(true, std::memory_order_release);
    rte_eal_mp_wait_lcore();
  }
  ~WorkerGuard() { stop(); }
};

// The TX side of one lane's queue (EthPort for worker 0, PortQueue for the others).
struct LaneQueue {
  uint64_t rx = 0, tx = 0, tx_deferred = 0, tx_backpressure = 0, tx_dropped = 0, tx_pending = 0;
  uint64_t capture_dropped = 0;  // frames the lane's capture ring had no room for
};

void add_lane_stats(unsigned w, const LaneCounters &c, const LaneQueue &q,
                    std::vector<ctl::StatEntry> &v) {
  auto add = [&](const char *what, uint64_t value) {
    ctl::StatEntry e{};
    std::snprintf(e.name, sizeof e.name, "worker.%u.%s", w, what);
    e.value = value;
    v.push_back(e);
  };
  add("handoff_out", c.handoff_out);
  add("handoff_in", c.handoff_in);
  add("handoff_drop", c.handoff_drop);
  add("to_main", c.to_main);
  add("to_main_drop", c.to_main_drop);
  add("misrouted", c.misrouted);
  add("queue_rx_packets", q.rx);
  add("queue_tx_packets", q.tx);
  add("queue_tx_deferred", q.tx_deferred);
  add("queue_tx_backpressure", q.tx_backpressure);
  add("queue_tx_dropped", q.tx_dropped);
  add("queue_tx_pending", q.tx_pending);
  add("capture_dropped", q.capture_dropped);
}

// The daemon's control-plane view of ports[0]. resolve() runs the loop while it waits for
// ARP / ND (port/neigh_wait.h), at most the port's neigh_wait_ms.
class EthPortView final : public PortView {
 public:
  EthPortView(port::EthPort &p, const config::PortConfig &pc, Loop &loop)
      : p_(p), pc_(pc), loop_(loop) {}
  const uint8_t *mac() const noexcept override { return p_.mac(); }
  uint32_t eth_mtu() const noexcept override { return p_.mtu(); }
  transport::Mtu ib_mtu() const noexcept override { return mtu_enum(pc_.ib_mtu()); }
  size_t gid_count() const noexcept override { return p_.gids().size(); }
  wire::Gid gid(size_t i) const noexcept override { return p_.gids()[i].gid; }
  uint8_t dscp() const noexcept override { return pc_.dscp; }
  const char *ibdev_name() const noexcept override { return pc_.ibdev.c_str(); }
  bool link_up() const noexcept override {
    try {
      return p_.link_status() != "down";
    } catch (...) {
      return false;
    }
  }
  int resolve(const wire::Gid &dgid, uint8_t mac_out[6]) noexcept override {
    const timespec nap{0, 50'000};
    const port::Resolve r = port::wait_resolution(
        [this] { return loop_.clock.now_ns(); },
        [&](uint64_t now) {
          return dgid.is_v4mapped() ? p_.resolve_ipv4(dgid.ipv4(), now, mac_out)
                                    : p_.resolve_ipv6(dgid.raw, now, mac_out);
        },
        [this] {
          p_.flush();
          return loop_.step();
        },
        [&nap] { nanosleep(&nap, nullptr); }, uint64_t{pc_.neigh_wait_ms} * 1'000'000);
    return r == port::Resolve::kResolved ? 0 : EHOSTUNREACH;
  }

 private:
  port::EthPort &p_;
  const config::PortConfig &pc_;
  Loop &loop_;
};

void add_port_stats(const port::EthPort &p, std::vector<ctl::StatEntry> &v) {
  auto add = [&](const char *what, uint64_t value) {
    ctl::StatEntry e{};
    std::snprintf(e.name, sizeof e.name, "port.%s.%s", p.name().c_str(), what);
    e.value = value;
    v.push_back(e);
  };
  const port::PortCounters &c = p.counters();
  add("rx_packets", c.rx_packets);
  add("rx_bytes", c.rx_bytes);
  add("tx_packets", c.tx_packets);
  add("tx_bytes", c.tx_bytes);
  add("tx_alloc_fail", c.tx_alloc_fail);
  add("tx_dropped", c.tx_dropped);
  add("tx_deferred", c.tx_deferred);
  add("tx_backpressure", c.tx_backpressure);
  add("tx_pending", p.tx_pending());
  add("tx_too_long", c.tx_too_long);
  add("tx_loopback", c.tx_loopback);
  add("tx_loopback_full", c.tx_loopback_full);
  add("tx_loopback_dropped", c.tx_loopback_dropped);
  add("rx_arp", c.rx_arp);
  add("rx_nd", c.rx_nd);
  add("rx_roce", c.rx_roce);
  for (size_t i = 0; i < static_cast<size_t>(port::RxDrop::kCount); ++i)
    if (c.rx_drops[i]) {
      char n[48];
      std::snprintf(n, sizeof n, "drop.%s", port::rx_drop_str(static_cast<port::RxDrop>(i)));
      add(n, c.rx_drops[i]);
    }
  // ARP / ND resolution and the neighbour entries (a name that would not fit is left out).
  p.neighbour_stats([&](const std::string &n, uint64_t value) {
    if (6 + p.name().size() + n.size() < sizeof(ctl::StatEntry::name)) add(n.c_str(), value);
  });
}

// The poll loop with the control server on the same thread (doc/uroced.md, Threading): the
// server is polled (epoll timeout 0) every kServeEveryNs of the loop's clock (each poll is an
// epoll_wait system call: every 64 iterations, as before, it cost ~6 % of a busy daemon,
// doc/perf.md); when idle, that is every iteration after a nap of >= 100 us.
// One control server per device: servers[i] serves daemons[i].
void poll_loop(Loop &loop, const std::vector<ctl::Server *> &servers,
               const std::vector<Daemon *> &daemons, uint32_t idle_sleep_us) noexcept {
  constexpr unsigned kIdleSpins = 1024;
  constexpr uint64_t kServeEveryNs = 100'000;
  unsigned idle = 0;
  uint64_t next_serve = 0;
  const timespec nap{0, static_cast<long>(idle_sleep_us) * 1000};
  while (!g_stop.load(std::memory_order_relaxed)) {
    const unsigned work = loop.step();
    if (loop.last_now >= next_serve) {
      for (size_t i = 0; i < servers.size(); ++i)
        servers[i]->poll(0, *daemons[i]);
      next_serve = loop.last_now + kServeEveryNs;
    }
    if (work != 0) {
      idle = 0;
    } else if (idle_sleep_us != 0 && ++idle >= kIdleSpins) {
      nanosleep(&nap, nullptr);
    }
  }
}

int run(int argc, char **argv) {
  std::string cfg_path = kDefaultConfig;
  std::vector<std::string> overrides;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char *opt) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "uroced: %s needs a value\n", opt);
        std::exit(kExitUsage);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return kExitOk;
    } else if (a == "-V" || a == "--version") {
      std::printf("uroced %s\n", UROCE_VERSION);
      return kExitOk;
    } else if (a == "-c" || a == "--config") {
      cfg_path = value(a.c_str());
    } else if (a.rfind("--config=", 0) == 0) {
      cfg_path = a.substr(9);
    } else if (a == "--set") {
      overrides.push_back(value("--set"));
    } else if (a.rfind("--set=", 0) == 0) {
      overrides.push_back(a.substr(6));
    } else if (a == "--check") {
      check_only = true;
    } else {
      std::fprintf(stderr, "uroced: unknown argument '%s' (see --help)\n", a.c_str());
      return kExitUsage;
    }
  }

  config::Config cfg;
  try {
    cfg = config::load_file(cfg_path, overrides);
  } catch (const config::ConfigError &e) {
    std::fprintf(stderr, "uroced: configuration error: %s\n", e.what());
    return kExitUsage;
  }
  if (cfg.ports.empty()) {
    std::fprintf(stderr, "uroced: configuration error: %s: no [port NAME] section\n",
                 cfg_path.c_str());
    return kExitUsage;
  }
  if (check_only) {
    print_config(cfg);
    return kExitOk;
  }

  const std::string env = check_ibverbs_env(std::getenv("LD_LIBRARY_PATH"),
                                            std::getenv("LD_PRELOAD"), default_system_lib_dirs());
  if (!env.empty()) {
    std::fprintf(stderr, "uroced: %s\n", env.c_str());
    return kExitEnv;
  }

  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // The idle nap (daemon.idle_sleep_us) is the daemon's reaction time to a doorbell that
  // arrives while it sleeps. Linux lets a nanosleep overrun by the thread's timer slack, 50 us
  // by default, which would double a 50 us nap and swamp a shorter one: 1 us instead. Set
  // before the EAL starts the lcore threads, which inherit it.
  if (cfg.daemon.idle_sleep_us != 0 && prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) != 0)
    std::fprintf(stderr, "uroced: warning: PR_SET_TIMERSLACK: %s (idle naps may overrun)\n",
                 std::strerror(errno));
  try {
    const std::vector<std::string> eal_args = port::eal_argv(cfg, argv[0]);
    port::Eal eal(eal_args);
    if (eal.pdump_status() != 0)
      std::printf("uroced: capture by dpdk-dumpcap unavailable: %s\n",
                  std::strerror(-eal.pdump_status()));
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);

    uint16_t room = 0;
    for (const config::PortConfig &p : cfg.ports)
      room = std::max(room, port::data_room_for(p));
    rte_mempool *pool = port::create_pool("uroce_pkts", cfg.daemon.mbufs, room);
    struct PoolGuard {
      rte_mempool *mp;
      ~PoolGuard() { port::free_pool(mp); }
    } pool_guard{pool};

    const uint16_t nb_queues = static_cast<uint16_t>(cfg.daemon.workers.size());
    std::vector<std::unique_ptr<port::EthPort>> ports;
    for (const config::PortConfig &pc : cfg.ports) {
      ports.push_back(std::make_unique<port::EthPort>(pc, cfg.daemon, pool, nb_queues));
      const port::EthPort &p = *ports.back();
      std::printf("port %s: ethdev %u, mac %s, mtu %u (IB MTU %u), %u queue(s), link %s%s%s\n",
                  p.name().c_str(), p.port_id(), mac_str(p.mac()).c_str(), p.mtu(), pc.ib_mtu(),
                  nb_queues, p.link_status().c_str(),
                  p.setup_notes().empty() ? "" : ", note: ", p.setup_notes().c_str());
      for (size_t i = 0; i < p.gids().size(); ++i)
        std::printf("port %s: gid %zu %s RoCE v2\n", p.name().c_str(), i,
                    config::format_ipv6(p.gids()[i].gid.raw).c_str());
    }

    util::PcapWriter pcap;
    // One clock for every lane's capture stamps (port/eal.h: realtime at start + TSC).
    std::unique_ptr<port::CaptureClock> capture_clock;
    if (!cfg.daemon.pcap.empty()) {
      if (!pcap.open(cfg.daemon.pcap.c_str()))
        throw port::PortError("cannot open capture file '" + cfg.daemon.pcap +
                              "': " + std::strerror(errno));
      capture_clock = std::make_unique<port::CaptureClock>();
      for (auto &p : ports)
        p->set_capture(&pcap, capture_clock.get());
      std::printf("capturing every frame to %s\n", cfg.daemon.pcap.c_str());
    }

    for (auto &p : ports) {
      const unsigned n = p->announce();
      p->flush();
      std::printf("port %s: announced %u address(es) (gratuitous ARP / unsolicited NA)\n",
                  p->name().c_str(), n);
    }
    // The transport engine on ports[0], the control server, the bridge.
    const port::TscClock clock;
    transport::EngineConfig ecfg;
    ecfg.ecn = cfg.ports[0].ecn;
    {
      std::random_device rd;
      ecfg.seed = (uint64_t{rd()} << 32) | rd();  // unguessable key tags
    }
    // One engine per worker: worker 0 on the main lcore sends through ports[0]'s EthPort
    // (queue 0), worker w through its own queue w; QPNs carry the worker (daemon/lcore.h).
    const unsigned nw = nb_queues;
    if (nw > kMaxWorkers)
      throw port::PortError("daemon.workers: at most " + std::to_string(kMaxWorkers) + " workers");
    auto engine = std::make_unique<RoceEngine>(*ports[0], clock, ecfg);
    std::vector<transport::EngineCore *> engines{engine.get()};
    // Capture with several workers: worker w copies its queue's frames into its own ring, main
    // drains them into the one file (doc/uroced.md, Capture). Declared before the queues and
    // the worker guard: the rings outlive every lcore that uses them.
    std::vector<std::unique_ptr<util::CaptureRing>> capture_rings;
    std::vector<std::unique_ptr<port::PortQueue>> queues;
    std::vector<std::unique_ptr<QueueEngine>> qengines;
    for (unsigned w = 1; w < nw; ++w) {
      queues.push_back(std::make_unique<port::PortQueue>(
          ports[0]->port_id(), static_cast<uint16_t>(w), pool, ports[0]->mac()));
      if (pcap.is_open()) {
        capture_rings.push_back(std::make_unique<util::CaptureRing>(kCaptureRingBytes));
        queues.back()->set_capture(capture_rings.back().get(), capture_clock.get());
      }
      transport::EngineConfig c = ecfg;
      c.qpn_base = worker_qpn_base(w, ecfg.qpn_base);
      qengines.push_back(std::make_unique<QueueEngine>(*queues.back(), clock, c));
      engines.push_back(qengines.back().get());
    }
    // ports[1..]: one verbs device each, its engine on main (doc/uroced.md, Ports and devices).
    std::vector<std::unique_ptr<RoceEngine>> port_engines;
    for (size_t i = 1; i < ports.size(); ++i) {
      transport::EngineConfig c = ecfg;
      c.ecn = cfg.ports[i].ecn;
      c.seed = ecfg.seed ^ (0x9E3779B97F4A7C15ull * i);  // each device its own key tags
      port_engines.push_back(std::make_unique<RoceEngine>(*ports[i], clock, c));
    }
    std::unique_ptr<HandOff> handoff;
    if (nw > 1) handoff = std::make_unique<HandOff>(nw, 1024);
    Loop loop{ports, nb_queues, *engine, nullptr, clock};
    for (auto &e : port_engines)
      loop.devices.push_back(PortDevice{e.get(), nullptr});
    loop.ho = handoff.get();
    loop.pcap = &pcap;
    for (auto &r : capture_rings)
      loop.capture_rings.push_back(r.get());
    EthPortView view(*ports[0], cfg.ports[0], loop);
    Daemon daemon(engines, view);
    // While the control thread waits for a worker to run a command, main's loop goes on.
    daemon.set_wait_hook([&loop] {
      if (loop.step() == 0) {
        const timespec nap{0, 20'000};
        nanosleep(&nap, nullptr);
      }
    });
    std::vector<std::unique_ptr<WorkerLoop>> wloops;
    daemon.set_stats_hook([&ports, &daemon, &loop, &wloops](std::vector<ctl::StatEntry> &v) {
      for (auto &p : ports)
        add_port_stats(*p, v);
      if (wloops.empty()) return;
      const port::PortCounters &pc = ports[0]->counters();
      add_lane_stats(0, loop.lc,
                     LaneQueue{pc.rx_packets, pc.tx_packets, pc.tx_deferred, pc.tx_backpressure,
                               pc.tx_dropped, ports[0]->tx_pending()},
                     v);
      for (auto &w : wloops) {
        LaneCounters c;
        port::QueueCounters q;
        size_t pending = 0;
        daemon.run_on(w->id, [&] {
          c = w->lc;
          q = w->q->counters();
          pending = w->q->tx_pending();
        });
        add_lane_stats(w->id, c,
                       LaneQueue{q.rx_packets, q.tx_packets, q.tx_deferred, q.tx_backpressure,
                                 q.tx_dropped, pending, w->q->capture_dropped()},
                       v);
      }
    });
    loop.daemon = &daemon;
    std::vector<std::unique_ptr<EthPortView>> port_views;
    std::vector<std::unique_ptr<Daemon>> port_daemons;
    for (size_t i = 1; i < ports.size(); ++i) {
      port_views.push_back(std::make_unique<EthPortView>(*ports[i], cfg.ports[i], loop));
      port_daemons.push_back(std::make_unique<Daemon>(*port_engines[i - 1], *port_views.back()));
      port_daemons.back()->set_stats_hook([&ports](std::vector<ctl::StatEntry> &v) {
        for (auto &p : ports)
          add_port_stats(*p, v);
      });
      loop.devices[i - 1].daemon = port_daemons.back().get();
    }
    std::vector<unsigned> worker_lcores;
    {
      unsigned lc = 0;
      RTE_LCORE_FOREACH_WORKER(lc) {
        worker_lcores.push_back(lc);
      }
    }
    if (worker_lcores.size() < nw - 1)
      throw port::PortError("daemon.workers lists " + std::to_string(nw) +
                            " lcores but the EAL runs " + std::to_string(worker_lcores.size() + 1));
    WorkerGuard guard{wloops};
    for (unsigned w = 1; w < nw; ++w) {
      auto wl = std::make_unique<WorkerLoop>();
      wl->id = w;
      wl->daemon = &daemon;
      wl->engine = qengines[w - 1].get();
      wl->clock = &clock;
      wl->q = queues[w - 1].get();
      wl->ho = handoff.get();
      wl->mac = ports[0]->mac();
      wl->idle_sleep_us = cfg.daemon.idle_sleep_us;
      wloops.push_back(std::move(wl));
      if (rte_eal_remote_launch(worker_main, wloops.back().get(), worker_lcores[w - 1]) != 0)
        throw port::PortError("cannot launch worker " + std::to_string(w) + " on lcore " +
                              std::to_string(worker_lcores[w - 1]));
    }
    signal(SIGPIPE, SIG_IGN);
    // One control socket per device: ports[0]'s serves `daemon`, ports[i]'s port_daemons[i - 1].
    std::vector<std::unique_ptr<ctl::Server>> servers;
    std::vector<ctl::Server *> server_ptrs;
    std::vector<Daemon *> daemon_ptrs{&daemon};
    for (auto &d : port_daemons)
      daemon_ptrs.push_back(d.get());
    for (size_t i = 0; i < ports.size(); ++i) {
      const std::string &path = cfg.ports[i].socket;
      // The socket's directory (e.g. /run/uroce) is created if missing (one level).
      const std::string dir = path.substr(0, path.rfind('/'));
      if (!dir.empty()) ::mkdir(dir.c_str(), 0755);
      auto srv = ctl::Server::listen(path.c_str());
      if (!srv)
        throw port::PortError("cannot listen on control socket '" + path +
                              "': " + std::strerror(srv.error()));
      servers.push_back(std::move(srv.value()));
      Daemon::register_types(servers.back()->types());
      server_ptrs.push_back(servers.back().get());
      if (i == 0)
        std::printf("uroced: control socket %s\n", path.c_str());
      else
        std::printf("uroced: control socket %s (device %s, port %s)\n", path.c_str(),
                    cfg.ports[i].ibdev.c_str(), ports[i]->name().c_str());
    }
    // /uroce/... for dpdk-telemetry.py: its callbacks read the counters through servers[0].
    if (const int rc = telemetry::register_commands(cfg.ports[0].socket))
      std::printf("uroced: telemetry commands not registered: %s\n", std::strerror(-rc));
    std::printf("uroced: running on lcore %u (transport engine on port %s", rte_lcore_id(),
                ports[0]->name().c_str());
    for (unsigned w = 1; w < nw; ++w)
      std::printf("%sworker %u on lcore %u", w == 1 ? "; " : ", ", w, worker_lcores[w - 1]);
    for (size_t i = 1; i < ports.size(); ++i)
      std::printf("; engine of port %s on lcore %u", ports[i]->name().c_str(), rte_lcore_id());
    std::printf(")\n");

    poll_loop(loop, server_ptrs, daemon_ptrs, cfg.daemon.idle_sleep_us);

    std::printf("uroced: stopping\n");
    // Tell every app the daemon is going away (its next call fails with ECONNRESET), then
    // close every connection and unlink the sockets.
    for (size_t i = 0; i < servers.size(); ++i)
      for (uint64_t id : daemon_ptrs[i]->session_ids())
        servers[i]->send(id, ctl::make_header(ctl::kShutdown, 0), nullptr, 0);
    servers.clear();
    server_ptrs.clear();
    for (auto &d : port_daemons)
      d->close_all();  // their engines run on main: nothing else to wait for
    for (PortDevice &d : loop.devices)
      d.daemon = nullptr;
    daemon.close_all();  // the workers still run: the teardown runs on them
    guard.stop();
    loop.daemon = nullptr;
    if (!capture_rings.empty()) loop.drain_captures();  // what the workers captured last
    if (handoff) handoff->drain_all();
    transport::EngineCounters ec = engine->counters();
    auto add_engine = [&ec](const transport::EngineCounters &c) {
      ec.rx_pkts += c.rx_pkts;
      ec.tx_pkts += c.tx_pkts;
      ec.tx_backpressure += c.tx_backpressure;
      ec.cq_overflows += c.cq_overflows;
    };
    for (auto &e : port_engines)
      add_engine(e->counters());
    for (auto &e : qengines)
      add_engine(e->counters());
    std::printf("engine counters: rx_pkts=%lu tx_pkts=%lu tx_backpressure=%lu cq_overflows=%lu\n",
                ec.rx_pkts, ec.tx_pkts, ec.tx_backpressure, ec.cq_overflows);
    if (!wloops.empty()) {
      auto lane = [](unsigned w, const LaneCounters &c) {
        std::printf(
            "worker %u: handoff_out=%lu handoff_in=%lu handoff_drop=%lu to_main=%lu "
            "misrouted=%lu\n",
            w, c.handoff_out, c.handoff_in, c.handoff_drop, c.to_main, c.misrouted);
      };
      lane(0, loop.lc);
      for (auto &w : wloops) {
        lane(w->id, w->lc);
        const port::QueueCounters &q = w->q->counters();
        std::printf(
            "worker %u queue: tx_packets=%lu tx_deferred=%lu tx_backpressure=%lu tx_dropped=%lu\n",
            w->id, q.tx_packets, q.tx_deferred, q.tx_backpressure, q.tx_dropped);
      }
    }
    const BridgeCounters bc = daemon.counters(true);
    std::printf(
        "bridge counters: sessions=%lu doorbells=%lu send_wqes=%lu recv_wqes=%lu bad_wqes=%lu "
        "cqes=%lu\n",
        bc.sessions_opened, bc.doorbells, bc.send_wqes, bc.recv_wqes, bc.bad_wqes, bc.cqes);
    for (auto &p : ports) {
      p->flush();
      print_counters(*p);
    }
    for (auto &p : ports)
      p->set_capture(nullptr);
    if (pcap.is_open()) {
      const uint64_t frames = pcap.frames();
      if (!pcap.close()) {
        std::fprintf(stderr, "uroced: error writing capture file %s\n", cfg.daemon.pcap.c_str());
        ports.clear();
        return kExitRuntime;
      }
      uint64_t dropped = 0;
      for (auto &r : capture_rings)
        dropped += r->dropped();
      std::printf("capture: %lu frames written to %s, capture_dropped=%lu\n", frames,
                  cfg.daemon.pcap.c_str(), dropped);
    }
    ports.clear();  // stop and close the ethdevs before the pool and the EAL go
  } catch (const port::PortError &e) {
    std::fprintf(stderr, "uroced: %s\n", e.what());
    return kExitRuntime;
  } catch (const config::ConfigError &e) {
    std::fprintf(stderr, "uroced: configuration error: %s\n", e.what());
    return kExitUsage;
  }
  std::printf("uroced: stopped\n");
  return kExitOk;
}

}  // namespace

}  // namespace uroce::daemon

int main(int argc, char **argv) {
  return uroce::daemon::run(argc, argv);
}
