#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/tools/env-errors.sh BUILD — a malformed or out-of-range setting in
# the environment is reported on stderr, naming the variable and what it
# takes, and the program runs on with the default: an engine setting
# (SDP_ZCOPY_THRESH) and, in a build with the verbs transport, the verbs
# ones, which are read when that transport starts (here at a connect that
# SDP_TRANSPORT=verbs forces onto it; this host has no RDMA device, so the
# connect itself fails, which is not what is tested).
set -u
B=${1:-build}
RUN="$B/bin/sdp_run"
fail() { echo "not ok - $*"; exit 1; }
msg=$(SDP_ZCOPY_THRESH=xyz timeout 30 "$RUN" true 2>&1) || fail "sdp_run true failed: $msg"
echo "$msg" | grep -qF 'ignoring SDP_ZCOPY_THRESH="xyz": expected an integer in [0, 2147483647]' ||
	fail "SDP_ZCOPY_THRESH=xyz: no message naming it: $msg"
echo "ok - SDP_ZCOPY_THRESH=xyz is reported and the program runs: $msg"

# A value that is not text is quoted escaped: the message stays one line and
# cannot drive the terminal.
msg=$(SDP_ZCOPY_THRESH=$'\e[2J\x01' timeout 30 "$RUN" true 2>&1) || fail "sdp_run true failed: $msg"
echo "$msg" | grep -qF 'ignoring SDP_ZCOPY_THRESH="\x1b[2J\x01"' ||
	fail "an escape sequence in SDP_ZCOPY_THRESH is not quoted escaped: $(echo "$msg" | od -c | head -5)"
[[ $msg != *$'\e'* ]] || fail "an ESC byte reached stderr"
echo "ok - a non-text value is quoted escaped"

# Two settings legal alone whose product is too large: named together, and
# the defaults keep connections working (a connection over SDP inside one
# process, its bytes checked).
msg=$(SDP_RECV_BUFS=1024 SDP_RECV_BUF_SIZE=16777216 timeout 60 "$RUN" python3 -c '
import socket, os
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.create_connection(l.getsockname()); s, _ = l.accept()
data = os.urandom(100000); c.sendall(data)
got = b""
while len(got) < len(data): got += s.recv(65536)
print("echo", "same" if got == data else "DIFFERENT")
print("transport", c.getsockopt(socket.IPPROTO_TCP, 90))  # SDP_CONN_TRANSPORT: 1 shm
' 2>&1) || fail "a connection with SDP_RECV_BUFS=1024 SDP_RECV_BUF_SIZE=16777216 failed: $msg"
echo "$msg" | grep -qF 'ignoring SDP_RECV_BUFS=1024 and SDP_RECV_BUF_SIZE=16777216: together they ask for 16384 MiB' ||
	fail "the too-large product is not reported naming both: $msg"
echo "$msg" | grep -qx 'echo same' || fail "the bytes did not arrive intact: $msg"
echo "$msg" | grep -qx 'transport 1' || fail "the connection is not over shm: $msg"
echo "ok - SDP_RECV_BUFS x SDP_RECV_BUF_SIZE too large: both named, defaults used, bytes intact"

if ! grep -qa SDP_VERBS_RDMA_SPIN_US "$B/lib/libsdp.so"; then
	echo "SKIP: built without the verbs transport"
	exit 77
fi
# The connect comes from bash's /dev/tcp (a bash built without it would
# connect nowhere and prove nothing).
if bash -c 'exec 3<>/dev/tcp/127.0.0.1/9' 2>&1 | grep -q 'No such file'; then
	echo "SKIP: this bash has no /dev/tcp"
	exit 77
fi
for kv in SDP_VERBS_RDMA_SPIN_US=-5 SDP_VERBS_SPIN_US=2000000 SDP_VERBS_ACK_TIMEOUT=40 SDP_VERBS_REARM_MS=1e3; do
	msg=$(env SDP_TRANSPORT=verbs "$kv" timeout 30 "$RUN" bash -c 'exec 3<>/dev/tcp/127.0.0.1/9' 2>&1)
	echo "$msg" | grep -qF "ignoring ${kv%%=*}=\"${kv#*=}\": expected an integer in [" ||
		fail "$kv: no message naming it: $msg"
	echo "ok - $kv is reported: $(echo "$msg" | grep -F "${kv%%=*}")"
done
