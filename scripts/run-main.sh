#!/usr/bin/env bash
# The main job, from nothing: install dependencies, build, then run uroce on virtual ports:
#   1. two uroced joined by net_memif (no RDMA NIC, no hugepages), uroced B capturing what it
#      sends and receives; uroce-perf write_bw and send_lat between them with --check; the
#      capture validated by uroce-pcap-check (ICRC, headers) and dissected by tshark;
#   2. B restarted without capture; uroce-perf runs between the daemons: write_bw with small
#      messages on 4 QPs, read_bw, send_lat, a write_bw sweep of every size (-a), and write_bw
#      --loopback on one daemon; uroce-stat.
#   3. every uroce-perf client wrote its results as JSON (--out_json_file, perftest's keys):
#      uroce-perf-plot turns them into PNG / SVG charts; the job prints where they are.
# Every process is stopped by PID; nothing is left behind. About a minute after the build.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. scripts/lib.sh

bash scripts/install-deps.sh
setup_build build-main -Dbuildtype=release
ninja -C build-main -j"$(jobs)"

B=build-main
out=$B/main-job
rm -rf "$out"
mkdir -p "$out" "$out/json"
out=$(cd "$out" && pwd)
ID=$$
PIDS=()
stop_all() {
  for p in "${PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  PIDS=()
}
trap 'stop_all; rm -rf /var/run/dpdk/uroce-main-$ID-*' EXIT

conf() {  # conf NAME ROLE LCORE IP [PCAP]
  cat >"$out/$1.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-main-$ID-$1 --log-level=*:notice
[daemon]
socket = $out/$1.sock
workers = $3
mbufs = 8191
idle_sleep_us = 50
pcap = ${5:-}
[port p0]
device = net_memif0,role=$2,socket=$out/memif.sock,id=0
ipv4 = $4/24
EOF
}
start() {  # start NAME: uroced NAME in the background, waits until it serves apps
  env -u LD_LIBRARY_PATH -u LD_PRELOAD $B/apps/uroced/uroced -c "$out/$1.conf" >"$out/uroced-$1.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 600); do
    grep -q "uroced: running" "$out/uroced-$1.log" && { sed -n '/^port p0: ethdev/p' "$out/uroced-$1.log"; return 0; }
    sleep 0.1
  done
  echo "uroced $1 did not start:"; tail "$out/uroced-$1.log"; exit 1
}
NJSON=0
perf() {  # perf ARGS...: server on B, client on A (127.0.0.1), the client's output shown
  local port=$((20000 + ID % 20000))
  NJSON=$((NJSON + 1))
  local json
  json=$out/json/$(printf '%02d' $NJSON)-$1.json
  timeout 120 $B/apps/uroce-perf/uroce-perf "$@" -d "$out/b.sock" -p $port >"$out/perf-server.log" 2>&1 &
  local spid=$!
  echo "\$ uroce-perf $* -d a.sock 127.0.0.1   (server: uroce-perf $1 -d b.sock)"
  timeout 120 $B/apps/uroce-perf/uroce-perf "$@" -d "$out/a.sock" -p $port \
    --out_json_file="$json" 127.0.0.1 | sed -n '/^ #bytes/,$p'
  wait $spid
}

echo "== two uroced on net_memif (A: memif server, lcore 0; B: memif client, lcore 1; B captures)"
conf a server 0 10.85.0.1
conf b client 1 10.85.0.2 "$out/b.pcap"
start a
start b
perf write_bw -s 3000 -q 2 -n 200 --check
perf send_lat -s 100 -n 50 --check
stop_all
echo
echo "== the capture of uroced B checked by uroce-pcap-check (every RoCE frame: headers, ICRC)"
$B/apps/uroce-pcap-check/uroce-pcap-check "$out/b.pcap" | tail -n 5
echo
echo "== tshark's dissection of the first RDMA WRITE First frame uroced B received"
first=$(tshark -r "$out/b.pcap" -Y 'infiniband.bth.opcode == 6' -T fields -e frame.number | head -n 1)
tshark -r "$out/b.pcap" -Y "frame.number == $first" -V -O infiniband,udp,ip | sed -n '/^Internet Protocol/,$p'

echo
echo "== uroce-perf between the two daemons (B without capture); a shared 2-core machine:"
echo "   two polling daemons and the polling client share the cores (doc/perf.md)"
conf b client 1 10.85.0.2
start a
start b
perf write_bw -s 64 -q 4 -t 256 -Q 32 -D 3
perf write_bw -s 65536 -n 2000
perf read_bw -s 4096 -n 5000
perf send_lat -s 2 -n 2000
echo
echo "== a sweep for the bandwidth chart: every size 2 B .. 8 MB, 20 messages each"
perf write_bw -a -n 20 -t 8 -Q 4
echo
echo "== same-port loopback: server and client in one process on uroced A (--loopback)"
echo "\$ uroce-perf write_bw --loopback -s 64 -n 20000 --check -d a.sock"
$B/apps/uroce-perf/uroce-perf write_bw --loopback -s 64 -n 20000 --check -d "$out/a.sock" \
  --out_json_file="$out/json/$(printf '%02d' $((NJSON + 1)))-write_bw-loopback.json" |
  sed -n '/^ #bytes/,$p'
echo
echo "== uroce-stat: uroced A's port and engine counters"
$B/apps/uroce-stat/uroce-stat -s "$out/a.sock" port.p0. engine.tx engine.rx engine.drop. |
  awk '$2 != 0'
stop_all
echo
echo "== charts of the uroce-perf results above (apps/uroce-perf/uroce-perf-plot)"
echo "   JSON (perftest's keys, one file per run): $out/json/"
apps/uroce-perf/uroce-perf-plot -o "$out/charts" "$out"/json/*.json | sed 's/^/   chart: /'
echo
echo "main job done: logs and the capture in $out, uroce-perf JSON in $out/json, charts $out/charts-*"
