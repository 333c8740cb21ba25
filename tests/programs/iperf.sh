#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# iperf 2.x (Debian package iperf) under sdp_run: one stream, -P 4, and
# --full-duplex; then fallback both ways.  iperf does not check its data:
# correctness is the reported transfer.  Evidence: sdpstat --json on the
# client while it runs (or on the server, for a plain client) and ss (no
# kernel TCP connection on the port over SDP), SDP_LOG=3 on the server.
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg iperf iperf

client() { # TAG WRAP WANT(sdp|tcp) MIN_CONNS ARGS...
	local tag=$1 wrap=$2 want=$3 min=$4 n
	shift 4
	local -a cmd=(iperf -c 127.0.0.1 -p "$PORT" -t 2 -f m "$@")
	[ "$wrap" = sdp ] && cmd=("$SDP_RUN" -d "${cmd[@]}")
	run_limited 30 "$TMP/$tag.out" "$TMP/$tag.err" "${cmd[@]}"
	local pid=$BG_PID
	sleep 0.5
	# The preloaded end that carries the traffic, while it does.
	if [ "$wrap" = sdp ]; then sample_conns "$pid" "$PORT" 1; else sample_conns "$SRV" "$PORT" 1; fi
	n=$S_SDP
	wait "$pid"
	local rc=$?
	local sum
	sum=$(grep -E 'sec +[0-9.]+ [MG]Bytes' "$TMP/$tag.out" | tail -1 | sed 's/  */ /g')
	check "$tag" "iperf $* ($wrap client, $SRVWRAP server): exit $rc, ${sum:-no report}" \
		eval '[ $rc -eq 0 ] && [ -n "$sum" ] && ! grep -qi "fail\|error" "$TMP/$tag.out"'
	if [ "$want" = sdp ]; then
		check "$tag-sdp" "the client had >= $min SDP connections moving data (sdpstat saw $n)" ge "$n" "$min"
		check "$tag-notcp" "no kernel TCP connection on port $PORT while it ran (ss saw $S_TCP)" eq "$S_TCP" 0
	elif [ "$wrap" = sdp ]; then
		check "$tag-tcp" "the client ran on TCP: sdpstat saw $n SDP and $S_FALLBACK TCP sockets, ss $S_TCP TCP connections" \
			eval 'eq "$n" 0 && ge "$S_FALLBACK" 1 && ge "$S_TCP" 2'
	else
		check "$tag-tcp" "the server under sdp_run served TCP: sdpstat saw $n SDP connections, ss $S_TCP TCP ones" \
			eval 'eq "$n" 0 && ge "$S_TCP" 2'
	fi
	[ "$NFAIL" -gt 0 ] && show "$TMP/$tag.out" "$TMP/$tag.err"
	return 0
}

start_server() { # NAME WRAP
	PORT=$(rand_port)
	SRVWRAP=$2
	if [ "$2" = sdp ]; then
		bg "$1" "$SDP_RUN" -d iperf -s -p "$PORT"
	else
		bg "$1" iperf -s -p "$PORT"
	fi
	SRV=$BG_PID
	wait_listen "$PORT" || show "$TMP/$1.out" "$TMP/$1.err"
}

start_server server sdp
client single sdp sdp 1
client parallel4 sdp sdp 4 -P 4
client fullduplex sdp sdp 1 --full-duplex
check "server-sdp" "the server logged SDP connections" ge "$(log_sdp_established "$TMP/server.err")" 6
check "server-alive" "the server survived" kill -0 "$SRV"
stop "$SRV"

start_server plainserver plain
client fallback-client sdp tcp 0
check "fallback-client-log" "client SDP_LOG: over TCP: no SDP listener" file_has "$TMP/fallback-client.err" "over TCP: no SDP listener"
stop "$SRV"

start_server sdpserver sdp
client fallback-server plain tcp 0 -P 2
check "fallback-server-tcp" "the server under sdp_run has no SDP connection" eq "$(log_sdp_established "$TMP/sdpserver.err")" 0
stop "$SRV"
finish
