// SPDX-License-Identifier: BSD-3-Clause
// One field list per message (IBTA 12.6, Tables 106-120; offsets from the end of the MAD
// header), walked by a reader or a writer, so encoding and decoding cannot disagree.
#include "cm/msg.h"

#include <cstring>
#include <type_traits>

#include "cm/bits.h"

namespace uroce::cm {

namespace {

struct Writer {
  uint8_t *d;
  template <class T>
  void f(Field fl, const T &x) {
    set(d, fl, static_cast<uint64_t>(x));
  }
  template <size_t N>
  void bytes(size_t off, const std::array<uint8_t, N> &a) {
    std::memcpy(d + off, a.data(), N);
  }
  void gid(size_t off, const wire::Gid &g) { std::memcpy(d + off, g.raw, sizeof(g.raw)); }
};

struct Reader {
  const uint8_t *d;
  template <class T>
  void f(Field fl, T &x) {
    if constexpr (std::is_same_v<T, bool>)
      x = get(d, fl) != 0;
    else
      x = static_cast<T>(get(d, fl));
  }
  template <size_t N>
  void bytes(size_t off, std::array<uint8_t, N> &a) {
    std::memcpy(a.data(), d + off, N);
  }
  void gid(size_t off, wire::Gid &g) { g = wire::Gid::from_bytes(d + off); }
};

// A REQ path: 44 bytes from `o` (primary at 52, alternate at 96).
template <class IO, class P>
void path(IO &io, uint16_t o, P &p) {
  io.f(Field{o, 0, 16}, p.local_lid);
  io.f(Field{static_cast<uint16_t>(o + 2), 0, 16}, p.remote_lid);
  io.gid(o + 4u, p.local_gid);
  io.gid(o + 20u, p.remote_gid);
  io.f(Field{static_cast<uint16_t>(o + 36), 0, 20}, p.flow_label);
  io.f(Field{static_cast<uint16_t>(o + 39), 2, 6}, p.packet_rate);
  io.f(Field{static_cast<uint16_t>(o + 40), 0, 8}, p.traffic_class);
  io.f(Field{static_cast<uint16_t>(o + 41), 0, 8}, p.hop_limit);
  io.f(Field{static_cast<uint16_t>(o + 42), 0, 4}, p.sl);
  io.f(Field{static_cast<uint16_t>(o + 42), 4, 1}, p.subnet_local);
  io.f(Field{static_cast<uint16_t>(o + 43), 0, 5}, p.local_ack_timeout);
}

template <class IO, class M>
void codec(IO &io, M &m) {
  using T = std::remove_const_t<M>;
  if constexpr (std::is_same_v<T, Req>) {  // Table 106
    io.f(Field{0, 0, 32}, m.local_comm_id);
    io.f(Field{8, 0, 64}, m.service_id);
    io.f(Field{16, 0, 64}, m.local_ca_guid);
    io.f(Field{28, 0, 32}, m.local_qkey);
    io.f(Field{32, 0, 24}, m.local_qpn);
    io.f(Field{35, 0, 8}, m.responder_resources);
    io.f(Field{36, 0, 24}, m.local_eecn);
    io.f(Field{39, 0, 8}, m.initiator_depth);
    io.f(Field{40, 0, 24}, m.remote_eecn);
    io.f(Field{43, 0, 5}, m.remote_cm_response_timeout);
    io.f(Field{43, 5, 2}, m.transport);
    io.f(Field{43, 7, 1}, m.e2e_flow_control);
    io.f(Field{44, 0, 24}, m.starting_psn);
    io.f(Field{47, 0, 5}, m.local_cm_response_timeout);
    io.f(Field{47, 5, 3}, m.retry_count);
    io.f(Field{48, 0, 16}, m.pkey);
    io.f(Field{50, 0, 4}, m.path_mtu);
    io.f(Field{50, 4, 1}, m.rdc_exists);
    io.f(Field{50, 5, 3}, m.rnr_retry_count);
    io.f(Field{51, 0, 4}, m.max_cm_retries);
    io.f(Field{51, 4, 1}, m.srq);
    io.f(Field{51, 5, 3}, m.extended_transport);
    path(io, 52, m.primary);
    path(io, 96, m.alternate);
    io.f(Field{139, 5, 1}, m.sap_supported);
    io.bytes(140, m.private_data);
  } else if constexpr (std::is_same_v<T, Mra>) {  // Table 107
    io.f(Field{0, 0, 32}, m.local_comm_id);
    io.f(Field{4, 0, 32}, m.remote_comm_id);
    io.f(Field{8, 0, 2}, m.message_mraed);
    io.f(Field{9, 0, 5}, m.service_timeout);
    io.bytes(10, m.private_data);
  } else if constexpr (std::is_same_v<T, Rej>) {  // Table 108
    io.f(Field{0, 0, 32}, m.local_comm_id);
    io.f(Field{4, 0, 32}, m.remote_comm_id);
    io.f(Field{8, 0, 2}, m.message_rejected);
    io.f(Field{9, 0, 7}, m.ari_length);
    io.f(Field{10, 0, 16}, m.reason);
    io.bytes(12, m.ari);
    io.bytes(84, m.private_data);
  } else if constexpr (std::is_same_v<T, Rep>) {  // Table 110
    io.f(Field{0, 0, 32}, m.local_comm_id);
    io.f(Field{4, 0, 32}, m.remote_comm_id);
    io.f(Field{8, 0, 32}, m.local_qkey);
    io.f(Field{12, 0, 24}, m.local_qpn);
    io.f(Field{16, 0, 24}, m.local_eecn);
    io.f(Field{20, 0, 24}, m.starting_psn);
    io.f(Field{24, 0, 8}, m.responder_resources);
    io.f(Field{25, 0, 8}, m.initiator_depth);
    io.f(Field{26, 0, 5}, m.target_ack_delay);
    io.f(Field{26, 5, 2}, m.failover_accepted);
    io.f(Field{26, 7, 1}, m.e2e_flow_control);
    io.f(Field{27, 0, 3}, m.rnr_retry_count);
    io.f(Field{27, 3, 1}, m.srq);
    io.f(Field{28, 0, 64}, m.local_ca_guid);
    io.bytes(36, m.private_data);
  } else if constexpr (std::is_same_v<T, Rtu> || std::is_same_v<T, Drep>) {  // 111, 113
    io.f(Field{0, 0, 32}, m.local_comm_id);
    io.f(Field{4, 0, 32}, m.remote_comm_id);
    io.bytes(8, m.private_data);
  } else if constexpr (std::is_same_v<T, Dreq>) {  // Table 112
    io.f(Field{0, 0, 32}, m.local_comm_id);
    io.f(Field{4, 0, 32}, m.remote_comm_id);
    io.f(Field{8, 0, 24}, m.remote_qpn);
    io.bytes(12, m.private_data);
  } else if constexpr (std::is_same_v<T, SidrReq>) {  // Table 119
    io.f(Field{0, 0, 32}, m.request_id);
    io.f(Field{4, 0, 16}, m.pkey);
    io.f(Field{8, 0, 64}, m.service_id);
    io.bytes(16, m.private_data);
  } else if constexpr (std::is_same_v<T, SidrRep>) {  // Table 120
    io.f(Field{0, 0, 32}, m.request_id);
    io.f(Field{4, 0, 8}, m.status);
    io.f(Field{5, 0, 8}, m.info_length);
    io.f(Field{8, 0, 24}, m.qpn);
    io.f(Field{12, 0, 64}, m.service_id);
    io.f(Field{20, 0, 32}, m.qkey);
    io.bytes(24, m.info);
    io.bytes(96, m.private_data);
  }
}

constexpr AttrId kAttrs[] = {AttrId::kReq,  AttrId::kMra,     AttrId::kRej,
                             AttrId::kRep,  AttrId::kRtu,     AttrId::kDreq,
                             AttrId::kDrep, AttrId::kSidrReq, AttrId::kSidrRep};
static_assert(sizeof(kAttrs) / sizeof(kAttrs[0]) == std::variant_size_v<Message>);

// Message alternative I for attribute `attr`, or false.
template <size_t I = 0>
bool make(uint16_t attr, Message *m) {
  if constexpr (I == std::variant_size_v<Message>) {
    return false;
  } else {
    if (static_cast<uint16_t>(kAttrs[I]) == attr) {
      m->emplace<I>();
      return true;
    }
    return make<I + 1>(attr, m);
  }
}

}  // namespace

AttrId attr_of(const Message &m) noexcept {
  return kAttrs[m.index()];
}

void encode(const Message &m, uint64_t tid, uint8_t *mad) noexcept {
  std::memset(mad, 0, kMadSize);
  MadHeader h;
  h.tid = tid;
  h.attr_id = static_cast<uint16_t>(attr_of(m));
  write_header(h, mad);
  Writer w{mad + kMadHeaderSize};
  std::visit([&w](const auto &msg) { codec(w, msg); }, m);
}

const char *decode_error_str(DecodeError e) noexcept {
  switch (e) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kShort:
      return "shorter than a MAD";
    case DecodeError::kBadBaseVersion:
      return "MAD base version not 1";
    case DecodeError::kNotCm:
      return "not the CM class";
    case DecodeError::kBadClassVersion:
      return "CM class version not 2";
    case DecodeError::kBadMethod:
      return "method not Send";
    case DecodeError::kBadStatus:
      return "non-zero MAD status";
    case DecodeError::kBadAttr:
      return "attribute not handled";
    case DecodeError::kBadLength:
      return "length field beyond its array";
  }
  return "?";
}

DecodeError decode(const uint8_t *mad, size_t len, MadHeader *hdr, Message *out) noexcept {
  if (len < kMadSize) return DecodeError::kShort;
  *hdr = read_header(mad);
  if (hdr->base_version != kBaseVersion) return DecodeError::kBadBaseVersion;
  if (hdr->mgmt_class != kCmClass) return DecodeError::kNotCm;
  if (hdr->class_version != kCmClassVersion) return DecodeError::kBadClassVersion;
  if (hdr->method != kMethodSend) return DecodeError::kBadMethod;
  if (hdr->status != 0) return DecodeError::kBadStatus;
  if (!make(hdr->attr_id, out)) return DecodeError::kBadAttr;
  Reader r{mad + kMadHeaderSize};
  std::visit([&r](auto &msg) { codec(r, msg); }, *out);
  if (const Rej *j = std::get_if<Rej>(out); j && j->ari_length > kRejAri)
    return DecodeError::kBadLength;
  if (const SidrRep *s = std::get_if<SidrRep>(out); s && s->info_length > kSidrRepInfo)
    return DecodeError::kBadLength;
  return DecodeError::kOk;
}

}  // namespace uroce::cm
