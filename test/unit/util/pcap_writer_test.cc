// SPDX-License-Identifier: BSD-3-Clause
// The writer's output is read back with libpcap, an independent reader.
#include "util/pcap_writer.h"

#include <gtest/gtest.h>
#include <pcap/pcap.h>

#include <string>
#include <vector>

namespace uroce::util {
namespace {

TEST(PcapWriter, LibpcapReadsBackFramesAndTimestamps) {
  const std::string path = ::testing::TempDir() + "pcap_writer_test.pcap";
  PcapWriter w;
  ASSERT_TRUE(w.open(path.c_str(), 100));
  std::vector<uint8_t> a(60, 0x11), b(150, 0x22);
  ASSERT_TRUE(w.write(a.data(), a.size(), 1'500'000'123ull));
  ASSERT_TRUE(w.write(b.data(), b.size(), 2'000'000'000ull));
  EXPECT_EQ(w.frames(), 2u);
  ASSERT_TRUE(w.close());

  char err[PCAP_ERRBUF_SIZE];
  pcap_t *p =
      pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(pcap_datalink(p), DLT_EN10MB);
  pcap_pkthdr *h;
  const u_char *data;
  ASSERT_EQ(pcap_next_ex(p, &h, &data), 1);
  EXPECT_EQ(h->caplen, 60u);
  EXPECT_EQ(h->ts.tv_sec, 1);
  EXPECT_EQ(h->ts.tv_usec, 500000123);  // nanoseconds with NANO precision
  EXPECT_EQ(data[59], 0x11);
  ASSERT_EQ(pcap_next_ex(p, &h, &data), 1);
  EXPECT_EQ(h->caplen, 100u);  // cut at snaplen
  EXPECT_EQ(h->len, 150u);
  EXPECT_EQ(pcap_next_ex(p, &h, &data), PCAP_ERROR_BREAK);
  pcap_close(p);
}

TEST(PcapWriter, OpenFailsOnBadPath) {
  PcapWriter w;
  EXPECT_FALSE(w.open("/nonexistent-dir/x.pcap"));
  uint8_t b[1] = {0};
  EXPECT_FALSE(w.write(b, 1, 0));
}

}  // namespace
}  // namespace uroce::util
