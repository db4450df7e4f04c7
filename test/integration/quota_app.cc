// SPDX-License-Identifier: BSD-3-Clause
// A hostile app for the quota test (test/integration/uroced_quota.sh, bench/quota_isolation.sh):
//
//   quota_app SOCK SECONDS [AH_DEST_IPV4]
//
// For SECONDS, in rounds, on one uroced: a context opens PDs, CQs, QPs, MRs (and, given a
// destination the daemon can resolve, AHs) in a loop until the daemon refuses each with ENOMEM
// (its quotas), destroys them all and starts again; a second
// context sends control requests (query_device) without reading the replies, on a non-blocking
// socket, until its send fails with EAGAIN (the daemon stopped reading it at its quota of
// unread replies and the kernel's queue filled), then reads every reply and goes on. Checks:
// every refusal is ENOMEM (EAGAIN for the flood), each kind was refused at least once, every
// reply of the flood arrives, in order, with status 0 (none lost, the context not dropped).
// Prints the counts; exit 0 and "0 failure(s)" when every check passed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "client/client.h"
#include "ctl/socket.h"
#include "daemon/daemon.h"
#include "wire/gid.h"

using uroce::client::Buffer;
using uroce::client::Context;
using uroce::client::Cq;
using uroce::client::Mr;
using uroce::client::Qp;
using Clock = std::chrono::steady_clock;

