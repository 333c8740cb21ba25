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

# The same unmodified program, plain and under sdp_run: iperf3 on loopback.
RUN=$(dirname "$PERF")/sdp_run
if command -v iperf3 >/dev/null 2>&1 && [ -x "$RUN" ]; then
	echo
	echo "An unmodified program: iperf3 on 127.0.0.1, 3 s, plain TCP and under sdp_run"
	for mode in tcp sdp; do
		pre=""
		[ "$mode" = sdp ] && pre="$RUN"
		port=$((20000 + $$ % 20000))
		$pre iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
		srv=$!
		res=""
		for i in 1 2 3 4 5 6 7 8 9 10; do	# until the server listens
			res=$($pre iperf3 -c 127.0.0.1 -p "$port" -t 3 -f m 2>&1 |
			      awk '/receiver/ {print $7, $8}')
			[ -n "$res" ] && break
			sleep 0.3
		done
		wait "$srv" 2>/dev/null
		printf '  %-4s %s\n' "$mode" "${res:-failed}"
	done
fi

cat <<EOF

More: $PERF --help (workloads stream, rr, crr, conns; --repeat, --json;
--env KEY=VAL for the SDP side), 'make test' for the test suite.
EOF
