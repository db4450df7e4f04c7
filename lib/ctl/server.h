// SPDX-License-Identifier: BSD-3-Clause
// Control-channel server (uroced's main lcore): listens on a Unix SOCK_SEQPACKET socket,
// multiplexes clients with epoll, performs the hello handshake and answers pings itself, hands
// every other validated message to a Handler, and reports each client's end exactly once
// (orderly close, hang-up, error, or a protocol violation — after which the client is dropped)
// so the daemon can tear down that app's resources. Sockets are non-blocking: a client that
// stops reading its replies is disconnected (kWouldBlock) rather than stalling the daemon.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "ctl/message.h"
#include "ctl/socket.h"
#include "shm/fd.h"

namespace uroce::ctl {

struct ClientInfo {
  uint64_t id = 0;  // unique per connection, never reused by this Server
  PeerCred cred;    // SO_PEERCRED at accept
  bool hello_done = false;
  char name[kClientNameLen + 1] = {};
};

class Server;

class Handler {
 public:
  virtual ~Handler() = default;
  // After a successful hello (the client is now allowed to send requests).
  virtual void on_connect(Server &, const ClientInfo &) {}
  // A validated message of a type the handler registered (Server::types()). Reply with
  // Server::reply(); take fds out of msg.fds to keep them (the rest are closed afterwards).
  virtual void on_message(Server &, const ClientInfo &, Message &) {}
  // Exactly once per client that got on_connect, whatever the cause (`why` is kClosed for an
  // orderly end or a hang-up). Clients that fail before completing hello never reach the
  // handler: the daemon has nothing of theirs to tear down.
  virtual void on_disconnect(Server &, const ClientInfo &, CtlError /*why*/) {}
  // The server stopped reading this client: it has max_outstanding replies unread
  // (ServerOptions). Reading resumes once it has read them all.
  virtual void on_throttle(Server &, const ClientInfo &) {}
  // The server stopped reading this client: it sent requests faster than max_rate
  // (ServerOptions). Reading resumes when its rate allows the next one.
  virtual void on_rate_limit(Server &, const ClientInfo &) {}
};

struct ServerOptions {
  int backlog = 64;
  size_t max_clients = 1024;
  // Messages read from one client per poll() round (fairness between clients).
  int max_msgs_per_round = 16;
  // If set, only peers with this uid (or root) are accepted.
  bool same_uid_only = false;
  // Replies a client may leave unread before the server stops reading its requests (they wait
  // in the socket; its sends block, or fail with EAGAIN when non-blocking, once its socket
  // buffer is full) until it has read them all. 0: no limit (a client whose unread replies
  // fill the server's socket buffer is disconnected). Keep it well below that buffer (~40
  // replies of the largest size with the default 208 KiB).
  uint32_t max_outstanding = 0;
  // Messages per second one client may send, after a burst of rate_burst (a token bucket,
  // kept as GCRA: one deadline per client). Beyond it the server stops reading that client
  // until its rate allows the next message, as for max_outstanding. 0: no limit.
  uint32_t max_rate = 0;
  uint32_t rate_burst = 64;
};

class Server {
 public:
  Server() noexcept = default;
  ~Server();
  Server(Server &&) noexcept = default;
  Server &operator=(Server &&) noexcept = default;

  // Binds and listens on `path`. A stale socket file left by a dead daemon (connect() refused)
  // is removed; a live one makes this fail with EADDRINUSE.
  static shm::Result<std::unique_ptr<Server>> listen(const char *path,
                                                     ServerOptions opt = {}) noexcept;
  // Serves an already-connected socket (socketpair in tests) as if it had been accepted.
  // Returns the client id, or 0 on failure.
  uint64_t adopt(shm::UniqueFd sock) noexcept;

  // Waits up to timeout_ms for events and processes them. Returns the number of epoll events
  // handled, or -errno. Never blocks beyond timeout_ms (0 = just poll).
  int poll(int timeout_ms, Handler &h) noexcept;
  // The epoll fd, to nest the server into another event loop (readable => call poll(0, h)).
  int epoll_fd() const noexcept { return ep_.get(); }

  // Sends a reply to request `req` (type | kReplyBit, same request id).
  CtlError reply(uint64_t client, const MsgHeader &req, int32_t status, const void *payload,
                 size_t len, const int *fds = nullptr, size_t nfds = 0) noexcept;
  // Sends an unsolicited message (e.g. kShutdown).
  CtlError send(uint64_t client, const MsgHeader &hdr, const void *payload, size_t len,
                const int *fds = nullptr, size_t nfds = 0) noexcept;
  // Drops a client; its on_disconnect runs during the current or next poll() with `why`.
  void disconnect(uint64_t client, CtlError why) noexcept;

  // The accepted message types (defaults + the ones the daemon registers).
  TypeTable &types() noexcept { return types_; }
  size_t client_count() const noexcept { return clients_.size(); }
  const ClientInfo *client(uint64_t id) const noexcept;
  const char *path() const noexcept { return path_; }

 private:
  struct Conn {
    shm::UniqueFd sock;
    ClientInfo info;
    bool dead = false;
    bool throttled = false;  // over max_outstanding: not reading its requests
    uint32_t unread = 0;     // replies sent since its socket was last seen fully read
    uint64_t rate_tat = 0;   // GCRA: when its next message is due at max_rate (CLOCK_MONOTONIC)
    CtlError why = CtlError::kOk;
  };
  void accept_all() noexcept;
  uint64_t add_conn(shm::UniqueFd sock) noexcept;
  void service(Conn &c, Handler &h) noexcept;
  void handle_hello(Conn &c, Message &m, Handler &h) noexcept;
  void kill(Conn &c, CtlError why) noexcept;
  void reap(Handler &h) noexcept;
  bool over_outstanding(Conn &c) noexcept;       // true: stop reading c (throttled)
  bool over_rate(const Conn &c) const noexcept;  // true: stop reading c (throttled)
  void charge_rate(Conn &c) noexcept;            // one message read from c
  void resume_throttled(Handler &h) noexcept;

  shm::UniqueFd ep_;
  shm::UniqueFd listener_;
  char path_[108] = {};
  ServerOptions opt_;
  TypeTable types_ = TypeTable::defaults();
  std::unordered_map<uint64_t, Conn> clients_;
  uint64_t next_id_ = 1;
  bool pending_dead_ = false;
  size_t throttled_ = 0;  // clients with Conn::throttled
  std::unique_ptr<Message> msg_ = std::make_unique<Message>();
};

}  // namespace uroce::ctl
