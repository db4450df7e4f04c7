// SPDX-License-Identifier: BSD-3-Clause
// A bounded neighbour table shared by ARP (4-byte keys) and IPv6 ND (16-byte keys).
//
// States follow the Linux neighbour state machine in a reduced form (doc/uroced.md, Neighbours):
//   kIncomplete  no MAC yet; broadcast/multicast probes every retrans_ns (Linux retrans_time),
//                max_probes of them (mcast_solicit), then kFailed.
//   kReachable   MAC confirmed by a reply, usable until `deadline` (reachable_ns after the
//                confirmation); then kStale.
//   kStale       MAC usable but unconfirmed (learnt from a peer's request, or timed out). Using
//                it (resolve) answers the MAC and starts a refresh: kProbe.
//   kProbe       MAC still usable; unicast probes every retrans_ns, max_probes of them
//                (ucast_solicit), then kFailed.
//   kFailed      no MAC. resolve() answers kFailed until retry_ns after the failure, then starts
//                a new kIncomplete episode (at most one new resolution per retry_ns per
//                neighbour); a late answer to the failed episode is still accepted.
// Unused stale and failed entries are freed after gc_stale_ns. When the table is full, a new
// entry replaces the least recently used stale or failed entry, or is refused (kTableFull).
// A failure is counted as "no answer" or, when an answer for the entry arrived during the
// episode but was ignored (answer_ignored()), as "answer ignored".
//
// The caller passes a monotonic time in nanoseconds. Nothing here allocates after
// construction, throws, locks or prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace uroce::port {

struct NeighParams {
  size_t capacity = 256;
  uint64_t reachable_ns = 30'000'000'000ull;  // Linux base_reachable_time 30 s
  uint64_t retrans_ns = 1'000'000'000ull;     // between probes: Linux retrans_time 1 s
  unsigned max_probes = 3;                    // Linux mcast_solicit / ucast_solicit 3
  uint64_t retry_ns = 1'000'000'000ull;       // a failed entry is tried again after this
  uint64_t gc_stale_ns = 60'000'000'000ull;   // unused stale / failed entries are freed
};

enum class Resolve : uint8_t {
  kResolved,   // mac_out is valid
  kPending,    // a probe is (or will be) sent; ask again later
  kFailed,     // the last resolution failed less than retry_ns ago
  kTableFull,  // no room for a new entry
  kNoSource,   // no local address of this family to send the probe from
};

enum class NeighState : uint8_t { kFree, kIncomplete, kReachable, kStale, kProbe, kFailed };

const char *neigh_state_str(NeighState s) noexcept;

template <size_t AL>
class NeighTable {
 public:
  struct Entry {
    uint8_t ip[AL] = {};
    uint8_t mac[6] = {};
    NeighState state = NeighState::kFree;
    uint8_t probes = 0;      // probes sent in the current kIncomplete / kProbe episode
    uint8_t ignored = 0;     // answers ignored in this episode (saturating)
    uint64_t deadline = 0;   // next probe (Incomplete/Probe), expiry (Reachable), retry (Failed)
    uint64_t last_used = 0;  // last resolve() or update
  };

  // What poll() asks the protocol to send.
  enum class Action : uint8_t { kNone, kBroadcastProbe, kUnicastProbe };

  explicit NeighTable(const NeighParams &p) : p_(p), e_(p.capacity ? p.capacity : 1) {}

  const NeighParams &params() const noexcept { return p_; }
  size_t capacity() const noexcept { return e_.size(); }
  size_t used() const noexcept {
    size_t n = 0;
    for (const Entry &e : e_)
      n += e.state != NeighState::kFree;
    return n;
  }

  Entry *find(const uint8_t *ip) noexcept {
    for (Entry &e : e_)
      if (e.state != NeighState::kFree && std::memcmp(e.ip, ip, AL) == 0) return &e;
    return nullptr;
  }
  const Entry *find(const uint8_t *ip) const noexcept {
    return const_cast<NeighTable *>(this)->find(ip);
  }

  // Looks `ip` up for sending. On kPending with *probe_now set, the caller sends a probe at once
  // (broadcast when *unicast is false, else to the entry's MAC).
  Resolve resolve(const uint8_t *ip, uint64_t now, uint8_t mac_out[6], bool *probe_now,
                  bool *unicast) noexcept {
    *probe_now = false;
    *unicast = false;
    Entry *e = find(ip);
    if (e == nullptr) {
      e = alloc(ip, now);
      if (e == nullptr) return Resolve::kTableFull;
      start(*e, NeighState::kIncomplete, now);
      *probe_now = true;
      return Resolve::kPending;
    }
    e->last_used = now;
    switch (e->state) {
      case NeighState::kReachable:
        if (now < e->deadline) break;
        e->state = NeighState::kStale;
        [[fallthrough]];
      case NeighState::kStale:
        start(*e, NeighState::kProbe, now);
        *probe_now = true;
        *unicast = true;
        break;
      case NeighState::kProbe:
        break;
      case NeighState::kIncomplete:
        return Resolve::kPending;
      case NeighState::kFailed:
        if (now < e->deadline) return Resolve::kFailed;
        start(*e, NeighState::kIncomplete, now);  // used again after retry_ns: a new episode
        *probe_now = true;
        return Resolve::kPending;
      case NeighState::kFree:
        return Resolve::kFailed;  // unreachable: find() skips free entries
    }
    std::memcpy(mac_out, e->mac, 6);
    return Resolve::kResolved;
  }

