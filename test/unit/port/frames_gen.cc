// SPDX-License-Identifier: BSD-3-Clause
// Writes the ARP and ND frames uroce builds to a pcap file, for the independent checks of
// check_frames.py (scapy and tshark). Usage: port_frames_gen OUT.pcap
// Order (check_frames.py relies on it):
//   0 gratuitous ARP for 10.77.0.2          4 unsolicited NA for fd00:77::2
//   1 ARP reply to 10.77.0.1                5 solicited NA answering a Linux NS
//   2 ARP request for 10.77.0.1             6 NS for fd00:77::1 (solicited-node multicast)
//   3 unsolicited NA for the link-local     7 NA defending fd00:77::2 against DAD
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "hex.h"
#include "port/arp.h"
#include "port/nd.h"
#include "util/pcap_writer.h"

using namespace uroce::port;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.pcap\n", argv[0]);
    return 2;
  }
  const uint8_t mac[6] = {0x52, 0xb8, 0x2d, 0x95, 0x25, 0x38};
  Ipv4If a4;
  const uint8_t ip4[4] = {10, 77, 0, 2};
  std::memcpy(a4.addr, ip4, 4);
  a4.prefix = 24;
  Ipv6If a6;
  const uint8_t ip6[16] = {0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  std::memcpy(a6.addr, ip6, 16);
  Arp arp(mac, {&a4, 1});
  Nd nd(mac, {&a6, 1});
  uroce::util::PcapWriter w;
  if (!w.open(argv[1])) {
    std::perror(argv[1]);
    return 1;
  }
  uint8_t out[128];
  uint64_t ts = 1'700'000'000'000'000'000ull;
  int written = 0;
  auto put = [&](size_t n) {
    if (n == 0) {
      std::fprintf(stderr, "frame %d: nothing built\n", written);
      std::exit(1);
    }
    w.write(out, n, ts += 1000);
    ++written;
  };
  put(arp.build_gratuitous(0, out, sizeof out));
  const auto req = uroce::port::test::hex(
      "ff ff ff ff ff ff 9e 2d 00 2f ed 47 08 06 00 01 08 00 06 04 00 01"
      " 9e 2d 00 2f ed 47 0a 4d 00 01 00 00 00 00 00 00 0a 4d 00 02");
  put(arp.input(req.data(), req.size(), 0, out, sizeof out));
  uint8_t m[6];
  size_t n = 0;
  const uint8_t peer4[4] = {10, 77, 0, 3};
  arp.resolve(peer4, 0, m, out, sizeof out, &n);
  put(n);
  put(nd.build_unsolicited_na(0, out, sizeof out));
  put(nd.build_unsolicited_na(1, out, sizeof out));
  const auto ns = uroce::port::test::hex(
      "33 33 ff 00 00 02 9e 2d 00 2f ed 47 86 dd 60 0e 0d c0 00 20 3a ff"
      " fe 80 00 00 00 00 00 00 9c 2d 00 ff fe 2f ed 47"
      " ff 02 00 00 00 00 00 00 00 00 00 01 ff 00 00 02"
      " 87 00 69 59 00 00 00 00 fd 00 00 77 00 00 00 00 00 00 00 00 00 00 00 02"
      " 01 01 9e 2d 00 2f ed 47");
  put(nd.input(ns.data(), ns.size(), 0, out, sizeof out));
  const uint8_t peer6[16] = {0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  nd.resolve(peer6, 0, m, out, sizeof out, &n);
  put(n);
  // DAD probe for our address: source ::, to ff02::1:ff00:2, no options.
  std::vector<uint8_t> dad(ns.begin(), ns.end() - 8);
  dad[19] = 24;
  std::memset(dad.data() + 22, 0, 16);
  // ICMPv6 checksum computed here by hand (RFC 8200 8.1 pseudo header).
  uint32_t sum = 0;
  for (size_t i = 22; i < 54; i += 2)
    sum += uint32_t{dad[i]} << 8 | dad[i + 1];
  sum += 24 + 58;
  dad[56] = dad[57] = 0;
  for (size_t i = 54; i < dad.size(); i += 2)
    sum += uint32_t{dad[i]} << 8 | dad[i + 1];
  while (sum >> 16)
    sum = (sum & 0xFFFF) + (sum >> 16);
  dad[56] = static_cast<uint8_t>(~sum >> 8);
  dad[57] = static_cast<uint8_t>(~sum);
  put(nd.input(dad.data(), dad.size(), 0, out, sizeof out));
  if (!w.close()) {
    std::fprintf(stderr, "write error\n");
    return 1;
  }
  std::printf("%d frames written to %s\n", written, argv[1]);
  return 0;
}
