#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Interop suite: uroced against a Linux Soft-RoCE (rxe) guest booted under qemu (TCG) by the
# project's rig (test/interop/rig). doc/interop.md describes it. For each scenario:
#   - the rig's network in a netns of our own (uroce-interop-PID-N): bridge br0, the guest's
#     tap tap0, and a veth pair whose one end is a bridge port and whose other end uroced
#     drives with net_af_packet (kernel IPv6 off, no address on it);
#   - tshark captures UDP 4791 on the bridge (promiscuous: every frame forwarded between ports);
#   - the guest (10.77.0.11, rxe0) runs the unmodified ibv_rc_pingpong / ibv_uc_pingpong /
#     ibv_ud_pingpong -g 1 (the IPv4-mapped GID), each as server and then as client; the host side is
#     test/interop/rxe_peer on lib/client through uroced (10.77.0.2);
#   - data checked by rxe_peer (the tools echo what they receive), the guest tools' exit
#     status, the guest's UDP / rxe counters (rxe drops bad frames silently: every datagram the
#     guest's UDP layer delivered must have been accepted by rxe), uroced's counters, its exit
#     status on SIGTERM, and the capture (check_interop_capture.py: uroce-pcap-check with every
#     ICRC, tshark without malformed frames, both directions, the path MTU reached).
# Scenarios: mtu1500 (IB MTU 1024: RC 4096 B and 1 B, UC 3000 B, UD 1024 B), mtu4200 (IB MTU
# 4096: RC 10000 B, UC 9000 B, UD 4096 B), loss (MTU 1500, RC 4096 B and 20000 B, 1 % of the
# RoCE frames dropped in each direction: tc netem where the kernel has it, else nftables), ipv6
# (MTU 1500, RoCE v2 over IPv6: GID index 0, the link-local GIDs, and the GIDs of global
# addresses fd00:77::2 / fd00:77::11; rxe_peer and shim runs); cm (not in the default list: its
# own meson test rxe_interop_cm): rping, ucmatose, udaddy, ib_write_bw -R and ib_send_bw -R with
# uroce as client and as server, through the drop-in librdmacm (RDMACM_DIR)
# against the guest's kernel rdma_cm; the CM's MADs in the capture checked with tshark's
# dissector; mw (not in the default list: rxe_interop_mw): memory windows both ways with
# test/interop/mw_peer, a plain libibverbs program run in the guest and through the shim.
#
# With SHIM_DIR (the verbs shim, build/drivers/verbs), the host side also runs unmodified tools
# through the shim: ibv_rc_pingpong -c and perftest (ib_write_bw, ib_read_bw, ib_send_bw,
# ib_atomic_bw, ib_write_lat, ib_read_lat, ib_send_lat) against the same tools in the guest.
#
# Usage: interop.sh UROCED UROCE_PCAP_CHECK UROCE_STAT RXE_PEER CHECK_CAPTURE_PY [SHIM_DIR [RDMACM_DIR]]
# Environment: UROCE_INTEROP_CACHE   the guest image (default /tmp/uroce-interop-image; built by
#                                     rig/build-image.sh when missing or made by another version)
#              UROCE_INTEROP_SCENARIOS  default "mtu1500 mtu4200 loss ipv6" (cm, cm6, mw only
#                                    when named)
#              UROCE_INTEROP_CM      the cm scenario's runs (cm-PROG:SIZE, cms-PROG:SIZE)
#              UROCE_INTEROP_PP_1500 / _PP_4200 / _PP_LOSS / _PP_IPV6  a scenario's pingpong
#                                    runs (rxe_peer)
#              UROCE_INTEROP_SHIM_1500 / _SHIM_4200 / _SHIM_LOSS / _SHIM_IPV6  its runs through
#                                    the verbs shim
#              UROCE_INTEROP_DAEMON_NICE  uroced's nice level (default 0); the guest's qemu:
#                                    UROCE_INTEROP_QEMU_NICE (boot-guest.sh -N, default 0)
#              UROCE_INTEROP_ITERS   pingpong iterations (default 50)
#              UROCE_INTEROP_LOSS_PCT  the loss scenario's drop rate in % (default 1)
#              UROCE_INTEROP_CE_PCT  the share in % of the guest's frames the loss scenario marks
#                                    CE towards uroced (default 5; uroced runs algorithm dcqcn)
#              UROCE_INTEROP_PT_BW_ITERS / _PT_LAT_ITERS  perftest -n (default 100 / 100)
#              UROCE_INTEROP_KEEP=1  keep the work directory (logs, captures)
#              UROCE_INTEROP_BUDGET  seconds for all scenarios together (default 900); every
#                                    guest, tool and wait is cut to what is left of it, and a
#                                    scenario that starts with less than 90 s left fails at once
# Each scenario prints a line when it starts and when it ends (with its time and results), and
# the run ends with a summary of them.
# Needs root. Every wait is bounded; everything it creates is removed on exit, by PID / name.
set -uo pipefail

if [ $# -lt 5 ] || [ $# -gt 7 ]; then
  echo "usage: $0 UROCED UROCE_PCAP_CHECK UROCE_STAT RXE_PEER CHECK_CAPTURE_PY [SHIM_DIR [RDMACM_DIR]]"
  exit 2
fi
UROCED=$1 PCAP_CHECK=$2 STAT=$3 PEER=$4 CHECK_CAPTURE=$5 SHIM=${6:-} CMSHIM=${7:-}
RIG=$(cd "$(dirname "$0")/rig" && pwd)
MW_PEER=$(dirname "$PEER")/mw_peer  # scenario mw: built beside rxe_peer (test/interop/meson.build)
PT_BW_ITERS=${UROCE_INTEROP_PT_BW_ITERS:-100}
PT_LAT_ITERS=${UROCE_INTEROP_PT_LAT_ITERS:-100}
CACHE=${UROCE_INTEROP_CACHE:-/tmp/uroce-interop-image}
SCENARIOS=${UROCE_INTEROP_SCENARIOS:-mtu1500 mtu4200 loss ipv6}
ITERS=${UROCE_INTEROP_ITERS:-50}
LOSS_PCT=${UROCE_INTEROP_LOSS_PCT:-1}
CE_PCT=${UROCE_INTEROP_CE_PCT:-5}
BUDGET=${UROCE_INTEROP_BUDGET:-900}
DAEMON_NICE=${UROCE_INTEROP_DAEMON_NICE:-0}
QEMU_NICE=${UROCE_INTEROP_QEMU_NICE:-0}
case $BUDGET in '' | *[!0-9]*) echo "FAIL: UROCE_INTEROP_BUDGET '$BUDGET' is not a number of seconds"; exit 2 ;; esac
case $LOSS_PCT in [1-9] | [1-4][0-9]) ;; *) echo "FAIL: UROCE_INTEROP_LOSS_PCT '$LOSS_PCT' is not 1..49"; exit 2 ;; esac
case $CE_PCT in [1-9] | [1-9][0-9]) ;; *) echo "FAIL: UROCE_INTEROP_CE_PCT '$CE_PCT' is not 1..99"; exit 2 ;; esac
T0=$(date +%s)
DEADLINE=$((T0 + BUDGET))

if [ "$(id -u)" != 0 ]; then
  echo "FAIL: the interop suite needs root (network namespaces, taps, qemu); CI runs as root"
  exit 1
fi
for t in ip tc nft tshark qemu-system-x86_64 timeout python3; do
  command -v "$t" >/dev/null || {
    echo "FAIL: '$t' not found (scripts/install-deps.sh installs it)"
    exit 1
  }
done
if [ -n "$CMSHIM" ] && { [ -z "$SHIM" ] || [ ! -e "$CMSHIM/librdmacm.so.1" ]; }; then
  echo "FAIL: no librdmacm.so.1 in '$CMSHIM' (the drop-in librdmacm), or no verbs shim beside it"
  exit 1
fi
if [ -n "$SHIM" ] && [ ! -e "$SHIM/libibverbs.so.1" ]; then
  echo "FAIL: no libibverbs.so.1 in $SHIM (the verbs shim)"
  exit 1
