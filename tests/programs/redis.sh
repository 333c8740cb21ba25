#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# redis-server, redis-cli and redis-benchmark (Debian redis-server,
# redis-tools) under sdp_run: SET/GET of a 1 MiB random value compared by
# sha256, redis-benchmark SET/GET; then fallback both ways.  Persistence is
# off (--save '' --appendonly no) so redis never forks.
# Evidence: sdpstat --json on redis-server during redis-benchmark; SDP_LOG=3
# state transitions ("-> ESTABLISHED", no "over TCP") for redis-cli.
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg redis-server redis-server
need_pkg redis-tools redis-cli redis-benchmark

head -c 786432 /dev/urandom | base64 -w 0 >"$TMP/value" # 1 MiB of text
WANT=$( (cat "$TMP/value"; echo) | sha256sum | cut -d' ' -f1)

start_redis() { # NAME WRAP(sdp|plain): sets PORT, SRV
	local name=$1 wrap=$2
	PORT=$(rand_port)
	mkdir -p "$TMP/$name.dir"
	local -a cmd=(redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no
		--daemonize no --dir "$TMP/$name.dir" --protected-mode no)
	if [ "$wrap" = sdp ]; then
		bg "$name" "$SDP_RUN" -d "${cmd[@]}"
	else
		bg "$name" "${cmd[@]}"
	fi
	SRV=$BG_PID
	wait_listen "$PORT" || show "$TMP/$name.out" "$TMP/$name.err"
}

# cli NAME WRAP ARGS...: redis-cli with a timeout; output in $TMP/NAME.out
cli() {
	local name=$1 wrap=$2
	shift 2
	if [ "$wrap" = sdp ]; then
		tmo 20 "$SDP_RUN" -d redis-cli -h 127.0.0.1 -p "$PORT" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	else
		tmo 20 redis-cli -h 127.0.0.1 -p "$PORT" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	fi
}

setget() { # TAG CLIWRAP: SET then GET, compare
	local tag=$1 wrap=$2 got
	cli "$tag-set" "$wrap" -x SET k <"$TMP/value"
	check "$tag-set" "redis-cli ($wrap) SET of a 1 MiB value: OK" file_has "$TMP/$tag-set.out" '^OK'
	cli "$tag-get" "$wrap" --raw GET k
	got=$(sha256sum <"$TMP/$tag-get.out" | cut -d' ' -f1)
	check "$tag-get" "redis-cli ($wrap) GET: sha256 ${got:0:16}.. (want ${WANT:0:16}..)" eq "$got" "$WANT"
}

# ---- sdp <-> sdp ---------------------------------------------------------------
start_redis server sdp
setget sdp sdp
check "sdp-cli-sdp" "redis-cli connections were SDP (SDP_LOG: ESTABLISHED, no fallback)" \
	eval 'ge "$(log_sdp_established "$TMP/sdp-set.err")" 1 && ge "$(log_sdp_established "$TMP/sdp-get.err")" 1 && eq "$(log_tcp_fallbacks "$TMP/sdp-get.err")" 0'
run_limited 60 "$TMP/bench.out" "$TMP/bench.err" "$SDP_RUN" redis-benchmark -h 127.0.0.1 -p "$PORT" \
	-t set,get -n 200000 -c 20 -d 64 -q
BENCH=$BG_PID
sleep 0.3
N=$(sample_sdp "$BENCH" 3)
wait "$BENCH"
tr '\r' '\n' <"$TMP/bench.out" | grep -E '^(SET|GET):.*requests per second' >"$TMP/bench.sum"
check "benchmark" "redis-benchmark SET and GET completed: $(tr '\n' ' ' <"$TMP/bench.sum")" \
	eval '[ "$(grep -c "requests per second" "$TMP/bench.sum")" = 2 ]'
check "benchmark-sdp" "redis-benchmark's connections were SDP (sdpstat saw $N of 20)" ge "$N" 10
check "server-sdp" "redis-server's SDP log shows SDP connections" \
	ge "$(log_sdp_established "$TMP/server.err")" 20
cli info sdp INFO stats
check "server-alive" "redis-server still answers (INFO stats)" file_has "$TMP/info.out" total_connections_received
[ "$NFAIL" -gt 0 ] && show "$TMP/server.err" "$TMP/bench.out" "$TMP/bench.err"
stop "$SRV"

# ---- fallback: redis-server under sdp_run, plain redis-cli -----------------------
start_redis sdpserver sdp
setget plaincli plain
check "plaincli-tcp" "the server has no SDP connection" \
	eq "$(log_sdp_established "$TMP/sdpserver.err")" 0
stop "$SRV"

# ---- fallback: plain redis-server, redis-cli under sdp_run -----------------------
start_redis plainserver plain
setget sdpcli sdp
check "sdpcli-fallback" "redis-cli fell back to TCP (SDP_LOG: over TCP: no SDP listener)" \
	file_has "$TMP/sdpcli-get.err" "over TCP: no SDP listener"
[ "$NFAIL" -gt 0 ] && show "$TMP/sdpcli-get.err"
stop "$SRV"
finish
