#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/security/portspace.sh BUILD — who may answer for 127.0.0.1:PORT
# (docs/SECURITY.md, "The port space").  A, the victim, runs the real
# server; B is hostile.  A client (root, under the libsdp preload, policy
# "both") sends a secret.  Whatever B does, the secret reaches A or nobody,
# never B, and no connect waits on B:
#   1. A's plain TCP server first: B's SDP listener on the port fails as a
#      TCP one would (EADDRINUSE); B's relay on the rendezvous name, which
#      forwards everything to B's own SDP listener, is passed over: the
#      client falls back to TCP and reaches A.
#   2. B squats on the name, silent, first with room in its backlog, then
#      with it full; A serves "both": the secret reaches A over TCP at
#      once, and an explicit SDP connect fails at once (ECONNREFUSED).
#   3. B listens on TCP in a network namespace of its own (where it owns
#      every port) and squats on the name here: passed over.  The client in
#      a user namespace of its own, where A and B both look like the
#      overflow uid: B's relay is passed over.
#   4. A's "both" server on the wildcard; B on the exact name (tried
#      first): the secret reaches A, over SDP.
#   5. B's SDP listener first: it holds the kernel TCP port, so A's TCP
#      server cannot take it (EADDRINUSE), as with TCP alone; a plain TCP
#      client of that SDP-only port is reset, not left waiting.
#   6. B's SDP listener on a privileged port: EACCES, as TCP's bind.
. "$(dirname "$0")/lib.sh"
touch "$TMP/a/log" "$TMP/b/log"
chown sdpsec-a "$TMP/a/log"
chown sdpsec-b "$TMP/b/log"
PEERS=("${PY[@]}" "$TMP/peers.py")
# One connect, with the fallback; bound in ms (a Python start included).
BOUND_MS=$((1500 * MULT))

wait_listen() {
	local i
	for i in $(seq 1 $((200 * MULT))); do
		ss -Htln "( sport = :$1 )" | grep -q . && return 0
		sleep 0.05
	done
	return 1
}

# client TAG PORT SECRET: the preloaded client; its reply in $TMP/TAG.out,
# its log in $TMP/TAG.err, its duration (ms) in CLIENT_MS.
client() {
	local t0 t1
	t0=$(date +%s%N)
	tmo 20 "${PRE[@]}" SDP_LOG=2 "${PEERS[@]}" client "$2" "$3" >"$TMP/$1.out" 2>"$TMP/$1.err"
	t1=$(date +%s%N)
	CLIENT_MS=$(((t1 - t0) / 1000000))
}

# ---- 1. A's TCP server first; B tries an SDP listener, then a relay --------
P=$(rand_port)
bg a1 as sdpsec-a "${PEERS[@]}" server "$P" "$TMP/a/log"
wait_listen "$P" || show "$TMP/a1.out" "$TMP/a1.err"
tmo 10 runuser -u sdpsec-b -- "${PRE[@]}" "${PEERS[@]}" server "$P" "$TMP/b/log" --sdp >"$TMP/b1.out" 2>"$TMP/b1.err"
check "sdp-after-tcp" "B's explicit SDP listener on A's port fails like a TCP one ($(cat "$TMP/b1.out"))" \
	file_has "$TMP/b1.out" "listen failed: EADDRINUSE"
Q=$(rand_port)
bg b1q as sdpsec-b "${PRE[@]}" "${PEERS[@]}" server "$Q" "$TMP/b/log" --sdp
wait_line "$TMP/b1q.out" listening || show "$TMP/b1q.err"
bg b1r as sdpsec-b "${PEERS[@]}" relay "$P" "$Q"
wait_line "$TMP/b1r.out" relaying || show "$TMP/b1r.err"
client c1 "$P" secret-one
check "relay-passed-over" "past B's relay the secret reached A (reply '$(cat "$TMP/c1.out")', ${CLIENT_MS} ms)" \
	eval 'eq "$(cat "$TMP/c1.out")" reply:secret-one && file_has "$TMP/a/log" secret-one && [ "$CLIENT_MS" -lt "$BOUND_MS" ]'
