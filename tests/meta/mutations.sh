#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/meta/mutations.sh BUILD — the suite's own checks, proven by the
# mutations they must catch.  Each case breaks one thing on purpose (the
# transport, the evidence, the runner's inputs) and expects the test that
# guards it to fail, for the stated reason:
#   - a policy that forces TCP: every switch/* integration test fails (the
#     connections must be SDP), and so does a real-program test;
#   - an sdpstat that cannot answer: a program test that relies on it fails;
#   - a unit test binary missing from the build: the runner fails;
#   - a test that skips where tests/skips.list does not allow it: the runner
#     fails;
#   - a VM test that passes only on its second run, not listed in
#     tests/flaky.list: the VM suite counts it as a failure.
# Output is TAP; exit 1 if any mutation went unnoticed.
set -u
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sdp-mutations.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
N=0 FAILS=0

ok() { N=$((N + 1)); echo "ok $N - $*"; }
notok() { N=$((N + 1)); FAILS=$((FAILS + 1)); echo "not ok $N - $*"; }

# caught NAME WANT LOG CMD...: CMD must fail and its output must contain WANT.
caught() {
	local name=$1 want=$2 log=$3 rc
	shift 3
	timeout -k 5 300 "$@" >"$log" 2>&1 </dev/null
	rc=$?
	if [ "$rc" -ne 0 ] && grep -q -- "$want" "$log"; then
		ok "$name: caught (exit $rc, \"$want\")"
	else
		notok "$name: NOT caught (exit $rc; \"$want\" $(grep -q -- "$want" "$log" && echo found || echo absent))"
		tail -n 15 "$log" | sed 's/^/#   /'
	fi
}

printf 'use tcp server * *:*\nuse tcp client * *:*\n' >"$TMP/tcp.conf"
T=$BUILD/tests
PRE=(env LD_PRELOAD="$BUILD/lib/libsdp.so" LIBSDP_CONFIG_FILE="$TMP/tcp.conf" SDP_TEST_TRANSPORT=sdp)

# ---- the switch tests, with every connection forced to TCP ----------------
caught "switch/stream-blocking over TCP" "expected SDP" "$TMP/s1.log" \
	"${PRE[@]}" "$T/sdp_stream" --family tcp --mode blocking --bytes 4M
caught "switch/stream-epoll-conns8 over TCP" "expected SDP" "$TMP/s2.log" \
	"${PRE[@]}" "$T/sdp_stream" --family tcp --mode epoll --conns 8 --bytes 1M
caught "switch/semantics over TCP" "pair over the wrong transport" "$TMP/s3.log" \
	"${PRE[@]}" "$T/sdp_semantics" --family tcp --only 'shutdown|msg_peek'
caught "switch/fork over TCP" "expected SDP" "$TMP/s4.log" "${PRE[@]}" "$T/sdp_fork" --family tcp
caught "switch/exec over TCP" "expected SDP" "$TMP/s5.log" "${PRE[@]}" "$T/sdp_exec" --family tcp
caught "switch/kill over TCP" "expected SDP" "$TMP/s6.log" "${PRE[@]}" "$T/sdp_kill" --family tcp

# ---- real programs: TCP by policy, then an sdpstat that cannot answer -------
caught "programs/netcat over TCP" "not ok .* nc-sdp-sdp" "$TMP/p1.log" \
	env SDP_TEST_POLICY="$TMP/tcp.conf" bash "$SRC/tests/programs/netcat.sh" "$BUILD"
caught "programs/redis without sdpstat" "not ok .*sdpstat-failed" "$TMP/p2.log" \
	env SDP_TEST_SDPSTAT=/bin/false bash "$SRC/tests/programs/redis.sh" "$BUILD"

# ---- the runner's inputs: a shadow build tree ------------------------------
shadow() { # DIR: BUILD's tree, every file a symlink, tests/ a real directory
	mkdir -p "$1/tests"
	local f
	for f in "$BUILD"/*; do [ "$(basename "$f")" = tests ] || ln -s "$f" "$1/"; done
	for f in "$BUILD"/tests/*; do ln -s "$f" "$1/tests/"; done
}
shadow "$TMP/nounit"
rm "$TMP/nounit/tests/test_wire"
caught "a unit test that was not built" "FAIL unit/test_wire (binary" "$TMP/r1.log" \
	env SDP_TEST_FILTER='^unit/test_wire$' "$SRC/tests/run.sh" "$TMP/nounit"
shadow "$TMP/skipper"
rm "$TMP/skipper/tests/test_wire"
printf '#!/bin/sh\necho "mutation: this test skips"\nexit 77\n' >"$TMP/skipper/tests/test_wire"
chmod +x "$TMP/skipper/tests/test_wire"
caught "a skip tests/skips.list does not allow" "does not allow that in the plain pass" "$TMP/r2.log" \
	env SDP_TEST_FILTER='^unit/test_wire$' "$SRC/tests/run.sh" "$TMP/skipper"

# ---- the VM suite's retry rule, outside the VM ------------------------------
# A step that fails once, then passes.
cat >"$TMP/flaky-step" <<'EOS'
#!/bin/sh
[ -e "$1" ] && exit 0
: >"$1"
exit 1
EOS
chmod +x "$TMP/flaky-step"
vm_t() { # FLAKY_LIST: run the step under tests/vm/lib.sh's t(), print fails/flaky
	bash -c '. "$1/tests/vm/lib.sh"; VM_LOGDIR=$2; t mutation-flaky 10 "$2/flaky-step" "$2/state"; echo "fails=$fails flaky=$flaky"' \
		_ "$SRC" "$TMP" 2>&1
	rm -f "$TMP/state"
}
out=$(SDP_TEST_FLAKY=/dev/null vm_t)
if grep -q 'fails=1 flaky=0' <<<"$out"; then
	ok "a VM test that passed on its second run, unlisted: a failure"
else
	notok "a VM test that passed on its second run, unlisted, was not a failure"
	sed 's/^/#   /' <<<"$out"
fi
printf 'mutation-flaky  the mutation test itself\n' >"$TMP/flaky.list"
out=$(SDP_TEST_FLAKY="$TMP/flaky.list" vm_t)
if grep -q 'fails=0 flaky=1' <<<"$out"; then
	ok "the same test listed in the flaky list: FLAKY, not a failure"
else
	notok "a listed flaky VM test was not counted as FLAKY"
	sed 's/^/#   /' <<<"$out"
fi

echo "1..$N"
echo "# mutations: $N cases, $FAILS not caught"
[ "$FAILS" -eq 0 ]
