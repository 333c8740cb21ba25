#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# iperf3 (Debian package iperf3) under sdp_run: client and server, one
# stream, -P 8, -R, --bidir; then each side alone under sdp_run (fallback).
# Evidence, taken while the client runs: sdpstat --json on the preloaded end
# (control + data connections ESTABLISHED over shm, moving bytes; or its
# sockets on TCP) and ss (kernel TCP connections on the port: none over SDP).  iperf3 does not check
# its data (and -F truncates even over TCP), so correctness is the JSON
# report: bytes sent and received, no error.
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg iperf3 iperf3
need_pkg python3 /usr/bin/python3
PY=/usr/bin/python3
DUR=2

# json_get FILE EXPR: evaluate a Python expression over the iperf3 JSON j.
json_get() {
	$PY -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null
}

# client NAME WRAP EXPECT_SDP_CONNS IPERF-ARGS...: run one client, check it.
# WRAP is "sdp" (under sdp_run) or "plain".
run_client() {
	local name=$1 wrap=$2 want=$3
	shift 3
	local out="$TMP/$name.json" err="$TMP/$name.err" pid n sent rcvd
	if [ "$wrap" = sdp ]; then
		run_limited "${CLIENT_LIMIT:-30}" "$out" "$err" "$SDP_RUN" -d iperf3 -c 127.0.0.1 -p "$PORT" -t "$DUR" -J "$@"
	else
		run_limited "${CLIENT_LIMIT:-30}" "$out" "$err" iperf3 -c 127.0.0.1 -p "$PORT" -t "$DUR" -J "$@"
	fi
	pid=$BG_PID
	sleep 0.5
	# The preloaded end that carries the traffic, while it does.
	if [ "$wrap" = sdp ]; then sample_conns "$pid" "$PORT" 1; else sample_conns "$SRV" "$PORT" 1; fi
	n=$S_SDP
	wait "$pid"
	local rc=$?
	sent=$(json_get "$out" 'j["end"]["sum_sent"]["bytes"] if "sum_sent" in j["end"] else j["end"]["sum_sent_bidir_reverse"]["bytes"]')
	rcvd=$(json_get "$out" 'j["end"]["sum_received"]["bytes"]')
	check "$name" "iperf3 $* ($wrap client): exit 0, sent ${sent:-?} received ${rcvd:-?} bytes" \
		eval '[ $rc -eq 0 ] && ge "${sent:-0}" 1000000 && ge "${rcvd:-0}" 1000000'
	if [ "$want" -gt 0 ]; then
		check "$name-sdp" "client had >= $want SDP connections moving data (sdpstat saw $n)" ge "$n" "$want"
		check "$name-notcp" "no kernel TCP connection on port $PORT while it ran (ss saw $S_TCP)" eq "$S_TCP" 0
		check "$name-nofallback" "no TCP fallback in the client's SDP_LOG" eq "$(log_tcp_fallbacks "$err")" 0
	elif [ "$wrap" = sdp ]; then
		check "$name-tcp" "the client ran on TCP: sdpstat saw $n SDP and $S_FALLBACK TCP sockets, ss $S_TCP TCP connections" \
			eval 'eq "$n" 0 && ge "$S_FALLBACK" 2 && ge "$S_TCP" 2'
	else
		check "$name-tcp" "the server under sdp_run served TCP: sdpstat saw $n SDP connections, ss $S_TCP TCP ones" \
			eval 'eq "$n" 0 && ge "$S_TCP" 2'
	fi
	[ "$NFAIL" -gt 0 ] && show "$err" "$out"
	return 0
}

# ---- sdp <-> sdp ---------------------------------------------------------------
PORT=$(rand_port)
bg server "$SDP_RUN" -v iperf3 -s -p "$PORT"
SRV=$BG_PID
wait_listen "$PORT" || { show "$TMP/server.err"; finish; }
run_client single sdp 2
run_client parallel8 sdp 9 -P 8
check "parallel8-streams" "-P 8: 8 streams in the report" \
	eq "$(json_get "$TMP/parallel8.json" 'len(j["end"]["streams"])')" 8
run_client reverse sdp 2 -R
run_client bidir sdp 3 --bidir
check "stderr-clean" "no error messages from iperf3 over SDP (client and server stderr, JSON \"error\")" \
	eval '! grep -h "^iperf3:\|\"error\":" "$TMP"/single.err "$TMP"/parallel8.err "$TMP"/reverse.err "$TMP"/bidir.err "$TMP"/server.err >"$TMP/iperf3-errors" || { sed "s/^/#   /" "$TMP/iperf3-errors" | sort | uniq -c | head -5; false; }'
check "retransmits" "no retransmissions reported on a lossless link" \
	eq "$(json_get "$TMP/single.json" 'j["end"]["sum_sent"]["retransmits"]')" 0
check "server-alive" "the server survived all runs" kill -0 "$SRV"
stop "$SRV"

# ---- fallback: plain server, client under sdp_run ---------------------------------
PORT=$(rand_port)
bg plainserver iperf3 -s -p "$PORT"
SRV=$BG_PID
wait_listen "$PORT" || finish
run_client fallback-client sdp 0
check "fallback-client-log" "client's SDP_LOG names the fallback (over TCP: no SDP listener)" \
	file_has "$TMP/fallback-client.err" "over TCP: no SDP listener"
stop "$SRV"

# ---- fallback: server under sdp_run, plain client ---------------------------------
PORT=$(rand_port)
bg sdpserver "$SDP_RUN" iperf3 -s -p "$PORT"
SRV=$BG_PID
wait_listen "$PORT" || finish
CLIENT_LIMIT=10 run_client fallback-server plain 0 -P 2
stop "$SRV"
finish
