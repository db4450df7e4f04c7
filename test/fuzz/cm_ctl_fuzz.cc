// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: uroced's CM service (lib/daemon/cm_service.h) fed the control messages of
// uroce/ctl_cm.h as an app's librdmacm could write them, any type, length, handle and bytes.
// Two services (two daemons) joined by a link that carries their QP 1 frames; the input is a
// program of steps: a request of a session of either side (payload from the input, with the
// handles the services gave out and the ports' own addresses spliced in often enough to reach
// connections), delivering the queued frames, moving the clock (timers fire), ending a session.
// Checks, for every input: no crash or sanitizer report; every request answers 0 or -errno,
// and a success's reply has the length uroce/ctl_cm.h's table gives; a CONNECT_REQUEST names a
// new id; once every session has ended and every timer has fired, both services hold no id and
// no connection, and the process is back to the file descriptors it had (channels' fds freed
// with their sessions, not only when a service goes).
// Cost (doc/security.md, "Fuzzing depth"): the fds handed to the services are dup()s of one
// datagram and one stream socket pair made once per process (a socketpair and its last close
// per channel were a quarter of the time), the fds are counted with one poll(2) instead of
// reading /proc/self/fd, and the final clock run stops once nothing is left that a timer could
// act on.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../support/fake_port_view.h"
#include "daemon/cm_service.h"
#include "fuzz_util.h"

using namespace uroce;
using namespace uroce::daemon;

namespace {

using test::FakePort;

using Frames = std::vector<std::vector<uint8_t>>;

// The open file descriptors below `limit` (one poll(2): those that are not POLLNVAL).
int open_fds(int limit) {
  std::vector<pollfd> p(static_cast<size_t>(limit));
  for (int i = 0; i < limit; ++i)
    p[static_cast<size_t>(i)] = pollfd{i, 0, 0};
  FUZZ_CHECK(poll(p.data(), p.size(), 0) >= 0);
  int n = 0;
  for (const pollfd &x : p)
    n += !(x.revents & POLLNVAL);
  return n;
}

// The wake-up sockets an app hands to kCmCreateChannel, one pair of each kind for the whole
// process: a request gets a dup() of the service's end (what the service checks, keeps, writes
// to and closes is that fd, as with a pair of its own). The app's ends are drained after each
// input, so that every wake-up write finds room as it would in a new pair.
struct WakePool {
  int dgram[2] = {-1, -1}, stream[2] = {-1, -1};
  WakePool() {
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, dgram) == 0);
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, stream) == 0);
    for (int fd : {dgram[0], stream[0]})
      FUZZ_CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
  }
  int service_end(int kind) const {
    const int fd = dup(kind == SOCK_STREAM ? stream[1] : dgram[1]);
    FUZZ_CHECK(fd >= 0);
    return fd;
  }
  void drain() const {
    uint8_t b[64];
    while (recv(dgram[0], b, sizeof b, 0) > 0) {
    }
    while (recv(stream[0], b, sizeof b, 0) > 0) {
    }
  }
};

WakePool &wake_pool() {
  static WakePool *const p = new WakePool;  // for the whole process (reachable: no leak)
  return *p;
}

const ctl::CmSpec *spec_of(uint16_t type) {
  for (const auto &s : ctl::kCmSpecs)
    if (s.type == type) return &s;
  return nullptr;
}

struct Rig {
  FakePort port[2] = {FakePort{1}, FakePort{2}};
  Frames to[2];
  uint64_t now = 1'000'000;
  CmService svc[2] = {CmService{port[0],
                                [this](const uint8_t *f, uint32_t n) {
                                  if (to[1].size() < 4096) to[1].emplace_back(f, f + n);
                                  return true;
                                },
                                [this] { return now; }, 1},
                      CmService{port[1],
                                [this](const uint8_t *f, uint32_t n) {
                                  if (to[0].size() < 4096) to[0].emplace_back(f, f + n);
                                  return true;
                                },
                                [this] { return now; }, 2}};
  std::vector<uint32_t> handles[2];  // every handle a service gave out
  int max_fd = 0;                    // the highest fd handed to a service

