// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: lib/cm's MAD decoder on arbitrary bytes (what arrives on QP 1).
// Checks, for every input: no crash or sanitizer report; a decoded message re-encodes to a MAD
// that decodes to the same message and encodes to the same bytes (encoding and decoding agree
// on every field); a decoded REJ / SIDR_REP length is within its array; rdma_cm's header, when
// a REQ or SIDR_REQ carries one, round-trips too.
#include <cstdint>
#include <cstring>

#include "cm/cma.h"
#include "cm/msg.h"
#include "fuzz_util.h"

using namespace uroce::cm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
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
