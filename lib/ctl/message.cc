// SPDX-License-Identifier: BSD-3-Clause
#include "ctl/message.h"

namespace uroce::ctl {

const char *ctl_error_str(CtlError e) noexcept {
  switch (e) {
    case CtlError::kOk:
      return "ok";
    case CtlError::kShort:
      return "message shorter than its header";
    case CtlError::kBadMagic:
      return "bad magic";
    case CtlError::kBadVersion:
      return "unsupported protocol version";
    case CtlError::kLengthMismatch:
      return "header length does not match packet size";
    case CtlError::kTooLong:
      return "message longer than the maximum (truncated)";
    case CtlError::kUnknownType:
      return "unknown message type";
    case CtlError::kBadPayload:
      return "payload size invalid for the message type";
    case CtlError::kBadFlags:
      return "reserved header flags set";
    case CtlError::kFdCountMismatch:
      return "number of fds received does not match the header";
    case CtlError::kTooManyFds:
      return "too many fds for the message type";
    case CtlError::kCtrunc:
      return "control data truncated (fds lost)";
    case CtlError::kBadCmsg:
      return "unexpected or malformed ancillary data";
    case CtlError::kProtocol:
      return "protocol violation";
    case CtlError::kVersionMismatch:
      return "ABI version mismatch";
    case CtlError::kClosed:
      return "peer closed the connection";
    case CtlError::kTimeout:
      return "timed out";
    case CtlError::kWouldBlock:
      return "peer not reading (send queue full)";
    case CtlError::kIo:
      return "socket error";
  }
  return "?";
}

TypeTable TypeTable::defaults() noexcept {
  TypeTable t;
  t.add({kHello, sizeof(HelloPayload), sizeof(HelloPayload), 0});
  t.add({kHelloReply, 0, sizeof(HelloReplyPayload), 0});  // 0 bytes on a failed handshake
  t.add({kPing, 0, kMaxPayload, kMaxFds});
  t.add({kPong, 0, kMaxPayload, kMaxFds});
  t.add({kShutdown, 0, 0, 0});
  return t;
}

bool TypeTable::add(const TypeSpec &s) noexcept {
  if (s.max_payload < s.min_payload || s.max_payload > kMaxPayload || s.max_fds > kMaxFds)
    return false;
  for (size_t i = 0; i < n_; ++i) {
    if (specs_[i].type == s.type) {
      specs_[i] = s;
      return true;
    }
  }
  if (n_ == kCapacity) return false;
  specs_[n_++] = s;
  return true;
}

const TypeSpec *TypeTable::find(uint16_t type) const noexcept {
  for (size_t i = 0; i < n_; ++i) {
    if (specs_[i].type == type) return &specs_[i];
  }
  return nullptr;
}

CtlError parse_message(const void *buf, size_t len, size_t nfds, const TypeTable &types,
                       MsgHeader *out) noexcept {
  if (len < sizeof(MsgHeader)) return CtlError::kShort;
  if (len > kMaxMessage) return CtlError::kTooLong;
  MsgHeader h;
  std::memcpy(&h, buf, sizeof(h));
  if (h.magic != kMagic) return CtlError::kBadMagic;
  if (h.version != kProtoVersion) return CtlError::kBadVersion;
  if (h.length != len) return CtlError::kLengthMismatch;
  if (h.flags != 0) return CtlError::kBadFlags;
  if (h.num_fds != nfds) return CtlError::kFdCountMismatch;
  const TypeSpec *s = types.find(h.type);
  if (s == nullptr) return CtlError::kUnknownType;
  const size_t payload = len - sizeof(MsgHeader);
  if (payload < s->min_payload || payload > s->max_payload) return CtlError::kBadPayload;
  if (nfds > s->max_fds) return CtlError::kTooManyFds;
  *out = h;
  return CtlError::kOk;
}

}  // namespace uroce::ctl
