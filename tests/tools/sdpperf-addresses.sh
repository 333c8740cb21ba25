#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/tools/sdpperf-addresses.sh BUILD — sdpperf's --server-ip and
# --client-ip (the VM benchmark runs ZCopy across rxe-a and rxe-b with
# them): a stream whose client binds another loopback address moves bytes
# over SDP and TCP; a client address this host does not have fails the
# run (exit 1, the row says why); a malformed address is refused with
# exit 2 and a message naming it.
set -u
B=${1:-build}
P="$B/bin/sdpperf"
fail() { echo "not ok - $*"; exit 1; }
out=$("$P" --workload stream --transports sdp,tcp --size 65536 --time 0.5 \
	--warmup 0.2 --server-ip 127.0.0.1 --client-ip 127.0.0.2 2>&1) ||
	fail "sdpperf failed: $out"
echo "$out"
for t in sdp tcp; do
	echo "$out" | awk -v t=$t '$1 == t && $2 + 0 > 0 {ok = 1} END {exit !ok}' ||
		fail "no $t bytes moved with --server-ip/--client-ip"
done
echo "ok - sdp and tcp streams with --server-ip 127.0.0.1 --client-ip 127.0.0.2"
# The client really binds its address: one this host does not have fails
# the connect (EADDRNOTAVAIL), and the run with it.
if "$P" --workload stream --transports tcp --time 0.3 --warmup 0.1 \
	--client-ip 192.0.2.1 >/dev/null 2>&1; then
	fail "a client bound to 192.0.2.1 (not on this host) connected"
fi
echo "ok - a --client-ip this host does not have fails the run"
msg=$("$P" --server-ip 10.0.0 2>&1); rc=$?
[ $rc = 2 ] || fail "--server-ip 10.0.0: exit $rc, expected 2"
echo "$msg" | grep -q "not an IPv4 address: '10.0.0'" ||
	fail "--server-ip 10.0.0: message does not name the cause: $msg"
echo "ok - a malformed address is refused with exit 2: $(echo "$msg" | head -1)"
