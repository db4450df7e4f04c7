// SPDX-License-Identifier: BSD-3-Clause
#include "ctl/server.h"

#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

namespace uroce::ctl {

namespace {

constexpr uint64_t kListenerId = 0;

bool set_nonblock(int fd) noexcept {
  int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

}  // namespace

Server::~Server() {
  if (listener_ && path_[0] != '\0') ::unlink(path_);
}

shm::Result<std::unique_ptr<Server>> Server::listen(const char *path, ServerOptions opt) noexcept {
  using R = shm::Result<std::unique_ptr<Server>>;
  struct sockaddr_un sa {};
  sa.sun_family = AF_UNIX;
  if (path == nullptr || path[0] == '\0' || std::strlen(path) >= sizeof(sa.sun_path))
    return R::failure(ENAMETOOLONG);
  std::strcpy(sa.sun_path, path);
  auto srv = std::make_unique<Server>();
  srv->opt_ = opt;
  srv->ep_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!srv->ep_) return R::failure(errno);
  shm::UniqueFd l(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!l) return R::failure(errno);
  const auto *addr = reinterpret_cast<const struct sockaddr *>(&sa);
  if (::bind(l.get(), addr, sizeof(sa)) != 0) {
    if (errno != EADDRINUSE) return R::failure(errno);
    // Stale or live? Only a socket file that refuses connections is removed.
    struct stat st;
    if (::lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode)) return R::failure(EADDRINUSE);
    shm::UniqueFd probe(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!probe) return R::failure(errno);
    if (::connect(probe.get(), addr, sizeof(sa)) == 0 || errno != ECONNREFUSED)
      return R::failure(EADDRINUSE);
    if (::unlink(path) != 0) return R::failure(errno);
    if (::bind(l.get(), addr, sizeof(sa)) != 0) return R::failure(errno);
  }
  if (::listen(l.get(), opt.backlog) != 0) {
    const int e = errno;
    ::unlink(path);
    return R::failure(e);
  }
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerId;
  if (::epoll_ctl(srv->ep_.get(), EPOLL_CTL_ADD, l.get(), &ev) != 0) {
    const int e = errno;
    ::unlink(path);
    return R::failure(e);
  }
  std::strcpy(srv->path_, path);
  srv->listener_ = std::move(l);
  return R(std::move(srv));
}

uint64_t Server::add_conn(shm::UniqueFd sock) noexcept {
  if (clients_.size() >= opt_.max_clients) return 0;
  if (!set_nonblock(sock.get())) return 0;
  auto cred = peer_credentials(sock.get());
  if (!cred) return 0;
  if (opt_.same_uid_only && cred->uid != ::geteuid() && cred->uid != 0) return 0;
  const uint64_t id = next_id_++;
  struct epoll_event ev {};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = id;
  if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, sock.get(), &ev) != 0) return 0;
  Conn &c = clients_[id];
  c.sock = std::move(sock);
  c.info.id = id;
  c.info.cred = cred.value();
  return id;
}

uint64_t Server::adopt(shm::UniqueFd sock) noexcept {
  if (!ep_) {
    ep_.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!ep_) return 0;
  }
  return add_conn(std::move(sock));
}

void Server::accept_all() noexcept {
  for (;;) {
    shm::UniqueFd s(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!s) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN: done; EMFILE etc.: try again next round
    }
    (void)add_conn(std::move(s));  // on refusal s is closed: the client sees the hang-up
  }
}

void Server::kill(Conn &c, CtlError why) noexcept {
  if (c.dead) return;
  if (c.throttled) {
    c.throttled = false;
    --throttled_;
  }
  c.dead = true;
  c.why = why;
  pending_dead_ = true;
  // Stop further events now; the fd itself is closed in reap().
  (void)::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, c.sock.get(), nullptr);
}

void Server::disconnect(uint64_t client, CtlError why) noexcept {
  auto it = clients_.find(client);
  if (it != clients_.end()) kill(it->second, why);
}

const ClientInfo *Server::client(uint64_t id) const noexcept {
  auto it = clients_.find(id);
  return it == clients_.end() || it->second.dead ? nullptr : &it->second.info;
}

CtlError Server::send(uint64_t client, const MsgHeader &hdr, const void *payload, size_t len,
                      const int *fds, size_t nfds) noexcept {
  auto it = clients_.find(client);
  if (it == clients_.end() || it->second.dead) return CtlError::kClosed;
  CtlError e = send_message(it->second.sock.get(), hdr, payload, len, fds, nfds);
  if (e == CtlError::kWouldBlock || e == CtlError::kClosed) kill(it->second, e);
  return e;
}

CtlError Server::reply(uint64_t client, const MsgHeader &req, int32_t status, const void *payload,
                       size_t len, const int *fds, size_t nfds) noexcept {
  const CtlError e =
      send(client, make_header(static_cast<uint16_t>(req.type | kReplyBit), req.request_id, status),
           payload, len, fds, nfds);
  if (e == CtlError::kOk) ++clients_.find(client)->second.unread;
  return e;
}

// An AF_UNIX socket's SIOCOUTQ is the memory of what it sent and the peer has not read yet:
// 0 means every reply was read. `unread` over-counts between two looks, never under-counts.
// Looked at before each request while replies may be unread (one ioctl on the control path).
bool Server::over_outstanding(Conn &c) noexcept {
  if (opt_.max_outstanding == 0 || c.unread == 0) return false;
  int queued = 0;
  if (::ioctl(c.sock.get(), SIOCOUTQ, &queued) == 0 && queued == 0) {
    c.unread = 0;
    return false;
  }
  return c.unread >= opt_.max_outstanding;
}

