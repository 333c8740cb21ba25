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
