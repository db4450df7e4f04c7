// SPDX-License-Identifier: BSD-3-Clause
// Writes the seed corpus of config_fuzz: config files (valid ones with every key, and ones with
// each kind of mistake doc/config.md describes), some followed by NUL-separated --set
// overrides, plus every file given after STAMP (e.g. config/uroced.conf.sample).
// Usage: config_seed_gen OUTDIR STAMP [FILE...]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

namespace {

const char *const kValid = R"([eal]
args = --no-huge -m 256 --no-pci
args = --file-prefix=uroced
[daemon]
socket = /run/uroce/uroced.sock
workers = 0,2-3
mbufs = 8191
rx_desc = 1024
tx_desc = 512
pcap = /tmp/x.pcap
idle_sleep_us = 20
[port p0]
device = net_memif0,role=server,socket=/tmp/uroce-memif.sock
ipv4 = 192.168.77.2/24
ipv4 = 10.1.2.3/32
ipv6 = fd00:77::2/64
mtu = 1500
dscp = 26
ecn = on
ibdev = rxe_a
[port p1]
device = 0000:03:00.0
ipv6 = fe80::1:2/10
mtu = 9000
ecn = off
)";

const char *const kFiles[] = {
    kValid,
    "",
    "# only a comment\n; and another\n",
    "[daemon]\nworkers = 1\n",
    "[port a]\ndevice = 03:00.1\n",
    "[port a]\ndevice = x\n[port b]\ndevice = x\n",
    "[port a]\ndevice = x\nipv4 = 10.0.0.1/24\n[port b]\ndevice = y\nipv4 = 10.0.0.1/16\n",
    "[port a]\ndevice = x\nipv6 = fd00::1/64\nmtu = 1000\n",
    "[port a]\ndevice = x\nipv4 = 10.0.0.255/24\n",
    "[port a]\ndevice = x\nipv4 = 10.0.0.0/24\n",
    "[port a]\ndevice = x\nipv6 = ::ffff:10.0.0.1/96\n",
    "[port a]\ndevice = x\nipv6 = ff02::1/64\n",
    "[port a]\ndevice = x\ngateway = 10.0.0.1\n",
    "[port a]\ndevice = x\nibdev = uroce1\n[port b]\ndevice = y\n",
    "[daemon]\nworkers = 3-1\n",
    "[daemon]\nworkers = 0,0\n",
    "[daemon]\nidle_sleep_us = 5\n",
    "[daemon]\nsocket = relative\n",
    "[daemon]\nmbufs = 99999999999999999999999\n",
    "[eal]\nargs =\n",
    "key = value\n",
    "[port]\n",
    "[port a b]\n",
    "[unknown]\n",
    "[daemon\n",
    "[daemon]\nworkers = 0\nworkers = 1\n",
    "[port a]\ndevice = x\n[port a]\ndevice = y\n",
};

struct WithSet {
  const char *file;
  std::vector<std::string> sets;
};

const WithSet kWithSets[] = {
    {kValid, {"daemon.workers=1", "port.p0.mtu=4200", "port.p2.device=net_tap0"}},
    {kValid, {"eal.args=--no-huge", "port.p1.ipv6=fd00::9/64"}},
    {"", {"port.a.device=x", "port.a.ipv4=10.0.0.1/8"}},
    {"", {"port.device=x"}},
    {"", {"daemon=1"}},
    {"", {"nosuch.key=1"}},
    {"[port a]\ndevice = x\n", {"port.a.ibdev=bad name"}},
};

}  // namespace

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  if (argc < 3) {
    std::fprintf(stderr, "usage: config_seed_gen OUTDIR STAMP [FILE...]\n");
    return 2;
  }
  const fs::path dir = argv[1];
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "config_seed_gen: %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("seed-", 0) == 0) fs::remove(e.path(), ec);
  std::vector<std::string> seeds(std::begin(kFiles), std::end(kFiles));
  for (const WithSet &w : kWithSets) {
    std::string s = w.file;
    for (const std::string &o : w.sets)
      s += '\0' + o;
    seeds.push_back(s);
  }
  for (int i = 3; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "config_seed_gen: cannot read %s\n", argv[i]);
      return 1;
    }
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  size_t n = 0;
  for (const std::string &s : seeds) {
    char name[32];
    std::snprintf(name, sizeof name, "seed-%04zu", n++);
    std::FILE *f = std::fopen((dir / name).c_str(), "wb");
    if (f == nullptr || std::fwrite(s.data(), 1, s.size(), f) != s.size() || std::fclose(f)) {
      std::fprintf(stderr, "config_seed_gen: cannot write %s\n", (dir / name).c_str());
      return 1;
    }
  }
  std::FILE *f = std::fopen(argv[2], "w");
  if (f == nullptr || std::fprintf(f, "%zu seeds in %s\n", n, argv[1]) < 0 || std::fclose(f))
    return 1;
  std::printf("config_seed_gen: %zu seeds in %s\n", n, argv[1]);
  return 0;
}
