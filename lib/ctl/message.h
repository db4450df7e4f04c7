// SPDX-License-Identifier: BSD-3-Clause
// Control-message framing: the error vocabulary, the per-type size/fd rules, the pure parser
// (also the fuzz target's entry point) and the received-message container that owns its fds.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "shm/fd.h"
#include "uroce/ctl.h"

namespace uroce::ctl {

enum class CtlError : int {
  kOk = 0,
  kShort,            // fewer bytes than a MsgHeader
  kBadMagic,         // header magic != kMagic
  kBadVersion,       // header version != kProtoVersion
  kLengthMismatch,   // header length != bytes received
  kTooLong,          // packet larger than kMaxMessage (MSG_TRUNC)
  kUnknownType,      // type not in the TypeTable
  kBadPayload,       // payload size outside the type's bounds
  kBadFlags,         // reserved header bits set
  kFdCountMismatch,  // header num_fds != fds received
  kTooManyFds,       // more fds than the type allows, or than kMaxFds
  kCtrunc,           // control data truncated (MSG_CTRUNC): fds were lost
  kBadCmsg,          // ancillary data other than SCM_RIGHTS, or malformed
  kProtocol,         // valid message at the wrong time (e.g. before hello, unexpected reply)
  kVersionMismatch,  // hello: ABI versions differ
  kClosed,           // peer closed / hung up
  kTimeout,          // client-side bound expired
  kWouldBlock,       // non-blocking send found the peer's queue full
  kIo,               // other socket error (errno preserved by the caller where useful)
};

const char *ctl_error_str(CtlError e) noexcept;

// Size and fd rules for one message type.
struct TypeSpec {
  uint16_t type = 0;
  uint32_t min_payload = 0;
  uint32_t max_payload = 0;
  uint32_t max_fds = 0;
};

// The set of types a receiver accepts. Fixed capacity, no allocation.
class TypeTable {
 public:
  static constexpr size_t kCapacity = 128;
  // The built-in types: hello, hello-reply, ping, pong, shutdown.
  static TypeTable defaults() noexcept;
  // Adds or replaces a type. Returns false if the table is full or the spec is impossible
  // (max < min, max > kMaxPayload, max_fds > kMaxFds).
  bool add(const TypeSpec &s) noexcept;
  const TypeSpec *find(uint16_t type) const noexcept;

 private:
  TypeSpec specs_[kCapacity];
  size_t n_ = 0;
};

// Validates one received packet (bytes + number of fds that arrived with it). On success
// copies the header to *out. Pure: no I/O, no allocation; any input is safe.
CtlError parse_message(const void *buf, size_t len, size_t nfds, const TypeTable &types,
                       MsgHeader *out) noexcept;

// A received message. Owns its fds (closed on destruction unless taken).
struct Message {
  MsgHeader hdr{};
  uint32_t payload_len = 0;
  alignas(8) uint8_t payload[kMaxPayload];
  shm::UniqueFd fds[kMaxFds];
  uint32_t nfds = 0;

  // Copies the payload into a fixed-size struct if the size matches exactly.
  template <class T>
  bool payload_as(T *out) const noexcept {
    if (payload_len != sizeof(T)) return false;
    std::memcpy(out, payload, sizeof(T));
    return true;
  }
  void clear() noexcept {
    for (auto &f : fds)
      f.reset();
    nfds = 0;
    payload_len = 0;
    hdr = {};
  }
};

}  // namespace uroce::ctl
