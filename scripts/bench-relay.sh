#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench-relay.sh BUILD [ROUNDS] [SIZE]: what a relayed connection costs
# (docs/DESIGN.md "exec()").  An inetd-style server (python3: accept, fork,
# the child execs `head -c SIZE /dev/zero` with the connection on stdout)
# streams SIZE bytes to `socat -u` writing /dev/null; under sdp_run the
# exec'd head writes into the stream its parent relays.  Each round runs
# the SDP pair and then the plain TCP pair, and prints both rates and their
# ratio; the last line is the median ratio with its spread.
set -eu
BUILD=$(cd "${1:?usage: $0 BUILD [ROUNDS] [SIZE]}" && pwd)
ROUNDS=${2:-5}
SIZE=${3:-2G}
RUN="$BUILD/bin/sdp_run"
command -v socat >/dev/null && command -v python3 >/dev/null ||
	{ echo "needs socat and python3 (make deps)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
cat >"$TMP/inetd.py" <<'EOF'
import os, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
if os.fork() == 0:
    os.dup2(c.fileno(), 1); c.close(); s.close()
    os.execvp("head", ["head", "-c", sys.argv[1], "/dev/zero"])
c.close()
os.wait()
EOF
bytes=$(numfmt --from=iec "$SIZE")

# rate WRAP: MB/s of one transfer, both ends run with WRAP (or plainly).
rate() {
	local -a pre=()
	[ "$1" = sdp ] && pre=("$RUN")
	rm -f "$TMP/port"
	"${pre[@]}" python3 "$TMP/inetd.py" "$SIZE" >"$TMP/port" &
	local srv=$! port="" i t0 t1
	for i in $(seq 1 50); do
		port=$(cat "$TMP/port" 2>/dev/null || true)
		[ -n "$port" ] && break
		sleep 0.1
	done
	t0=$(date +%s.%N)
	timeout 120 "${pre[@]}" socat -u -b 262144 "TCP:127.0.0.1:$port" /dev/null
	t1=$(date +%s.%N)
	wait "$srv" 2>/dev/null || true
	awk -v a="$t0" -v b="$t1" -v n="$bytes" 'BEGIN { printf "%.0f", n / (b - a) / 1e6 }'
}

ratios=()
for r in $(seq 1 "$ROUNDS"); do
	s=$(rate sdp)
	t=$(rate tcp)
	q=$(awk -v a="$s" -v b="$t" 'BEGIN { printf "%.2f", a / b }')
	ratios+=("$q")
	echo "round $r: relayed SDP $s MB/s, TCP $t MB/s, SDP/TCP $q"
done
printf '%s\n' "${ratios[@]}" | sort -n |
	awk '{ v[NR] = $1 } END { printf "median SDP/TCP %.2f [%.2f-%.2f] over %d rounds\n", v[int((NR + 1) / 2)], v[1], v[NR], NR }'
