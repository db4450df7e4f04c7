// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/poll_loop.h"

#include <rte_launch.h>

#include <cstdio>
#include <ctime>

#include "port/classify.h"
#include "port/rx_intr.h"

namespace uroce::daemon {

HandOff::HandOff(unsigned n, uint32_t slots) : n_(n), rings_(size_t{n} * n) {
  for (unsigned f = 0; f < n; ++f)
    for (unsigned t = 0; t < n; ++t)
      if (f != t) rings_[size_t{f} * n + t] = std::make_unique<HandOffRing>(slots);
}

void HandOff::drain_all() noexcept {
  for (auto &r : rings_) {
    MbufRef m{};
    while (r && r->pop(&m))
      rte_pktmbuf_free(m.m);
  }
}

template <class Port>
PollLoop<Port>::PollLoop(const Config &c) noexcept
    : id_(c.id),
      port_(c.port),
      engine_(c.engine),
      clock_(c.clock),
      ho_(c.ho),
      nb_queues_(c.nb_queues),
      mac_(c.mac),
      sleeper_(c.sleeper),
      sleepers_(c.sleepers),
      qsbr_(c.qsbr),
      gate_(c.sleeper, c.idle) {}

template <class Port>
void PollLoop<Port>::set_servers(std::vector<ctl::Server *> servers,
                                 std::vector<Daemon *> daemons) {
  servers_ = std::move(servers);
  server_daemons_ = std::move(daemons);
}

template <class Port>
void PollLoop<Port>::set_capture(util::PcapWriter *pcap, std::vector<util::CaptureRing *> rings) {
  pcap_ = pcap;
  capture_rings_ = std::move(rings);
}

template <class Port>
unsigned PollLoop<Port>::drain_captures() noexcept {
  size_t n = 0;
  for (util::CaptureRing *r : capture_rings_)
    n +=
        r->drain([this](const uint8_t *f, uint32_t len, uint64_t ts) { pcap_->write(f, len, ts); });
  return static_cast<unsigned>(n);
}

template <class Port>
unsigned PollLoop<Port>::step() noexcept {
  unsigned work = 0;
  // Between passes this lcore holds nothing it read from the shared object tables.
  if (qsbr_ != nullptr) qsbr_->quiescent(id_);
  // The apps' rings first: a receive posted before a request was sent is in the engine before
  // that request's packet can be taken from the RX queue below. A worker first runs the
  // control operations main sent it.
  if (daemon_ != nullptr) {
    if constexpr (!kMain) work += daemon_->serve_commands(id_);
    work += daemon_->bridge_in(id_);
  }
  for (PortDevice &d : devices_)
    if (d.daemon != nullptr) work += d.daemon->bridge_in();
  // One clock read for the RX burst, taken after the bridge so that timers armed by the frames
  // start from when the burst is handled; poll() reads its own.
  const uint64_t now = clock_->now_ns();
  last_now_ = now;
  work += rx(now);
  work += handoff_in(now);
  if constexpr (kMain)
    if (now >= next_timer_) next_timer_ = now + kTimerNs;
  work += engine_->poll();
  if (daemon_ != nullptr) work += daemon_->bridge_out(id_);
  for (PortDevice &d : devices_) {
    work += d.engine->poll();
    if (d.daemon != nullptr) work += d.daemon->bridge_out();
  }
  port_->flush();
  for (PortDevice &d : devices_)
    d.port->flush();
  if (!capture_rings_.empty()) work += drain_captures();
  // A worker's captured frames wait in its ring for main.
  if constexpr (!kMain)
    if (work != 0 && port_->capturing()) note_push(0);
  if (pushed_ != 0) ring_pushed();
  return work;
}

// The lcores this pass handed frames to: each is woken if it sleeps (one fence per lcore and
// pass, after every push of the pass; Sleeper::ring).
template <class Port>
void PollLoop<Port>::ring_pushed() noexcept {
  const uint64_t p = pushed_;
  pushed_ = 0;
  if (sleepers_ == nullptr) return;
  for (unsigned w = 0; w < sleepers_->size(); ++w)
    if (((p >> w) & 1) && w != id_ && (*sleepers_)[w] != nullptr) (*sleepers_)[w]->ring();
}

// Main: a RoCE frame of ports[0] goes to the worker owning its QP, or to main's engine.
template <class Port>
port::RxVerdict PollLoop<Port>::main_frame(rte_mbuf *m, const uint8_t *f, uint32_t len,
                                           uint64_t now) noexcept {
  if (cm_ != nullptr && frame_dest_qpn(f, len) == kGsiQpn) {
    cm_->rx(f, len, now);
    return port::RxVerdict::kAccepted;
  }
  if (ho_ != nullptr) {
    const uint32_t o = qpn_owner(frame_dest_qpn(f, len), ho_->workers());
    if (o != 0) {
      if (ho_->ring(0, o)->push(MbufRef{m})) {
        ++lc_.handoff_out;
        note_push(o);
        return port::RxVerdict::kTaken;
      }
      ++lc_.handoff_drop;
      return port::RxVerdict::kRefused;
    }
  }
  engine_->rx(f, len, now);
  return port::RxVerdict::kAccepted;
}

template <class Port>
unsigned PollLoop<Port>::rx(uint64_t now) noexcept {
  unsigned work = 0;
  if constexpr (kMain) {
    // ports[0]: with several workers main polls queue 0 (worker w polls queue w), else all.
    auto to_engine = [this, now](rte_mbuf *m, const uint8_t *f, uint32_t len) noexcept {
      return main_frame(m, f, len, now);
    };
    const uint16_t nq = ho_ != nullptr ? 1 : nb_queues_;
    for (uint16_t q = 0; q < nq; ++q)
      work += port_->rx_burst(q, to_engine, now);
    if (now >= next_timer_) {
      port_->timers(now);
      if (cm_ != nullptr) cm_->poll(now);
    }
    // ports[1..]: every queue, into that port's engine (QP 1 to its CM service).
    for (PortDevice &d : devices_) {
      RoceEngine &e = *d.engine;
      CmService *cm = d.cm;
      auto to_port_engine = [&e, cm, now](rte_mbuf *, const uint8_t *f, uint32_t len) noexcept {
        if (cm != nullptr && frame_dest_qpn(f, len) == kGsiQpn)
          cm->rx(f, len, now);
        else
          e.rx(f, len, now);
        return port::RxVerdict::kAccepted;
      };
      for (uint16_t q = 0; q < nb_queues_; ++q)
        work += d.port->rx_burst(q, to_port_engine, now);
      if (now >= next_timer_) {
        d.port->timers(now);
        if (cm != nullptr) cm->poll(now);
      }
    }
  } else {
    // Worker: RoCE frames for its own QPs to its engine, for other workers' QPs to their ring,
    // everything else to main (whose EthPort handles and counts it).
    const unsigned nw = ho_->workers();
    rte_mbuf *pkts[port::PortQueue::kBurst];
    const uint16_t n = port_->rx(pkts);
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf *m = pkts[i];
      const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
      const uint32_t len = rte_pktmbuf_data_len(m);
      if (m->nb_segs == 1 && port::classify(f, len, mac_).cls == port::FrameClass::kRoce) {
        const uint32_t o = qpn_owner(frame_dest_qpn(f, len), nw);
        if (o == id_) {
          engine_->rx(f, len, now);
          rte_pktmbuf_free(m);
        } else if (ho_->ring(id_, o)->push(MbufRef{m})) {
          ++lc_.handoff_out;
          note_push(o);
        } else {
          ++lc_.handoff_drop;
          rte_pktmbuf_free(m);
        }
        continue;
      }
      if (ho_->ring(id_, 0)->push(MbufRef{m})) {
        ++lc_.to_main;
        note_push(0);
      } else {
        ++lc_.to_main_drop;
        rte_pktmbuf_free(m);
      }
    }
    work += n;
  }
  return work;
}

