# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# tests/programs/common.sh — sourced by the real-program tests
# (tests/programs/<program>.sh BUILD_DIR).  Each test starts its own servers
# on random high ports in a temporary directory, runs them under sdp_run (or
# not, for the fallback cases), checks the output, and checks that the
# connections really were SDP (sdpstat --json, SDP_LOG=3 state transitions,
# or getsockopt(SDP_CONN_TRANSPORT)) or really TCP.  Output is TAP-like:
#   ok N - ...            a check passed
#   not ok N - ...        a check failed (the test exits 1)
#   not ok N - ... # TODO known failure: WHY
#                         a listed known failure (see KNOWN_FAILURES in the
#                         test script and docs/PROGRAMS.md); does not fail
#                         the test, and tests/run.sh prints it
# Every process started is killed at exit, on failure too.
set -u

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export SDP_RUN="$BUILD/bin/sdp_run"
# SDP_TEST_SDPSTAT and SDP_TEST_POLICY exist for tests/meta/mutations.sh,
# which breaks the evidence on purpose and expects the test to fail.
SDPSTAT=${SDP_TEST_SDPSTAT:-$BUILD/bin/sdpstat}
MULT=${SDP_TEST_TIMEOUT_MULT:-1}
TEST_NAME=$(basename "$0" .sh)
# "check-name|reason" lines: checks expected to fail, by name (see xcheck).
KNOWN_FAILURES=${KNOWN_FAILURES:-}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sdp-prog-$TEST_NAME.XXXXXX")
PIDS=""
NCHECK=0 NFAIL=0 NKNOWN=0

cleanup() {
	local p
	for p in $PIDS; do
		kill -TERM "$p" 2>/dev/null
	done
	sleep 0.2
	for p in $PIDS; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	if [ "$NFAIL" -gt 0 ] || [ -n "${SDP_TEST_KEEP_LOGS:-}" ]; then
		echo "# logs kept in $TMP"
	else
		rm -rf "$TMP"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Plain programs must not inherit a preload or a policy from the runner.
unset LD_PRELOAD LIBSDP_CONFIG_FILE SDP_LOG SDP_SWITCH SIMPLE_LIBSDP ALWAYS_USE_SDP
# ... and not read a host-wide /etc/libsdp.conf: the built-in default.
printf 'use both server * *:*\nuse both client * *:*\n' >"$TMP/default.conf"
export LIBSDP_CONFIG_FILE=${SDP_TEST_POLICY:-$TMP/default.conf}

note() { echo "# $*"; }

# known_reason NAME: the KNOWN_FAILURES reason for check NAME, if listed.
known_reason() {
	local line
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		if [ "${line%%|*}" = "$1" ]; then
			printf '%s' "${line#*|}"
			return 0
		fi
	done <<<"$KNOWN_FAILURES"
	return 1
}

# check NAME DESCRIPTION COMMAND...: one check; NAME is a short id used in
# KNOWN_FAILURES.
check() {
	local name=$1 desc=$2 why
	shift 2
	NCHECK=$((NCHECK + 1))
	if "$@"; then
		if why=$(known_reason "$name"); then
			echo "ok $NCHECK - $name: $desc # known failure passed (fixed?): $why"
		else
			echo "ok $NCHECK - $name: $desc"
		fi
		return 0
	fi
	if why=$(known_reason "$name"); then
		echo "not ok $NCHECK - $name: $desc # TODO known failure: $why"
		NKNOWN=$((NKNOWN + 1))
	else
		echo "not ok $NCHECK - $name: $desc"
		NFAIL=$((NFAIL + 1))
	fi
	return 1
}

finish() {
	echo "# $TEST_NAME: $NCHECK checks, $NFAIL failed, $NKNOWN known failures"
	[ "$NFAIL" -eq 0 ] && [ "$NCHECK" -gt 0 ]
	exit $?
}

# need_cmd PACKAGE COMMAND...: the Debian package must provide the commands
# (make deps / scripts/install-deps.sh installs them); a missing one is a
# failure, not a skip.
need_pkg() {
	local pkg=$1 c missing=""
	shift
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
	done
	[ -z "$missing" ] && return 0
	note "missing:$missing; installing $pkg"
	SDP_EXTRA_PKGS="$pkg" "$SRC/scripts/install-deps.sh" >&2 || true
	for c in "$@"; do
		if ! command -v "$c" >/dev/null 2>&1; then
			echo "not ok - $c not installed (Debian package $pkg; run make deps)"
			NFAIL=$((NFAIL + 1))
			exit 1
		fi
	done
}

[ -x "$SDP_RUN" ] || { echo "not ok - $SDP_RUN not built"; NFAIL=1; exit 1; }
[ -e "$BUILD/lib/libsdp.so" ] || { echo "not ok - $BUILD/lib/libsdp.so not built"; NFAIL=1; exit 1; }

# rand_port: a free TCP port in 20000-60999 (SDP has its own port space; a
# "both" listener takes the same number in both).
rand_port() {
	local p i
	for i in $(seq 1 50); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 41000))
		if ! ss -Htan "( sport = :$p or dport = :$p )" 2>/dev/null | grep -q .; then
			echo "$p"
			return 0
		fi
	done
	echo "$p"
}

