#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/security/portspace.sh BUILD — who may answer for 127.0.0.1:PORT.
# Two unprivileged users: A, the victim, who runs the real server, and B,
# hostile.  A client (root, under the libsdp preload, policy "both") sends
# a secret.  Whatever B does, the secret reaches A or nobody, never B, and
# no connect waits longer than the documented bound (docs/SECURITY.md):
#   1. A's plain TCP server first: B cannot open an SDP listener on the port
#      (explicit AF_INET_SDP: EADDRINUSE, the kernel's answer); B's relay on
#      the rendezvous name, forwarding every message and descriptor to B's
#      own SDP listener on another port, is refused by the client, which
#      falls back to TCP and reaches A.
#   1b. B shows, as the claim, a socket that owns the port in a network
#      namespace of B's own (unshare -Urn): refused at once, the secret
#      reaches A.
#   2. B squats on the rendezvous name first and never answers; A starts a
#      "both" server: the client gives up on the name within the bound and
#      reaches A over TCP.
#   3. B's SDP listener first: it holds the kernel TCP port, so A's TCP
#      server cannot take the port (EADDRINUSE), as with TCP alone; a plain
#      TCP client of that SDP-only port is reset, not left waiting.
#   4. B's SDP listener on a privileged port: EACCES, as TCP's bind.
# Needs root (useradd, runuser).
set -u
. "$(dirname "$0")/../programs/common.sh"
if [ "$(id -u)" != 0 ]; then
	echo "not ok - needs root: it creates two users (useradd) and runs as them"
	exit 1
fi
need_pkg util-linux runuser
need_pkg passwd useradd
need_pkg python3 /usr/bin/python3

for u in sdpsec-a sdpsec-b; do
	id -u "$u" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$u" ||
		{ echo "not ok - useradd $u failed"; exit 1; }
done
# What the users run, readable by them; a log directory each.
chmod 755 "$TMP"
mkdir -p "$TMP/lib" "$TMP/a" "$TMP/b"
cp "$BUILD/lib/libsdp.so" "$TMP/lib/"
cp "$SRC/tests/security/peers.py" "$TMP/"
cp "$LIBSDP_CONFIG_FILE" "$TMP/policy.conf"
chmod -R a+rX "$TMP/lib" "$TMP/peers.py" "$TMP/policy.conf"
chown sdpsec-a "$TMP/a"
chown sdpsec-b "$TMP/b"
touch "$TMP/a/log" "$TMP/b/log"
chown sdpsec-a "$TMP/a/log"
chown sdpsec-b "$TMP/b/log"
PEERS=(/usr/bin/python3 "$TMP/peers.py")
PRE=(env LD_PRELOAD="$TMP/lib/libsdp.so" LIBSDP_CONFIG_FILE="$TMP/policy.conf" SDP_LOG=2)
as() { local u=$1; shift; runuser -u "$u" -- "$@"; }