  Rig() {
    for (int i = 0; i < 2; ++i) {
      port[i].peer_gid = port[1 - i].gid(1);
      std::memcpy(port[i].peer_mac, port[1 - i].mac(), 6);
    }
  }
  bool idle() const {
    return to[0].empty() && to[1].empty() && svc[0].ids() == 0 && svc[1].ids() == 0 &&
           svc[0].cm().connections() == 0 && svc[1].cm().connections() == 0;
  }
  void pump() {
    for (int round = 0; round < 64 && (!to[0].empty() || !to[1].empty()); ++round)
      for (int i = 0; i < 2; ++i) {
        Frames f;
        f.swap(to[i]);
        for (auto &fr : f)
          svc[i].rx(fr.data(), static_cast<uint32_t>(fr.size()), now);
      }
  }
  void tick(uint64_t ns) {
    now += ns;
    svc[0].poll(now);
    svc[1].poll(now);
  }
};

// One control request from the input.
void request(Rig &r, fuzz::ByteReader &in, uint8_t op) {
  const int side = (op >> 3) & 1;
  const uint64_t sess = 1 + ((op >> 4) & 1);
  uint8_t t = in.u8();
  const uint16_t type = t < 240 ? static_cast<uint16_t>(ctl::kFirstCmType + t % 14)
                                : static_cast<uint16_t>(ctl::kFirstCmType - 1 + (t & 3));
  const ctl::CmSpec *spec = spec_of(type);
  ctl::Message m;
  m.hdr.type = type;
  const uint8_t lm = in.u8();
  if (spec != nullptr && lm < 224)
    m.payload_len = spec->req_payload;
  else
    m.payload_len = in.u16() % (ctl::kMaxPayload + 1);
  in.bytes(m.payload, m.payload_len);
  const uint8_t fl = in.u8();
  auto &hs = r.handles[side];
  // The handle fields (an id's or a channel's: the first four bytes of every payload) and the
  // addresses: values the services know, so that requests reach state.
  if ((fl & 1) && !hs.empty() && m.payload_len >= 4) {
    const uint32_t h = hs[in.u8() % hs.size()];
    std::memcpy(m.payload, &h, 4);
  }
  if (fl & 2) {
    const wire::Gid own = r.port[side].gid(1), peer = r.port[1 - side].gid(1);
    if (type == ctl::kCmBind && m.payload_len == sizeof(ctl::CmAddrPayload)) {
      std::memcpy(m.payload + offsetof(ctl::CmAddrPayload, gid), own.raw, 16);
      m.payload[offsetof(ctl::CmAddrPayload, v6)] = 0;
    } else if (type == ctl::kCmResolveAddr && m.payload_len == sizeof(ctl::CmResolvePayload)) {
      std::memcpy(m.payload + offsetof(ctl::CmResolvePayload, dst_gid), peer.raw, 16);
      if (fl & 4) std::memset(m.payload + offsetof(ctl::CmResolvePayload, src_gid), 0, 16);
    } else if (type == ctl::kCmCreateId && m.payload_len == sizeof(ctl::CmCreateIdPayload)) {
      // RDMA_PS_TCP / RDMA_PS_UDP with their QP types
      const bool ud = fl & 4;
      const uint16_t ps = ud ? 0x0111 : 0x0106;
      std::memcpy(m.payload + offsetof(ctl::CmCreateIdPayload, port_space), &ps, 2);
      m.payload[offsetof(ctl::CmCreateIdPayload, qp_type)] = ud ? 4 : 2;
    }
  }
  if (!(fl & 8) || type == ctl::kCmCreateChannel) {
    // the wake-up end: a datagram socket, or (rarely) a stream one the service must refuse
    const int kind = (fl & 0x30) == 0x30 ? SOCK_STREAM : SOCK_DGRAM;
    if (type == ctl::kCmCreateChannel || (fl & 0x40)) {
      const int fd = wake_pool().service_end(kind);
      r.max_fd = std::max(r.max_fd, fd);
      m.fds[0] = shm::UniqueFd(fd);
      m.nfds = 1;
    }
  }
  alignas(8) uint8_t rep[sizeof(ctl::CmEventReply) + 64];
  size_t rep_len = 0;
  const int rc = r.svc[side].handle(sess, m, rep, &rep_len);
  FUZZ_CHECK(rc <= 0 && rc > -4096);
  if (rc != 0) return;
  FUZZ_CHECK(spec != nullptr);
  FUZZ_CHECK(rep_len >= spec->rep_min && rep_len <= spec->rep_max);
  if (type == ctl::kCmCreateChannel || type == ctl::kCmCreateId) {
    ctl::HandlePayload h{};
    std::memcpy(&h, rep, sizeof h);
    FUZZ_CHECK(h.handle != 0);
    if (hs.size() < 256) hs.push_back(h.handle);
  } else if (type == ctl::kCmGetEvent) {
    ctl::CmEventReply e{};
    std::memcpy(&e, rep, sizeof e);
    FUZZ_CHECK(e.private_len <= ctl::kCmPrivateMax);
    if (e.event == ctl::kEvConnectRequest) {
      FUZZ_CHECK(e.id != 0 && e.id != e.listen_id);
      if (hs.size() < 256) hs.push_back(e.id);
    }
  }
}

