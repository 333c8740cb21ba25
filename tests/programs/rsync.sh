#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rsync (Debian package rsync): the daemon (`rsync --daemon`) under
# sdp_run, a client under sdp_run downloading and then uploading a 200 MB
# file, sha256 both.  The daemon forks a child per connection, and the
# child forks again: one process receives while the other sends on the one
# connection (two processes on one SDP connection, handed over between
# them).  Evidence: SDP_LOG=3 transitions on both ends, no fallback.
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg rsync rsync
SIZE=$((200 * 1024 * 1024))
mkdir -p "$TMP/mod" "$TMP/dst"
head -c "$SIZE" /dev/urandom >"$TMP/mod/down.bin"
head -c "$SIZE" /dev/urandom >"$TMP/up.bin"
cat >"$TMP/rsyncd.conf" <<EOF
use chroot = no
pid file = $TMP/rsyncd.pid
[m]
path = $TMP/mod
read only = no
uid = $(id -u)
gid = $(id -g)
EOF

port=$(rand_port)
bg daemon "$SDP_RUN" -d rsync --daemon --no-detach --port "$port" \
	--address 127.0.0.1 --config "$TMP/rsyncd.conf"
srv=$BG_PID
wait_listen "$port" || true

# transfer NAME SRC DST WANT-FILE GOT-FILE: one rsync client run, checked.
transfer() {
	local name=$1 src=$2 dst=$3 want got rc
	tmo 120 "$SDP_RUN" -d rsync -a "$src" "$dst" >"$TMP/$name.out" 2>"$TMP/$name.err"
	rc=$?
	want=$(sha256sum <"$4" | cut -d' ' -f1)
	got=$(sha256sum <"$5" 2>/dev/null | cut -d' ' -f1)
	check "$name" "rsync $name, 200 MB: exit $rc, sha256 ${got:0:16}.." eq "$got" "$want"
	LOG="$TMP/$name.err"
	check "$name-sdp" "the client logged an ESTABLISHED SDP connection, no fallback" \
		eval 'ge "$(log_sdp_established "$LOG")" 1 && eq "$(log_tcp_fallbacks "$LOG")" 0'
}

transfer download "rsync://127.0.0.1:$port/m/down.bin" "$TMP/dst/" "$TMP/mod/down.bin" "$TMP/dst/down.bin"
transfer upload "$TMP/up.bin" "rsync://127.0.0.1:$port/m/" "$TMP/up.bin" "$TMP/mod/up.bin"
check daemon-sdp "the daemon logged ESTABLISHED SDP connections" \
	ge "$(log_sdp_established "$TMP/daemon.err")" 2
[ "$NFAIL" -gt 0 ] && show "$TMP/daemon.err" "$TMP/download.err" "$TMP/upload.err"
stop "$srv"
finish
