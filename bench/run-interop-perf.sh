#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rxe interop measurement of doc/perf.md (issue 6): under the same emulated guests
# (test/interop/rig: qemu TCG, Linux rxe, perftest), rxe<->rxe against uroce<->rxe for
# ib_write_bw and ib_write_lat, in ONE run, interleaved.
#
#   bench/run-interop-perf.sh [--builddir DIR] [--rig DIR] [--image DIR] [--reps N]
#                             [--bw-iters N] [--lat-iters N] [--nice N] [--bw-client]
#                             [--tests "bw lat"] [--idle-sleep US]
#
# One network namespace (uroce-iperf-PID) made with the rig's netns.sh: bridge br0,
# tap0 (guest A, 10.77.0.11) and tap1 (guest B, 10.77.0.12), plus a veth whose bridge end
# is uro0br and whose other end uro0 is driven by uroced (net_af_packet, 10.77.0.2). Both guests
# are booted once and stay up for the whole run, so every measurement has the same two qemu
# processes on the host. The steps, each REPS times, interleaved (rep 1: all modes, rep 2: all
# modes, ...):
#   rxe-rxe      guest A server  <-> guest B client
#   uroce-srv    uroce server    <-> guest B client   (uroce replaces guest A)
#   uroce-cli    guest A server  <-> uroce client     (uroce replaces guest B)
# for ib_write_bw -x 1 -F -s 65536 -n BW_ITERS and ib_write_lat -x 1 -F -s 64 -n LAT_ITERS
# (guests add -d rxe0). uroce's side is the UNMODIFIED host perftest through the verbs shim
# (LD_LIBRARY_PATH=BUILD/drivers/verbs UROCE_SOCKET=...), niced (--nice, default 10) like the
# interop suite; uroced naps --idle-sleep us (default 200, as in the interop suite) when idle.
# ib_write_bw with uroce as client is left out unless --bw-client is given
# (doc/interop.md: it ends in retry exceeded against the TCG guest).
# The result row is always taken from the CLIENT (requester) side. Prints every step (result,
# load average when it started), then a table with the medians over the reps and the ratio
# uroce<->rxe / rxe<->rxe. Nothing is asserted; the script fails only if the setup fails.
# Needs root, qemu-system-x86_64, the guest image (--image, default $UROCE_INTEROP_CACHE or
# /tmp/uroce-interop-image as the interop suite; RIG/build-image.sh builds it when missing or
# made by another version) and perftest on the host. Everything it creates carries its PID and
# is removed on exit.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$here/build
RIG=$here/test/interop/rig
IMAGE=${UROCE_INTEROP_CACHE:-/tmp/uroce-interop-image}
REPS=5
BW_ITERS=500
LAT_ITERS=1000
NICE=10
IDLE=200
BW_CLIENT=0
TESTS="bw lat"
while [ $# -gt 0 ]; do
  case "$1" in
    --builddir) BUILD=$(cd "$2" && pwd); shift ;;
    --rig) RIG=$2; shift ;;
    --image | --cache) IMAGE=$2; shift ;;   # --cache: the option's old name
    --reps) REPS=$2; shift ;;
    --bw-iters) BW_ITERS=$2; shift ;;
    --lat-iters) LAT_ITERS=$2; shift ;;
    --nice) NICE=$2; shift ;;
    --idle-sleep) IDLE=$2; shift ;;
    --bw-client) BW_CLIENT=1 ;;
    --tests) TESTS=$2; shift ;;
    -h | --help) sed -n '3,32p' "$0"; exit 0 ;;
    *) echo "run-interop-perf.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
for v in REPS BW_ITERS LAT_ITERS NICE IDLE; do
  case ${!v} in '' | *[!0-9]*) echo "run-interop-perf.sh: $v '${!v}' is not a number" >&2; exit 2 ;; esac
done
RIG=$(cd "$RIG" 2>/dev/null && pwd) || { echo "run-interop-perf.sh: no rig directory $RIG" >&2; exit 1; }
UROCED=$BUILD/apps/uroced/uroced
STAT=$BUILD/apps/uroce-stat/uroce-stat
SHIM=$BUILD/drivers/verbs
for b in "$UROCED" "$STAT" "$SHIM/libibverbs.so.1"; do
  [ -e "$b" ] || { echo "run-interop-perf.sh: $b is not built (ninja -C $BUILD)" >&2; exit 1; }
