// SPDX-License-Identifier: BSD-3-Clause
// Writes captures of frames made by lib/wire's builder, through lib/util's PcapWriter, and a
// manifest.json (the schema of gen_captures.py) saying what uroce-pcap-check must report:
//   builder.pcap          every valid opcode x {IPv4, IPv6} x {untagged, 802.1Q} x payload sizes,
//                         plus frames whose ICRC-masked fields were changed after building
//                         (still valid);
//   builder-snaplen.pcap  the same frames written with a snaplen of 80 bytes;
//   builder-corrupt.pcap  the same frames with every 5th one corrupted after its ICRC.
// Usage: gen_builder_pcap OUTDIR
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "util/pcap_writer.h"
#include "wire/hdr.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::test {
namespace {

struct Frame {
  std::vector<uint8_t> bytes;
  uint8_t opcode;
};

struct Expect {
  uint8_t opcode;
  const char *reason;          // nullptr: valid
  const char *reason_no_icrc;  // the same with --no-icrc
};

wire::PathInfo make_path(bool ipv6, bool vlan) {
  wire::PathInfo p;
  const uint8_t dmac[6] = {0x02, 0, 0, 0, 0, 0x0B}, smac[6] = {0x02, 0, 0, 0, 0, 0x0A};
  std::copy(dmac, dmac + 6, p.dmac);
  std::copy(smac, smac + 6, p.smac);
  p.vlan = vlan;
  p.vlan_id = 42;
  p.vlan_pcp = 3;
  if (ipv6) {
    uint8_t s[16] = {0xFD, 0, 0, 7}, d[16] = {0xFD, 0, 0, 7};
    s[15] = 1;
    d[15] = 2;
    p.sgid = wire::Gid::from_bytes(s);
    p.dgid = wire::Gid::from_bytes(d);
    p.flow_label = 0xABCDE;
  } else {
    p.sgid = wire::Gid::from_ipv4(192, 168, 7, 1);
    p.dgid = wire::Gid::from_ipv4(192, 168, 7, 2);
  }
  p.dscp = 26;
  p.udp_sport = 0xC001;
  return p;
}

std::vector<Frame> make_frames() {
  std::vector<Frame> out;
  uint32_t psn = 0;
  for (int code = 0; code < 256; ++code) {
    const wire::OpcodeInfo &o = wire::opcode_info(static_cast<uint8_t>(code));
    if (!o.valid()) continue;
    const std::vector<uint32_t> sizes = o.has(wire::kMaskPayload)
                                            ? std::vector<uint32_t>{0, 1, 3, 256, 1027}
                                            : std::vector<uint32_t>{0};
    for (const bool ipv6 : {false, true}) {
      for (const bool vlan : {false, true}) {
        const wire::PathInfo path = make_path(ipv6, vlan);
        for (const uint32_t len : sizes) {
          wire::PacketDesc d;
          d.path = &path;
          d.ecn = wire::Ecn::kEct0;
          d.ip_id = static_cast<uint16_t>(psn);
          d.f.opcode = static_cast<uint8_t>(code);
          d.f.dest_qp = 0x1234 + static_cast<uint32_t>(code);
          d.f.psn = psn++;
          d.f.ack_req = (psn & 1) != 0;
          d.f.va = 0x7F0000000000ull + psn;
          d.f.rkey = 0xABCD0000u | psn;
          d.f.dma_len = len;
          d.f.syndrome = 0x1F;
          d.f.msn = psn;
          d.f.qkey = 0x11111111;
          d.f.src_qp = 0x55;
          d.f.imm_be = 0x01020304;
          d.payload_len = len;
          std::vector<uint8_t> payload(len);
          for (uint32_t i = 0; i < len; ++i)
            payload[i] = static_cast<uint8_t>(i * 7 + psn);
          Frame f{std::vector<uint8_t>(wire::frame_size(d)), d.f.opcode};
          const wire::BuildResult r =
              wire::build_frame(f.bytes.data(), f.bytes.size(), d, payload.data());
          if (!r.ok() || r.frame_len != f.bytes.size()) {
            std::fprintf(stderr, "gen_builder_pcap: build_frame failed for opcode 0x%02x\n", code);
            std::exit(1);
          }
          out.push_back(std::move(f));
        }
      }
    }
  }
  return out;
}

// Changes the fields the ICRC does not cover, as a switch may: ECN, TTL / hop limit, flow label,
// BTH FECN/BECN (and the IPv4 checksum, which must follow the TTL).
Frame remark(const Frame &f) {
  Frame g = f;
  wire::ParsedPacket p;
  if (wire::parse_frame(g.bytes.data(), g.bytes.size(), &p) != wire::ParseError::kOk) {
    std::fprintf(stderr, "gen_builder_pcap: a built frame does not parse\n");
    std::exit(1);
  }
  uint8_t *l3 = g.bytes.data() + p.l3_off;
  if (p.ipv6) {
    auto *ip = wire::hdr_at<wire::Ipv6Hdr>(l3);
    ip->set_vtf(static_cast<uint8_t>(ip->traffic_class() | 3), 0x54321);
    ip->set_hop_limit(3);
  } else {
    auto *ip = wire::hdr_at<wire::Ipv4Hdr>(l3);
    ip->set_ecn(wire::Ecn::kCe);
    ip->set_ttl(3);
    ip->fill_checksum();
  }
  wire::hdr_at<wire::Bth>(g.bytes.data() + p.bth_off)->set_fecn_becn(true, true);
  return g;
}

bool write_pcap(const std::string &path, const std::vector<Frame> &frames, uint32_t snaplen) {
  util::PcapWriter w;
  if (!w.open(path.c_str(), snaplen)) return false;
  uint64_t ts = 1'700'000'000'000'000'000ull;
  for (const Frame &f : frames)
    if (!w.write(f.bytes.data(), f.bytes.size(), ts += 1000)) return false;
  return w.close();
}

const char *quote(const char *s) {
  return s != nullptr ? "\"" : "";
}
const char *or_null(const char *s) {
  return s != nullptr ? s : "null";
}

void write_capture_json(std::FILE *j, const char *file, const std::vector<Expect> &ex, bool last) {
  std::fprintf(j,
               "  {\"file\": \"%s\", \"link\": \"Ethernet\", \"tshark\": true,\n"
               "   \"runs\": [\"default\", \"quiet\", \"no_icrc\"],\n   \"frames\": [\n",
               file);
  for (size_t i = 0; i < ex.size(); ++i) {
    // Reasons are fixed strings without characters JSON would need escaped.
    std::fprintf(j,
                 "    {\"n\": %zu, \"kind\": \"roce\", \"opcode\": %u, \"op\": \"%s\", "
                 "\"reason\": %s%s%s, \"reason_no_icrc\": %s%s%s, \"proto\": \"infiniband\", "
                 "\"cut_before_port\": false}%s\n",
                 i + 1, ex[i].opcode, wire::opcode_info(ex[i].opcode).name, quote(ex[i].reason),
                 or_null(ex[i].reason), quote(ex[i].reason), quote(ex[i].reason_no_icrc),
                 or_null(ex[i].reason_no_icrc), quote(ex[i].reason_no_icrc),
                 i + 1 < ex.size() ? "," : "");
  }
  std::fprintf(j, "  ]}%s\n", last ? "" : ",");
}

int run(const std::string &dir) {
  constexpr const char *kSnap = "truncated by capture (snaplen)";
  constexpr const char *kBadIcrc = "bad ICRC";
  constexpr uint32_t kSnaplen = 80;

  std::vector<Frame> frames = make_frames();
  const size_t built = frames.size();
  for (size_t i = 0; i < built; i += 9)
    frames.push_back(remark(frames[i]));

  std::vector<Expect> valid, snap, corrupt;
  std::vector<Frame> corrupted = frames;
  for (size_t i = 0; i < frames.size(); ++i) {
    const uint8_t op = frames[i].opcode;
    valid.push_back({op, nullptr, nullptr});
    const char *s = frames[i].bytes.size() > kSnaplen ? kSnap : nullptr;
    snap.push_back({op, s, s});
    if (i % 5 == 4) {
      // Alternately a bit of the ICRC itself and a bit of the BTH destination QP.
      std::vector<uint8_t> &b = corrupted[i].bytes;
      wire::ParsedPacket p;
      (void)wire::parse_frame(b.data(), b.size(), &p);
      if ((i / 5) % 2 == 0)
        b[p.frame_len - 1] ^= 0x80;
      else
        b[p.bth_off + 6] ^= 0x01;
      corrupt.push_back({op, kBadIcrc, nullptr});
    } else {
      corrupt.push_back({op, nullptr, nullptr});
    }
  }

  if (!write_pcap(dir + "/builder.pcap", frames, 65535) ||
      !write_pcap(dir + "/builder-snaplen.pcap", frames, kSnaplen) ||
      !write_pcap(dir + "/builder-corrupt.pcap", corrupted, 65535)) {
    std::fprintf(stderr, "gen_builder_pcap: cannot write the captures in %s\n", dir.c_str());
    return 1;
  }
  std::FILE *j = std::fopen((dir + "/manifest.json").c_str(), "w");
  if (j == nullptr) return 1;
  std::fprintf(j, "{\"errors\": [], \"captures\": [\n");
  write_capture_json(j, "builder.pcap", valid, false);
  write_capture_json(j, "builder-snaplen.pcap", snap, false);
  write_capture_json(j, "builder-corrupt.pcap", corrupt, true);
  std::fprintf(j, "]}\n");
  if (std::fclose(j) != 0) return 1;
  std::printf("gen_builder_pcap: %zu frames per capture in %s\n", frames.size(), dir.c_str());
  return 0;
}

}  // namespace
}  // namespace uroce::test

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gen_builder_pcap OUTDIR\n");
    return 2;
  }
  return uroce::test::run(argv[1]);
}
