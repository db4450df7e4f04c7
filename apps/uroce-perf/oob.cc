// SPDX-License-Identifier: BSD-3-Clause
#include "oob.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

namespace uroce::perf {

namespace {

std::string err(const char *what) {
  return std::string(what) + ": " + std::strerror(errno);
}

int64_t ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Oob::~Oob() {
  if (fd_ >= 0) ::close(fd_);
  if (lfd_ >= 0) ::close(lfd_);
}

std::string Oob::listen(uint16_t port, bool loopback_only, uint16_t *bound) {
  const int one = 1;
  if (loopback_only) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd_ < 0) return err("socket");
    setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(lfd_, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0)
      return err(("bind 127.0.0.1:" + std::to_string(port)).c_str());
  } else {
    lfd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd_ < 0) return err("socket");
    const int zero = 0;
    setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(lfd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_any;
    if (::bind(lfd_, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0)
      return err(("bind port " + std::to_string(port)).c_str());
  }
  if (::listen(lfd_, 1) != 0) return err("listen");
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(lfd_, reinterpret_cast<sockaddr *>(&ss), &len) != 0) return err("getsockname");
  *bound = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in *>(&ss)->sin_port)
                                   : ntohs(reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_port);
  return "";
}

std::string Oob::accept(int timeout_ms) {
  pollfd p{lfd_, POLLIN, 0};
  const int r = ::poll(&p, 1, timeout_ms);
  if (r < 0) return err("poll");
  if (r == 0) return "no client connected within " + std::to_string(timeout_ms / 1000) + " s";
  fd_ = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd_ < 0) return err("accept");
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::close(lfd_);
  lfd_ = -1;
  return "";
}

std::string Oob::connect(const std::string &host, uint16_t port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *res = nullptr;
  const std::string service = std::to_string(port);
  const int g = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (g != 0) return "cannot resolve '" + host + "': " + gai_strerror(g);
  const int64_t end = ms_now() + timeout_ms;
  std::string last;
  for (;;) {
    for (addrinfo *ai = res; ai != nullptr; ai = ai->ai_next) {
      const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        fd_ = fd;
        const int one = 1;
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        freeaddrinfo(res);
        return "";
      }
      last = err(("connect to " + host + ":" + service).c_str());
      ::close(fd);
    }
    if (ms_now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  freeaddrinfo(res);
  return last + " (retried for " + std::to_string(timeout_ms / 1000) + " s)";
}

bool Oob::send_line(const std::string &line) {
  const std::string s = line + "\n";
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool Oob::fill(int timeout_ms, std::string *why) {
  pollfd p{fd_, POLLIN, 0};
  const int r = ::poll(&p, 1, timeout_ms);
  if (r < 0) {
    if (why) *why = err("poll");
    return false;
  }
  if (r == 0) {
    if (why) *why = "timed out";
    return false;
  }
  char tmp[4096];
  const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    closed_ = true;
    if (why) *why = n == 0 ? "the peer closed the connection" : err("recv");
    return false;
  }
  buf_.append(tmp, static_cast<size_t>(n));
  return true;
}

bool Oob::recv_line(std::string *line, int timeout_ms, std::string *why) {
  const int64_t end = timeout_ms < 0 ? INT64_MAX : ms_now() + timeout_ms;
  for (;;) {
    const size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      line->assign(buf_, 0, nl);
      buf_.erase(0, nl + 1);
      return true;
    }
    const int64_t left = end == INT64_MAX ? -1 : end - ms_now();
    if (end != INT64_MAX && left <= 0) {
      if (why) *why = "timed out";
      return false;
    }
    if (!fill(static_cast<int>(left), why)) return false;
  }
}

bool Oob::try_line(std::string *line) {
  if (buf_.find('\n') == std::string::npos) {
    std::string why;
    if (!fill(0, &why)) return false;
  }
  const size_t nl = buf_.find('\n');
  if (nl == std::string::npos) return false;
  line->assign(buf_, 0, nl);
  buf_.erase(0, nl + 1);
  return true;
}

std::vector<std::string> words(const std::string &l) {
  std::istringstream s(l);
  std::vector<std::string> w;
  for (std::string x; s >> x;)
    w.push_back(x);
  return w;
}

}  // namespace uroce::perf
