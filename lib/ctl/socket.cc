// SPDX-License-Identifier: BSD-3-Clause
#include "ctl/socket.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace uroce::ctl {

shm::Result<PeerCred> peer_credentials(int sock) noexcept {
  struct ucred uc;
  socklen_t sl = sizeof(uc);
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &uc, &sl) != 0)
    return shm::Result<PeerCred>::failure(errno);
  if (sl != sizeof(uc)) return shm::Result<PeerCred>::failure(EINVAL);
  return PeerCred{uc.pid, uc.uid, uc.gid};
}

CtlError send_message(int sock, MsgHeader hdr, const void *payload, size_t len, const int *fds,
                      size_t nfds, int *err) noexcept {
  if (len > kMaxPayload || nfds > kMaxFds || (len > 0 && payload == nullptr) ||
      (nfds > 0 && fds == nullptr)) {
    if (err != nullptr) *err = EINVAL;
    return CtlError::kIo;
  }
  hdr.magic = kMagic;
  hdr.version = kProtoVersion;
  hdr.length = static_cast<uint32_t>(sizeof(MsgHeader) + len);
  hdr.num_fds = static_cast<uint32_t>(nfds);
  struct iovec iov[2];
  iov[0].iov_base = &hdr;
  iov[0].iov_len = sizeof(hdr);
  iov[1].iov_base = const_cast<void *>(payload);
  iov[1].iov_len = len;
  struct msghdr mh {};
  mh.msg_iov = iov;
  mh.msg_iovlen = len > 0 ? 2 : 1;
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)];
  if (nfds > 0) {
    std::memset(cbuf, 0, sizeof(cbuf));
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  for (;;) {
    ssize_t r = ::sendmsg(sock, &mh, MSG_NOSIGNAL);
    if (r == static_cast<ssize_t>(hdr.length)) return CtlError::kOk;
    if (r >= 0) {  // SEQPACKET sends atomically; a partial send would be a kernel surprise
      if (err != nullptr) *err = EIO;
      return CtlError::kIo;
    }
    if (errno == EINTR) continue;
    if (err != nullptr) *err = errno;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return CtlError::kWouldBlock;
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) return CtlError::kClosed;
    return CtlError::kIo;
  }
}

CtlError recv_message(int sock, const TypeTable &types, Message *out, int *err) noexcept {
  out->clear();
  // One byte more than the largest valid message is not needed: SEQPACKET reports an oversize
  // packet with MSG_TRUNC (the excess is discarded).
  alignas(8) uint8_t buf[kMaxMessage];
  // Room for one more fd than allowed: CMSG_SPACE rounding may already admit extra fds, and the
  // kernel truncates (MSG_CTRUNC) beyond the buffer, closing what does not fit.
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * (kMaxFds + 1))];
  struct iovec iov = {buf, sizeof(buf)};
  struct msghdr mh {};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof(cbuf);
  ssize_t r;
  for (;;) {
    r = ::recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    if (r >= 0) break;
    if (errno == EINTR) continue;
    if (err != nullptr) *err = errno;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return CtlError::kWouldBlock;
    if (errno == ECONNRESET || errno == ENOTCONN) return CtlError::kClosed;
    return CtlError::kIo;
  }
  // Take ownership of every fd that arrived, before any check, so that each error path below
  // closes them (UniqueFd). Extra fds beyond kMaxFds go into a local array, closed on return.
  shm::UniqueFd extra[kMaxFds + 1];
  size_t nfds = 0, nextra = 0;
  bool bad_cmsg = false;
  if (mh.msg_controllen > 0) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(0)) {
        const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const unsigned char *data = CMSG_DATA(c);
        for (size_t i = 0; i < n; ++i) {
          int fd;
          std::memcpy(&fd, data + i * sizeof(int), sizeof(int));
          if (nfds < kMaxFds)
            out->fds[nfds++].reset(fd);
          else if (nextra < kMaxFds + 1)
            extra[nextra++].reset(fd);
          else
            (void)::close(fd);
        }
      } else {
        // SCM_CREDENTIALS etc.: we never enable them, so a peer cannot send them; anything
        // else is unexpected. No fds can hide in it (only SCM_RIGHTS carries fds).
        bad_cmsg = true;
      }
    }
  }
  out->nfds = static_cast<uint32_t>(nfds);
  CtlError e = CtlError::kOk;
  if (r == 0 && nfds == 0 && nextra == 0) {
    // A zero-length read: orderly shutdown (a zero-length packet is also invalid).
    e = CtlError::kClosed;
  } else if (mh.msg_flags & MSG_TRUNC) {
    e = CtlError::kTooLong;
  } else if (mh.msg_flags & MSG_CTRUNC) {
    e = CtlError::kCtrunc;
  } else if (bad_cmsg) {
    e = CtlError::kBadCmsg;
  } else if (nextra > 0) {
    e = CtlError::kTooManyFds;
  } else {
    e = parse_message(buf, static_cast<size_t>(r), nfds, types, &out->hdr);
  }
  if (e != CtlError::kOk) {
    out->clear();
    return e;
  }
  out->payload_len = static_cast<uint32_t>(r) - sizeof(MsgHeader);
  std::memcpy(out->payload, buf + sizeof(MsgHeader), out->payload_len);
  return CtlError::kOk;
}

}  // namespace uroce::ctl
