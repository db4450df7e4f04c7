// SPDX-License-Identifier: BSD-3-Clause
// The ICRC of real RoCE v2 frames (RC ACK and RDMA WRITE-only with 16 B .. 4 KB of payload,
// IPv4 and IPv6) by each available method, in one binary and one run:
//   Isal           ISA-L crc32_gzip_refl, as icrc_compute_with lays the region out for it
//                  (one call, padded to 256-byte blocks, up to 1 KB; two calls above)
//   Libdeflate     libdeflate_crc32: masked headers from a stack buffer, then the rest in place
//   LibdeflateCopy libdeflate_crc32 over a masked copy of the whole region (one call, <= 1 KB)
//   PrefixLd       per-QP precomputed header state (wire/icrc_prefix.h), rest by libdeflate
//   PrefixIsal     the same, rest by ISA-L
//   Dispatch       icrc_compute (what parse_frame and the generic build path run)
//   Prefix         IcrcPrefix::compute (what a QP's header template runs)
// Arguments: payload bytes (0 = an RC ACK: BTH + AETH, the shortest frame), 1 for IPv6.
// Results and the thresholds chosen from them: doc/perf.md, "ICRC of short frames".
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "wire/icrc.h"
#include "wire/icrc_prefix.h"
#include "wire/packet.h"

