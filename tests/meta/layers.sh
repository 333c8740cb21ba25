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

# The check must see an edge it exists for: the transport reaching up into
# the engine.
cp -r "$SRC/src" "$SRC/tools" "$TMP/"
f="$TMP/src/transport/shm/shm_qp.c"
sed -i '0,/^#include "/s//#include "engine\/conn.h"\n#include "/' "$f"
if python3 "$SRC/scripts/layers.py" "$TMP" >"$TMP/out" 2>&1; then
	echo "not ok 2 - an include of engine/ from transport/ passed the check"
	exit 1
fi
if grep -q "transport -> engine does not point down" "$TMP/out"; then
	echo "ok 2 - an include of engine/ from transport/ fails the check"
else
	echo "not ok 2 - the check failed without naming the upward edge:"
	sed 's/^/# /' "$TMP/out"
	exit 1
fi

# And a call below socket/ that would go through the socket switch.
printf '\nstatic void stray(int fd) { (void)send(fd, "", 1, 0); }\n' \
	>>"$TMP/src/transport/shm/shm_qp.c"
sed -i '0,/^#include "engine\/conn.h"$/{/^#include "engine\/conn.h"$/d}' \
	"$TMP/src/transport/shm/shm_qp.c"
if python3 "$SRC/scripts/layers.py" "$TMP" >"$TMP/out" 2>&1; then
	echo "not ok 3 - a call of send() from transport/ passed the check"
	exit 1
fi
if grep -q "calls send() by its interposed name" "$TMP/out"; then
	echo "ok 3 - a call of send() from transport/ fails the check"
else
	echo "not ok 3 - the check failed without naming the call:"
	sed 's/^/# /' "$TMP/out"
	exit 1
fi
