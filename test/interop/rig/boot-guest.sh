#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Boots one guest of the image build-image.sh made, under qemu TCG, on a tap of netns.sh's
# namespace: eth0 gets its address, rxe0 is created on it, the command runs, the guest powers
# off. doc/interop.md, "The rig".
#
# Usage: boot-guest.sh -n NETNS -t TAP -a IP/NN (-c 'COMMAND' | -s SCRIPT) [options]
#   -n NETNS   the namespace of the tap (qemu runs inside it)             required
#   -t TAP     the guest's tap (netns.sh: tap0, tap1, ...)                required
#   -a IP/NN   eth0's address, e.g. 10.77.0.11/24 (MAC 52:54 + the IP)     required
#   -c CMD     shell command line to run (sh, cwd /tmp, as root)
#   -s SCRIPT  script file to run instead
#   -k DIR     the image (build-image.sh's IMAGE_DIR)          default /tmp/uroce-interop-image
#   -m MTU     eth0's MTU                                                  default 1500
#   -M MIB     guest memory                                                default 512
#   -N NICE    qemu's nice level (-19..19)                                 default 0
#   -T SECS    power the guest off after SECS, whatever it does            default 600
#   -d DIR     the 9p share (cmd.sh, output.log, rc)    default a temporary directory, removed
#   -R         no rxe0 (plain networking)
#   -S         a shell on the console after the command (interactive; no -T)
# The console (kernel, /init, the command's output) is this script's stdout. The exit status is
# the command's; 124 when -T ended the guest first, 125 when the guest ended without finishing.
#
# qemu runs with -accel tcg,thread=multi and -smp 1,maxcpus=2: Debian 12's qemu 7.2 drops the
# guest's memory barriers when the machine can have only one CPU, which can stop the guest's
# virtio-net for good (doc/interop.md, "The guest's NIC stops transmitting"). The guest still
# has one vCPU (its /sys/devices/system/cpu/possible reads 0-1).
set -euo pipefail

usage() {
  sed -n '/^# Usage:/,/^# The console/p' "$0" | sed 's/^# \{0,1\}//' | head -n -1 >&2
  exit 2
}
die() {
  echo "boot-guest: $*" >&2
  exit 1
}
NS="" TAP="" ADDR="" CMD="" SCRIPT="" IMAGE=/tmp/uroce-interop-image MTU=1500 MEM=512 NICE=0
LIMIT=600 SHARE="" RXE=1 SHELL_AT_END=0
while getopts "n:t:a:c:s:k:m:M:N:T:d:RS" o; do
  case $o in
    n) NS=$OPTARG ;; t) TAP=$OPTARG ;; a) ADDR=$OPTARG ;; c) CMD=$OPTARG ;;
    s) SCRIPT=$OPTARG ;; k) IMAGE=$OPTARG ;; m) MTU=$OPTARG ;; M) MEM=$OPTARG ;;
    N) NICE=$OPTARG ;; T) LIMIT=$OPTARG ;; d) SHARE=$OPTARG ;; R) RXE=0 ;; S) SHELL_AT_END=1 ;;
    *) usage ;;
  esac
done
[ $OPTIND -gt $# ] || usage
[ -n "$NS" ] && [ -n "$TAP" ] && [ -n "$ADDR" ] || usage
[ -n "$CMD" ] || [ -n "$SCRIPT" ] || [ "$SHELL_AT_END" = 1 ] || usage
[[ $ADDR =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})/[0-9]{1,2}$ ]] ||
  die "-a '$ADDR' is not IPv4/prefix"
MAC=$(printf '52:54:%02x:%02x:%02x:%02x' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" \
  "${BASH_REMATCH[3]}" "${BASH_REMATCH[4]}")  # locally administered, one per guest address
case $MTU$MEM$LIMIT in *[!0-9]*) die "-m, -M and -T take numbers" ;; esac
[[ $NICE =~ ^-?[0-9]{1,2}$ ]] && [ "$NICE" -ge -19 ] && [ "$NICE" -le 19 ] ||
  die "-N '$NICE' is not a nice level (-19..19)"
[ "$(id -u)" = 0 ] || die "needs root (qemu runs in the namespace $NS)"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found (scripts/install-deps.sh installs it)"
[ -s "$IMAGE/vmlinux" ] && [ -s "$IMAGE/initramfs.cpio.gz" ] ||
  die "no image in $IMAGE (build it: $(dirname "$0")/build-image.sh $IMAGE)"
ip -n "$NS" link show "$TAP" >/dev/null 2>&1 || die "no tap $TAP in namespace $NS (netns.sh up $NS)"

if [ -z "$SHARE" ]; then
  SHARE=$(mktemp -d /tmp/uroce-guest.XXXXXX)
  trap 'rm -rf "$SHARE"' EXIT
else
  mkdir -p "$SHARE"
fi
rm -f "$SHARE/rc" "$SHARE/output.log" "$SHARE/cmd.sh"
if [ -n "$SCRIPT" ]; then
  cp "$SCRIPT" "$SHARE/cmd.sh"
elif [ -n "$CMD" ]; then
  printf '%s\n' "$CMD" >"$SHARE/cmd.sh"
fi
echo "[boot] netns $NS tap $TAP eth0 $ADDR mac $MAC mtu $MTU, share $SHARE"

# -nodefaults, -serial stdio: no display, no extra device, the console is our stdout;
# -no-reboot with panic=-1: a guest panic ends qemu; romfile= skips the NIC's iPXE ROM.
qemu=(ip netns exec "$NS" nice -n "$((NICE - $(nice)))" qemu-system-x86_64 -machine pc
  -accel tcg,thread=multi -cpu max -smp 1,maxcpus=2 -m "$MEM"
  -nodefaults -no-user-config -nographic -no-reboot -serial stdio
  -kernel "$IMAGE/vmlinux" -initrd "$IMAGE/initramfs.cpio.gz"
  -append "console=ttyS0 panic=-1 loglevel=4 uroce.ip=$ADDR uroce.mtu=$MTU uroce.rxe=$RXE uroce.shell=$SHELL_AT_END"
  -netdev "tap,id=n0,ifname=$TAP,script=no,downscript=no"
  -device "virtio-net-pci,netdev=n0,mac=$MAC,romfile="
  -virtfs "local,path=$SHARE,mount_tag=uroce,security_model=none,id=uroce")
t0=$(date +%s%N)
qrc=0
if [ "$SHELL_AT_END" = 1 ]; then
  "${qemu[@]}" || qrc=$?
else
  # qemu in the background so that a TERM to this script stops it too (bash runs traps only
  # between commands, never while it waits for a foreground child).
  timeout "$LIMIT" "${qemu[@]}" </dev/null &
  qpid=$!
  trap 'kill -TERM $qpid 2>/dev/null; wait $qpid; exit 143' TERM INT
  wait $qpid || qrc=$?
  trap - TERM INT
fi
echo "[boot] guest ran $((($(date +%s%N) - t0) / 1000000)) ms (qemu status $qrc)"
if [ -s "$SHARE/rc" ]; then
  exit "$(cat "$SHARE/rc")"
fi
[ "$qrc" = 124 ] && { echo "[boot] the guest did not finish within $LIMIT s (-T)"; exit 124; }
echo "[boot] the guest ended without finishing its command"
exit 125
