#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration test: an attacker on the segment against a live RC connection (doc/security.md).
#
#   uroce-atk-PID-a: uroced A on net_af_packet over veth ua<PID>a   (10.79.0.1)
#   uroce-atk-PID-b: uroced B on net_af_packet over veth ua<PID>b   (10.79.0.2)
#   uroce-atk-PID-m: the segment: the other ends of both veths, nftables forwarding every frame
#                    to the other side; the attacker (roce_attacker.py) sends raw frames with
#                    valid ICRCs on either veth and, on path, reads what passes.
# The legitimate app (verbs_app victim) runs rounds of RC WRITE + READ between A and B the whole
# time and checks every word of both MRs after each round. Phases, each checked with uroce-stat:
#   blind      forged WRITE / READ / ACK / NAK / RNR NAK / CNP to guessed QPNs with the peer's
#              address: every frame counted in engine.drop.no_qp, the connection keeps going
#   wrongsrc   the same to the live QPNs from the attacker's own address: engine.drop.address
#   cnp        a CNP flood at the live QPNs: every CNP counted in qp.N.cnp_rcvd, still going
#   responses  ACK / NAK / RNR NAK at the requester's live QPN with PSNs outside its window:
#              engine.drop.bad_response / duplicate, still going
#   rkey       WRITEs and READs with guessed rkeys at the responder's next 256 PSNs (read off
#              the wire): the responder NAKs (remote access error) and its QP enters ERR, the
#              requester's WR fails with an IBTA status, or every frame missed the PSN
# At the end the app must report no foreign word in any MR and only IBTA statuses (exit 0).
# Needs root, nft and python3 with scapy (/usr/bin/python3). Every wait is bounded; everything
# it creates (namespaces, veths, processes, files, DPDK runtime directories) is removed on exit.
# Usage: uroced_attack.sh UROCED UROCE_STAT VERBS_APP ROCE_ATTACKER_PY
set -uo pipefail

UROCED=${1:?usage: $0 UROCED UROCE_STAT VERBS_APP ROCE_ATTACKER_PY}
STAT=${2:?}
APP=${3:?}
ATTACKER=${4:?}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
need_root "network namespaces, veths, nftables, raw sockets"
need_tools ip nft timeout
/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null ||
  { echo "FAIL: /usr/bin/python3 without scapy (python3-scapy)"; exit 1; }

WORK=$(mktemp -d /tmp/uroce-atk-XXXXXX)
pass() { echo "ok: [${SECONDS}s] $*"; }
netns_cleanup_hook() { [ "$FAILS" -ne 0 ] && { echo "--- victim"; cat "$WORK/victim.log" 2>/dev/null; }; }

# shellcheck source=netns_pair.sh
. "$(dirname "$0")/netns_pair.sh"
netns_pair atk ua
ip netns exec "$NS_M" nft -f - <<EOF || { echo "FAIL: nft rules (netdev ingress, fwd)"; exit 1; }
table netdev uroce_segment {
  chain a_to_b { type filter hook ingress device "$MA" priority 0; fwd to "$MB"; }
  chain b_to_a { type filter hook ingress device "$MB" priority 0; fwd to "$MA"; }
}
EOF
MAC_A=$(ip -n "$NS_A" -br link show "$VA" | awk '{ print $3 }')
MAC_B=$(ip -n "$NS_B" -br link show "$VB" | awk '{ print $3 }')

FRAMECNT=4096
netns_conf a "$VA" 10.79.0.1
netns_conf b "$VB" 10.79.0.2
netns_start_daemons
pass "two uroced on af_packet, a segment between them (pids $PID_A, $PID_B)"

stat() {  # stat NAME KEY -> value (0 if absent)
  local v
  v=$(netns_stat "$@")
  echo "${v:-0}"
}
attack() {  # attack PHASE [ARGS]: runs the attacker in the segment; its JSON in $WORK/PHASE.json
  local ph=$1
  shift
  if ! timeout 120 ip netns exec "$NS_M" /usr/bin/python3 "$ATTACKER" "$ph" --to-a "$MA" --to-b "$MB" \
      --mac-a "$MAC_A" --mac-b "$MAC_B" --ip-a 10.79.0.1 --ip-b 10.79.0.2 \
      --qpns "$WORK/qpns" "$@" >"$WORK/$ph.json" 2>"$WORK/$ph.err"; then
    fail "$ph: the attacker failed: $(cat "$WORK/$ph.err")"
    return 1
  fi
  sleep 1  # the daemons poll what is queued
}
sent() {  # sent PHASE SIDE [KIND]: frames the attacker sent to that side (all kinds if none)
  /usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))[sys.argv[2]]
print(d.get(sys.argv[3], 0) if len(sys.argv) > 3 else sum(d.values()))' "$WORK/$1.json" "${@:2}"
}
progress() {  # progress WHAT: the connection is in RTS on both sides and still moving data
  local t0 t1
  t0=$(stat a "qp.$QA.tx_pkts")
  for _ in $(seq 100); do
    sleep 0.1
    t1=$(stat a "qp.$QA.tx_pkts")
    [ "$t1" -gt "$t0" ] && break
  done
  if [ "$t1" -gt "$t0" ] && [ "$(stat a "qp.$QA.state")" = 3 ] && [ "$(stat b "qp.$QB.state")" = 3 ]; then
    pass "$1: the connection keeps running (RTS both sides, A sent $((t1 - t0)) more packets)"
  else
    fail "$1: the connection stalled or left RTS (A $(stat a "qp.$QA.state"), B $(stat b "qp.$QB.state"))"
  fi
}

