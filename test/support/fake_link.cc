// SPDX-License-Identifier: BSD-3-Clause
#include "support/fake_link.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "wire/hdr.h"

namespace uroce::test {

namespace {

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "FakeLink: %s\n", what);
  std::abort();
}

// Offset of the IP header and its EtherType, or 0 if the frame is not IP.
uint32_t l3_offset(const uint8_t *frame, uint32_t len, uint16_t *type) noexcept {
  if (len < wire::EthHdr::kSize) return 0;
  uint32_t off = wire::EthHdr::kSize;
  uint16_t t = wire::be::load16(frame + 12);
  if (t == wire::kEtherTypeVlan) {
    if (len < off + wire::VlanHdr::kSize) return 0;
    t = wire::be::load16(frame + 16);
    off += wire::VlanHdr::kSize;
  }
  if (t == wire::kEtherTypeIpv4 && len >= off + wire::Ipv4Hdr::kSize && (frame[off] >> 4) == 4) {
    *type = t;
    return off;
  }
  if (t == wire::kEtherTypeIpv6 && len >= off + wire::Ipv6Hdr::kSize && (frame[off] >> 4) == 6) {
    *type = t;
    return off;
  }
  return 0;
}

}  // namespace

int frame_ecn(const uint8_t *frame, uint32_t len) noexcept {
  uint16_t type = 0;
  const uint32_t off = l3_offset(frame, len, &type);
  if (off == 0) return -1;
  if (type == wire::kEtherTypeIpv4)
    return static_cast<int>(wire::hdr_at<wire::Ipv4Hdr>(frame + off)->ecn());
  return static_cast<int>(wire::hdr_at<wire::Ipv6Hdr>(frame + off)->ecn());
}

int set_frame_ecn(uint8_t *frame, uint32_t len, uint8_t ecn) noexcept {
  uint16_t type = 0;
  const uint32_t off = l3_offset(frame, len, &type);
  if (off == 0) return -1;
  const auto e = static_cast<wire::Ecn>(ecn & 3);
  if (type == wire::kEtherTypeIpv6) {
    auto *ip = wire::hdr_at<wire::Ipv6Hdr>(frame + off);
    const int old = static_cast<int>(ip->ecn());
    ip->set_ecn(e);
    return old;
  }
  auto *ip = wire::hdr_at<wire::Ipv4Hdr>(frame + off);
  const int old = static_cast<int>(ip->ecn());
  // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), m = the 16-bit word holding TOS.
  const uint16_t m = wire::be::load16(frame + off);
  ip->set_ecn(e);
  const uint16_t m2 = wire::be::load16(frame + off);
  uint32_t sum = static_cast<uint16_t>(~ip->checksum()) + static_cast<uint16_t>(~m) + uint32_t{m2};
  while (sum >> 16)
    sum = (sum & 0xFFFF) + (sum >> 16);
  ip->set_checksum(static_cast<uint16_t>(~sum));
  return old;
}

// ---------------------------------------------------------------------------------------------
// Endpoint

Endpoint::Endpoint(FakeLink *link, size_t index, const uint8_t mac[6], size_t pool_size)
    : link_(link), index_(index), bufs_(pool_size) {
  std::memcpy(mac_, mac, 6);
  free_.reserve(pool_size);
  for (size_t i = 0; i < pool_size; ++i) {
    bufs_[i].data.reset(new uint8_t[kBufCap]);
    std::memset(bufs_[i].data.get(), 0, kBufCap);
  }
  for (size_t i = pool_size; i > 0; --i)
    free_.push_back(static_cast<uint32_t>(i - 1));
}

transport::TxBuf Endpoint::tx_alloc() noexcept {
  if (free_.empty()) {
    ++tx_alloc_failed_;
    ++link_->counters_.tx_alloc_failed;
    return {};
  }
  const uint32_t i = free_.back();
  free_.pop_back();
  Buf &b = bufs_[i];
  b.busy = b.owned = true;
  b.refs = 0;
  return {b.data.get(), kBufCap, &b};
}

Endpoint::Buf *Endpoint::buf_of(const transport::TxBuf &tb) noexcept {
  auto *b = static_cast<Buf *>(tb.handle);
  if (bufs_.empty() || b < &bufs_.front() || b > &bufs_.back() || b->data.get() != tb.data)
    die("TxBuf does not belong to this endpoint");
  if (!b->owned) die("TxBuf committed or aborted twice");
  return b;
}