  // A reply confirmed ip -> mac. Only updates an existing entry (as Linux with arp_accept=0)
  // unless `create` is set. Returns false if the entry could not be created (table full).
  bool confirm(const uint8_t *ip, const uint8_t mac[6], uint64_t now, bool create) noexcept {
    Entry *e = find(ip);
    if (e == nullptr) {
      if (!create) return true;
      e = alloc(ip, now);
      if (e == nullptr) return false;
    }
    std::memcpy(e->mac, mac, 6);
    e->state = NeighState::kReachable;
    e->probes = 0;
    e->ignored = 0;
    e->deadline = now + p_.reachable_ns;
    return true;
  }

  // An answer for `ip` arrived but could not be used (the protocol counts why); remembered so
  // that a failure of the episode is counted as "answer ignored" rather than "no answer".
  void answer_ignored(const uint8_t *ip) noexcept {
    Entry *e = find(ip);
    if (e != nullptr && (e->state == NeighState::kIncomplete || e->state == NeighState::kProbe) &&
        e->ignored < 255)
      ++e->ignored;
  }

  // A reachable entry whose peer announced another MAC without the right to override it
  // (RFC 4861 7.2.5, O clear): kept, but no longer trusted (kStale).
  void make_stale(const uint8_t *ip) noexcept {
    Entry *e = find(ip);
    if (e != nullptr && e->state == NeighState::kReachable) e->state = NeighState::kStale;
  }

  // A peer told us its MAC without a confirmation of reachability (its request, a gratuitous
  // announcement, an NA without S). Creates the entry if `create`; an entry whose MAC is
  // unchanged keeps its state, a changed MAC makes it kStale.
  bool learn(const uint8_t *ip, const uint8_t mac[6], uint64_t now, bool create) noexcept {
    Entry *e = find(ip);
    if (e == nullptr) {
      if (!create) return true;
      e = alloc(ip, now);
      if (e == nullptr) return false;
      std::memcpy(e->mac, mac, 6);
      e->state = NeighState::kStale;
      return true;
    }
    const bool same = std::memcmp(e->mac, mac, 6) == 0;
    if (e->state == NeighState::kIncomplete || e->state == NeighState::kFailed || !same) {
      std::memcpy(e->mac, mac, 6);
      e->state = NeighState::kStale;
      e->probes = 0;
      e->ignored = 0;
    }
    return true;
  }

  // Advances timers. Visits entries from an internal cursor; returns at the first entry that
  // needs a probe sent (*entry set), or kNone after a full pass (cursor back at 0).
  Action poll(uint64_t now, const Entry **entry) noexcept {
    while (cursor_ < e_.size()) {
      Entry &e = e_[cursor_++];
      switch (e.state) {
        case NeighState::kFree:
          break;
        case NeighState::kReachable:
          if (now >= e.deadline) e.state = NeighState::kStale;
          break;
        case NeighState::kStale:
        case NeighState::kFailed:
          if (now >= e.last_used && now - e.last_used >= p_.gc_stale_ns)
            e.state = NeighState::kFree;
          break;
        case NeighState::kIncomplete:
        case NeighState::kProbe:
          if (now < e.deadline) break;
          if (e.probes >= p_.max_probes) {
            e.state = NeighState::kFailed;
            e.deadline = now + p_.retry_ns;
            e.last_used = now;  // kept (listed, retried when used) until gc_stale_ns unused
            ++failures_;
            if (e.ignored) ++failures_ignored_;
            break;
          }
          e.deadline = now + p_.retrans_ns;
          ++e.probes;
          *entry = &e;
          return e.state == NeighState::kIncomplete ? Action::kBroadcastProbe
                                                    : Action::kUnicastProbe;
      }
    }
    cursor_ = 0;
    return Action::kNone;
  }

  uint64_t failures() const noexcept { return failures_; }
  // Failures of an episode during which at least one answer arrived and was ignored; the rest
  // (failures() - failures_answer_ignored()) had no answer at all.
  uint64_t failures_answer_ignored() const noexcept { return failures_ignored_; }
  uint64_t evictions() const noexcept { return evictions_; }
  const std::vector<Entry> &entries() const noexcept { return e_; }

 private:
  void start(Entry &e, NeighState s, uint64_t now) noexcept {  // a new probing episode
    e.state = s;
    e.probes = 1;
    e.ignored = 0;
    e.deadline = now + p_.retrans_ns;
  }

  Entry *alloc(const uint8_t *ip, uint64_t now) noexcept {
    Entry *victim = nullptr;
    for (Entry &e : e_) {
      if (e.state == NeighState::kFree) {
        victim = &e;
        break;
      }
      if ((e.state == NeighState::kStale || e.state == NeighState::kFailed) &&
          (victim == nullptr || e.last_used < victim->last_used))
        victim = &e;
    }
    if (victim == nullptr) return nullptr;
    if (victim->state != NeighState::kFree) ++evictions_;
    *victim = Entry{};
    std::memcpy(victim->ip, ip, AL);
    victim->last_used = now;
    return victim;
  }

  NeighParams p_;
  std::vector<Entry> e_;
  size_t cursor_ = 0;
  uint64_t failures_ = 0;
  uint64_t failures_ignored_ = 0;
  uint64_t evictions_ = 0;
};

// Internet checksum helpers (RFC 1071), over bytes in network order.
uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t n) noexcept;
uint16_t csum_fold(uint32_t sum) noexcept;  // returns ~folded sum

}  // namespace uroce::port
