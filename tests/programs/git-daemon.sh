#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# git daemon (Debian git) under sdp_run serving a repository of more than
# 10,000 objects to git clone under sdp_run; then to a plain git clone.
# The daemon forks a child per connection that re-execs git with the
# connection on stdin/stdout, which runs upload-pack on it in turn (the
# listener relays the connection, engine/relay.h); the clone's own process
# spawns index-pack, which inherits the connection by accident and must
# leave it alone.  Checks: the clone's HEAD is the repository's, git fsck
# passes, the object count.
# Evidence: SDP_LOG=3 ESTABLISHED and no fallback on both ends.
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg git git

# A repository: 3,400 files changed in three commits, > 10,000 objects.
src="$TMP/src"
git init -q "$src"
for i in $(seq 1 3400); do echo "file $i" >"$src/f$i.txt"; done
git -C "$src" add -A
git -C "$src" -c user.email=t@t -c user.name=t commit -qm c0
for c in 1 2; do
	for i in $(seq 1 3400); do echo "change $c of $i" >>"$src/f$i.txt"; done
	git -C "$src" -c user.email=t@t -c user.name=t commit -qam "c$c"
done
git clone -q --bare "$src" "$TMP/srv/repo.git"
touch "$TMP/srv/repo.git/git-daemon-export-ok"
nobj=$(git -C "$TMP/srv/repo.git" count-objects -v | awk '/^(count|in-pack):/ { n += $2 } END { print n }')
check objects "the repository has more than 10,000 objects ($nobj)" ge "$nobj" 10001
WANT=$(git -C "$TMP/srv/repo.git" rev-parse HEAD)

port=$(rand_port)
bg daemon env SDP_LOG=3 "$SDP_RUN" git daemon --listen=127.0.0.1 --port="$port" \
	--base-path="$TMP/srv" --reuseaddr
srv=$BG_PID
wait_listen "$port" || show "$TMP/daemon.err"

# clone NAME WRAP(sdp|plain): one clone, checked.
clone() {
	local name=$1 wrap=$2 rc got
	local -a pre=()
	[ "$wrap" = sdp ] && pre=(env SDP_LOG=3 "$SDP_RUN")
	tmo 120 "${pre[@]}" git clone -q "git://127.0.0.1:$port/repo.git" "$TMP/$name" \
		>"$TMP/$name.out" 2>"$TMP/$name.err"
	rc=$?
	got=$(git -C "$TMP/$name" rev-parse HEAD 2>/dev/null)
	check "$name" "git clone ($wrap): exit $rc, HEAD ${got:0:12} (want ${WANT:0:12})" eq "$got" "$WANT"
	git -C "$TMP/$name" fsck --no-progress >"$TMP/$name.fsck" 2>&1
	check "$name-fsck" "git fsck of the clone passes (exit $?)" eq "$?" 0
}

clone sdp sdp
check sdp-sdp "the clone's connection was SDP (SDP_LOG: ESTABLISHED, no fallback)" \
	eval 'ge "$(log_sdp_established "$TMP/sdp.err")" 1 && eq "$(log_tcp_fallbacks "$TMP/sdp.err")" 0'
check sdp-daemon "the daemon logged an ESTABLISHED SDP connection" \
	ge "$(log_sdp_established "$TMP/daemon.err")" 1
clone plain plain
check plain-tcp "the plain clone fell back: the daemon logged no second SDP connection" \
	eq "$(log_sdp_established "$TMP/daemon.err")" 1
[ "$NFAIL" -gt 0 ] && show "$TMP/daemon.err" "$TMP/sdp.err" "$TMP/plain.err"
stop "$srv"
finish
