#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/vm/wire_check.sh BUILD — runs INSIDE the VM (scripts/vm-run), from
# suite.sh or alone:
#   scripts/vm-run -t 600 -- bash tests/vm/wire_check.sh build
#
# The wire checked by an independent decoder: capture the RoCE v2 traffic on
# veth-a (dumpcap) while verified streams cross rxe-a -> rxe-b over verbs,
# BCopy (sdp_stream), Read ZCopy (sdp_zcopy --require read) and Write ZCopy
# (sdp_zcopy with Write ZCopy on), each ending in a graceful close; then let Wireshark's own SDP
# dissector decode every SEND ("Decode As" infiniband -> Infiniband SDP in a
# throw-away profile: our CM uses the RDMA_PS_TCP service ID, so its
# heuristic never fires) and check it with tests/vm/wire_check.py: every
# message decodes as SDP, its BSDH length is the length on the wire, the
# MIDs include Data, SrcAvail, RdmaRdCompl, SinkAvail, RdmaWrCompl and
# DisConn, nothing is malformed but the credit-only Data messages; and the
# Hello / HelloAck in the CM REQ / REP private data (tshark's CM fields) are
# what the engine sends.
#
# WIRE_CHECK_KEEP=DIR keeps the capture (DIR/wire.pcapng) for a look on the
# host; WIRE_CHECK_PCAP=FILE skips the capture and only checks FILE.
set -u
B=${1:-build}
A=10.99.0.1 S=10.99.0.2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
case $B in /*) BD=$B ;; *) BD=$ROOT/$B ;; esac # BUILD: under the tree, or absolute
T=$BD/tests
RUN=$ROOT/tools/sdp_run
export SDP_TRANSPORT=verbs SDP_RUN_LIBRARY=$BD/lib/libsdp.so
export SDP_TEST_TRANSPORT=verbs SDP_TEST_TIMEOUT_MULT=3
export SDP_TEST_SERVER_ADDR=$S SDP_TEST_CONNECT_ADDR=$S SDP_TEST_CLIENT_ADDR=$A

command -v tshark >/dev/null && command -v dumpcap >/dev/null ||
	{ echo "wire_check: no tshark/dumpcap (apt-get install tshark)"; exit 1; }
tmp=$(mktemp -d /tmp/wire_check.XXXXXX)
pcap=${WIRE_CHECK_PCAP:-}

if [ -z "$pcap" ]; then
	pcap=$tmp/wire.pcapng
	# 64 MiB kernel buffer: no drops while the emulated CPU is busy.
	dumpcap -q -i veth-a -f "udp port 4791" -B 64 -w "$pcap" >"$tmp/dumpcap.log" 2>&1 &
	dp=$!
	# dumpcap starts slowly under emulation: traffic only once the file
	# holds its section and interface headers (> 100 bytes).
	for _ in $(seq 1 600); do
		[ "$(stat -c %s "$pcap" 2>/dev/null || echo 0)" -gt 100 ] && break
		kill -0 $dp 2>/dev/null || break
		sleep 0.1
	done
	[ "$(stat -c %s "$pcap" 2>/dev/null || echo 0)" -gt 100 ] ||
		{ echo "wire_check: dumpcap did not start"; cat "$tmp/dumpcap.log"; exit 1; }
	sleep 0.5
	rc=0
	run() { echo "+ $*"; "$@" || { echo "wire_check: traffic failed: $*"; rc=1; }; }
	# BCopy both ways (random piece sizes), shutdown(SHUT_WR) -> DisConn.
	run env SDP_LOG=2 "$RUN" "$T/sdp_stream" --family sdp --mode blocking --bytes 1M --max-piece 65536
	# Read ZCopy: SrcAvail + RDMA READ + RdmaRdCompl (Write ZCopy off).
	run env SDP_LOG=2 "$RUN" "$T/sdp_zcopy" --family sdp --bytes 2M --thresh 4096 --require read
	# Write ZCopy: REQ_PIPE, ModeChange, SinkAvail + RDMA WRITE + RdmaWrCompl.
	# --require any: at 4M Write ZCopy does not always happen in both
	# directions (itest-zcopy-write-32M asks for that); the MIDs on the wire
	# (SinkAvail, RdmaWrCompl) are checked below.
	run env SDP_LOG=2 "$RUN" "$T/sdp_zcopy" --family sdp --bytes 4M --thresh 4096 --require any
	sleep 1 # the last DisConn / DREQ into the capture
	kill -INT $dp
	wait $dp
	grep -v '^$' "$tmp/dumpcap.log"
	if [ -n "${WIRE_CHECK_KEEP:-}" ]; then
		mkdir -p "$WIRE_CHECK_KEEP" && cp "$pcap" "$WIRE_CHECK_KEEP/wire.pcapng"
	fi
fi

# A throw-away Wireshark configuration: profile "sdp" decodes every IB
# payload as SDP.
export XDG_CONFIG_HOME=$tmp/cfg
mkdir -p "$XDG_CONFIG_HOME/wireshark/profiles/sdp"
echo 'decode_as_entry: infiniband,0,(none),Infiniband SDP' \
	>"$XDG_CONFIG_HOME/wireshark/profiles/sdp/decode_as_entries"
# Heuristic IB sub-dissectors (RPC-over-RDMA first of all) would otherwise
# claim some SEND payloads before Decode As is tried.
echo 'infiniband.try_heuristic_first: FALSE' \
	>"$XDG_CONFIG_HOME/wireshark/profiles/sdp/preferences"
python3 "$HERE/wire_check.py" --pcap "$pcap" --profile sdp \
	--hello-src $A --hello-dst $S || rc=1
[ "${rc:-0}" = 0 ] || { echo "wire_check: FAIL"; exit 1; }
