// SPDX-License-Identifier: BSD-3-Clause
// uroce-rawpkt: the raw packet-rate baseline of doc/perf.md ("uroced on memif"). It reads a
// uroced configuration file, so that it starts the EAL with exactly uroced's arguments and
// brings the same first port up with lib/port's EthPort (same queues, descriptors, MTU, pool),
// then moves plain L2 frames with rte_eth_tx_burst / rte_eth_rx_burst only: no classification,
// no transport. One process sends (--role tx), another receives (--role rx).
//
//   uroce-rawpkt -c FILE [--set S.K=V]... --role tx|rx [--seconds N] [--size BYTES]
//
// tx: waits for the link, then sends bursts of 32 frames of --size bytes (to 02:00:00:00:00:01,
//     EtherType 0x88b5), allocating each burst from the pool as uroced does, for --seconds
//     (default 10) or until SIGTERM / SIGINT.
// rx: waits for the link and the first frame, then counts frames for --seconds (default 5),
//     freeing them in bulk (30 s without a first frame is an error), prints, and drains until
//     the sender stopped (1 s without a frame): start the sender for longer than --seconds.
// Both print one line: role, packets, wall seconds, the polling thread's CPU seconds
// (CLOCK_THREAD_CPUTIME_ID), packets per wall second and per CPU second.
// Exit status: 0, 1 run-time failure (EAL, port, no link, no frame), 2 bad command line.
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "config/config.h"
#include "port/eal.h"
#include "port/eth_port.h"

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) {
  g_stop.store(true, std::memory_order_relaxed);
}

