#!/usr/bin/env bash
# Fuzzing depth (issue 19 item 5, doc/security.md "Fuzzing depth"): runs libFuzzer targets one
# at a time at nice 19 (FUZZ_NICE) for SECONDS each, starting from the corpus kept in the tree
# (test/fuzz/corpus/TARGET) and the generated seeds, and prints per target: executions, the
# CPU seconds it got (user + sys, /usr/bin/time), executions per CPU-second, the CPU time
# 10^7 executions would take at that rate, coverage (cov / ft) and corpus size from
# -print_final_stats. A failure (crash, sanitizer report, leak, timeout) stops with the input in
# BUILD/fuzz-artifacts/. The corpus a run grows stays in BUILD/fuzz-depth/TARGET; to keep it
# minimised: TARGET -merge=1 test/fuzz/corpus/TARGET BUILD/fuzz-depth/TARGET.
# Needs the targets built (scripts/fuzz.sh builds them in build-fuzz).
#
#   scripts/fuzz-depth.sh SECONDS TARGET...     (FUZZ_BUILD_DIR: default build-fuzz)
#   FUZZ_RUNS=N    stop a target after N executions (-runs=N), SECONDS still bounds it: the
#                  issue's depth is FUZZ_RUNS=10000000
#   FUZZ_NICE=N    the fuzzer's niceness (default 19)
set -uo pipefail

secs=${1:?usage: $0 SECONDS TARGET...}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
bdir=${FUZZ_BUILD_DIR:-$root/build-fuzz}
declare -A max_len=([parse_frame_fuzz]=9300 [build_parse_fuzz]=4096 [ctl_fuzz]=4200
                    [engine_rx_fuzz]=8192 [config_fuzz]=4096 [wqe_fuzz]=4096 [cm_fuzz]=2048
                    [cm_ctl_fuzz]=4096)
declare -A seed_kind=([parse_frame_fuzz]=parse [build_parse_fuzz]=build [engine_rx_fuzz]=engine)
# Per-target ASan options. A 64 MiB quarantine (default 256) for the targets that free ~100 KB
# per input: a block freed in one input is still poisoned hundreds of inputs later, so a use
# after free within an input (or the next) is still reported, and the allocator reuses memory
# that is mapped already instead of faulting in fresh pages (doc/security.md, "Fuzzing depth").
declare -A asan_extra=([engine_rx_fuzz]=quarantine_size_mb=64 [cm_ctl_fuzz]=quarantine_size_mb=64)

echo "fuzz-depth: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), ${secs}s per target"
for t in "$@"; do
  bin=$bdir/test/fuzz/$t
  [ -x "$bin" ] || { echo "$t: not built ($bin)"; continue; }
  seeds=$bdir/fuzz-seeds/$t corpus=$bdir/fuzz-depth/$t
  mkdir -p "$corpus" "$bdir/fuzz-artifacts"
  case $t in
    ctl_fuzz) "$bdir/test/fuzz/ctl_seed_gen" "$seeds" "$bdir/fuzz-seeds/ctl.stamp" ;;
    config_fuzz) "$bdir/test/fuzz/config_seed_gen" "$seeds" "$bdir/fuzz-seeds/config.stamp" \
                   "$root/config/uroced.conf.sample" ;;
    wqe_fuzz) "$bdir/test/fuzz/wqe_seed_gen" "$seeds" "$bdir/fuzz-seeds/wqe.stamp" ;;
    cm_fuzz) "$bdir/test/fuzz/cm_seed_gen" "$seeds" "$bdir/fuzz-seeds/cm.stamp" ;;
    cm_ctl_fuzz) "$bdir/test/fuzz/cm_ctl_seed_gen" "$seeds" "$bdir/fuzz-seeds/cm_ctl.stamp" ;;
    *) "$bdir/test/fuzz/fuzz_seed_gen" "${seed_kind[$t]}" "$seeds" ;;
  esac >/dev/null
  [ -d "$root/test/fuzz/corpus/$t" ] && cp -n "$root/test/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null
  log=$bdir/fuzz-depth/$t.log
  ASAN_OPTIONS=abort_on_error=1${asan_extra[$t]:+:${asan_extra[$t]}} UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    /usr/bin/time -f "cpu %U %S" -o "$log.time" nice -n "${FUZZ_NICE:-19}" "$bin" -max_total_time="$secs" \
    -timeout=600 -rss_limit_mb=2048 -max_len="${max_len[$t]:-4096}" -print_final_stats=1 \
    -artifact_prefix="$bdir/fuzz-artifacts/$t-" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} \
    "$corpus" "$seeds" >"$log" 2>&1
  rc=$?
  execs=$(awk '/stat::number_of_executed_units/ { print $2 }' "$log")
  cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -E 's/.*cov: ([0-9]+).*ft: ([0-9]+).*corp: ([0-9]+)\/([^ ]+).*/cov \1 ft \2 corpus \3 (\4)/')
  read -r _ u s <"$log.time"
  awk -v t="$t" -v e="${execs:-0}" -v u="$u" -v s="$s" -v c="$cov" -v rc="$rc" 'BEGIN {
    cpu = u + s; r = cpu > 0 ? e / cpu : 0
    need = r > 0 ? 1e7 / r : 0
    printf "%s: exit %d, %d executions in %.1f CPU-s: %.0f exec/CPU-s; 10^7 needs %.0f CPU-s; %s\n", t, rc, e, cpu, r, need, c }'
  [ "$rc" -eq 0 ] || { echo "$t FAILED: see $log"; exit 1; }
done