void run(const uint8_t *data, size_t size, int fds0, int limit0) {
  Rig r;
  fuzz::ByteReader in(data, size);
  for (int steps = 0; in.remaining() > 0 && steps < 512; ++steps) {
    const uint8_t op = in.u8();
    switch (op & 7) {
      case 0:
      case 1:
      case 2:
      case 3:
        request(r, in, op);
        break;
      case 4:
      case 5:
        r.pump();
        break;
      case 6:
        r.tick(uint64_t{in.u16()} * 100'000);  // up to 6.5 s
        r.pump();
        break;
      case 7:
        r.svc[(op >> 3) & 1].close_session(1 + ((op >> 4) & 1));
        break;
    }
  }
  // Every session ends; the connections it had go (REJ / DREQ), and once every retry and the
  // time-wait are over nothing is left on either side.
  for (int i = 0; i < 2; ++i)
    for (uint64_t s = 1; s <= 2; ++s)
      r.svc[i].close_session(s);
  // (Once neither side holds an id, a connection or a frame in flight, no timer is left: the
  // rest of the 400 s would change nothing.)
  for (int i = 0; i < 400 && !r.idle(); ++i) {
    r.pump();
    r.tick(1'000'000'000);  // 400 s: past every capped timeout and its retries
  }
  r.pump();
  for (int i = 0; i < 2; ++i) {
    FUZZ_CHECK(r.svc[i].ids() == 0);
    FUZZ_CHECK(r.svc[i].cm().connections() == 0);
  }
  // The services still live: every channel fd they were given has been closed with its session.
  FUZZ_CHECK(open_fds(std::max(limit0, r.max_fd + 8)) == fds0);
}

// Past the highest fd of the process between inputs (its own, the pool's, libFuzzer's), read
// once from /proc/self/fd. Every fd an input makes is below max(this, the highest fd handed to a
// service + 8): the kernel gives the lowest free number, and the services make none of their own
// (a few would still be below that bound).
int fd_limit() {
  static const int limit = [] {
    (void)wake_pool();
    int hi = 0;
    DIR *d = opendir("/proc/self/fd");
    FUZZ_CHECK(d != nullptr);
    while (const dirent *e = readdir(d))
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9') hi = std::max(hi, std::atoi(e->d_name));
    closedir(d);
    return hi + 8;
  }();
  return limit;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const WakePool &pool = wake_pool();
  const int limit0 = fd_limit();
  const int fds0 = open_fds(limit0);
  run(data, size, fds0, limit0);
  pool.drain();
  return 0;
}
