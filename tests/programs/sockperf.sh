#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sockperf (Debian package sockperf) over TCP under sdp_run: `sockperf sr`
# server, ping-pong and throughput clients; then fallback both ways.
# sockperf validates its own message framing (sequence numbers); the check
# is its Summary lines.  Evidence: sdpstat --json on the client while it
# runs (or on the server, for a plain client) and ss (no kernel TCP connection
# on the port over SDP), SDP_LOG=3 transitions on the server.
KNOWN_FAILURES=""
# sdpstat shows tx/rx bytes 0 for sockperf's connections (a busy-polling
# client never answers the refresh request): count ESTABLISHED shm ones.
SDP_COUNT_IDLE=1
. "$(dirname "$0")/common.sh"
need_pkg sockperf sockperf

client() { # TAG WRAP WANT_SDP MODE ARGS...
	local tag=$1 wrap=$2 want=$3 mode=$4 n
	shift 4
	local -a cmd=(sockperf "$mode" --tcp -i 127.0.0.1 -p "$PORT" -t 2 "$@")
	[ "$wrap" = sdp ] && cmd=("$SDP_RUN" -d "${cmd[@]}")
	run_limited 30 "$TMP/$tag.out" "$TMP/$tag.err" "${cmd[@]}"
	local pid=$BG_PID
	sleep 0.5
	# The preloaded end that carries the traffic, while it does.
	if [ "$wrap" = sdp ]; then sample_conns "$pid" "$PORT" 1; else sample_conns "$SRV" "$PORT" 1; fi
	n=$S_SDP
	wait "$pid"
	local rc=$?
	if [ "$mode" = pp ]; then
		check "$tag" "sockperf ping-pong ($wrap client, $SRVWRAP server): exit $rc, $(grep -o 'Summary: Latency is [0-9.]* usec' "$TMP/$tag.out")" \
			eval '[ $rc -eq 0 ] && file_has "$TMP/$tag.out" "Summary: Latency is" && file_has "$TMP/$tag.out" "percentile 50.000"'
	else
		check "$tag" "sockperf throughput ($wrap client, $SRVWRAP server): exit $rc, $(grep -o 'Summary: BandWidth is [0-9.]* MBps' "$TMP/$tag.out")" \
			eval '[ $rc -eq 0 ] && file_has "$TMP/$tag.out" "Summary: BandWidth is"'
	fi
	if [ "$want" = sdp ]; then
		check "$tag-sdp" "the client had >= 1 SDP connections moving data (sdpstat saw $n)" ge "$n" 1
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
		bg "$1" "$SDP_RUN" -d sockperf sr --tcp -i 127.0.0.1 -p "$PORT"
	else
		bg "$1" sockperf sr --tcp -i 127.0.0.1 -p "$PORT"
	fi
	SRV=$BG_PID
	wait_listen "$PORT" || show "$TMP/$1.out" "$TMP/$1.err"
}

start_server server sdp
client pingpong sdp sdp pp
client throughput sdp sdp tp -m 1400
check "server-sdp" "the server logged SDP connections" ge "$(log_sdp_established "$TMP/server.err")" 2
stop "$SRV"

start_server plainserver plain
client fallback-client-pp sdp tcp pp
client fallback-client-tp sdp tcp tp -m 1400
check "fallback-client-log" "client SDP_LOG: over TCP: no SDP listener" file_has "$TMP/fallback-client-pp.err" "over TCP: no SDP listener"
stop "$SRV"

start_server sdpserver sdp
client fallback-server-pp plain tcp pp
client fallback-server-tp plain tcp tp -m 1400
check "fallback-server-tcp" "the server under sdp_run has no SDP connection" eq "$(log_sdp_established "$TMP/sdpserver.err")" 0
stop "$SRV"
finish