fi
for f in build-image.sh netns.sh boot-guest.sh; do
  [ -x "$RIG/$f" ] || { echo "FAIL: $RIG/$f not found or not executable (part of the source tree)"; exit 1; }
done

ID=$$
WORK=$(mktemp -d /tmp/uroce-interop-XXXXXX)
FAILS=0 PASSES=0
NS="" UPID="" TSPID="" GPID=""
GUEST_IP=10.77.0.11 UROCE_IP=10.77.0.2 HOST_IP=10.77.0.1
# IPv6 (scenario ipv6): global addresses on both sides, and each side's link-local (EUI-64 of
# its MAC, GID index 0). The TCP exchange of every tool stays on IPv4.
GUEST_IP6=fd00:77::11 UROCE_IP6=fd00:77::2
GUEST_MAC=52:54:0a:4d:00:0b  # boot-guest.sh: 52:54 + the IPv4 address
UROCE_LL="" UROCE_G6=""      # from uroced's GID table (its log), per scenario

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; PASSES=$((PASSES + 1)); }
since() { echo $(($(date +%s) - $1)); }  # since T: seconds from T to now
# bounded SECS: SECS, or what is left of the budget if that is less (at least 5 s)
bounded() {
  local left=$((DEADLINE - $(date +%s)))
  [ "$left" -lt 5 ] && left=5
  echo $(($1 < left ? $1 : left))
}

# ll_from_mac MAC: the IPv6 link-local address of a MAC (fe80::/64 + modified EUI-64), as
# both rxe and uroce put it at GID index 0
ll_from_mac() {
  local b
  IFS=: read -r -a b <<<"$1"
  printf 'fe80::%x:%x:%x:%x\n' $(((0x${b[0]} ^ 2) << 8 | 0x${b[1]})) $((0x${b[2]} << 8 | 0xff)) \
    $((0xfe << 8 | 0x${b[3]})) $((0x${b[4]} << 8 | 0x${b[5]}))
}
GUEST_LL=$(ll_from_mac "$GUEST_MAC")

STOP_RC=0
stop_pid() {  # stop_pid PID SIGNAL SECONDS: signal, wait (bounded), SIGKILL; status in STOP_RC
  local pid=$1 sig=$2 secs=$3
  kill -"$sig" "$pid" 2>/dev/null
  for _ in $(seq $((secs * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    STOP_RC=137
    return
  fi
  wait "$pid" 2>/dev/null
  STOP_RC=$?
}

teardown() {  # everything one scenario created
  # boot-guest.sh passes TERM on to its qemu and waits for it.
  [ -n "$GPID" ] && stop_pid "$GPID" TERM 10
  [ -n "$TSPID" ] && stop_pid "$TSPID" TERM 10
  [ -n "$UPID" ] && stop_pid "$UPID" TERM 20
  GPID="" TSPID="" UPID=""
  [ -n "$NS" ] && "$RIG/netns.sh" down "$NS" >/dev/null 2>&1
  NS=""
  rm -rf "/var/run/dpdk/uroce-interop-$ID"
}
cleanup() {
  teardown
  if [ "${UROCE_INTEROP_KEEP:-0}" = 1 ] || [ "$FAILS" -ne 0 ]; then
    echo "work directory kept: $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# --- the guest image: built once into CACHE, rebuilt only when rig/build-image.sh changed
echo "=== guest image in $CACHE (a first build downloads ~80 MB and takes about a minute)"
if ! timeout "$(bounded 900)" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$RIG/build-image.sh" "$CACHE" 2>&1; then
  echo "FAIL: building the guest image failed (output above)"
  FAILS=1
  exit 1
fi

# The tool a run names, with its arguments (both sides use the same ones; -d only in the guest):
#   rc|uc|ud:SIZE       ibv_*_pingpong, host side rxe_peer (lib/client)
#   shim-rc|shim-ud:SIZE  ibv_*_pingpong -c (buffers validated) on both sides, host side through
#                       the verbs shim
#   pt-TEST:SIZE        perftest ib_TEST (write_bw, read_bw, send_bw, atomic_bw, *_lat) on both
#                       sides, host side through the verbs shim
#   pts-TEST:SIZE       the same with uroce as server only (the guest's tool is the client)
# A run may end in @ll or @v6: the RoCE traffic then uses IPv6, GID index 0
# (the link-local GID) or the GID of the global address (uroced: index UROCE_G6 of its GID
# table; the guest: $G6, which its script finds in rxe0's table). Without it, GID index 1 (the
# IPv4-mapped GID).
run_size() { local s=${1#*:}; echo "${s%@*}"; }
run_gid() {  # run_gid RUN host|guest: the GID index the run uses on that side
  case $1 in
    *@ll) echo 0 ;;
    *@v6) if [ "$2" = guest ]; then echo '$G6'; else echo "$UROCE_G6"; fi ;;
    *) echo 1 ;;
  esac
}
run_tool() {  # run_tool RUN PMTU [host|guest]
  local run=$1 pmtu=$2 type size g
  type=${run%%:*} size=$(run_size "$run") g=$(run_gid "$run" "${3:-host}")
  case $type in
    rc | uc) echo "ibv_${type}_pingpong -g $g -m $pmtu -s $size -n $ITERS -r 16" ;;
    ud) echo "ibv_ud_pingpong -g $g -s $size -n $ITERS -r 16" ;;  # no -m: the port's MTU
    shim-rc) echo "ibv_rc_pingpong -g $g -c -m $pmtu -s $size -n $ITERS -r 16" ;;
    shim-ud) echo "ibv_ud_pingpong -g $g -c -s $size -n $ITERS -r 16" ;;
    pt-*_lat | pts-*_lat) echo "ib_${type#*-} -x $g -F -s $size -n $PT_LAT_ITERS" ;;
    pt-* | pts-*) echo "ib_${type#*-} -x $g -F -s $size -n $PT_BW_ITERS" ;;
  esac
}
# cm_tool RUN server|client OWN_IP PEER_IP PORT [guest]: an rdma_cm program of a cm- run (the
# connection through rdma_cm: on the host the drop-in librdmacm and uroced's CM, in the guest
# the kernel's rdma_cm over rxe). udaddy has no port option (7174). A cms- run is the cm- run
# with uroce as server only. A cm- run ending in @v6 uses both sides' global IPv6 addresses
# for the IPv4 ones it is given, one ending in @ll their link-local ones with a scope id (the
# guest's eth0; any on the host: uroce picks no device by it) (scenario cm6).
cm_tool() {
  local type=${1%%:*} size role=$2 own=$3 peer=$4 port=$5 dev=""
  type=${type/#cms-/cm-}
  size=$(run_size "$1")
  case $1 in *@v6)
    own=${own/#$UROCE_IP/$UROCE_IP6} own=${own/#$GUEST_IP/$GUEST_IP6}
    peer=${peer/#$UROCE_IP/$UROCE_IP6} peer=${peer/#$GUEST_IP/$GUEST_IP6} ;;
  *@ll)
    local sc=%1
    [ "${6:-}" = guest ] && sc=%eth0
    own=${own/#$UROCE_IP/$UROCE_LL$sc} own=${own/#$GUEST_IP/$GUEST_LL$sc}
    peer=${peer/#$UROCE_IP/$UROCE_LL$sc} peer=${peer/#$GUEST_IP/$GUEST_LL$sc} ;;
  esac
  [ "${6:-}" = guest ] && dev="-d rxe0 "
  case $type:$role in
    cm-rping:server) echo "rping -s -a $own -p $port -C 10 -S $size -v -V" ;;
    cm-rping:client) echo "rping -c -a $peer -p $port -C 10 -S $size -v -V" ;;
    cm-ucmatose:server) echo "ucmatose -b $own -p $port -C 10 -S $size" ;;
    cm-ucmatose:client) echo "ucmatose -s $peer -p $port -C 10 -S $size" ;;
    cm-udaddy:server) echo "udaddy -b $own -C 10 -S $size" ;;
    cm-udaddy:client) echo "udaddy -s $peer -C 10 -S $size" ;;
    cm-*:server) echo "ib_${type#cm-} ${dev}-R -F -s $size -n $PT_BW_ITERS -p $port" ;;
    cm-*:client) echo "ib_${type#cm-} ${dev}-R -F -s $size -n $PT_BW_ITERS -p $port $peer" ;;
  esac
}

