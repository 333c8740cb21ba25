#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# memcached (Debian memcached) under sdp_run, driven for 3 s by memcaslap
# (Debian's name for memaslap, libmemcached-tools) with every get verified
# (-v 1.0: verify_failed 0, no miss); a 768 KiB random value stored with
# memccp and read back with memccat, compared by sha256; then fallback both
# ways (a shorter memcaslap run and the same copy).  memcached gets 1 GiB
# (-m, allocated as used): with the default 64 MiB it evicts within 3 s over
# shm, and memcaslap counts an evicted key as a get miss (verify_misses).
# Evidence: sdpstat --json on memcaslap and memcached while it runs, ss (no
# kernel TCP connection on the port over SDP), SDP_LOG=3 transitions
# ("-> ESTABLISHED", no "over TCP") for memcaslap, memccp and memccat.
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg memcached memcached
need_pkg libmemcached-tools memcaslap memccp memccat memcstat

head -c 786432 /dev/urandom >"$TMP/blob" # the key is the basename: blob
WANT=$(sha256sum <"$TMP/blob" | cut -d' ' -f1)
CONNS=8

start_memcached() { # NAME WRAP(sdp|plain): sets PORT, SRV, SRVWRAP
	local name=$1
	SRVWRAP=$2
	PORT=$(rand_port)
	local -a cmd=(memcached -l 127.0.0.1 -p "$PORT" -U 0 -t 2 -m 1024 -u "$(id -un)")
	[ "$SRVWRAP" = sdp ] && cmd=("$SDP_RUN" -d "${cmd[@]}")
	bg "$name" "${cmd[@]}"
	SRV=$BG_PID
	wait_listen "$PORT" || show "$TMP/$name.out" "$TMP/$name.err"
}

# copy TAG WRAP: memccp the value, memccat it back, compare.  The client
# logs are $TMP/TAG-set.err and $TMP/TAG-get.err.
copy() {
	local tag=$1 wrap=$2 rcset rcget got
	local -a set=(memccp -s "127.0.0.1:$PORT" "$TMP/blob")
	local -a get=(memccat -s "127.0.0.1:$PORT" --file="$TMP/$tag.got" blob)
	if [ "$wrap" = sdp ]; then
		set=("$SDP_RUN" -d "${set[@]}")
		get=("$SDP_RUN" -d "${get[@]}")
	fi
	tmo 20 "${set[@]}" >"$TMP/$tag-set.out" 2>"$TMP/$tag-set.err"
	rcset=$?
	tmo 20 "${get[@]}" >"$TMP/$tag-get.out" 2>"$TMP/$tag-get.err"
	rcget=$?
	got=$(sha256sum <"$TMP/$tag.got" 2>/dev/null | cut -d' ' -f1)
	check "$tag" "memccp + memccat ($wrap) of a 768 KiB random value, memcached $SRVWRAP: exit $rcset/$rcget, sha256 ${got:0:16}.. (want ${WANT:0:16}..)" \
		eval '[ $rcset -eq 0 ] && [ $rcget -eq 0 ] && [ "$got" = "$WANT" ]'
	[ "$NFAIL" -gt 0 ] && show "$TMP/$tag-set.out" "$TMP/$tag-set.err" "$TMP/$tag-get.out" "$TMP/$tag-get.err"
	return 0
}

# report TAG KEY: the number on memcaslap's "KEY: N" line in $TMP/TAG.out.
report() { sed -n "s/^$2: *\([0-9][0-9]*\)\$/\1/p" "$TMP/$1.out"; }

