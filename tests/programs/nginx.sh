#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# nginx (Debian package nginx) under sdp_run serving a 16 MiB static file
# with sendfile on, fetched by curl under sdp_run (sha256), driven by wrk
# for 3 s; then fallback both ways.  nginx is pre-fork: the master creates
# the listening socket and forks two workers that accept from it (both in
# epoll, nginx asks for EPOLLEXCLUSIVE); libsdp shares the listener across
# fork, so their connections are SDP.  Evidence: SDP_LOG=3 transitions on
# curl and nginx (nginx sends stderr to its error.log), sdpstat on wrk and
# on the nginx workers.
. "$(dirname "$0")/common.sh"
need_pkg nginx nginx
need_pkg curl curl
need_pkg wrk wrk
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
mkdir -p "$TMP/www" "$TMP/logs"
head -c 16777216 /dev/urandom >"$TMP/www/blob.bin"
# nginx started as root runs its worker as nobody: it must read the files
chmod a+rx "$TMP" "$TMP/www"
chmod a+r "$TMP/www/blob.bin"
WANT=$(sha256sum <"$TMP/www/blob.bin" | cut -d' ' -f1)

start_nginx() { # NAME WRAP [MASTER(on|off)] [WORKERS]
	local name=$1 wrap=$2 master=${3:-on} workers=${4:-1}
	PORT=$(rand_port)
	mkdir -p "$TMP/$name"
	cat >"$TMP/$name/nginx.conf" <<EOF
daemon off;
master_process $master;
worker_processes $workers;
pid $TMP/$name/nginx.pid;
error_log $TMP/$name/error.log info;
events { worker_connections 256; }
http {
	access_log $TMP/$name/access.log;
	client_body_temp_path $TMP/$name;
	proxy_temp_path $TMP/$name;
	fastcgi_temp_path $TMP/$name;
	uwsgi_temp_path $TMP/$name;
	scgi_temp_path $TMP/$name;
	sendfile on;
	tcp_nopush on;
	keepalive_timeout 30;
	server {
		listen 127.0.0.1:$PORT;
		root $TMP/www;
	}
}
EOF
	if [ "$wrap" = sdp ]; then
		bg "$name" "$SDP_RUN" -d "$NGINX" -p "$TMP/$name" -c "$TMP/$name/nginx.conf"
	else
		bg "$name" "$NGINX" -p "$TMP/$name" -c "$TMP/$name/nginx.conf"
	fi
	SRV=$BG_PID
	wait_listen "$PORT" || show "$TMP/$name.err" "$TMP/$name/error.log"
}

fetch() { # TAG WRAP
	local tag=$1 wrap=$2 got code
	: >"$TMP/$tag.body"
	local -a cmd=(curl -sS -o "$TMP/$tag.body" -w '%{http_code}' --max-time ${CURL_MAX:-20} "http://127.0.0.1:$PORT/blob.bin")
	[ "$wrap" = sdp ] && cmd=("$SDP_RUN" -d "${cmd[@]}")
	code=$(tmo 30 "${cmd[@]}" 2>"$TMP/$tag.err")
	got=$(sha256sum <"$TMP/$tag.body" 2>/dev/null | cut -d' ' -f1)
	check "$tag" "curl ($wrap) GET 16 MiB from nginx ($SRVWRAP): HTTP ${code:-?}, sha256 ${got:0:16}.." \
		eval '[ "$code" = 200 ] && [ "$got" = "$WANT" ]'
}

# ---- sdp <-> sdp, single process (master_process off: no fork) -----------------
SRVWRAP=sdp
start_nginx single sdp off
CURL_MAX=8 fetch single-curl sdp
check "single-curl-sdp" "curl's connection was SDP, and nginx's (SDP_LOG)" \
	eval 'ge "$(log_sdp_established "$TMP/single-curl.err")" 1 && ge "$(log_sdp_established "$TMP/single/error.log")" 1'
wrk_sdp single-wrk 2 10 "http://127.0.0.1:$PORT/blob.bin"
check "single-wrk" "wrk 3 s, 10 connections: ${REQS:-no result}, no socket errors" \
	eval '[ -n "$REQS" ] && ! grep -q "Socket errors\|Non-2xx" "$TMP/single-wrk.out"'
check "single-wrk-sdp" "wrk's connections were SDP (sdpstat saw $N of 10)" ge "$N" 10
[ "$NFAIL" -gt 0 ] && show "$TMP/single.err" "$TMP/single/error.log" "$TMP/single-wrk.out"
stop "$SRV"

# ---- sdp <-> sdp (pre-fork listener: master + 2 workers) -----------------------
CURL_MAX=8
start_nginx server sdp on 2
fetch curl-sdp sdp
check "curl-sdp-sdp" "curl's connection was SDP (SDP_LOG: ESTABLISHED, no fallback), and a worker's" \
	eval 'ge "$(log_sdp_established "$TMP/curl-sdp.err")" 1 && eq "$(log_tcp_fallbacks "$TMP/curl-sdp.err")" 0 && ge "$(log_sdp_established "$TMP/server/error.log")" 1'
run_limited 20 "$TMP/wrk.out" "$TMP/wrk.err" "$SDP_RUN" wrk -t 2 -c 10 -d 3s "http://127.0.0.1:$PORT/blob.bin"
W=$BG_PID
sleep 1
# Both samplers at once: one after the other, on a loaded host, the second
# could start after wrk's 3 s were over and see nothing.
children_sdp_peak "$SRV" 1 >"$TMP/nw" &
NWS=$!
N=$(sample_sdp "$W" 1)
wait "$NWS"
NW=$(cat "$TMP/nw")
wait "$W"
REQS=$(grep -o 'Requests/sec: *[0-9.]*' "$TMP/wrk.out")
check "wrk" "wrk 3 s, 10 connections: ${REQS:-no result}, no socket errors" \
	eval '[ -n "$REQS" ] && ! grep -q "Socket errors\|Non-2xx" "$TMP/wrk.out"'
check "wrk-sdp" "wrk's connections were SDP (sdpstat saw $N of 10)" ge "$N" 10
check "workers-sdp" "the nginx workers' connections were SDP (sdpstat saw $NW of 10 in the workers)" ge "$NW" 10
[ "$NFAIL" -gt 0 ] && show "$TMP/server.err" "$TMP/server/error.log" "$TMP/curl-sdp.err" "$TMP/wrk.out"
stop "$SRV"

# ---- fallback ------------------------------------------------------------------
SRVWRAP=plain
start_nginx plainserver plain
fetch fallback-client sdp
check "fallback-client-log" "curl fell back (over TCP: no SDP listener)" file_has "$TMP/fallback-client.err" "over TCP: no SDP listener"
stop "$SRV"
SRVWRAP=sdp
start_nginx sdpserver sdp
fetch fallback-server plain
[ "$NFAIL" -gt 0 ] && show "$TMP/sdpserver.err" "$TMP/sdpserver/error.log"
stop "$SRV"
finish
