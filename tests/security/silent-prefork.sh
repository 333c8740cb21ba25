#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/security/silent-prefork.sh BUILD — a local user who connects to a
# pre-forked server's rendezvous name and says nothing (docs/SECURITY.md,
# "Silent clients and a listener that processes share").  A, the victim,
# runs prefork.py, written the way the PostgreSQL postmaster is: a child
# forked after listen() shares the listener; select() with SIGTERM
# unblocked, then a blocking accept() with it blocked.  B is hostile.
#   1. B queues a silent connection every 10 ms while a client (root, under
#      the preload) makes 20 connections, each checked by a sha256 of its
#      line: all are served over SDP, within 2.5 s (4-5 s before, when
#      every accept() behind a silent connection waited a second).
#   2. B holds one silent connection: the server's accept() returns (an
#      aborted connection, as POSIX allows) and SIGTERM, blocked while it
#      waits there, ends the server at once (before, accept() blocked until
#      the next client).
. "$(dirname "$0")/lib.sh"
PORT=$(rand_port)
bg server runuser -u sdpsec-a -- "${PRE[@]}" "${PY[@]}" "$TMP/prefork.py" "$PORT"
wait_line "$TMP/server.out" listening ||
	{ show "$TMP/server.err"; check start "the server listens" false; finish; }
read -r _ SRV <"$TMP/server.out"	# runuser passes no signal on

bg flood runuser -u sdpsec-b -- "${PY[@]}" "$TMP/silent.py" "$PORT" 5 0.01
FLOOD=$BG_PID
sleep 0.3	# the flood under way (not a correctness wait: see the bound)
# Every connection on SDP: none sent to TCP for being short.
SDP_LOG=3 SDP_SHORT_CONN=0 tmo 60 "${PRE[@]}" "${PY[@]}" "$SRC/tests/security/hashclient.py" \
	"$PORT" 20 >"$TMP/client.out" 2>"$TMP/client.err"
read -r word n ms _ <"$TMP/client.out" 2>/dev/null
check "served" "20 connections answered, each sha256 checked, behind a silent flood" \
	eq "${word:-}/${n:-}" "ok/20"
wait "$FLOOD" 2>/dev/null
note "20 connections took ${ms:-?} ms; B made $(cat "$TMP/flood.out")"
check "in-time" "they took under $((2500 * MULT)) ms (4-5 s before)" \
	test "${ms:-999999}" -lt $((2500 * MULT))
check "over-sdp" "every one of them was SDP (SDP_LOG)" \
	eq "$(log_sdp_established "$TMP/client.err")" 20

bg silent runuser -u sdpsec-b -- "${PY[@]}" "$TMP/silent.py" "$PORT" 30 0
wait_line "$TMP/silent.out" "silent 1" || note "B's silent connection was not made"
check "aborted" "accept() after a silent connection returns (ECONNABORTED)" \
	wait_line "$TMP/server.out" "accept: 103"
kill -TERM "$SRV" 2>/dev/null
check "sigterm" "SIGTERM then ends the server (it sleeps in select again)" \
	wait_line "$TMP/server.out" bye
show "$TMP/server.out" "$TMP/server.err"
finish
