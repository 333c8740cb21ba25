#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scripts/bench-programs.sh [BUILD] [REPEAT] — unmodified programs, plain TCP
# and under sdp_run, side by side, interleaved REPEAT times (default 3):
# iperf3, sockperf ping-pong, redis-benchmark SET/GET, nginx + wrk (1 KiB and
# 1 MiB files; one process, and master + 2 workers; and 1 KiB with SMC-D's
# published load, wrk -t 8 -c 1000; and 1 KiB with a new connection per
# request, "Connection: close": the connection setup rate, with one process
# and with master + 2 workers (the workers run as nobody, a user other than
# wrk's); and that again with nginx never under sdp_run: the cost of
# falling back); a Node.js http server
# + wrk (1 KiB, keep-alive); Apache httpd (event MPM) + ab, 1 KiB file, with
# keep-alive and with a new connection per request; PostgreSQL + pgbench -C
# (a backend forked per connection, a connection per transaction);
# memcached + memcaslap
# (TPS); and a chain wrk -> haproxy -> nginx -> memcached (1 KiB value).
# Prints one line per run and a table: median [min-max] per side and the
# median ratio.  A run whose client reports errors (ab "Failed requests",
# wrk socket errors or non-2xx in the chain) prints FAIL.
# Installs nothing: run `make build` first (the programs come with
# `make deps`).  Every server is started fresh for each run and side.
# BENCH_BUSY=N runs N CPU-bound processes beside every run, as other work
# does on a loaded host.
set -u
B=$(cd "${1:-build}" && pwd)
REPEAT=${2:-3}
RUN="$B/bin/sdp_run"
T=$(mktemp -d /tmp/sdp-bench.XXXXXX)
trap 'pkill -f "$T" 2>/dev/null; rm -rf "$T"' EXIT
cd "$T" || exit 1
for _ in $(seq "${BENCH_BUSY:-0}"); do
	bash -c 'exec -a "$0/busy" bash -c "while :; do :; done"' "$T" &
done
# apache's children (User nobody) read their files under $T; nginx's
# workers likewise when started as root
chmod 755 "$T"
export SDP_RUN_LIBRARY="$B/lib/libsdp.so"

wrap() { [ "$1" = sdp ] && echo "$RUN"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }

iperf3_run() { # side -> Gbit/s
	local p; p=$(free_port)
	$(wrap "$1") iperf3 -s -1 -p "$p" >/dev/null 2>&1 & local s=$!
	# No probe connection: the one-off server would take it as its
	# client.  Wait for the listener in ss instead, and retry while the
	# JSON says "error" (iperf3 -J exits 0 after "Connection refused").
	for _ in $(seq 100); do
		[ -n "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] && break
		sleep 0.05
	done
	for _ in $(seq 50); do
		$(wrap "$1") iperf3 -c 127.0.0.1 -p "$p" -t 3 -J >"$T/iperf.json" 2>/dev/null &&
			! grep -q '"error"' "$T/iperf.json" && break
		sleep 0.1
	done
	python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]/1e9))' "$T/iperf.json" 2>/dev/null
	kill $s 2>/dev/null; wait $s 2>/dev/null
}

sockperf_run() { # side -> p50 us
	local p; p=$(free_port)
	$(wrap "$1") sockperf server -i 127.0.0.1 -p "$p" --tcp >/dev/null 2>&1 & local s=$!
	wait_port "$p"
	$(wrap "$1") sockperf ping-pong -i 127.0.0.1 -p "$p" --tcp -t 3 -m 14 2>&1 |
		awk '/percentile 50.000/ {print $NF}'
	kill $s 2>/dev/null; wait $s 2>/dev/null
}

redis_run() { # side op -> req/s
	local p; p=$(free_port)
	$(wrap "$1") redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & local s=$!
	wait_port "$p"
	$(wrap "$1") redis-benchmark -p "$p" -t "$2" -n 100000 -c 50 -d 1024 -q 2>/dev/null |
		tr '\r' '\n' | awk '/requests per second/ {print $2}' | tail -1
	kill $s 2>/dev/null; wait $s 2>/dev/null
}