guest_tool() {  # guest_tool RUN PMTU: run_tool with the guest's device and GID index
  local t
  t=$(run_tool "$1" "$2" guest)
  echo "${t%% *} -d rxe0 ${t#* }"
}

# guest_script PMTU RUNS...: the command file the guest runs. Each RUN is TYPE:SIZE (rc, uc, ud):
# the guest's ibv_TYPE_pingpong is the server (uroce the client), then the client, on TCP port
# 18515 + 2k and 18515 + 2k + 1 for the k-th run, so a retry can never meet another run's
# server. Each tool is bounded by `timeout`; a client retries only while the host side does not
# listen yet ("Couldn't connect").
guest_script() {
  local pmtu=$1 k=0 run type size
  shift
  cat <<EOF
H=$HOST_IP
st=0
rx() {
  for i in \$(seq 90); do
    out=\$(timeout 120 "\$@" 2>&1); r=\$?; echo "\$out"
    echo "\$out" | grep -q "Couldn't connect" || return \$r
    sleep 1
  done
  return 1
}
# rxc: an rdma_cm client, retried while the host side does not listen yet (a REJ for a port
# nobody listens on, a SIDR_REP "no listener", perftest's failed connect).
rxc() {
  for i in \$(seq 90); do
    out=\$(timeout 120 "\$@" 2>&1); r=\$?; echo "\$out"
    echo "\$out" | grep -qE "REJECTED|UNREACHABLE|Couldn't connect|Unable to perform rdma_client|ADDR_ERROR" || return \$r
    sleep 1
  done
  return 1
}
run() { echo "== \$*"; "\$@"; r=\$?; echo "== exit \$r: \$*"; [ \$r = 0 ] || st=1; }
# IPv6: the global address (rxe adds its GID: G6 is its index), and the link-local out of
# DAD (the kernel answers no NS for a tentative address).
ip -6 addr add $GUEST_IP6/64 dev eth0 nodad
G6=""
# Only the first entries: rxe's table has 1024, and a fork per entry costs seconds under TCG.
for i in \$(seq 150); do
  for n in 1 2 3 4 5 6 7; do
    v=""; read -r v 2>/dev/null </sys/class/infiniband/rxe0/ports/1/gids/\$n
    [ "\$v" = "$(python3 -c "import ipaddress; print(ipaddress.ip_address('$GUEST_IP6').exploded)")" ] && G6=\$n
  done
  [ -n "\$G6" ] && [ -z "\$(ip -6 addr show dev eth0 tentative)" ] && break
  sleep 0.2
done
echo "guest GID of $GUEST_IP6: index \$G6; rxe0 GID 0: \$(cat /sys/class/infiniband/rxe0/ports/1/gids/0)"
ip -6 addr show dev eth0 | grep inet6
# rxe resolves uroced's MAC at modify_qp(RTR) with a 1 s limit; on a loaded host the first
# ARP / ND exchange can take longer: resolve them first (uroced answers ARP and ND, not ICMP
# echo).
ping -c 3 -W 2 $UROCE_IP >/dev/null 2>&1
ip neigh show $UROCE_IP
if [ -n "$UROCE_LL" ]; then
  ping6 -c 2 -W 2 $UROCE_IP6 >/dev/null 2>&1
  ping6 -c 2 -W 2 -I eth0 $UROCE_LL >/dev/null 2>&1
  ip -6 neigh show dev eth0
fi
echo "possible CPUs: \$(cat /sys/devices/system/cpu/possible)"
EOF
  for run in "$@"; do
    local cmd
    case $run in
      cm-* | cms-*)
        [ "${run#cms-}" = "$run" ] &&
          echo "run timeout 180 $(cm_tool "$run" server "$GUEST_IP" "$UROCE_IP" $((18515 + 2 * k)) guest)"
        # the host starts its server when its client is done: give it time to listen (a
        # perftest retried after a REJ can leave the host's server waiting for good)
        echo "sleep 3"
        echo "run rxc $(cm_tool "$run" client "$GUEST_IP" "$UROCE_IP" $((18516 + 2 * k)) guest)"
        k=$((k + 1))
        continue ;;
      mw:*)
        # mw_peer from the share: the guest owns the windows (uroce accesses them), then
        # accesses uroce's.
        # (-L: rxe's wc_flags for a receive with invalidate, mw_peer.c)
        echo "run timeout 180 /share/mw_peer owner -d rxe0 -g 1 -t 150 -L -p $((18515 + 2 * k))"
        echo "run timeout 180 /share/mw_peer access -d rxe0 -g 1 -t 150 -H \$H -p $((18516 + 2 * k))"
        k=$((k + 1))
        continue ;;
    esac
    cmd=$(guest_tool "$run" "$pmtu")
    case $run in pts-*) ;; *) echo "run timeout 180 $cmd -p $((18515 + 2 * k))" ;; esac
    echo "run rx $cmd -p $((18516 + 2 * k)) \$H"
    k=$((k + 1))
  done
  cat <<'EOF'
sleep 1
echo "== counters"
cat /proc/net/snmp
grep '^Udp6' /proc/net/snmp6
ip -s link show dev eth0
rdma statistic show link rxe0/1
exit $st
EOF
}

# run_peer MODE ARGS...: rxe_peer in the netns, output to the scenario log
run_peer() {
  local mode=$1
  shift
  echo "--- rxe_peer $mode $*" >>"$SLOG"
  local t
  t=$(bounded 240)
  ip netns exec "$NS" timeout $((t + 30)) env -u LD_LIBRARY_PATH -u LD_PRELOAD "$PEER" "$mode" \
    -S "$WORK/uroced.sock" "$@" -t "$t" >>"$SLOG" 2>&1
}

# run_shim 'TOOL ARGS': an unmodified rdma-core / perftest tool in the netns over uroced through
# the verbs shim (never uroced itself: it refuses a foreign libibverbs). A client retries while
# the guest's server does not listen yet. The tool must exit 0 and print its result line.
run_shim() {
  local i out rc
  echo "--- $1 (shim)" >>"$SLOG"
  for i in $(seq 120); do
    out=$(ip netns exec "$NS" timeout "$(bounded 240)" env LD_LIBRARY_PATH="$SHIM" \
      UROCE_SOCKET="$WORK/uroced.sock" nice -n 10 $1 2>&1)
    rc=$?
    grep -q "Couldn't connect" <<<"$out" || break
    # the guest's server is gone (or never came): no point in knocking again
    kill -0 "$GPID" 2>/dev/null && [ "$(date +%s)" -lt "$DEADLINE" ] || break
    sleep 1
  done
  echo "$out" >>"$SLOG"
  echo "--- exit $rc" >>"$SLOG"
  [ "$rc" = 0 ] || return 1
  case $1 in
    ibv_*) grep -q "iters in" <<<"$out" ;;
    # The passive side of read / atomic latency (uroce as server: no peer address) prints no
    # result row; the guest's client checks its own.
    ib_read_lat* | ib_atomic_lat*) [[ $1 != *" $GUEST_IP" ]] || grep -qE '^ *[0-9]+ +[0-9]+ +[0-9.]+' <<<"$out" ;;
    *) grep -qE '^ *[0-9]+ +[0-9]+ +[0-9.]+' <<<"$out" ;;  # perftest's result row
  esac
}