// The frames other lcores passed to this one: main gets ARP / ND / other frames and RoCE for
// worker 0's QPs; a worker gets RoCE for its own QPs.
template <class Port>
unsigned PollLoop<Port>::handoff_in(uint64_t now) noexcept {
  if (ho_ == nullptr) return 0;
  unsigned work = 0;
  const unsigned nw = ho_->workers();
  for (unsigned from = 0; from < nw; ++from) {
    if (from == id_) continue;
    MbufRef r[Port::kBurst];
    const size_t k = ho_->ring(from, id_)->pop_burst(r, Port::kBurst);
    for (size_t j = 0; j < k; ++j) {
      if constexpr (kMain) {
        port_->rx_handed(
            r[j].m,
            [this, now](rte_mbuf *m, const uint8_t *f, uint32_t len) noexcept {
              return main_frame(m, f, len, now);
            },
            now);
      } else {
        const uint8_t *f = rte_pktmbuf_mtod(r[j].m, const uint8_t *);
        const uint32_t len = rte_pktmbuf_data_len(r[j].m);
        if (qpn_owner(frame_dest_qpn(f, len), nw) == id_)
          engine_->rx(f, len, now);
        else
          ++lc_.misrouted;
        rte_pktmbuf_free(r[j].m);
      }
    }
    lc_.handoff_in += k;
    work += static_cast<unsigned>(k);
  }
  return work;
}

// Main: the control servers on the loop's thread (doc/uroced.md, Threading), polled with an
// epoll timeout of 0 every kServeEveryNs of the loop's clock (why by time: doc/perf.md).
// Returns the epoll events handled (work: a request may have activated something).
template <class Port>
unsigned PollLoop<Port>::serve_control(bool force) noexcept {
  if (!force && last_now_ < next_serve_) return 0;
  unsigned n = 0;
  for (size_t i = 0; i < servers_.size(); ++i) {
    const int k = servers_[i]->poll(0, *server_daemons_[i]);
    if (k > 0) n += static_cast<unsigned>(k);
  }
  next_serve_ = last_now_ + kServeEveryNs;
  return n;
}

