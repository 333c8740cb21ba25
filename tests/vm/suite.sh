#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/vm/suite.sh BUILD — runs INSIDE the VM (scripts/vm-run): the verbs
# transport between rxe-a (10.99.0.1) and rxe-b (10.99.0.2).
set -u
B=${1:-build}
A=10.99.0.1 S=10.99.0.2
export SDP_TRANSPORT=verbs SDP_RUN_LIBRARY=$PWD/$B/lib/libsdp.so
RUN="$PWD/tools/sdp_run"
fails=0
t() { # name timeout cmd...
	local n=$1 to=$2 s e rc; shift 2
	s=$(date +%s%N); timeout -k 5 "$to" bash -c '"$@"' _ "$@" >/tmp/vm-$n.log 2>&1; rc=$?; e=$(date +%s%N)
	if [ $rc = 0 ]; then echo "PASS vm/$n ($(( (e - s) / 1000000 )) ms)"
	else echo "FAIL vm/$n (exit $rc)"; tail -15 /tmp/vm-$n.log | sed 's/^/  | /'; fails=$((fails + 1)); fi
}
rdma link | grep -q 'rxe-a.*ACTIVE' || { echo "FAIL vm/setup: no active rxe-a"; exit 1; }
t test_verbs 60 "$B/tests/test_verbs"
iperf() {
	"$RUN" iperf3 -s -B $S -1 -p 5201 >/tmp/iperf-s.log 2>&1 & sp=$!
	sleep 1
	"$RUN" iperf3 -c $S -B $A -p 5201 -n 64M "$@"; rc=$?
	wait $sp || rc=1
	return $rc
}
export -f iperf; export RUN A S
pkts() { rdma statistic show link rxe-a/1 | tr ' ' '\n' | grep -A1 '^sent_pkts' | tail -1; }
p0=$(pkts)
t iperf3-a2b 120 iperf
t iperf3-b2a 120 iperf -R
t iperf3-P4 120 iperf -P 4
p1=$(pkts)
# 3 x 64 MiB crossed rxe-a: at least 64 MiB / 4 KiB MTU packets.
if [ $((p1 - p0)) -gt 16000 ]; then echo "PASS vm/over-rxe (rxe-a sent $((p1 - p0)) packets)"
else echo "FAIL vm/over-rxe: rxe-a sent only $((p1 - p0)) packets: not over verbs"; fails=$((fails + 1)); fi
exit $fails
