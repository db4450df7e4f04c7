// SPDX-License-Identifier: BSD-3-Clause
// Control-channel client (the verbs shim's side): connect to uroced's socket, do the version
// handshake, and make request/reply calls, every wait bounded by a timeout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ctl/message.h"
#include "ctl/socket.h"
#include "shm/fd.h"

namespace uroce::ctl {

// Test hook for a daemon served on the client's own thread (wqe_fuzz): while a Client of this
// process waits for a message, fn(ctx) runs between non-blocking looks at its socket instead
// of a blocking poll(2); the timeout still bounds the wait. nullptr (the default): poll(2).
void set_client_wait_hook(void (*fn)(void *), void *ctx) noexcept;

class Client {
 public:
  Client() noexcept = default;

  // Connects to `path` and performs the hello handshake within timeout_ms. On failure returns
  // the error (and, for kIo, the errno in *err). `name` is reported to the daemon for logs.
  static CtlError connect(const char *path, const char *name, int timeout_ms, Client *out,
                          int *err = nullptr) noexcept;
  // Same over an already-connected socket (socketpair in tests, inherited fd).
  static CtlError handshake(shm::UniqueFd sock, const char *name, int timeout_ms, Client *out,
                            int *err = nullptr) noexcept;

  // Sends a request with a fresh request id and waits (bounded) for the reply with that id and
  // type | kReplyBit. A kShutdown from the server yields kClosed. A reply of another id/type is
  // a protocol error (the control channel is strictly request/reply from the client's side).
  CtlError call(uint16_t type, const void *payload, size_t len, const int *fds, size_t nfds,
                Message *reply, int timeout_ms) noexcept;

  CtlError send(const MsgHeader &hdr, const void *payload, size_t len, const int *fds,
                size_t nfds) noexcept;
  // Waits up to timeout_ms (-1 = forever) for one message.
  CtlError recv(Message *out, int timeout_ms) noexcept;

  // Types the client accepts beyond the defaults (verbs replies), added before call().
  TypeTable &types() noexcept { return types_; }
  const HelloReplyPayload &server_info() const noexcept { return server_; }
  const PeerCred &server_cred() const noexcept { return cred_; }
  int fd() const noexcept { return sock_.get(); }
  bool connected() const noexcept { return sock_.valid(); }
  void close() noexcept { sock_.reset(); }

 private:
  shm::UniqueFd sock_;
  TypeTable types_ = TypeTable::defaults();
  HelloReplyPayload server_{};
  PeerCred cred_{};
  uint64_t next_id_ = 1;
};

}  // namespace uroce::ctl
