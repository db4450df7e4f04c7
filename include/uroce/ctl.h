// SPDX-License-Identifier: BSD-3-Clause
// Control protocol between the verbs shim (client) and uroced (server): a Unix SOCK_SEQPACKET
// socket, one message per packet, each a MsgHeader followed by `length - sizeof(MsgHeader)`
// payload bytes, optionally with up to kMaxFds file descriptors attached (SCM_RIGHTS; the
// header's num_fds must equal the number actually received). Fixed-width, host byte order
// (both ends are on the same machine), static_assert'ed. doc/ipc.md describes the protocol.
//
// Every connection starts with kHello -> kHelloReply; nothing else is accepted before it. A
// reply carries the request's request_id and type | kReplyBit; `status` is 0 or a negative
// errno. Verbs messages (create_qp, reg_mr, ...) get types in [kFirstVerbsType, 0x7fff].
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "uroce/abi.h"

namespace uroce::ctl {

inline constexpr uint32_t kMagic = 0x5543544c;  // "UCTL"
inline constexpr uint16_t kProtoVersion = 1;

inline constexpr uint32_t kMaxMessage = 4096;  // header + payload, bytes
inline constexpr uint32_t kMaxFds = 4;         // per message

struct MsgHeader {
  uint32_t magic;    // kMagic
  uint16_t version;  // kProtoVersion
  uint16_t type;     // MsgType (| kReplyBit for replies)
  uint32_t length;   // header + payload bytes; must equal the packet size
  int32_t status;    // requests: 0; replies: 0 or -errno
  uint64_t request_id;
  uint32_t num_fds;  // SCM_RIGHTS fds attached to this packet
  uint32_t flags;    // reserved, must be 0
};
static_assert(std::is_standard_layout_v<MsgHeader> && std::is_trivially_copyable_v<MsgHeader>);
static_assert(sizeof(MsgHeader) == 32);
static_assert(offsetof(MsgHeader, magic) == 0);
static_assert(offsetof(MsgHeader, version) == 4);
static_assert(offsetof(MsgHeader, type) == 6);
static_assert(offsetof(MsgHeader, length) == 8);
static_assert(offsetof(MsgHeader, status) == 12);
static_assert(offsetof(MsgHeader, request_id) == 16);
static_assert(offsetof(MsgHeader, num_fds) == 24);
static_assert(offsetof(MsgHeader, flags) == 28);

inline constexpr uint32_t kMaxPayload = kMaxMessage - sizeof(MsgHeader);

inline constexpr uint16_t kReplyBit = 0x8000;
inline constexpr uint16_t kFirstVerbsType = 0x0100;

enum MsgType : uint16_t {
  kHello = 1,     // client -> server, HelloPayload, no fds
  kPing = 2,      // either way, 0..kMaxPayload opaque bytes, 0..kMaxFds fds; echoed back
  kShutdown = 3,  // server -> client: the daemon is going away; empty
  kHelloReply = kHello | kReplyBit,  // HelloReplyPayload
  kPong = kPing | kReplyBit,         // the ping's bytes (and fds, if the server echoes them)
};

inline constexpr uint32_t kClientNameLen = 32;

struct HelloPayload {
  uint32_t abi_version;  // abi::kAbiVersion of the client
  uint32_t max_message;  // what the client accepts (>= kMaxMessage for this version)
  uint32_t max_fds;
  uint32_t flags;             // reserved, 0
  char name[kClientNameLen];  // program name, NUL-padded, for logs
};
static_assert(sizeof(HelloPayload) == 48 && offsetof(HelloPayload, abi_version) == 0 &&
              offsetof(HelloPayload, max_message) == 4 && offsetof(HelloPayload, max_fds) == 8 &&
              offsetof(HelloPayload, flags) == 12 && offsetof(HelloPayload, name) == 16);

struct HelloReplyPayload {
  uint32_t abi_version;  // the server's; the reply status is -EPROTO if it differs
  uint32_t max_message;
  uint32_t max_fds;
  uint32_t flags;       // reserved, 0
  uint64_t session_id;  // the server's id for this connection (for logs)
  uint32_t server_pid;
  uint32_t reserved;
};
static_assert(sizeof(HelloReplyPayload) == 32 && offsetof(HelloReplyPayload, session_id) == 16 &&
              offsetof(HelloReplyPayload, server_pid) == 24);

}  // namespace uroce::ctl
