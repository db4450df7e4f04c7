// SPDX-License-Identifier: BSD-3-Clause
// uroce-pcap-check: validates every RoCE v2 frame of a pcap / pcapng capture with lib/wire.
//
// A frame is RoCE when it is Ethernet [802.1Q] / IPv4 | IPv6 / UDP with destination port 4791;
// everything else is "other". RoCE frames go through wire::parse_frame (ICRC and a non-zero UDP
// checksum verified); frames the capture cut short (caplen < len) are reported as such instead.
// Linux cooked captures (SLL, SLL2, as `tshark -i any` writes) are rebuilt into Ethernet frames
// in a scratch buffer. See doc/pcap-check.md for the output format and exit codes.
#include <pcap/pcap.h>

#include <array>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "wire/hdr.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::pcapcheck {

namespace {

using wire::be::load16;

constexpr int kExitOk = 0;
constexpr int kExitInvalid = 1;
constexpr int kExitUsage = 2;

constexpr const char *kProg = "uroce-pcap-check";
constexpr const char *kSnaplenReason = "truncated by capture (snaplen)";

// Header sizes of the Linux cooked captures (https://www.tcpdump.org/linktypes/).
constexpr size_t kSllSize = 16;
constexpr size_t kSll2Size = 20;
constexpr uint16_t kArphrdNetlink = 824;  // SLL / SLL2 carrying netlink messages, not packets

struct Options {
  bool quiet = false;
  bool verify_icrc = true;
  bool expect_roce = false;
  const char *file = nullptr;
};

void usage(std::FILE *out) {
  std::fprintf(out,
               "usage: %s [-q] [--no-icrc] [--expect-roce] FILE\n"
               "Validates every RoCE v2 frame (UDP destination port 4791) of a pcap or pcapng\n"
               "capture (Ethernet, Linux cooked SLL or SLL2) with the uroce wire parser.\n"
               "\n"
               "  -q             print only invalid frames and the totals\n"
               "  --no-icrc      do not verify the ICRC\n"
               "  --expect-roce  exit 1 when the capture holds no RoCE frame\n"
               "  -h, --help     this help\n"
               "\n"
               "Exit status: 0 every RoCE frame is valid, 1 some RoCE frame is invalid (or none\n"
               "with --expect-roce), 2 usage, I/O or file-format error.\n",
               kProg);
}

// Returns kExitOk on success, kExitUsage (after printing why) otherwise; sets *help for -h.
int parse_args(int argc, char **argv, Options *o, bool *help) {
  bool no_more_flags = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (!no_more_flags && a.size() > 1 && a[0] == '-') {
      if (a == "--") {
        no_more_flags = true;
      } else if (a == "-q" || a == "--quiet") {
        o->quiet = true;
      } else if (a == "--no-icrc") {
        o->verify_icrc = false;
      } else if (a == "--expect-roce") {
        o->expect_roce = true;
      } else if (a == "-h" || a == "--help") {
        *help = true;
        return kExitOk;
      } else {
        std::fprintf(stderr, "%s: unknown option '%s'\n", kProg, argv[i]);
        usage(stderr);
        return kExitUsage;
      }
      continue;
    }
    if (o->file != nullptr) {
      std::fprintf(stderr, "%s: more than one FILE given ('%s', '%s')\n", kProg, o->file, argv[i]);
      usage(stderr);
      return kExitUsage;
    }
    o->file = argv[i];
  }
  if (o->file == nullptr) {
    std::fprintf(stderr, "%s: no FILE given\n", kProg);
    usage(stderr);
    return kExitUsage;
  }
  return kExitOk;
}

// One captured frame seen as Ethernet: `data` holds `caplen` captured bytes of a frame that
// was `len` bytes on the wire.
struct EthView {
  const uint8_t *data = nullptr;
  size_t caplen = 0;
  size_t len = 0;
};

// Rewrites a Linux cooked frame into `scratch` as Ethernet (destination MAC zero, source MAC the
// cooked header's link-layer address when it is six bytes, EtherType the cooked protocol).
// Returns false when the frame is not an Ethernet-typed packet (too short for the cooked header,
// a netlink message or an 802.2 / 802.3 protocol value below 0x0600).
bool cooked_to_eth(const uint8_t *pkt, size_t caplen, size_t len, size_t hdr_size,
                   uint16_t protocol, uint16_t arphrd, const uint8_t *addr, size_t addr_len,
                   std::vector<uint8_t> *scratch, EthView *out) {
  if (arphrd == kArphrdNetlink || protocol < 0x0600) return false;
  const size_t body = caplen - hdr_size;
  scratch->resize(wire::EthHdr::kSize + body);
  auto *eth = wire::hdr_at<wire::EthHdr>(scratch->data());
  static constexpr uint8_t kZeroMac[6] = {};
  eth->set_dst(kZeroMac);
  eth->set_src(addr_len == 6 ? addr : kZeroMac);
  eth->set_ethertype(protocol);
  if (body != 0) std::memcpy(scratch->data() + wire::EthHdr::kSize, pkt + hdr_size, body);
  out->data = scratch->data();
  out->caplen = wire::EthHdr::kSize + body;
  out->len = len >= hdr_size ? wire::EthHdr::kSize + (len - hdr_size) : out->caplen;
  return true;
}