check "relay-nothing-to-b" "B's listener received nothing" file_lacks "$TMP/b/log" secret-one
check "relay-fallback-logged" "the client's log names the fallback" file_has "$TMP/c1.err" "over TCP"

# ---- 2. B squats on the name; A serves "both" ------------------------------
for how in silent full; do
	P=$(rand_port)
	bg "b2$how" as sdpsec-b "${PEERS[@]}" squat "$P" ${how/silent/}
	wait_line "$TMP/b2$how.out" squatting || show "$TMP/b2$how.err"
	bg "a2$how" as sdpsec-a "${PRE[@]}" "${PEERS[@]}" server "$P" "$TMP/a/log"
	wait_listen "$P" || show "$TMP/a2$how.out" "$TMP/a2$how.err"
	client "c2$how" "$P" "secret-two-$how"
	check "squat-$how" "past B's $how name the secret reached A in ${CLIENT_MS} ms (bound: $BOUND_MS)" \
		eval 'eq "$(cat "$TMP/c2$how.out")" "reply:secret-two-$how" && file_has "$TMP/a/log" "secret-two-$how" && [ "$CLIENT_MS" -lt "$BOUND_MS" ]'
	# An explicit SDP socket has no fallback: refused at once.
	t0=$(date +%s%N)
	tmo 20 "${PRE[@]}" "${PEERS[@]}" sdpconnect "$P" >"$TMP/c2s$how.out" 2>"$TMP/c2s$how.err"
	t1=$(date +%s%N)
	check "squat-$how-explicit" "an explicit SDP connect past the $how name: $(cat "$TMP/c2s$how.out") after $(((t1 - t0) / 1000000)) ms" \
		eval 'eq "$(cat "$TMP/c2s$how.out")" ECONNREFUSED && [ $(((t1 - t0) / 1000000)) -lt "$BOUND_MS" ]'
done

# ---- 3. B owns the port in a network namespace of its own -------------------
if runuser -u sdpsec-b -- unshare -Urn true 2>/dev/null; then
	P=$(rand_port)
	bg a3 as sdpsec-a "${PEERS[@]}" server "$P" "$TMP/a/log"
	wait_listen "$P" || show "$TMP/a3.err"
	bg b3n runuser -u sdpsec-b -- unshare -Urn "${PEERS[@]}" nslisten "$P"
	wait_line "$TMP/b3n.out" listening || show "$TMP/b3n.err"
	bg b3 as sdpsec-b "${PEERS[@]}" squat "$P"
	wait_line "$TMP/b3.out" squatting || show "$TMP/b3.err"
	client c3 "$P" secret-ns
	check "netns-owner" "B's port in its own network namespace counts for nothing here: the secret reached A (reply '$(cat "$TMP/c3.out")', ${CLIENT_MS} ms)" \
		eval 'eq "$(cat "$TMP/c3.out")" reply:secret-ns && file_has "$TMP/a/log" secret-ns && [ "$CLIENT_MS" -lt "$BOUND_MS" ]'
else
	NCHECK=$((NCHECK + 1))
	echo "ok $NCHECK - netns-owner # SKIP unprivileged users cannot create network namespaces here"
fi