# bg NAME CMD...: start CMD in the background, stdout/stderr to
# $TMP/NAME.out/.err; its pid in BG_PID; killed at exit.
bg() {
	local name=$1
	shift
	"$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null &
	BG_PID=$!
	PIDS="$PIDS $BG_PID"
}

# run_limited SECS OUT ERR CMD...: start CMD in the background (its own pid
# in BG_PID: sdp_run exec's, so that is the program itself, for sdpstat),
# killed after SECS; wait for it with `wait $BG_PID`.
run_limited() {
	local secs=$1 out=$2 err=$3 p
	shift 3
	"$@" >"$out" 2>"$err" </dev/null &
	p=$!
	PIDS="$PIDS $p"
	(
		sleep $((secs * MULT))
		kill -KILL "$p" 2>/dev/null && echo "# TIMEOUT: killed $* after $((secs * MULT))s" >>"$err"
	) >/dev/null 2>&1 &
	PIDS="$PIDS $!"
	BG_PID=$p
}

# stop PID: TERM, then KILL after 3 s; waits for it.
stop() {
	local p=$1 i
	kill -TERM "$p" 2>/dev/null
	for i in $(seq 1 30); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	return 0
}

# wait_listen PORT [SECONDS]: until something listens on TCP PORT on
# loopback (a "both" listener's TCP side, or a plain one).
wait_listen() {
	local port=$1 secs=${2:-10} i
	for i in $(seq 1 $((secs * 10 * MULT))); do
		ss -Hltn "( sport = :$port )" 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	note "nothing listens on port $port after ${secs}s"
	return 1
}

# tmo SECONDS CMD...: run with a timeout (scaled by SDP_TEST_TIMEOUT_MULT).
tmo() {
	local s=$1
	shift
	timeout -k 3 $((s * MULT)) "$@"
}

# Evidence of the transport.  Each helper answers a number, or a word
# naming why it cannot answer (sdpstat failed, a log is missing); a word
# fails every numeric check (ge, eq), so "no answer" never passes as "0".