// Presents a captured frame of link type `dlt` as Ethernet. False: not a classifiable packet.
bool to_ethernet(int dlt, const uint8_t *pkt, size_t caplen, size_t len,
                 std::vector<uint8_t> *scratch, EthView *out) {
  switch (dlt) {
    case DLT_EN10MB:
      *out = EthView{pkt, caplen, len};
      return true;
    case DLT_LINUX_SLL: {
      // packet type(2) ARPHRD(2) address length(2) address(8) protocol(2)
      if (caplen < kSllSize) return false;
      const size_t alen = load16(pkt + 4);
      return cooked_to_eth(pkt, caplen, len, kSllSize, load16(pkt + 14), load16(pkt + 2), pkt + 6,
                           alen, scratch, out);
    }
    case DLT_LINUX_SLL2: {
      // protocol(2) reserved(2) ifindex(4) ARPHRD(2) packet type(1) address length(1) address(8)
      if (caplen < kSll2Size) return false;
      return cooked_to_eth(pkt, caplen, len, kSll2Size, load16(pkt), load16(pkt + 8), pkt + 12,
                           pkt[11], scratch, out);
    }
    default:
      return false;
  }
}

enum class Kind {
  kOther,
  kRoce,
  kCutBeforePort,  // IP/UDP, but the capture ends before the UDP destination port
};

// Is this Ethernet [802.1Q] / IPv4 | IPv6 / UDP with destination port 4791? Looks only at the
// captured bytes and only as far as the destination port: everything else is parse_frame's job.
Kind classify(const EthView &f) {
  const uint8_t *p = f.data;
  const size_t n = f.caplen;
  if (n < wire::EthHdr::kSize) return Kind::kOther;
  size_t off = wire::EthHdr::kSize;
  uint16_t type = wire::hdr_at<wire::EthHdr>(p)->ethertype();
  if (type == wire::kEtherTypeVlan) {
    if (n < off + wire::VlanHdr::kSize) return Kind::kOther;
    type = wire::hdr_at<wire::VlanHdr>(p + off)->ethertype();
    off += wire::VlanHdr::kSize;
  }
  size_t l4;
  if (type == wire::kEtherTypeIpv4) {
    if (n < off + wire::Ipv4Hdr::kSize) return Kind::kOther;
    const auto *ip = wire::hdr_at<wire::Ipv4Hdr>(p + off);
    // A non-first fragment carries no UDP header; IHL < 5 cannot locate one.
    if (ip->version() != 4 || ip->ihl() < 5 || ip->protocol() != wire::kIpProtoUdp ||
        ip->frag_offset() != 0)
      return Kind::kOther;
    l4 = off + size_t{ip->ihl()} * 4;
  } else if (type == wire::kEtherTypeIpv6) {
    if (n < off + wire::Ipv6Hdr::kSize) return Kind::kOther;
    const auto *ip = wire::hdr_at<wire::Ipv6Hdr>(p + off);
    if (ip->version() != 6 || ip->next_header() != wire::kIpProtoUdp) return Kind::kOther;
    l4 = off + wire::Ipv6Hdr::kSize;
  } else {
    return Kind::kOther;
  }
  if (n < l4 + 4) return f.caplen < f.len ? Kind::kCutBeforePort : Kind::kOther;
  return load16(p + l4 + 2) == wire::kRoceV2Port ? Kind::kRoce : Kind::kOther;
}

const char *link_name(int dlt) {
  switch (dlt) {
    case DLT_EN10MB:
      return "Ethernet";
    case DLT_LINUX_SLL:
      return "Linux cooked (SLL)";
    case DLT_LINUX_SLL2:
      return "Linux cooked v2 (SLL2)";
    default:
      return "unsupported";
  }
}

struct Totals {
  uint64_t frames = 0;
  uint64_t roce = 0;
  uint64_t other = 0;
  uint64_t invalid = 0;
  uint64_t cut_before_port = 0;
  std::array<uint64_t, 256> per_opcode{};
};

