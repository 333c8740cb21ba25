#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/run.sh BUILD_DIR — run the libsdp test suite:
#   1. unit tests        BUILD/tests/test_*
#   2. fuzz corpora      BUILD/fuzz/fuzz_X tests/fuzz/corpus/fuzz_X/
#   3. integration       BUILD/tests/sdp_* under LD_PRELOAD=BUILD/lib/libsdp.so
#                        with --family sdp (some sdp6)
#
# Environment:
#   SDP_TEST_FILTER=REGEX        run only tests whose name matches (grep -E)
#   SDP_TEST_FAMILY=sdp|tcp      tcp: run the integration programs over kernel
#                                TCP without the preload (self-check); default sdp
#   SDP_TEST_SANITIZER=asan|tsan the build is sanitized: longer timeouts, ASan
#                                runtime preloaded, 1 GiB transfers cut to 256 MiB
#   SDP_TEST_TIMEOUT_MULT=N      timeout multiplier (default 1; 3 with a sanitizer)
#   SDP_TEST_KEEP_LOGS=1         keep the per-test logs directory
#   SDP_TEST_SKIPS=FILE          the allowed skips (default tests/skips.list)
#
# Each test runs in its own process group under a timeout.  A test exiting
# 77 is a SKIP, and so is each "ok ... # SKIP reason" line of a passing
# test's output (TAP).  Every skip is printed with its reason; one that
# tests/skips.list does not allow in this pass fails the run.  Exit status
# is nonzero if anything failed.
#
# Every integration program is told the transport its connections must use
# (SDP_TEST_TRANSPORT: shm, or tcp for the self-check) and checks it on each
# connection it makes, and none reads a host-wide /etc/libsdp.conf.
set -u

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
FILTER=${SDP_TEST_FILTER:-}
FAMILY=${SDP_TEST_FAMILY:-sdp}
SAN=${SDP_TEST_SANITIZER:-}
if [ -n "$SAN" ]; then
	MULT=${SDP_TEST_TIMEOUT_MULT:-3}
else
	MULT=${SDP_TEST_TIMEOUT_MULT:-1}
fi
export SDP_TEST_TIMEOUT_MULT=$MULT

case "$FAMILY" in
sdp) FAM4=sdp FAM6=sdp6 ;;
tcp) FAM4=tcp FAM6=tcp6 ;;
*)
	echo "run.sh: SDP_TEST_FAMILY must be sdp or tcp" >&2
	exit 2
	;;
esac

# Transfer sizes (bytes per direction per connection).
if [ "$SAN" = asan ] || [ "$SAN" = tsan ]; then
	export SDP_TEST_STREAM_BYTES=256M
	MED=64M SMALL=16M CHURN=20000
else
	export SDP_TEST_STREAM_BYTES=${SDP_TEST_STREAM_BYTES:-1G}
	MED=256M SMALL=64M CHURN=100000
fi

# Sanitizer runtime options.
UNIT_ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:print_summary=1"
ITEST_ASAN_OPTIONS="halt_on_error=1:detect_leaks=0:verify_asan_link_order=0:print_summary=1"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:print_summary=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# What the integration programs are preloaded with.
LIBSDP="$BUILD/lib/libsdp.so"
PRELOAD=""
if [ "$FAMILY" = sdp ]; then
	PRELOAD="$LIBSDP"
	if [ "$SAN" = asan ]; then
		ASAN_RT=$(gcc -print-file-name=libasan.so 2>/dev/null || true)
		[ -n "$ASAN_RT" ] && [ -e "$ASAN_RT" ] && PRELOAD="$ASAN_RT $LIBSDP"
	fi
	# TSan: libsdp alone, which pulls its runtime in as a dependency.
	# With the runtime preloaded first, its interceptors (epoll_wait,
	# recv, ...) sit above ours and call them as "the real libc": the
	# locks taken inside our versions are then invisible to it, and it
	# reported races between accesses made under one connection lock.
