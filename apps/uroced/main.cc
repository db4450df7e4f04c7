// SPDX-License-Identifier: BSD-3-Clause
// uroced: the uroce daemon (doc/uroced.md).
//
// Today it parses its configuration, starts the DPDK EAL, brings the ports up, builds their GID
// tables, announces its addresses (gratuitous ARP, unsolicited NA) and runs the RX/TX poll loop
// on the main lcore, answering ARP and IPv6 neighbour discovery. RoCE frames are counted and
// dropped ("roce_no_transport_engine_yet") until the transport engine is wired in.
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "env_check.h"
#include "port/eal.h"
#include "port/eth_port.h"
#include "uroce_version.h"
#include "util/pcap_writer.h"

namespace uroce::daemon {

namespace {

// Exit codes (doc/uroced.md).
constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;  // EAL, port or capture setup failed
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
               "Current state: uroced brings its ports up, builds the GID tables, sends\n"
               "gratuitous ARP and unsolicited NA, and answers ARP and IPv6 neighbour\n"
               "solicitations. There is no transport engine yet: every RoCE v2 frame (UDP 4791)\n"
               "is counted and dropped with the reason \"roce_no_transport_engine_yet\".\n"
               "SIGTERM or SIGINT stops it cleanly; counters are printed on exit.\n"
               "\n"
               "Exit status: 0 clean shutdown, 1 EAL/port/capture failure, 2 bad command line\n"
               "or configuration, 3 refused to start (a non-system libibverbs.so.1 reachable\n"
               "through LD_LIBRARY_PATH or LD_PRELOAD).\n",
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
    std::printf("port %s: device=%s mtu=%u (IB MTU %u) dscp=%u ecn=%s\n", p.name.c_str(),
                p.device.c_str(), p.mtu, p.ib_mtu(), p.dscp, p.ecn ? "on" : "off");
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
      "tx_alloc_fail=%lu tx_dropped=%lu tx_too_long=%lu rx_arp=%lu rx_nd=%lu "
      "rx_roce=%lu\n",
      p.name().c_str(), c.rx_packets, c.rx_bytes, c.tx_packets, c.tx_bytes, c.tx_alloc_fail,
      c.tx_dropped, c.tx_too_long, c.rx_arp, c.rx_nd, c.rx_roce);
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

// The poll loop: no allocation, no printing, no locks, no exceptions.
void poll_loop(std::vector<std::unique_ptr<port::EthPort>> &ports, uint16_t nb_queues,
               uint32_t idle_sleep_us) noexcept {
  const port::TscClock clock;
  constexpr uint64_t kTimerNs = 1'000'000;  // ARP/ND timers every millisecond
  constexpr unsigned kIdleSpins = 1024;
  uint64_t next_timer = 0;
  unsigned idle = 0;
  const timespec nap{0, static_cast<long>(idle_sleep_us) * 1000};
  while (!g_stop.load(std::memory_order_relaxed)) {
    const uint64_t now = clock.now_ns();
    unsigned got = 0;
    for (auto &p : ports) {
      for (uint16_t q = 0; q < nb_queues; ++q)
        got += p->rx_burst(q, port::NoEngine{}, now);
      if (now >= next_timer) p->timers(now);
      p->flush();
    }
    if (now >= next_timer) next_timer = now + kTimerNs;
    if (got != 0) {
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
  try {
    const std::vector<std::string> eal_args = port::eal_argv(cfg, argv[0]);
    port::Eal eal(eal_args);
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
    if (!cfg.daemon.pcap.empty()) {
      if (!pcap.open(cfg.daemon.pcap.c_str()))
        throw port::PortError("cannot open capture file '" + cfg.daemon.pcap +
                              "': " + std::strerror(errno));
      for (auto &p : ports)
        p->set_capture(&pcap);
      std::printf("capturing every frame to %s\n", cfg.daemon.pcap.c_str());
    }

    for (auto &p : ports) {
      const unsigned n = p->announce();
      p->flush();
      std::printf("port %s: announced %u address(es) (gratuitous ARP / unsolicited NA)\n",
                  p->name().c_str(), n);
    }
    std::printf(
        "uroced: running on lcore %u (no transport engine yet: RoCE frames are "
        "dropped and counted)\n",
        rte_lcore_id());

    poll_loop(ports, nb_queues, cfg.daemon.idle_sleep_us);

    std::printf("uroced: stopping\n");
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
      std::printf("capture: %lu frames written to %s\n", frames, cfg.daemon.pcap.c_str());
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
