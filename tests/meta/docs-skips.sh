#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/meta/docs-skips.sh BUILD — README.md's "What each pass covers" names
# every skip that tests/skips.list allows, so the two cannot drift apart.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
n=0 bad=0
while read -r passes glob reason; do
	case "$passes" in '' | '#'*) continue ;; esac
	n=$((n + 1))
	if grep -qF -- "\`$glob\`" "$SRC/README.md"; then
		echo "ok $n - README names $glob ($passes)"
	else
		echo "not ok $n - README.md does not name \`$glob\`, which tests/skips.list lets skip in $passes: $reason"
		bad=$((bad + 1))
	fi
done <"$SRC/tests/skips.list"
echo "1..$n"
[ "$n" -gt 0 ] && [ "$bad" -eq 0 ]