timeout 700 "$APP" victim "$WORK/uroced-a.sock" "$WORK/uroced-b.sock" "$WORK" >"$WORK/victim.log" 2>&1 &
PID_APP=$!
for _ in $(seq 600); do [ -s "$WORK/qpns" ] && break; kill -0 "$PID_APP" 2>/dev/null || break; sleep 0.1; done
[ -s "$WORK/qpns" ] || { fail "the victim did not connect within 60 s"; exit 1; }
read -r QA QB <"$WORK/qpns"
pass "victim: RC QP $QA on A <-> QP $QB on B"
progress "before the attack"

# --- blind: guessed QPNs, the peer's addresses
n0a=$(stat a engine.drop.no_qp) n0b=$(stat b engine.drop.no_qp)
attack blind --count 1400 || exit 1
da=$(( $(stat a engine.drop.no_qp) - n0a )) db=$(( $(stat b engine.drop.no_qp) - n0b ))
sa=$(sent blind a) sb=$(sent blind b)
echo "  blind: sent A $(cat "$WORK/blind.json")"
[ "$da" -eq "$sa" ] && [ "$db" -eq "$sb" ] &&
  pass "blind: $sa + $sb forged frames (WRITE, READ, ACK, NAK, RNR NAK, CNP) counted as no_qp" ||
  fail "blind: engine.drop.no_qp grew by $da (A) / $db (B), the attacker sent $sa / $sb"
progress "blind"

# --- wrongsrc: the live QPNs from the attacker's own address
n0a=$(stat a engine.drop.address) n0b=$(stat b engine.drop.address)
attack wrongsrc --count 700 || exit 1
da=$(( $(stat a engine.drop.address) - n0a )) db=$(( $(stat b engine.drop.address) - n0b ))
sa=$(sent wrongsrc a) sb=$(sent wrongsrc b)
[ "$da" -eq "$sa" ] && [ "$db" -eq "$sb" ] &&
  pass "wrongsrc: $sa + $sb frames at the live QPNs from a foreign address counted as address" ||
  fail "wrongsrc: engine.drop.address grew by $da (A) / $db (B), the attacker sent $sa / $sb"
progress "wrongsrc"

# --- cnp: a CNP flood at the live QPNs (on path)
c0a=$(stat a "qp.$QA.cnp_rcvd") c0b=$(stat b "qp.$QB.cnp_rcvd")
attack cnp --count 2000 || exit 1
da=$(( $(stat a "qp.$QA.cnp_rcvd") - c0a )) db=$(( $(stat b "qp.$QB.cnp_rcvd") - c0b ))
[ "$da" -eq "$(sent cnp a)" ] && [ "$db" -eq "$(sent cnp b)" ] &&
  pass "cnp: $da + $db CNPs counted in qp.N.cnp_rcvd" ||
  fail "cnp: qp.N.cnp_rcvd grew by $da (A) / $db (B), the attacker sent $(sent cnp a) / $(sent cnp b)"
progress "cnp"

# --- responses: ACK / NAK / RNR NAK at A's QP, PSNs outside its window (on path)
b0=$(stat a engine.drop.bad_response) u0=$(stat a engine.drop.duplicate)
attack responses --count 600 || exit 1
db=$(( $(stat a engine.drop.bad_response) - b0 )) du=$(( $(stat a engine.drop.duplicate) - u0 ))
ahead=$(sent responses a ahead) past=$(sent responses a past)
[ "$db" -ge "$ahead" ] && [ "$du" -ge "$past" ] &&
  pass "responses: $ahead ahead of the window counted as bad_response ($db), $past behind it as duplicate ($du)" ||
  fail "responses: bad_response +$db (sent $ahead ahead), duplicate +$du (sent $past past)"
progress "responses"

# --- rkey: WRITE and READ at B's expected PSN with guessed rkeys (on path)
attack rkey || exit 1
sleep 3  # an RC error shows within retry_cnt x 67 ms
st_b=$(stat b "qp.$QB.state") st_a=$(stat a "qp.$QA.state")
echo "  rkey: expected PSN $(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["expected_psn"])' "$WORK/rkey.json"); B's QP state $st_b, A's $st_a"
: >"$WORK/stop"
wait "$PID_APP"
rc=$?
PID_APP=""
sed 's/^/  app: /' "$WORK/victim.log"
read -r rounds status <"$WORK/result" 2>/dev/null
if [ $rc -eq 0 ] && grep -q "^0 failure(s)" "$WORK/victim.log"; then
  pass "victim: $rounds rounds, final status ${status:-?}; no word of either MR differs from what the app wrote"
else
  fail "victim: exit $rc"
fi
if [ "$st_b" = 6 ]; then
  [ "${status:-0}" != 0 ] && pass "rkey: B's QP went to ERR (remote access NAK) and A's WR failed with IBTA status $status" ||
    fail "rkey: B's QP is in ERR but the victim saw no error"
else
  pass "rkey: the forged requests lost the race to the victim's own (B's QP state $st_b), nothing written"
fi
kill -0 "$PID_A" 2>/dev/null && kill -0 "$PID_B" 2>/dev/null || fail "a daemon died"
for d in a b; do stop_uroced $d '^engine'; done

echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