done
for t in ip qemu-system-x86_64 timeout python3 ib_write_bw ib_write_lat; do
  command -v $t >/dev/null || { echo "run-interop-perf.sh: '$t' not found (scripts/install-deps.sh)" >&2; exit 1; }
done
for f in build-image.sh netns.sh boot-guest.sh; do
  [ -x "$RIG/$f" ] || { echo "run-interop-perf.sh: $RIG/$f not found" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run-interop-perf.sh: needs root (netns, taps, qemu)" >&2; exit 1; }

ID=$$
NS=uroce-iperf-$ID
WORK=$(mktemp -d /tmp/uroce-iperf-XXXXXX)
A_IP=10.77.0.11 B_IP=10.77.0.12 UROCE_IP=10.77.0.2 HOST_IP=10.77.0.1
STEP_T=120   # seconds for one tool run
UPID="" APID="" BPID="" NETUP=0

stop_pid() {  # stop_pid PID SECONDS: TERM, bounded wait, KILL
  local pid=$1 secs=$2
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq $((secs * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}
stop_guest() {  # boot-guest.sh passes TERM on to its qemu and waits for it
  [ -n "$1" ] && stop_pid "$1" 10
}
cleanup() {
  stop_guest "$APID"
  stop_guest "$BPID"
  [ -n "$UPID" ] && stop_pid "$UPID" 20
  [ "$NETUP" = 1 ] && "$RIG/netns.sh" down "$NS" >/dev/null 2>&1
  rm -rf "/var/run/dpdk/uroce-iperf-$ID"
  echo "work directory (logs): $WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# build-image.sh returns at once when IMAGE holds an image of its current version.
timeout 900 env -u LD_LIBRARY_PATH -u LD_PRELOAD "$RIG/build-image.sh" "$IMAGE" >"$WORK/build-image.log" 2>&1 ||
  { tail -20 "$WORK/build-image.log"; echo "run-interop-perf.sh: image build failed" >&2; exit 1; }

# --- the steps: MODE TOOL, REPS times
BW="ib_write_bw -x 1 -F -s 65536 -n $BW_ITERS"
LAT="ib_write_lat -x 1 -F -s 64 -n $LAT_ITERS"
STEPS=()
for r in $(seq "$REPS"); do
  for t in $TESTS; do
    STEPS+=("$r rxe-rxe $t" "$r uroce-srv $t")
    [ "$t" = lat ] || [ "$BW_CLIENT" = 1 ] && STEPS+=("$r uroce-cli $t")
  done
done
tool() { case $1 in bw) echo "$BW" ;; lat) echo "$LAT" ;; esac; }
gtool() { local t; t=$(tool "$1"); echo "${t%% *} -d rxe0 ${t#* }"; }  # the guest's, with -d

# Guest scripts. A serves (rxe-rxe, uroce-cli), B is the client (rxe-rxe, uroce-srv). Step k uses
# TCP port 18515 + k, so a client's retry can never meet another step's server. Every tool is
# bounded by `timeout`; a client retries only while nobody listens yet ("Couldn't connect").
guest_head() {
  cat <<EOF
rx() {
  for i in \$(seq 300); do
    out=\$(timeout $STEP_T "\$@" 2>&1); r=\$?; echo "\$out"
    echo "\$out" | grep -q "Couldn't connect" || return \$r
    sleep 0.5
  done
  return 1
}
step() {
  k=\$1; shift; echo "== STEP \$k begin: \$*"; "\$@"; echo "== STEP \$k exit \$?"
  rdma statistic show link rxe0/1   # rxe's counters after the step (retransmits, NAKs)
}
# rxe resolves uroced's MAC at modify_qp(RTR): resolve it first (uroced answers ARP).
ping -c 3 -W 2 $UROCE_IP >/dev/null 2>&1
ping -c 2 -W 2 $A_IP >/dev/null 2>&1
ping -c 2 -W 2 $B_IP >/dev/null 2>&1
rdma statistic show link rxe0/1
echo "== READY"
EOF
}
# Both guests stay up until the host's last step is over (the host creates done in each guest's
# 9p share, boot-guest.sh -d WORK/A-share and WORK/B-share, seen as /share/done in the guest), so
# every step runs with the same two qemu processes on the host.
guest_tail() {
  echo "for i in \$(seq $((STEP_T * 2))); do [ -e /share/done ] && break; sleep 1; done"
  echo "exit 0"
}
{
  guest_head
  k=0
  for s in "${STEPS[@]}"; do
    set -- $s
    case $2 in rxe-rxe | uroce-cli) echo "step $k timeout $STEP_T $(gtool "$3") -p $((18515 + k))" ;; esac
    k=$((k + 1))
  done
  guest_tail
} >"$WORK/A.sh"
{
  guest_head
  k=0
  for s in "${STEPS[@]}"; do
    set -- $s
    case $2 in
      rxe-rxe) echo "step $k rx $(gtool "$3") -p $((18515 + k)) $A_IP" ;;
      uroce-srv) echo "step $k rx $(gtool "$3") -p $((18515 + k)) $HOST_IP" ;;
    esac
    k=$((k + 1))
  done
  guest_tail
} >"$WORK/B.sh"

