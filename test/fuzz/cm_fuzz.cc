// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: lib/cm's MAD decoder on arbitrary bytes (what arrives on QP 1).
// Checks, for every input: no crash or sanitizer report; a decoded message re-encodes to a MAD
// that decodes to the same message and encodes to the same bytes (encoding and decoding agree
// on every field); a decoded REJ / SIDR_REP length is within its array; rdma_cm's header, when
// a REQ or SIDR_REQ carries one, round-trips too. Then the input, cut into 256-byte MADs, is
// fed to a connection manager that listens, accepts every REQ and answers every REP, with
// time moving between MADs: no crash, never more connections than MADs fed, and once every
// timer has fired only established connections are left.
#include <cstdint>
#include <cstring>

#include "cm/cm.h"
#include "cm/cma.h"
#include "cm/msg.h"
#include "fuzz_util.h"

using namespace uroce::cm;

namespace {

struct AutoHost : Host {
  virtual ~AutoHost() = default;
  Cm *cm = nullptr;
  uint64_t now = 0;
  void send_mad(const uroce::wire::Gid &, const uint8_t *mad) override {
    MadHeader h;
    Message m;
    FUZZ_CHECK(decode(mad, kMadSize, &h, &m) == DecodeError::kOk);  // we send only valid MADs
  }
  void on_event(const Event &e) override {
    if (e.kind == Event::kReqReceived) {
      Rep p;
      p.local_qpn = 0x20;
      cm->accept(e.comm_id, p, now);
    } else if (e.kind == Event::kRepReceived) {
      cm->rtu(e.comm_id, nullptr, 0, now);
    } else if (e.kind == Event::kDreqReceived) {
      cm->disconnect(e.comm_id, now);
    } else if (e.kind == Event::kSidrReqReceived) {
      SidrRep p;
      p.qpn = 0x21;
      cm->sidr_reply(e.comm_id, p);
    }
  }
};

void state_machine(const uint8_t *data, size_t size) {
  AutoHost host;
  Limits lim;
  lim.max_half_open = 4;
  lim.max_retries = 2;
  Cm cm(host, 0xCA, 1, lim);
  host.cm = &cm;
  cm.listen(service_id(PortSpace::kTcp, 7471), 1);
  cm.listen(service_id(PortSpace::kUdp, 7174), 2);
  Req q;
  q.service_id = service_id(PortSpace::kTcp, 7471);
  q.local_qpn = 0x11;
  q.path_mtu = 3;
  uint32_t id;
  const uroce::wire::Gid peer = uroce::wire::Gid::from_ipv4(10, 0, 0, 2);
  FUZZ_CHECK(cm.connect(q, peer, host.now, &id) == 0);
  size_t fed = 0;
  for (size_t off = 0; off < size; off += kMadSize) {
    ++fed;
    cm.receive(peer, data + off, size - off < kMadSize ? size - off : kMadSize, host.now);
    host.now += uint64_t{data[off]} << 24;  // up to ~4 s per MAD
    cm.poll(host.now);
    FUZZ_CHECK(cm.connections() <= fed + 1);
  }
  // Every timer fires: at most 16 tries of 2^23 x 4.096 us (the peer's capped timeout) plus
  // the packet lifetimes, then time-wait.
  for (int i = 0; i < 40; ++i) {
    host.now += uint64_t{1} << 36;  // 69 s
    cm.poll(host.now);
  }
  // Only established connections stay (they have no timer); everything else ended.
  FUZZ_CHECK(cm.connections() == cm.count_in(State::kEstablished));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  state_machine(data, size);
  MadHeader h;
  Message m;
  const DecodeError e = decode(data, size, &h, &m);
  if (e != DecodeError::kOk) {
    FUZZ_CHECK(size >= kMadSize || e == DecodeError::kShort);
    return 0;
  }
  FUZZ_CHECK(size >= kMadSize);
  FUZZ_CHECK(static_cast<uint16_t>(attr_of(m)) == h.attr_id);
  if (const Rej *j = std::get_if<Rej>(&m)) FUZZ_CHECK(j->ari_length <= kRejAri);
  if (const SidrRep *s = std::get_if<SidrRep>(&m)) FUZZ_CHECK(s->info_length <= kSidrRepInfo);

  uint8_t once[kMadSize], twice[kMadSize];
  encode(m, h.tid, once);
  MadHeader h2;
  Message m2;
  FUZZ_CHECK(decode(once, kMadSize, &h2, &m2) == DecodeError::kOk);
  FUZZ_CHECK(h2.tid == h.tid && m2.index() == m.index());
  encode(m2, h2.tid, twice);
  FUZZ_CHECK(std::memcmp(once, twice, kMadSize) == 0);
  // Every byte the encoder wrote from the input's fields came from the input: bits the field
  // list covers are equal, and reserved bits are zero in the re-encoding.
  for (size_t i = 0; i < kMadSize; ++i)
    FUZZ_CHECK((once[i] & ~data[i]) == 0);

  const uint8_t *priv = nullptr;
  if (const Req *q = std::get_if<Req>(&m)) priv = q->private_data.data();
  if (const SidrReq *s = std::get_if<SidrReq>(&m)) priv = s->private_data.data();
  CmaHdr c;
  if (priv && read_cma_hdr(priv, &c)) {
    uint8_t b[kCmaHdrSize];
    write_cma_hdr(c, b);
    CmaHdr c2;
    FUZZ_CHECK(read_cma_hdr(b, &c2));
    FUZZ_CHECK(c2.ip_version == c.ip_version && c2.port == c.port &&
               std::memcmp(c2.src, c.src, 16) == 0 && std::memcmp(c2.dst, c.dst, 16) == 0);
  }
  return 0;
}
