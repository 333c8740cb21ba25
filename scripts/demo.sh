#!/bin/sh
# SPDX-License-Identifier: MIT
# scripts/demo.sh BUILD_DIR — the `make demo` job: a short explanation, then
# sdpperf stream (64 KiB writes, 1 connection, ~3 s) and rr (1-byte
# ping-pong, ~3 s) over SDP and kernel TCP side by side.  About 20 s in all.
set -eu
BUILD=${1:-build}
PERF="$BUILD/bin/sdpperf"
LIB="$BUILD/lib/libsdp.so"

cat <<'EOF'
libsdp demo
===========
libsdp gives ordinary programs Sockets Direct Protocol sockets:
socket(AF_INET_SDP /* 27 */, SOCK_STREAM, 0) with the usual sockaddr_in
addresses and the usual socket calls, in an unmodified binary started with
LD_PRELOAD=libsdp.so.  Between processes on one host the byte stream moves
through shared memory instead of the kernel TCP/IP stack.

Below, sdpperf runs the same client and server code twice: once as SDP
(preloaded libsdp) and once over kernel TCP on 127.0.0.1, each side in its
own process.  "cpu" columns are CPU cores used by the client and the server
during the measurement (user + system time / wall time).
EOF

if [ ! -x "$PERF" ]; then
	echo "demo: $PERF is not built (run 'make build')" >&2
	exit 1
fi
if [ ! -e "$LIB" ]; then
	echo "demo: note: $LIB is missing: the SDP rows will show an error" >&2
fi

echo
# stream uses 64 KiB writes by default, rr 1-byte messages.
"$PERF" --lib "$LIB" --transports sdp,tcp --workload stream,rr --conns 1 --time 3 --warmup 0.5

cat <<EOF

More: $PERF --help (workloads stream, rr, crr, conns; --repeat, --json;
--env KEY=VAL for the SDP side), 'make test' for the test suite.
EOF