# --- network: the rig's bridge with two taps, and uroced's veth
"$RIG/netns.sh" up "$NS" 1500 2 >"$WORK/net.log" 2>&1 || { cat "$WORK/net.log"; exit 1; }
NETUP=1
X="ip -n $NS"
$X link add uro0 type veth peer name uro0br &&
  ip netns exec "$NS" sysctl -qw net.ipv6.conf.uro0.disable_ipv6=1 &&
  $X link set uro0 mtu 1500 up &&
  $X link set uro0br mtu 1500 master br0 up || { echo "veth setup failed" >&2; exit 1; }
cat >"$WORK/uroced.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-iperf-$ID --log-level=*:notice
[daemon]
socket = $WORK/uroced.sock
idle_sleep_us = $IDLE
[port p0]
device = net_af_packet0,iface=uro0
mtu = 1500
ipv4 = $UROCE_IP/24
EOF
ip netns exec "$NS" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced.conf" \
  >"$WORK/uroced.log" 2>&1 &
UPID=$!
for _ in $(seq 600); do
  [ -S "$WORK/uroced.sock" ] && break
  kill -0 "$UPID" 2>/dev/null || break
  sleep 0.1
done
[ -S "$WORK/uroced.sock" ] || { cat "$WORK/uroced.log"; echo "uroced did not start" >&2; exit 1; }