void print_summary(const Options &o, const Totals &t) {
  if (!o.quiet) {
    const bool any = t.roce != t.invalid;
    std::printf("opcodes (valid RoCE frames):%s\n", any ? "" : " none");
    for (size_t op = 0; op < t.per_opcode.size(); ++op) {
      if (t.per_opcode[op] == 0) continue;
      const wire::OpcodeInfo &info = wire::opcode_info(static_cast<uint8_t>(op));
      std::printf("  %s (0x%02zx): %" PRIu64 "\n", info.name, op, t.per_opcode[op]);
    }
    if (t.cut_before_port != 0)
      std::printf("note: %" PRIu64
                  " IP/UDP frame(s) cut by the snaplen before the UDP port, counted as other\n",
                  t.cut_before_port);
  }
  std::printf("totals: frames %" PRIu64 ", RoCE %" PRIu64 ", other %" PRIu64 ", invalid %" PRIu64
              "\n",
              t.frames, t.roce, t.other, t.invalid);
  if (t.roce == 0) std::printf("no RoCE v2 frames (UDP destination port 4791) in the capture\n");
}

int run(const Options &o) {
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_t *pc = pcap_open_offline_with_tstamp_precision(o.file, PCAP_TSTAMP_PRECISION_NANO, err);
  if (pc == nullptr) {
    std::fprintf(stderr, "%s: %s: %s\n", kProg, o.file, err);
    return kExitUsage;
  }
  const int dlt = pcap_datalink(pc);
  if (dlt != DLT_EN10MB && dlt != DLT_LINUX_SLL && dlt != DLT_LINUX_SLL2) {
    const char *name = pcap_datalink_val_to_name(dlt);
    std::fprintf(stderr,
                 "%s: %s: unsupported link type %d (%s); supported: EN10MB (Ethernet), "
                 "LINUX_SLL, LINUX_SLL2\n",
                 kProg, o.file, dlt, name != nullptr ? name : "unknown");
    pcap_close(pc);
    return kExitUsage;
  }
  if (!o.quiet)
    std::printf("%s: %s capture, ICRC %s\n", o.file, link_name(dlt),
                o.verify_icrc ? "verified" : "not verified (--no-icrc)");

  const uint32_t flags =
      wire::kParseVerifyUdpChecksum | (o.verify_icrc ? wire::kParseVerifyIcrc : 0u);
  Totals t;
  std::vector<uint8_t> scratch;
  int rc;
  pcap_pkthdr *h = nullptr;
  const u_char *data = nullptr;
  while ((rc = pcap_next_ex(pc, &h, &data)) == 1) {
    const uint64_t n = ++t.frames;
    EthView f;
    Kind kind = Kind::kOther;
    if (to_ethernet(dlt, data, h->caplen, h->len, &scratch, &f)) kind = classify(f);
    if (kind != Kind::kRoce) {
      ++t.other;
      if (kind == Kind::kCutBeforePort) ++t.cut_before_port;
      continue;
    }
    ++t.roce;
    if (f.caplen < f.len) {
      ++t.invalid;
      std::printf("frame %" PRIu64 ": %s\n", n, kSnaplenReason);
      continue;
    }
    wire::ParsedPacket p;
    const wire::ParseError e = wire::parse_frame(f.data, f.caplen, &p, flags);
    if (e != wire::ParseError::kOk) {
      ++t.invalid;
      std::printf("frame %" PRIu64 ": %s\n", n, wire::parse_error_str(e));
      continue;
    }
    ++t.per_opcode[p.bth()->opcode()];
  }
  int status = kExitOk;
  std::string read_error;
  if (rc == PCAP_ERROR) {
    read_error = pcap_geterr(pc);
    status = kExitUsage;
  }
  pcap_close(pc);

  print_summary(o, t);
  std::fflush(stdout);
  if (status == kExitUsage) {
    std::fprintf(stderr, "%s: %s: read error after frame %" PRIu64 ": %s\n", kProg, o.file,
                 t.frames, read_error.c_str());
    return status;
  }
  if (t.invalid != 0) return kExitInvalid;
  if (o.expect_roce && t.roce == 0) {
    std::fprintf(stderr, "%s: %s: no RoCE frame, but --expect-roce was given\n", kProg, o.file);
    return kExitInvalid;
  }
  return kExitOk;
}

}  // namespace

}  // namespace uroce::pcapcheck

int main(int argc, char **argv) {
  using namespace uroce::pcapcheck;
  Options o;
  bool help = false;
  const int rc = parse_args(argc, argv, &o, &help);
  if (rc != kExitOk) return rc;
  if (help) {
    usage(stdout);
    return kExitOk;
  }
  const int status = run(o);
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "%s: error writing the report\n", kProg);
    return kExitUsage;
  }
  return status;
}
