#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A three-tier chain, every tier an unmodified Debian program under sdp_run:
#   curl / wrk -> haproxy (HTTP mode, 2 threads) -> nginx (master + 1
#   worker, ngx_http_memcached_module, upstream keepalive) -> memcached
# memcached holds a 200 KiB random value (stored and read back by a python3
# client under sdp_run, sha256); each HTTP request through haproxy makes
# nginx fetch it from memcached.  curl GETs it 5 times (a new connection
# each, sha256 each), then wrk drives the chain for 3 s.  The same chain
# plain (no sdp_run anywhere, other ports) must give the same bytes; both
# wrk figures are printed, not compared (a functional test).
# Evidence that every hop was SDP:
# - sdpstat, sampled while wrk runs, per hop and at both of its ends:
#   wrk's connections; haproxy's accepted (local port P3) and outgoing
#   (remote P2) ones; the nginx worker's accepted (P2) and outgoing (P1);
#   memcached's accepted (P1); all ESTABLISHED over shm, none on TCP;
# - ss while wrk runs: no kernel TCP connection on P1, P2 or P3 (in the
#   plain chain, the same sampling must see some on each: a control);
# - SDP_LOG=3: ESTABLISHED transitions and no "over TCP" in the logs of
#   curl, haproxy (stderr), nginx (its error_log) and memcached (stderr),
#   active side ("CONNECTING -> ESTABLISHED") in haproxy and nginx.
# shellcheck disable=SC2016 # check ... eval '...': expanded when checked
# shellcheck disable=SC2034 # KNOWN_FAILURES is read by common.sh
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg memcached memcached
need_pkg nginx nginx
need_pkg haproxy haproxy
need_pkg wrk wrk
need_pkg curl curl
need_pkg python3 python3
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
MEMCACHED=$(command -v memcached || echo /usr/bin/memcached)
# Debian's python3 rather than a shim in front of it (pyenv's is a script).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
MCUSER=()
[ "$(id -u)" = 0 ] && MCUSER=(-u nobody) # memcached refuses to run as root
# nginx started as root runs its worker as nobody
chmod a+rx "$TMP"

head -c 204800 /dev/urandom >"$TMP/blob.bin"
WANT=$(sha256sum <"$TMP/blob.bin" | cut -d' ' -f1)

# mc_load PORT KEY FILE: store FILE's bytes under KEY (text protocol), read
# them back; prints the reply to set, then the sha256 of what get returned.
cat >"$TMP/mcload.py" <<'EOF'
import hashlib, socket, sys
port, key, path = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
data = open(path, "rb").read()
s = socket.create_connection(("127.0.0.1", port), timeout=10)
f = s.makefile("rb")
s.sendall(b"set %s 0 0 %d\r\n" % (key, len(data)) + data + b"\r\n")
print(f.readline().decode().strip())
s.sendall(b"get %s\r\n" % key)
hdr = f.readline().split()
value = f.read(int(hdr[3])) if len(hdr) == 4 and hdr[0] == b"VALUE" else b""
f.read(2)
print(hashlib.sha256(value).hexdigest(), f.readline().decode().strip())
s.sendall(b"quit\r\n")
EOF

