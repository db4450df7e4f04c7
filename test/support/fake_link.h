// SPDX-License-Identifier: BSD-3-Clause
// A simulated Ethernet segment for transport tests: N endpoints (each a transport::TxPort) on one
// switch, a FakeClock, and seeded faults.
//
//   FakeClock clock;
//   FakeLink link(seed, clock);
//   Endpoint &a = link.add_endpoint(mac_a), &b = link.add_endpoint(mac_b);
//   ... engines transmit through a / b ...
//   while (!done) {
//     clock.set(std::max(clock.now_ns(), std::min(link.next_delivery_ns(), wheel_hint)));
//     link.deliver([&](Endpoint &to, const uint8_t *f, uint32_t len) { engine_of(to).rx(f, len);
//     });
//     ... advance timers, poll engines ...
//   }
//
// Path of a frame committed by endpoint S at time now, for each destination D (the endpoint
// whose MAC is the destination MAC; every other endpoint for a group address, i.e. broadcast
// and multicast; unknown unicast is dropped and counted):
//   0. S's uplink (NIC), if configured: frames leave S one after another at the uplink's
//      `bits_per_ns` and reach the switch (step 1) when their last bit is out, at time t >= now;
//      without an uplink t = now. The buffer stays busy until then (TX ring back-pressure: the
//      pool size is the NIC's ring depth) and is free again once the frame reached the switch,
//   1. the direction's filter hook (pass / drop / corrupt / duplicate),
//   2. random drop,
//   3. the bottleneck queue of D's switch port, if configured: frames queue behind each other
//      at `bits_per_ns`; on arrival with q bytes queued, an ECT(0) or ECT(1) frame is marked CE
//      (IPv4 TOS with the header checksum updated, RFC 1624, or IPv6 traffic class; the ICRC
//      does not cover these bits) if q > `ecn_threshold_bytes`, or, with RED configured, with
//      probability red_pmax * (q - red_kmin) / (red_kmax - red_kmin) for red_kmin < q <= red_kmax
//      and always above red_kmax (DCQCN's RED/ECN on the instantaneous queue); with more than
//      `notect_drop_bytes` queued a not-ECT frame is dropped; with more than `buffer_bytes` any
//      frame is dropped (tail drop); QueueStats records the depth each arrival saw,
//   4. random corruption (one random bit anywhere in the frame flipped),
//   5. delay + uniform jitter (a direction never reorders by jitter: each frame is delivered no
//      earlier than the previous one of the same direction),
//   6. random duplication (the copy is delivered right after the original),
//   7. random reordering: the frame is held back until 1..reorder_depth later frames of the same
//      direction have been scheduled (it is then delivered right after the last of them), or at
//      the latest reorder_max_hold_ns after its normal delivery time.
// Every random choice comes from one std::mt19937_64 seeded by `seed` in a fixed order, so the
// same seed and the same sequence of calls give the same trace.
//
// Transmit buffers: each endpoint owns a pool of `pool_size` buffers of kBufCap bytes allocated
// by add_endpoint(). A committed frame keeps its buffer until every copy of it has been
// delivered or dropped (it is "in flight"), so a sender that outruns the link sees tx_alloc()
// return data == nullptr: back-pressure.
//
// Test code: allocates freely, not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "support/fake_clock.h"
#include "transport/port.h"
#include "util/pcap_writer.h"

namespace uroce::test {

// What a filter hook does with one frame (called once per destination copy).
enum class Action : uint8_t { kPass, kDrop, kCorrupt, kDuplicate };

using FrameFilter = std::function<Action(const uint8_t *frame, uint32_t len)>;

// Per-direction (or global) faults. Probabilities are per frame copy, in [0, 1].
struct Faults {
  double drop = 0;
  double duplicate = 0;
  double corrupt = 0;
  double reorder = 0;
  uint32_t reorder_depth = 3;             // held behind 1..reorder_depth later frames
  uint64_t reorder_max_hold_ns = 20'000;  // released at the latest this long after it was due
  uint64_t delay_ns = 1000;               // one-way propagation delay
  uint64_t jitter_ns = 0;                 // plus uniform [0, jitter_ns]
  FrameFilter filter;                     // optional
};

// The egress queue of a switch port (towards one endpoint). bits_per_ns == 0: no queue.
struct Bottleneck {
  double bits_per_ns = 0;  // e.g. 10.0 for 10 Gb/s
  uint32_t ecn_threshold_bytes = UINT32_MAX;
  uint32_t notect_drop_bytes = UINT32_MAX;
  uint32_t buffer_bytes = UINT32_MAX;
  // RED/ECN marking (step 3 above); red_kmax_bytes == 0: off (ecn_threshold_bytes decides).
  uint32_t red_kmin_bytes = 0;
  uint32_t red_kmax_bytes = 0;
  double red_pmax = 0;
};

// What one bottleneck queue saw, sampled at every frame arrival (dropped frames included).
struct QueueStats {
  static constexpr uint32_t kBinBytes = 1024;
  uint64_t arrivals = 0;
  uint64_t dropped = 0;
  uint64_t marked = 0;
  uint64_t max_bytes = 0;       // deepest queue an arrival saw
  uint64_t accepted_bytes = 0;  // bytes of the frames queued (not dropped)
  std::vector<uint64_t> hist;   // arrivals by queued bytes / kBinBytes
  // Depth below which a fraction q (0..1] of the arrivals saw the queue: the upper edge of the
  // histogram bin, so an over-estimate by at most kBinBytes. 0 without arrivals.
  uint64_t percentile_bytes(double q) const noexcept;
};

struct LinkCounters {
  uint64_t sent = 0;       // frames committed by endpoints
  uint64_t delivered = 0;  // frame copies handed to a sink
  uint64_t dropped = 0;    // every copy dropped, the sum of the causes below
  uint64_t dropped_random = 0;
  uint64_t dropped_filter = 0;
  uint64_t dropped_queue = 0;    // bottleneck: not-ECT over notect_drop_bytes or buffer full
  uint64_t dropped_no_dest = 0;  // unknown unicast MAC
  uint64_t dropped_runt = 0;     // shorter than an Ethernet header
  uint64_t duplicated = 0;
  uint64_t reordered = 0;  // copies held back
  uint64_t corrupted = 0;
  uint64_t ce_marked = 0;
  uint64_t tx_alloc_failed = 0;
};

class FakeLink;

class Endpoint {
 public:
  static constexpr uint32_t kBufCap = 9216 + 256;