GUEST_T=$((${#STEPS[@]} * STEP_T + 120))
# boot-guest.sh runs qemu with the guest's memory barriers kept (-smp 1,maxcpus=2,
# doc/interop.md); without the shim (qemu links libibverbs), as the interop suite.
env -u LD_LIBRARY_PATH -u LD_PRELOAD "$RIG/boot-guest.sh" -k "$IMAGE" -n "$NS" -t tap0 -a "$A_IP/24" \
  -m 1500 -d "$WORK/A-share" -s "$WORK/A.sh" -T "$GUEST_T" >"$WORK/A.log" 2>&1 &
APID=$!
env -u LD_LIBRARY_PATH -u LD_PRELOAD "$RIG/boot-guest.sh" -k "$IMAGE" -n "$NS" -t tap1 -a "$B_IP/24" \
  -m 1500 -d "$WORK/B-share" -s "$WORK/B.sh" -T "$GUEST_T" >"$WORK/B.log" 2>&1 &
BPID=$!

# The host side runs the uroce steps in order; it waits (bounded) for a guest step to end before
# the next step so that the load average it records belongs to that step.
wait_marker() {  # wait_marker LOG TEXT SECONDS
  for _ in $(seq $(($3 * 5))); do
    grep -qF "$2" "$1" 2>/dev/null && return 0
    kill -0 "$APID" 2>/dev/null || kill -0 "$BPID" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
engine() { ip netns exec "$NS" timeout 30 "$STAT" -s "$WORK/uroced.sock" engine. 2>/dev/null |
  awk -v k="$1" '$1 == k {print $2}'; }
host_tool() {  # host_tool K 'TOOL ARGS' [SERVER_IP]: through the shim; a client retries on "Couldn't connect"
  local k=$1 cmd=$2 ip=${3:-} out rc
  for _ in $(seq 300); do
    out=$(ip netns exec "$NS" timeout "$STEP_T" env LD_LIBRARY_PATH="$SHIM" \
      UROCE_SOCKET="$WORK/uroced.sock" nice -n "$NICE" $cmd -p $((18515 + k)) $ip 2>&1)
    rc=$?
    [ -n "$ip" ] && grep -q "Couldn't connect" <<<"$out" && kill -0 "$APID" 2>/dev/null && {
      sleep 0.5
      continue
    }
    break
  done
  { echo "== STEP $k begin: $cmd -p $((18515 + k)) $ip"; echo "$out"; echo "== STEP $k exit $rc"; } >>"$WORK/host.log"
}

echo "run-interop-perf: $(date -u '+%F %T') UTC, $(nproc) CPUs, steps: ${#STEPS[@]}, work $WORK"
echo "guests: qemu TCG, 1 vCPU / 512 MiB each, Ethernet MTU 1500 (IB MTU 1024); uroced af_packet, idle_sleep_us $IDLE"
echo "bw:  $BW    lat: $LAT    (guests add -d rxe0; host tools niced $NICE)"
: >"$WORK/host.log"
: >"$WORK/steps.txt"
k=0
for s in "${STEPS[@]}"; do
  set -- $s
  rep=$1 mode=$2 t=$3
  # the previous step must be over on the guest(s) that took part in it (host steps are synchronous)
  if [ "$k" -eq 0 ]; then
    wait_marker "$WORK/A.log" "== READY" 300
    wait_marker "$WORK/B.log" "== READY" 300
  else
    case $prev in rxe-rxe | uroce-cli) wait_marker "$WORK/A.log" "== STEP $((k - 1)) exit" "$STEP_T" ;; esac
    case $prev in rxe-rxe | uroce-srv) wait_marker "$WORK/B.log" "== STEP $((k - 1)) exit" "$STEP_T" ;; esac
  fi
  load=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(date +%s.%N)
  rx0=$(engine engine.rx_pkts) tx0=$(engine engine.tx_pkts)
  case $mode in
    rxe-rxe) wait_marker "$WORK/B.log" "== STEP $k exit" "$STEP_T" ;;
    uroce-srv) host_tool "$k" "$(tool "$t")" ;;
    uroce-cli) host_tool "$k" "$(tool "$t")" "$A_IP" ;;
  esac
  rx1=$(engine engine.rx_pkts) tx1=$(engine engine.tx_pkts)
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  echo "$k $rep $mode $t $load $secs $((${rx1:-0} - ${rx0:-0})) $((${tx1:-0} - ${tx0:-0}))" >>"$WORK/steps.txt"
  echo "step $k: rep $rep $mode $t (load $load, $secs s)"
  prev=$mode
  k=$((k + 1))
done
touch "$WORK/A-share/done" "$WORK/B-share/done"
for _ in $(seq 600); do kill -0 "$APID" 2>/dev/null || kill -0 "$BPID" 2>/dev/null || break; sleep 0.2; done
stop_guest "$APID"; APID=""
stop_guest "$BPID"; BPID=""

ip netns exec "$NS" timeout 30 "$STAT" -s "$WORK/uroced.sock" engine. >"$WORK/stat-end.txt" 2>&1
echo "uroced at the end: $(awk '$2 != 0 && /^engine\.(drop|parse_error|tx_backpressure|acks_coalesced)/ {printf "%s %s  ", $1, $2}' "$WORK/stat-end.txt")"
python3 - "$WORK" "$BW" "$LAT" <<'PY'
import re, statistics, sys
work, bw_cmd, lat_cmd = sys.argv[1:4]

def rxe_deltas(path):
    """STEP k -> {counter: increase} from the rxe counters each guest prints after its steps."""
    out, last, k = {}, None, None
    for line in open(path, errors="replace"):
        m = re.match(r"== STEP (\d+) exit", line)
        if m:
            k = int(m.group(1))
            continue
        if line.startswith("link rxe0/1 "):
            f = line.split()[2:]
            c = {f[i]: int(f[i + 1]) for i in range(0, len(f) - 1, 2)}
            if last is not None and k is not None:
                out[k] = {n: c[n] - last.get(n, 0) for n in c}
            last, k = c, None
    return out

def steps_of(path):
    """STEP k -> (exit status, output lines) from a guest serial log or the host log."""
    out, cur, lines = {}, None, []
    for line in open(path, errors="replace"):
        line = line.rstrip("\r\n")
        m = re.match(r"== STEP (\d+) begin", line)
        if m:
            cur, lines = int(m.group(1)), []
            continue
        m = re.match(r"== STEP (\d+) exit (\d+)", line)
        if m and cur is not None:
            out[cur] = (int(m.group(2)), lines)
            cur = None
            continue
        if cur is not None:
            lines.append(line)
    return out