# start_chain NAME WRAP(sdp|plain): memcached, load, nginx, haproxy.  Sets
# P1 P2 P3 (memcached, nginx, haproxy ports), MC NG HA (their pids; NG is
# the nginx master), D (the directory of the logs).
start_chain() {
	local name=$1 wrap=$2
	local -a w=()
	[ "$wrap" = sdp ] && w=("$SDP_RUN" -d)
	D=$TMP/$name
	mkdir -p "$D"
	chmod a+rx "$D"
	P1=$(rand_port)
	P2=$(rand_port)
	P3=$(rand_port)
	while [ "$P2" = "$P1" ]; do P2=$(rand_port); done
	while [ "$P3" = "$P1" ] || [ "$P3" = "$P2" ]; do P3=$(rand_port); done

	bg "$name/memcached" "${w[@]}" "$MEMCACHED" "${MCUSER[@]}" -l 127.0.0.1 -p "$P1" -U 0 -t 2 -m 64 -c 1024
	MC=$BG_PID
	wait_listen "$P1" || show "$D/memcached.err"
	tmo 15 "${w[@]}" "$PY" "$TMP/mcload.py" "$P1" blob "$TMP/blob.bin" >"$D/load.out" 2>"$D/load.err"
	check "$name-load" "python3 ($wrap) stored 200 KiB in memcached ($wrap) and read it back: $(tr '\n' ' ' <"$D/load.out" | cut -c1-30).." \
		eval '[ "$(sed -n 1p "$D/load.out")" = STORED ] && [ "$(sed -n 2p "$D/load.out")" = "$WANT END" ]'

	cat >"$D/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
pid $D/nginx.pid;
error_log $D/error.log info;
events { worker_connections 512; }
http {
	access_log off;
	client_body_temp_path $D;
	proxy_temp_path $D;
	fastcgi_temp_path $D;
	uwsgi_temp_path $D;
	scgi_temp_path $D;
	keepalive_timeout 30;
	upstream mc {
		server 127.0.0.1:$P1;
		keepalive 8;
	}
	server {
		listen 127.0.0.1:$P2;
		location / {
			set \$memcached_key "blob";
			memcached_pass mc;
			default_type application/octet-stream;
		}
	}
}
EOF
	bg "$name/nginx" "${w[@]}" "$NGINX" -p "$D" -c "$D/nginx.conf"
	NG=$BG_PID
	wait_listen "$P2" || show "$D/nginx.err" "$D/error.log"

	cat >"$D/haproxy.cfg" <<EOF
global
	nbthread 2
	maxconn 512
defaults
	mode http
	timeout connect 5s
	timeout client 30s
	timeout server 30s
frontend fe
	bind 127.0.0.1:$P3
	default_backend be
backend be
	server nginx 127.0.0.1:$P2
EOF
	bg "$name/haproxy" "${w[@]}" "$HAPROXY" -f "$D/haproxy.cfg" -db
	HA=$BG_PID
	wait_listen "$P3" || show "$D/haproxy.err"
}

# curls NAME WRAP COUNT: COUNT curl GETs through haproxy, a new connection
# each; GOOD = those with HTTP 200 and the right sha256, CSDP = those whose
# SDP_LOG shows an ESTABLISHED connection and no fallback.
curls() {
	local name=$1 wrap=$2 n=$3 i code got
	local -a w=()
	[ "$wrap" = sdp ] && w=("$SDP_RUN" -d)
	GOOD=0 CSDP=0
	for i in $(seq 1 "$n"); do
		: >"$D/curl.body"
		code=$(tmo 15 "${w[@]}" curl -sS -o "$D/curl.body" -w '%{http_code}' --max-time 10 \
			"http://127.0.0.1:$P3/" 2>"$D/curl$i.err")
		got=$(sha256sum <"$D/curl.body" | cut -d' ' -f1)
		[ "$code" = 200 ] && [ "$got" = "$WANT" ] && GOOD=$((GOOD + 1))
		ge "$(log_sdp_established "$D/curl$i.err")" 1 && eq "$(log_tcp_fallbacks "$D/curl$i.err")" 0 && CSDP=$((CSDP + 1))
	done
	LASTCODE=$code LASTSHA=$got
}

# port_conns PID WHICH PORT: ESTABLISHED SDP connections of PID that moved
# data with local (WHICH=local) or remote (WHICH=remote) port PORT, or the
# reason there is no answer (see sdpstat_of).
port_conns() {
	local out
	out=$(sdpstat_of "$1") || { echo "$out"; return 1; }
	printf '%s\n' "$out" | grep '"state": "ESTABLISHED"' | grep -E '"transport": "(shm|verbs)"' |
		grep -F "\"$2\": \"127.0.0.1:$3\"" | grep -vc '"tx_bytes": 0, "rx_bytes": 0,' || true
}