template <class Port>
void PollLoop<Port>::run(const std::atomic<bool> &stop) noexcept {
  if (qsbr_ != nullptr) qsbr_->start(id_);
  while (!stop.load(std::memory_order_acquire)) {
    unsigned work = step();
    if constexpr (kMain) work += serve_control();
    gate_.after_pass(work, last_now_, *this);
  }
  if (qsbr_ != nullptr) qsbr_->stop(id_);
  if constexpr (!kMain) {
    // The backlog gets a few more chances (the peer may still be reading); what is left is
    // dropped and counted (tx_dropped): the only place a worker drops its own frames.
    for (unsigned i = 0; i < port::EthPort::kStopDrainTries && port_->tx_pending() != 0; ++i)
      port_->flush();
    port_->drop_pending();
  }
}

template <class Port>
unsigned PollLoop<Port>::watch_sources() {
  rx_sources_.clear();
  auto add_port = [this](uint16_t port_id, uint16_t nq, uint16_t first) {
    for (uint16_t q = first; q < first + nq; ++q)
      rx_sources_.push_back(RxSource{port_id, q, port::rx_intr_fd(port_id, q)});
  };
  if constexpr (kMain) {
    add_port(port_->port_id(), ho_ != nullptr ? 1 : nb_queues_, 0);
    for (PortDevice &d : devices_)
      add_port(d.port->port_id(), nb_queues_, 0);
  } else {
    add_port(port_->port_id(), 1, port_->queue());
  }
  unsigned uncovered = 0;
  for (RxSource &r : rx_sources_) {
    // Edge-triggered: the PMD reads the queue, this lcore only learns that it has frames.
    if (r.fd >= 0 && sleeper_ != nullptr && sleeper_->watch(r.fd, WakeSource::kRx, true) != 0)
      r.fd = -1;
    if (r.fd < 0) ++uncovered;
  }
  if constexpr (kMain)
    if (sleeper_ != nullptr)
      for (ctl::Server *srv : servers_)  // level-triggered: readable while it has events
        if (sleeper_->watch(srv->epoll_fd(), WakeSource::kControl, false) != 0)
          throw port::PortError("cannot watch the control socket (epoll_ctl)");
  return uncovered;
}

// Before the last pass ahead of a sleep (on) and after it (off): the flags the apps check after
// publishing a doorbell (this lcore's doorbell rings), and the RX interrupts.
template <class Port>
void PollLoop<Port>::arm(bool on) noexcept {
  if (daemon_ != nullptr) daemon_->arm_doorbells(id_, on);
  for (PortDevice &d : devices_)
    if (d.daemon != nullptr) d.daemon->arm_doorbells(0, on);
  for (const RxSource &r : rx_sources_)
    if (r.fd >= 0) port::rx_intr_set(r.port_id, r.queue, on);
}

template <class Port>
unsigned PollLoop<Port>::recheck() noexcept {
  unsigned work = step();
  if constexpr (kMain) work += serve_control(true);
  return work;
}

// The earliest timer of this lcore's engines; *nap when something can progress without a
// wake-up this lcore would hear of (an RX queue without interrupt on a link that is up, TX
// frames the NIC has not taken, bridge work, QPs that can send, captured frames).
template <class Port>
uint64_t PollLoop<Port>::deadline(bool *nap) noexcept {
  // A TX backlog on a link that is down waits for the link (memif without a peer keeps the
  // start-up announcements): no nap for it.
  uint64_t dl = engine_->next_timer_ns();
  bool n =
      engine_->active_qps() != 0 || (port_->tx_pending() != 0 && port::link_up(port_->port_id()));
  if (daemon_ != nullptr && daemon_->pending(id_)) n = true;
  for (PortDevice &d : devices_) {
    const uint64_t t = d.engine->next_timer_ns();
    if (t < dl) dl = t;
    if (d.engine->active_qps() != 0 ||
        (d.port->tx_pending() != 0 && port::link_up(d.port->port_id())))
      n = true;
    if (d.daemon != nullptr && d.daemon->pending(0)) n = true;
  }
  if (!n)
    for (const RxSource &r : rx_sources_)
      if (r.fd < 0 && port::link_up(r.port_id)) {
        n = true;
        break;
      }
  *nap = n;
  return dl;
}

template class PollLoop<port::EthPort>;
template class PollLoop<port::PortQueue>;

int worker_lcore_main(void *arg) {
  auto *w = static_cast<WorkerLane *>(arg);
  // Acquire: pairs with main's release store of stop (everything main did before is seen).
  w->loop->run(w->stop);
  return 0;
}

void WorkerGuard::stop() noexcept {
  for (auto &w : lanes) {
    w->stop.store(true, std::memory_order_release);
    w->loop->wake();
  }
  rte_eal_mp_wait_lcore();
}

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

}  // namespace uroce::daemon
