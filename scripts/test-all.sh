#!/usr/bin/env bash
# Installs every dependency, builds, and runs every test of uroce:
#   1. release build: unit, app, fuzz-replay and integration tests;
#   2. ASan + UBSan build: the same tests;
#   3. libFuzzer targets (clang), a short run each.
# Ends with one line "N passed, N failed" counting every test that ran.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. scripts/lib.sh

FUZZ_SECONDS=${FUZZ_SECONDS:-20}

bash scripts/install-deps.sh || { echo "install-deps failed"; echo "0 passed, 1 failed"; exit 1; }

failed_stage=0
summary_files=()

run_stage() {  # run_stage NAME BUILD_DIR [meson options...]  (MESON_TEST_ARGS: extra test args)
  local name=$1 dir=$2; shift 2
  echo "=== $name: configure + build ($dir)"
  if ! setup_build "$dir" "$@" || ! ninja -C "$dir" -j"$(jobs)"; then
    echo "!!! $name: build failed"
    failed_stage=$((failed_stage + 1))
    return
  fi
  echo "=== $name: test"
  rm -f "$dir/meson-logs/testlog.json"
  meson test -C "$dir" --print-errorlogs --num-processes 2 \
    --timeout-multiplier "${TIMEOUT_MULTIPLIER:-3}" ${MESON_TEST_ARGS:-} || true
  summary_files+=("$dir/meson-logs/testlog.json")
}

# Suite busy (verbs_semantics_busy: the verbs suite with busy-polling daemons) and suite soak
# (uroced_soak, 60 s) run here, not under ASan (below).
run_stage "release" build-ci -Dbuildtype=release
# ASan/UBSan: every test again except the rxe interop suite (its time goes to the emulated
# guests, and the release run already drives the same daemon code paths under ASan in the
# integration suite); any sanitizer report fails the test.
MESON_TEST_ARGS="--no-suite interop --no-suite soak --no-suite busy" \
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  run_stage "asan+ubsan" build-ci-asan -Dbuildtype=debugoptimized \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbenchmarks=disabled

fuzz_pass=0 fuzz_fail=0
if [ -x scripts/fuzz.sh ]; then
  echo "=== fuzz: ${FUZZ_SECONDS}s per target"
  if bash scripts/fuzz.sh "$FUZZ_SECONDS"; then fuzz_pass=1; else fuzz_fail=1; fi
fi

python3 - "$failed_stage" "$fuzz_pass" "$fuzz_fail" "${summary_files[@]}" <<'PY'
import json, sys
failed_stage, fuzz_pass, fuzz_fail = map(int, sys.argv[1:4])
passed, failed, skipped = fuzz_pass, failed_stage + fuzz_fail, 0
for path in sys.argv[4:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        failed += 1
        print(f"missing test log {path}")
        continue
    for line in lines:
        if not line.strip():
            continue
        r = json.loads(line)
        res = r.get("result")
        if res in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif res == "SKIP":
            skipped += 1
            print(f"skipped: {r.get('name')}")
        else:
            failed += 1
            print(f"FAILED: {r.get('name')} ({res})")
print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
sys.exit(1 if failed or passed == 0 else 0)
PY
