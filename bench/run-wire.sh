#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds a release tree, runs bench/wire_bench with repetitions and prints the wire-layer table
# of doc/perf.md: median ns per benchmark, ratios to the same-run memcpy baseline, the
# table-CRC / ISA-L ratios, and PASS/MISS per target. Speed targets are reported, not enforced:
# the script fails only when the build or the benchmark binary fails.
#
#   bench/run-wire.sh [--native] [--builddir DIR] [--reps N] [--min-time S] [--json FILE]
#   bench/run-wire.sh --summarize FILE.json...
#
#   --native      configure with -Dnative=true (-march=native); default build dir build-bench-native
#   --builddir    build directory (default build-bench, or build-bench-native with --native)
#   --reps        --benchmark_repetitions (default 5); the table uses the median
#   --min-time    --benchmark_min_time in seconds (default: Google Benchmark's own, 0.5)
#   --json        also keep the raw Google Benchmark JSON here
#   --summarize   build and run nothing: print the table from JSON files kept with --json by
#                 several runs (each figure is the median of the per-run medians, with the
#                 range over the runs)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
native=false
builddir=""
reps=5
min_time=""
json_keep=""
summarize=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --native) native=true ;;
    --builddir) builddir=$2; shift ;;
    --reps) reps=$2; shift ;;
    --min-time) min_time=$2; shift ;;
    --json) json_keep=$2; shift ;;
    --summarize) shift; summarize=("$@"); break ;;
    -h | --help) sed -n '3,19p' "$0"; exit 0 ;;
    *) echo "run-wire.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
table() {
  python3 - "$@" <<'EOF'
import json, statistics, sys

# Per run (JSON file): the median and the CV over its repetitions, CPU time, in ns.
runs = []
for path in sys.argv[1:]:
    med, cv = {}, {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") != "aggregate":
            continue
        unit = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        if b["aggregate_name"] == "median":
            med[b["run_name"]] = b["cpu_time"] * unit
        elif b["aggregate_name"] == "cv":
            cv[b["run_name"]] = b["cpu_time"]  # a fraction, not scaled by the unit
    runs.append((med, cv))

names = set().union(*(m.keys() for m, _ in runs))
med = {k: statistics.median(m[k] for m, _ in runs if k in m) for k in names}
if len(runs) == 1:
    spread_head = "CV of the reps"
    spread = {k: f"{runs[0][1].get(k, 0) * 100:.1f}%" for k in names}
else:
    spread_head = f"range over {len(runs)} runs"
    spread = {k: f"{min(m[k] for m, _ in runs if k in m):.1f}–{max(m[k] for m, _ in runs if k in m):.1f}"
              for k in names}

base = med.get("BM_Memcpy138")
order = ["BM_IcrcIsal/64", "BM_IcrcIsal/1024", "BM_IcrcIsal/4096",
         "BM_IcrcTable/64", "BM_IcrcTable/1024", "BM_IcrcTable/4096",
         "BM_IcrcCompute/64", "BM_IcrcCompute/1024", "BM_IcrcCompute/4096",
         "BM_IsalCall/8", "BM_IsalCall/64", "BM_IsalCall/120", "BM_IsalCall/128",
         "BM_IsalCall/256", "BM_IsalCall/1024",
         "BM_BuildWriteOnly64", "BM_BuildHeadersFinalize64", "BM_BuildHeadersOnly64",
         "BM_ParseVerifyWriteOnly64", "BM_ParseNoIcrc64", "BM_Memcpy138"]
order += sorted(k for k in names if k not in order)

print(f"| benchmark | median ns (CPU) | {spread_head} | × BM_Memcpy138 |")
print("|---|---:|---:|---:|")
for k in order:
    if k in med:
        ratio = f"{med[k] / base:.1f}" if base else "-"
        print(f"| {k} | {med[k]:.1f} | {spread[k]} | {ratio} |")

print()
print("| target | measured | PASS/MISS |")
print("|---|---:|---|")
for n in (64, 1024, 4096):
    t, i = med.get(f"BM_IcrcTable/{n}"), med.get(f"BM_IcrcIsal/{n}")
    if t and i:
        goal, verdict = ("≥ 5×", "PASS" if t / i >= 5 else "MISS") if n == 4096 else ("-", "(info)")
        print(f"| ICRC table / ISA-L at {n} B, {goal} | {t / i:.1f}× | {verdict} |")
for k, what in (("BM_BuildWriteOnly64", "build + ICRC, 64 B WRITE-only (build_frame)"),
                ("BM_BuildHeadersFinalize64", "build + ICRC, 64 B WRITE-only (headers + finalize)"),
                ("BM_ParseVerifyWriteOnly64", "parse + ICRC verify, 64 B WRITE-only")):
    if k in med:
        print(f"| {what} ≤ 60 ns | {med[k]:.1f} ns | {'PASS' if med[k] <= 60 else 'MISS'} |")
EOF
}

if [[ ${#summarize[@]} -gt 0 ]]; then
  table "${summarize[@]}"
  exit 0
fi

if [[ -z "$builddir" ]]; then
  builddir=build-bench
  $native && builddir=build-bench-native
fi
cd "$here"

if [[ -d "$builddir" ]]; then
  meson configure "$builddir" -Dbuildtype=release -Dnative="$native" -Dbenchmarks=enabled >/dev/null
else
  meson setup "$builddir" -Dbuildtype=release -Dnative="$native" -Dbenchmarks=enabled >/dev/null
fi
ninja -C "$builddir" -j2 bench/wire_bench >/dev/null

json=$(mktemp /tmp/wire_bench.XXXXXX.json)
trap 'rm -f "$json"' EXIT
args=(--benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true
  --benchmark_out="$json" --benchmark_out_format=json)
[[ -n "$min_time" ]] && args+=(--benchmark_min_time="$min_time")

echo "# $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?') builddir=$builddir" \
  "native=$native reps=$reps load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $builddir/bench/wire_bench ${args[*]}"
"$builddir/bench/wire_bench" "${args[@]}" >/dev/null
[[ -n "$json_keep" ]] && cp "$json" "$json_keep"

table "$json"