void Endpoint::tx_abort(transport::TxBuf tb) noexcept {
  Buf *b = buf_of(tb);
  b->owned = false;
  release(static_cast<uint32_t>(b - bufs_.data()));
}

void Endpoint::tx_commit(transport::TxBuf tb, uint32_t len) noexcept {
  Buf *b = buf_of(tb);
  if (len > kBufCap) die("tx_commit length larger than the buffer");
  b->owned = false;
  ++tx_frames_;
  link_->on_commit(*this, static_cast<uint32_t>(b - bufs_.data()), len);
}

void Endpoint::release(uint32_t i) noexcept {
  Buf &b = bufs_[i];
  if (b.refs > 0) --b.refs;
  if (b.refs == 0 && !b.owned && b.busy) {
    b.busy = false;
    free_.push_back(i);
  }
}

// ---------------------------------------------------------------------------------------------
// FakeLink

FakeLink::FakeLink(uint64_t seed, FakeClock &clock) : clock_(clock), rng_(seed) {}

FakeLink::~FakeLink() {
  stop_capture();
}

Endpoint &FakeLink::add_endpoint(const uint8_t mac[6], size_t pool_size) {
  for (const auto &e : eps_)
    if (std::memcmp(e->mac(), mac, 6) == 0) die("duplicate endpoint MAC");
  if (mac[0] & 1) die("endpoint MAC is a group address");
  eps_.emplace_back(new Endpoint(this, eps_.size(), mac, pool_size));
  uplinks_.emplace_back();
  return *eps_.back();
}

void FakeLink::set_faults(const Endpoint &from, const Endpoint &to, const Faults &f) {
  per_dir_[{from.index(), to.index()}] = f;
}

const Faults &FakeLink::faults(const Endpoint &from, const Endpoint &to) const {
  auto it = per_dir_.find({from.index(), to.index()});
  return it == per_dir_.end() ? global_ : it->second;
}

void FakeLink::set_bottleneck(const Endpoint &to, const Bottleneck &b) {
  per_port_bn_[to.index()] = b;
}

QueueStats FakeLink::queue_stats(const Endpoint &to) const {
  auto it = ports_.find(to.index());
  return it == ports_.end() ? QueueStats{} : it->second.stats;
}

void FakeLink::reset_queue_stats(const Endpoint &to) {
  ports_[to.index()].stats = QueueStats{};
}

uint64_t FakeLink::queue_bytes(const Endpoint &to) const {
  auto it = ports_.find(to.index());
  if (it == ports_.end()) return 0;
  const uint64_t now = clock_.now_ns();
  uint64_t b = it->second.bytes;
  for (const auto &[depart, len] : it->second.frames) {
    if (depart > now) break;
    b -= len;
  }
  return b;
}

void FakeLink::set_uplink(const Endpoint &from, double bits_per_ns) {
  Uplink &u = uplinks_.at(from.index());
  if (!u.frames.empty()) die("set_uplink with frames in the uplink");
  u.bits_per_ns = bits_per_ns;
}

uint64_t QueueStats::percentile_bytes(double q) const noexcept {
  if (arrivals == 0) return 0;
  const auto need = static_cast<uint64_t>(std::ceil(q * static_cast<double>(arrivals)));
  uint64_t seen = 0;
  for (size_t i = 0; i < hist.size(); ++i) {
    seen += hist[i];
    if (seen >= need) return (i + 1) * uint64_t{kBinBytes};
  }
  return hist.size() * uint64_t{kBinBytes};
}

bool FakeLink::capture(const std::string &path) {
  return cap_sent_.open(path.c_str());
}
bool FakeLink::capture_delivered(const std::string &path) {
  return cap_delivered_.open(path.c_str());
}
void FakeLink::stop_capture() {
  cap_sent_.close();
  cap_delivered_.close();
}

uint64_t FakeLink::next_delivery_ns() const noexcept {
  uint64_t t = queue_.empty() ? UINT64_MAX : queue_.begin()->first.first;
  for (const Uplink &u : uplinks_)
    if (!u.frames.empty()) t = std::min(t, u.frames.front().at);
  for (const auto &[key, dir] : dirs_)
    for (const Held &h : dir.held)
      t = std::min(t, h.deadline);
  return t;
}

size_t FakeLink::in_flight() const noexcept {
  size_t n = queue_.size();
  for (const Uplink &u : uplinks_)
    n += u.frames.size();
  for (const auto &[key, dir] : dirs_)
    n += dir.held.size();
  return n;
}

