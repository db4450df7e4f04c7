#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# uroced's command line without DPDK: --help, --version, --check, configuration errors and their
# exit codes, the libibverbs guard. Needs no root and starts no EAL.
# Usage: uroced_cli_test.sh PATH/TO/uroced PATH/TO/uroced.conf.sample
set -uo pipefail
UROCED=${1:?} SAMPLE=${2:?}
WORK=$(mktemp -d /tmp/uroced-cli-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
FAILS=0
expect() {  # expect NAME WANT_RC PATTERN -- command...
  local name=$1 want=$2 pat=$3; shift 4
  local out rc
  out=$(timeout 30 "$@" 2>&1); rc=$?
  if [ "$rc" -eq "$want" ] && grep -qE -- "$pat" <<<"$out"; then
    echo "ok: $name"
  else
    echo "FAIL: $name: exit $rc (want $want), output:"; echo "$out"; FAILS=$((FAILS + 1))
  fi
}
CLEAN=(env -u LD_LIBRARY_PATH -u LD_PRELOAD)
expect "--help names the transport engine and the control socket" 0 "transport engine on every port" -- "${CLEAN[@]}" "$UROCED" --help
expect "--help lists the exit codes" 0 "Exit status: 0 clean shutdown" -- "${CLEAN[@]}" "$UROCED" --help
expect "--version" 0 "^uroced [0-9]+\.[0-9]+\.[0-9]+$" -- "${CLEAN[@]}" "$UROCED" --version
expect "--check of the sample" 0 "port p0: device=net_memif0.*mtu=1500 \(IB MTU 1024\)" -- \
  "${CLEAN[@]}" "$UROCED" -c "$SAMPLE" --check
expect "--check with overrides" 0 "mtu=4200 \(IB MTU 4096\)" -- \
  "${CLEAN[@]}" "$UROCED" -c "$SAMPLE" --set port.p0.mtu=4200 --check
printf '[port p0]\ndevice = net_ring0\nmtu = 99999\n' >"$WORK/bad.conf"
expect "bad value: exit 2, file:line and key" 2 "$WORK/bad.conf:3: key 'mtu' in \[port p0\]: value 99999 out of range" -- \
  "${CLEAN[@]}" "$UROCED" -c "$WORK/bad.conf" --check
printf '[daemon]\nmbufs = 1023\n' >"$WORK/noport.conf"
expect "no port: exit 2" 2 "no \[port NAME\] section" -- "${CLEAN[@]}" "$UROCED" -c "$WORK/noport.conf"
expect "missing file: exit 2" 2 "cannot open config file" -- "${CLEAN[@]}" "$UROCED" -c "$WORK/none.conf"
expect "unknown argument: exit 2" 2 "unknown argument '--bogus'" -- "${CLEAN[@]}" "$UROCED" --bogus
expect "--set without value: exit 2" 2 "--set needs a value" -- "${CLEAN[@]}" "$UROCED" --set
mkdir "$WORK/shim" && : >"$WORK/shim/libibverbs.so.1"
expect "foreign libibverbs on LD_LIBRARY_PATH: exit 3" 3 "refusing to start: LD_LIBRARY_PATH directory" -- \
  env -u LD_PRELOAD LD_LIBRARY_PATH="$WORK/shim" "$UROCED" -c "$SAMPLE"
# (the loader really preloads the system library here; an ASan build must be told that a
# preload ahead of its runtime is intended)
expect "foreign libibverbs in LD_PRELOAD: exit 3" 3 "refusing to start: LD_PRELOAD" -- \
  env -u LD_LIBRARY_PATH LD_PRELOAD="libibverbs.so.1" \
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "$UROCED" -c "$SAMPLE"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
