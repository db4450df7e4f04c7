// SPDX-License-Identifier: BSD-3-Clause
// Writes the seed corpus of cm_fuzz: one MAD of every CM message lib/cm decodes (a REQ and a
// SIDR_REQ with rdma_cm's IPv4 and IPv6 headers), a LAP, and a MAD cut short.
// Usage: cm_seed_gen OUTDIR STAMP
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cm/cma.h"
#include "cm/msg.h"

using namespace uroce::cm;

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: cm_seed_gen OUTDIR STAMP\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return 1;
  std::vector<Message> msgs;
  Req q;
  q.local_comm_id = 7;
  q.service_id = service_id(PortSpace::kTcp, 7471);
  q.local_qpn = 17;
  q.starting_psn = 0x123456;
  q.path_mtu = 3;
  q.primary.local_gid = uroce::wire::Gid::from_ipv4(10, 0, 0, 1);
  q.primary.remote_gid = uroce::wire::Gid::from_ipv4(10, 0, 0, 2);
  write_cma_hdr(CmaHdr::ipv4(0x0100000A, 40000, 0x0200000A), q.private_data.data());
  msgs.push_back(q);
  CmaHdr h6;
  h6.ip_version = 6;
  h6.src[0] = 0xFE;
  h6.dst[0] = 0xFE;
  write_cma_hdr(h6, q.private_data.data());
  msgs.push_back(q);
  Rep p;
  p.local_qpn = 18;
  msgs.push_back(p);
  Rej j;
  j.reason = 28;
  j.ari_length = 4;
  msgs.push_back(j);
  msgs.push_back(Mra{});
  msgs.push_back(Rtu{});
  msgs.push_back(Dreq{});
  msgs.push_back(Drep{});
  SidrReq sq;
  sq.service_id = service_id(PortSpace::kUdp, 7174);
  write_cma_hdr(CmaHdr::ipv4(0x0100000A, 40000, 0x0200000A), sq.private_data.data());
  msgs.push_back(sq);
  SidrRep sp;
  sp.qkey = 0x01234567;
  msgs.push_back(sp);
  int n = 0;
  auto put = [&](const uint8_t *b, size_t len) {
    const std::string path = dir + "/seed-" + std::to_string(n++);
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(b, 1, len, f) != len) return false;
    return std::fclose(f) == 0;
  };
  uint8_t mad[kMadSize];
  for (const Message &m : msgs) {
    encode(m, 0x100000000ull + n, mad);
    if (!put(mad, kMadSize)) return 1;
  }
  mad[17] = 0x19;  // LAP
  if (!put(mad, kMadSize) || !put(mad, 100)) return 1;
  FILE *s = std::fopen(argv[2], "w");
  return s && std::fclose(s) == 0 ? 0 : 1;
}
