// SPDX-License-Identifier: BSD-3-Clause
// lib/config: the sample parses, values land where they should, and every class of error names
// the place (FILE:LINE or --set #N) and the key.
#include "config/config.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace uroce::config {
namespace {

constexpr const char *kMinimal =
    "[port p0]\n"
    "device = net_ring0\n";

// Expects parse() to throw a ConfigError whose message contains every one of `parts`.
void expect_error(const std::string &text, std::vector<std::string> parts,
                  const std::vector<std::string> &overrides = {}) {
  try {
    parse(text, "t.conf", overrides);
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const ConfigError &e) {
    const std::string msg = e.what();
    for (const std::string &p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message '" << msg << "' lacks '" << p << "'";
  }
}

TEST(Config, SampleParsesCleanly) {
  const Config c = load_file(UROCE_SAMPLE_CONF);
  ASSERT_EQ(c.ports.size(), 1u);
  const PortConfig &p = c.ports[0];
  EXPECT_EQ(p.name, "p0");
  EXPECT_EQ(p.device, "net_memif0,role=server,socket=/tmp/uroce-memif.sock");
  ASSERT_EQ(p.ipv4.size(), 1u);
  const uint8_t v4[4] = {192, 168, 77, 2};
  EXPECT_EQ(0, std::memcmp(p.ipv4[0].addr, v4, 4));
  EXPECT_EQ(p.ipv4[0].len, 24);
  ASSERT_EQ(p.ipv6.size(), 1u);
  EXPECT_EQ(format_ipv6(p.ipv6[0].addr), "fd00:77::2");
  EXPECT_EQ(p.ipv6[0].len, 64);
  EXPECT_EQ(p.mtu, 1500u);
  EXPECT_EQ(p.ib_mtu(), 1024u);
  EXPECT_EQ(p.dscp, 26);
  EXPECT_TRUE(p.ecn);
  EXPECT_FALSE(p.device_is_pci());
  const std::vector<std::string> eal = {"--no-huge", "-m", "256", "--no-pci",
                                        "--file-prefix=uroced"};
  EXPECT_EQ(c.eal_args, eal);
  EXPECT_EQ(c.daemon.socket, "/run/uroce/uroced.sock");
  EXPECT_EQ(c.daemon.workers, std::vector<unsigned>{0});
  EXPECT_EQ(c.daemon.mbufs, 8191u);
  EXPECT_EQ(c.daemon.rx_desc, 1024);
  EXPECT_EQ(c.daemon.tx_desc, 1024);
  EXPECT_EQ(c.daemon.pcap, "");
}

TEST(Config, ValuesAndDefaults) {
  const Config c = parse(
      "# comment\n"
      "; another\n"
      "[daemon]\n"
      "  workers = 1, 3-5  \n"
      "mbufs=4095\n"
      "pcap = /tmp/x.pcap\n"
      "[port a]\n"
      "device = 0000:03:00.1\n"
      "ipv4 = 10.0.0.1/8\n"
      "ipv4 = 10.1.0.1/16\n"
      "ipv6 = FD00::1/48\n"
      "mtu = 4200\n"
      "ecn = off\n"
      "ibdev = roce_a\n"
      "[port b]\n"
      "device = 03:00.0\n",
      "t.conf");
  EXPECT_EQ(c.daemon.workers, (std::vector<unsigned>{1, 3, 4, 5}));
  EXPECT_EQ(c.daemon.mbufs, 4095u);
  EXPECT_EQ(c.daemon.pcap, "/tmp/x.pcap");
  ASSERT_EQ(c.ports.size(), 2u);
  EXPECT_EQ(c.ports[0].ipv4.size(), 2u);
  EXPECT_EQ(format_ipv6(c.ports[0].ipv6[0].addr), "fd00::1");
  EXPECT_EQ(c.ports[0].mtu, 4200u);
  EXPECT_EQ(c.ports[0].ib_mtu(), 4096u);
  EXPECT_FALSE(c.ports[0].ecn);
  EXPECT_TRUE(c.ports[0].device_is_pci());
  EXPECT_TRUE(c.ports[1].device_is_pci());
  EXPECT_EQ(c.ports[1].mtu, 1500u);  // default
  EXPECT_TRUE(c.ports[1].ecn);       // default
  EXPECT_EQ(c.ports[0].ibdev, "roce_a");
  EXPECT_EQ(c.ports[1].ibdev, "uroce1");  // default: uroce<port index>
  // One control socket per port (device): daemon.socket for the first, + "." + ibdev after.
  EXPECT_EQ(c.ports[0].socket, c.daemon.socket);
  EXPECT_EQ(c.ports[1].socket, c.daemon.socket + ".uroce1");
  EXPECT_TRUE(c.eal_args.empty());
}

TEST(Config, PortSockets) {
  // daemon.socket given after the ports still sets their defaults; an explicit port socket wins.
  const Config c = parse(
      "[port a]\ndevice = x\n[port b]\ndevice = y\nibdev = rb\n[port c]\ndevice = z\n"
      "socket = /tmp/c.sock\n[daemon]\nsocket = /tmp/u.sock\n",
      "t.conf");
  ASSERT_EQ(c.ports.size(), 3u);
  EXPECT_EQ(c.ports[0].socket, "/tmp/u.sock");
  EXPECT_EQ(c.ports[1].socket, "/tmp/u.sock.rb");
  EXPECT_EQ(c.ports[2].socket, "/tmp/c.sock");
  expect_error("[port a]\ndevice = x\nsocket = rel.sock\n", {"t.conf:3", "'socket'", "absolute"});
  expect_error("[port a]\ndevice = x\n[port b]\ndevice = y\nsocket = /run/uroce/uroced.sock\n",
               {"t.conf:5", "'/run/uroce/uroced.sock'", "already the socket of port 'a'"});
  // The default of a second port must fit sun_path too.
  expect_error("[daemon]\nsocket = /" + std::string(100, 's') +
                   "\n[port a]\ndevice = x\n[port b]\ndevice = y\n",
               {"t.conf:5", "[port b]", "longer than 107 bytes"});
}

TEST(Config, IbMtuAsRxe) {
  // rxe: eth_mtu_int_to_enum(mtu - 80), largest of 256..4096 not above it.
  EXPECT_EQ(ib_mtu_from_eth_mtu(1500), 1024u);
  EXPECT_EQ(ib_mtu_from_eth_mtu(4200), 4096u);
  EXPECT_EQ(ib_mtu_from_eth_mtu(4176), 4096u);
  EXPECT_EQ(ib_mtu_from_eth_mtu(4175), 2048u);
  EXPECT_EQ(ib_mtu_from_eth_mtu(2128), 2048u);
  EXPECT_EQ(ib_mtu_from_eth_mtu(2127), 1024u);
  EXPECT_EQ(ib_mtu_from_eth_mtu(9000), 4096u);
  EXPECT_EQ(ib_mtu_from_eth_mtu(576), 256u);
  EXPECT_EQ(ib_mtu_from_eth_mtu(592), 512u);
  EXPECT_EQ(ib_mtu_from_eth_mtu(591), 256u);
  EXPECT_EQ(ib_mtu_from_eth_mtu(335), 0u);
}

TEST(Config, UnknownKeyAndSection) {
  expect_error("[port p0]\ndevice = x\nspeed = 10\n", {"t.conf:3", "'speed'", "unknown key"});
  expect_error("[daemon]\nthreads = 2\n", {"t.conf:2", "'threads'", "unknown key"});
  expect_error("[eal]\nlcores = 1\n", {"t.conf:2", "'lcores'"});
  expect_error("\n[route]\n", {"t.conf:2", "unknown section [route]"});
  expect_error("[eal x]\n", {"t.conf:1", "takes no name"});
  expect_error("mtu = 1500\n", {"t.conf:1", "'mtu'", "before any [section]"});
}

TEST(Config, Syntax) {
  expect_error("[port p0\n", {"t.conf:1", "malformed section header"});
  expect_error("[port p0]\ndevice\n", {"t.conf:2", "expected 'key = value'"});
  expect_error("[port p0]\nDev-ice = x\n", {"t.conf:2", "bad key 'Dev-ice'"});
  expect_error("[port]\n", {"t.conf:1", "needs a name"});
  expect_error("[port a/b]\n", {"t.conf:1", "bad port name 'a/b'"});
}

TEST(Config, BadIpAddresses) {
  const std::string head = std::string(kMinimal);
  expect_error(head + "ipv4 = 10.0.0.300/24\n", {"t.conf:3", "'ipv4'", "bad IPv4 address"});
  expect_error(head + "ipv4 = 10.0.0/24\n", {"t.conf:3", "bad IPv4 address"});
  expect_error(head + "ipv4 = 10.0.0.1\n", {"t.conf:3", "'ipv4'", "missing prefix length"});
  expect_error(head + "ipv4 = 224.0.0.1/24\n", {"t.conf:3", "not a unicast host address"});
  expect_error(head + "ipv4 = 127.0.0.1/8\n", {"t.conf:3", "not a unicast host address"});
  // All of 0/8, not only 0.0.0.0 (found by test/fuzz/config_fuzz).
  expect_error(head + "ipv4 = 0.0.0.0/8\n", {"t.conf:3", "not a unicast host address"});
  expect_error(head + "ipv4 = 0.0.0.1/8\n", {"t.conf:3", "not a unicast host address"});
  expect_error(head + "ipv4 = 0.255.1.2/24\n", {"t.conf:3", "not a unicast host address"});
  expect_error(head + "ipv4 = 10.0.0.255/24\n", {"t.conf:3", "broadcast address"});
  expect_error(head + "ipv4 = 10.0.0.0/24\n", {"t.conf:3", "network address"});
  expect_error(head + "ipv6 = fd00::zz/64\n", {"t.conf:3", "'ipv6'", "bad IPv6 address"});
  expect_error(head + "ipv6 = ff02::1/64\n", {"t.conf:3", "multicast"});
  expect_error(head + "ipv6 = ::1/128\n", {"t.conf:3", "unspecified or loopback"});
  expect_error(head + "ipv6 = ::ffff:10.0.0.1/96\n", {"t.conf:3", "IPv4-mapped"});
}

TEST(Config, PrefixOutOfRange) {
  const std::string head = std::string(kMinimal);
  expect_error(head + "ipv4 = 10.0.0.1/33\n",
               {"t.conf:3", "'ipv4'", "prefix length 33 out of range"});
  expect_error(head + "ipv4 = 10.0.0.1/0\n", {"t.conf:3", "prefix length 0 out of range"});
  expect_error(head + "ipv6 = fd00::1/129\n", {"t.conf:3", "'ipv6'", "out of range [1, 128]"});
  expect_error(head + "ipv4 = 10.0.0.1/x\n", {"t.conf:3", "bad prefix length 'x'"});
}

TEST(Config, MtuOutOfRange) {
  const std::string head = std::string(kMinimal);
  expect_error(head + "mtu = 9601\n", {"t.conf:3", "'mtu'", "out of range [576, 9600]"});
  expect_error(head + "mtu = 575\n", {"t.conf:3", "'mtu'", "out of range"});
  expect_error(head + "ipv6 = fd00::1/64\nmtu = 1000\n", {"t.conf:4", "'mtu'", "IPv6 minimum"});
}

TEST(Config, NeighWait) {
  const std::string head = std::string(kMinimal);
  EXPECT_EQ(parse(head, "t.conf").ports[0].neigh_wait_ms, 4000u);  // doc/config.md default
  EXPECT_EQ(parse(head + "neigh_wait_ms = 0\n", "t.conf").ports[0].neigh_wait_ms, 0u);
  EXPECT_EQ(parse(head + "neigh_wait_ms = 10000\n", "t.conf").ports[0].neigh_wait_ms, 10000u);
  expect_error(head + "neigh_wait_ms = 10001\n",
               {"t.conf:3", "'neigh_wait_ms'", "out of range [0, 10000]"});
}

TEST(Config, BadNumbers) {
  const std::string head = std::string(kMinimal);
  expect_error(head + "mtu = 15OO\n", {"t.conf:3", "'mtu'", "bad number '15OO'"});
  expect_error(head + "mtu = -1\n", {"t.conf:3", "bad number"});
  expect_error(head + "mtu = \n", {"t.conf:3", "bad number ''"});
  expect_error(head + "mtu = 99999999999999999999999\n", {"t.conf:3", "bad number"});
  expect_error(head + "dscp = 64\n", {"t.conf:3", "'dscp'", "out of range [0, 63]"});
  expect_error("[daemon]\nmbufs = lots\n", {"t.conf:2", "'mbufs'", "bad number"});
  expect_error("[daemon]\nrx_desc = 16\n", {"t.conf:2", "'rx_desc'", "out of range"});
  expect_error("[daemon]\ntx_desc = 0x100\n", {"t.conf:2", "'tx_desc'", "bad number"});
  expect_error("[daemon]\nworkers = 1,x\n", {"t.conf:2", "'workers'", "bad number 'x'"});
  expect_error("[daemon]\nworkers = 1,1\n", {"t.conf:2", "listed twice"});
  expect_error("[daemon]\nworkers = 5-3\n", {"t.conf:2", "bad lcore range"});
  expect_error("[daemon]\nworkers = 200\n", {"t.conf:2", "out of range"});
  expect_error(head + "ecn = maybe\n", {"t.conf:3", "'ecn'", "expected on or off"});
  expect_error("[daemon]\nidle_sleep_us = 5\n",
               {"t.conf:2", "'idle_sleep_us'", "0 (busy polling) or 10"});
  expect_error("[daemon]\nidle_sleep_us = 100001\n", {"t.conf:2", "out of range"});
  expect_error("[daemon]\npoll = fast\n", {"t.conf:2", "'poll'", "adaptive or busy"});
  expect_error("[daemon]\nidle_threshold_us = 1000001\n",
               {"t.conf:2", "'idle_threshold_us'", "out of range"});
  expect_error("[daemon]\nidle_max_sleep_us = 5\n",
               {"t.conf:2", "'idle_max_sleep_us'", "out of range [10, 1000000]"});
}

TEST(Config, PollModes) {
  const Config d = parse("[port a]\ndevice = net_null0\n", "t.conf");
  EXPECT_EQ(d.daemon.poll, PollMode::kAdaptive);  // the default: sleep when idle
  EXPECT_EQ(d.daemon.idle_threshold_us, 100u);
  EXPECT_EQ(d.daemon.idle_max_sleep_us, 1000u);
  const Config b = parse(
      "[daemon]\npoll = busy\nidle_threshold_us = 0\nidle_max_sleep_us = 5000\n"
      "[port a]\ndevice = net_null0\n",
      "t.conf");
  EXPECT_EQ(b.daemon.poll, PollMode::kBusy);
  EXPECT_EQ(b.daemon.idle_threshold_us, 0u);
  EXPECT_EQ(b.daemon.idle_max_sleep_us, 5000u);
}

TEST(Config, Quotas) {
  const Config d = parse("[daemon]\n", "t.conf");
  EXPECT_EQ(d.daemon.quota.qps, 256u);
  EXPECT_EQ(d.daemon.quota.ctl_outstanding, 8u);
  EXPECT_EQ(d.daemon.quota.mr_bytes, uint64_t{1} << 36);
  const Config c = parse(
      "[daemon]\nquota_qps = 3\nquota_cqs = 4\nquota_srqs = 0\nquota_mrs = 5\n"
      "quota_mr_bytes = 1099511627776\nquota_ctl_outstanding = 1\nquota_event_fds = 7\n"
      "quota_pds = 2\nquota_ahs = 16384\nquota_ctl_rate = 500\n",
      "t.conf");
  EXPECT_EQ(c.daemon.quota.qps, 3u);
  EXPECT_EQ(c.daemon.quota.cqs, 4u);
  EXPECT_EQ(c.daemon.quota.srqs, 0u);
  EXPECT_EQ(c.daemon.quota.mrs, 5u);
  EXPECT_EQ(c.daemon.quota.mr_bytes, uint64_t{1} << 40);
  EXPECT_EQ(c.daemon.quota.ctl_outstanding, 1u);
  EXPECT_EQ(c.daemon.quota.event_fds, 7u);
  EXPECT_EQ(c.daemon.quota.pds, 2u);
  EXPECT_EQ(c.daemon.quota.ahs, 16384u);
  EXPECT_EQ(d.daemon.quota.pds, 64u);
  EXPECT_EQ(d.daemon.quota.ahs, 256u);
  EXPECT_EQ(c.daemon.quota.ctl_rate, 500u);
  EXPECT_EQ(d.daemon.quota.ctl_rate, 0u);
  EXPECT_EQ(parse("[daemon]\n", "t.conf", {"daemon.quota_qps=9"}).daemon.quota.qps, 9u);
  expect_error("[daemon]\nquota_qps = 0\n", {"t.conf:2", "'quota_qps'", "out of range [1, 16384]"});
  expect_error("[daemon]\nquota_ctl_outstanding = 33\n",
               {"t.conf:2", "'quota_ctl_outstanding'", "out of range [1, 32]"});
  expect_error("[daemon]\nquota_mr_bytes = 4095\n",
               {"t.conf:2", "'quota_mr_bytes'", "out of range"});
  expect_error("[daemon]\nquota_pds = 0\n", {"t.conf:2", "'quota_pds'", "out of range [1, 16384]"});
  expect_error("[daemon]\nquota_ahs = 16385\n",
               {"t.conf:2", "'quota_ahs'", "out of range [1, 16384]"});
  expect_error("[daemon]\nquota_ctl_rate = 1000001\n",
               {"t.conf:2", "'quota_ctl_rate'", "out of range [0, 1000000]"});
  expect_error("[daemon]\nquota_mrs = many\n", {"t.conf:2", "'quota_mrs'", "bad number"});
  expect_error("[daemon]\nquota_eventfds = 1\n", {"t.conf:2", "unknown key", "quota_event_fds"});
}

TEST(Config, Duplicates) {
  expect_error("[port p0]\ndevice = a\n[port p1]\ndevice = b\n[port p0]\n",
               {"t.conf:5", "duplicate port name 'p0'", "t.conf:1"});
  expect_error(std::string(kMinimal) + "mtu = 1500\nmtu = 9000\n",
               {"t.conf:4", "'mtu'", "duplicate key", "t.conf:3"});
  expect_error("[port a]\ndevice = x\n[port b]\ndevice = x\n",
               {"t.conf:4", "'device'", "already used"});
  expect_error(
      "[port a]\ndevice = x\nipv4 = 10.0.0.1/24\n[port b]\ndevice = y\n"
      "ipv4 = 10.0.0.1/24\n",
      {"t.conf:6", "'ipv4'", "configured twice", "t.conf:3"});
  expect_error(std::string(kMinimal) + "ipv6 = fd00::1/64\nipv6 = FD00:0::1/64\n",
               {"t.conf:4", "configured twice"});
}

TEST(Config, PortChecks) {
  expect_error("[port p0]\nmtu = 1500\n", {"t.conf:1", "no 'device' key"});
  expect_error("[port p0]\ndevice = \n", {"t.conf:2", "'device'", "empty value"});
  expect_error(std::string(kMinimal) + "gateway = 10.0.0.254\n",
               {"t.conf:3", "'gateway'", "same L2 segment"});
  expect_error("[daemon]\nsocket = relative.sock\n", {"t.conf:2", "'socket'", "absolute path"});
  expect_error("[eal]\nargs =\n", {"t.conf:2", "'args'", "empty value"});
  expect_error(std::string(kMinimal) + "ibdev = a b\n", {"t.conf:3", "'ibdev'", "bad device name"});
  expect_error(std::string(kMinimal) + "ibdev = " + std::string(64, 'x') + "\n",
               {"t.conf:3", "'ibdev'", "bad device name"});
  expect_error("[port a]\ndevice = x\n[port b]\ndevice = y\nibdev = uroce0\n",
               {"t.conf:5", "'ibdev'", "'uroce0' already used"});
}

TEST(Config, Overrides) {
  const std::string text = std::string(kMinimal) + "mtu = 1500\nipv4 = 10.0.0.1/24\n";
  const Config c =
      parse(text, "t.conf",
            {"port.p0.mtu=9000", "port.p0.ipv4=10.0.1.1/24", "port.p0.ipv4=10.0.2.1/24",
             "daemon.pcap=/tmp/c.pcap", "eal.args=--no-huge -m 128", "port.p1.device=net_ring1",
             "port.p0.mtu = 4200"});
  ASSERT_EQ(c.ports.size(), 2u);
  EXPECT_EQ(c.ports[0].mtu, 4200u);       // last --set of a single key wins
  ASSERT_EQ(c.ports[0].ipv4.size(), 2u);  // file values replaced, --set values add up
  EXPECT_EQ(format_ipv4(c.ports[0].ipv4[0].addr), "10.0.1.1");
  EXPECT_EQ(format_ipv4(c.ports[0].ipv4[1].addr), "10.0.2.1");
  EXPECT_EQ(c.daemon.pcap, "/tmp/c.pcap");
  EXPECT_EQ(c.eal_args, (std::vector<std::string>{"--no-huge", "-m", "128"}));
  EXPECT_EQ(c.ports[1].name, "p1");
  EXPECT_EQ(c.ports[1].device, "net_ring1");
  // A value that contains dots and '=' (a vdev string) is taken whole.
  const Config d =
      parse(kMinimal, "t.conf", {"port.p0.device=net_memif0,role=client,socket=/tmp/a.b.sock"});
  EXPECT_EQ(d.ports[0].device, "net_memif0,role=client,socket=/tmp/a.b.sock");
}

TEST(Config, OverrideErrors) {
  expect_error(kMinimal, {"--set #1", "expected section.key=value"}, {"mtu"});
  expect_error(kMinimal, {"--set #2", "expected section.key=value"}, {"daemon.pcap=", "mtu=1"});
  expect_error(kMinimal, {"--set #1", "unknown section 'route'"}, {"route.x=1"});
  expect_error(kMinimal, {"--set #1", "'speed'", "unknown key"}, {"port.p0.speed=1"});
  expect_error(kMinimal, {"--set #1", "'mtu'", "out of range"}, {"port.p0.mtu=100000"});
  expect_error(kMinimal, {"--set #1", "port.NAME.key"}, {"port.mtu=1"});
  expect_error(kMinimal, {"--set #1", "no 'device' key"}, {"port.p9.mtu=1500"});
  // Control characters in string values (found by test/fuzz/config_fuzz: a --set value can hold
  // a newline, a file value a CR or VT in its middle).
  expect_error(kMinimal, {"--set #1", "'device'", "white space or a control character"},
               {"port.p0.device=net_tap0\n[daemon]"});
  expect_error("[port p0]\ndevice = a\tb\n", {"t.conf:2", "'device'", "white space"});
  expect_error("[port p0]\ndevice = a\rb\n", {"t.conf:2", "'device'", "control character"});
  expect_error("[port p0]\ndevice = a\vb\n", {"t.conf:2", "'device'", "control character"});
  expect_error(kMinimal, {"--set #1", "'socket'", "control character"},
               {"daemon.socket=/run/a\nb.sock"});
  expect_error(kMinimal, {"--set #1", "'pcap'", "control character"}, {"daemon.pcap=/tmp/a\x7f"});
}

// [cc] and [cc PORT]: defaults are ConnectX's, preset first, keys on top, a port's section on
// top of [cc]; --set cc.KEY / cc.PORT.KEY.
TEST(Config, CongestionControl) {
  const Config d = parse(kMinimal, "t.conf");
  EXPECT_EQ(d.cc.algorithm, CcAlgorithm::kNone);
  EXPECT_EQ(d.ports[0].cc.dcqcn.rpg_time_reset, 300u);
  EXPECT_EQ(d.ports[0].cc.dcqcn.dce_tcp_g, 1019u);
  const Config c = parse(
      "[cc]\nalgorithm = dcqcn\nrpg_ai_rate = 10\npreset = paper\nclamp_tgt_rate = off\n"
      "[port p0]\ndevice = x\n[port p1]\ndevice = y\n"
      "[cc p1]\npreset = connectx\nrpg_min_rate = 100\ncnp_dscp = 26\n",
      "t.conf");
  EXPECT_EQ(c.cc.algorithm, CcAlgorithm::kDcqcn);
  EXPECT_EQ(c.cc.dcqcn.rpg_time_reset, 55u);  // the preset, though written after a key
  EXPECT_EQ(c.cc.dcqcn.rpg_ai_rate, 10u);     // the key wins over the preset
  EXPECT_FALSE(c.cc.dcqcn.clamp_tgt_rate);
  EXPECT_EQ(c.ports[0].cc.dcqcn.rpg_ai_rate, 10u);  // [cc] applies to every port
  EXPECT_EQ(c.ports[0].cc.dcqcn.dce_tcp_g, 1020u);
  EXPECT_EQ(c.ports[1].cc.algorithm, CcAlgorithm::kDcqcn);  // from [cc]
  EXPECT_EQ(c.ports[1].cc.dcqcn.rpg_ai_rate, 5u);           // its own preset replaced them
  EXPECT_EQ(c.ports[1].cc.dcqcn.rpg_time_reset, 300u);
  EXPECT_EQ(c.ports[1].cc.dcqcn.rpg_min_rate, 100u);
  EXPECT_EQ(c.ports[1].cc.dcqcn.cnp_dscp, 26);
  EXPECT_EQ(c.ports[0].cc.dcqcn.cnp_dscp, 48);
  const Config o = parse(kMinimal, "t.conf",
                         {"cc.algorithm=dcqcn", "cc.p0.rpg_hai_rate=100", "cc.dce_tcp_rtt=2"});
  EXPECT_EQ(o.ports[0].cc.algorithm, CcAlgorithm::kDcqcn);
  EXPECT_EQ(o.ports[0].cc.dcqcn.rpg_hai_rate, 100u);
  EXPECT_EQ(o.ports[0].cc.dcqcn.dce_tcp_rtt, 2u);
  EXPECT_EQ(o.cc.dcqcn.rpg_hai_rate, 50u);
}

TEST(Config, CongestionControlErrors) {
  const std::string head = std::string(kMinimal) + "[cc]\n";
  expect_error(head + "algorithm = timely\n", {"t.conf:4", "'algorithm'", "[cc]", "dcqcn or none"});
  expect_error(head + "preset = fast\n", {"t.conf:4", "'preset'", "connectx or paper"});
  expect_error(head + "rpg_speed = 1\n", {"t.conf:4", "'rpg_speed'", "unknown key", "rpg_gd"});
  expect_error(head + "rpg_time_reset = 0\n",
               {"t.conf:4", "'rpg_time_reset'", "out of range [1, 131071]"});
  expect_error(head + "rpg_threshold = 32\n", {"t.conf:4", "out of range [1, 31]"});
  expect_error(head + "rpg_ai_rate = 5M\n", {"t.conf:4", "'rpg_ai_rate'", "bad number '5M'"});
  expect_error(head + "rpg_hai_rate = 0\n", {"t.conf:4", "out of range"});
  expect_error(head + "rpg_gd = 16\n", {"t.conf:4", "'rpg_gd'", "out of range [1, 15]"});
  expect_error(head + "rpg_min_dec_fac = 101\n", {"t.conf:4", "out of range [0, 100]"});
  expect_error(head + "rpg_min_rate = 0\n", {"t.conf:4", "'rpg_min_rate'", "out of range"});
  expect_error(head + "dce_tcp_g = 1024\n", {"t.conf:4", "'dce_tcp_g'", "[0, 1023]"});
  expect_error(head + "dce_tcp_rtt = 0\n", {"t.conf:4", "'dce_tcp_rtt'", "out of range"});
  expect_error(head + "initial_alpha_value = -1\n", {"t.conf:4", "bad number"});
  expect_error(head + "rpg_byte_reset = 1073741825\n", {"t.conf:4", "out of range"});
  expect_error(head + "cnp_dscp = 64\n", {"t.conf:4", "'cnp_dscp'", "[0, 63]"});
  expect_error(head + "cnp_802p_prio = 8\n", {"t.conf:4", "'cnp_802p_prio'", "[0, 7]"});
  expect_error(head + "clamp_tgt_rate = 2\n", {"t.conf:4", "'clamp_tgt_rate'", "on or off"});
  expect_error(head + "rpg_gd = 11\nrpg_gd = 10\n", {"t.conf:5", "duplicate key", "t.conf:4"});
  expect_error(std::string(kMinimal) + "[cc p0]\nrpg_gd = 99\n",
               {"t.conf:4", "'rpg_gd'", "[cc p0]", "out of range"});
  expect_error(std::string(kMinimal) + "[cc p7]\nrpg_gd = 10\n",
               {"t.conf:3", "[cc p7] names no port"});
  expect_error(std::string(kMinimal) + "[cc bad.name]\n", {"t.conf:3", "bad port name"});
  expect_error(kMinimal, {"--set #1", "'rpg_gd'", "out of range"}, {"cc.rpg_gd=0"});
  expect_error(kMinimal, {"--set #2", "no port named 'p9'"}, {"cc.rpg_gd=10", "cc.p9.rpg_gd=10"});
  expect_error(kMinimal, {"--set #1", "'mtu'", "unknown key"}, {"cc.mtu=1500"});
}

TEST(Config, LoadFileMissing) {
  try {
    load_file("/nonexistent/uroced.conf");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError &e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/uroced.conf: cannot open"),
              std::string::npos);
  }
}

TEST(Config, AddressHelpers) {
  uint8_t a[16];
  EXPECT_TRUE(parse_ipv4("1.2.3.4", a));
  EXPECT_EQ(format_ipv4(a), "1.2.3.4");
  EXPECT_FALSE(parse_ipv4("1.2.3.4 ", a));
  EXPECT_FALSE(parse_ipv4("01.2.3.4x", a));
  EXPECT_TRUE(parse_ipv6("fe80::1", a));
  EXPECT_EQ(a[0], 0xFE);
  EXPECT_EQ(a[15], 1);
  EXPECT_FALSE(parse_ipv6("fe80:::1", a));
}

}  // namespace
}  // namespace uroce::config
