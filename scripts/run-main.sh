#!/usr/bin/env bash
# The main job, from nothing: install dependencies, build, then show the RoCE v2 wire layer at
# work — generate frames with uroce's builder, validate them with uroce-pcap-check, let tshark
# dissect one, and run the wire benchmarks.
# (When uroced and uroce-perf land, this becomes: the daemon on virtual ports and a perf run.)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. scripts/lib.sh

bash scripts/install-deps.sh
setup_build build-main -Dbuildtype=release
ninja -C build-main -j"$(jobs)"

out=build-main/main-job
rm -rf "$out"
mkdir -p "$out"

echo "== frames from lib/wire's builder (every opcode x IPv4/IPv6 x VLAN x sizes)"
build-main/test/app/gen_builder_pcap "$out" >/dev/null
build-main/apps/uroce-pcap-check/uroce-pcap-check "$out/builder.pcap"

echo
echo "== tshark's dissection of the first RDMA WRITE Only frame (independent dissector)"
first=$(tshark -r "$out/builder.pcap" -Y 'infiniband.bth.opcode == 10' -T fields -e frame.number | head -n 1)
tshark -r "$out/builder.pcap" -Y "frame.number == $first" -V -O infiniband,udp,ip | sed -n '/^Internet Protocol/,$p'

echo
echo "== wire benchmarks (Google Benchmark; see doc/perf.md for targets and baselines)"
build-main/bench/wire_bench --benchmark_min_time=0.2
