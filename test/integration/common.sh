# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the integration scripts (test/integration, test/verbs/two_uroced.sh): what each of
# them needs before it starts anything.
#   need_root WHY          exit 1 with a clear message unless we are root
#   need_tools TOOL...     exit 1 naming the first tool that is not installed
#   fail MSG / pass MSG    one result line each; fail counts in FAILS
#   stop_pid PID SIGNAL [SECONDS]  signal, wait up to SECONDS (30), then SIGKILL (and fail);
#                          returns the process's exit status
# Every wait is bounded; processes are only ever stopped by the PID their script started.

FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "FAIL: this test needs root ($1); CI runs as root"
    exit 1
  fi
}

need_tools() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null || { echo "FAIL: '$t' not found (scripts/install-deps.sh installs it)"; exit 1; }
  done
}

stop_pid() {
  local pid=$1 secs=${3:-30}
  [ -n "$pid" ] || return 0
  kill -"$2" "$pid" 2>/dev/null
  for _ in $(seq $((secs * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    fail "pid $pid still running $secs s after SIG$2: killing it"
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid"
}

# stop_uroced N PATTERN: SIGTERM the daemon whose PID is in PID_N (N = a, b, ...) and whose log
# is $WORK/uroced-N.log; passes on exit 0 with "uroced: stopped" logged, showing the log's line
# matching PATTERN (its exit counters). Clears PID_N.
stop_uroced() {
  local d=$1 pid_var="PID_${1^^}" rc
  stop_pid "${!pid_var}" TERM
  rc=$?
  eval "$pid_var="
  if [ $rc -eq 0 ] && grep -q "uroced: stopped" "$WORK/uroced-$d.log"; then
    pass "uroced $d: SIGTERM, exit 0, $(grep "$2" "$WORK/uroced-$d.log")"
  else
    fail "uroced $d: exit $rc"
  fi
}

# start_uroced UROCED CONF LOG: starts uroced in the background (without LD_LIBRARY_PATH /
# LD_PRELOAD: it refuses a non-system libibverbs) and waits up to 60 s for "uroced: running".
# Sets UROCED_PID (also when it did not come up, so that the caller's cleanup stops it);
# returns 1 if it exited or did not come up.
start_uroced() {
  env -u LD_LIBRARY_PATH -u LD_PRELOAD "$1" -c "$2" >"$3" 2>&1 &
  UROCED_PID=$!
  for _ in $(seq 600); do
    grep -q "uroced: running" "$3" 2>/dev/null && return 0
    kill -0 "$UROCED_PID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# verbs_app_run APP SOCK_A SOCK_B WHAT: `APP run SOCK_A SOCK_B` (verbs_app: every operation
# between a context on each socket, data checked; at most 300 s), its output shown indented;
# passes as WHAT when it exits 0 with "0 failure(s)".
verbs_app_run() {
  local out rc
  out=$(timeout 300 "$1" run "$2" "$3" 2>&1)
  rc=$?
  echo "$out" | sed 's/^/  app: /'
  if [ $rc -eq 0 ] && grep -q "^0 failure(s)" <<<"$out"; then
    pass "$4"
  else
    fail "$4: verbs_app run exit $rc"
  fi
}