namespace uroce::bench {
namespace {

using namespace uroce::wire;

constexpr size_t kRing = 8;  // frames of one QP differing in PSN, length fields equal

PathInfo path(bool ipv6) {
  PathInfo p;
  const uint8_t d[6] = {0x02, 0, 0, 0, 0, 2}, s[6] = {0x02, 0, 0, 0, 0, 1};
  std::memcpy(p.dmac, d, 6);
  std::memcpy(p.smac, s, 6);
  if (ipv6) {
    const uint8_t a[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    const uint8_t b[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    p.sgid = Gid::from_bytes(a);
    p.dgid = Gid::from_bytes(b);
    p.flow_label = 0x12345;
  } else {
    p.sgid = Gid::from_ipv4(10, 0, 0, 1);
    p.dgid = Gid::from_ipv4(10, 0, 0, 2);
  }
  p.udp_sport = 49152 + 17;
  return p;
}

// kRing frames of one QP; `l3` / `len` as icrc_compute takes them.
struct Frames {
  std::vector<std::vector<uint8_t>> buf;
  size_t l3 = 0, len = 0;
  bool ipv6 = false;
  IcrcPrefix prefix;

  Frames(uint32_t payload, bool v6) : ipv6(v6) {
    const PathInfo p = path(v6);
    std::vector<uint8_t> data(payload);
    for (size_t i = 0; i < payload; ++i)
      data[i] = static_cast<uint8_t>(i * 7 + 3);
    for (size_t i = 0; i < kRing; ++i) {
      PacketDesc d;
      d.path = &p;
      d.ecn = Ecn::kEct0;
      d.ip_id = static_cast<uint16_t>(100 + i);
      d.f.dest_qp = 0x000123;
      d.f.psn = static_cast<uint32_t>(0x10000 + 37 * i);
      if (payload == 0) {
        d.f.opcode = op::kRcAck;
        d.f.msn = static_cast<uint32_t>(i);
      } else {
        d.f.opcode = op::kRcWriteOnly;
        d.f.ack_req = true;
        d.f.va = 0x00007F0000001000ull;
        d.f.rkey = 0x1234;
        d.f.dma_len = payload;
        d.payload_len = payload;
      }
      std::vector<uint8_t> f(frame_size(d));
      const BuildResult r = build_frame(f.data(), f.size(), d, data.data());
      if (!r.ok()) std::abort();
      l3 = r.l3_off;
      len = r.frame_len - kIcrcSize - r.l3_off;
      buf.push_back(std::move(f));
    }
    prefix.init(buf[0].data() + l3, ipv6);
  }
  const uint8_t *region(size_t i) const { return buf[i & (kRing - 1)].data() + l3; }
};

uint32_t libdeflate_copy(const uint8_t *l3, size_t len, bool ipv6) noexcept {
  if (len > kIcrcOneCallMax) return icrc_compute_split(crc32_libdeflate, l3, len, ipv6);
  alignas(64) uint8_t b[kIcrcOneCallMax];
  const size_t n = icrc_masked_len(ipv6);
  icrc_mask_headers(l3, ipv6, b);
  detail::copy_short(b + n, l3 + n, len - n);
  return crc32_libdeflate(kIcrcLrhCrc, b, len);
}

template <typename Fn>
void run(benchmark::State &state, Fn fn) {
  const Frames f(static_cast<uint32_t>(state.range(0)), state.range(1) != 0);
  for (size_t i = 0; i < kRing; ++i) {
    const uint8_t *r = f.region(i);
    if (fn(f, r) != icrc_load(r + f.len)) {
      state.SkipWithError("wrong ICRC");
      return;
    }
  }
  size_t i = 0;
  for (auto _ : state) {
    const uint8_t *r = f.region(i++);
    benchmark::DoNotOptimize(r);
    uint32_t c = fn(f, r);
    benchmark::DoNotOptimize(c);
  }
  state.counters["region"] = static_cast<double>(f.len);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.len));
}

void BM_Isal(benchmark::State &s) {
  run(s, [](const Frames &f, const uint8_t *r) {
    return icrc_compute_with(crc32_isal, r, f.len, f.ipv6);
  });
}
void BM_Libdeflate(benchmark::State &s) {
  run(s, [](const Frames &f, const uint8_t *r) {
    return icrc_compute_split(crc32_libdeflate, r, f.len, f.ipv6);
  });
}
void BM_LibdeflateCopy(benchmark::State &s) {
  run(s, [](const Frames &f, const uint8_t *r) { return libdeflate_copy(r, f.len, f.ipv6); });
}
void BM_PrefixLd(benchmark::State &s) {
  run(s, [](const Frames &f, const uint8_t *r) {
    const size_t n = icrc_masked_len(f.ipv6);
    return crc32_libdeflate(f.prefix.headers_crc(r), r + n, f.len - n);
  });
}
void BM_PrefixIsal(benchmark::State &s) {
  run(s, [](const Frames &f, const uint8_t *r) {
    const size_t n = icrc_masked_len(f.ipv6);
    return crc32_isal(f.prefix.headers_crc(r), r + n, f.len - n);
  });
}
void BM_Dispatch(benchmark::State &s) {
  run(s, [](const Frames &f, const uint8_t *r) { return icrc_compute(r, f.len, f.ipv6); });
}
void BM_Prefix(benchmark::State &s) {
  run(s, [](const Frames &f, const uint8_t *r) { return f.prefix.compute(r, f.len); });
}

// On a shared 2-vCPU VM the fastest repetition is the one least disturbed by other jobs; it is
// reported beside the median (run with --benchmark_repetitions and random interleaving).
double min_of(const std::vector<double> &v) {
  double m = v.empty() ? 0 : v[0];
  for (double x : v)
    m = x < m ? x : m;
  return m;
}

void frame_args(benchmark::internal::Benchmark *b) {
  b->ArgNames({"payload", "ipv6"});
  b->ComputeStatistics("min", min_of);
  for (int v6 : {0, 1})
    for (int p : {0, 16, 64, 128, 192, 256, 512, 1024, 2048, 4096})
      b->Args({p, v6});
}
// The threshold sweep: WRITE-only payloads in 32-byte steps up to 1 KB (ACK at 0), IPv4 only.
void sweep_args(benchmark::internal::Benchmark *b) {
  b->ArgNames({"sweep", "ipv6"});
  b->ComputeStatistics("min", min_of);
  for (int p = 0; p <= 1024; p += 32)
    b->Args({p, 0});
  for (int p : {1536, 2048, 3072, 4096})
    b->Args({p, 0});
}
BENCHMARK(BM_Isal)->Apply(sweep_args);
BENCHMARK(BM_Libdeflate)->Apply(sweep_args);
BENCHMARK(BM_LibdeflateCopy)->Apply(sweep_args);
BENCHMARK(BM_PrefixLd)->Apply(sweep_args);
BENCHMARK(BM_PrefixIsal)->Apply(sweep_args);

BENCHMARK(BM_Isal)->Apply(frame_args);
BENCHMARK(BM_Libdeflate)->Apply(frame_args);
BENCHMARK(BM_LibdeflateCopy)->Apply(frame_args);
BENCHMARK(BM_PrefixLd)->Apply(frame_args);
BENCHMARK(BM_PrefixIsal)->Apply(frame_args);
BENCHMARK(BM_Dispatch)->Apply(frame_args);
BENCHMARK(BM_Prefix)->Apply(frame_args);

}  // namespace
}  // namespace uroce::bench

BENCHMARK_MAIN();