void FakeLink::on_commit(Endpoint &from, uint32_t buf, uint32_t len) {
  const uint64_t now = clock_.now_ns();
  ++counters_.sent;
  if (cap_sent_.is_open()) cap_sent_.write(from.bufs_[buf].data.get(), len, now);
  Uplink &up = uplinks_[from.index()];
  if (!(up.bits_per_ns > 0)) {
    route(from, buf, len, now, true);
    return;
  }
  const auto ser = static_cast<uint64_t>(std::ceil(static_cast<double>(len) * 8 / up.bits_per_ns));
  up.busy_until = std::max(up.busy_until, now) + ser;
  up.frames.push_back(Staged{up.busy_until, buf, len});
}

void FakeLink::pump_uplinks(uint64_t now) {
  for (;;) {
    Uplink *first = nullptr;
    size_t from = 0;
    for (size_t i = 0; i < uplinks_.size(); ++i) {
      Uplink &u = uplinks_[i];
      if (!u.frames.empty() && u.frames.front().at <= now &&
          (first == nullptr || u.frames.front().at < first->frames.front().at)) {
        first = &u;
        from = i;
      }
    }
    if (first == nullptr) return;
    const Staged st = first->frames.front();
    first->frames.pop_front();
    route(*eps_[from], st.buf, st.len, st.at, false);
  }
}

void FakeLink::route(Endpoint &from, uint32_t buf, uint32_t len, uint64_t now, bool hold) {
  const uint8_t *frame = from.bufs_[buf].data.get();
  uint32_t refs = 0;
  if (len < wire::EthHdr::kSize) {
    drop_counted(&counters_.dropped_runt);
  } else if (frame[0] & 1) {  // group address: flood to every other endpoint
    for (auto &to : eps_)
      if (to.get() != &from) refs += send_copy(from, buf, frame, len, *to, now, hold) ? 1 : 0;
  } else {
    Endpoint *to = nullptr;
    for (auto &e : eps_)
      if (std::memcmp(e->mac(), frame, 6) == 0) to = e.get();
    if (to == nullptr || to == &from)
      drop_counted(&counters_.dropped_no_dest);
    else
      refs += send_copy(from, buf, frame, len, *to, now, hold) ? 1 : 0;
  }
  // send_copy() took one reference per scheduled copy (with hold); none: the buffer is free.
  if (refs == 0 || !hold) from.release(buf);
}

bool FakeLink::send_copy(Endpoint &from, uint32_t buf, const uint8_t *frame, uint32_t len,
                         Endpoint &to, uint64_t now, bool hold) {
  const Faults &f = faults(from, to);
  std::vector<uint8_t> data(frame, frame + len);
  bool dup = false;
  if (f.filter) {
    switch (f.filter(data.data(), len)) {
      case Action::kPass:
        break;
      case Action::kDrop:
        drop_counted(&counters_.dropped_filter);
        return false;
      case Action::kCorrupt:
        flip_random_bit(data);
        break;
      case Action::kDuplicate:
        dup = true;
        break;
    }
  }
  if (chance(f.drop)) {
    drop_counted(&counters_.dropped_random);
    return false;
  }
  uint64_t at = now;
  if (!enqueue_bottleneck(static_cast<uint32_t>(to.index()), data, now, &at)) return false;
  if (chance(f.corrupt)) flip_random_bit(data);
  at += f.delay_ns;
  if (f.jitter_ns > 0) at += rng_() % (f.jitter_ns + 1);
  DirState &dir = dirs_[{from.index(), to.index()}];
  at = std::max(at, dir.last_at);
  dup = dup || chance(f.duplicate);
  const bool hold_frame = chance(f.reorder) && f.reorder_depth > 0;
  const uint32_t hold_for = hold_frame ? 1 + static_cast<uint32_t>(rng_() % f.reorder_depth) : 0;

  Endpoint::Buf &b = from.bufs_[buf];
  Pending p;
  p.to = static_cast<uint32_t>(to.index());
  p.from = static_cast<uint32_t>(from.index());
  p.buf = hold ? buf : kNoBuf;
  if (dup) {
    ++counters_.duplicated;
    Pending copy = p;
    copy.data = data;
    p.data = std::move(data);
    if (hold) b.refs += 2;
    schedule(dir, at, std::move(p));
    schedule(dir, at, std::move(copy));
    return true;
  }
  p.data = std::move(data);
  if (hold) ++b.refs;
  if (hold_frame) {
    ++counters_.reordered;
    Held h;
    h.deadline = at + f.reorder_max_hold_ns;
    h.seq = next_seq_++;
    h.remaining = hold_for;
    h.p = std::move(p);
    dir.held.push_back(std::move(h));
    return true;
  }
  schedule(dir, at, std::move(p));
  return true;
}