double ts(clockid_t c) {
  timespec t{};
  clock_gettime(c, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

int usage(const char *why) {
  if (why) std::fprintf(stderr, "uroce-rawpkt: %s\n", why);
  std::fprintf(why ? stderr : stdout,
               "usage: uroce-rawpkt -c UROCED.CONF [--set S.K=V]... --role tx|rx [--seconds N] "
               "[--size BYTES]\n");
  return why ? 2 : 0;
}

}  // namespace

int main(int argc, char **argv) {
  std::string conf, role;
  std::vector<std::string> sets;
  double seconds = -1;
  unsigned size = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    const char *v = nullptr;
    if (a == "-h" || a == "--help") return usage(nullptr);
    if (a == "-c") {
      if (!(v = val())) return usage("-c needs a file");
      conf = v;
    } else if (a == "--set") {
      if (!(v = val())) return usage("--set needs SECTION.KEY=VALUE");
      sets.push_back(v);
    } else if (a == "--role") {
      if (!(v = val())) return usage("--role needs tx or rx");
      role = v;
    } else if (a == "--seconds") {
      char *end = nullptr;
      if (!(v = val()) || (seconds = std::strtod(v, &end)) <= 0 || *end != '\0' || seconds > 3600)
        return usage("--seconds needs a number in (0, 3600]");
    } else if (a == "--size") {
      char *end = nullptr;
      if (!(v = val())) return usage("--size needs a number");
      const unsigned long s = std::strtoul(v, &end, 10);
      if (*end != '\0' || s < 60 || s > 1514) return usage("--size: 60 .. 1514 bytes");
      size = static_cast<unsigned>(s);
    } else {
      return usage(("unknown argument '" + a + "'").c_str());
    }
  }
  if (conf.empty()) return usage("-c UROCED.CONF is required");
  if (role != "tx" && role != "rx") return usage("--role must be tx or rx");
  if (seconds < 0) seconds = role == "tx" ? 10 : 5;
  const bool tx = role == "tx";

  uroce::config::Config cfg;
  try {
    cfg = uroce::config::load_file(conf, sets);
  } catch (const uroce::config::ConfigError &e) {
    std::fprintf(stderr, "uroce-rawpkt: configuration error: %s\n", e.what());
    return 2;
  }
  if (cfg.ports.empty()) return usage("the configuration has no [port NAME]");
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    uroce::port::Eal eal(uroce::port::eal_argv(cfg, argv[0]));
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    rte_mempool *pool = uroce::port::create_pool("rawpkt", cfg.daemon.mbufs,
                                                 uroce::port::data_room_for(cfg.ports[0]));
    struct PoolGuard {
      rte_mempool *mp;
      ~PoolGuard() { uroce::port::free_pool(mp); }
    } guard{pool};
    uroce::port::EthPort port(cfg.ports[0], cfg.daemon, pool, 1);
    const uint16_t pid = port.port_id();
    // (run-uroced.sh starts the memif client only after the server printed this: a client
    // that finds the socket before the server listens fails to start its port)
    std::printf("rawpkt: port %s started, waiting for the link\n", cfg.ports[0].name.c_str());
    // The link (memif: the peer connected), bounded.
    const double t_link = ts(CLOCK_MONOTONIC) + 30;
    for (;;) {
      rte_eth_link l{};
      rte_eth_link_get_nowait(pid, &l);
      if (l.link_status == RTE_ETH_LINK_UP) break;
      if (g_stop.load() || ts(CLOCK_MONOTONIC) > t_link) {
        std::fprintf(stderr, "uroce-rawpkt: the link of %s did not come up within 30 s\n",
                     cfg.ports[0].device.c_str());
        return 1;
      }
      struct timespec nap {
        0, 1'000'000
      };
      nanosleep(&nap, nullptr);
    }
    constexpr uint16_t kBurst = 32;
    rte_mbuf *m[kBurst];
    uint64_t packets = 0, dropped = 0;
    double t0 = 0, c0 = 0, t1 = 0, c1 = 0;
    if (tx) {
      uint8_t frame[1514] = {0x02, 0, 0, 0, 0, 0x01};
      std::memcpy(frame + 6, port.mac(), 6);
      frame[12] = 0x88;
      frame[13] = 0xb5;
      for (unsigned i = 14; i < size; ++i)
        frame[i] = static_cast<uint8_t>(i);
      t0 = ts(CLOCK_MONOTONIC);
      c0 = ts(CLOCK_THREAD_CPUTIME_ID);
      const double end = t0 + seconds;
      uint32_t iter = 0;
      while (!g_stop.load(std::memory_order_relaxed)) {
        if ((++iter & 255) == 0 && ts(CLOCK_MONOTONIC) > end) break;
        if (rte_pktmbuf_alloc_bulk(pool, m, kBurst) != 0) continue;
        for (uint16_t i = 0; i < kBurst; ++i) {
          std::memcpy(rte_pktmbuf_mtod(m[i], uint8_t *), frame, size);
          m[i]->data_len = static_cast<uint16_t>(size);
          m[i]->pkt_len = size;
        }
        const uint16_t n = rte_eth_tx_burst(pid, 0, m, kBurst);
        packets += n;
        if (n < kBurst) {
          dropped += kBurst - n;
          rte_pktmbuf_free_bulk(m + n, kBurst - n);
        }
      }
      t1 = ts(CLOCK_MONOTONIC);
      c1 = ts(CLOCK_THREAD_CPUTIME_ID);
    } else {
      const double first_deadline = ts(CLOCK_MONOTONIC) + 30;
      uint16_t n = 0;
      while ((n = rte_eth_rx_burst(pid, 0, m, kBurst)) == 0) {
        if (g_stop.load() || ts(CLOCK_MONOTONIC) > first_deadline) {
          std::fprintf(stderr, "uroce-rawpkt: no frame within 30 s\n");
          return 1;
        }
      }
      rte_pktmbuf_free_bulk(m, n);
      t0 = ts(CLOCK_MONOTONIC);
      c0 = ts(CLOCK_THREAD_CPUTIME_ID);
      const double end = t0 + seconds;
      uint32_t iter = 0;
      while (!g_stop.load(std::memory_order_relaxed)) {
        if ((++iter & 255) == 0 && ts(CLOCK_MONOTONIC) > end) break;
        n = rte_eth_rx_burst(pid, 0, m, kBurst);
        if (n != 0) {
          packets += n;
          rte_pktmbuf_free_bulk(m, n);
        }
      }
      t1 = ts(CLOCK_MONOTONIC);
      c1 = ts(CLOCK_THREAD_CPUTIME_ID);
    }
    const double wall = t1 - t0, cpu = c1 - c0;
    std::printf(
        "rawpkt role=%s size=%u packets=%lu refused=%lu seconds=%.3f cpu_seconds=%.3f "
        "pps=%.0f pps_per_cpu_second=%.0f\n",
        role.c_str(), size, static_cast<unsigned long>(packets),
        static_cast<unsigned long>(dropped), wall, cpu, wall > 0 ? packets / wall : 0,
        cpu > 0 ? packets / cpu : 0);
    if (!tx) {
      // Drain until the sender stopped (1 s without a frame, at most 30 s): the sender must
      // not lose its peer while it is bursting (net_memif's server crashes then).
      double last = ts(CLOCK_MONOTONIC);
      const double limit = last + 30;
      while (!g_stop.load(std::memory_order_relaxed)) {
        const uint16_t n = rte_eth_rx_burst(pid, 0, m, kBurst);
        const double now = ts(CLOCK_MONOTONIC);
        if (n != 0) {
          rte_pktmbuf_free_bulk(m, n);
          last = now;
        } else if (now - last > 1 || now > limit) {
          break;
        }
      }
    }
    port.stop();
  } catch (const uroce::port::PortError &e) {
    std::fprintf(stderr, "uroce-rawpkt: %s\n", e.what());
    return 1;
  }
  return 0;
}