# sample_chain WATCH SECONDS: every 0.2 s while WATCH (wrk) lives, up to
# SECONDS: the largest value seen of each of
#   wrk       SDP connections of wrk (if WRK_SDP=1)
#   ha_in     haproxy's SDP connections accepted on P3
#   ha_out    haproxy's SDP connections to P2
#   ng_in     the nginx worker's SDP connections accepted on P2
#   ng_out    the nginx worker's SDP connections to P1
#   mc_in     memcached's SDP connections accepted on P1
#   fb_*      sockets on TCP in haproxy, the nginx worker, memcached
#   tcp_P*    kernel TCP connections on P1, P2, P3 (ss)
# in the associative array S; a value no sample could take is the reason
# instead.  WK is the nginx worker's pid.
declare -A S
sample_chain() {
	local watch=$1 secs=$2 i k n
	local -A why=()
	local keys="ha_in ha_out ng_in ng_out mc_in fb_ha fb_ng fb_mc tcp_P1 tcp_P2 tcp_P3"
	[ "${WRK_SDP:-0}" = 1 ] && keys="wrk $keys"
	S=()
	for k in $keys; do S[$k]=-1 why[$k]=no-sample; done
	for i in $(seq 1 $((secs * 5))); do
		kill -0 "$watch" 2>/dev/null || break
		for k in $keys; do
			case $k in
			wrk) n=$(sdp_conns "$watch") ;;
			ha_in) n=$(port_conns "$HA" local "$P3") ;;
			ha_out) n=$(port_conns "$HA" remote "$P2") ;;
			ng_in) n=$(port_conns "$WK" local "$P2") ;;
			ng_out) n=$(port_conns "$WK" remote "$P1") ;;
			mc_in) n=$(port_conns "$MC" local "$P1") ;;
			fb_ha) n=$(tcp_fallbacks "$HA") ;;
			fb_ng) n=$(tcp_fallbacks "$WK") ;;
			fb_mc) n=$(tcp_fallbacks "$MC") ;;
			tcp_P1) n=$(tcp_conns "$P1") ;;
			tcp_P2) n=$(tcp_conns "$P2") ;;
			tcp_P3) n=$(tcp_conns "$P3") ;;
			esac
			if [[ $n =~ ^[0-9]+$ ]]; then
				[ "$n" -gt "${S[$k]}" ] && S[$k]=$n
			else
				why[$k]=$n
			fi
		done
		sleep 0.2
	done
	for k in $keys; do
		[ "${S[$k]}" -ge 0 ] || S[$k]=${why[$k]}
	done
}

# drive NAME WRAP: wrk for 3 s (4 connections) through haproxy, sampled
# with sample_chain from 0.5 s in; REQS = its Requests/sec.
drive() {
	local name=$1 wrap=$2 wr
	local -a w=()
	[ "$wrap" = sdp ] && w=("$SDP_RUN")
	WK=$(pgrep -P "$NG" | head -n 1)
	[ -n "$WK" ] || WK=no-nginx-worker
	run_limited 20 "$D/wrk.out" "$D/wrk.err" "${w[@]}" wrk -t 1 -c 4 -d 3s "http://127.0.0.1:$P3/"
	wr=$BG_PID
	sleep 0.5
	WRK_SDP=$([ "$wrap" = sdp ] && echo 1 || echo 0) sample_chain "$wr" 2
	wait "$wr"
	REQS=$(grep -o 'Requests/sec: *[0-9.]*' "$D/wrk.out" | grep -o '[0-9.]*$')
	check "$name-wrk" "wrk ($wrap) 3 s, 4 connections through the chain: ${REQS:-no result} req/s, no socket errors, no non-2xx" \
		eval '[ -n "$REQS" ] && ! grep -q "Socket errors\|Non-2xx" "$D/wrk.out"'
}

# errors NAME WRAP: after stop_chain, no error in the servers' own logs
# (nginx [error] and worse, haproxy ALERT, memcached's stderr other than
# libsdp lines and sdp_run's banner).
errors() {
	check "$1-errors" "no error logged by nginx, haproxy or memcached ($2)" \
		eval '! grep -qE "\[(error|crit|alert|emerg)\]" "$D/error.log" && ! grep -q "ALERT" "$D/haproxy.err" &&
			! grep -vE "^(libsdp\[|sdp_run: )" "$D/memcached.err" | grep -q .'
}

# stop_chain: front to back, so each tier sees its clients leave first.
# memcached logs an accepted SDP connection only when it ends (here, when
# nginx exits): under SDP_LOG, give it up to 2 s to see nginx's go.
stop_chain() {
	local i
	stop "$HA"
	stop "$NG"
	for i in $(seq 1 $((20 * MULT))); do
		has_libsdp_log "$D/memcached.err" || break
		ge "$(log_sdp_established "$D/memcached.err")" 2 && break
		sleep 0.1
	done
	stop "$MC"
}

T0=$SECONDS
# ---- the chain, every tier under sdp_run ------------------------------------
start_chain sdp sdp
curls sdp sdp 5
check sdp-curl "5 curl GETs (sdp) through haproxy -> nginx -> memcached: $GOOD with HTTP 200 and sha256 ${WANT:0:16}.. (last: HTTP ${LASTCODE:-?}, ${LASTSHA:0:16}..)" eq "$GOOD" 5
check sdp-curl-sdp "every curl connection was SDP (SDP_LOG: ESTABLISHED, no fallback): $CSDP of 5" eq "$CSDP" 5
drive sdp sdp
SDP_REQS=$REQS
check sdp-hop1 "wrk -> haproxy over SDP at both ends (sdpstat: wrk ${S[wrk]}, haproxy accepted ${S[ha_in]}, of 4)" \
	eval 'ge "${S[wrk]}" 4 && ge "${S[ha_in]}" 4'
