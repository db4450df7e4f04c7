// SPDX-License-Identifier: BSD-3-Clause
// The connection manager of one uroced port (doc/cm.md): QP 1 (the GSI QP) and rdma_cm's ids.
//
// QP 1: the main lcore hands every RoCE frame for destination QP 1 to rx(), which checks it is
// a UD SEND-only with the default P_Key, Q_Key 0x80010000 and a 256-byte MAD (each failure
// counted by reason, never more) and passes the MAD to lib/cm's Cm; the MADs Cm sends go out
// as UD SENDs from QP 1 to QP 1 through the TxFn (the port's TX batch on the main lcore). The
// peer's MAC comes from the frames it sent us or from the ARP / ND resolution of
// kCmResolveAddr; a MAD to a peer with neither is dropped and counted (Cm retries).
//
// The ids: the control messages of uroce/ctl_cm.h (cm_ctl.cc), as the Daemon forwards them.
// Each session (app connection) owns its channels (a datagram socket the daemon writes a byte
// to when it queues an event) and its ids; everything it owns is destroyed when it goes (a
// connection then gets the REJ or DREQ its state calls for).
// Everything runs on the main lcore: rx / poll from the poll loop, on_message from the control
// server. Not on a worker's fast path; allocation failures are caught and counted.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "cm/cm.h"
#include "ctl/server.h"
#include "daemon/daemon.h"
#include "shm/fd.h"
#include "uroce/ctl_cm.h"

namespace uroce::daemon {

inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kGsiQkey = 0x80010000u;
inline constexpr uint8_t kMraServiceTimeout = 24;  // the kernel's CMA_CM_MRA_SETTING
// A REQ's primary local ACK timeout: Linux 6.1's rdma_cm on RoCE (packet lifetime 18, + 1 as
// ib_cm's cm_ack_timeout), 4.096 us x 2^19 = 2.1 s; the passive side's QP uses it.
inline constexpr uint8_t kReqLocalAckTimeout = 19;

// Why a frame for QP 1 was dropped before reaching the CM.
enum class GsiDrop : uint8_t {
  kParse,        // wire::parse_frame refused it (ICRC, lengths, ...)
  kNotSendOnly,  // not a UD SEND-only (a CM MAD is one packet without immediate)
  kBadPkey,      // not the default P_Key
  kBadQkey,      // not the GSI Q_Key
  kShortMad,     // payload shorter than a MAD
  kInternal,     // out of memory while handling it
  kCount
};
const char *gsi_drop_str(GsiDrop d) noexcept;

struct GsiCounters {
  uint64_t rx = 0, tx = 0, tx_no_route = 0, tx_fail = 0, events = 0, events_lost = 0;
  uint64_t addr_mismatch = 0;  // requests for another address than the listener's (refused)
  uint64_t drops[static_cast<size_t>(GsiDrop::kCount)] = {};
};

class CmService final : public ctl::Handler, private cm::Host {
 public:
  using TxFn = std::function<bool(const uint8_t *frame, uint32_t len)>;
  using ClockFn = std::function<uint64_t()>;
  CmService(PortView &port, TxFn tx, ClockFn clock, uint64_t seed, cm::Limits lim = {});
  ~CmService() override;

  // A received RoCE frame whose BTH names QP 1 (main lcore).
  void rx(const uint8_t *frame, uint32_t len, uint64_t now) noexcept;
  // Retries, timeouts, time-wait (main lcore, about every millisecond).
  void poll(uint64_t now) noexcept;

  // ctl::Handler, for the kCmTypes the Daemon passes on.
  void on_connect(ctl::Server &, const ctl::ClientInfo &) override {}
  void on_message(ctl::Server &, const ctl::ClientInfo &, ctl::Message &) override;
  void on_disconnect(ctl::Server &, const ctl::ClientInfo &, ctl::CtlError) override;