# run_mw owner|access PORT ARGS...: test/interop/mw_peer (a plain libibverbs program) in the
# netns over uroced through the verbs shim; the accessor retries its connect itself. Exit 0
# and its "passed" line: every check held (memory windows, doc/interop.md).
run_mw() {
  local role=$1 port=$2 t out rc
  shift 2
  # the accessor's connect retries span the guest's boot (up to ~3 min on a loaded host)
  t=$(bounded 300)
  echo "--- mw_peer $role -p $port $* (shim)" >>"$SLOG"
  out=$(ip netns exec "$NS" timeout $((t + 30)) env LD_LIBRARY_PATH="$SHIM" \
    UROCE_SOCKET="$WORK/uroced.sock" "$MW_PEER" "$role" -g 1 -t "$t" -p "$port" "$@" 2>&1)
  rc=$?
  echo "$out" >>"$SLOG"
  echo "--- exit $rc" >>"$SLOG"
  [ "$rc" = 0 ] && grep -q "^mw_peer $role: passed" <<<"$out"
}

# run_cm RUN server|client PORT: an unmodified rdma_cm program in the netns over uroced through
# both drop-in libraries (librdmacm and the verbs shim). A client starts once the guest has
# started its server (its script logs the command), 2 s later (TCG), and retries while that
# server does not listen yet (the kernel answers a REQ for a port nobody listens on with a REJ,
# reason 8). The program must exit 0 and print its own success lines.
run_cm() {
  local run=$1 role=$2 cmd i out rc gcmd
  cmd=$(cm_tool "$run" "$role" "$UROCE_IP" "$GUEST_IP" "$3")
  echo "--- $cmd (drop-in librdmacm)" >>"$SLOG"
  if [ "$role" = client ]; then
    gcmd="== timeout 180 $(cm_tool "$run" server "$GUEST_IP" "$UROCE_IP" "$3" guest)"
    while ! grep -qxF "$gcmd" <(tr -d '\r' <"$WORK/$name-guest.log"); do
      kill -0 "$GPID" 2>/dev/null && [ "$(date +%s)" -lt "$DEADLINE" ] || break
      sleep 0.5
    done
    sleep 2
  fi
  for i in $(seq 120); do
    out=$(ip netns exec "$NS" timeout "$(bounded 180)" env LD_LIBRARY_PATH="$CMSHIM:$SHIM" \
      UROCE_SOCKET="$WORK/uroced.sock" nice -n 10 $cmd 2>&1)
    rc=$?
    [ "$role" = client ] && grep -qE "REJECTED|UNREACHABLE|ADDR_ERROR|Unable to perform rdma_client" <<<"$out" || break
    kill -0 "$GPID" 2>/dev/null && [ "$(date +%s)" -lt "$DEADLINE" ] || break
    sleep 1
  done
  echo "$out" >>"$SLOG"
  echo "--- exit $rc" >>"$SLOG"
  [ "$rc" = 0 ] || return 1
  case $run in
    cm-rping:*) [ "$(grep -cE "^(server )?ping data: rdma-ping-" <<<"$out")" -ge 10 ] ;;
    cm-ucmatose:* | cm-udaddy:*) grep -q "^test complete" <<<"$out" ;;
    *) grep -qE '^ *[0-9]+ +[0-9]+ +[0-9.]+' <<<"$out" ;;
  esac
}

# want_opcodes PMTU RUNS...: the opcodes the capture must show from uroce and from the guest
# ("U G", comma-separated). Every run is RC or has an RC ACK; a pingpong run (rxe_peer or the
# shim) and pt- runs go both ways, pts- runs have the guest as requester only.
# RC 0x00-0x02 SEND first/middle/last, 0x04 SEND only, 0x11 ACK, 0x06-0x08 WRITE
# first/middle/last, 0x0a WRITE only, 0x0c READ request (answered by 0x0d-0x0f), 0x14 FETCH_ADD
# (answered by ATOMIC ACK 0x12); UC 0x20-0x22 SEND first/middle/last; UD 0x64 SEND only.
want_opcodes() {
  local pmtu=$1 run type size req resp u="0x11" g="0x11"
  shift
  for run in "$@"; do
    type=${run%%:*} size=$(run_size "$run")
    req="" resp=""
    case $type in
      rc | shim-rc) if [ "$size" -gt $((2 * pmtu)) ]; then req="0x00,0x01,0x02"; elif [ "$size" -le "$pmtu" ]; then req="0x04"; fi ;;
      uc) [ "$size" -gt $((2 * pmtu)) ] && req="0x20,0x21,0x22" ;;
      ud | shim-ud) req="0x64" ;;
      *-send_bw) [ "$size" -gt $((2 * pmtu)) ] && req="0x00,0x01,0x02" ;;
      *-send_lat) [ "$size" -le "$pmtu" ] && req="0x04" ;;
      *-write_bw) [ "$size" -gt $((2 * pmtu)) ] && req="0x06,0x07,0x08" ;;
      *-write_lat) [ "$size" -le "$pmtu" ] && req="0x0a" ;;
      *-read_bw | *-read_lat) req="0x0c" resp="0x0d,0x0e,0x0f"
        [ "$size" -le "$pmtu" ] && resp="0x10" ;;
      *-atomic_bw | *-atomic_lat) req="0x14" resp="0x12" ;;
      cm-udaddy) req="0x64" ;;
      # WRITE / READ of 4096 B through windows, SEND Only with Invalidate
      mw) req="0x06,0x07,0x08,0x0c,0x17" resp="0x0d,0x0e,0x0f" ;;  # SIDR_REQ / SIDR_REP, then the UD messages
      cm-rping | cm-ucmatose) req="0x64,0x04" ;;  # the CM's MADs (UD SENDs to QP 1), SENDs
    esac
    [ -n "$req" ] && g="$g,$req"
    [ -n "$resp" ] && u="$u,$resp"
    case $type in
      pts-* | cms-*) ;;
      *) [ -n "$req" ] && u="$u,$req"
        [ -n "$resp" ] && g="$g,$resp" ;;
    esac
  done
  echo "$u $g"
}

# mw_capture_check NAME PCAP: the memory-window runs on the wire. Each side's SEND Only with
# Invalidate (0x17) carries in its IETH the rkey of the peer's window W2 that its mw_peer
# printed, and each side NAKed with remote access error (AETH syndrome 0x62) the accesses it
# refused: uroce all three (across W1's end, across W3's end, W2 after its invalidation), rxe
# two (it grants the one across W3's end inside the MR: Linux 6.1 checks the MR's range only).
mw_capture_check() {
  local name=$1 pcap=$2 rows w2u w2g nu ng ok=1
  rows=$(tshark -n -r "$pcap" -Y 'infiniband.bth.opcode == 0x17 || infiniband.aeth.syndrome == 0x62' \
    -T fields -E separator=' ' -e ip.src -e infiniband.bth.opcode -e infiniband.ieth 2>/dev/null)
  echo "$rows" >"$WORK/$name-mw-wire.txt"
  # W2 as the accessors saw it: the host's (uroce's accessor) is the guest's window.
  w2g=$(sed -n 's/^mw_peer access: ok: READ of W2 ([0-9]* B, rkey 0x\([0-9a-f]*\)).*/\1/p' "$SLOG" | head -1)
  w2u=$(tr -d '\r' <"$WORK/$name-guest.log" |
    sed -n 's/^mw_peer access: ok: READ of W2 ([0-9]* B, rkey 0x\([0-9a-f]*\)).*/\1/p' | head -1)
  awk -v a="$UROCE_IP" -v k="$w2g" '$1 == a && $2 == 23 && $3 ~ "^" k {f = 1} END {exit !(f && k != "")}' <<<"$rows" ||
    { fail "$name: no SEND with Invalidate from uroce with IETH = the guest's W2 rkey '$w2g' ($WORK/$name-mw-wire.txt)"; ok=0; }
  awk -v a="$GUEST_IP" -v k="$w2u" '$1 == a && $2 == 23 && $3 ~ "^" k {f = 1} END {exit !(f && k != "")}' <<<"$rows" ||
    { fail "$name: no SEND with Invalidate from the guest with IETH = uroce's W2 rkey '$w2u' ($WORK/$name-mw-wire.txt)"; ok=0; }
  nu=$(awk -v a="$UROCE_IP" '$1 == a && $2 == 17' <<<"$rows" | wc -l)
  ng=$(awk -v a="$GUEST_IP" '$1 == a && $2 == 17' <<<"$rows" | wc -l)
  [ "$nu" -ge 3 ] || { fail "$name: uroced sent $nu NAKs remote access error, want 3"; ok=0; }
  [ "$ng" -ge 2 ] || { fail "$name: the guest sent $ng NAKs remote access error, want 2"; ok=0; }
  [ "$ok" = 1 ] && pass "$name: on the wire: SEND with Invalidate both ways with the peer's W2 rkey (0x$w2g, 0x$w2u), NAKs remote access error from uroce $nu, from rxe $ng"
}

