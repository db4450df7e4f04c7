// SPDX-License-Identifier: BSD-3-Clause
// Writes a pcap of frames made by lib/wire's builder, and beside it the values each frame was
// built from, named after the tshark fields that should show them. check_tshark.py then asks
// tshark to dissect the pcap and compares.
//
// Usage: gen_wire_pcap OUT.pcap OUT.expect
//
// Frames: every valid opcode, IPv4 and IPv6, with and without VLAN, and for opcodes that carry
// payload the sizes 0, 1, 2, 3, 4, 63, 1023 and 4096 (all pad counts). QPNs 0 and 1 are used
// only on opcodes without payload: tshark dissects the payload of packets to QP0/QP1 as MADs.
//
// Expect file: one line per frame, "frame=N key=value ...", where the key is a tshark field
// name and the value is a number (decimal or 0x hex), a byte string (hex, no separators), an
// IP address, or a MAC address (hex, no separators).
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "util/pcap_writer.h"
#include "wire/packet.h"

namespace uroce::wire {
namespace {

// splitmix64: a small seeded generator, so that the pcap is the same on every run.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
};

std::string hex(const uint8_t *p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

std::string ip_str(const Gid &g, bool ipv6) {
  char b[64];
  if (!ipv6) {
    std::snprintf(b, sizeof b, "%u.%u.%u.%u", g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
    return b;
  }
  std::string s;
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(b, sizeof b, "%s%02x%02x", i ? ":" : "", g.raw[i], g.raw[i + 1]);
    s += b;
  }
  return s;
}

class Expect {
 public:
  void num(const char *k, uint64_t v) { kv(k, std::to_string(v)); }
  void str(const char *k, const std::string &v) { kv(k, v); }
  const std::string &line() const { return line_; }

 private:
  void kv(const char *k, const std::string &v) {
    line_ += ' ';
    line_ += k;
    line_ += '=';
    line_ += v;
  }
  std::string line_;
};

int run(const char *pcap_path, const char *expect_path) {
  util::PcapWriter pcap;
  if (!pcap.open(pcap_path)) {
    std::fprintf(stderr, "cannot write %s\n", pcap_path);
    return 1;
  }
  std::FILE *ex = std::fopen(expect_path, "w");
  if (ex == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", expect_path);
    return 1;
  }

  Rng rng{0x7368726B};  // "shrk"
  static const uint32_t kSizes[] = {0, 1, 2, 3, 4, 63, 1023, 4096};
  static const uint32_t kPsns[] = {0, 1, 0xFFFFFE, 0xFFFFFF};
  std::vector<uint8_t> buf(8192), payload(4096);
  uint64_t frame_no = 0;
  int failures = 0;

  for (int code = 0; code < 256; ++code) {
    const OpcodeInfo &o = opcode_info(static_cast<uint8_t>(code));
    if (!o.valid()) continue;
    const bool has_payload = o.has(kMaskPayload);
    const size_t nsizes = has_payload ? std::size(kSizes) : 1;
    for (int fam = 0; fam < 2; ++fam) {
      for (size_t si = 0; si < nsizes; ++si) {
        const bool ipv6 = fam == 1;
        const uint32_t len = kSizes[si];
        PathInfo path;
        for (int i = 0; i < 6; ++i) {
          path.dmac[i] = static_cast<uint8_t>(rng.next());
          path.smac[i] = static_cast<uint8_t>(rng.next());
        }
        path.dmac[0] &= 0xFE;  // unicast (tshark flags a group source address)
        path.smac[0] &= 0xFE;
        path.vlan = (frame_no % 3) == 1;
        path.vlan_id = static_cast<uint16_t>(1 + rng.below(4094));
        path.vlan_pcp = static_cast<uint8_t>(rng.below(8));
        if (ipv6) {
          uint8_t a[16], b[16];
          for (int i = 0; i < 16; ++i) {
            a[i] = static_cast<uint8_t>(rng.next());
            b[i] = static_cast<uint8_t>(rng.next());
          }
          a[0] = b[0] = 0xFD;  // unique local: never IPv4-mapped
          path.sgid = Gid::from_bytes(a);
          path.dgid = Gid::from_bytes(b);
        } else {
          path.sgid = Gid::from_ipv4(10, static_cast<uint8_t>(rng.next()),
                                     static_cast<uint8_t>(rng.next()), 1);
          path.dgid = Gid::from_ipv4(10, static_cast<uint8_t>(rng.next()),
                                     static_cast<uint8_t>(rng.next()), 2);
        }
        path.dscp = static_cast<uint8_t>(rng.below(64));
        path.hop_limit = static_cast<uint8_t>(8 + rng.below(248));  // tshark warns on TTL < 5
        path.flow_label = ipv6 ? rng.below(1u << 20) : 0;
        path.udp_sport = static_cast<uint16_t>(0xC000 + rng.below(0x4000));

        PacketDesc d;
        d.path = &path;
        d.ecn = static_cast<Ecn>(frame_no % 4);
        d.ip_id = static_cast<uint16_t>(rng.next());
        PacketFields &f = d.f;
        f.opcode = static_cast<uint8_t>(code);
        f.solicited = rng.below(2);
        f.mig_req = rng.below(2);
        f.pkey = rng.below(2) ? 0xFFFF : static_cast<uint16_t>(rng.next());
        f.fecn = rng.below(2);
        f.becn = rng.below(2);
        const uint32_t q = rng.below(1u << 24);
        switch (frame_no % 5) {
          case 0:
            f.dest_qp = has_payload ? 2 : 0;
            break;
          case 1:
            f.dest_qp = has_payload ? 3 : 1;
            break;
          case 2:
            f.dest_qp = 0xFFFFFF;
            break;
          default:
            f.dest_qp = q < 2 ? q + 2 : q;
        }
        f.ack_req = rng.below(2);
        f.psn = frame_no % 6 < 4 ? kPsns[frame_no % 6] : rng.below(1u << 24);
        f.va = rng.next();
        f.rkey = static_cast<uint32_t>(rng.next());
        f.dma_len = rng.below(2) ? len : static_cast<uint32_t>(rng.next());
        f.swap_add = rng.next();
        f.compare = rng.next();
        f.syndrome = static_cast<uint8_t>(rng.next());
        f.msn = rng.below(1u << 24);
        f.atomic_orig = rng.next();
        f.imm_be = static_cast<uint32_t>(rng.next());
        f.inv_rkey = static_cast<uint32_t>(rng.next());
        f.qkey = static_cast<uint32_t>(rng.next());
        f.src_qp = rng.below(1u << 24);
        d.payload_len = len;
        for (uint32_t i = 0; i < len; ++i)
          payload[i] = static_cast<uint8_t>(rng.next());

        const BuildResult r = build_frame(buf.data(), buf.size(), d, payload.data());
        if (!r.ok()) {
          std::fprintf(stderr, "build_frame failed for opcode 0x%02x: %d\n", code,
                       static_cast<int>(r.err));
          ++failures;
          continue;
        }
        ++frame_no;
        pcap.write(buf.data(), r.frame_len, frame_no * 1000);

        Expect e;
        e.num("frame.len", r.frame_len);
        e.str("eth.dst", hex(path.dmac, 6));
        e.str("eth.src", hex(path.smac, 6));
        if (path.vlan) {
          e.num("vlan.id", path.vlan_id);
          e.num("vlan.priority", path.vlan_pcp);
        }
        const uint32_t l4 = r.frame_len - r.l3_off - (ipv6 ? 40 : 20);
        if (ipv6) {
          e.str("ipv6.src", ip_str(path.sgid, true));
          e.str("ipv6.dst", ip_str(path.dgid, true));
          e.num("ipv6.tclass.dscp", path.dscp);
          e.num("ipv6.tclass.ecn", static_cast<uint64_t>(d.ecn));
          e.num("ipv6.flow", path.flow_label);
          e.num("ipv6.hlim", path.hop_limit);
          e.num("ipv6.plen", l4);
          e.num("ipv6.nxt", 17);
        } else {
          e.str("ip.src", ip_str(path.sgid, false));
          e.str("ip.dst", ip_str(path.dgid, false));
          e.num("ip.dsfield.dscp", path.dscp);
          e.num("ip.dsfield.ecn", static_cast<uint64_t>(d.ecn));
          e.num("ip.ttl", path.hop_limit);
          e.num("ip.id", d.ip_id);
          e.num("ip.flags.df", 1);
          e.num("ip.len", r.frame_len - r.l3_off);
          e.num("ip.proto", 17);
        }
        e.num("udp.srcport", path.udp_sport);
        e.num("udp.dstport", 4791);
        e.num("udp.length", l4);
        e.num("udp.checksum", 0);

        e.num("infiniband.bth.opcode", f.opcode);
        e.num("infiniband.bth.se", f.solicited);
        e.num("infiniband.bth.m", f.mig_req);
        const uint32_t pad = (4 - len % 4) % 4;
        e.num("infiniband.bth.padcnt", pad);
        e.num("infiniband.bth.tver", 0);
        e.num("infiniband.bth.p_key", f.pkey);
        e.num("infiniband.bth.destqp", f.dest_qp);
        e.num("infiniband.bth.a", f.ack_req);
        e.num("infiniband.bth.reserved7", 0);
        e.num("infiniband.bth.psn", f.psn);
        // AtomicETH's VA and R_Key are shown under the RETH field names.
        if (o.off_reth || o.off_atomic_eth) {
          e.num("infiniband.reth.va", f.va);
          e.num("infiniband.reth.r_key", f.rkey);
        }
        if (o.off_reth) e.num("infiniband.reth.dmalen", f.dma_len);
        if (o.off_atomic_eth) {
          e.num("infiniband.atomiceth.swapdt", f.swap_add);
          e.num("infiniband.atomiceth.cmpdt", f.compare);
        }
        if (o.off_aeth) {
          e.num("infiniband.aeth.syndrome", f.syndrome);
          e.num("infiniband.aeth.msn", f.msn);
        }
        if (o.off_atomic_ack) e.num("infiniband.atomicacketh.origremdt", f.atomic_orig);
        if (o.off_deth) {
          e.num("infiniband.deth.q_key", f.qkey);
          e.num("infiniband.deth.srcqp", f.src_qp);
        }
        if (o.off_imm)
          e.str("infiniband.immdt", hex(reinterpret_cast<const uint8_t *>(&f.imm_be), 4));
        if (o.off_ieth) {
          const uint8_t k[4] = {
              static_cast<uint8_t>(f.inv_rkey >> 24), static_cast<uint8_t>(f.inv_rkey >> 16),
              static_cast<uint8_t>(f.inv_rkey >> 8), static_cast<uint8_t>(f.inv_rkey)};
          e.str("infiniband.ieth", hex(k, 4));
        }
        const uint8_t *icrc = buf.data() + r.frame_len - 4;
        const uint32_t icrc_v = uint32_t{icrc[0]} << 24 | uint32_t{icrc[1]} << 16 |
                                uint32_t{icrc[2]} << 8 | icrc[3];  // as tshark reads it
        if (o.has(kMaskCnp)) {
          // tshark 4.0 does not know opcode 0x81: it shows the 16 reserved bytes and the ICRC
          // as one block of unknown data.
          std::vector<uint8_t> rest(16, 0);
          rest.insert(rest.end(), icrc, icrc + 4);
          e.str("infiniband.vendor", hex(rest.data(), rest.size()));
        } else {
          e.num("infiniband.invariant.crc", icrc_v);
        }
        if (len + pad > 0) {
          // tshark's data is payload plus pad.
          std::vector<uint8_t> data(payload.begin(), payload.begin() + len);
          data.resize(len + pad, 0);
          e.num("data.len", len + pad);
          e.str("data.data", hex(data.data(), data.size()));
        }
        std::fprintf(ex, "frame=%" PRIu64 "%s\n", frame_no, e.line().c_str());
      }
    }
  }
  const bool ok = pcap.close() && std::fclose(ex) == 0;
  if (!ok) std::fprintf(stderr, "write error\n");
  std::fprintf(stderr, "%" PRIu64 " frames\n", frame_no);
  return ok && failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace uroce::wire

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT.pcap OUT.expect\n", argv[0]);
    return 2;
  }
  return uroce::wire::run(argv[1], argv[2]);
}
