#!/usr/bin/env bash
# The installed uroce (doc/install.md): `meson install` into a scratch DESTDIR, then
#   1. the expected files are in place: programs, uroce-run, the shim in its private library
#      directory (and nowhere on the default loader path), the configuration, the unit, docs;
#   2. the service unit passes `systemd-analyze verify` (its paths rebased onto the DESTDIR);
#   3. uroce-run refuses uroced, unknown options and a missing shim with clear errors;
#   4. two installed uroced on net_memif, and unmodified ibv_rc_pingpong (data checked, -c)
#      started through the installed uroce-run, server on one daemon, client on the other.
# Usage: install.sh BUILD_DIR   (needs root, like the other integration tests)
set -uo pipefail
# meson test puts the build tree's shim on LD_LIBRARY_PATH: only the installed one may be used.
unset LD_LIBRARY_PATH
BUILD=$(cd "${1:?usage: install.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)

DEST=$(mktemp -d /tmp/uroce-install-XXXXXX)
trap 'rm -rf "$DEST"' EXIT
if ! meson install -C "$BUILD" --no-rebuild --destdir "$DEST" >"$DEST.log" 2>&1; then
  echo "FAIL: meson install"; tail -20 "$DEST.log"; rm -f "$DEST.log"; exit 1
fi
rm -f "$DEST.log"
prefix=$(meson introspect "$BUILD" --buildoptions |
  python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
ROOT=$DEST$prefix
BIN=$ROOT/bin
SHIM=$(dirname "$(find "$ROOT" -name libibverbs.so.1 | head -1)")
FAILS=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }

# --- 1. files
for f in "$BIN/uroced" "$BIN/uroce-run" "$BIN/uroce-stat" "$BIN/uroce-perf" "$BIN/uroce-pcap-check" \
         "$ROOT/lib/systemd/system/uroced@.service" "$ROOT/share/doc/uroce/install.md" \
         "$ROOT/share/doc/uroce/README.md"; do
  [ -e "$f" ] || bad "not installed: ${f#"$DEST"}"
done
conf=$(find "$DEST" -path '*/uroce/uroced.conf' | head -1)
[ -n "$conf" ] && grep -q '^\[daemon\]' "$conf" || bad "no uroce/uroced.conf with a [daemon] section"
case $SHIM in
  */uroce) ok "shim in its private directory ${SHIM#"$DEST"}" ;;
  *) bad "shim not in a private uroce directory: ${SHIM#"$DEST"}" ;;
esac
if find "$ROOT/lib" -maxdepth 2 -name 'libibverbs.so*' | grep -v '/uroce/' | grep -q .; then
  bad "a libibverbs.so lands on the default loader path"
fi
# The drop-in librdmacm (doc/cm.md, built when librdmacm-dev is installed): beside the verbs
# shim, never on the default loader path.
[ -e "$SHIM/librdmacm.so.1" ] && ok "librdmacm.so.1 beside the shim"
if find "$ROOT/lib" -maxdepth 2 -name 'librdmacm.so*' | grep -v '/uroce/' | grep -q .; then
  bad "a librdmacm.so lands on the default loader path"
fi
[ $FAILS -eq 0 ] && ok "installed files in place under $prefix"

# --- 2. the unit
unit=$DEST/uroced@check.service
sed "s|$prefix/|$ROOT/|g" "$ROOT/lib/systemd/system/uroced@.service" >"$unit"
if command -v systemd-analyze >/dev/null; then
  if out=$(systemd-analyze verify "$unit" 2>&1) && [ -z "$out" ]; then
    ok "systemd-analyze verify uroced@.service"
  else
    bad "systemd-analyze verify: $out"
  fi
else
  bad "systemd-analyze not found (scripts/install-deps.sh installs systemd)"
fi
grep -q "^ExecStart=$prefix/bin/uroced -c .*%i.conf" "$ROOT/lib/systemd/system/uroced@.service" ||
  bad "the unit's ExecStart does not run the installed uroced with the instance's config"

# --- 3. uroce-run's errors
expect_refusal() {  # expect_refusal WANT_RC PATTERN ARGS...
  local want=$1 pat=$2 out rc
  shift 2
  out=$("$BIN/uroce-run" "$@" 2>&1); rc=$?
  if [ $rc -eq "$want" ] && grep -q "$pat" <<<"$out"; then ok "uroce-run $*: exit $rc"; else
    bad "uroce-run $*: exit $rc (want $want, '$pat'): $out"; fi
}
expect_refusal 2 "refusing to wrap uroced" "$BIN/uroced" -h
expect_refusal 2 "refusing to wrap uroced" -s /tmp/x.sock uroced
expect_refusal 2 "unknown option" --bogus true
expect_refusal 2 "needs a socket path" -s
out=$(UROCE_SHIM_DIR=$DEST/none "$BIN/uroce-run" true 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "not found" <<<"$out" && ok "uroce-run with no shim: exit 1" ||
  bad "uroce-run with no shim: exit $rc: $out"
out=$(env -u LD_LIBRARY_PATH "$BIN/uroce-run" -s /tmp/s1.sock:/tmp/s2.sock sh -c 'echo "$UROCE_SOCKET|$LD_LIBRARY_PATH"')
[ "$out" = "/tmp/s1.sock:/tmp/s2.sock|$SHIM" ] && ok "uroce-run sets UROCE_SOCKET and the loader path" ||
  bad "uroce-run environment: '$out' (want '/tmp/s1.sock:/tmp/s2.sock|$SHIM')"

# --- 4. ibv_rc_pingpong through the installed uroce-run against the installed uroced
UROCED=$BIN/uroced NAME=inst IP_NET=10.86.0
before=$FAILS  # common.sh (sourced by two_uroced.sh) starts its own count
# shellcheck source=../verbs/two_uroced.sh
. "$HERE/../verbs/two_uroced.sh"   # its EXIT trap stops both daemons and removes its WORK
trap 'cleanup; rm -rf "$DEST"' EXIT
FAILS=$((FAILS + before))
PORT=$((20000 + ($$ % 20000)))
nice -n 10 timeout 60 "$BIN/uroce-run" -s "$SOCK_B" ibv_rc_pingpong -g 1 -c -n 100 -s 4096 \
  -p "$PORT" >"$WORK/server.log" 2>&1 &
PID_S=$!
for _ in $(seq 100); do
  ss -ltnH "sport = :$PORT" 2>/dev/null | grep -q . && break
  sleep 0.1
done
nice -n 10 timeout 60 "$BIN/uroce-run" --socket="$SOCK_A" ibv_rc_pingpong -g 1 -c -n 100 -s 4096 \
  -p "$PORT" 127.0.0.1 >"$WORK/client.log" 2>&1
rc_c=$?
wait "$PID_S"; rc_s=$?
PID_S=""
if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && grep -qE "^[0-9]+ iters in " "$WORK/client.log"; then
  pass "ibv_rc_pingpong -c through the installed uroce-run: $(grep -E 'bytes in' "$WORK/client.log")"
else
  fail "ibv_rc_pingpong through uroce-run: client exit $rc_c, server exit $rc_s"
  sed 's/^/  server: /' "$WORK/server.log"; sed 's/^/  client: /' "$WORK/client.log"
fi
echo "$FAILS failure(s)"
[ "$FAILS" -eq 0 ]
