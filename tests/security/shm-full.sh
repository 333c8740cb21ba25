#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/security/shm-full.sh BUILD — any user can fill /dev/shm; no libsdp
# process may die of it (SIGBUS on a page of a shared segment that tmpfs
# cannot supply).  In a private mount namespace with a 1 MiB tmpfs on
# /dev/shm: a server and a held connection start, the tmpfs is filled, then
# a new client process connects; every stream's SHA-256 must match, the new
# connection is over shm, and the server lives on.  sdpstat, run by root,
# survives another user's file whose records are holes.
set -u
B=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
fail() { echo "not ok - $*"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a private mount namespace)"; exit 77; }
W=$(mktemp -d /tmp/sdp-shmfull.XXXXXX)
trap 'rm -rf "$W"' EXIT
export B HERE W
exec unshare -m --propagation private bash -s <<'NS'
set -u
fail() { echo "not ok - $*"; exit 1; }
mount -t tmpfs -o size=1m,mode=1777 sdp-test-shm /dev/shm || fail "cannot mount a tmpfs on /dev/shm"
RUN="$B/bin/sdp_run"
timeout 120 "$RUN" python3 "$HERE/echo.py" server "$W/port" 2>"$W/server.err" &
SRV=$!
for _ in $(seq 200); do [ -s "$W/port" ] && break; sleep 0.05; done
[ -s "$W/port" ] || fail "the server did not start: $(cat "$W/server.err")"
read -r PORT _ <"$W/port"
# A hostile publisher: its file's header claims every record, whose pages
# are holes; reading one with /dev/shm full is SIGBUS.
chmod 755 "$W"
cp "$HERE/fakestat.py" "$W/"
runuser -u nobody -- python3 "$W/fakestat.py" >"$W/fake.out" 2>&1 &
FAKE=$!
for _ in $(seq 200); do grep -q ready "$W/fake.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$W/fake.out" || fail "the hostile publisher did not start: $(cat "$W/fake.out")"
mkfifo "$W/go"
timeout 60 "$RUN" python3 "$HERE/echo.py" client "$PORT" 2000000 hold <"$W/go" >"$W/held.out" 2>&1 &
HELD=$!
exec 7>"$W/go"
for _ in $(seq 200); do grep -q holding "$W/held.out" && break; sleep 0.05; done
grep -q holding "$W/held.out" || fail "the held client did not connect: $(cat "$W/held.out")"
dd if=/dev/zero of=/dev/shm/fill bs=4k 2>/dev/null
left=$(df --output=avail -B1 /dev/shm | tail -1)
[ "$left" -lt 8192 ] || fail "the tmpfs is not full: $left bytes left"
echo "# /dev/shm full ($left bytes left)"
out=$(timeout 60 "$RUN" python3 "$HERE/echo.py" client "$PORT" 3000000 2>&1); rc=$?
[ $rc = 0 ] || fail "a new client with /dev/shm full exited $rc${out:+: $out}"
[ "$out" = "ok transport=1" ] || fail "the new client's connection: $out"
echo "ok - a new client connects over shm with /dev/shm full"
out=$(timeout 60 "$B/bin/sdpstat" -a 2>&1); rc=$?
[ $rc = 0 ] || fail "sdpstat (root) with a hostile file and /dev/shm full exited $rc: $out"
echo "$out" | grep -q LISTEN || fail "sdpstat no longer lists the server: $out"
echo "ok - sdpstat reads past a hostile file's holes with /dev/shm full"
echo >&7
wait $HELD; rc=$?
[ $rc = 0 ] || fail "the held connection exited $rc: $(cat "$W/held.out")"
grep -qx "ok transport=1" "$W/held.out" || fail "the held connection: $(cat "$W/held.out")"
echo "ok - a connection open when /dev/shm filled up carries on, bytes intact"
kill -0 $SRV 2>/dev/null || fail "the server died: $(cat "$W/server.err")"
kill $SRV $FAKE; wait $SRV 2>/dev/null
echo "ok - the server lives on"
NS
