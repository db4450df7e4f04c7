// SPDX-License-Identifier: BSD-3-Clause
// Writes the seed corpus of cm_ctl_fuzz: programs in its step language (cm_ctl_fuzz.cc) that an
// app's librdmacm would run: an RC connection (listen, resolve, connect, accept, establish,
// disconnect on both sides), the same with the app ending mid-way, a UD one (SIDR), a connect
// to a port nobody listens on, and every prefix of the RC program cut at a step.
// Usage: cm_ctl_seed_gen OUTDIR STAMP
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "uroce/ctl_cm.h"
#include "uroce/ctl_verbs.h"

using namespace uroce;

namespace {

using Bytes = std::vector<uint8_t>;

struct Prog {
  Bytes b;
  std::vector<size_t> cuts;  // where each step starts
  fuzz::ByteWriter<Bytes> w{&b};

  // A request of `side` (session 1): type index, exact length, payload, flags, handle index.
  template <class P>
  void req(int side, uint16_t type, const P *p, uint8_t flags, uint8_t handle_idx = 0) {
    cuts.push_back(b.size());
    w.u8(static_cast<uint8_t>(side << 3));  // op 0: a request
    w.u8(static_cast<uint8_t>(type - ctl::kFirstCmType));
    w.u8(0);  // the exact payload length of the type
    if (p != nullptr) w.bytes(reinterpret_cast<const uint8_t *>(p), sizeof *p);
    w.u8(flags);
    if (flags & 1) w.u8(handle_idx);
  }
  void handle(int side, uint16_t type, uint8_t idx) {
    ctl::HandlePayload h{};
    req(side, type, &h, 1, idx);
  }
  void pump() {
    cuts.push_back(b.size());
    w.u8(4);
  }
  void tick(uint16_t units) {  // units of 100 us
    cuts.push_back(b.size());
    w.u8(6);
    w.u16(units);
  }
  void end_session(int side) {
    cuts.push_back(b.size());
    w.u8(static_cast<uint8_t>(7 | side << 3));
  }
};

// Side 1 listens on `port` (handles: 0 channel, 1 id), side 0 resolves and connects (0
// channel, 1 id); side 1's third handle is the CONNECT_REQUEST's new id.
void connect(Prog &p, bool ud, uint16_t port, bool listen) {
  const uint8_t id_flags = static_cast<uint8_t>(1 | 2 | (ud ? 4 : 0));
  ctl::CmCreateIdPayload cid{};
  for (int side : {1, 0}) {
    p.req<char>(side, ctl::kCmCreateChannel, nullptr, 0);
    p.req(side, ctl::kCmCreateId, &cid, id_flags, 0);
  }
  ctl::CmAddrPayload a{};
  a.port = port;
  p.req(1, ctl::kCmBind, &a, 1 | 2, 1);
  if (listen) p.handle(1, ctl::kCmListen, 1);
  ctl::CmResolvePayload r{};
  r.dst_port = port;
  p.req(0, ctl::kCmResolveAddr, &r, 1 | 2 | 4, 1);
  p.handle(0, ctl::kCmResolveRoute, 1);
  ctl::CmConnPayload c{};
  c.qpn = 0x1234;
  c.psn = 0x55;
  c.qkey = 0x01234567;
  c.responder_resources = c.initiator_depth = 1;
  c.retry_count = c.rnr_retry_count = 7;
  c.path_mtu = 3;
  c.private_len = 8;
  std::memcpy(c.private_data, "fuzzseed", 8);
  p.req(0, ctl::kCmConnect, &c, 1, 1);
  p.pump();
  p.handle(1, ctl::kCmGetEvent, 0);  // CONNECT_REQUEST: side 1's handle 2
  c.qpn = 0x5678;
  p.req(1, ctl::kCmAccept, &c, 1, 2);
  p.pump();
  for (int i = 0; i < 4; ++i)
    p.handle(0, ctl::kCmGetEvent, 0);  // ADDR / ROUTE_RESOLVED, CONNECT_RESPONSE / ESTABLISHED
}

void write(const std::string &dir, int *n, const Bytes &b) {
  const std::string path = dir + "/seed-" + std::to_string((*n)++);
  FILE *f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(b.data(), 1, b.size(), f) != b.size()) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: cm_ctl_seed_gen OUTDIR STAMP\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::filesystem::create_directories(dir);
  int n = 0;

  Prog rc;
  connect(rc, false, 7471, true);
  rc.handle(0, ctl::kCmEstablish, 1);
  rc.pump();
  rc.handle(1, ctl::kCmGetEvent, 0);  // ESTABLISHED
  rc.handle(0, ctl::kCmDisconnect, 1);
  rc.pump();
  rc.handle(1, ctl::kCmGetEvent, 0);  // DISCONNECTED
  rc.handle(1, ctl::kCmDisconnect, 2);
  rc.pump();
  rc.tick(20000);
  rc.handle(0, ctl::kCmDestroyId, 1);
  rc.handle(1, ctl::kCmDestroyId, 2);
  rc.handle(1, ctl::kCmDestroyId, 1);
  write(dir, &n, rc.b);
  for (size_t cut : rc.cuts)
    if (cut > 0) write(dir, &n, Bytes(rc.b.begin(), rc.b.begin() + static_cast<long>(cut)));

  Prog died;  // the passive app ends with the connection up; the active one times out
  connect(died, false, 7472, true);
  died.handle(0, ctl::kCmEstablish, 1);
  died.end_session(1);
  died.pump();
  died.tick(60000);
  died.handle(0, ctl::kCmGetEvent, 0);
  write(dir, &n, died.b);

  Prog ud;  // RDMA_PS_UDP: SIDR_REQ / SIDR_REP
  connect(ud, true, 7174, true);
  write(dir, &n, ud.b);

  Prog none;  // nobody listens: a REJ at once
  connect(none, false, 7473, false);
  write(dir, &n, none.b);

  FILE *s = std::fopen(argv[2], "w");
  if (s == nullptr) return 1;
  std::fprintf(s, "%d seeds\n", n);
  std::fclose(s);
  return 0;
}
