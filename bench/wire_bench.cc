// SPDX-License-Identifier: BSD-3-Clause
// Microbenchmarks of lib/wire: ICRC (ISA-L vs a byte-at-a-time table CRC), building and parsing
// an RDMA WRITE-only frame, and a memcpy of the same frame as a same-run baseline.
// Targets and results: doc/perf.md; bench/run-wire.sh runs this and prints the table.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "crc32_table.h"
#include "wire/icrc.h"
#include "wire/packet.h"

namespace uroce::bench {
namespace {

using namespace uroce::wire;

constexpr uint32_t kPayload = 64;  // WRITE-only payload of the frame benchmarks
constexpr size_t kRing = 64;       // distinct pre-built frames the parse benchmarks cycle over
constexpr size_t kFrameCap = 256;  // buffer per frame (the 64 B frame is 138 bytes)
constexpr size_t kBthPsnLow = 39;  // IPv4: 20 (IP) + 8 (UDP) + 11 (last byte of the BTH PSN)

PathInfo v4_path() {
  PathInfo p;
  const uint8_t d[6] = {0x02, 0, 0, 0, 0, 2}, s[6] = {0x02, 0, 0, 0, 0, 1};
  std::memcpy(p.dmac, d, 6);
  std::memcpy(p.smac, s, 6);
  p.sgid = Gid::from_ipv4(10, 0, 0, 1);
  p.dgid = Gid::from_ipv4(10, 0, 0, 2);
  p.udp_sport = 49152 + 17;
  return p;
}

PacketDesc write_only_desc(const PathInfo &path, uint32_t psn) {
  PacketDesc d;
  d.path = &path;
  d.ecn = Ecn::kEct0;
  d.f.opcode = op::kRcWriteOnly;
  d.f.dest_qp = 0x000123;
  d.f.ack_req = true;
  d.f.psn = psn;
  d.f.va = 0x00007F0000001000ull;
  d.f.rkey = 0x1234;
  d.f.dma_len = kPayload;
  d.payload_len = kPayload;
  return d;
}

std::array<uint8_t, kPayload> make_payload() {
  std::array<uint8_t, kPayload> p{};
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = static_cast<uint8_t>(i * 7 + 3);
  return p;
}

// A buffer starting at an IPv4 header: a real WRITE-only header prefix, then filler bytes up to
// `len`, the number of bytes the ICRC covers from the IP header (as icrc_compute's `len`).
std::vector<uint8_t> icrc_input(size_t len) {
  const PathInfo path = v4_path();
  const PacketDesc d = write_only_desc(path, 1);
  std::vector<uint8_t> frame(kFrameCap);
  const BuildResult r = build_frame(frame.data(), frame.size(), d, make_payload().data());
  std::vector<uint8_t> buf(len);
  const size_t hdr = static_cast<size_t>(r.payload_off) - r.l3_off;
  std::memcpy(buf.data(), frame.data() + r.l3_off, std::min(hdr, len));
  for (size_t i = hdr; i < len; ++i)
    buf[i] = static_cast<uint8_t>(i * 13 + 1);
  return buf;
}

template <typename CrcFn>
void icrc_bench(benchmark::State &state, CrcFn crc) {
  const size_t len = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> buf = icrc_input(len);
  uint8_t *p = buf.data();
  if (icrc_compute_with(crc, p, len, false) != icrc_compute(p, len, false)) {
    state.SkipWithError("CRC-32 implementations disagree");
    return;
  }
  for (auto _ : state) {
    ++p[kBthPsnLow];  // a different PSN every iteration: nothing can be hoisted
    benchmark::DoNotOptimize(p);
    uint32_t c = icrc_compute_with(crc, p, len, false);
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(len));
  state.SetItemsProcessed(state.iterations());
}

// ICRC over `len` bytes from the IP header, CRC by ISA-L (crc32_gzip_refl).
void BM_IcrcIsal(benchmark::State &state) {
  icrc_bench(state, crc32_isal);
}
BENCHMARK(BM_IcrcIsal)->Arg(64)->Arg(1024)->Arg(4096);

// The same ICRC (same masking, same call structure), CRC by the byte-at-a-time table.
void BM_IcrcTable(benchmark::State &state) {
  icrc_bench(state, crc32_table);
}
BENCHMARK(BM_IcrcTable)->Arg(64)->Arg(1024)->Arg(4096);

// The production entry point (icrc_compute), for the record next to BM_IcrcIsal.
void BM_IcrcCompute(benchmark::State &state) {
  const size_t len = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> buf = icrc_input(len);
  uint8_t *p = buf.data();
  for (auto _ : state) {
    ++p[kBthPsnLow];
    benchmark::DoNotOptimize(p);
    uint32_t c = icrc_compute(p, len, false);
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(len));
  state.SetItemsProcessed(state.iterations());
}
// 58 / 120: the regions of a 2-byte and a 64-byte RDMA WRITE ONLY (IPv4); 1080: 1024 bytes.
BENCHMARK(BM_IcrcCompute)->Arg(58)->Arg(64)->Arg(120)->Arg(200)->Arg(1024)->Arg(1080)->Arg(4096);

// One bare crc32_gzip_refl call (through crc32_isal), each seeded with the previous result:
// the per-call latency that makes the ICRC of a small frame worth a single call.
void BM_IsalCall(benchmark::State &state) {
  const size_t len = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> buf = icrc_input(std::max<size_t>(len, 1));
  uint8_t *p = buf.data();
  uint32_t c = 0;
  for (auto _ : state) {
    ++p[0];
    benchmark::DoNotOptimize(p);
    c = crc32_isal(c, p, len);
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(len));
}
BENCHMARK(BM_IsalCall)->Arg(8)->Arg(64)->Arg(120)->Arg(128)->Arg(256)->Arg(1024);

// build_frame: headers + payload copy + ICRC of a 64 B WRITE-only (IPv4, no VLAN, 138 bytes)
// into a reused buffer, PSN bumped every iteration.
void BM_BuildWriteOnly64(benchmark::State &state) {
  const PathInfo path = v4_path();
  PacketDesc d = write_only_desc(path, 0);
  const auto payload = make_payload();
  alignas(64) uint8_t buf[kFrameCap];
  uint32_t psn = 0;
  size_t frame_len = 0;
  for (auto _ : state) {
    d.f.psn = psn;
    psn = (psn + 1) & 0xFFFFFF;
    BuildResult r = build_frame(buf, sizeof(buf), d, payload.data());
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
    frame_len = r.frame_len;
  }
  if (frame_len != 138) state.SkipWithError("unexpected frame length");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * frame_len));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BuildWriteOnly64);

