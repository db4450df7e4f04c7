// SPDX-License-Identifier: BSD-3-Clause
// Writes a pcap of RoCE v2 UD SENDs to QP 1, one CM MAD each (lib/cm's encoder, lib/wire's
// frame builder), and beside it the values each MAD was encoded from, named after the tshark
// fields that should show them. check_cm_tshark.py compares tshark's dissection.
// Usage: gen_cm_pcap OUT.pcap OUT.expect
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "cm/cma.h"
#include "cm/msg.h"
#include "util/pcap_writer.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::cm {
namespace {

struct Out {
  util::PcapWriter pcap;
  FILE *expect = nullptr;
  wire::PathInfo path;
  unsigned n = 0;
  bool ok = true;

  void frame(const Message &m, uint64_t tid, const std::string &fields) {
    uint8_t mad[kMadSize];
    encode(m, tid, mad);
    wire::PacketDesc d;
    d.path = &path;
    d.f.opcode = 0x64;  // UD SEND only
    d.f.dest_qp = kGsiQpn;
    d.f.psn = n;
    d.f.qkey = kGsiQkey;
    d.f.src_qp = kGsiQpn;
    d.payload_len = kMadSize;
    uint8_t buf[512];
    const wire::BuildResult r = wire::build_frame(buf, sizeof buf, d, mad);
    if (!r.ok() || !pcap.write(buf, r.frame_len, uint64_t{n} * 1000)) ok = false;
    ++n;
    std::fprintf(expect,
                 "frame=%u infiniband.mad.mgmtclass=0x07 infiniband.mad.classversion=2 "
                 "infiniband.mad.method=0x03 infiniband.mad.attributeid=0x%04x "
                 "infiniband.mad.transactionid=0x%016" PRIx64 " %s\n",
                 n, static_cast<unsigned>(attr_of(m)), tid, fields.c_str());
  }
};

int run(const char *pcap_path, const char *expect_path) {
  Out o;
  if (!o.pcap.open(pcap_path)) return 1;
  o.expect = std::fopen(expect_path, "w");
  if (!o.expect) return 1;
  const uint8_t a[6] = {0x02, 0, 0, 0, 0, 1}, b[6] = {0x02, 0, 0, 0, 0, 2};
  std::copy(a, a + 6, o.path.smac);
  std::copy(b, b + 6, o.path.dmac);
  o.path.sgid = wire::Gid::from_ipv4(10, 77, 0, 1);
  o.path.dgid = wire::Gid::from_ipv4(10, 77, 0, 11);

  Req q;
  q.local_comm_id = 0x11223344;
  q.service_id = service_id(PortSpace::kTcp, 7471);
  q.local_ca_guid = 0x0250B6FFFE123456ull;
  q.local_qpn = 0x000011;
  q.responder_resources = 16;
  q.initiator_depth = 8;
  q.remote_cm_response_timeout = 20;
  q.transport = Transport::kUc;
  q.starting_psn = 0xABCDEF;
  q.local_cm_response_timeout = 18;
  q.retry_count = 7;
  q.path_mtu = 3;
  q.rnr_retry_count = 6;
  q.max_cm_retries = 15;
  q.srq = true;
  q.primary.local_gid = o.path.sgid;
  q.primary.remote_gid = o.path.dgid;
  q.primary.flow_label = 0x12345;
  q.primary.packet_rate = 0x2A;
  q.primary.traffic_class = 0x68;
  q.primary.hop_limit = 64;
  q.primary.sl = 5;
  q.primary.local_ack_timeout = 19;
  write_cma_hdr(CmaHdr::ipv4(0x01004D0A, 0xB0C1, 0x0B004D0A), q.private_data.data());
  o.frame(q, 0x0000000100000001ull,
          "infiniband.cm.req.serviceid.dport=7471 infiniband.cm.req.localcaguid=0x0250b6fffe123456 "
          "infiniband.cm.req.localqpn=0x000011 infiniband.cm.req.responderres=16 "
          "infiniband.cm.req.initdepth=8 infiniband.cm.req.remoteresptout=20 "
          "infiniband.cm.req.transpsvctype=1 infiniband.cm.req.startpsn=0xabcdef "
          "infiniband.cm.req.localresptout=18 infiniband.cm.req.retrcount=7 "
          "infiniband.cm.req.pkey=0xffff infiniband.cm.req.pppmtu=3 "
          "infiniband.cm.req.rnrretrcount=6 infiniband.cm.req.maxcmretr=15 "
          "infiniband.cm.req.srq=1 infiniband.cm.req.prim_locallid=0xffff "
          "infiniband.cm.req.prim_localgid_ipv4=10.77.0.1 "
          "infiniband.cm.req.prim_remotegid_ipv4=10.77.0.11 "
          "infiniband.cm.req.prim_tfcclass=0x68 infiniband.cm.req.prim_hoplim=64 "
          "infiniband.cm.req.prim_sl=5 infiniband.cm.req.prim_localacktout=19 "
          "infiniband.cm.req.ip_cm.ipv=4 infiniband.cm.req.ip_cm.sport=0xb0c1 "
          "infiniband.cm.req.ip_cm.sip4=10.77.0.1 infiniband.cm.req.ip_cm.dip4=10.77.0.11");

  Rep p;
  p.local_comm_id = 0x55667788;
  p.remote_comm_id = 0x11223344;
  p.local_qpn = 0x000022;
  p.starting_psn = 0x123456;
  p.responder_resources = 4;
  p.initiator_depth = 2;
  p.target_ack_delay = 15;
  p.rnr_retry_count = 7;
  p.local_ca_guid = 0x0250B6FFFE654321ull;
  o.frame(p, 0x0000000100000001ull,
          "infiniband.cm.rep.remotecommid=0x11223344 infiniband.cm.rep.localqpn=0x000022 "
          "infiniband.cm.rep.startpsn=0x123456 infiniband.cm.rep.respres=4 "
          "infiniband.cm.rep.initdepth=2 infiniband.cm.rep.tgtackdelay=15 "
          "infiniband.cm.rep.rnrretrcount=7 infiniband.cm.rep.localcaguid=0x0250b6fffe654321");

  Rtu r;
  r.local_comm_id = 0x11223344;
  r.remote_comm_id = 0x55667788;
  o.frame(r, 0x0000000100000002ull,
          "infiniband.cm.rtu.localcommid=0x11223344 infiniband.cm.rtu.remotecommid=0x55667788");

  Rej j;
  j.local_comm_id = 0x0;
  j.remote_comm_id = 0x11223344;
  j.message_rejected = 0;
  j.reason = 8;  // invalid service id: nobody listens
  o.frame(j, 0x0000000100000003ull,
          "infiniband.cm.rej.remotecommid=0x11223344 infiniband.cm.rej.msgrej=0 "
          "infiniband.cm.rej.rejinfolen=0 infiniband.cm.rej.reason=8");

  Dreq d;
  d.local_comm_id = 0x11223344;
  d.remote_comm_id = 0x55667788;
  d.remote_qpn = 0x22;
  o.frame(d, 0x0000000100000004ull,
          "infiniband.cm.dreq.localcommid=0x11223344 infiniband.cm.dreq.remotecommid=0x55667788");

  Drep e;
  e.local_comm_id = 0x55667788;
  e.remote_comm_id = 0x11223344;
  o.frame(e, 0x0000000100000004ull,
          "infiniband.cm.drsp.localcommid=0x55667788 infiniband.cm.drsp.remotecommid=0x11223344");

  SidrReq sq;
  sq.request_id = 0x99;
  sq.service_id = service_id(PortSpace::kUdp, 7174);
  o.frame(sq, 0x0000000100000005ull, "");
  SidrRep sp;
  sp.request_id = 0x99;
  sp.qpn = 0x33;
  sp.qkey = 0x01234567;
  o.frame(sp, 0x0000000100000005ull, "");
  Mra mra;
  mra.local_comm_id = 1;
  o.frame(mra, 0x0000000100000006ull, "");
  std::fclose(o.expect);
  o.pcap.close();
  return o.ok ? 0 : 1;
}

}  // namespace
}  // namespace uroce::cm

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: gen_cm_pcap OUT.pcap OUT.expect\n");
    return 2;
  }
  return uroce::cm::run(argv[1], argv[2]);
}