  // What on_message / on_disconnect do, without the server (tests): one request of session
  // `sess` (0 or -errno; the reply payload in rep[0, *rep_len), rep holds a CmEventReply), and
  // the end of a session.
  int handle(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *rep_len);
  void close_session(uint64_t sess);

  static void register_types(ctl::TypeTable &t) noexcept;
  // cm.* entries for kStats.
  void add_stats(std::vector<ctl::StatEntry> &v) const;
  const GsiCounters &counters() const noexcept { return gc_; }
  const cm::Cm &cm() const noexcept { return cm_; }
  size_t ids() const noexcept { return ids_.size(); }

  struct Id;
  struct Channel;

 private:
  // cm::Host
  void send_mad(const wire::Gid &to, const uint8_t *mad) override;
  void on_event(const cm::Event &e) override;

  // cm_ctl.cc: one handler per type; 0 or -errno, *rep / *rep_len for the reply payload.
  int do_create_channel(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *len);
  int do_create_id(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *len);
  int do_bind(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *len);
  int do_resolve_addr(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *len);
  int do_resolve_route(uint64_t sess, ctl::Message &m);
  int do_listen(uint64_t sess, ctl::Message &m);
  int do_connect(uint64_t sess, ctl::Message &m);
  int do_accept(uint64_t sess, ctl::Message &m);
  int do_reject(uint64_t sess, ctl::Message &m);
  int do_establish(uint64_t sess, ctl::Message &m);
  int do_disconnect(uint64_t sess, ctl::Message &m);
  int do_destroy_id(uint64_t sess, ctl::Message &m);
  int do_get_event(uint64_t sess, ctl::Message &m, uint8_t *rep, size_t *len);
  int do_migrate_id(uint64_t sess, ctl::Message &m);
  int sidr_answer(Id &id, uint8_t status, const ctl::CmConnPayload &p);  // SIDR_REP

  Id *id_of(uint64_t sess, uint32_t handle);
  int bind_id(Id &id, const wire::Gid &gid, bool v6, uint16_t port);
  void destroy_id(Id &id);
  void queue_event(Id &id, uint32_t event, int32_t status, const cm::Event *e = nullptr,
                   uint32_t listen_id = 0);
  int local_gid_index(const wire::Gid &g) const noexcept;
  bool pick_source(const wire::Gid &to, wire::Gid *out) const noexcept;

  PortView &port_;
  TxFn tx_;
  ClockFn clock_;
  cm::Cm cm_;
  GsiCounters gc_;
  uint32_t psn_ = 0;
  uint64_t rng_;
  uint32_t next_handle_ = 1;
  std::map<uint32_t, std::unique_ptr<Id>> ids_;            // by handle
  std::map<uint32_t, std::unique_ptr<Channel>> channels_;  // by handle
  std::map<uint32_t, uint32_t> by_comm_;                   // cm comm id -> id handle
  std::map<uint64_t, uint32_t> ports_;                     // (ps << 16 | port) -> id handle
  std::map<std::array<uint8_t, 16>, std::array<uint8_t, 6>> macs_;  // peer GID -> MAC
};

// An rdma_cm id of a session.
struct CmService::Id {
  uint32_t handle = 0;
  uint64_t session = 0;
  uint32_t channel = 0;
  uint16_t ps = 0;
  uint8_t qp_type = 0;
  bool bound = false, resolved = false, listening = false, disc_reported = false;
  bool any = false;  // bound to a wildcard address: listens on every address of the port
  wire::Gid local, peer;
  uint16_t local_port = 0, peer_port = 0;
  uint16_t gid_index = 0;
  uint32_t comm_id = 0;     // 0: no connection (or SIDR request)
  uint32_t listen_for = 0;  // a CONNECT_REQUEST's new id: the listener
};

// An event channel of a session: its queue and the socket that wakes the app.
struct CmService::Channel {
  uint32_t handle = 0;
  uint64_t session = 0;
  shm::UniqueFd wake;
  std::deque<ctl::CmEventReply> q;
  static constexpr size_t kMaxQueued = 4096;
};

}  // namespace uroce::daemon
