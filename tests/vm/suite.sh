#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/vm/suite.sh BUILD — runs INSIDE the VM (scripts/vm-run): the verbs
# transport between rxe-a (10.99.0.1) and rxe-b (10.99.0.2).
set -u
B=${1:-build}
A=10.99.0.1 S=10.99.0.2
export SDP_TRANSPORT=verbs SDP_RUN_LIBRARY=$PWD/$B/lib/libsdp.so
RUN="$PWD/tools/sdp_run"
# t NAME TIMEOUT CMD...: one test, with the retry rule of tests/flaky.list.
. "$PWD/tests/vm/lib.sh"
rdma link | grep -q 'rxe-a.*ACTIVE' || { echo "FAIL vm/setup: no active rxe-a"; exit 1; }
t test_verbs 60 "$B/tests/test_verbs"
iperf() {
	"$RUN" iperf3 -s -B $S -1 -p 5201 >/tmp/iperf-s.log 2>&1 & sp=$!
	# The server may not be listening yet (slow emulation): retry refusals.
	local i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		sleep 1
		"$RUN" iperf3 -c $S -B $A -p 5201 -n 64M "$@" >/tmp/iperf-c.log 2>&1; rc=$?
		[ $rc = 0 ] || ! grep -q 'Connection refused' /tmp/iperf-c.log || continue
		break
	done
	cat /tmp/iperf-c.log
	wait $sp || rc=1
	return $rc
}
export -f iperf; export RUN A S
# rxe-a's packet counter COUNTER (sent_pkts unless named).
pkts() { rdma statistic show link rxe-a/1 | tr ' ' '\n' | grep -A1 "^${1:-sent_pkts}" | tail -1; }
# over_rxe BYTES CMD...: CMD, which must move BYTES across rxe-a: its packet
# counters (sent + received) must grow by at least one 4 KiB-MTU packet per
# 4 KiB.  Neither shm nor kernel TCP moves them, so each run proves its own
# traffic went over verbs.
over_rxe() {
	local want=$(($1 / 4096)) p0 p1 rc
	shift
	p0=$(($(pkts sent_pkts) + $(pkts rcvd_pkts)))
	"$@"
	rc=$?
	p1=$(($(pkts sent_pkts) + $(pkts rcvd_pkts)))
	echo "over_rxe: rxe-a sent and received $((p1 - p0)) packets (need >= $want)"
	[ $rc = 0 ] || return $rc
	[ $((p1 - p0)) -ge "$want" ] || { echo "over_rxe: not over verbs"; return 1; }
}
export -f pkts over_rxe
# Every connection of the integration programs must be SDP over verbs.
export SDP_TEST_TRANSPORT=verbs
t iperf3-a2b 120 over_rxe 67108864 iperf
t iperf3-b2a 120 over_rxe 67108864 iperf -R
t iperf3-P4 120 over_rxe 67108864 iperf -P 4
# The engine's integration programs (tests/integration) across rxe-a -> rxe-b:
# listener on $S, clients bound to $A (tests/integration/itest_common.h).
export SDP_TEST_SERVER_ADDR=$S SDP_TEST_CONNECT_ADDR=$S SDP_TEST_CLIENT_ADDR=$A
export SDP_TEST_TIMEOUT_MULT=3 # the VM is emulated; hang guards only
T="$PWD/$B/tests"
# SDP_LOG=2: a failure's tail says why a connection ended (a completion
# error's status, a reset's reason).  Both directions at once: BYTES each
# way, so rxe-a carries twice that.
t itest-stream-blocking-64M 120 over_rxe $((2 * 67108864)) env SDP_LOG=2 "$RUN" "$T/sdp_stream" --family sdp --mode blocking --bytes 64M
t itest-stream-epoll-32M 120 over_rxe $((2 * 33554432)) env SDP_LOG=2 "$RUN" "$T/sdp_stream" --family sdp --mode epoll --bytes 32M --seed 2
t itest-halfclose 90 "$RUN" "$T/sdp_halfclose" --family sdp
# A signal handled while recv/epoll_wait spin before sleeping: EINTR, or a
# restart under SA_RESTART, as the kernel's own calls (base/sigseen.h).
t itest-sigwait 60 "$RUN" "$T/sdp_sigwait" --family sdp
# pthread_cancel of threads blocked in recv, send and accept over verbs,
# where they sleep on a futex glibc cannot interrupt (base/cancel.h); and
# shutdown() of a listener waking the thread blocked in accept().
t itest-cancel 90 "$RUN" "$T/sdp_semantics" --family sdp --only "cancel_blocked|listener_shutdown"
# fork() after the parent used verbs: the children open their own connections
# (the transport re-opens in a child), inherited ones fail cleanly.
t itest-abort 90 "$RUN" "$T/sdp_abort" --family sdp
t itest-kill 90 "$RUN" "$T/sdp_kill" --family sdp
# First contact: connect() right after the neighbour table was flushed, over
# SDP, in well under the 2 s rdma_cm once waited there (first_contact.py).
t connect-first-contact 60 "$RUN" python3 tests/vm/first_contact.py $A $S
# The same with every packet from veth-b (the ARP answer too) delayed
# 100 ms: the first 25 ms resolution times out, the retries must still end
# over SDP, not in a TCP fallback.
slow_arp() {
	modprobe sch_netem 2>/dev/null
	tc qdisc add dev veth-b root netem delay 100ms || return 1
	"$RUN" python3 tests/vm/first_contact.py $A $S; local rc=$?
	tc qdisc del dev veth-b root
	return $rc
}
export -f slow_arp
t connect-first-contact-slow-arp 60 slow_arp
# exec() over verbs: an inetd-style child execs itself with the connection
# on stdin/stdout, and the listener that accepted it relays it (a verbs QP
# cannot move); one connection (a "both" listener is TCP after a fork).
t itest-forkserver-exec 90 "$RUN" "$T/sdp_forkserver" --family sdp --accept block \
	--parent-close now --conns 1 --clients 1 --exec --max-req 1M