fi

LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/sdp-tests.XXXXXX")
trap '[ -n "${SDP_TEST_KEEP_LOGS:-}" ] || rm -rf "$LOGDIR"' EXIT

# The connections of every integration program must be SDP (or, in the
# self-check, kernel TCP): itest_common.h checks each one.  The policy is
# the built-in default, whatever /etc/libsdp.conf says.
if [ "$FAMILY" = sdp ]; then export SDP_TEST_TRANSPORT=shm; else export SDP_TEST_TRANSPORT=tcp; fi
printf 'use both server * *:*\nuse both client * *:*\n' >"$LOGDIR/default.conf"
export LIBSDP_CONFIG_FILE="$LOGDIR/default.conf"
unset SDP_LOG SDP_SWITCH SDP_TRANSPORT SIMPLE_LIBSDP ALWAYS_USE_SDP SDP_STAT \
	SDP_SHORT_CONN SDP_SHORT_CONN_MS SDP_REFUSED_HOLD_MS SDP_ZCOPY_THRESH SDP_ZCOPY_WRITE

# The pass this run is, for tests/skips.list.
if [ "$FAMILY" = tcp ]; then PASS=tcp; else PASS=${SAN:-plain}; fi
SKIPS_FILE=${SDP_TEST_SKIPS:-$SRC/tests/skips.list}
if [ ! -r "$SKIPS_FILE" ]; then
	echo "run.sh: cannot read the allowed-skips file $SKIPS_FILE" >&2
	exit 2
fi

NPASS=0 NFAIL=0 NSKIP=0
FAILED=""
SKIPPED=() # "name|reason|listed or NOT LISTED"
SKIPFAIL=0
T_START=$(date +%s)

# skip_allowed NAME: is NAME's skip listed for this pass in $SKIPS_FILE?
# Lines are "PASSES TEST-GLOB REASON"; PASSES is a comma list or '*'.
skip_allowed() {
	local passes glob reason
	while read -r passes glob reason; do
		case "$passes" in '' | '#'*) continue ;; esac
		case ",$passes," in *",$PASS,"* | *',*,'*) ;; *) continue ;; esac
		# shellcheck disable=SC2053 # the glob is a pattern
		[[ $1 == $glob ]] && return 0
	done <"$SKIPS_FILE"
	return 1
}

# record_skip NAME REASON: print it; an unlisted skip fails the run.
record_skip() {
	local name=$1 reason=$2
	if skip_allowed "$name"; then
		echo "SKIP $name: $reason"
		SKIPPED+=("$name|$reason|listed")
		# A whole test, or one check (TEST:CHECK) of a test that passed.
		case "$name" in *:*) ;; *) NSKIP=$((NSKIP + 1)) ;; esac
	else
		echo "FAIL $name: skipped ($reason), and tests/skips.list does not allow that in the $PASS pass"
		SKIPPED+=("$name|$reason|NOT LISTED")
		case "$name" in *:*) ;; *) NFAIL=$((NFAIL + 1)) ;; esac
		FAILED="$FAILED $name(skip)"
		SKIPFAIL=1
	fi
}

