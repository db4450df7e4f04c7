// SPDX-License-Identifier: BSD-3-Clause
// One-message send/receive on a SOCK_SEQPACKET Unix socket, with SCM_RIGHTS fd passing, and
// peer credentials. recv_message() validates everything (parse_message + ancillary data) and
// on any error closes every fd that arrived with the packet: a bad message never leaks an fd.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "ctl/message.h"
#include "shm/fd.h"

namespace uroce::ctl {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// SO_PEERCRED of a connected Unix socket (the credentials at connect()/socketpair() time).
shm::Result<PeerCred> peer_credentials(int sock) noexcept;

// Sends one message: fills magic, version, length and num_fds of `hdr` from the arguments
// (type, status, request_id, flags come from the caller). len <= kMaxPayload, nfds <= kMaxFds.
// The fds stay owned by the caller (the kernel duplicates them into the receiver).
// Non-blocking sockets: kWouldBlock if the queue is full. MSG_NOSIGNAL: a dead peer is
// kClosed, never SIGPIPE. `err` (optional) receives the errno of a kIo failure.
CtlError send_message(int sock, MsgHeader hdr, const void *payload, size_t len, const int *fds,
                      size_t nfds, int *err = nullptr) noexcept;

// Receives and validates one message into *out (previous contents cleared). Blocks unless the
// socket is non-blocking (then kWouldBlock when nothing is queued). Orderly shutdown: kClosed.
CtlError recv_message(int sock, const TypeTable &types, Message *out, int *err = nullptr) noexcept;

// Builds a request/reply header.
inline MsgHeader make_header(uint16_t type, uint64_t request_id, int32_t status = 0) noexcept {
  MsgHeader h{};
  h.type = type;
  h.request_id = request_id;
  h.status = status;
  return h;
}

}  // namespace uroce::ctl
