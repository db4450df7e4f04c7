#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz) with clang and runs each for SECONDS (default 60).
# Exits non-zero if a target crashes, fails a check, leaks, times out or runs out of memory;
# the offending input is left in BUILD/fuzz-artifacts/.
#
#   scripts/fuzz.sh [SECONDS]
#   FUZZ_BUILD_DIR=...  build directory (default: build-fuzz at the repository root)
#   FUZZ_JOBS=N         ninja parallelism (default 2)
#   FUZZ_EXTRA_ARGS=... more libFuzzer flags (e.g. "-jobs=2 -workers=2"), after the defaults
set -euo pipefail

secs=${1:-60}
case "$secs" in
  '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
bdir=${FUZZ_BUILD_DIR:-$root/build-fuzz}
targets=(parse_frame_fuzz build_parse_fuzz ctl_fuzz engine_rx_fuzz config_fuzz wqe_fuzz cm_fuzz cm_ctl_fuzz)
declare -A seed_kind=([parse_frame_fuzz]=parse [build_parse_fuzz]=build [engine_rx_fuzz]=engine)
# Jumbo frames for the parser; the builder's input is a description, its payload a u16 length;
# a control message is at most 4096 bytes behind its mode byte; the engine's input is a few
# frame records (MTU 1024); a config file is text with a few overrides; WQE records are a kind
# byte and a 64..512-byte slot each (or 8 bytes: a ring index, a doorbell).
declare -A max_len=([parse_frame_fuzz]=9300 [build_parse_fuzz]=4096 [ctl_fuzz]=4200
                    [engine_rx_fuzz]=8192 [config_fuzz]=4096 [wqe_fuzz]=4096
                    [cm_fuzz]=2048 [cm_ctl_fuzz]=4096)

if [ ! -f "$bdir/build.ninja" ]; then
  CXX=clang++ CC=clang meson setup "$bdir" "$root" -Dfuzz=true -Db_lundef=false
elif [ "$(meson introspect --buildoptions "$bdir" |
          python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "fuzz"][0])')" != True ]; then
  meson configure "$bdir" -Dfuzz=true -Db_lundef=false
fi

# Only the fuzz targets: the rest of the tree is built and tested by the normal builds.
ninja -C "$bdir" -j"${FUZZ_JOBS:-2}" test/fuzz/fuzz_seed_gen test/fuzz/ctl_seed_gen \
  test/fuzz/config_seed_gen test/fuzz/wqe_seed_gen test/fuzz/cm_seed_gen test/fuzz/cm_ctl_seed_gen \
  "${targets[@]/#/test/fuzz/}"

status=0
for t in "${targets[@]}"; do
  seeds="$bdir/fuzz-seeds/$t"    # regenerated from the builder on every run
  corpus="$bdir/fuzz-corpus/$t"  # what libFuzzer finds, kept between runs
  artifacts="$bdir/fuzz-artifacts"
  mkdir -p "$corpus" "$artifacts"
  if [ "$t" = ctl_fuzz ]; then
    "$bdir/test/fuzz/ctl_seed_gen" "$seeds" "$bdir/fuzz-seeds/ctl.stamp"
  elif [ "$t" = config_fuzz ]; then
    "$bdir/test/fuzz/config_seed_gen" "$seeds" "$bdir/fuzz-seeds/config.stamp" \
      "$root/config/uroced.conf.sample"
  elif [ "$t" = wqe_fuzz ]; then
    "$bdir/test/fuzz/wqe_seed_gen" "$seeds" "$bdir/fuzz-seeds/wqe.stamp"
  elif [ "$t" = cm_fuzz ]; then
    "$bdir/test/fuzz/cm_seed_gen" "$seeds" "$bdir/fuzz-seeds/cm.stamp"
  elif [ "$t" = cm_ctl_fuzz ]; then
    "$bdir/test/fuzz/cm_ctl_seed_gen" "$seeds" "$bdir/fuzz-seeds/cm_ctl.stamp"
  else
    "$bdir/test/fuzz/fuzz_seed_gen" "${seed_kind[$t]}" "$seeds"
  fi
  echo "fuzz.sh: $t for ${secs}s"
  if ! ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1}" \
       UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
       "$bdir/test/fuzz/$t" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 \
         -max_len="${max_len[$t]}" -print_final_stats=1 \
         -artifact_prefix="$artifacts/$t-" ${FUZZ_EXTRA_ARGS:-} "$corpus" "$seeds"; then
    echo "fuzz.sh: $t FAILED; inputs in $artifacts/" >&2
    status=1
  fi
done
if [ "$status" = 0 ]; then echo "fuzz.sh: all targets ran ${secs}s without a failure"; fi
exit "$status"