# TAP skips inside a passing test's log: "ok N - CHECK # SKIP REASON".
record_tap_skips() { # NAME LOG
	local line check reason
	while IFS= read -r line; do
		check=${line#ok * - }
		reason=${check#* # SKIP}
		check=${check%% # SKIP*}
		record_skip "$1:$check" "${reason# }"
	done < <(grep -E '^ok [0-9]+ - .* # SKIP' "$2")
}

selected() {
	[ -z "$FILTER" ] && return 0
	printf '%s\n' "$1" | grep -Eq -- "$FILTER"
}

# run_test NAME TIMEOUT_S KIND CMD...    KIND = unit | itest
run_test() {
	local name=$1 tmo=$2 kind=$3
	shift 3
	selected "$name" || return 0
	local log="$LOGDIR/$(printf '%s' "$name" | tr '/ ' '__').log"
	local limit=$((tmo * MULT))
	local t0 t1 rc pid
	t0=$(date +%s.%N)
	local -a envs=()
	if [ "$kind" = itest ]; then
		envs+=("ASAN_OPTIONS=${ASAN_OPTIONS_ITEST:-$ITEST_ASAN_OPTIONS}")
		# Every connection must be SDP: no short-lived-connection
		# fallback (sdp_shortlived sets its own).
		envs+=("SDP_SHORT_CONN=0")
		[ -n "$PRELOAD" ] && envs+=("LD_PRELOAD=$PRELOAD")
	else
		envs+=("ASAN_OPTIONS=${ASAN_OPTIONS:-$UNIT_ASAN_OPTIONS}")
	fi
	# GNU timeout puts itself and the test in a new process group and, on
	# expiry, signals the whole group (TERM, then KILL 5 s later).
	timeout -k 5 "$limit" env "${envs[@]}" "$@" >"$log" 2>&1 </dev/null &
	pid=$!
	wait "$pid"
	rc=$?
	kill -KILL -- "-$pid" 2>/dev/null # stragglers left in the group
	t1=$(date +%s.%N)
	local dt
	dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	if [ "$rc" -eq 0 ]; then
		echo "PASS $name (${dt}s)"
		NPASS=$((NPASS + 1))
		record_tap_skips "$name" "$log"
	elif [ "$rc" -eq 77 ]; then
		record_skip "$name" "$(tail -n 1 "$log")"
	else
		local why="exit status $rc"
		[ "$rc" -eq 124 ] && why="TIMEOUT after ${limit}s"
		[ "$rc" -eq 137 ] && why="killed (SIGKILL) after the timeout of ${limit}s"
		[ "$rc" -gt 128 ] && [ "$rc" -ne 137 ] && why="exit status $rc (signal $((rc - 128)))"
		echo "FAIL $name (${dt}s, $why)"
		echo "  command: $*"
		if grep -q '^not ok' "$log"; then
			echo "  ---- failed checks ----"
			grep '^not ok' "$log" | head -n 50 | sed 's/^/  | /'
		fi
		echo "  ---- last 30 lines of output ----"
		tail -n 30 "$log" | sed 's/^/  | /'
		echo "  ---------------------------------"
		NFAIL=$((NFAIL + 1))
		FAILED="$FAILED $name"
	fi
}

# A test whose binary is missing is a failure, not a silent pass.
need_bin() {
	local name=$1 bin=$2
	if [ ! -x "$bin" ]; then
		if selected "$name"; then
			echo "FAIL $name (binary $bin not built)"
			NFAIL=$((NFAIL + 1))
			FAILED="$FAILED $name"
		fi
		return 1
	fi
	return 0
}

echo "== libsdp tests: build $BUILD, family $FAMILY${SAN:+, sanitizer $SAN}, timeout x$MULT${FILTER:+, filter '$FILTER'}"

# ---- 1. unit tests ------------------------------------------------------------
# One per tests/unit/test_*.c: the source tree says what must have been
# built, so a test that failed to build is a failure, not an absence.
for src in "$SRC"/tests/unit/test_*.c; do
	n=$(basename "$src" .c)
	need_bin "unit/$n" "$BUILD/tests/$n" || continue
	run_test "unit/$n" 120 unit "$BUILD/tests/$n"
done

# ---- 2. fuzz corpus replay -------------------------------------------------------
for src in "$SRC"/tests/fuzz/fuzz_*.c; do
	n=$(basename "$src" .c)
	need_bin "fuzz/$n" "$BUILD/fuzz/$n" || continue
	corpus="$SRC/tests/fuzz/corpus/$n"
	if ! ls "$corpus"/* >/dev/null 2>&1; then
		if selected "fuzz/$n"; then
			echo "FAIL fuzz/$n (no seed corpus in $corpus: tests/fuzz/make_seeds.py writes it)"
			NFAIL=$((NFAIL + 1))
			FAILED="$FAILED fuzz/$n"
		fi
		continue
	fi
	run_test "fuzz/$n" 300 unit "$BUILD/fuzz/$n" "$corpus/"
done

# ---- 3. integration scenarios ----------------------------------------------------
if [ "$FAMILY" = sdp ] && [ ! -e "$LIBSDP" ]; then
	echo "note: $LIBSDP does not exist: the SDP integration tests will fail"
fi
T="$BUILD/tests"
itest() { # NAME TIMEOUT PROGRAM ARGS...
	local name=$1 tmo=$2 prog=$3
	shift 3
	need_bin "$name" "$T/$prog" || return 0
	run_test "$name" "$tmo" itest "$T/$prog" "$@"
}

itest "itest/fork" 60 sdp_fork --family "$FAM4"
itest "itest/fork6" 60 sdp_fork --family "$FAM6"
# Fork per connection: the parent closes its copy at once, a few
# connections later, or never; accepting with each kind of wait.
for acc in block select poll epoll; do
	itest "itest/forkserver-$acc-now" 120 sdp_forkserver --family "$FAM4" --accept $acc --parent-close now --conns 600
done
# 10,000 connections from 6 clients: no hang, no lost byte at scale.
itest "itest/forkserver-epoll-now-10k" 300 sdp_forkserver --family "$FAM4" --accept epoll --parent-close now --conns 10000
itest "itest/forkserver-epoll-later" 120 sdp_forkserver --family "$FAM4" --accept epoll --parent-close later --conns 1000
itest "itest/forkserver-select-never" 120 sdp_forkserver --family "$FAM4" --accept select --parent-close never --conns 300
# The same with children that exec themselves on the connection (inetd).
itest "itest/forkserver-exec-block-now" 120 sdp_forkserver --family "$FAM4" --accept block --parent-close now --conns 600 --exec
itest "itest/forkserver-exec-poll-later" 120 sdp_forkserver --family "$FAM4" --accept poll --parent-close later --conns 600 --exec --greeting
itest "itest/forkserver-exec-select-never" 120 sdp_forkserver --family "$FAM4" --accept select --parent-close never --conns 300 --exec --max-req 4M
itest "itest/exec" 60 sdp_exec --family "$FAM4"
# A child that serves an inherited connection from a seccomp sandbox.
itest "itest/sandbox" 60 sdp_sandbox --family "$FAM4"
itest "itest/sandbox6" 60 sdp_sandbox --family "$FAM6" --filter seccomp
itest "itest/sandbox-nofile" 60 sdp_sandbox --family "$FAM4" --filter nofile
itest "itest/exec6" 60 sdp_exec --family "$FAM6"
itest "itest/semantics" 120 sdp_semantics --family "$FAM4"
itest "itest/semantics6" 120 sdp_semantics --family "$FAM6"
itest "itest/stream-blocking-${SDP_TEST_STREAM_BYTES}" 180 sdp_stream --family "$FAM4" --mode blocking
itest "itest/stream-epoll-${SDP_TEST_STREAM_BYTES}" 180 sdp_stream --family "$FAM4" --mode epoll
itest "itest/stream-epoll-edge-$MED" 120 sdp_stream --family "$FAM4" --mode epoll --edge --bytes "$MED" --seed 2
itest "itest/stream-epoll-conns8-$SMALL" 180 sdp_stream --family "$FAM4" --mode epoll --conns 8 --bytes "$SMALL" --seed 3
itest "itest/stream-blocking-conns8-$SMALL" 180 sdp_stream --family "$FAM4" --mode blocking --conns 8 --bytes "$SMALL" --seed 4
itest "itest/stream6-blocking-$MED" 120 sdp_stream --family "$FAM6" --mode blocking --bytes "$MED" --seed 5
itest "itest/stream-small-pieces" 120 sdp_stream --family "$FAM4" --mode epoll --edge --conns 2 --bytes 4M --max-piece 700 --seed 6
itest "itest/sigwait" 60 sdp_sigwait --family "$FAM4"
itest "itest/halfclose" 60 sdp_halfclose --family "$FAM4"
itest "itest/halfclose6" 60 sdp_halfclose --family "$FAM6"
itest "itest/abort" 60 sdp_abort --family "$FAM4"
itest "itest/kill" 60 sdp_kill --family "$FAM4"
itest "itest/kill6" 60 sdp_kill --family "$FAM6"
itest "itest/many-1000" 120 sdp_many --family "$FAM4" --conns 1000 --max-fds-per-conn 2
itest "itest/churn" 300 sdp_churn --family "$FAM4" --conns "$CHURN"

# Transparent mode: the same unmodified TCP programs (--family tcp) under the
# preload, where the socket switch carries their sockets over SDP.
if [ "$FAMILY" = sdp ]; then
	itest "switch/stream-blocking" 120 sdp_stream --family tcp --mode blocking --bytes "$MED"
	itest "switch/stream-epoll-conns8" 120 sdp_stream --family tcp --mode epoll --conns 8 --bytes "$SMALL"
	itest "switch/semantics" 120 sdp_semantics --family tcp
	itest "switch/semantics6" 120 sdp_semantics --family tcp6
	itest "switch/fork" 60 sdp_fork --family tcp
	itest "switch/many-1000" 120 sdp_many --family tcp --conns 1000 --max-fds-per-conn 2
	itest "switch/forkserver-poll-later" 120 sdp_forkserver --family tcp --accept poll --parent-close later --conns 600
	itest "switch/forkserver-exec-epoll-now" 120 sdp_forkserver --family tcp --accept epoll --parent-close now --conns 600 --exec
	itest "switch/exec" 60 sdp_exec --family tcp
	itest "switch/sandbox" 60 sdp_sandbox --family tcp
	itest "switch/kill" 60 sdp_kill --family tcp
	itest "switch/churn" 300 sdp_churn --family tcp --conns 20000
fi
itest "itest/sdpstat" 60 sdp_stat --family "$FAM4"
# ZCopy: both directions at once, small threshold; then under a SIGUSR1 storm.
# Read ZCopy alone (SDP_ZCOPY_WRITE=0), Write ZCopy required, both mixed
# under signals (the readers' recv()s are interrupted too).
itest "itest/zcopy-read-$MED" 120 sdp_zcopy --family "$FAM4" --bytes "$MED" --thresh 4096 --require read
itest "itest/zcopy-write-$MED" 120 sdp_zcopy --family "$FAM4" --bytes "$MED" --thresh 4096 --require write
itest "itest/zcopy-signals-$SMALL" 120 sdp_zcopy --family "$FAM4" --bytes "$SMALL" --thresh 4096 --signals
# writev of several large elements: several SrcAvails outstanding at once
# (Read ZCopy only, so the counters show SrcAvails and nothing else).
itest "itest/zcopy-writev-$MED" 120 sdp_zcopy --family "$FAM4" --bytes "$MED" --thresh 4096 --require read --writev
itest "itest/zcopy-writev-signals-$SMALL" 120 sdp_zcopy --family "$FAM4" --bytes "$SMALL" --thresh 4096 --writev --signals
# readv into several large elements: several SinkAvails at once (Write ZCopy).
itest "itest/zcopy-vec-write-$MED" 120 sdp_zcopy --family "$FAM4" --bytes "$MED" --thresh 4096 --writev --readv --require write

# ---- 4. socket switch: fallback and real programs --------------------------------
# sdp_fallback re-executes itself with and without the preload (it skips when
# not preloaded, i.e. with SDP_TEST_FAMILY=tcp).
itest "itest/fallback" 120 sdp_fallback
# Runs of short-lived connections to a listener that takes TCP too go over
# TCP for a while (policy/destmemo.h); to an SDP-only listener, never.  To a
# plain TCP listener, only the first connect asks SDP.
itest "itest/shortlived-both" 60 sdp_shortlived --listen both
itest "itest/shortlived-sdp" 60 sdp_shortlived --listen sdp
itest "itest/refused-remembered" 60 sdp_shortlived --listen tcp
show_known() { # NAME: repeat a test's "# TODO known failure" lines
	local plog="$LOGDIR/$(printf '%s' "$1" | tr '/ ' '__').log"
	if [ -f "$plog" ] && grep -q '# TODO known failure' "$plog"; then
		grep '# TODO known failure' "$plog" | sed 's/^not ok [0-9]* - /  known failure: /' | cut -c1-240
	fi
	return 0
}
selected "itest/fallback" && show_known "itest/fallback"
# tests/programs/NAME.sh BUILD: real Debian programs under build/bin/sdp_run
# (see docs/PROGRAMS.md).  They start their own servers, so they run without
# the preload, against the non-sanitized build only.  A check listed in the
# script's KNOWN_FAILURES prints "not ok ... # TODO known failure" and does
# not fail the test; those lines are shown after its PASS.
SDP_PROGRAMS="iperf3 iperf sockperf redis python socat netcat nginx rsync sshd git-daemon node memcached chain apache vsftpd postgres"
for p in $SDP_PROGRAMS; do
	name="programs/$p"
	selected "$name" || continue
	script="$SRC/tests/programs/$p.sh"
	if [ ! -f "$script" ]; then
		echo "FAIL $name (missing $script)"
		NFAIL=$((NFAIL + 1))
		FAILED="$FAILED $name"
		continue
	fi
	if [ -n "$SAN" ] || [ "$FAMILY" != sdp ]; then
		record_skip "$name" "real programs run with the plain build and family sdp only"
		continue
	fi
	run_test "$name" 300 unit bash "$script" "$BUILD"
	show_known "$name"
done

# plain_scripts DIR TIMEOUT: tests/DIR/NAME.sh BUILD as test DIR/NAME, run
# with the plain build and family sdp only (they start plain-build programs
# themselves).
plain_scripts() {
	local dir=$1 tmo=$2 script name
	for script in "$SRC/tests/$dir"/*.sh; do
		name="$dir/$(basename "$script" .sh)"
		selected "$name" || continue
		if [ -n "$SAN" ] || [ "$FAMILY" != sdp ]; then
			record_skip "$name" "runs in the plain pass"
			continue
		fi
		run_test "$name" "$tmo" unit bash "$script" "$BUILD"
	done
}
# The tools' own options (sdpperf, settings); the attacks of another local
# user (docs/SECURITY.md); then the suite checked against itself (the
# mutations it must catch, docs in step with tests/skips.list).
plain_scripts tools 120
# The install rules and the Debian package: installed on this host with
# apt-get, run, then purged (tests/packaging/install.sh; needs root).
plain_scripts packaging 300
plain_scripts security 300
plain_scripts meta 600

T_END=$(date +%s)
TOTAL=$((NPASS + NFAIL + NSKIP))
echo "== SKIPS in the $PASS pass: ${#SKIPPED[@]}"
for sk in "${SKIPPED[@]}"; do
	IFS='|' read -r sk_name sk_reason sk_listed <<<"$sk"
	echo "   $sk_name ($sk_listed): $sk_reason"
done
echo "== SUMMARY ($BUILD, family $FAMILY${SAN:+, $SAN}): $NPASS passed, $NFAIL failed, $NSKIP skipped of $TOTAL in $((T_END - T_START))s"
if [ "$NFAIL" -gt 0 ] || [ "$SKIPFAIL" -gt 0 ]; then
	echo "== FAILED:$FAILED"
	exit 1
fi
if [ "$TOTAL" -eq 0 ]; then
	echo "== no tests ran (filter '${FILTER}')"
	exit 1
fi
exit 0
