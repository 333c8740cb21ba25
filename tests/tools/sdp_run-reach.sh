#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/tools/sdp_run-reach.sh BUILD — sdp_run says so, once, when the
# preload cannot reach the program's sockets: a statically linked program,
# and a Go program (it makes its socket calls without libc; detected by
# the Go build information every Go binary carries, here planted in a
# small C program).  An ordinary dynamically linked program gets no such
# word.  Each program still runs.
set -u
B=$(cd "${1:-build}" && pwd)
RUN="$B/bin/sdp_run"
W=$(mktemp -d /tmp/sdp-reach.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "not ok - $*"; exit 1; }
cat >"$W/hello.c" <<'C'
#include <stdio.h>
int main(void) { puts("ran"); return 0; }
C
cat >"$W/fakego.c" <<'C'
#include <stdio.h>
/* The magic that opens a Go binary's build information. */
const char go_buildinfo[] = "\xff Go buildinf:";
int main(void) { puts(go_buildinfo[0] ? "ran" : ""); return 0; }
C
cc -O2 -o "$W/dynamic" "$W/hello.c" || fail "cannot build a dynamic program"
cc -O2 -static -o "$W/static" "$W/hello.c" || fail "cannot build a static program (libc6-dev's libc.a)"
cc -O2 -o "$W/fakego" "$W/fakego.c" || fail "cannot build the Go stand-in"
for p in dynamic static fakego; do
	out=$("$RUN" "$W/$p" 2>"$W/$p.err"); rc=$?
	[ $rc = 0 ] && [ "$out" = ran ] || fail "$p under sdp_run: rc $rc, output '$out': $(cat "$W/$p.err")"
done
[ ! -s "$W/dynamic.err" ] || fail "a dynamic program got a warning: $(cat "$W/dynamic.err")"
echo "ok - a dynamically linked program runs with no warning"
grep -q "statically linked" "$W/static.err" && grep -q "plain TCP" "$W/static.err" ||
	fail "a static program ran without a word: '$(cat "$W/static.err")'"
[ "$(wc -l <"$W/static.err")" = 1 ] || fail "more than one line for the static program: $(cat "$W/static.err")"
echo "ok - a static program: $(cat "$W/static.err")"
grep -q "Go program" "$W/fakego.err" && grep -q "plain TCP" "$W/fakego.err" ||
	fail "a Go program ran without a word: '$(cat "$W/fakego.err")'"
echo "ok - a Go program: $(cat "$W/fakego.err")"