# cm_mad_check NAME PCAP RUNS: the MADs of the capture as tshark dissects them (source, class,
# attribute): each is class 0x07 (CM) version 2 with no malformed mark or expert info, and
# uroced and the guest each sent REQ, REP, RTU and a DREQ or DREP (RC runs), SIDR_REQ and
# SIDR_REP (udaddy). Runs ending in @v6 / @ll (all or none of them): over IPv6, from either
# of a side's IPv6 addresses.
cm_mad_check() {
  local name=$1 pcap=$2 runs=$3 rows bad want side a n src=ip.src ua=$UROCE_IP ga=$GUEST_IP
  case " $runs" in *@v6* | *@ll*) src=ipv6.src ua="$UROCE_IP6|$UROCE_LL" ga="$GUEST_IP6|$GUEST_LL" ;; esac
  # (UDP checksum 0 over IPv6 accepted, as check_interop_capture.py: rxe and uroce send it)
  rows=$(tshark -n -o udp.ignore_ipv6_zero_checksum:TRUE -r "$pcap" -Y 'infiniband.bth.destqp == 1' \
    -T fields -E separator=' ' \
    -e "$src" -e infiniband.mad.mgmtclass -e infiniband.mad.classversion \
    -e infiniband.mad.attributeid -e _ws.malformed -e _ws.expert.message 2>"$WORK/$name-mads.err")
  echo "$rows" >"$WORK/$name-mads.txt"
  bad=$(awk 'NF != 4 || $2 != "0x07" || $3 != "0x02"' <<<"$rows" | head -5)
  if [ -n "$bad" ] || [ -z "$rows" ]; then
    fail "$name: MADs tshark does not dissect as CM messages cleanly ($WORK/$name-mads.txt): ${bad:-none captured}"
    return
  fi
  want="0x0010 0x0013 0x0014"           # REQ REP RTU
  case " $runs" in *" cm-udaddy"*) want="$want 0x0017 0x0018" ;; esac
  for side in "$ua uroced" "$ga guest"; do
    read -r a n <<<"$side"
    for w in $want; do
      awk -v a="^($a)\$" -v w="$w" '$1 ~ a && $4 == w {f = 1} END {exit !f}' <<<"$rows" ||
        fail "$name: no CM attribute $w from $n in the capture"
    done
    awk -v a="^($a)\$" '$1 ~ a && ($4 == "0x0015" || $4 == "0x0016") {f = 1} END {exit !f}' <<<"$rows" ||
      fail "$name: no DREQ / DREP from $n in the capture"
  done
  pass "$name: $(wc -l <<<"$rows") CM MADs, tshark clean: $(awk '{c[$1" "$4]++} END {for (k in c) printf "%s:%d ", k, c[k]}' <<<"$rows")"
}

scenario() {  # scenario NAME ETH_MTU LOSS(0|1) RUNS (TYPE:SIZE ...)
  local name=$1 mtu=$2 loss=$3 runs=$4 pmtu dev
  if [ "$mtu" -ge 4200 ]; then pmtu=4096; else pmtu=1024; fi
  SLOG=$WORK/$name.log
  NS=uroce-interop-$ID-$name
  echo "    Ethernet MTU $mtu, path MTU $pmtu, loss $loss, runs: $runs ($ITERS iterations each)"
  if [ $((DEADLINE - $(date +%s))) -lt 90 ]; then
    fail "$name: not run, less than 90 s of the ${BUDGET} s budget left (UROCE_INTEROP_BUDGET)"
    return
  fi
  if ! "$RIG/netns.sh" up "$NS" "$mtu" 1 >"$WORK/$name-net.log" 2>&1; then
    cat "$WORK/$name-net.log"
    fail "$name: netns.sh up"
    return
  fi
  # uroced's port: a veth whose peer is a bridge port. No address, no IPv6 on uroced's end.
  local X="ip -n $NS"
  $X link add uro0 type veth peer name uro0br &&
    ip netns exec "$NS" sysctl -qw net.ipv6.conf.uro0.disable_ipv6=1 &&
    $X link set uro0 mtu "$mtu" up &&
    $X link set uro0br mtu "$mtu" master br0 up || {
    fail "$name: veth setup"
    return
  }
  if [ "$loss" = 1 ]; then
    # LOSS_PCT % (default 1) of the RoCE frames the bridge forwards, each direction. tc netem
    # where the kernel has it (frames leaving the bridge towards the guest and towards uroced);
    # otherwise (kernels without CONFIG_NET_SCH_NETEM, as this project's CI VMs) nftables on the
    # bridge's forward hook with a random number per frame.
    if tc -n "$NS" qdisc add dev tap0 root netem loss "$LOSS_PCT%" 2>/dev/null &&
      tc -n "$NS" qdisc add dev uro0br root netem loss "$LOSS_PCT%"; then
      echo "loss: tc netem loss $LOSS_PCT% on tap0 and uro0br"
    else
      tc -n "$NS" qdisc del dev tap0 root 2>/dev/null
      if ip netns exec "$NS" nft -f - <<NFT
table bridge uroce_loss {
  chain forward {
    type filter hook forward priority 0; policy accept;
    udp dport 4791 numgen random mod 100 < $LOSS_PCT counter drop
  }
}
NFT
      then
        echo "loss: no tc netem in this kernel; nftables drops $LOSS_PCT% of UDP 4791 frames the bridge forwards"
      else
        fail "$name: neither tc netem nor nftables can drop frames here"
        return
      fi
    fi
  fi
  if [ "$loss" = 1 ]; then
    # ECN towards uroced: CE on CE_PCT % of the guest's RoCE frames the bridge forwards (rxe
    # sends them Not-ECT, as it has no ECN; a switch would mark only ECT frames, this tests the
    # receiver). uroced (algorithm dcqcn) answers with CNPs, which rxe drops: it has no CNP.
    ip netns exec "$NS" nft -f - <<NFT || fail "$name: nftables cannot mark CE here"
table bridge uroce_ce {
  chain forward {
    type filter hook forward priority 10; policy accept;
    ip saddr $GUEST_IP udp dport 4791 numgen random mod 100 < $CE_PCT counter ip ecn set ce
  }
}
NFT
  fi
  case " $runs" in *" cm-"* | *" cms-"*)
    # The rdma_cm runs: the bridge loses every CM REJ with reason 8 (no listener for the
    # service ID), so a REQ that came before its server listened is sent again (the CM's
    # response timeout, ~4 s) instead of refused. perftest -R connects twice, its exchange and
    # then its data QP, and the server listens again in between: under TCG the client's second
    # REQ can come first, and perftest 4.5-0.17 then gives up, or retries with the rdma_cm ids
    # it has just destroyed; either way the server is left waiting for good. Bit offsets from
    # the UDP header: BTH dest QP (104, 24 bits), MAD class (232), attribute id (352), REJ
    # reason (496); checked against a capture of such a REJ.
    ip netns exec "$NS" nft -f - <<NFT || fail "$name: nftables cannot drop CM REJs here"
table bridge uroce_cm {
  chain forward {
    type filter hook forward priority 20; policy accept;
    udp dport 4791 @th,104,24 1 @th,232,8 0x07 @th,352,16 0x0012 @th,496,16 0x0008 counter drop
  }
}
NFT
  esac
  ip netns exec "$NS" tshark -q -n -i br0 -f 'udp port 4791' -F pcap -w "$WORK/$name.pcap" \
    >"$WORK/$name-tshark.log" 2>&1 &
  TSPID=$!
  dev="net_af_packet0,iface=uro0"
  [ "$mtu" -gt 1500 ] && dev="$dev,blocksz=8192,framesz=8192"
  cat >"$WORK/uroced.conf" <<EOF