  // transport::TxPort
  transport::TxBuf tx_alloc() noexcept;
  void tx_commit(transport::TxBuf b, uint32_t len) noexcept;
  void tx_abort(transport::TxBuf b) noexcept;

  const uint8_t *mac() const noexcept { return mac_; }
  size_t index() const noexcept { return index_; }
  size_t pool_size() const noexcept { return bufs_.size(); }
  size_t free_buffers() const noexcept { return free_.size(); }
  uint64_t tx_frames() const noexcept { return tx_frames_; }
  uint64_t rx_frames() const noexcept { return rx_frames_; }
  uint64_t tx_alloc_failed() const noexcept { return tx_alloc_failed_; }

  void *user = nullptr;  // free for the test (e.g. the engine behind this endpoint)

 private:
  friend class FakeLink;
  struct Buf {
    std::unique_ptr<uint8_t[]> data;
    uint32_t refs = 0;   // copies in flight
    bool busy = false;   // allocated, or committed and in flight
    bool owned = false;  // allocated and not yet committed or aborted
  };
  Endpoint(FakeLink *link, size_t index, const uint8_t mac[6], size_t pool_size);
  Buf *buf_of(const transport::TxBuf &b) noexcept;
  void release(uint32_t buf) noexcept;

  FakeLink *link_;
  size_t index_;
  uint8_t mac_[6];
  std::vector<Buf> bufs_;
  std::vector<uint32_t> free_;
  uint64_t tx_frames_ = 0, rx_frames_ = 0, tx_alloc_failed_ = 0;
};

static_assert(transport::TxPort<Endpoint>);

class FakeLink {
 public:
  FakeLink(uint64_t seed, FakeClock &clock);
  ~FakeLink();
  FakeLink(const FakeLink &) = delete;
  FakeLink &operator=(const FakeLink &) = delete;

  // MACs must be unique (a duplicate aborts). The reference stays valid for the link's life.
  Endpoint &add_endpoint(const uint8_t mac[6], size_t pool_size = 1024);
  Endpoint &endpoint(size_t i) { return *eps_.at(i); }
  size_t num_endpoints() const noexcept { return eps_.size(); }

  // Faults for every direction without its own setting / for one direction (from -> to).
  void set_faults(const Faults &f) { global_ = f; }
  void set_faults(const Endpoint &from, const Endpoint &to, const Faults &f);
  void clear_direction_faults() { per_dir_.clear(); }
  const Faults &faults(const Endpoint &from, const Endpoint &to) const;

  // The egress queue towards `to` / towards every endpoint without its own setting.
  void set_bottleneck(const Bottleneck &b) { global_bn_ = b; }
  void set_bottleneck(const Endpoint &to, const Bottleneck &b);
  // The statistics of the queue towards `to` (all zero before its first arrival); reset
  // starts a new measurement window (the queue itself is untouched).
  QueueStats queue_stats(const Endpoint &to) const;
  void reset_queue_stats(const Endpoint &to);
  // Bytes in the queue towards `to` at the clock's time (frames not yet departed).
  uint64_t queue_bytes(const Endpoint &to) const;
  // The uplink of `from` (step 0 above); 0 removes it (only while none of its frames is in
  // the uplink).
  void set_uplink(const Endpoint &from, double bits_per_ns);

