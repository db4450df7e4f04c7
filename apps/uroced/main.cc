// SPDX-License-Identifier: BSD-3-Clause
// uroced: the uroce daemon (doc/uroced.md).
//
// It parses its configuration, starts the DPDK EAL, brings the ports up, builds their GID
// tables, announces its addresses (gratuitous ARP, unsolicited NA), builds one transport engine
// per worker lcore (and per further port), the daemons (lib/daemon: one session per app) and
// the control sockets, and wires them to the poll loops (lib/daemon/poll_loop.h), one per lcore.
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
#include <string>
#include <vector>

#include "config/config.h"
#include "ctl/server.h"
#include "daemon/daemon.h"
#include "daemon/eth_port_view.h"
#include "daemon/lcore.h"
#include "daemon/poll_loop.h"
#include "env_check.h"
#include "port/eal.h"
#include "port/eth_port.h"
#include "port/port_queue.h"
#include "settings.h"
#include "telemetry/telemetry.h"
#include "transport/engine.h"
#include "uroce_version.h"
#include "util/capture_ring.h"
#include "util/csprng.h"
#include "util/pcap_writer.h"

namespace uroce::daemon {

namespace {

// Exit codes (doc/uroced.md).
constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;  // EAL, port, capture or control socket setup failed
constexpr int kExitUsage = 2;    // bad command line or configuration
constexpr int kExitEnv = 3;      // refused to start: foreign libibverbs in reach

constexpr const char *kDefaultConfig = "/etc/uroce/uroced.conf";
// Main's longest sleep: its ARP / ND timers (1 s probes, 30 s ages) run at least this often.
constexpr uint64_t kMainMaxSleepNs = 50'000'000;

std::atomic<bool> g_stop{false};
std::atomic<Sleeper *> g_main_sleeper{nullptr};  // woken by the signal (it may sleep)

extern "C" void on_signal(int) {
  g_stop.store(true, std::memory_order_relaxed);
  if (Sleeper *s = g_main_sleeper.load(std::memory_order_relaxed)) s->signal();
}

// DCQCN's line rate (the rate an unthrottled QP sends at, the ceiling of its target rate) is
// the port's link speed when the PMD reports one, else the engine's default (100 Gb/s).
void set_line_rate(const port::EthPort &p, transport::EngineConfig *e) {
  if (const uint32_t mbps = p.link_speed_mbps()) e->line_rate_mbps = mbps;
  if (e->dcqcn)
    std::printf("port %s: dcqcn line rate %.0f Mb/s (%s)\n", p.name().c_str(), e->line_rate_mbps,
                p.link_speed_mbps() ? "link speed" : "no link speed reported: default");
}

// Every port's congestion-control totals (port.NAME.cc.*, doc/congestion.md): the first port's
// summed over its workers' engines, each further port's from its one engine, which runs on the
// main lcore (the control thread, where stats hooks run).
void add_all_cc_stats(const port::EthPort &first, Daemon &daemon, MainLoop &loop,
                      std::vector<ctl::StatEntry> &v) {
  add_port_cc_stats(first.name(), daemon.cc_totals(), v);
  for (const PortDevice &d : loop.devices())
    add_port_cc_stats(d.port->name(), d.engine->cc_totals(), v);
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

// Capture ring of each worker >= 1 (only with daemon.pcap): about 16 000 frames of 1 KiB, the
// slack for main's drain (every loop iteration) falling behind (doc/uroced.md, Capture).
constexpr size_t kCaptureRingBytes = size_t{16} << 20;

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
  const IdleParams idle = idle_params(cfg.daemon);
  if (idle.adaptive && prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) != 0)
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
    apply_cc(cfg.ports[0].cc, &ecfg);
    set_line_rate(*ports[0], &ecfg);
    ecfg.seed = 0;  // memory keys and QPNs from getrandom(2) in every engine (doc/security.md)
    // One engine per worker: worker 0 on the main lcore sends through ports[0]'s EthPort
    // (queue 0), worker w through its own queue w; QPNs carry the worker (daemon/lcore.h).
    const unsigned nw = nb_queues;
    if (nw > kMaxWorkers)
      throw port::PortError("daemon.workers: at most " + std::to_string(kMaxWorkers) + " workers");
    // PDs, MRs and AHs of ports[0]'s device: one table every worker reads (doc/uroced.md,
    // Shared object tables), freed after rte_rcu_qsbr grace periods.
    transport::ObjectTables tables(ecfg.max_pd, ecfg.max_mr, ecfg.max_ah, 0);
    ecfg.tables = &tables;
    Qsbr qsbr(nw);  // reader w: worker w's lcore (main: 0, also the control thread)
    auto engine = std::make_unique<RoceEngine>(*ports[0], clock, ecfg);
    std::vector<DaemonEngine *> engines{engine.get()};
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
      c.tables = nullptr;  // a device of its own, its engine its tables' only reader
      c.ecn = cfg.ports[i].ecn;
      apply_cc(cfg.ports[i].cc, &c);
      set_line_rate(*ports[i], &c);
      port_engines.push_back(std::make_unique<RoceEngine>(*ports[i], clock, c));
    }
    std::unique_ptr<HandOff> handoff;
    if (nw > 1) handoff = std::make_unique<HandOff>(nw, 1024);
    // One Sleeper per lcore (doc/uroced.md, Sleeping when idle); none in busy mode.
    std::vector<std::unique_ptr<Sleeper>> sleeper_objs;
    std::vector<Sleeper *> sleepers;
    if (idle.adaptive)
      for (unsigned w = 0; w < nw; ++w) {
        sleeper_objs.push_back(std::make_unique<Sleeper>());
        sleepers.push_back(sleeper_objs.back().get());
      }
    MainLoop::Config mc;
    mc.port = ports[0].get();
    mc.engine = engine.get();
    mc.clock = &clock;
    mc.ho = handoff.get();
    mc.nb_queues = nb_queues;
    mc.sleeper = sleepers.empty() ? nullptr : sleepers[0];
    mc.sleepers = &sleepers;
    mc.idle = idle;
    mc.idle.max_sleep_ns = kMainMaxSleepNs;
    mc.qsbr = &qsbr;
    MainLoop loop(mc);
    for (size_t i = 1; i < ports.size(); ++i)
      loop.devices().push_back(PortDevice{ports[i].get(), port_engines[i - 1].get(), nullptr});
    {
      std::vector<util::CaptureRing *> rings;
      for (auto &r : capture_rings)
        rings.push_back(r.get());
      loop.set_capture(&pcap, std::move(rings));
    }
    EthPortView view(*ports[0], cfg.ports[0], loop);
    const DaemonOptions dopt = daemon_options(cfg.daemon.quota);
    Daemon daemon(engines, view, dopt);
    daemon.set_grace(&qsbr);
    // QP 1 and rdma_cm's ids of each port (doc/cm.md): MADs leave through the port's TX batch.
    auto mad_tx = [](port::EthPort *p) {
      return [p](const uint8_t *f, uint32_t len) noexcept {
        transport::TxBuf b = p->tx_alloc();
        if (b.data == nullptr) return false;
        if (len > b.cap) {
          p->tx_abort(b);
          return false;
        }
        std::memcpy(b.data, f, len);
        p->tx_commit(b, len);
        return true;
      };
    };
    auto clock_fn = [&clock] { return clock.now_ns(); };
    // Each CM draws its communication ids from its own key (getrandom): not guessable across
    // restarts or ports (doc/security.md).
    util::Csprng cm_seeds;
    std::vector<std::unique_ptr<CmService>> cms;
    cms.push_back(
        std::make_unique<CmService>(view, mad_tx(ports[0].get()), clock_fn, cm_seeds.next_u64()));
    daemon.set_cm(cms[0].get());
    loop.set_cm(cms[0].get());
    daemon.set_sleepers(sleepers);
    // While the control thread waits for a worker to run a command, main's loop goes on.
    daemon.set_wait_hook([&loop] {
      if (loop.step() == 0) {
        const timespec nap{0, 20'000};
        nanosleep(&nap, nullptr);
      }
    });
    std::vector<std::unique_ptr<WorkerLane>> wloops;
    daemon.set_stats_hook([&ports, &daemon, &loop, &wloops, &cms](std::vector<ctl::StatEntry> &v) {
      for (auto &p : ports)
        add_port_stats(*p, v);
      add_all_cc_stats(*ports[0], daemon, loop, v);
      cms[0]->add_stats(v);
      if (const IdleCounters *ic = loop.idle_counters())
        add_idle_stats(0, *ic, v);
      else
        add_busy_stats(0, loop.busy_yields(), v);
      for (auto &w : wloops) {
        IdleCounters c;
        WorkerLoop &l = *w->loop;
        if (l.idle_counters() == nullptr) {
          uint64_t y = 0;
          daemon.run_on(l.id(), [&] { y = l.busy_yields(); });
          add_busy_stats(l.id(), y, v);
          continue;
        }
        daemon.run_on(l.id(), [&] { c = *l.idle_counters(); });
        add_idle_stats(l.id(), c, v);
      }
      if (wloops.empty()) return;
      const port::PortCounters &pc = ports[0]->counters();
      add_lane_stats(0, loop.lane_counters(),
                     LaneQueue{pc.rx_packets, pc.tx_packets, pc.tx_deferred, pc.tx_backpressure,
                               pc.tx_dropped, ports[0]->tx_pending()},
                     v);
      for (auto &w : wloops) {
        LaneCounters c;
        port::QueueCounters q;
        size_t pending = 0;
        WorkerLoop &l = *w->loop;
        daemon.run_on(l.id(), [&] {
          c = l.lane_counters();
          q = l.port().counters();
          pending = l.port().tx_pending();
        });
        add_lane_stats(l.id(), c,
                       LaneQueue{q.rx_packets, q.tx_packets, q.tx_deferred, q.tx_backpressure,
                                 q.tx_dropped, pending, l.port().capture_dropped()},
                       v);
      }
    });
    loop.set_daemon(&daemon);
    std::vector<std::unique_ptr<EthPortView>> port_views;
    std::vector<std::unique_ptr<Daemon>> port_daemons;
    for (size_t i = 1; i < ports.size(); ++i) {
      port_views.push_back(std::make_unique<EthPortView>(*ports[i], cfg.ports[i], loop));
      port_daemons.push_back(
          std::make_unique<Daemon>(*port_engines[i - 1], *port_views.back(), dopt));
      cms.push_back(std::make_unique<CmService>(*port_views.back(), mad_tx(ports[i].get()),
                                                clock_fn, cm_seeds.next_u64()));
      CmService *cm = cms.back().get();
      port_daemons.back()->set_cm(cm);
      if (!sleepers.empty()) port_daemons.back()->set_sleepers({sleepers[0]});
      port_daemons.back()->set_stats_hook(
          [&ports, cm, &daemon, &loop](std::vector<ctl::StatEntry> &v) {
            for (auto &p : ports)
              add_port_stats(*p, v);
            add_all_cc_stats(*ports[0], daemon, loop, v);
            cm->add_stats(v);
          });
      loop.devices()[i - 1].daemon = port_daemons.back().get();
      loop.devices()[i - 1].cm = cm;
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
      WorkerLoop::Config wc;
      wc.id = w;
      wc.port = queues[w - 1].get();
      wc.engine = qengines[w - 1].get();
      wc.clock = &clock;
      wc.ho = handoff.get();
      wc.mac = ports[0]->mac();
      wc.sleeper = sleepers.empty() ? nullptr : sleepers[w];
      wc.sleepers = &sleepers;
      wc.idle = idle;
      wc.qsbr = &qsbr;
      auto wl = std::make_unique<WorkerLane>();
      wl->loop = std::make_unique<WorkerLoop>(wc);
      wl->loop->set_daemon(&daemon);
      if (const unsigned n = wl->loop->watch_sources(); n != 0 && idle.adaptive)
        std::printf("uroced: worker %u: %u RX queue(s) without interrupts: idle naps of %u-%u us\n",
                    w, n, cfg.daemon.idle_sleep_us, cfg.daemon.idle_max_sleep_us);
      wloops.push_back(std::move(wl));
      if (rte_eal_remote_launch(worker_lcore_main, wloops.back().get(), worker_lcores[w - 1]) != 0)
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
      ctl::ServerOptions so;
      so.max_outstanding = cfg.daemon.quota.ctl_outstanding;
      so.max_rate = cfg.daemon.quota.ctl_rate;
      auto srv = ctl::Server::listen(path.c_str(), so);
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

    loop.set_servers(server_ptrs, daemon_ptrs);
    if (const unsigned n = loop.watch_sources(); n != 0 && idle.adaptive)
      std::printf("uroced: main: %u RX queue(s) without interrupts: idle naps of %u-%u us\n", n,
                  cfg.daemon.idle_sleep_us, cfg.daemon.idle_max_sleep_us);
    std::printf("uroced: poll %s\n", idle.adaptive ? "adaptive (sleeps when idle)" : "busy");
    g_main_sleeper.store(sleepers.empty() ? nullptr : sleepers[0]);
    loop.run(g_stop);
    g_main_sleeper.store(nullptr);

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
    for (PortDevice &d : loop.devices()) {
      d.daemon = nullptr;
      d.cm = nullptr;
    }
    loop.set_cm(nullptr);
    daemon.close_all();  // the workers still run: the teardown runs on them
    guard.stop();
    loop.set_daemon(nullptr);
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
      lane(0, loop.lane_counters());
      for (auto &w : wloops) {
        WorkerLoop &l = *w->loop;
        lane(l.id(), l.lane_counters());
        const port::QueueCounters &q = l.port().counters();
        std::printf(
            "worker %u queue: tx_packets=%lu tx_deferred=%lu tx_backpressure=%lu tx_dropped=%lu\n",
            l.id(), q.tx_packets, q.tx_deferred, q.tx_backpressure, q.tx_dropped);
      }
    }
    const BridgeCounters bc = daemon.counters(true);
    std::printf(
        "bridge counters: sessions=%lu doorbells=%lu send_wqes=%lu recv_wqes=%lu bad_wqes=%lu "
        "cqes_forwarded=%lu\n",
        bc.sessions_opened, bc.doorbells, bc.send_wqes, bc.recv_wqes, bc.bad_wqes,
        bc.cqes_forwarded);
    for (auto &p : ports) {
      p->flush();
      print_port_counters(*p);
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