[eal]
args = --no-huge -m 256 --no-pci --file-prefix=uroce-interop-$ID --log-level=*:notice
[daemon]
socket = $WORK/uroced.sock
pcap = $WORK/$name-uroced.pcap
idle_sleep_us = 200
[port p0]
device = $dev
mtu = $mtu
ipv4 = $UROCE_IP/24
ipv6 = $UROCE_IP6/64
[cc]
algorithm = dcqcn
EOF
  ip netns exec "$NS" nice -n "$DAEMON_NICE" env -u LD_LIBRARY_PATH -u LD_PRELOAD "$UROCED" -c "$WORK/uroced.conf" \
    >"$WORK/$name-uroced.log" 2>&1 &
  UPID=$!
  for _ in $(seq 600); do
    [ -S "$WORK/uroced.sock" ] && grep -q "Capturing on" "$WORK/$name-tshark.log" && break
    kill -0 "$UPID" 2>/dev/null || break
    sleep 0.1
  done
  if [ ! -S "$WORK/uroced.sock" ]; then
    cat "$WORK/$name-uroced.log"
    fail "$name: uroced did not open its control socket within 60 s"
    return
  fi
  grep -q "Capturing on" "$WORK/$name-tshark.log" || fail "$name: tshark did not start capturing"
  # uroced's GID table (its log): 0 the link-local, then the IPv4-mapped, then the IPv6 address.
  UROCE_LL=$(sed -n 's/^port p0: gid 0 \(fe80:[0-9a-f:]*\) RoCE v2$/\1/p' "$WORK/$name-uroced.log")
  UROCE_G6=$(sed -n "s/^port p0: gid \([0-9]*\) $UROCE_IP6 RoCE v2\$/\1/p" "$WORK/$name-uroced.log")
  if [ -z "$UROCE_LL" ] || [ -z "$UROCE_G6" ]; then
    grep 'gid' "$WORK/$name-uroced.log"
    fail "$name: uroced's GID table lacks the link-local or $UROCE_IP6"
    return
  fi
  echo "    uroced GIDs: 0 $UROCE_LL, $UROCE_G6 $UROCE_IP6; guest: 0 $GUEST_LL, the index of $GUEST_IP6 found in the guest"

  guest_script "$pmtu" $runs >"$WORK/$name-guest.sh"
  case " $runs" in *" mw:"*)
    mkdir -p "$WORK/$name-share" && cp "$MW_PEER" "$WORK/$name-share/mw_peer" ||
      fail "$name: copying mw_peer into the guest's share" ;;
  esac
  echo "    [$(since "$T0") s] guest booting (log: $WORK/$name-guest.log)"
  # Without the shim: qemu links libibverbs, and meson's LD_LIBRARY_PATH would give it ours.
  env -u LD_LIBRARY_PATH -u LD_PRELOAD "$RIG/boot-guest.sh" -k "$CACHE" -n "$NS" -t tap0 \
    -a "$GUEST_IP/24" -m "$mtu" -N "$QEMU_NICE" \
    -d "$WORK/$name-share" -s "$WORK/$name-guest.sh" -T "$(bounded 600)" >"$WORK/$name-guest.log" 2>&1 &
  GPID=$!

  # The host side, in the order the guest runs its tools. RC / UC PSNs start just below 2^24.
  local k=0 run type size
  for run in $runs; do
    type=${run%%:*} size=$(run_size "$run")
    # Without the guest (it powered off early, or its -T limit ended it) a host run would only
    # wait for a partner that never comes.
    if ! kill -0 "$GPID" 2>/dev/null; then
      fail "$name: $run not run: the guest is no longer running (log: $WORK/$name-guest.log)"
      k=$((k + 1))
      continue
    fi
    case $type in
      rc | uc | ud)
        local args=(-m "$pmtu" -s "$size" -n "$ITERS" -P 0xffffc0 -g "$(run_gid "$run" host)")
        run_peer "$type-client" -H "$GUEST_IP" -p $((18515 + 2 * k)) "${args[@]}" &&
          pass "$name: guest ibv_${type}_pingpong server <-> uroce client (rxe_peer, $ITERS x $size B, GID $(run_gid "$run" host))" ||
          fail "$name: $type-client $size B (log: $SLOG)"
        run_peer "$type-server" -p $((18516 + 2 * k)) "${args[@]}" &&
          pass "$name: uroce server (rxe_peer) <-> guest ibv_${type}_pingpong client ($ITERS x $size B, GID $(run_gid "$run" host))" ||
          fail "$name: $type-server $size B (log: $SLOG)"
        ;;
      cm-* | cms-*)
        local prog=${type#cm*-}
        if [ "$type" = "cm-$prog" ]; then
          run_cm "$run" client $((18515 + 2 * k)) &&
            pass "$name: guest (kernel rdma_cm) $prog server <-> uroce client (drop-in librdmacm, $size B)" ||
            fail "$name: $prog $size B, uroce client (log: $SLOG)"
        fi
        run_cm "$run" server $((18516 + 2 * k)) &&
          pass "$name: uroce server (drop-in librdmacm) <-> guest (kernel rdma_cm) $prog client ($size B)" ||
          fail "$name: $prog $size B, uroce server (log: $SLOG)"
        ;;
      mw)
        # Linux 6.1's rxe checks only the MR's range, not the window's (-L: the accessor
        # expects its READ across a window's end inside the MR to succeed there).
        run_mw access $((18515 + 2 * k)) -H "$GUEST_IP" -L &&
          pass "$name: memory windows of the guest (rxe) <-> uroce accessor (mw_peer, shim)" ||
          fail "$name: mw_peer, uroce accessing rxe's windows (log: $SLOG)"
        run_mw owner $((18516 + 2 * k)) &&
          pass "$name: memory windows of uroce (mw_peer, shim) <-> guest (rxe) accessor" ||
          fail "$name: mw_peer, rxe accessing uroce's windows (log: $SLOG)"
        ;;
      *)
        local tool
        tool=$(run_tool "$run" "$pmtu")
        case $type in
          pts-*) ;;
          *) run_shim "$tool -p $((18515 + 2 * k)) $GUEST_IP" &&
            pass "$name: guest ${tool%% *} server <-> uroce client (shim, $size B)" ||
            fail "$name: ${tool%% *} $size B, uroce client (log: $SLOG)" ;;
        esac
        run_shim "$tool -p $((18516 + 2 * k))" &&
          pass "$name: uroce server (shim) <-> guest ${tool%% *} client ($size B)" ||
          fail "$name: ${tool%% *} $size B, uroce server (log: $SLOG)"
        ;;
    esac
    k=$((k + 1))
  done

  # The guest powers off after its script; its exit status is the script's.
  local grc
  for _ in $(seq 1200); do kill -0 "$GPID" 2>/dev/null || break; sleep 0.1; done
  stop_pid "$GPID" TERM 5
  grc=$STOP_RC
  GPID=""
  if [ "$grc" = 0 ]; then
    pass "$name: every guest tool exited 0"
  else
    fail "$name: guest script exit $grc"
    grep -E '^== |Failed|Couldn|error' "$WORK/$name-guest.log" | head -30
  fi
  # boot-guest.sh's -smp 1,maxcpus=2 in effect: without it the guest's NIC can stall for good.
  grep -q '^possible CPUs: 0-1' "$WORK/$name-guest.log" ||
    fail "$name: the guest's qemu did not run with -smp 1,maxcpus=2 (rig/boot-guest.sh, doc/interop.md)"

  # rxe drops frames it rejects without a counter: every UDP datagram the guest delivered,
  # over IPv4 (/proc/net/snmp) and IPv6 (/proc/net/snmp6), must have been accepted by rxe
  # (rcvd_pkts), except the retransmissions rxe_peer reports may have reached a QP the guest's
  # tool had already destroyed (its last send's ACK lost; rxe_peer.cc, kTailNoQpNote).
  local udp4 udp6 udp_in rcvd noqp cnps
  noqp=$(sed -n 's/.*retransmitted datagrams that may have reached no QP: \([0-9]*\)$/\1/p' "$SLOG" |
    awk '{n += $1} END {print n + 0}')
  # uroced's CNPs (the loss scenario marks CE): rxe drops a CNP without a counter (opcode 0x81
  # is no RC opcode), so they too may be datagrams rxe did not accept.
  ip netns exec "$NS" timeout 30 "$STAT" -s "$WORK/uroced.sock" port.p0.cc. >"$WORK/$name-cc.txt" 2>&1 ||
    fail "$name: uroce-stat port.p0.cc."
  cnps=$(awk '$1 == "port.p0.cc.cnp_sent" {print $2}' "$WORK/$name-cc.txt")
  if [ "$loss" = 1 ]; then
    local ce marked
    ce=$(awk '$1 == "port.p0.cc.ce_seen" {print $2}' "$WORK/$name-cc.txt")
    marked=$(ip netns exec "$NS" nft list table bridge uroce_ce 2>/dev/null | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
    if [[ $ce =~ ^[0-9]+$ && $cnps =~ ^[0-9]+$ && $marked =~ ^[0-9]+$ ]] && [ "$ce" -gt 0 ] &&
      [ "$cnps" -gt 0 ] && [ "$ce" -le "$marked" ]; then
      pass "$name: ECN: the bridge marked CE on $marked of rxe's frames, uroced saw $ce, sent $cnps CNPs; rxe ran on"
    else
      cat "$WORK/$name-cc.txt"
      fail "$name: ECN: bridge marked '$marked', uroced ce_seen '$ce', cnp_sent '$cnps' (want > 0, ce_seen <= marked)"
    fi
  fi
  [[ $cnps =~ ^[0-9]+$ ]] || cnps=0
  noqp=$((noqp + cnps))
  udp4=$(awk '/^Udp: [0-9]/{print $2; exit}' "$WORK/$name-guest.log")
  udp6=$(tr -d '\r' <"$WORK/$name-guest.log" | awk '$1 == "Udp6InDatagrams" {print $2; exit}')
  rcvd=$(sed -n 's/.*rcvd_pkts \([0-9]*\).*/\1/p' "$WORK/$name-guest.log" | head -1)
  udp_in=""
  [[ $udp4 =~ ^[0-9]+$ && $udp6 =~ ^[0-9]+$ ]] && udp_in=$((udp4 + udp6))
  echo "guest counters: Udp InDatagrams $udp4, Udp6InDatagrams $udp6, rxe $(grep -o 'sent_pkts.*' "$WORK/$name-guest.log" | head -1)"
  if [ -n "$udp_in" ] && [ -n "$rcvd" ] && [ "$udp_in" -gt 0 ] && [ "$udp_in" = "$rcvd" ]; then
    pass "$name: rxe accepted every datagram it was given ($rcvd: $udp4 over IPv4, $udp6 over IPv6)"
  elif [ -n "$udp_in" ] && [ -n "$rcvd" ] && [ "$rcvd" -gt 0 ] && [ "$udp_in" -gt "$rcvd" ] &&
    [ $((udp_in - rcvd)) -le "$noqp" ]; then
    pass "$name: rxe accepted every datagram but $((udp_in - rcvd)) of the $noqp retransmissions rxe_peer sent after the guest's tool left and CNPs ($rcvd: $udp4 over IPv4, $udp6 over IPv6)"
  else
    fail "$name: guest UDP InDatagrams '$udp4' + Udp6InDatagrams '$udp6' vs rxe rcvd_pkts '$rcvd', $noqp allowed (rxe dropped frames)"
  fi

  # uroced's view, then SIGTERM must end it with status 0.
  ip netns exec "$NS" timeout 30 "$STAT" -s "$WORK/uroced.sock" engine. qp. port.p0. \
    >"$WORK/$name-stat.txt" 2>&1 || fail "$name: uroce-stat"
  local drops
  drops=$(awk '/^engine\.drop\./ && $2 != 0' "$WORK/$name-stat.txt")
  echo "uroced: $(awk '/^engine\.(rx|tx)_pkts /{printf "%s %s ", $1, $2}' "$WORK/$name-stat.txt")"
  if [ -n "$drops" ]; then
    echo "uroced engine drops: $(echo "$drops" | tr '\n' ' ')"
    # With loss, duplicates and sequence errors are the protocol at work; nothing else is.
    # Without loss, duplicates are too when rxe timed out and resent (a guest starved of CPU:
    # its completer_retry_err counts the retries): nothing else is.
    local guest_retries allowed='^engine\.drop\.(sequence|duplicate) '
    guest_retries=$(sed -n 's/.*completer_retry_err \([0-9]*\).*/\1/p' "$WORK/$name-guest.log" | head -1)
    if [ "$loss" = 0 ]; then
      allowed='^$'
      [[ $guest_retries =~ ^[0-9]+$ ]] && [ "$guest_retries" -gt 0 ] && allowed='^engine\.drop\.duplicate '
    fi
    if echo "$drops" | grep -qvE "$allowed"; then
      fail "$name: uroced dropped frames from rxe"
    else
      echo "uroced's drops are the protocol at work (loss $loss, rxe retries ${guest_retries:-?})"
    fi
  fi
  # Every neighbour resolution (ARP for the IPv4 runs, ND for the IPv6 ones) succeeded.
  local nf
  nf=$(awk '$1 == "port.p0.neigh_failures" {print $2}' "$WORK/$name-stat.txt")
  if [ "$nf" = 0 ]; then
    pass "$name: uroced resolved every neighbour ($(awk '/^port\.p0\.(arp|nd)\.(tx|rx)_/ && $2 != 0 {printf "%s %s ", $1, $2}' "$WORK/$name-stat.txt"))"
  else
    grep -E '^port\.p0\.(neigh|nd\.|arp\.)' "$WORK/$name-stat.txt"
    fail "$name: uroced's neighbour resolution failed ('port.p0.neigh_failures $nf')"
  fi
  local urc
  stop_pid "$UPID" TERM 30
  urc=$STOP_RC
  UPID=""
  [ "$urc" = 0 ] && pass "$name: uroced exit 0 on SIGTERM" || {
    fail "$name: uroced exit $urc"
    tail -20 "$WORK/$name-uroced.log"
  }
  sleep 1
  stop_pid "$TSPID" TERM 10
  TSPID=""

  # The capture: uroce-pcap-check (every ICRC), tshark, both directions, the path MTU.
  # RC 0x00-0x02 SEND first/middle/last, 0x04 SEND only, 0x11 ACK; UC 0x20-0x22 SEND
  # first/middle/last; UD 0x64 SEND only.
  # With uroce as perftest server only (pts-), the guest is the requester: WRITE first /
  # middle / last 0x06-0x08, READ request 0x0c (uroce answers 0x0d-0x0f), FETCH_ADD 0x14
  # (uroce answers ATOMIC ACK 0x12); write_lat both ways: WRITE only 0x0a.
  local want_u want_g
  read -r want_u want_g <<<"$(want_opcodes "$pmtu" $runs)"
  [ "$loss" = 1 ] && want_u="$want_u,0x81"  # uroced's CNPs for the CE marks
  # Both sides' addresses (IPv4, IPv6 global, link-local); each one the runs use (the GIDs they
  # name: run_gid) must be the source of frames.
  local from="" r
  for r in $runs; do
    case $r in
      *@ll) from="$from,$UROCE_LL,$GUEST_LL" ;;
      *@v6) from="$from,$UROCE_IP6,$GUEST_IP6" ;;
      *) from="$from,$UROCE_IP,$GUEST_IP" ;;
    esac
  done
  if python3 "$CHECK_CAPTURE" "$WORK/$name.pcap" "$PCAP_CHECK" "$(command -v tshark)" \
    "$UROCE_IP,$UROCE_IP6,$UROCE_LL" "$GUEST_IP,$GUEST_IP6,$GUEST_LL" \
    --want-uroce "$want_u" --want-guest "$want_g" --want-from "${from#,}" \
    --max-payload "$pmtu" $([ "$loss" = 1 ] && echo --want-retransmits 1) \
    >"$WORK/$name-capture.txt" 2>&1; then
    pass "$name: capture $(tail -1 "$WORK/$name-capture.txt" | sed 's/^ok: //')"
    grep -E '^(uroced|guest|retransmitted) ' "$WORK/$name-capture.txt"
  else
    cat "$WORK/$name-capture.txt"
    fail "$name: capture check"
  fi
  # The CM's MADs (frames to QP 1): tshark's InfiniBand MAD / CM dissector names every one, with
  # no malformed mark, and each side sent the messages of both roles.
  case " $runs" in *" cm-"*) cm_mad_check "$name" "$WORK/$name.pcap" "$runs" ;; esac
  case " $runs" in *" mw:"*) mw_capture_check "$name" "$WORK/$name.pcap" ;; esac
  # uroced's own capture must be valid as well.
  "$PCAP_CHECK" -q --expect-roce "$WORK/$name-uroced.pcap" >"$WORK/$name-uroced-check.txt" 2>&1
  if grep -qE 'invalid 0$' "$WORK/$name-uroced-check.txt"; then
    pass "$name: uroced's own capture: $(tail -1 "$WORK/$name-uroced-check.txt")"
  else
    cat "$WORK/$name-uroced-check.txt"
    fail "$name: uroced's own capture has invalid frames"
  fi
  ip netns exec "$NS" nft list table bridge uroce_cm 2>/dev/null | grep -o 'packets [0-9]*' |
    sed "s/^/$name: REJs (no listener) dropped by nftables: /"
  if [ "$loss" = 1 ]; then
    ip netns exec "$NS" nft list table bridge uroce_loss 2>/dev/null | grep -o 'packets [0-9]*' |
      sed 's/^/loss: frames dropped by nftables: /'
    tc -n "$NS" -s qdisc show 2>/dev/null | grep -A1 netem | grep -o 'dropped [0-9]*' |
      sed 's/^/loss: netem /'
  fi
  teardown
}

