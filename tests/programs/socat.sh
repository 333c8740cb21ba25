#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# socat (Debian package socat) under sdp_run: a 32 MiB file one way
# (TCP-LISTEN -> file), and an echo through SYSTEM:cat (socat forks the
# command and relays; the network socket stays in socat), sha256 both; then
# fallback both ways.  Evidence: SDP_LOG=3 transitions on both ends.
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg socat socat
head -c 33554432 /dev/urandom >"$TMP/in.bin"
WANT=$(sha256sum <"$TMP/in.bin" | cut -d' ' -f1)

run() { # WRAP CMD...: under sdp_run -d or plain
	local w=$1
	shift
	if [ "$w" = sdp ]; then "$SDP_RUN" -d "$@"; else "$@"; fi
}

oneway() { # SW CW TAG
	local sw=$1 cw=$2 tag=$3 port srv got
	port=$(rand_port)
	bg "$tag-srv" run "$sw" socat -u "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr" "CREATE:$TMP/$tag.out"
	srv=$BG_PID
	wait_listen "$port" || true
	tmo 30 bash -c 'run() { local w=$1; shift; if [ "$w" = sdp ]; then "$SDP_RUN" -d "$@"; else "$@"; fi; }; run "$@"' _ \
		"$cw" socat -u "OPEN:$TMP/in.bin" "TCP:127.0.0.1:$port" 2>"$TMP/$tag-cli.err"
	local rc=$?
	for _ in $(seq 1 50); do kill -0 "$srv" 2>/dev/null || break; sleep 0.1; done
	got=$(sha256sum <"$TMP/$tag.out" 2>/dev/null | cut -d' ' -f1)
	check "oneway-$tag" "socat $cw -> socat $sw: 32 MiB, exit $rc, sha256 ${got:0:16}.." eq "$got" "$WANT"
	evidence "$sw" "$cw" "oneway-$tag" "$TMP/$tag-srv.err" "$TMP/$tag-cli.err"
	stop "$srv"
}

echo_case() { # SW CW TAG
	local sw=$1 cw=$2 tag=$3 port srv got
	port=$(rand_port)
	bg "$tag-esrv" run "$sw" socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr" SYSTEM:cat
	srv=$BG_PID
	wait_listen "$port" || true
	tmo 30 bash -c 'run() { local w=$1; shift; if [ "$w" = sdp ]; then "$SDP_RUN" -d "$@"; else "$@"; fi; }; run "$@"' _ \
		"$cw" socat -t 5 "OPEN:$TMP/in.bin!!CREATE:$TMP/$tag.echo" "TCP:127.0.0.1:$port" 2>"$TMP/$tag-ecli.err"
	local rc=$?
	got=$(sha256sum <"$TMP/$tag.echo" 2>/dev/null | cut -d' ' -f1)
	check "echo-$tag" "socat $cw <-> socat $sw SYSTEM:cat echo: 32 MiB back, exit $rc, sha256 ${got:0:16}.." eq "$got" "$WANT"
	evidence "$sw" "$cw" "echo-$tag" "$TMP/$tag-esrv.err" "$TMP/$tag-ecli.err"
	stop "$srv"
}

evidence() { # SW CW NAME SERVER-LOG CLIENT-LOG
	local sw=$1 cw=$2 name=$3 slog=$4 clog=$5
	if [ "$sw" = sdp ] && [ "$cw" = sdp ]; then
		check "$name-sdp" "both ends logged an ESTABLISHED SDP connection, no fallback" \
			eval 'ge "$(log_sdp_established "$slog")" 1 && ge "$(log_sdp_established "$clog")" 1 && eq "$(log_tcp_fallbacks "$clog")" 0'
	elif [ "$cw" = sdp ]; then
		check "$name-tcp" "client fell back (over TCP: no SDP listener)" file_has "$clog" "over TCP: no SDP listener"
	else
		check "$name-tcp" "server under sdp_run has no SDP connection" eq "$(log_sdp_established "$slog")" 0
	fi
	[ "$NFAIL" -gt 0 ] && show "$slog" "$clog"
	return 0
}

oneway sdp sdp sdp
oneway plain sdp fallback-client
oneway sdp plain fallback-server
echo_case sdp sdp sdp
echo_case plain sdp fallback-client
echo_case sdp plain fallback-server
finish
