// SPDX-License-Identifier: BSD-3-Clause
#include "ctl/client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include <cerrno>
#include <cstring>

namespace uroce::ctl {

namespace {

int64_t now_ms() noexcept {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void (*g_wait_fn)(void *) = nullptr;
void *g_wait_ctx = nullptr;

// Waits for POLLIN until the deadline (-1 = none). Returns kOk, kTimeout, kClosed or kIo.
CtlError wait_readable(int fd, int64_t deadline) noexcept {
  for (;;) {
    if (g_wait_fn != nullptr) g_wait_fn(g_wait_ctx);  // then only a look (timeout 0)
    int timeout = g_wait_fn != nullptr ? 0 : -1;
    if (deadline >= 0 && g_wait_fn == nullptr) {
      const int64_t left = deadline - now_ms();
      if (left <= 0) return CtlError::kTimeout;
      timeout = left > 1000000 ? 1000000 : static_cast<int>(left);
    }
    struct pollfd p = {fd, POLLIN, 0};
    int r = ::poll(&p, 1, timeout);
    if (r < 0) {
      if (errno == EINTR) continue;
      return CtlError::kIo;
    }
    if (r == 0) {
      if (g_wait_fn != nullptr && deadline >= 0 && now_ms() >= deadline) return CtlError::kTimeout;
      continue;  // re-check the deadline
    }
    // POLLHUP with queued data still reads the data first; recv reports the close after.
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) return CtlError::kOk;
    if (p.revents & POLLNVAL) return CtlError::kIo;
  }
}

}  // namespace

void set_client_wait_hook(void (*fn)(void *), void *ctx) noexcept {
  g_wait_fn = fn;
  g_wait_ctx = ctx;
}

CtlError Client::connect(const char *path, const char *name, int timeout_ms, Client *out,
                         int *err) noexcept {
  struct sockaddr_un sa {};
  sa.sun_family = AF_UNIX;
  if (path == nullptr || std::strlen(path) >= sizeof(sa.sun_path)) {
    if (err != nullptr) *err = ENAMETOOLONG;
    return CtlError::kIo;
  }
  std::strcpy(sa.sun_path, path);
  shm::UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!s) {
    if (err != nullptr) *err = errno;
    return CtlError::kIo;
  }
  // Unix-socket connect does not wait for accept(): it completes or fails at once (ECONNREFUSED
  // without a listener, EAGAIN when the backlog is full).
  for (;;) {
    if (::connect(s.get(), reinterpret_cast<struct sockaddr *>(&sa), sizeof(sa)) == 0) break;
    if (errno == EINTR) continue;
    if (err != nullptr) *err = errno;
    return CtlError::kIo;
  }
  return handshake(std::move(s), name, timeout_ms, out, err);
}

CtlError Client::handshake(shm::UniqueFd sock, const char *name, int timeout_ms, Client *out,
                           int *err) noexcept {
  out->sock_ = std::move(sock);
  auto cred = peer_credentials(out->sock_.get());
  if (!cred) {
    if (err != nullptr) *err = cred.error();
    out->close();
    return CtlError::kIo;
  }
  out->cred_ = cred.value();
  HelloPayload hello{};
  hello.abi_version = abi::kAbiVersion;
  hello.max_message = kMaxMessage;
  hello.max_fds = kMaxFds;
  if (name != nullptr) std::strncpy(hello.name, name, sizeof(hello.name) - 1);
  Message reply;
  CtlError e = out->call(kHello, &hello, sizeof(hello), nullptr, 0, &reply, timeout_ms);
  if (e == CtlError::kOk) {
    if (reply.hdr.status == -EPROTO) {
      e = CtlError::kVersionMismatch;
    } else if (reply.hdr.status != 0 || !reply.payload_as(&out->server_)) {
      e = CtlError::kProtocol;
    } else if (out->server_.abi_version != abi::kAbiVersion) {
      e = CtlError::kVersionMismatch;
    }
  }
  if (e != CtlError::kOk) out->close();
  return e;
}

CtlError Client::send(const MsgHeader &hdr, const void *payload, size_t len, const int *fds,
                      size_t nfds) noexcept {
  if (!sock_) return CtlError::kClosed;
  return send_message(sock_.get(), hdr, payload, len, fds, nfds);
}

CtlError Client::recv(Message *out, int timeout_ms) noexcept {
  if (!sock_) return CtlError::kClosed;
  const int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  CtlError e = wait_readable(sock_.get(), deadline);
  if (e != CtlError::kOk) return e;
  return recv_message(sock_.get(), types_, out);
}

CtlError Client::call(uint16_t type, const void *payload, size_t len, const int *fds, size_t nfds,
                      Message *reply, int timeout_ms) noexcept {
  if (!sock_) return CtlError::kClosed;
  const uint64_t id = next_id_++;
  CtlError e = send_message(sock_.get(), make_header(type, id), payload, len, fds, nfds);
  if (e != CtlError::kOk) return e;
  const int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  e = wait_readable(sock_.get(), deadline);
  if (e != CtlError::kOk) return e;
  e = recv_message(sock_.get(), types_, reply);
  if (e != CtlError::kOk) return e;
  if (reply->hdr.type == kShutdown) return CtlError::kClosed;
  if (reply->hdr.request_id != id || reply->hdr.type != (type | kReplyBit)) {
    reply->clear();
    return CtlError::kProtocol;
  }
  return CtlError::kOk;
}

}  // namespace uroce::ctl