nginx_run() { # side file master(on|off) [wrk threads] [connections] [close] [plain-server] -> req/s
	local p d; p=$(free_port); d="$T/ng-$1-$2-$3-$RANDOM"
	mkdir -p "$d/www"
	head -c 1024 /dev/urandom >"$d/www/1k"
	head -c 1048576 /dev/urandom >"$d/www/1m"
	cat >"$d/nginx.conf" <<EOF
daemon off; master_process $3; worker_processes 2; pid $d/pid; error_log $d/error.log;
events { worker_connections 1024; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_timeout 30;
       client_body_temp_path $d; proxy_temp_path $d; fastcgi_temp_path $d; uwsgi_temp_path $d; scgi_temp_path $d;
       server { listen 127.0.0.1:$p; root $d/www; } }
EOF
	# plain-server: only wrk runs under sdp_run (its SDP connects are refused)
	local srv=$1; [ -n "${7:-}" ] && srv=plain
	$(wrap "$srv") nginx -p "$d" -c "$d/nginx.conf" >/dev/null 2>&1 & local s=$!
	wait_port "$p"
	local hdr=(); [ -n "${6:-}" ] && hdr=(-H "Connection: close")
	$(wrap "$1") wrk -t "${4:-2}" -c "${5:-10}" -d 3s "${hdr[@]}" "http://127.0.0.1:$p/$2" 2>/dev/null |
		awk '/Requests\/sec/ {print $2}'
	kill $s 2>/dev/null; wait $s 2>/dev/null
}

node_run() { # side -> req/s
	local p d; p=$(free_port); d="$T/node-$1-$RANDOM"
	mkdir -p "$d"
	head -c 1024 /dev/urandom >"$d/body"
	cat >"$d/srv.js" <<'EOF'
const http = require('http');
const body = require('fs').readFileSync(process.argv[3]);
http.createServer((req, res) => {
	res.writeHead(200, { 'Content-Length': body.length });
	res.end(body);
}).listen(+process.argv[2], '127.0.0.1');
EOF
	$(wrap "$1") node "$d/srv.js" "$p" "$d/body" >/dev/null 2>&1 & local s=$!
	wait_port "$p"
	$(wrap "$1") wrk -t 2 -c 10 -d 3s "http://127.0.0.1:$p/" 2>/dev/null |
		awk '/Socket errors|Non-2xx/ {bad=1} /Requests\/sec/ {v=$2} END {if (!bad) print v}'
	kill $s 2>/dev/null; wait $s 2>/dev/null
}

apache_run() { # side ab-args... -> req/s (nothing if ab reports failed requests)
	local side=$1; shift
	local p d; p=$(free_port); d="$T/apache-$side-$RANDOM"
	mkdir -p "$d/www"
	head -c 1024 /dev/urandom >"$d/www/1k"
	chmod -R a+rX "$d"
	local m=/usr/lib/apache2/modules
	cat >"$d/httpd.conf" <<EOF
ServerRoot $d
ServerName 127.0.0.1
DefaultRuntimeDir $d
PidFile $d/pid
ErrorLog $d/error.log
LogLevel warn
LoadModule mpm_event_module $m/mod_mpm_event.so
LoadModule authz_core_module $m/mod_authz_core.so
User nobody
Group nogroup
Listen 127.0.0.1:$p
StartServers 2
ServerLimit 4
ThreadsPerChild 25
MinSpareThreads 25
MaxSpareThreads 75
MaxRequestWorkers 100
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 30
EnableSendfile On
DocumentRoot $d/www
<Directory $d/www>
	Require all granted
</Directory>
EOF
	$(wrap "$side") /usr/sbin/apache2 -d "$d" -f "$d/httpd.conf" -DFOREGROUND >"$d/apache.out" 2>&1 & local s=$!
	wait_port "$p"
	$(wrap "$side") ab "$@" "http://127.0.0.1:$p/1k" >"$d/ab.out" 2>&1
	awk '/^Failed requests:/ {bad = $3 != 0} /^Non-2xx responses:/ {bad = 1}
	     /^Requests per second:/ {v=$4} END {if (!bad) print v}' "$d/ab.out"
	kill $s 2>/dev/null; wait $s 2>/dev/null
}