# ---- 3b. a client in a user namespace of its own ------------------------------
# There every user the namespace does not map has the same (overflow) uid:
# B's listener and A's TCP port would look like one owner's.
if unshare -Ur true 2>/dev/null; then
	P=$(rand_port)
	bg a3u as sdpsec-a "${PEERS[@]}" server "$P" "$TMP/a/log"
	wait_listen "$P" || show "$TMP/a3u.err"
	Q=$(rand_port)
	bg b3uq as sdpsec-b "${PRE[@]}" "${PEERS[@]}" server "$Q" "$TMP/b/log" --sdp
	wait_line "$TMP/b3uq.out" listening || show "$TMP/b3uq.err"
	bg b3ur as sdpsec-b "${PEERS[@]}" relay "$P" "$Q"
	wait_line "$TMP/b3ur.out" relaying || show "$TMP/b3ur.err"
	tmo 20 unshare -Ur "${PRE[@]}" "${PEERS[@]}" client "$P" secret-userns >"$TMP/c3u.out" 2>"$TMP/c3u.err"
	check "userns-client" "a client in its own user namespace, past B's relay: the secret reached A (reply '$(cat "$TMP/c3u.out")')" \
		eval 'eq "$(cat "$TMP/c3u.out")" reply:secret-userns && file_has "$TMP/a/log" secret-userns'
	check "userns-nothing-to-b" "B's listener received nothing" file_lacks "$TMP/b/log" secret-userns
fi

# ---- 4. A on the wildcard, B on the exact name ------------------------------
P=$(rand_port)
bg a4 as sdpsec-a "${PRE[@]}" "${PEERS[@]}" server "$P" "$TMP/a/log" --any
wait_listen "$P" || show "$TMP/a4.out" "$TMP/a4.err"
bg b4 as sdpsec-b "${PEERS[@]}" squat "$P"
wait_line "$TMP/b4.out" squatting || show "$TMP/b4.err"
client c4 "$P" secret-four
check "exact-name-impostor" "past B on the exact name the secret reached A's wildcard listener over SDP (reply '$(cat "$TMP/c4.out")', ${CLIENT_MS} ms)" \
	eval 'eq "$(cat "$TMP/c4.out")" reply:secret-four && file_has "$TMP/a/log" "secret-four transport=1" && [ "$CLIENT_MS" -lt "$BOUND_MS" ]'

# ---- 5. B's SDP listener first: B holds the port, as over TCP --------------
P=$(rand_port)
bg b5 as sdpsec-b "${PRE[@]}" "${PEERS[@]}" server "$P" "$TMP/b/log" --sdp
wait_line "$TMP/b5.out" listening || show "$TMP/b5.err"
tmo 10 runuser -u sdpsec-a -- "${PEERS[@]}" server "$P" "$TMP/a/log" >"$TMP/a5.out" 2>"$TMP/a5.err"
check "tcp-after-sdp" "A's TCP server on B's SDP port fails ($(cat "$TMP/a5.out"))" \
	file_has "$TMP/a5.out" "listen failed: EADDRINUSE"
tmo 10 "${PEERS[@]}" probe "$P" >"$TMP/p5.out" 2>"$TMP/p5.err"
check "tcp-client-reset" "a plain TCP client of B's SDP-only port is answered at once ($(cat "$TMP/p5.out"))" \
	grep -Eqx "reset|eof" "$TMP/p5.out"
# B's own SDP clients still reach it: the owner passes the check.
tmo 20 "${PRE[@]}" "${PEERS[@]}" client "$P" secret-five >"$TMP/c5.out" 2>"$TMP/c5.err"
check "owner-reached" "a client reaches the SDP-only listener of the port's owner ($(cat "$TMP/c5.out"))" \
	eval 'eq "$(cat "$TMP/c5.out")" reply:secret-five && file_has "$TMP/b/log" "secret-five transport=1"'

# ---- 6. privileged ports stay privileged -----------------------------------
LOW=$(($(cat /proc/sys/net/ipv4/ip_unprivileged_port_start) - 1))
if [ "$LOW" -gt 0 ] && ! ss -Htln "( sport = :$LOW )" | grep -q .; then
	tmo 10 runuser -u sdpsec-b -- "${PRE[@]}" "${PEERS[@]}" server "$LOW" "$TMP/b/log" --sdp >"$TMP/b6.out" 2>"$TMP/b6.err"
	check "privileged-port" "B's SDP listener on port $LOW fails like TCP's bind ($(cat "$TMP/b6.out"))" \
		file_has "$TMP/b6.out" "listen failed: EACCES"
fi
[ "$NFAIL" -gt 0 ] && show "$TMP"/*.err
finish