check sdp-hop2 "haproxy -> nginx over SDP at both ends (sdpstat: haproxy out ${S[ha_out]}, nginx worker accepted ${S[ng_in]})" \
	eval 'ge "${S[ha_out]}" 1 && ge "${S[ng_in]}" 1'
check sdp-hop3 "nginx -> memcached over SDP at both ends (sdpstat: nginx worker out ${S[ng_out]}, memcached accepted ${S[mc_in]})" \
	eval 'ge "${S[ng_out]}" 1 && ge "${S[mc_in]}" 1'
check sdp-no-fallback "no socket on TCP in haproxy, nginx, memcached (sdpstat: ${S[fb_ha]}, ${S[fb_ng]}, ${S[fb_mc]})" \
	eval 'eq "${S[fb_ha]}" 0 && eq "${S[fb_ng]}" 0 && eq "${S[fb_mc]}" 0'
check sdp-no-tcp "no kernel TCP connection on the memcached, nginx, haproxy ports while wrk ran (ss: ${S[tcp_P1]}, ${S[tcp_P2]}, ${S[tcp_P3]})" \
	eval 'eq "${S[tcp_P1]}" 0 && eq "${S[tcp_P2]}" 0 && eq "${S[tcp_P3]}" 0'
curls sdp-after sdp 1
check sdp-after "the chain still serves after wrk (curl, sdp): HTTP ${LASTCODE:-?}, sha256 ${LASTSHA:0:16}.." eq "$GOOD" 1
stop_chain
errors sdp sdp
HA_LOG=$D/haproxy.err NG_LOG=$D/error.log MC_LOG=$D/memcached.err
active() { grep -cE '^libsdp\[[0-9]+\]: conn [0-9]+: CONNECTING -> ESTABLISHED' "$1" || true; }
check sdp-log-haproxy "haproxy's SDP_LOG: $(log_sdp_established "$HA_LOG") connections ESTABLISHED ($(active "$HA_LOG") of them its own to nginx), $(log_tcp_fallbacks "$HA_LOG") over TCP" \
	eval 'ge "$(log_sdp_established "$HA_LOG")" 6 && ge "$(active "$HA_LOG")" 1 && eq "$(log_tcp_fallbacks "$HA_LOG")" 0'
check sdp-log-nginx "nginx's SDP_LOG (error_log): $(log_sdp_established "$NG_LOG") connections ESTABLISHED ($(active "$NG_LOG") of them its own to memcached), $(log_tcp_fallbacks "$NG_LOG") over TCP" \
	eval 'ge "$(log_sdp_established "$NG_LOG")" 2 && ge "$(active "$NG_LOG")" 1 && eq "$(log_tcp_fallbacks "$NG_LOG")" 0'
check sdp-log-memcached "memcached's SDP_LOG: $(log_sdp_established "$MC_LOG") connections ESTABLISHED, $(log_tcp_fallbacks "$MC_LOG") over TCP" \
	eval 'ge "$(log_sdp_established "$MC_LOG")" 2 && eq "$(log_tcp_fallbacks "$MC_LOG")" 0'
[ "$NFAIL" -gt 0 ] && show "$D/haproxy.err" "$D/error.log" "$D/memcached.err" "$D/wrk.out" "$D/curl1.err"
T1=$SECONDS F1=$NFAIL

# ---- the same chain plain -------------------------------------------------
start_chain plain plain
curls plain plain 5
check plain-curl "5 curl GETs (plain) through the plain chain: $GOOD with HTTP 200 and the right sha256" eq "$GOOD" 5
drive plain plain
PLAIN_REQS=$REQS
check plain-tcp "control: ss saw kernel TCP connections on each port while wrk ran (${S[tcp_P1]}, ${S[tcp_P2]}, ${S[tcp_P3]})" \
	eval 'ge "${S[tcp_P1]}" 1 && ge "${S[tcp_P2]}" 1 && ge "${S[tcp_P3]}" 1'
stop_chain
errors plain plain
check plain-no-libsdp "no libsdp in the plain chain (no libsdp line in any log)" \
	eval '! has_libsdp_log "$D/haproxy.err" && ! has_libsdp_log "$D/error.log" && ! has_libsdp_log "$D/memcached.err"'
[ "$NFAIL" -gt "$F1" ] && show "$D/haproxy.err" "$D/error.log" "$D/memcached.err" "$D/wrk.out"
note "wrk through the chain: ${SDP_REQS:-?} req/s over SDP, ${PLAIN_REQS:-?} req/s plain (200 KiB responses; not a benchmark)"
note "times: SDP chain $((T1 - T0)) s, plain chain $((SECONDS - T1)) s"
finish