# PostgreSQL: a backend forked per connection, and pgbench -C: a
# connection per transaction (read-only).  The cluster is made once per
# invocation, as the postgres user when run as root (PostgreSQL refuses
# root), with its own copy of the library and of sdp_run, which that user
# can read.
pg_run() { # side -> tps (nothing if a transaction failed)
	local side=$1 p d bin as=() w=()
	bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -x "$bin/postgres" ] || return 0
	[ "$(id -u)" -eq 0 ] && as=(runuser -u postgres --)
	d="$T/pg"
	if [ ! -d "$d/data" ]; then
		mkdir -p "$d/lib" "$d/bin"
		cp -L "$B/lib/libsdp.so" "$d/lib/libsdp.so"
		cp "$RUN" "$d/bin/sdp_run"
		chmod -R a+rX "$d"
		[ ${#as[@]} -gt 0 ] && chown postgres "$d"
		"${as[@]}" "$bin/initdb" -D "$d/data" -A trust -U postgres >/dev/null 2>&1 || return 0
	fi
	p=$(free_port)
	[ "$side" = sdp ] && w=(env SDP_RUN_LIBRARY="$d/lib/libsdp.so" bash "$d/bin/sdp_run")
	"${as[@]}" "${w[@]}" "$bin/postgres" -D "$d/data" -p "$p" \
		-c listen_addresses=127.0.0.1 -c unix_socket_directories= \
		-c fsync=off -c max_connections=40 >"$d/server.log" 2>&1 & local s=$!
	wait_port "$p"
	pgbench -h 127.0.0.1 -p "$p" -U postgres -i -q postgres >/dev/null 2>&1
	$(wrap "$side") pgbench -h 127.0.0.1 -p "$p" -U postgres -C -S -c 4 -j 2 -T 5 postgres 2>/dev/null |
		awk '/number of failed transactions: [1-9]/ {bad=1} /^tps =/ {v=$3} END {if (!bad) print v}'
	"${as[@]}" "$bin/pg_ctl" -D "$d/data" stop -m fast -w >/dev/null 2>&1
	wait $s 2>/dev/null
}

memcached_run() { # side -> TPS
	local p; p=$(free_port)
	local -a u=(); [ "$(id -u)" = 0 ] && u=(-u root)
	$(wrap "$1") memcached -l 127.0.0.1 -p "$p" -U 0 -t 2 -m 1024 "${u[@]}" >/dev/null 2>&1 & local s=$!
	wait_port "$p"
	$(wrap "$1") memcaslap -s "127.0.0.1:$p" -T 2 -c 8 -t 3s 2>/dev/null |
		grep -o 'TPS: *[0-9]*' | tail -1 | grep -o '[0-9]*$'
	kill $s 2>/dev/null; wait $s 2>/dev/null
}

chain_run() { # side -> req/s: wrk -> haproxy -> nginx -> memcached, 1 KiB value
	local p1 p2 p3 d; d="$T/chain-$1-$RANDOM"
	p1=$(free_port); p2=$(free_port); p3=$(free_port)
	while [ "$p2" = "$p1" ]; do p2=$(free_port); done
	while [ "$p3" = "$p1" ] || [ "$p3" = "$p2" ]; do p3=$(free_port); done
	mkdir -p "$d"
	head -c 1024 /dev/urandom >"$d/value"
	local -a u=(); [ "$(id -u)" = 0 ] && u=(-u root)
	$(wrap "$1") memcached -l 127.0.0.1 -p "$p1" -U 0 -t 2 -m 64 -c 1024 "${u[@]}" >/dev/null 2>&1 & local mc=$!
	wait_port "$p1"
	# store the value (memcached text protocol), check that it reads back
	$(wrap "$1") python3 - "$p1" "$d/value" >"$d/load.out" 2>"$d/load.err" <<'EOF'
import socket, sys
data = open(sys.argv[2], "rb").read()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
f = s.makefile("rb")
s.sendall(b"set v 0 0 %d\r\n" % len(data) + data + b"\r\n")
ok = f.readline().strip() == b"STORED"
s.sendall(b"get v\r\n")
hdr = f.readline().split()
ok = ok and len(hdr) == 4 and f.read(int(hdr[3])) == data
print("ok" if ok else "bad")
s.sendall(b"quit\r\n")
EOF
	cat >"$d/nginx.conf" <<EOF
daemon off; master_process on; worker_processes 1; pid $d/nginx.pid; error_log $d/error.log;
events { worker_connections 1024; }
http { access_log off; keepalive_timeout 30;
       client_body_temp_path $d; proxy_temp_path $d; fastcgi_temp_path $d; uwsgi_temp_path $d; scgi_temp_path $d;
       upstream mc { server 127.0.0.1:$p1; keepalive 8; }
       server { listen 127.0.0.1:$p2;
                location / { set \$memcached_key "v"; memcached_pass mc; default_type application/octet-stream; } } }
EOF
	$(wrap "$1") nginx -p "$d" -c "$d/nginx.conf" >/dev/null 2>&1 & local ng=$!
	wait_port "$p2"
	cat >"$d/haproxy.cfg" <<EOF
global
	nbthread 2
	maxconn 1024
defaults
	mode http
	timeout connect 5s
	timeout client 30s
	timeout server 30s
frontend fe
	bind 127.0.0.1:$p3
	default_backend be
backend be
	server nginx 127.0.0.1:$p2
EOF
	$(wrap "$1") haproxy -f "$d/haproxy.cfg" -db >/dev/null 2>&1 & local ha=$!
	wait_port "$p3"
	if [ "$(cat "$d/load.out")" = ok ]; then
		$(wrap "$1") wrk -t 2 -c 8 -d 3s "http://127.0.0.1:$p3/" 2>/dev/null |
			awk '/Socket errors|Non-2xx/ {bad=1} /Requests\/sec/ {v=$2} END {if (!bad) print v}'
	fi
	kill $ha 2>/dev/null; wait $ha 2>/dev/null
	kill $ng 2>/dev/null; wait $ng 2>/dev/null
	kill $mc 2>/dev/null; wait $mc 2>/dev/null
}

declare -A R
BENCHES=(${BENCH_ONLY:-iperf3 sockperf redis-set redis-get nginx-1k nginx-1m nginx-workers-1k nginx-1k-c1000 nginx-1k-close nginx-workers-1k-close nginx-1k-close-fallback node-http apache-ab-k apache-ab pgbench-close memcached chain})
one() { # bench side
	case $1 in
	iperf3) iperf3_run "$2" ;;
	sockperf) sockperf_run "$2" ;;
	redis-set) redis_run "$2" set ;;
	redis-get) redis_run "$2" get ;;
	nginx-1k) nginx_run "$2" 1k off ;;
	nginx-1m) nginx_run "$2" 1m off ;;
	nginx-workers-1k) nginx_run "$2" 1k on ;;
	nginx-1k-c1000) nginx_run "$2" 1k off 8 1000 ;;
	nginx-1k-close) nginx_run "$2" 1k off 2 10 close ;;
	nginx-workers-1k-close) nginx_run "$2" 1k on 2 10 close ;;
	nginx-1k-close-fallback) nginx_run "$2" 1k off 2 10 close plain-server ;;
	node-http) node_run "$2" ;;
	apache-ab-k) apache_run "$2" -k -n 20000 -c 8 ;;
	apache-ab) apache_run "$2" -n 5000 -c 8 ;;
	pgbench-close) pg_run "$2" ;;
	memcached) memcached_run "$2" ;;
	chain) chain_run "$2" ;;
	esac
}
for r in $(seq "$REPEAT"); do
	for b in "${BENCHES[@]}"; do
		for side in plain sdp; do
			v=$(one "$b" "$side")
			echo "run $r $b $side ${v:-FAIL}"
			R[$b,$side]="${R[$b,$side]:-} ${v:-nan}"
		done
	done
done
echo
printf '%-18s %-26s %-26s %s\n' benchmark "plain: median [min-max]" "sdp_run: median [min-max]" "ratio sdp/plain"
for b in "${BENCHES[@]}"; do
	python3 - "$b" "${R[$b,plain]}" "${R[$b,sdp]}" <<'EOF'
import statistics, sys
b, p, s = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
f = lambda v: "%.2f [%.2f-%.2f]" % (statistics.median(v), min(v), max(v))
unit = {"sockperf": "p50 us, lower is better", "iperf3": "Gbit/s", "memcached": "TPS", "pgbench-close": "tps"}.get(b, "req/s")
print("%-18s %-26s %-26s %.2fx  (%s)" % (b, f(p), f(s), statistics.median(s) / statistics.median(p), unit))
EOF
done