# The wire checked by an independent decoder: Wireshark's SDP dissector on
# a capture of BCopy, Read ZCopy, Write ZCopy and the Hello/HelloAck.
t wire-check 300 bash tests/vm/wire_check.sh "$B"
# A child that enters a seccomp sandbox: the server that drives the verbs
# connection relays it in place, into the descriptor's own pair.
t itest-sandbox 90 "$RUN" "$T/sdp_sandbox" --family sdp
# sshd at default settings (it re-execs itself per connection) under
# sdp_run on rxe-b, scp of 64 MB from rxe-a: the bytes must cross rxe-a,
# arrive whole, and sshd must see the client's address (AllowUsers).
sshd_scp() {
	local d rc sp
	d=$(mktemp -d /tmp/sshd.XXXXXX)
	mkdir -p /run/sshd
	ssh-keygen -q -t ed25519 -N '' -f "$d/hostkey" && ssh-keygen -q -t ed25519 -N '' -f "$d/userkey" || return 1
	cp "$d/userkey.pub" "$d/ak"
	printf '%s\n' "Port 2222" "ListenAddress $S" "HostKey $d/hostkey" \
		"AuthorizedKeysFile $d/ak" "StrictModes no" "PidFile $d/pid" \
		"AllowUsers root@$A" >"$d/cfg"
	head -c 64M /dev/urandom >"$d/f"
	"$RUN" /usr/sbin/sshd -D -e -f "$d/cfg" >"$d/sshd.log" 2>&1 & sp=$!
	local i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		sleep 1
		"$RUN" scp -O -q -i "$d/userkey" -o StrictHostKeyChecking=no \
			-o UserKnownHostsFile=/dev/null -o BatchMode=yes \
			-o BindAddress=$A -P 2222 "$d/f" "root@$S:$d/g"; rc=$?
		[ $rc = 0 ] || ! grep -q "Server listening" "$d/sshd.log" || break
		[ $rc = 0 ] && break
	done
	kill $sp; wait $sp 2>/dev/null
	cat "$d/sshd.log"
	[ $rc = 0 ] && cmp "$d/f" "$d/g" && grep -q "Accepted publickey for root from $A" "$d/sshd.log"
}
export -f sshd_scp
t sshd-scp-64M 180 over_rxe 67108864 sshd_scp
# Case 6: a pre-forking server on a "both" listener (fork() once deadlocked).
t itest-fork-verbs 90 "$RUN" "$T/sdp_fork_verbs" --family sdp
# ZCopy over verbs, both directions at once on one connection, every byte
# checked: Read ZCopy (SrcAvail + RDMA READ by the sink; --require read
# switches Write ZCopy off) and Write ZCopy (SinkAvail + RDMA WRITE by the
# source); each side's counters must show RDMA really moved data.  ~1.5 s
# each here.  Then the same with SIGUSR1 cancelling blocked sends.
t itest-zcopy-read-32M 90 "$RUN" "$T/sdp_zcopy" --family sdp --bytes 32M --thresh 4096 --require read
t itest-zcopy-write-32M 90 "$RUN" "$T/sdp_zcopy" --family sdp --bytes 32M --thresh 4096 --require write
t itest-zcopy-signals-16M 90 "$RUN" "$T/sdp_zcopy" --family sdp --bytes 16M --thresh 4096 --signals
# The benchmark's ZCopy measurement (sdpperf with --server-ip/--client-ip,
# bench-vm-lib.sh's zs()) must cross the veth: a second of 256 KiB ZCopy
# sends from rxe-b to rxe-a at a nonzero rate, during which rxe-a's
# received-packet counter grows by at least a quarter of what that rate
# means in 1 KiB packets (neither a loopback nor kernel TCP moves it).
sdpperf_across() {
	local r0 r1 out rate
	r0=$(pkts rcvd_pkts)
	out=$("$PWD/$B/bin/sdpperf" --workload stream --transports sdp --size 262144 \
		--env SDP_TRANSPORT=verbs --env SDP_ZCOPY_THRESH=262144 \
		--server-ip $S --client-ip $A --time 1 --warmup 0.5) || { echo "$out"; return 1; }
	echo "$out"
	r1=$(pkts rcvd_pkts)
	rate=$(echo "$out" | awk '$1 == "sdp" {print int($2)}')
	echo "rxe-a received $((r1 - r0)) packets; $rate MB/s"
	[ "${rate:-0}" -gt 0 ] && [ $((r1 - r0)) -gt $((rate * 1000000 / 1024 / 4)) ]
}
export -f sdpperf_across
export B A S
t sdpperf-zcopy-across 60 sdpperf_across
# sockperf (an unmodified program) under sdp_run: ping-pong, rxe-a -> rxe-b.  The server echoes; a run must report real round trips.
sockperf_run() { # pp|tp
	"$RUN" sockperf sr --tcp -i $S -p 11111 >/tmp/sockperf-s.log 2>&1 & sp=$!
	local i rc=1
	for i in 1 2 3 4 5 6 7 8 9 10; do
		sleep 1
		"$RUN" sockperf "$1" --tcp -i $S -p 11111 --client_ip $A -t 2 \
			-m "${2:-64}" >/tmp/sockperf-c.log 2>&1; rc=$?
		# sockperf exits 0 when it cannot connect: a server not yet
		# listening (slow emulation) shows as a refusal; try again.
		[ $rc = 0 ] && ! grep -q 'Connection refused' /tmp/sockperf-c.log && break
	done
	cat /tmp/sockperf-c.log
	kill $sp; wait $sp 2>/dev/null
	# Measured traffic, not just an exit status.
	[ $rc = 0 ] && grep -qE "$3" /tmp/sockperf-c.log
}
export -f sockperf_run
# Its round trips must cross rxe-a: at least 100 packets in 2 s.
t sockperf-pingpong 60 over_rxe 409600 sockperf_run pp 64 'Summary: Latency is [0-9.]+ usec'
# Throughput mode: the client streams without waiting for answers; it must
# finish on its own (the bound is a hang guard only) and its bytes must have
# crossed rxe-a: at least one 4 KiB-MTU packet per 4 KiB the client says it
# sent (small messages are coalesced, so this is a lower bound).
sockperf_tp() { # size
	local p0 p1 n
	p0=$(pkts)
	sockperf_run tp "$1" 'Summary: BandWidth is [0-9.]+ MBps' || return 1
	p1=$(pkts)
	n=$(sed -n 's/.*Total of \([0-9]*\) messages sent.*/\1/p' /tmp/sockperf-c.log)
	echo "messages sent: ${n:-none}, rxe-a packets: $((p1 - p0))"
	[ -n "$n" ] && [ "$n" -gt 0 ] && [ $((p1 - p0)) -ge $((n * $1 / 4096)) ]
}
export -f sockperf_tp
t sockperf-tp-64 60 sockperf_tp 64
t sockperf-tp-1400 60 sockperf_tp 1400
# Connections one after the other, bytes checked on each, and nothing left
# behind (descriptors, mappings, memory): the registered buffers kept
# between connections (verbs_bufs.c) are reused, not leaked.  Each
# connection moves at least one packet across rxe-a.  Late in the suite,
# so that what thousands of connections leave behind in the kernel for a
# while (the CM's time-wait) is not in the way of the checks before it.
t itest-churn-3000 240 over_rxe $((3000 * 4096)) env SDP_LOG=2 "$RUN" "$T/sdp_churn" --family sdp --conns 3000
# Keep this step LAST.  After it, soft-RoCE's CM on rxe-b no longer answers
# new connection requests from rxe-a: a connect() towards 10.99.0.2 gets no
# reply until the CM's REQ retries run out (~100 s, ETIMEDOUT), and perftest's
# rdma_cm (ib_send_lat -R) fails the same way, so it is the emulated device's
# state, not libsdp.  Anything placed after it "hangs" in connect (that was
# the "sockperf tp hangs" report).
# Link down under a streaming connection: both ends get ECONNRESET/ETIMEDOUT
# within the bound, no QP is left.  Measured ~2.7 s: the retry budget (QP ACK
# timeout 268 ms x 7 tries, verbs.h) plus the port-down check (verbs_dev.c);
# the bound of 20 s leaves room for emulation.
t itest-linkdown 90 "$RUN" "$T/sdp_linkdown" --family sdp --bound 20 \
	--down "ip link set veth-b down" --up "ip link set veth-b up" \
	--qps "rdma resource show qp"
echo "vm suite: $fails failed, $flaky flaky (passed on the second run)"
exit $fails
