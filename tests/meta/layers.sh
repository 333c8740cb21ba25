#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/meta/layers.sh [BUILD] — the source folders include one another only
# down the layers (scripts/layers.py prints the graph), no layer below the
# socket switch calls the C library by an interposed name, and the check
# itself fails on a copy of the tree given one upward include, then one
# such call.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sdp-layers.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

echo "1..3"
if python3 "$SRC/scripts/layers.py" "$SRC"; then
	echo "ok 1 - no folder includes one beside or above it"
else
	echo "not ok 1 - the include graph has an edge that does not point down"
	exit 1
fi

# caught N WHAT PATTERN: the check fails on the copy in $TMP and names the
# fault (PATTERN in its output).
caught() {
	if python3 "$SRC/scripts/layers.py" "$TMP" >"$TMP/out" 2>&1; then
		echo "not ok $1 - $2 passed the check"
		exit 1
	fi
	if grep -q "$3" "$TMP/out"; then
		echo "ok $1 - $2 fails the check"
	else
		echo "not ok $1 - the check failed on $2 without naming it:"
		sed 's/^/# /' "$TMP/out"
		exit 1
	fi
}

# The check must see an edge it exists for: the transport reaching up into
# the engine.
cp -r "$SRC/src" "$SRC/tools" "$TMP/"
f="$TMP/src/transport/shm/shm_qp.c"
sed -i '0,/^#include "/s//#include "engine\/conn.h"\n#include "/' "$f"
caught 2 "an include of engine/ from transport/" \
	"transport -> engine does not point down"

# And, that include gone, a call below socket/ that would go through the
# socket switch.
sed -i '0,/^#include "engine\/conn.h"$/{/^#include "engine\/conn.h"$/d}' "$f"
printf '\nstatic void stray(int fd) { (void)send(fd, "", 1, 0); }\n' >>"$f"
caught 3 "a call of send() from transport/" \
	"calls send() by its interposed name"