# Runs through the verbs shim (unmodified tools on both sides), when it is given: every pt- and
# shim- run goes both ways (uroce as client, then as server), with the tools' own 67 ms ACK
# timeout (-u not given). They passed 3 runs out of 3 in a row (doc/interop.md, "Default runs").
# UROCE_INTEROP_SHIM_1500 / _4200 / _LOSS replace a scenario's list (pts-TEST: uroce as server
# only).
SHIM_1500=${UROCE_INTEROP_SHIM_1500:-pt-write_bw:65536 pt-read_bw:65536 pt-send_bw:65536 pt-atomic_bw:8 pt-write_lat:64 pt-send_lat:64 pt-read_lat:64 pt-atomic_lat:8 shim-rc:4096 shim-ud:1024}
SHIM_4200=${UROCE_INTEROP_SHIM_4200:-pt-write_bw:65536 pt-read_bw:65536 pt-send_bw:65536 pt-atomic_bw:8 pt-write_lat:64 pt-send_lat:64 pt-read_lat:64 pt-atomic_lat:8 shim-rc:10000 shim-ud:4096}
# Not shim-rc under loss: two unmodified ibv_rc_pingpongs race at the end (the last ACK lost,
# the peer exits, the retransmissions reach no QP: RETRY_EXC_ERR against any peer; doc/interop.md
# "The last ACK of a pingpong under loss"); the rxe_peer loss pingpongs wait that race out.
SHIM_LOSS=${UROCE_INTEROP_SHIM_LOSS:-pt-write_bw:65536 pt-read_bw:65536 pt-send_bw:65536 pt-atomic_bw:8}
# RoCE v2 over IPv6 (issue 20): GID index 0 (the link-local GIDs) and the GID of the global
# address on each side, pingpongs and perftest, uroce as client and as server.
SHIM_IPV6=${UROCE_INTEROP_SHIM_IPV6:-shim-rc:4096@ll shim-ud:1024@ll pt-write_bw:65536@ll pt-send_lat:64@ll pt-write_lat:64@ll shim-rc:4096@v6 shim-ud:1024@v6 pt-write_bw:65536@v6 pt-send_lat:64@v6 pt-write_lat:64@v6}
# The pingpong runs with rxe_peer on the host side (an empty value leaves them out).
PP_1500=${UROCE_INTEROP_PP_1500-rc:4096 rc:1 uc:3000 ud:1024}
PP_4200=${UROCE_INTEROP_PP_4200-rc:10000 uc:9000 ud:4096}
PP_LOSS=${UROCE_INTEROP_PP_LOSS-rc:4096 rc:20000}
PP_IPV6=${UROCE_INTEROP_PP_IPV6-rc:4096@v6 ud:1024@ll}
# The rdma_cm programs against the guest's kernel rdma_cm (issue 15), each with uroce as client
# and as server (cms-PROG: uroce as server only). UROCE_INTEROP_CM replaces the list.
CM_RUNS=${UROCE_INTEROP_CM:-cm-rping:64 cm-ucmatose:100 cm-udaddy:100 cm-write_bw:65536 cm-send_bw:65536}
# The same over IPv6 (the global addresses; not in the default list: rxe_interop_cm6).
# rping's 4000-byte buffer fills path-MTU packets (the capture check wants some).
CM6_RUNS=${UROCE_INTEROP_CM6:-cm-rping:4000@v6 cm-ucmatose:100@v6 cm-udaddy:100@v6 cm-rping:4000@ll cm-udaddy:100@ll}
# run_scenario NAME ETH_MTU LOSS RUNS: scenario with its start and end lines (elapsed time,
# results), torn down whichever way it ended; one line of the final summary.
SUMMARY=()
run_scenario() {
  local name=$1 t fails0=$FAILS passes0=$PASSES
  t=$(date +%s)
  echo "=== [$(since "$T0") s] scenario $name starts ($(date -u +%H:%M:%S) UTC)"
  scenario "$@"
  teardown
  local f=$((FAILS - fails0)) p=$((PASSES - passes0)) verdict=ok
  [ "$f" -eq 0 ] || verdict=FAILED
  echo "=== [$(since "$T0") s] scenario $name ends after $(since "$t") s: $verdict, $p checks passed, $f failed"
  SUMMARY+=("$(printf '%-8s %-6s %4d s  %3d passed  %3d failed' "$name" "$verdict" "$(since "$t")" "$p" "$f")")
}
for s in $SCENARIOS; do
  case $s in
    mtu1500) run_scenario mtu1500 1500 0 "$(echo $PP_1500 ${SHIM:+$SHIM_1500})" ;;
    mtu4200) run_scenario mtu4200 4200 0 "$(echo $PP_4200 ${SHIM:+$SHIM_4200})" ;;
    loss) run_scenario loss 1500 1 "$(echo $PP_LOSS ${SHIM:+$SHIM_LOSS})" ;;
    ipv6) run_scenario ipv6 1500 0 "$(echo $PP_IPV6 ${SHIM:+$SHIM_IPV6})" ;;
    mw) if [ -n "$SHIM" ] && [ -x "$MW_PEER" ]; then run_scenario mw 1500 0 "mw:65536"
    else fail "scenario mw: needs the verbs shim (interop.sh's 6th argument) and $MW_PEER"; fi ;;
    cm | cm6) if [ -n "$CMSHIM" ]; then
      if [ "$s" = cm ]; then run_scenario cm 1500 0 "$CM_RUNS"; else run_scenario cm6 1500 0 "$CM6_RUNS"; fi
    else fail "scenario $s: no drop-in librdmacm given (interop.sh's 7th argument)"; fi ;;
    *) fail "unknown scenario '$s'" ;;
  esac
done
echo "=== interop summary (budget $BUDGET s, image $CACHE)"
printf '    %s\n' "${SUMMARY[@]}"
echo "interop: $FAILS failure(s), $PASSES checks passed in $(since "$T0") s"
[ "$FAILS" -eq 0 ]