logs = {n: steps_of(f"{work}/{n}.log") for n in ("A", "B", "host")}
rxe = {n: rxe_deltas(f"{work}/{n}.log") for n in ("A", "B")}
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)")

def result(kind, rc_lines):
    if rc_lines is None:
        return None, "no output"
    rc, lines = rc_lines
    for l in lines:
        m = ROW.match(l)
        if m:
            f = l.split()
            if kind == "bw":   # bytes iters BW_peak BW_average MsgRate  (MB/s)
                return float(f[3]), None
            return (float(f[4]), float(f[5]), float(f[2])), None   # t_typical, t_avg, t_min
    err = next((l.strip() for l in lines if re.search(r"fail|error|Couldn|exceed", l, re.I)), "")
    return None, f"exit {rc} {err[:70]}"

res = {}
print("\nrxe retr/dup: rxe requester retries (completer_retry_err) / duplicate requests rxe's responder saw,")
print("summed over the guests that took part in the step")
print("\nstep rep mode       test  load   secs  uroce rx/tx pkts  rxe retr/dup  client result")
for line in open(f"{work}/steps.txt"):
    k, rep, mode, t, load, secs, rx, tx = line.split()
    k = int(k)
    client = {"rxe-rxe": "B", "uroce-srv": "B", "uroce-cli": "host"}[mode]
    v, err = result(t, logs[client].get(k))
    if v is None:  # say which side failed: the server's error when it has one
        server = {"rxe-rxe": "A", "uroce-srv": "host", "uroce-cli": "A"}[mode]
        sv, serr = result(t, logs[server].get(k))
        err = f"client: {err}; server: {serr or 'finished'}"
    res.setdefault((t, mode), []).append((v, float(load)))
    if v is None:
        txt = "FAILED: " + err
    elif t == "bw":
        txt = f"BW average {v:.2f} MB/s"
    else:
        txt = f"t_typical {v[0]:.1f} us, t_avg {v[1]:.1f} us, t_min {v[2]:.1f} us"
    pk = f"{rx}/{tx}" if mode != "rxe-rxe" else "-"
    d = [rxe[g].get(k, {}) for g in ("A", "B")]
    rd = f"{sum(x.get('completer_retry_err', 0) for x in d)}/{sum(x.get('duplicate_request', 0) for x in d)}"
    print(f"{k:4} {rep:>3} {mode:10} {t:4} {load:>5} {secs:>6}  {pk:>16}  {rd:>12}  {txt}")

print("\n| test | pair (client side measures) | runs ok | median | ratio uroce/rxe | load during the runs |")
print("|---|---|---:|---:|---:|---|")
for t, unit, cmd in (("bw", "BW average MB/s (higher is better)", bw_cmd),
                     ("lat", "t_typical us (lower is better)", lat_cmd)):
    base = None
    for mode, label in (("rxe-rxe", "rxe server <-> rxe client"),
                        ("uroce-srv", "uroce server <-> rxe client"),
                        ("uroce-cli", "rxe server <-> uroce client")):
        runs = res.get((t, mode))
        if not runs:
            continue
        ok = [v for v, _ in runs if v is not None]
        loads = [l for _, l in runs]
        vals = [v if t == "bw" else v[0] for v in ok]
        med = statistics.median(vals) if vals else None
        if mode == "rxe-rxe":
            base = med
        ratio = "" if mode == "rxe-rxe" or not med or not base else f"{med / base:.2f}"
        mtxt = "-" if med is None else (f"{med:.2f} MB/s" if t == "bw" else f"{med:.1f} us")
        each = ", ".join("fail" if v is None else (f"{v:.1f}" if t == "bw" else f"{v[0]:.0f}")
                         for v, _ in runs)
        print(f"| {cmd.split()[0]} | {label} | {len(ok)}/{len(runs)} | {mtxt} ({each}) | {ratio} | "
              f"{min(loads):.1f}-{max(loads):.1f} |")
print("\nratio: uroce<->rxe median / rxe<->rxe median of the same run "
      "(bw: > 1 means uroce's pair is faster; lat: < 1 means uroce's pair is faster)")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
