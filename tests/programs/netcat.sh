#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# netcat-openbsd (nc) under sdp_run: `nc -l` receiving 32 MiB to a file from
# `nc -N` (shutdown on EOF), sha256; a reply the other way; then fallback
# both ways.  Evidence: SDP_LOG=3 transitions on both ends.
if [ "${1:-}" = --serve ]; then # --serve WRAP PORT OUTFILE REPLYFILE SDP_RUN
	if [ "$2" = sdp ]; then
		exec "$6" -d nc -N -l 127.0.0.1 "$3" <"$5" >"$4"
	fi
	exec nc -N -l 127.0.0.1 "$3" <"$5" >"$4"
fi
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg netcat-openbsd nc
if ! nc -h 2>&1 | grep -q -- '-N'; then
	echo "not ok - nc is not netcat-openbsd (no -N): $(readlink -f "$(command -v nc)")"
	exit 1
fi
head -c 33554432 /dev/urandom >"$TMP/in.bin"
WANT=$(sha256sum <"$TMP/in.bin" | cut -d' ' -f1)
echo "reply from the listener $$" >"$TMP/reply.txt"

run() {
	local w=$1
	shift
	if [ "$w" = sdp ]; then "$SDP_RUN" -d "$@"; else "$@"; fi
}

nc_case() { # SW CW TAG
	local sw=$1 cw=$2 tag=$3 port srv got
	port=$(rand_port)
	# listener: receives the file, sends the reply, and exits when the
	# client half-closes (-N on both: shutdown after stdin EOF)
	"$SRC/tests/programs/netcat.sh" --serve "$sw" "$port" "$TMP/$tag.out" "$TMP/reply.txt" "$SDP_RUN" \
		2>"$TMP/$tag-srv.err" &
	srv=$!
	PIDS="$PIDS $srv"
	wait_listen "$port" || true
	(sleep 0.2; cat "$TMP/in.bin") | tmo 30 bash -c "$(declare -f run); run \"\$@\"" _ "$cw" nc -N 127.0.0.1 "$port" \
		>"$TMP/$tag.reply" 2>"$TMP/$tag-cli.err"
	local rc=$?
	for _ in $(seq 1 50); do kill -0 "$srv" 2>/dev/null || break; sleep 0.1; done
	got=$(sha256sum <"$TMP/$tag.out" 2>/dev/null | cut -d' ' -f1)
	check "nc-$tag" "nc $cw -> nc -l $sw: 32 MiB, client exit $rc, sha256 ${got:0:16}.." eq "$got" "$WANT"
	check "nc-$tag-reply" "the listener's reply reached the client" cmp -s "$TMP/$tag.reply" "$TMP/reply.txt"
	if [ "$sw" = sdp ] && [ "$cw" = sdp ]; then
		check "nc-$tag-sdp" "both ends logged an ESTABLISHED SDP connection, no fallback" \
			eval 'ge "$(log_sdp_established "$TMP/$tag-srv.err")" 1 && ge "$(log_sdp_established "$TMP/$tag-cli.err")" 1 && eq "$(log_tcp_fallbacks "$TMP/$tag-cli.err")" 0'
	elif [ "$cw" = sdp ]; then
		check "nc-$tag-tcp" "client fell back (over TCP: no SDP listener)" file_has "$TMP/$tag-cli.err" "over TCP: no SDP listener"
	else
		check "nc-$tag-tcp" "listener under sdp_run has no SDP connection" eq "$(log_sdp_established "$TMP/$tag-srv.err")" 0
	fi
	[ "$NFAIL" -gt 0 ] && show "$TMP/$tag-srv.err" "$TMP/$tag-cli.err"
	stop "$srv"
}
nc_case sdp sdp sdp
nc_case plain sdp fallback-client
nc_case sdp plain fallback-server
finish
