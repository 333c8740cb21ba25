# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# tests/vm/lib.sh — sourced by tests/vm/suite.sh (inside the VM) and by
# tests/meta/mutations.sh (which checks the retry rule below on the host).
#
# t NAME TIMEOUT CMD...: one VM test.  A test that fails is run once more,
# so a failure can be told from a flake in the log.  Either way it fails the
# suite, unless tests/flaky.list (or $SDP_TEST_FLAKY) names it with the bug
# behind it: then a pass on the second run counts as FLAKY, not failed.
fails=0 flaky=0
VM_LOGDIR=${VM_LOGDIR:-/tmp}
FLAKY_LIST=${SDP_TEST_FLAKY:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/tests/flaky.list}

flaky_listed() { # NAME
	[ -r "$FLAKY_LIST" ] || return 1
	grep -v '^[[:space:]]*#' "$FLAKY_LIST" | awk '{ print $1 }' | grep -qxF -- "$1"
}

t() { # name timeout cmd...
	local n=$1 to=$2 s e rc try
	shift 2
	for try in 1 2; do
		s=$(date +%s%N)
		timeout -k 5 "$to" bash -c '"$@"' _ "$@" >"$VM_LOGDIR/vm-$n.log" 2>&1
		rc=$?
		e=$(date +%s%N)
		if [ $rc = 0 ]; then
			if [ $try = 1 ]; then
				echo "PASS vm/$n ($(((e - s) / 1000000)) ms)"
			elif flaky_listed "$n"; then
				echo "FLAKY vm/$n: passed on the second run ($(((e - s) / 1000000)) ms); listed in $FLAKY_LIST"
				flaky=$((flaky + 1))
			else
				echo "FAIL vm/$n: passed only on the second run, and $FLAKY_LIST does not list it"
				fails=$((fails + 1))
			fi
			return
		fi
		echo "FAIL vm/$n (exit $rc, run $try of 2)"
		# What failed may lie above the tail (a step of a longer
		# script): its own lines first.
		grep -E 'failed:|not ok|FAIL' "$VM_LOGDIR/vm-$n.log" | head -10 |
			sed 's/^/  ! /'
		tail -15 "$VM_LOGDIR/vm-$n.log" | sed 's/^/  | /'
	done
	fails=$((fails + 1))
}