# wait_line FILE TEXT: until FILE has a line containing TEXT (or 10 s).
wait_line() {
	local i
	for i in $(seq 1 $((100 * MULT))); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# client TAG PORT SECRET: the preloaded client; its reply in $TMP/TAG.out,
# its duration (ms) in CLIENT_MS.
client() {
	local t0 t1
	t0=$(date +%s%N)
	tmo 20 "${PRE[@]}" "${PEERS[@]}" client "$2" "$3" >"$TMP/$1.out" 2>"$TMP/$1.err"
	t1=$(date +%s%N)
	CLIENT_MS=$(((t1 - t0) / 1000000))
}

# ---- 1. A's TCP server first; B tries an SDP listener, then a relay --------
P=$(rand_port)
bg a1 as sdpsec-a "${PEERS[@]}" server "$P" "$TMP/a/log"
wait_listen "$P" || show "$TMP/a1.out" "$TMP/a1.err"
tmo 5 runuser -u sdpsec-b -- "${PRE[@]}" "${PEERS[@]}" server "$P" "$TMP/b/log" --sdp >"$TMP/b1.out" 2>"$TMP/b1.err"
check "squat-after-tcp" "B's explicit SDP listener on A's port fails like a TCP one ($(cat "$TMP/b1.out"))" \
	file_has "$TMP/b1.out" "listen failed: EADDRINUSE"
Q=$(rand_port)
bg b1q as sdpsec-b "${PRE[@]}" "${PEERS[@]}" server "$Q" "$TMP/b/log" --sdp
wait_line "$TMP/b1q.out" listening
bg b1r as sdpsec-b "${PEERS[@]}" relay "$P" "$Q"
wait_line "$TMP/b1r.out" relaying || show "$TMP/b1r.err"
client c1 "$P" secret-one
check "relay-refused" "through B's relay the secret reached A (reply '$(cat "$TMP/c1.out")', ${CLIENT_MS} ms)" \
	eval 'eq "$(cat "$TMP/c1.out")" reply:secret-one && file_has "$TMP/a/log" secret-one'
check "relay-nothing-to-b" "B's listener received nothing" file_lacks "$TMP/b/log" secret-one
check "relay-fallback-logged" "the client's log names the fallback" file_has "$TMP/c1.err" "over TCP"

# ---- 1b. B's claim from a network namespace of B's own ----------------------
# Any user may create one (unshare -Urn) and own every port in it; such a
# socket, shown as the claim, must not pass for the port here.
if runuser -u sdpsec-b -- unshare -Urn true 2>/dev/null; then
	P=$(rand_port)
	bg a1n as sdpsec-a "${PEERS[@]}" server "$P" "$TMP/a/log"
	wait_listen "$P" || show "$TMP/a1n.err"
	bg b1f as sdpsec-b "${PEERS[@]}" forge "$P" "$TMP/b/ns.sock"
	wait_line "$TMP/b1f.out" waiting || show "$TMP/b1f.err"
	bg b1n runuser -u sdpsec-b -- unshare -Urn "${PEERS[@]}" nsclaim "$P" "$TMP/b/ns.sock"
	wait_line "$TMP/b1f.out" forging || show "$TMP/b1f.err" "$TMP/b1n.err"
	client c1n "$P" secret-ns
	check "netns-claim" "B's claim from its own network namespace is refused: the secret reached A (reply '$(cat "$TMP/c1n.out")', ${CLIENT_MS} ms)" \
		eval 'eq "$(cat "$TMP/c1n.out")" reply:secret-ns && file_has "$TMP/a/log" secret-ns && [ "$CLIENT_MS" -lt $((400 * MULT)) ]'
else
	NCHECK=$((NCHECK + 1))
	echo "ok $NCHECK - netns-claim # SKIP unprivileged users cannot create network namespaces here"
fi

# ---- 2. B squats on the name first and stays silent; A serves "both" -------
P=$(rand_port)
bg b2 as sdpsec-b "${PEERS[@]}" squat "$P"
wait_line "$TMP/b2.out" squatting || show "$TMP/b2.err"
bg a2 as sdpsec-a "${PRE[@]}" "${PEERS[@]}" server "$P" "$TMP/a/log"
wait_listen "$P" || show "$TMP/a2.out" "$TMP/a2.err"
client c2 "$P" secret-two
check "squat-bounded" "past B's silent name the secret reached A in ${CLIENT_MS} ms (bound: 500 ms + TCP)" \
	eval 'eq "$(cat "$TMP/c2.out")" reply:secret-two && file_has "$TMP/a/log" secret-two && [ "$CLIENT_MS" -lt $((3000 * MULT)) ]'
# An explicit SDP socket has no fallback: its non-blocking connect to the
# silent name fails within the bound, noticed by the progress thread.
t0=$(date +%s%N)
tmo 20 "${PRE[@]}" "${PEERS[@]}" sdpconnect "$P" >"$TMP/c2s.out" 2>"$TMP/c2s.err"
t1=$(date +%s%N)
check "squat-explicit" "an explicit SDP connect to the silent name: $(cat "$TMP/c2s.out") after $(((t1 - t0) / 1000000)) ms" \
	eval 'eq "$(cat "$TMP/c2s.out")" ECONNREFUSED && [ $(((t1 - t0) / 1000000)) -lt $((3000 * MULT)) ]'

# ---- 3. B's SDP listener first: B holds the port, as over TCP --------------
P=$(rand_port)
bg b3 as sdpsec-b "${PRE[@]}" "${PEERS[@]}" server "$P" "$TMP/b/log" --sdp
wait_line "$TMP/b3.out" listening || show "$TMP/b3.err"
tmo 5 runuser -u sdpsec-a -- "${PEERS[@]}" server "$P" "$TMP/a/log" >"$TMP/a3.out" 2>"$TMP/a3.err"
check "tcp-after-sdp" "A's TCP server on B's SDP port fails ($(cat "$TMP/a3.out"))" \
	file_has "$TMP/a3.out" "listen failed: EADDRINUSE"
# The SDP-only listener's hold on TCP answers plain TCP clients at once.
tmo 10 "${PEERS[@]}" probe "$P" >"$TMP/p3.out" 2>"$TMP/p3.err"
check "tcp-client-reset" "a plain TCP client of B's SDP-only port is answered at once ($(cat "$TMP/p3.out"))" \
	grep -Eqx "reset|refused" "$TMP/p3.out"

# ---- 4. privileged ports stay privileged -----------------------------------
LOW=$(($(cat /proc/sys/net/ipv4/ip_unprivileged_port_start) - 1))
if [ "$LOW" -gt 0 ] && ! ss -Htln "( sport = :$LOW )" | grep -q .; then
	tmo 5 runuser -u sdpsec-b -- "${PRE[@]}" "${PEERS[@]}" server "$LOW" "$TMP/b/log" --sdp >"$TMP/b4.out" 2>"$TMP/b4.err"
	check "privileged-port" "B's SDP listener on port $LOW fails like TCP's bind ($(cat "$TMP/b4.out"))" \
		file_has "$TMP/b4.out" "listen failed: EACCES"
fi
[ "$NFAIL" -gt 0 ] && show "$TMP"/*.err
finish
