#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scripts/bench-programs.sh [BUILD] [REPEAT] — unmodified programs, plain TCP
# and under sdp_run, side by side, interleaved REPEAT times (default 3):
# iperf3, sockperf ping-pong, redis-benchmark SET/GET, nginx + wrk (1 KiB and
# 1 MiB files; one process, and master + 2 workers; and 1 KiB with SMC-D's
# published load, wrk -t 8 -c 1000; and 1 KiB with a new connection per
# request, "Connection: close": the connection setup rate; and that again with
# nginx never under sdp_run: the cost of falling back).  Prints one line per
# run and a table: median [min-max] per side and the median ratio.
# Installs nothing: run `make build` first (the programs come with
# `make deps`).  Every server is started fresh for each run and side.
set -u
B=$(cd "${1:-build}" && pwd)
REPEAT=${2:-3}
RUN="$B/bin/sdp_run"
T=$(mktemp -d /tmp/sdp-bench.XXXXXX)
trap 'pkill -f "$T" 2>/dev/null; rm -rf "$T"' EXIT
cd "$T" || exit 1
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

declare -A R
BENCHES=(${BENCH_ONLY:-iperf3 sockperf redis-set redis-get nginx-1k nginx-1m nginx-workers-1k nginx-1k-c1000 nginx-1k-close nginx-1k-close-fallback})
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
	nginx-1k-close-fallback) nginx_run "$2" 1k off 2 10 close plain-server ;;
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
unit = "p50 us, lower is better" if b == "sockperf" else ("Gbit/s" if b == "iperf3" else "req/s")
print("%-18s %-26s %-26s %.2fx  (%s)" % (b, f(p), f(s), statistics.median(s) / statistics.median(p), unit))
EOF
done
