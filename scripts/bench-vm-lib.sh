# SPDX-License-Identifier: MIT
# scripts/bench-vm-lib.sh — the measurements of scripts/bench-vm.sh, sourced
# (inside the VM) by it and by scripts/bench-vm-zcopy-ab.sh.  The caller
# sets B (build directory) first.  Each function prints one figure, or
# nothing when its run failed.
A=10.99.0.1 S=10.99.0.2
RUN="$PWD/tools/sdp_run"
export SDP_RUN_LIBRARY=$PWD/$B/lib/libsdp.so SDP_TRANSPORT=verbs
T=${BENCH_TIME:-3}
# Three significant digits, but whole numbers from 1000 up (conn/s).
med() { sort -g | awk 'function f(x) {return x >= 1000 ? sprintf("%.0f", x) : sprintf("%.3g", x)}
	{v[NR]=$1} END {if (!NR) {print "n/a"; exit}
	printf "%s [%s-%s]\n", f(v[int((NR+1)/2)]), f(v[1]), f(v[NR])}'; }
wrap() { case $1 in sdp) echo "$RUN" ;; tcp) echo env ;; esac; }
bw() { # mode size -> Gbit/s
	local w; w=$(wrap "$1")
	$w iperf3 -s -B $S -1 -p 5300 >/dev/null 2>&1 & local sp=$!
	sleep 1
	timeout $((T + 15)) $w iperf3 -c $S -B $A -p 5300 -t $T -l "$2" -J 2>/dev/null |
		awk -F'[:,]' '/"bits_per_second"/ {b=$2} END {if (b) printf "%.2f\n", b/1e9}'
	kill $sp 2>/dev/null; wait $sp 2>/dev/null
}
lat() { # mode -> usec (sockperf ping-pong, 64 B)
	local w; w=$(wrap "$1")
	$w sockperf sr --tcp -i $S -p 11300 >/dev/null 2>&1 & local sp=$!
	sleep 1
	timeout $((T + 15)) $w sockperf pp --tcp -i $S -p 11300 --client_ip $A -t $T -m 64 2>/dev/null |
		sed -n 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p'
	kill $sp 2>/dev/null; wait $sp 2>/dev/null
}
# socat: one stream, blocking writes of SIZE bytes.  ZCopy needs blocking
# sends (a non-blocking send cannot wait for the peer's RDMA READ), and
# iperf3's data sockets are non-blocking, so the ZCopy rows use socat with
# SDP_ZCOPY_THRESH=SIZE.  The sender's wall time counts (with ZCopy a send
# returns only once the sink has read it).  A sample of sdpstat during the
# run is kept in $ZLOG: the proof that ZCopy ran.
ZLOG=/tmp/bench-vm-zcopy.log
# One socat transfer of $4 MiB; prints its wall time in ns.
sc_once() { # mode size thresh MiB
	local w n t0 t1; w=$(wrap "$1"); n=$(($4 * 1048576))
	SDP_ZCOPY_THRESH=$3 $w socat -b "$2" -u TCP-LISTEN:5400,bind=$S,reuseaddr OPEN:/dev/null >/dev/null 2>&1 & local sp=$!
	sleep 1
	t0=$(date +%s%N)
	SDP_ZCOPY_THRESH=$3 timeout 60 $w socat -b "$2" -u OPEN:/dev/zero,readbytes=$n TCP:$S:5400,bind=$A 2>/dev/null & local cp=$!
	if [ "$1" = sdp ] && [ "$4" -gt "${BENCH_MB_BASE:-8}" ]; then
		sleep 0.5
		echo "socat size $2 thresh $3: $("$PWD/$B/bin/sdpstat" --json 2>/dev/null | tr '{' '\n' | grep -o '"zcopy_tx": [0-9]*' | sort -t: -k2 -n | tail -1)" >>$ZLOG
	fi
	wait $cp && t1=$(date +%s%N) && echo $((t1 - t0))
	kill $sp 2>/dev/null; wait $sp 2>/dev/null
}
# ZCopy streaming measured inside the program (sdpperf: blocking sends of
# SIZE, SDP_ZCOPY_THRESH=SIZE, a warm-up second, then the rate over
# BENCH_TIME): no process start, connection set-up or close in it, and no
# other program's reads and writes per message.  The server (rxe-b) sends
# and the client (rxe-a) receives, so the sink RDMA-reads from rxe-b as
# ib_read_bw's client does.  Optional third argument: the libsdp.so;
# ZS_ENV: more settings for both ends (K=V,K=V); ZS_CPU=1 appends the CPU
# seconds both processes spent per GB moved.
zs() { # size thresh [lib] -> Gbit/s [cpu-s/GB]
	local kv ea=()
	for kv in ${ZS_ENV:+${ZS_ENV//,/ }}; do ea+=(--env "$kv"); done
	"$PWD/$B/bin/sdpperf" --workload stream --transports sdp --size "$1" \
		--env SDP_TRANSPORT=verbs --env SDP_ZCOPY_THRESH="$2" "${ea[@]}" \
		--server-ip $S --client-ip $A --time $T --warmup 1 \
		--lib "${3:-$SDP_RUN_LIBRARY}" 2>/dev/null |
		awk -v cpu="${ZS_CPU:-}" '$1 == "sdp" && $3 + 0 > 0 {
			if (cpu) printf "%.2f %.1f\n", $3, $6; else printf "%.2f\n", $3}'
}
# Streaming rate, as perftest and iperf3 report it: without the start of
# the processes, the connection set-up and the close, which under TCG take
# about 2.5 s per socat run (a 16 MiB ZCopy run: 3.1 s of wall time, of
# which 0.32 s between the first SrcAvail and the last RdmaRdCompl).  Two
# transfers, BENCH_MB_BASE (8) and BENCH_MB (48) MiB; the difference of
# their times is what the extra MiB cost.
sc() { # mode size thresh -> Gbit/s
	local a b small=${BENCH_MB_BASE:-8} big=${BENCH_MB:-48}
	a=$(sc_once "$1" "$2" "$3" "$small") && b=$(sc_once "$1" "$2" "$3" "$big") &&
		awk -v n=$(((big - small) * 1048576)) -v t=$((b - a)) 'BEGIN {if (t > 0) printf "%.2f\n", n * 8 / t}'
}
# perftest across the veth.  Not -R (rdma_cm): with it, a client on this
# host resolves the peer's address, which is local, to rxe-b itself, and
# the test runs in rxe-b's loopback without ever crossing veth-a (rxe-a's
# packet counters stay at 0, and the figure is that loopback's, 1.4-1.6x
# the veth's rate).  Instead each
# side names its device and the IPv4 GID of its own address, and the
# packets go rxe-a -> veth -> rxe-b like SDP's.  A run that did not move
# rxe-a's counters reports nothing.
gid_index() { # device -> index of its IPv4-mapped GID
	ibv_devinfo -v -d "$1" | sed -n 's/.*GID\[ *\([0-9]*\)\]:.*::ffff:[0-9.]*.*/\1/p' | head -1
}
sent_a() { rdma statistic show link rxe-a/1 | tr ' ' '\n' | grep -A1 '^sent_pkts' | tail -1; }
pt() { # perftest binary size -> Gbit/s (or usec, typical, for _lat)
	local out p0 try
	# A server not yet listening after its second (slow emulation)
	# fails the client at once: one more try.
	for try in 1 2; do
		"$1" -d rxe-b -x "$(gid_index rxe-b)" -s "$2" -D $T >/dev/null 2>&1 & local sp=$!
		sleep $try
		p0=$(sent_a)
		out=$(timeout $((T + 15)) "$1" -d rxe-a -x "$(gid_index rxe-a)" -s "$2" -D $T $S 2>/dev/null)
		kill $sp 2>/dev/null; wait $sp 2>/dev/null
		echo "$out" | grep -q "^ *$2 " && break
	done
	[ "$(sent_a)" -gt "$p0" ] || return 0
	if [[ $1 == *_lat ]]; then
		# -D runs print "#bytes #iterations t_avg[usec] ...".
		echo "$out" | awk '$1 == '"$2"' {print $3}' | tail -1
	else
		# perftest's MB is 2^20 bytes: iterations x size / time agree
		# with it, and so does --report_gbits (read as 10^6 it is 4.9%
		# low).
		echo "$out" | awk '$1 == '"$2"' {printf "%.2f\n", $4*1048576*8/1e9}' | tail -1
	fi
}
rst() { # mode size count -> usec per transfer (64 B) or Gbit/s
	local w=env o="-T s"
	case $1 in sdp) w=$RUN ;; sdpx) w="env ${BENCH_EXP_ENV//,/ } $RUN" ;; rs) o= ;; esac
	timeout $((T + 30)) $w rstream $o -b $S -p 7471 -S "$2" -C "$3" >/dev/null 2>&1 & local sp=$!
	sleep 1
	timeout $((T + 25)) $w rstream $o -s $S -b $A -p 7471 -S "$2" -C "$3" 2>/dev/null |
		awk -v s="$2" '$1 == "custom" {print (s == 64 ? $8 : $7)}'
	kill $sp 2>/dev/null; wait $sp 2>/dev/null
}
# Connection rate (sdpperf crr: connect, 1-byte exchange, close, back to
# back) from rxe-a's address to a server on rxe-b's: SDP over verbs, kernel
# TCP over the same veth, rsockets (rdma-core's preload library under plain
# AF_INET sockets).  Without an RDMA path librspreload.so quietly uses kernel
# TCP, so an SDP or rsockets run that did not move rxe-a's packet counter
# reports nothing.  CRR_CONNS: clients connecting at once (1).
crr() { # sdp|tcp|rsockets -> conn/s
	local p0 out
	p0=$(sent_a)
	out=$(timeout $((T + 60)) "$PWD/$B/bin/sdpperf" --workload crr --transports "$1" \
		--conns "${CRR_CONNS:-1}" --env SDP_TRANSPORT=verbs --server-ip $S --client-ip $A \
		--time $T --warmup 1 --lib "$SDP_RUN_LIBRARY" 2>/dev/null)
	[ "$1" = tcp ] || [ "$(sent_a)" -gt "$p0" ] || return 0
	echo "$out" | awk -v t="$1" '$1 == t && $2 + 0 > 0 {print $2}'
}
