#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/bench-vm.sh [BUILD] [REPEAT] — runs INSIDE the VM (not part of make
# test):  scripts/vm-run -t 1800 -- bash scripts/bench-vm.sh build 3
# Side by side, rxe-a (10.99.0.1) -> rxe-b (10.99.0.2) over the veth pair:
#   SDP over verbs (iperf3 / sockperf under tools/sdp_run), kernel TCP over
#   the same veth, raw verbs (perftest ib_read_bw / ib_send_bw / ib_send_lat,
#   each device with its own GID); then SDP, rsockets and TCP with one program, rdma-core's
#   rstream (native rsockets; "-T s" = ordinary sockets, under sdp_run for
#   SDP; its sockets are non-blocking, so never ZCopy); socat with blocking writes for SDP
#   BCopy vs ZCopy (iperf3's non-blocking sends never go ZCopy), and ZCopy
#   measured inside the program too (sdpperf in steady state: zs() in
#   bench-vm-lib.sh; socat's rate includes process start-up).  Not
#   iperf3/sockperf with librspreload.so: neither runs on rsockets
#   (docs/BENCHMARKS-VM.md, "rsockets").
# Bandwidth for 64 KiB, 256 KiB, 1 MiB messages; ping-pong latency (64 B).
# Each figure: median of REPEAT runs [min-max]; each run is bounded (a hung
# run counts as missing: "n/a").  Prints a markdown table.
# Variables go inside the VM's command (vm-run passes no environment):
#   scripts/vm-run -t 900 -- env BENCH_ZC_ONLY=1 bash scripts/bench-vm.sh
# BENCH_TIME (3): seconds per iperf3/perftest run.
# BENCH_ZC_ONLY=1: only the ZCopy rows (sdpperf, socat) and ib_read_bw.
# BENCH_LAT_ONLY=1: only the ping-pong rows (SDP with and without the verbs
# wait spin, SDP_VERBS_SPIN_US=0, in the same boot; TCP; ib_send_lat).
# BENCH_CRR_ONLY=1: only the connection rate (sdpperf crr) of SDP, kernel TCP
# and rsockets, each REPEAT times, alternated; with 1 and 8 clients.
# BENCH_RST_ONLY=1: only rstream, SDP against rsockets (the issue's parity
# target), and the sockperf ping-pong row.  With BENCH_EXP=1 an "exp" row
# runs SDP with BENCH_EXP_ENV, comma-separated settings (A/B in one boot):
#   BENCH_EXP_ENV=SDP_RECV_BUFS=4,SDP_RECV_BUF_SIZE=131088
set -u
B=${1:-build} R=${2:-3}
. "$PWD/scripts/bench-vm-lib.sh"
declare -A res
ratio() { awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN {if (a+0 > 0 && b+0 > 0) printf "%.2f", a/b; else printf "n/a"}'; }
if [ -n "${BENCH_ZC_ONLY:-}" ]; then
	echo "| message | sdpperf SDP ZCopy (Gbit/s) | socat SDP ZCopy | socat SDP BCopy | socat kernel TCP | ib_read_bw | ZCopy/RDMA READ (sdpperf) | (socat) |"
	echo "|---|---|---|---|---|---|---|---|"
	for size in 65536 262144 1048576; do
		res[read,$size]=$(for i in $(seq $R); do pt ib_read_bw $size; done | med)
		res[zs,$size]=$(for i in $(seq $R); do zs $size $size; done | med)
		res[zc,$size]=$(for i in $(seq $R); do sc sdp $size $size; done | med)
		res[scb,$size]=$(for i in $(seq $R); do sc sdp $size 0; done | med)
		res[sct,$size]=$(for i in $(seq $R); do sc tcp $size 0; done | med)
		echo "| $((size / 1024)) KiB | ${res[zs,$size]} | ${res[zc,$size]} | ${res[scb,$size]} | ${res[sct,$size]} | ${res[read,$size]} | $(ratio "${res[zs,$size]}" "${res[read,$size]}") | $(ratio "${res[zc,$size]}" "${res[read,$size]}") |"
	done
	echo; echo "ZCopy check (largest zcopy_tx sdpstat saw in each socat run):"; cat $ZLOG 2>/dev/null
	exit 0
fi
crr_rows() {
	local m n i
	for n in 1 8; do
		for i in $(seq $R); do
			for m in sdp tcp rsockets; do
				echo "$m $(CRR_CONNS=$n crr $m)" >>/tmp/crr.$n
			done
		done
		for m in sdp tcp rsockets; do
			res[crr,$m,$n]=$(awk -v m=$m '$1 == m && NF > 1 {print $2}' /tmp/crr.$n | med)
		done
	done
	echo "| connect + 1-byte exchange + close (conn/s) | SDP | kernel TCP | rsockets | SDP/TCP | SDP/rsockets |"
	echo "|---|---|---|---|---|---|"
	for n in 1 8; do
		echo "| sdpperf crr, $n client(s) | ${res[crr,sdp,$n]} | ${res[crr,tcp,$n]} | ${res[crr,rsockets,$n]} | $(ratio "${res[crr,sdp,$n]}" "${res[crr,tcp,$n]}") | $(ratio "${res[crr,sdp,$n]}" "${res[crr,rsockets,$n]}") |"
	done
}
if [ -n "${BENCH_CRR_ONLY:-}" ]; then
	crr_rows
	exit 0
fi
[ -n "${BENCH_LAT_ONLY:-}${BENCH_RST_ONLY:-}" ] && sizes= || sizes="65536 262144 1048576"
for size in $sizes; do
	for m in sdp tcp; do
		res[$m,$size]=$(for i in $(seq $R); do bw $m $size; done | med)
	done
	res[read,$size]=$(for i in $(seq $R); do pt ib_read_bw $size; done | med)
	res[send,$size]=$(for i in $(seq $R); do pt ib_send_bw $size; done | med)
	res[zs,$size]=$(for i in $(seq $R); do zs $size $size; done | med)
	res[zc,$size]=$(for i in $(seq $R); do sc sdp $size $size; done | med)
	res[scb,$size]=$(for i in $(seq $R); do sc sdp $size 0; done | med)
	res[sct,$size]=$(for i in $(seq $R); do sc tcp $size 0; done | med)
done
for m in sdp tcp; do res[$m,lat]=$(for i in $(seq $R); do lat $m; done | med); done
res[nospin,lat]=$(for i in $(seq $R); do SDP_VERBS_SPIN_US=0 lat sdp; done | med)
[ -z "${BENCH_RST_ONLY:-}" ] &&
	res[raw,lat]=$(for i in $(seq $R); do pt ib_send_lat 64; done | med)
# rstream: 32 MiB per bandwidth run (~2 s at 0.15 Gbit/s), 2000 ping-pongs.
# (No "SDP with ZCopy" row: rstream's sockets are non-blocking, and a
# non-blocking send never goes ZCopy: such a row would be a second BCopy
# sample.)
rsm="sdp rs tcp"
[ -n "${BENCH_LAT_ONLY:-}" ] && rsm=
[ -n "${BENCH_RST_ONLY:-}" ] && rsm="sdp rs"
[ -n "${BENCH_RST_ONLY:-}" ] && [ -n "${BENCH_EXP:-}" ] && rsm="sdp sdpx rs"
for m in $rsm; do
	res[rst,$m,64]=$(for i in $(seq $R); do rst $m 64 2000; done | med)
	res[rst,$m,65536]=$(for i in $(seq $R); do rst $m 65536 512; done | med)
	res[rst,$m,1048576]=$(for i in $(seq $R); do rst $m 1048576 32; done | med)
done
if [ -n "${BENCH_LAT_ONLY:-}" ]; then
	echo "| ping-pong 64 B (usec) | SDP | SDP, SDP_VERBS_SPIN_US=0 | kernel TCP | ib_send_lat |"
	echo "|---|---|---|---|---|"
	echo "| sockperf / perftest | ${res[sdp,lat]} | ${res[nospin,lat]} | ${res[tcp,lat]} | ${res[raw,lat]} |"
	exit 0
fi
if [ -n "${BENCH_RST_ONLY:-}" ]; then
	echo "| | SDP | rsockets | SDP vs rsockets (>1: SDP better) |"
	echo "|---|---|---|---|"
	echo "| rstream 64 B ping-pong (usec/xfer) | ${res[rst,sdp,64]} | ${res[rst,rs,64]} | $(ratio "${res[rst,rs,64]}" "${res[rst,sdp,64]}") |"
	[ -n "${BENCH_EXP:-}" ] && echo "| exp | ${res[rst,sdpx,64]} | ${res[rst,sdpx,65536]} | ${res[rst,sdpx,1048576]} |"
	for size in 65536 1048576; do
		echo "| rstream $((size / 1024)) KiB (Gbit/s) | ${res[rst,sdp,$size]} | ${res[rst,rs,$size]} | $(ratio "${res[rst,sdp,$size]}" "${res[rst,rs,$size]}") |"
	done
	echo "| sockperf 64 B ping-pong (usec): SDP, no spin, TCP | ${res[sdp,lat]} | ${res[nospin,lat]} | ${res[tcp,lat]} |"
	exit 0
fi
echo "| message | iperf3 SDP (Gbit/s) | iperf3 kernel TCP | socat SDP BCopy | socat SDP ZCopy | sdpperf SDP ZCopy | socat kernel TCP | ib_send_bw | ib_read_bw | SDP/TCP (iperf3) | ZCopy/RDMA READ (sdpperf) | (socat) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for size in 65536 262144 1048576; do
	echo "| $((size / 1024)) KiB | ${res[sdp,$size]} | ${res[tcp,$size]} | ${res[scb,$size]} | ${res[zc,$size]} | ${res[zs,$size]} | ${res[sct,$size]} | ${res[send,$size]} | ${res[read,$size]} | $(ratio "${res[sdp,$size]}" "${res[tcp,$size]}") | $(ratio "${res[zs,$size]}" "${res[read,$size]}") | $(ratio "${res[zc,$size]}" "${res[read,$size]}") |"
done
echo
echo "ZCopy check (largest zcopy_tx sdpstat saw in each socat run):"
cat $ZLOG 2>/dev/null
echo
echo "| ping-pong 64 B (usec) | SDP | SDP, SDP_VERBS_SPIN_US=0 | kernel TCP | ib_send_lat |"
echo "|---|---|---|---|---|"
echo "| sockperf / perftest | ${res[sdp,lat]} | ${res[nospin,lat]} | ${res[tcp,lat]} | ${res[raw,lat]} |"
echo
echo "| rstream | SDP | rsockets | kernel TCP | SDP vs rsockets (>1: SDP better) |"
echo "|---|---|---|---|---|"
echo "| 64 B ping-pong (usec/xfer) | ${res[rst,sdp,64]} | ${res[rst,rs,64]} | ${res[rst,tcp,64]} | $(ratio "${res[rst,rs,64]}" "${res[rst,sdp,64]}") |"
for size in 65536 1048576; do
	echo "| $((size / 1024)) KiB (Gbit/s) | ${res[rst,sdp,$size]} | ${res[rst,rs,$size]} | ${res[rst,tcp,$size]} | $(ratio "${res[rst,sdp,$size]}" "${res[rst,rs,$size]}") |"
done
echo
crr_rows
