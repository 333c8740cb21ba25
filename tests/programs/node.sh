#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Node.js (Debian nodejs) http server under sdp_run serving a 1 MiB body:
# 20 curl runs under sdp_run, a new connection each (sha256 each), then
# wrk with keep-alive connections, then plain curl (fallback-server).
# Node's libuv closes descriptors with syscall(SYS_close, fd), which the
# library must see (socket/rawsys_hook.c): with a stale entry, SDP
# connects failed one in two, and after the first keep-alive client left,
# even plain clients failed.
# Evidence: SDP_LOG=3 ESTABLISHED and no fallback for each curl; sdpstat on
# wrk during its run.
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg nodejs node
need_pkg curl curl
need_pkg wrk wrk

head -c 1048576 /dev/urandom >"$TMP/body.bin"
WANT=$(sha256sum <"$TMP/body.bin" | cut -d' ' -f1)
cat >"$TMP/srv.js" <<'EOF'
const http = require('http');
const body = require('fs').readFileSync(process.argv[3]);
http.createServer((req, res) => {
	res.writeHead(200, { 'Content-Length': body.length });
	res.end(body);
}).listen(+process.argv[2], '127.0.0.1');
EOF
PORT=$(rand_port)
bg node env SDP_LOG=3 "$SDP_RUN" node "$TMP/srv.js" "$PORT" "$TMP/body.bin"
SRV=$BG_PID
wait_listen "$PORT" || show "$TMP/node.err"

good=0 sdp=0
for i in $(seq 1 20); do
	tmo 10 env SDP_LOG=3 "$SDP_RUN" curl -s -o "$TMP/got" "http://127.0.0.1:$PORT/" 2>"$TMP/curl.err"
	[ "$(sha256sum <"$TMP/got" | cut -d' ' -f1)" = "$WANT" ] && good=$((good + 1))
	ge "$(log_sdp_established "$TMP/curl.err")" 1 && eq "$(log_tcp_fallbacks "$TMP/curl.err")" 0 && sdp=$((sdp + 1))
done
check curl "20 curl runs (sdp), a new connection each: $good with the right sha256" eq "$good" 20
check curl-sdp "every curl connection was SDP (SDP_LOG: ESTABLISHED, no fallback): $sdp of 20" eq "$sdp" 20

wrk_sdp wrk 1 4 "http://127.0.0.1:$PORT/"
check wrk "wrk 3 s, 4 keep-alive connections: ${REQS:-no result}, no socket errors" \
	eval '[ -n "$REQS" ] && ! grep -q "Socket errors\|Non-2xx" "$TMP/wrk.out"'
check wrk-sdp "wrk's connections were SDP (sdpstat saw $N of 4)" ge "$N" 4

good=0
for i in $(seq 1 6); do
	tmo 10 curl -s -o "$TMP/got" "http://127.0.0.1:$PORT/"
	[ "$(sha256sum <"$TMP/got" | cut -d' ' -f1)" = "$WANT" ] && good=$((good + 1))
done
check plain "6 plain curl runs after the SDP clients left: $good with the right sha256" eq "$good" 6
check node-log "node's log shows SDP connections and no error" \
	eval 'ge "$(log_sdp_established "$TMP/node.err")" 20 && ! grep -qi "error" "$TMP/node.err"'
[ "$NFAIL" -gt 0 ] && show "$TMP/node.err" "$TMP/curl.err" "$TMP/wrk.out"
stop "$SRV"
finish