namespace {

int g_fails = 0;
#define FAIL(...)                                     \
  do {                                                \
    std::printf("FAIL: %s:%d: ", __FILE__, __LINE__); \
    std::printf(__VA_ARGS__);                         \
    std::printf("\n");                                \
    ++g_fails;                                        \
  } while (0)

struct Counts {
  uint64_t rounds = 0, cqs = 0, qps = 0, mrs = 0, pds = 0, ahs = 0;
  uint64_t cq_refused = 0, qp_refused = 0, mr_refused = 0, pd_refused = 0, ah_refused = 0;
  uint64_t flood_sent = 0, flood_eagain = 0, flood_replies = 0;
};

constexpr int kCap = 100000;  // no quota is that large: a loop that never ends is a failure

// One round of objects: PDs, CQs, QPs, MRs (and AHs to *ah_dest, if given) until refused, then
// everything destroyed.
void objects_round(Context &c, Buffer &buf, const uroce::ctl::AhAttrPayload *ah_dest, Counts &n) {
  std::vector<uint32_t> pds;
  for (int i = 0; i < kCap; ++i) {
    uint32_t h = 0;
    const int rc = c.alloc_pd(&h);
    if (rc == 0) {
      pds.push_back(h);
      continue;
    }
    if (rc != ENOMEM) FAIL("alloc_pd: %s (expected ENOMEM)", std::strerror(rc));
    ++n.pd_refused;
    break;
  }
  n.pds += pds.size();
  if (pds.empty()) {
    FAIL("alloc_pd: no PD at all");
    return;
  }
  const uint32_t pd = pds[0];
  std::vector<uint32_t> ahs;
  for (int i = 0; i < kCap && ah_dest; ++i) {
    uint32_t h = 0;
    const int rc = c.create_ah(pds[i % pds.size()], *ah_dest, &h);
    if (rc == 0) {
      ahs.push_back(h);
      continue;
    }
    if (rc != ENOMEM) FAIL("create_ah: %s (expected ENOMEM)", std::strerror(rc));
    ++n.ah_refused;
    break;
  }
  n.ahs += ahs.size();
  std::vector<std::unique_ptr<Cq>> cqs;
  for (int i = 0; i < kCap; ++i) {
    std::unique_ptr<Cq> q;
    const int rc = c.create_cq(16, &q);
    if (rc == 0) {
      cqs.push_back(std::move(q));
      continue;
    }
    if (rc != ENOMEM) FAIL("create_cq: %s (expected ENOMEM)", std::strerror(rc));
    ++n.cq_refused;
    break;
  }
  n.cqs += cqs.size();
  std::vector<std::unique_ptr<Qp>> qps;
  for (int i = 0; i < kCap && !cqs.empty(); ++i) {
    uroce::ctl::CreateQpPayload a{};
    a.pd = pd;
    a.qp_type = 2;
    a.send_cq = a.recv_cq = cqs[0]->handle;
    a.max_send_wr = a.max_recv_wr = 16;
    a.max_send_sge = a.max_recv_sge = 1;
    std::unique_ptr<Qp> q;
    const int rc = c.create_qp(a, &q);
    if (rc == 0) {
      qps.push_back(std::move(q));
      continue;
    }
    if (rc != ENOMEM) FAIL("create_qp: %s (expected ENOMEM)", std::strerror(rc));
    ++n.qp_refused;
    break;
  }
  n.qps += qps.size();
  std::vector<Mr> mrs;
  for (int i = 0; i < kCap; ++i) {
    Mr m;
    const size_t len = size_t{1} << 20;  // 1 MiB each: the bytes quota may come first
    const int rc = c.reg_mr(pd, buf, 0, len, 1 | 2 | 4, &m);
    if (rc == 0) {
      mrs.push_back(m);
      continue;
    }
    if (rc != ENOMEM) FAIL("reg_mr: %s (expected ENOMEM)", std::strerror(rc));
    ++n.mr_refused;
    break;
  }
  n.mrs += mrs.size();
  for (auto &q : qps)
    if (c.destroy_qp(*q) != 0) FAIL("destroy_qp");
  for (auto &q : cqs)
    if (c.destroy_cq(*q) != 0) FAIL("destroy_cq");
  for (auto &m : mrs)
    if (c.dereg_mr(m) != 0) FAIL("dereg_mr");
  for (uint32_t h : ahs)
    if (c.destroy_ah(h) != 0) FAIL("destroy_ah");
  for (uint32_t h : pds)
    if (c.dealloc_pd(h) != 0) FAIL("dealloc_pd");
}

// Requests without reading until EAGAIN, then every reply is read (bounded wait).
void flood_round(Context &c, const uroce::ctl::TypeTable &types, uint64_t *next_id, Counts &n) {
  const int fd = c.ctl_fd();
  uint64_t first = *next_id, sent = 0;
  for (int i = 0; i < 100000; ++i) {  // a socket buffer holds a few hundred
    const auto e = uroce::ctl::send_message(
        fd, uroce::ctl::make_header(uroce::ctl::kQueryDevice, *next_id), nullptr, 0, nullptr, 0);
    if (e == uroce::ctl::CtlError::kWouldBlock) {
      ++n.flood_eagain;
      break;
    }
    if (e != uroce::ctl::CtlError::kOk) {
      FAIL("flood: send: %s", uroce::ctl::ctl_error_str(e));
      return;
    }
    ++*next_id;
    ++sent;
  }
  n.flood_sent += sent;
  auto m = std::make_unique<uroce::ctl::Message>();
  const auto end = Clock::now() + std::chrono::seconds(30);
  uint64_t got = 0;
  while (got < sent && Clock::now() < end) {
    const auto e = uroce::ctl::recv_message(fd, types, m.get());
    if (e == uroce::ctl::CtlError::kWouldBlock) {
      usleep(200);
      continue;
    }
    if (e != uroce::ctl::CtlError::kOk) {
      FAIL("flood: recv: %s", uroce::ctl::ctl_error_str(e));
      return;
    }
    if (m->hdr.type != (uroce::ctl::kQueryDevice | uroce::ctl::kReplyBit) ||
        m->hdr.request_id != first + got || m->hdr.status != 0)
      FAIL("flood: reply type %u id %llu status %d (expected id %llu)", m->hdr.type,
           static_cast<unsigned long long>(m->hdr.request_id), m->hdr.status,
           static_cast<unsigned long long>(first + got));
    m->clear();
    ++got;
  }
  n.flood_replies += got;
  if (got != sent)
    FAIL("flood: %llu of %llu replies", static_cast<unsigned long long>(got),
         static_cast<unsigned long long>(sent));
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s SOCK SECONDS [AH_DEST_IPV4]\n", argv[0]);
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int secs = std::atoi(argv[2]);
  std::unique_ptr<Context> objs, flood;
  if (Context::open(argv[1], "quota_objects", &objs) != 0 ||
      Context::open(argv[1], "quota_flood", &flood) != 0) {
    std::printf("FAIL: cannot open contexts on %s\n", argv[1]);
    return 1;
  }
  const int fd = flood->ctl_fd();
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  uroce::ctl::TypeTable types = uroce::ctl::TypeTable::defaults();
  uroce::daemon::Daemon::register_types(types);
  Buffer buf;
  if (Buffer::create(size_t{1} << 20, &buf) != 0) {
    std::printf("FAIL: buffer\n");
    return 1;
  }
  uroce::ctl::AhAttrPayload ah{};
  if (argc == 4) {
    uint8_t ip[4];
    if (::inet_pton(AF_INET, argv[3], ip) != 1) {
      std::printf("FAIL: bad IPv4 address %s\n", argv[3]);
      return 2;
    }
    const uroce::wire::Gid g = uroce::wire::Gid::from_ipv4(ip);
    std::memcpy(ah.dgid, g.raw, 16);
    ah.is_global = 1;
    ah.port_num = 1;
    ah.sgid_index = 1;  // ::ffff:IPv4, the port's first IPv4 address (index 0: link-local)
  }
  Counts n;
  uint64_t next_id = 1u << 20;
  const auto end = Clock::now() + std::chrono::seconds(secs);
  while (Clock::now() < end && g_fails < 10) {
    objects_round(*objs, buf, argc == 4 ? &ah : nullptr, n);
    flood_round(*flood, types, &next_id, n);
    ++n.rounds;
  }
  std::printf("pds=%llu ahs=%llu refused: pd=%llu ah=%llu\n",
              static_cast<unsigned long long>(n.pds), static_cast<unsigned long long>(n.ahs),
              static_cast<unsigned long long>(n.pd_refused),
              static_cast<unsigned long long>(n.ah_refused));
  std::printf(
      "rounds=%llu cqs=%llu qps=%llu mrs=%llu refused: cq=%llu qp=%llu mr=%llu; flood: "
      "sent=%llu eagain=%llu replies=%llu\n",
      static_cast<unsigned long long>(n.rounds), static_cast<unsigned long long>(n.cqs),
      static_cast<unsigned long long>(n.qps), static_cast<unsigned long long>(n.mrs),
      static_cast<unsigned long long>(n.cq_refused), static_cast<unsigned long long>(n.qp_refused),
      static_cast<unsigned long long>(n.mr_refused), static_cast<unsigned long long>(n.flood_sent),
      static_cast<unsigned long long>(n.flood_eagain),
      static_cast<unsigned long long>(n.flood_replies));
  if (n.rounds == 0 || n.cq_refused == 0 || n.qp_refused == 0 || n.mr_refused == 0 ||
      n.pd_refused == 0 || (argc == 4 && n.ah_refused == 0))
    FAIL("a kind was never refused");
  if (n.flood_eagain == 0) FAIL("the flood never got EAGAIN");
  std::printf("%d failure(s)\n", g_fails);
  return g_fails == 0 ? 0 : 1;
}