# slap TAG WRAP SECS: memcaslap with $CONNS connections for SECS seconds,
# every get verified; checks its report and the transport.
slap() {
	local tag=$1 wrap=$2 secs=$3 pid rc n nsrv=none sampler gets sets vf vm gm
	local -a cmd=(memcaslap -s "127.0.0.1:$PORT" -t "${secs}s" -T 2 -c "$CONNS" -v 1.0)
	[ "$wrap" = sdp ] && cmd=("$SDP_RUN" -d "${cmd[@]}")
	run_limited 30 "$TMP/$tag.out" "$TMP/$tag.err" "${cmd[@]}"
	pid=$BG_PID
	sleep 0.5
	# The preloaded end that carries the traffic, while it does (over SDP:
	# both ends, at once).
	if [ "$wrap" = sdp ] && [ "$SRVWRAP" = sdp ]; then
		sample_sdp "$SRV" 1 >"$TMP/$tag.nsrv" &
		sampler=$!
		sample_conns "$pid" "$PORT" 1
		wait "$sampler"
		nsrv=$(cat "$TMP/$tag.nsrv")
	elif [ "$wrap" = sdp ]; then
		sample_conns "$pid" "$PORT" 1
	else
		sample_conns "$SRV" "$PORT" 1
	fi
	n=$S_SDP
	wait "$pid"
	rc=$?
	gets=$(report "$tag" cmd_get) sets=$(report "$tag" cmd_set)
	vf=$(report "$tag" verify_failed) vm=$(report "$tag" verify_misses) gm=$(report "$tag" get_misses)
	check "$tag" "memcaslap ${secs} s ($wrap, memcached $SRVWRAP): exit $rc, ${gets:-?} gets, ${sets:-?} sets, $(grep -o 'TPS: [0-9]*' "$TMP/$tag.out")" \
		eval '[ $rc -eq 0 ] && ge "$gets" 1000 && ge "$sets" 100'
	check "$tag-verify" "every get verified: verify_failed ${vf:-?}, verify_misses ${vm:-?}, get_misses ${gm:-?}" \
		eval 'eq "$vf" 0 && eq "$vm" 0 && eq "$gm" 0'
	if [ "$wrap" = sdp ] && [ "$SRVWRAP" = sdp ]; then
		check "$tag-sdp" "memcaslap's $CONNS connections were SDP, moving data (sdpstat saw $n)" ge "$n" "$CONNS"
		check "$tag-server-sdp" "memcached's were too (sdpstat saw $nsrv)" ge "$nsrv" "$CONNS"
		check "$tag-notcp" "no kernel TCP connection on port $PORT while it ran (ss saw $S_TCP)" eq "$S_TCP" 0
		check "$tag-log" "memcaslap's SDP_LOG: $CONNS connections ESTABLISHED, no fallback" \
			eval 'ge "$(log_sdp_established "$TMP/$tag.err")" "$CONNS" && eq "$(log_tcp_fallbacks "$TMP/$tag.err")" 0'
	elif [ "$wrap" = sdp ]; then
		check "$tag-tcp" "memcaslap ran on TCP: sdpstat saw $n SDP and $S_FALLBACK TCP sockets, ss $S_TCP TCP connections" \
			eval 'eq "$n" 0 && ge "$S_FALLBACK" "$CONNS" && ge "$S_TCP" $((2 * CONNS))'
	else
		check "$tag-tcp" "memcached under sdp_run served TCP: sdpstat saw $n SDP connections, ss $S_TCP TCP ones" \
			eval 'eq "$n" 0 && ge "$S_TCP" $((2 * CONNS))'
	fi
	[ "$NFAIL" -gt 0 ] && show "$TMP/$tag.out" "$TMP/$tag.err"
	return 0
}

# ---- sdp <-> sdp ---------------------------------------------------------------
start_memcached server sdp
copy copy sdp
check "copy-sdp" "memccp's and memccat's connections were SDP (SDP_LOG: ESTABLISHED, no fallback)" \
	eval 'ge "$(log_sdp_established "$TMP/copy-set.err")" 1 && ge "$(log_sdp_established "$TMP/copy-get.err")" 1 &&
		eq "$(log_tcp_fallbacks "$TMP/copy-set.err")" 0 && eq "$(log_tcp_fallbacks "$TMP/copy-get.err")" 0'
slap slap sdp 3
tmo 10 "$SDP_RUN" memcstat --servers="127.0.0.1:$PORT" >"$TMP/stats.out" 2>"$TMP/stats.err"
check "server-alive" "memcached still answers (memcstat: $(grep -o 'total_connections: [0-9]*' "$TMP/stats.out"))" \
	file_has "$TMP/stats.out" 'total_connections:'
check "server-log" "memcached's SDP_LOG shows >= $((CONNS + 2)) SDP connections, no fallback" \
	eval 'ge "$(log_sdp_established "$TMP/server.err")" $((CONNS + 2)) && eq "$(log_tcp_fallbacks "$TMP/server.err")" 0'
[ "$NFAIL" -gt 0 ] && show "$TMP/server.err" "$TMP/stats.err"
stop "$SRV"

# ---- fallback: memcached under sdp_run, plain clients -----------------------------
start_memcached sdpserver sdp
copy plaincopy plain
slap plainslap plain 2
check "plain-server-log" "memcached had no SDP connection (SDP_LOG)" \
	eq "$(log_sdp_established "$TMP/sdpserver.err")" 0
[ "$NFAIL" -gt 0 ] && show "$TMP/sdpserver.err"
stop "$SRV"

# ---- fallback: plain memcached, clients under sdp_run -----------------------------
start_memcached plainserver plain
copy sdpcopy sdp
check "sdpcopy-fallback" "memccp and memccat fell back to TCP (SDP_LOG: over TCP: no SDP listener)" \
	eval 'file_has "$TMP/sdpcopy-set.err" "over TCP: no SDP listener" && file_has "$TMP/sdpcopy-get.err" "over TCP: no SDP listener"'
slap sdpslap sdp 2
check "sdpslap-fallback" "memcaslap's connections fell back to TCP (SDP_LOG: $(log_tcp_fallbacks "$TMP/sdpslap.err") over TCP, no SDP listener; none ESTABLISHED over SDP)" \
	eval 'ge "$(log_tcp_fallbacks "$TMP/sdpslap.err")" "$CONNS" && file_has "$TMP/sdpslap.err" "over TCP: no SDP listener" &&
		eq "$(log_sdp_established "$TMP/sdpslap.err")" 0'
[ "$NFAIL" -gt 0 ] && show "$TMP/sdpcopy-get.err" "$TMP/sdpslap.err"
stop "$SRV"
finish
