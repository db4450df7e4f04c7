// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: arbitrary bytes -> the control-message parser, both the pure parse_message() and
// the real receive path (recv_message over a SEQPACKET socketpair with fds attached).
//
// Input: one mode byte, then the packet.
//   bits 0-2  number of fds to attach (0..7; above kMaxFds exercises the extra/CTRUNC paths)
//   bit 3     fix up header length and num_fds to match the packet, so mutations reach the
//             type/payload checks
//   bit 4     fix up magic and version
//   bit 5     go through the socket (recv_message) instead of parse_message only
// Checked: a kOk result describes a packet whose header matches its bytes and its type's rules;
// the socket path never leaves a received fd open after an error and returns exactly the
// announced fds on success.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ctl/message.h"
#include "ctl/socket.h"

namespace {

using namespace uroce::ctl;

[[noreturn]] void fail(const char *what) {
  std::fprintf(stderr, "ctl_fuzz: %s\n", what);
  std::abort();
}

const TypeTable &table() {
  static const TypeTable t = [] {
    TypeTable x = TypeTable::defaults();
    x.add({kFirstVerbsType, 8, 64, 2});
    x.add({kFirstVerbsType | kReplyBit, 0, 128, 0});
    return x;
  }();
  return t;
}

bool fd_open(int fd) {
  return fcntl(fd, F_GETFD) >= 0;
}

void check_ok(const MsgHeader &h, size_t len, size_t nfds) {
  if (len < sizeof(MsgHeader) || len > kMaxMessage) fail("accepted bad length");
  if (h.magic != kMagic || h.version != kProtoVersion || h.length != len || h.flags != 0 ||
      h.num_fds != nfds)
    fail("accepted inconsistent header");
  const TypeSpec *s = table().find(h.type);
  if (s == nullptr) fail("accepted unknown type");
  const size_t p = len - sizeof(MsgHeader);
  if (p < s->min_payload || p > s->max_payload || nfds > s->max_fds)
    fail("accepted payload/fds outside the type's rules");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  std::vector<uint8_t> pkt(data + 1, data + size);
  const size_t nfds = mode & 7;
  if (pkt.size() >= sizeof(MsgHeader)) {
    MsgHeader h;
    std::memcpy(&h, pkt.data(), sizeof(h));
    if (mode & 8) {
      h.length = static_cast<uint32_t>(pkt.size());
      h.num_fds = static_cast<uint32_t>(nfds);
    }
    if (mode & 16) {
      h.magic = kMagic;
      h.version = kProtoVersion;
    }
    std::memcpy(pkt.data(), &h, sizeof(h));
  }

  if (!(mode & 32)) {
    MsgHeader out;
    if (parse_message(pkt.data(), pkt.size(), nfds, table(), &out) == CtlError::kOk)
      check_ok(out, pkt.size(), nfds);
    return 0;
  }

  // Socket path. Oversized packets are fine (the kernel truncates for us: kTooLong).
  if (pkt.size() > 65536) return 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  // Attach dups of one probe fd; after the receive, the receiver's copies must be exactly the
  // message's fds (success) or all closed (error). Highest fd seen before tells which to check.
  int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<int> fds(nfds, probe);
  struct iovec iov = {pkt.data(), pkt.size()};
  struct msghdr mh {};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  std::vector<char> cbuf(CMSG_SPACE(sizeof(int) * 8), 0);
  if (nfds > 0 && probe >= 0) {
    mh.msg_control = cbuf.data();
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * nfds);
  }
  const bool sent = sendmsg(sv[0], &mh, MSG_NOSIGNAL) >= 0;
  close(sv[0]);
  if (sent) {
    // The fds the kernel will install are the lowest free numbers: remember which are free now.
    std::vector<int> free_before;
    for (int fd = 0; fd < 64; ++fd)
      if (!fd_open(fd)) free_before.push_back(fd);
    auto *m = new Message;
    const CtlError e = recv_message(sv[1], table(), m);
    if (e == CtlError::kOk) {
      check_ok(m->hdr, pkt.size(), m->nfds);
      if (m->payload_len != pkt.size() - sizeof(MsgHeader)) fail("payload length");
      if (std::memcmp(m->payload, pkt.data() + sizeof(MsgHeader), m->payload_len) != 0)
        fail("payload bytes");
      for (uint32_t i = 0; i < m->nfds; ++i)
        if (!fd_open(m->fds[i].get())) fail("returned a closed fd");
    } else if (m->nfds != 0) {
      fail("error with fds still attached");
    }
    delete m;  // closes the message's fds
    for (int fd : free_before)
      if (fd_open(fd)) fail("received fd leaked");
  }
  close(sv[1]);
  if (probe >= 0) close(probe);
  return 0;
}