// Queues p for delivery at `at`, then lets go of the held frames of the direction that have
// now been passed by enough frames (right after p). Every frame queued, a released one too,
// counts one pass for each frame still held; when several are due, the oldest goes first.
void FakeLink::schedule(DirState &dir, uint64_t at, Pending &&p) {
  dir.last_at = std::max(dir.last_at, at);
  queue_.emplace(std::make_pair(at, next_seq_++), std::move(p));
  auto pass = [&dir] {
    for (Held &h : dir.held)
      if (h.remaining > 0) --h.remaining;
  };
  pass();
  for (;;) {
    auto it = std::find_if(dir.held.begin(), dir.held.end(),
                           [](const Held &h) { return h.remaining == 0; });
    if (it == dir.held.end()) break;
    queue_.emplace(std::make_pair(at, next_seq_++), std::move(it->p));
    dir.held.erase(it);
    pass();
  }
}

void FakeLink::release_held(uint64_t now) {
  for (auto &[key, dir] : dirs_) {
    for (size_t i = 0; i < dir.held.size();) {
      if (dir.held[i].deadline <= now) {
        queue_.emplace(std::make_pair(dir.held[i].deadline, dir.held[i].seq),
                       std::move(dir.held[i].p));
        dir.held.erase(dir.held.begin() + static_cast<ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
}

bool FakeLink::enqueue_bottleneck(uint32_t to, std::vector<uint8_t> &data, uint64_t now,
                                  uint64_t *depart) {
  auto it = per_port_bn_.find(to);
  const Bottleneck &bn = it == per_port_bn_.end() ? global_bn_ : it->second;
  if (!(bn.bits_per_ns > 0)) {
    *depart = now;
    return true;
  }
  PortQueue &q = ports_[to];
  while (!q.frames.empty() && q.frames.front().first <= now) {
    q.bytes -= q.frames.front().second;
    q.frames.pop_front();
  }
  const uint32_t len = static_cast<uint32_t>(data.size());
  const int ecn = frame_ecn(data.data(), len);
  const bool ect = ecn == static_cast<int>(wire::Ecn::kEct0) ||
                   ecn == static_cast<int>(wire::Ecn::kEct1) ||
                   ecn == static_cast<int>(wire::Ecn::kCe);
  QueueStats &st = q.stats;
  ++st.arrivals;
  st.max_bytes = std::max(st.max_bytes, q.bytes);
  const size_t bin = q.bytes / QueueStats::kBinBytes;
  if (st.hist.size() <= bin) st.hist.resize(bin + 1);
  ++st.hist[bin];
  if (q.bytes > bn.buffer_bytes || (!ect && q.bytes > bn.notect_drop_bytes)) {
    ++st.dropped;
    drop_counted(&counters_.dropped_queue);
    return false;
  }
  bool mark = false;
  if (ect && ecn != static_cast<int>(wire::Ecn::kCe)) {
    if (bn.red_kmax_bytes == 0) {
      mark = q.bytes > bn.ecn_threshold_bytes;
    } else if (q.bytes > bn.red_kmax_bytes) {
      mark = true;
    } else if (q.bytes > bn.red_kmin_bytes) {
      const double span = static_cast<double>(bn.red_kmax_bytes - bn.red_kmin_bytes);
      mark = chance(bn.red_pmax * static_cast<double>(q.bytes - bn.red_kmin_bytes) / span);
    }
  }
  if (mark) {
    set_frame_ecn(data.data(), len, static_cast<uint8_t>(wire::Ecn::kCe));
    ++counters_.ce_marked;
    ++st.marked;
  }
  st.accepted_bytes += len;
  const auto ser = static_cast<uint64_t>(std::ceil(static_cast<double>(len) * 8 / bn.bits_per_ns));
  q.busy_until = std::max(q.busy_until, now) + ser;
  q.frames.emplace_back(q.busy_until, len);
  q.bytes += len;
  *depart = q.busy_until;
  return true;
}

void FakeLink::flip_random_bit(std::vector<uint8_t> &data) {
  if (data.empty()) return;
  const uint64_t bit = rng_() % (data.size() * 8);
  data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  ++counters_.corrupted;
}

}  // namespace uroce::test