  // Delivers, in time order, every frame copy due at or before clock.now_ns() by calling
  // sink(Endpoint &to, const uint8_t *frame, uint32_t len); frames committed from inside the
  // sink are delivered by a later call even if already due (so a zero-delay ping-pong cannot
  // loop). Returns how many were delivered.
  template <class Sink>
  size_t deliver(Sink &&sink) {
    const uint64_t now = clock_.now_ns();
    pump_uplinks(now);
    const uint64_t seq_limit = next_seq_;
    release_held(now);
    size_t n = 0;
    for (;;) {
      auto it = queue_.begin();
      if (it == queue_.end() || it->first.first > now || it->first.second >= seq_limit) break;
      Pending p = std::move(it->second);
      queue_.erase(it);
      ++n;
      ++counters_.delivered;
      Endpoint &to = *eps_[p.to];
      ++to.rx_frames_;
      if (cap_delivered_.is_open()) cap_delivered_.write(p.data.data(), p.data.size(), now);
      sink(to, p.data.data(), static_cast<uint32_t>(p.data.size()));
      if (p.buf != kNoBuf) eps_[p.from]->release(p.buf);
    }
    return n;
  }

  // Time of the next delivery (a held frame's deadline included), UINT64_MAX if none.
  uint64_t next_delivery_ns() const noexcept;
  // Frame copies scheduled or held.
  size_t in_flight() const noexcept;

  // pcap of every frame as committed (before any fault) / as delivered (after faults, CE
  // marks and corruption). Timestamps are fake-clock ns. Returns false if the file cannot be
  // created.
  bool capture(const std::string &path);
  bool capture_delivered(const std::string &path);
  void stop_capture();

  const LinkCounters &counters() const noexcept { return counters_; }
  FakeClock &clock() noexcept { return clock_; }

 private:
  friend class Endpoint;
  static constexpr uint32_t kNoBuf = UINT32_MAX;
  struct Pending {
    uint32_t to = 0;
    uint32_t from = 0;
    uint32_t buf = 0;  // the sender's buffer this copy keeps busy, or kNoBuf
    std::vector<uint8_t> data;
  };
  struct Held {
    uint64_t deadline = 0;
    uint64_t seq = 0;  // reserved when held, used if released by the deadline
    uint32_t remaining = 0;
    Pending p;
  };
  struct DirState {
    uint64_t last_at = 0;  // delivery time of the latest frame scheduled in this direction
    std::vector<Held> held;
  };
  struct PortQueue {
    std::deque<std::pair<uint64_t, uint32_t>> frames;  // (departure ns, bytes)
    uint64_t bytes = 0;
    uint64_t busy_until = 0;
    QueueStats stats;
  };
  struct Staged {
    uint64_t at = 0;  // when the frame reaches the switch
    uint32_t buf = 0;
    uint32_t len = 0;
  };
  struct Uplink {
    double bits_per_ns = 0;
    uint64_t busy_until = 0;
    std::deque<Staged> frames;
  };

  void on_commit(Endpoint &from, uint32_t buf, uint32_t len);
  // Steps 1-7 for a frame that reaches the switch at `now`.
  // With hold, each scheduled copy keeps the buffer busy until delivered (no uplink);
  // without, the buffer is released when routing is done (the copies own their bytes).
  void route(Endpoint &from, uint32_t buf, uint32_t len, uint64_t now, bool hold);
  // Routes the uplinks' frames that reached the switch by `now`, in time order.
  void pump_uplinks(uint64_t now);
  // One copy towards `to`; returns true if it was scheduled (it then holds a buffer ref).
  bool send_copy(Endpoint &from, uint32_t buf, const uint8_t *frame, uint32_t len, Endpoint &to,
                 uint64_t now, bool hold);
  void schedule(DirState &dir, uint64_t at, Pending &&p);
  void release_held(uint64_t now);
  bool enqueue_bottleneck(uint32_t to, std::vector<uint8_t> &data, uint64_t now, uint64_t *depart);
  void flip_random_bit(std::vector<uint8_t> &data);
  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return p > 0 && uniform() < p; }
  void drop_counted(uint64_t *cause) {
    ++*cause;
    ++counters_.dropped;
  }

  FakeClock &clock_;
  std::mt19937_64 rng_;
  std::vector<std::unique_ptr<Endpoint>> eps_;
  Faults global_;
  std::map<std::pair<size_t, size_t>, Faults> per_dir_;
  Bottleneck global_bn_;
  std::map<size_t, Bottleneck> per_port_bn_;
  std::map<std::pair<size_t, size_t>, DirState> dirs_;
  std::map<size_t, PortQueue> ports_;
  std::vector<Uplink> uplinks_;                             // by endpoint index
  std::map<std::pair<uint64_t, uint64_t>, Pending> queue_;  // (deliver at, seq)
  uint64_t next_seq_ = 0;
  LinkCounters counters_;
  util::PcapWriter cap_sent_, cap_delivered_;
};

// Sets the ECN field of an Ethernet / [802.1Q] / IPv4 or IPv6 frame in place; for IPv4 the
// header checksum is updated incrementally (RFC 1624). Returns the previous ECN codepoint
// (0..3), or -1 if the frame is not IP or is too short.
int set_frame_ecn(uint8_t *frame, uint32_t len, uint8_t ecn) noexcept;
// The ECN codepoint of a frame, or -1 if it is not IP.
int frame_ecn(const uint8_t *frame, uint32_t len) noexcept;

}  // namespace uroce::test