// The two-step path the transport uses: build_headers, payload memcpy, finalize_frame.
void BM_BuildHeadersFinalize64(benchmark::State &state) {
  const PathInfo path = v4_path();
  PacketDesc d = write_only_desc(path, 0);
  const auto payload = make_payload();
  alignas(64) uint8_t buf[kFrameCap];
  uint32_t psn = 0;
  size_t frame_len = 0;
  for (auto _ : state) {
    d.f.psn = psn;
    psn = (psn + 1) & 0xFFFFFF;
    BuildResult r = build_headers(buf, sizeof(buf), d);
    std::memcpy(buf + r.payload_off, payload.data(), kPayload);
    finalize_frame(buf, r);
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
    frame_len = r.frame_len;
  }
  if (frame_len != 138) state.SkipWithError("unexpected frame length");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * frame_len));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BuildHeadersFinalize64);

// build_headers alone (no payload, no ICRC): the header-writing share of the two above.
void BM_BuildHeadersOnly64(benchmark::State &state) {
  const PathInfo path = v4_path();
  PacketDesc d = write_only_desc(path, 0);
  alignas(64) uint8_t buf[kFrameCap];
  uint32_t psn = 0;
  for (auto _ : state) {
    d.f.psn = psn;
    psn = (psn + 1) & 0xFFFFFF;
    BuildResult r = build_headers(buf, sizeof(buf), d);
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BuildHeadersOnly64);

// kRing valid frames that differ in PSN (and so in ICRC).
struct FrameRing {
  alignas(64) uint8_t bytes[kRing][kFrameCap];
  size_t len = 0;
  FrameRing() {
    const PathInfo path = v4_path();
    const auto payload = make_payload();
    for (size_t i = 0; i < kRing; ++i) {
      const PacketDesc d = write_only_desc(path, static_cast<uint32_t>(1000 + i));
      len = build_frame(bytes[i], kFrameCap, d, payload.data()).frame_len;
    }
  }
};

void parse_bench(benchmark::State &state, uint32_t flags) {
  static const FrameRing ring;
  size_t i = 0;
  ParsedPacket p;
  for (auto _ : state) {
    const uint8_t *f = ring.bytes[i++ & (kRing - 1)];
    benchmark::DoNotOptimize(f);
    ParseError e = parse_frame(f, ring.len, &p, flags);
    benchmark::DoNotOptimize(e);
    benchmark::DoNotOptimize(p);
  }
  if (parse_frame(ring.bytes[0], ring.len, &p, flags) != ParseError::kOk ||
      p.payload_len != kPayload || ring.len != 138)
    state.SkipWithError("parse failed");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * ring.len));
  state.SetItemsProcessed(state.iterations());
}

// parse_frame with the ICRC verified (default flags; the UDP checksum is 0, so not computed).
void BM_ParseVerifyWriteOnly64(benchmark::State &state) {
  parse_bench(state, kParseDefault);
}
BENCHMARK(BM_ParseVerifyWriteOnly64);

// parse_frame without the ICRC check: the header walk alone.
void BM_ParseNoIcrc64(benchmark::State &state) {
  parse_bench(state, kParseDefault & ~uint32_t{kParseVerifyIcrc});
}
BENCHMARK(BM_ParseNoIcrc64);

// Baseline: copy the 138 frame bytes (length opaque to the compiler, so libc memcpy is called
// as in build_frame). Ratios against it survive a noisy, shared machine.
void BM_Memcpy138(benchmark::State &state) {
  static const FrameRing ring;
  alignas(64) uint8_t dst[kFrameCap];
  size_t len = ring.len;
  benchmark::DoNotOptimize(len);
  size_t i = 0;
  for (auto _ : state) {
    const uint8_t *f = ring.bytes[i++ & (kRing - 1)];
    benchmark::DoNotOptimize(f);
    std::memcpy(dst, f, len);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * len));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Memcpy138);

}  // namespace
}  // namespace uroce::bench

BENCHMARK_MAIN();