namespace {
uint64_t mono_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace

// GCRA: a message is allowed while its due time (rate_tat) is at most rate_burst intervals
// ahead of now; each one pushes the due time one interval (1 s / max_rate) further.
bool Server::over_rate(const Conn &c) const noexcept {
  if (opt_.max_rate == 0) return false;
  const uint64_t interval = 1'000'000'000u / opt_.max_rate;
  const uint64_t slack = interval * (opt_.rate_burst ? opt_.rate_burst : 1);
  return c.rate_tat > mono_ns() + slack - interval;
}

void Server::charge_rate(Conn &c) noexcept {
  if (opt_.max_rate == 0) return;
  const uint64_t now = mono_ns();
  c.rate_tat = (c.rate_tat > now ? c.rate_tat : now) + 1'000'000'000u / opt_.max_rate;
}

void Server::resume_throttled(Handler &h) noexcept {
  if (throttled_ == 0) return;
  for (auto &kv : clients_) {
    Conn &c = kv.second;
    if (!c.throttled || c.dead || over_rate(c) || over_outstanding(c)) continue;
    c.throttled = false;
    --throttled_;
    service(c, h);  // level-triggered epoll would report its queued requests anyway
  }
}

void Server::handle_hello(Conn &c, Message &m, Handler &h) noexcept {
  HelloPayload hello;
  if (!m.payload_as(&hello)) {  // parse_message already enforced the size; belt and braces
    kill(c, CtlError::kBadPayload);
    return;
  }
  HelloReplyPayload rep{};
  rep.abi_version = abi::kAbiVersion;
  rep.max_message = kMaxMessage;
  rep.max_fds = kMaxFds;
  rep.session_id = c.info.id;
  rep.server_pid = static_cast<uint32_t>(::getpid());
  if (hello.abi_version != abi::kAbiVersion) {
    (void)reply(c.info.id, m.hdr, -EPROTO, &rep, sizeof(rep));
    kill(c, CtlError::kVersionMismatch);
    return;
  }
  if (reply(c.info.id, m.hdr, 0, &rep, sizeof(rep)) != CtlError::kOk) return;
  std::memcpy(c.info.name, hello.name, kClientNameLen);
  c.info.name[kClientNameLen] = '\0';
  c.info.hello_done = true;
  h.on_connect(*this, c.info);
}

void Server::service(Conn &c, Handler &h) noexcept {
  Message &m = *msg_;
  for (int i = 0; i < opt_.max_msgs_per_round && !c.dead; ++i) {
    if (c.throttled) break;
    const bool rate = over_rate(c);
    if (rate || over_outstanding(c)) {
      // Throttled only if a request is waiting: a synchronous client reads the last reply
      // before it sends again, and its next request finds SIOCOUTQ at 0.
      char b;
      if (::recv(c.sock.get(), &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
          (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      c.throttled = true;
      ++throttled_;
      if (rate)
        h.on_rate_limit(*this, c.info);
      else
        h.on_throttle(*this, c.info);
      break;
    }
    CtlError e = recv_message(c.sock.get(), types_, &m);
    if (e == CtlError::kWouldBlock) break;
    if (e != CtlError::kOk) {  // kClosed (orderly or hang-up), or a malformed message
      kill(c, e);
      break;
    }
    const uint16_t t = m.hdr.type;
    charge_rate(c);
    if (!c.info.hello_done) {
      if (t != kHello) {
        kill(c, CtlError::kProtocol);
        break;
      }
      handle_hello(c, m, h);
    } else if (t == kPing) {
      int fds[kMaxFds];
      for (uint32_t k = 0; k < m.nfds; ++k)
        fds[k] = m.fds[k].get();
      (void)reply(c.info.id, m.hdr, 0, m.payload, m.payload_len, fds, m.nfds);
    } else if (t == kHello || (t & kReplyBit) != 0 || t == kShutdown) {
      kill(c, CtlError::kProtocol);  // second hello, or a reply/notice the server never asked for
    } else {
      h.on_message(*this, c.info, m);
    }
    m.clear();  // closes any fds the handler did not take
  }
  m.clear();
}

void Server::reap(Handler &h) noexcept {
  if (!pending_dead_) return;
  pending_dead_ = false;
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (!it->second.dead) {
      ++it;
      continue;
    }
    Conn c = std::move(it->second);
    it = clients_.erase(it);
    c.sock.reset();
    if (c.info.hello_done) h.on_disconnect(*this, c.info, c.why);
  }
}

int Server::poll(int timeout_ms, Handler &h) noexcept {
  reap(h);  // disconnects requested between polls
  struct epoll_event evs[64];
  int n;
  for (;;) {
    n = ::epoll_wait(ep_.get(), evs, 64, timeout_ms);
    if (n >= 0) break;
    if (errno != EINTR) return -errno;
    // EINTR: report no events rather than waiting the full timeout again.
    n = 0;
    break;
  }
  for (int i = 0; i < n; ++i) {
    const uint64_t id = evs[i].data.u64;
    if (id == kListenerId) {
      accept_all();
      continue;
    }
    auto it = clients_.find(id);
    if (it == clients_.end() || it->second.dead) continue;
    if (it->second.throttled) {  // its requests wait; a hang-up still ends it
      if (evs[i].events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR)) kill(it->second, CtlError::kClosed);
      continue;
    }
    // Read first even on EPOLLHUP/EPOLLRDHUP: queued messages are delivered before the end,
    // which recv_message then reports as kClosed (zero-length read).
    service(it->second, h);
  }
  resume_throttled(h);
  reap(h);
  return n;
}

}  // namespace uroce::ctl
