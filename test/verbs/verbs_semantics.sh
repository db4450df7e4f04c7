#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs verbs_semantics_test (our own gtest suite over the shim: WC statuses, SRQ, UD + GRH,
# immediate data, inline, SGE lists, fences, QP state errors, bad arguments, qp_ex / cq_ex,
# completion channels with poll(), another app SIGKILLed mid-transfer) against two uroced joined
# by net_memif: UROCE_SOCKET="A:B", so device 0 is daemon A and device 1 daemon B.
# Usage: verbs_semantics.sh PATH/TO/uroced SHIM_DIR PATH/TO/verbs_semantics_test [gtest args]
set -uo pipefail

UROCED=${1:?usage: $0 UROCED SHIM_DIR TEST}
SHIM=${2:?usage: $0 UROCED SHIM_DIR TEST}
TEST=${3:?usage: $0 UROCED SHIM_DIR TEST}
shift 3
for t in ibv_devinfo timeout; do
  command -v $t >/dev/null || { echo "FAIL: '$t' not found (scripts/install-deps.sh installs it)"; exit 1; }
done
NAME=vsem
IP_NET=10.84.0
# shellcheck source=two_uroced.sh
. "$(dirname "$0")/two_uroced.sh"

# The test binary links the shim directly (build rpath); LD_LIBRARY_PATH is set as well so the
# --writer child it spawns gets the same library whatever the rpath says.
on "$SOCK_A:$SOCK_B" timeout -k 10 240 "$TEST" "$@"
rc=$?
[ $rc -eq 0 ] || fail "verbs_semantics_test exit $rc"
kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