# sdpstat_of PID: sdpstat's records of PID (-a: listeners too), or the
# reason there are none: sdpstat failed, or PID publishes nothing (not
# preloaded, or not yet) -- sdpstat cannot tell that from "no sockets", and
# every process these tests watch has at least a listener, a connection or
# a socket on TCP.
sdpstat_of() {
	local out
	out=$("$SDPSTAT" --json -a -p "$1" 2>&1) && [[ $out == \[* ]] || { echo sdpstat-failed; return 1; }
	grep -q "\"pid\": $1," <<<"$out" || { echo "no-sdpstat-record"; return 1; }
	printf '%s\n' "$out"
}

# sdp_conns PID: number of ESTABLISHED SDP connections of PID that moved
# data.  With SDP_COUNT_IDLE=1, those that show no bytes too (sdpstat's
# counters of a busy-polling process can stay at 0).
sdp_conns() {
	local idle='"tx_bytes": 0, "rx_bytes": 0,' out
	[ "${SDP_COUNT_IDLE:-0}" = 1 ] && idle='^$'
	out=$(sdpstat_of "$1") || { echo "$out"; return 1; }
	printf '%s\n' "$out" | grep '"state": "ESTABLISHED"' | grep -E '"transport": "(shm|verbs)"' |
		grep -vc -- "$idle" || true
}

# children_sdp_peak PID SECONDS: the largest number of SDP connections seen
# at once in PID's children (a server's workers), via sdpstat.
children_sdp_peak() {
	local ppid=$1 secs=$2 most=0 n w i c
	for i in $(seq 1 $((secs * 5))); do
		n=0
		for w in $(pgrep -P "$ppid"); do
			c=$(sdp_conns "$w") || { echo "$c"; return 1; }
			n=$((n + c))
		done
		[ "$n" -gt "$most" ] && most=$n
		sleep 0.2
	done
	echo "$most"
}

# tcp_fallbacks PID: sockets of PID (preloaded) that sdpstat shows on TCP.
tcp_fallbacks() {
	local out
	out=$(sdpstat_of "$1") || { echo "$out"; return 1; }
	printf '%s\n' "$out" | grep -c '"transport": "tcp"' || true
}

# tcp_conns PORT: ESTABLISHED kernel TCP sockets on this host with PORT at
# either end (a loopback connection counts twice).
tcp_conns() {
	local out
	out=$(ss -Htn state established "( sport = :$1 or dport = :$1 )" 2>&1) || { echo ss-failed; return 1; }
	printf '%s\n' "$out" | grep -c . || true
}

# sample_conns PID PORT SECONDS [WHILE]: samples, every 0.2 s while PID
# (or the client WHILE) lives, up to SECONDS, the largest sdp_conns PID (in
# S_SDP), tcp_fallbacks PID (in S_FALLBACK) and tcp_conns PORT (in S_TCP).
# A value no sample could take is the reason instead (the last one seen).
sample_conns() {
	local pid=$1 port=$2 secs=$3 watch=${4:-$1} i n v
	local -A best=([sdp]=-1 [fb]=-1 [tcp]=-1) why=([sdp]=no-sample [fb]=no-sample [tcp]=no-sample)
	for i in $(seq 1 $((secs * 5))); do
		kill -0 "$watch" 2>/dev/null || break
		for v in sdp fb tcp; do
			case $v in
			sdp) n=$(sdp_conns "$pid") ;;
			fb) n=$(tcp_fallbacks "$pid") ;;
			tcp) n=$(tcp_conns "$port") ;;
			esac
			if [[ $n =~ ^[0-9]+$ ]]; then
				[ "$n" -gt "${best[$v]}" ] && best[$v]=$n
			elif kill -0 "$pid" 2>/dev/null; then
				why[$v]=$n
			fi
		done
		sleep 0.2
	done
	S_SDP=${best[sdp]} S_FALLBACK=${best[fb]} S_TCP=${best[tcp]}
	[ "$S_SDP" -ge 0 ] || S_SDP=${why[sdp]}
	[ "$S_FALLBACK" -ge 0 ] || S_FALLBACK=${why[fb]}
	[ "$S_TCP" -ge 0 ] || S_TCP=${why[tcp]}
	return 0
}

# sample_sdp PID SECONDS: S_SDP of sample_conns, printed.
sample_sdp() {
	sample_conns "$1" 0 "$2"
	echo "$S_SDP"
}

# wrk_sdp NAME THREADS CONNS URL: wrk under sdp_run for 3 s, output in
# $TMP/NAME.out; sets REQS (its Requests/sec line) and N (the SDP
# connections sdpstat saw in wrk, sampled for a second mid-run).
wrk_sdp() {
	local name=$1 w
	run_limited 20 "$TMP/$name.out" "$TMP/$name.err" "$SDP_RUN" wrk -t "$2" -c "$3" -d 3s "$4"
	w=$BG_PID
	sleep 1
	N=$(sample_sdp "$w" 1)
	wait "$w"
	REQS=$(grep -o 'Requests/sec: *[0-9.]*' "$TMP/$name.out")
}

# SDP_LOG=3 evidence in a log file: the number of distinct SDP connections
# that were ESTABLISHED ("conn N: CONNECTING -> ESTABLISHED" on the active
# side, "conn N: ESTABLISHED -> ..." on the passive side); TCP fallbacks
# ("over TCP: ...").  A missing log, or one with no libsdp line at all (the
# program was not preloaded, or SDP_LOG was off), answers "no-log".
has_libsdp_log() { grep -q '^libsdp\[' "$1" 2>/dev/null; }
log_sdp_established() {
	has_libsdp_log "$1" || { echo no-log; return 1; }
	grep -E '^libsdp\[[0-9]+\]: conn [0-9]+: .*ESTABLISHED' "$1" |
		sed -E 's/^libsdp\[([0-9]+)\]: conn ([0-9]+):.*/\1.\2/' | sort -u | wc -l
}
log_tcp_fallbacks() {
	has_libsdp_log "$1" || { echo no-log; return 1; }
	grep -c 'over TCP:' "$1" || true
}

ge() { [[ ${1:-} =~ ^[0-9]+$ ]] && [ "$1" -ge "$2" ]; }
eq() { [ "${1:-x}" = "$2" ]; }
file_has() { grep -q -- "$2" "$1"; }
file_lacks() { ! grep -q -- "$2" "$1"; }

show() { # FILE...: print files as comments (diagnostics)
	local f
	for f in "$@"; do
		[ -s "$f" ] || continue
		echo "# ---- $(basename "$f") (last 15 lines)"
		tail -n 15 "$f" | sed 's/^/#   /'
	done
}
