# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the rdma_cm integration scripts (cm_apps.sh, cm_ipv6.sh) after their daemons are up:
# cm_on runs an app on both shims (the drop-in librdmacm and the verbs shim), and the checks
# both scripts make. Needs CMSHIM, SHIM, SOCK_A, SOCK_B, WORK, PID_S and pass / fail.

cm_on() {  # cm_on SOCK CMD...
  local sock=$1
  shift
  env LD_LIBRARY_PATH="$CMSHIM:$SHIM" UROCE_SOCKET="$sock" nice -n "${APP_NICE:-10}" "$@"
}

# cmtime_check ADDR PORT CONNS LABEL: a cmtime server on A bound to ADDR, a client on B with
# CONNS connections set up and torn down at once; the client must exit 0 with its connect and
# disconnect rows, and the server (it serves until killed) must still run.
cmtime_check() {
  local addr=$1 port=$2 conns=$3 label=$4 rc_c rc_s=0 p
  cm_on "$SOCK_A" timeout 90 cmtime -b "$addr" -p "$port" -c "$conns" >"$WORK/cmtime-s.log" 2>&1 &
  PID_S=$!
  sleep 1
  cm_on "$SOCK_B" timeout 90 cmtime -s "$addr" -p "$port" -c "$conns" >"$WORK/cmtime-c.log" 2>&1
  rc_c=$?
  kill -0 "$PID_S" 2>/dev/null || rc_s=dead
  for p in $(pgrep -P "$PID_S") "$PID_S"; do kill -TERM "$p" 2>/dev/null; done  # timeout passes it on
  wait "$PID_S" 2>/dev/null
  PID_S=""
  if [ $rc_c -eq 0 ] && [ $rc_s = 0 ] && grep -q "^connect" "$WORK/cmtime-c.log" &&
    grep -q "^disconnect" "$WORK/cmtime-c.log"; then
    pass "$label: $(grep -E '^(connect|disconnect) ' "$WORK/cmtime-c.log" | tr -s ' ' | tr '\n' ';')"
  else
    fail "$label: client rc=$rc_c, server rc=$rc_s"
    tail -n 12 "$WORK/cmtime-c.log" "$WORK/cmtime-s.log"
  fi
}

# rejected_check ADDR PORT LABEL: an rping client on B to a port of ADDR nobody listens on is
# rejected at once (RDMA_CM_EVENT_REJECTED, not a timeout).
rejected_check() {
  local addr=$1 port=$2 label=$3 rc
  cm_on "$SOCK_B" timeout 30 rping -c -a "$addr" -p "$port" -C 1 -v >"$WORK/rping-rej.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "RDMA_CM_EVENT_REJECTED" "$WORK/rping-rej.log"; then
    pass "$label: RDMA_CM_EVENT_REJECTED (rc=$rc)"
  else
    fail "$label: rc=$rc, $(tail -3 "$WORK/rping-rej.log")"
  fi
}
