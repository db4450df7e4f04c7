#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs rdma-core 44's own test suite (pyverbs, shipped gzip-compressed by Debian's
# python3-pyverbs under /usr/share/doc/rdma-core/tests) over the shim against two uroced joined
# by net_memif. The suite is copied to the scratch directory and unpacked at test time (never
# kept in our tree) and run with /usr/bin/python3 (the Debian python that sees pyverbs), on
# device uroce0 (daemon A), GID index 1. Fails on any failure or error, or when unittest's
# summary line is missing; prints the counts and every skip reason (doc/verbs.md classifies
# them).
# Usage: pyverbs.sh PATH/TO/uroced SHIM_DIR [extra run_tests.py args, e.g. a test name]
# PYVERBS_LOG=FILE keeps the suite's verbose output.
set -uo pipefail

UROCED=${1:?usage: $0 UROCED SHIM_DIR}
SHIM=${2:?usage: $0 UROCED SHIM_DIR}
shift 2
SUITE=/usr/share/doc/rdma-core/tests
PY=/usr/bin/python3
for t in ibv_devinfo timeout gunzip; do
  command -v $t >/dev/null || { echo "FAIL: '$t' not found (scripts/install-deps.sh installs it)"; exit 1; }
done
[ -e "$SUITE/run_tests.py" ] || { echo "FAIL: no $SUITE/run_tests.py (install python3-pyverbs: scripts/install-deps.sh)"; exit 1; }
$PY -c 'import pyverbs' 2>/dev/null || { echo "FAIL: $PY cannot import pyverbs (python3-pyverbs)"; exit 1; }
NAME=pyv
IP_NET=10.86.0
# shellcheck source=two_uroced.sh
. "$(dirname "$0")/two_uroced.sh"

cp -r "$SUITE" "$WORK/tests"
find "$WORK/tests" -name '*.gz' -exec gunzip -f {} +
LOG=$WORK/pyverbs.log
# -v prints one line per test (name ... ok / skipped 'reason' / FAIL / ERROR).
on "$SOCK_A" timeout -k 10 "${PYVERBS_TIMEOUT:-420}" $PY "$WORK/tests/run_tests.py" -v \
  --dev uroce0 --gid 1 "$@" >"$LOG" 2>&1
rc=$?
[ -n "${PYVERBS_LOG:-}" ] && cp "$LOG" "$PYVERBS_LOG"
# unittest's summary: "Ran N tests in Xs" then "OK (skipped=S)" or
# "FAILED (failures=F, errors=E, skipped=S)".
ran=$(sed -n 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$LOG" | tail -1)
status=$(grep -E '^(OK|FAILED)( \(|$)' "$LOG" | tail -1)
num() { echo "$status" | sed -n "s/.*$1=\([0-9]*\).*/\1/p" | grep . || echo 0; }
failures=$(num failures)
errors=$(num errors)
skipped=$(num skipped)
echo "--- skip reasons (count, reason)"
grep -oE "skipped ('.*'|\".*\")$" "$LOG" | sort | uniq -c | sort -rn
if [ -z "$ran" ] || [ -z "$status" ]; then
  fail "no unittest summary (exit $rc, timeout 124 = hung); last lines:"
  tail -30 "$LOG"
else
  passed=$((ran - failures - errors - skipped))
  echo "pyverbs: ran $ran, passed $passed, failures $failures, errors $errors, skipped $skipped (exit $rc)"
  if [ "$failures" -ne 0 ] || [ "$errors" -ne 0 ] || [ $rc -ne 0 ]; then
    fail "pyverbs suite: $failures failure(s), $errors error(s), exit $rc"
    sed -n '/^=\{20,\}$/,$p' "$LOG" | head -200
    grep -E '\.\.\. (FAIL|ERROR)$' "$LOG"
  else
    pass "pyverbs suite: $passed passed, $skipped skipped"
  fi
fi
kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
