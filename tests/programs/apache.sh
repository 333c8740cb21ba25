#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Apache httpd (Debian apache2) with the event MPM under sdp_run: a private
# minimal config in $TMP (no /etc/apache2, no apache2ctl), run in the
# foreground; the parent creates the listener and forks two children, each
# with 25 worker threads and a listener thread that sleeps in epoll_wait on
# the listening socket and the keep-alive connections.  It serves 64 KiB and
# 1 MiB files (EnableSendfile On, and Off for /nosf/).  ApacheBench (Debian
# apache2-utils) under sdp_run without -k (a new connection per request:
# ab without -k once died after about 19 requests, "Could not find
# specified socket in poll list") and with -k (keep-alive); curl under
# sdp_run fetches the 1 MiB file (sha256, ab reads no bodies).  Then
# fallback both ways: plain curl and ab against the sdp_run Apache, and
# curl and ab under sdp_run against a plain Apache.
# Evidence: SDP_LOG=3 transitions in ab's and curl's logs (ESTABLISHED, no
# "over TCP") and in Apache's error.log (the children's stderr); sdpstat on
# ab and on the Apache children during ab -k, and no kernel TCP connection
# on the port meanwhile.  Apache's children are in the process group of the
# parent (setsid): it is stopped as a group, and nothing may be left.
# KeepAliveTimeout is 4 s, so a keep-alive request that nobody is told
# about (the event MPM's worker threads hand keep-alive connections back
# to the listener thread while it sleeps in epoll_wait: each must wake it,
# socket/epfast.c) would wait 4 s, and ab -k's longest request shows it.
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg apache2 apache2
need_pkg apache2-utils ab
need_pkg curl curl
APACHE=$(command -v apache2 || echo /usr/sbin/apache2)
MODS=/usr/lib/apache2/modules
KA_TIMEOUT=4	# s: bounds the wait of a request that nobody is told about

mkdir -p "$TMP/www/nosf"
head -c 65536 /dev/urandom >"$TMP/www/64k.bin"
head -c 1048576 /dev/urandom >"$TMP/www/1m.bin"
cp "$TMP/www/1m.bin" "$TMP/www/nosf/1m.bin"
# Apache started as root runs its children as nobody: they must read these
chmod a+rx "$TMP" "$TMP/www" "$TMP/www/nosf"
chmod a+r "$TMP/www/64k.bin" "$TMP/www/1m.bin" "$TMP/www/nosf/1m.bin"
WANT=$(sha256sum <"$TMP/www/1m.bin" | cut -d' ' -f1)

# Every Apache started leads its own process group (setsid): killed whole at
# exit, children included.
APGS=""
apache_cleanup() {
	local g
	for g in $APGS; do
		kill -KILL -- "-$g" 2>/dev/null
	done
}
trap 'apache_cleanup; cleanup' EXIT

start_apache() { # NAME WRAP(sdp|plain): sets PORT, SRV, ADIR
	local name=$1 wrap=$2 user=""
	PORT=$(rand_port)
	ADIR=$TMP/$name
	mkdir -p "$ADIR"
	[ "$(id -u)" -eq 0 ] && user="User nobody
Group nogroup"
	cat >"$ADIR/httpd.conf" <<EOF
ServerRoot $ADIR
LoadModule mpm_event_module $MODS/mod_mpm_event.so
LoadModule authz_core_module $MODS/mod_authz_core.so
LoadModule mime_module $MODS/mod_mime.so
ServerName 127.0.0.1
Listen 127.0.0.1:$PORT
PidFile $ADIR/httpd.pid
ErrorLog $ADIR/error.log
LogLevel info
LogFormat "%>s %B %r" short
CustomLog $ADIR/access.log short
Mutex file:$ADIR default
DefaultRuntimeDir $ADIR
$user
TypesConfig /dev/null
AddType application/octet-stream .bin
StartServers 2
ServerLimit 2
ThreadsPerChild 25
MaxRequestWorkers 50
MinSpareThreads 25
MaxSpareThreads 50
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout $KA_TIMEOUT
EnableSendfile On
DocumentRoot $TMP/www
<Directory $TMP/www>
	Require all granted
</Directory>
<Directory $TMP/www/nosf>
	EnableSendfile Off
</Directory>
EOF
	if [ "$wrap" = sdp ]; then
		bg "$name" env SDP_LOG=3 setsid "$SDP_RUN" "$APACHE" -DFOREGROUND -f "$ADIR/httpd.conf"
	else
		bg "$name" setsid "$APACHE" -DFOREGROUND -f "$ADIR/httpd.conf"
	fi
	SRV=$BG_PID
	APGS="$APGS $SRV"
	wait_listen "$PORT" || show "$TMP/$name.err" "$ADIR/error.log"
}

# stop_apache: TERM to the parent (it stops its children), then KILL to
# whatever of the group is left after 5 s.
stop_apache() {
	local i
	kill -TERM "$SRV" 2>/dev/null
	for i in $(seq 1 50); do
		pgrep -g "$SRV" >/dev/null || break
		sleep 0.1
	done
	kill -KILL -- "-$SRV" 2>/dev/null
	wait "$SRV" 2>/dev/null
	check "$1-stopped" "Apache ($1) and its children are gone after SIGTERM" \
		eval '! pgrep -f "$ADIR/httpd.conf" >/dev/null'
}

# ab_run NAME WRAP ARGS...: ab with a timeout; output in $TMP/NAME.out/.err
ab_run() {
	local name=$1 wrap=$2
	shift 2
	local -a pre=()
	[ "$wrap" = sdp ] && pre=(env SDP_LOG=3 "$SDP_RUN")
	tmo 60 "${pre[@]}" ab "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}

# ab_field NAME FIELD: the value of "FIELD: value" in ab's report
ab_field() {
	sed -n "s/^$2: *//p" "$TMP/$1.out" | head -1
}

# ab_ok NAME N: ab completed N requests, none failed, all 2xx, 64 KiB each
ab_ok() {
	[ "$(ab_field "$1" "Complete requests")" = "$2" ] &&
		[ "$(ab_field "$1" "Failed requests")" = 0 ] &&
		[ "$(ab_field "$1" "Document Length")" = "65536 bytes" ] &&
		file_lacks "$TMP/$1.out" "Non-2xx"
}
ab_says() { # NAME: a one-line summary for the check's description
	printf 'complete %s, failed %s, length %s' "$(ab_field "$1" "Complete requests")" \
		"$(ab_field "$1" "Failed requests")" "$(ab_field "$1" "Document Length")"
}

fetch() { # TAG WRAP PATH
	local tag=$1 wrap=$2 path=$3 got code
	: >"$TMP/$tag.body"
	local -a cmd=(curl -sS -o "$TMP/$tag.body" -w '%{http_code}' --max-time 20 "http://127.0.0.1:$PORT$path")
	[ "$wrap" = sdp ] && cmd=(env SDP_LOG=3 "$SDP_RUN" "${cmd[@]}")
	code=$(tmo 30 "${cmd[@]}" 2>"$TMP/$tag.err")
	got=$(sha256sum <"$TMP/$tag.body" 2>/dev/null | cut -d' ' -f1)
	check "$tag" "curl ($wrap) GET $path (1 MiB) from Apache ($SRVWRAP): HTTP ${code:-?}, sha256 ${got:0:16}.. (want ${WANT:0:16}..)" \
		eval '[ "$code" = 200 ] && [ "$got" = "$WANT" ]'
}

# ---- sdp <-> sdp -----------------------------------------------------------------
SRVWRAP=sdp
start_apache server sdp
for i in $(seq 1 50); do	# the children fork after the listener is up
	[ "$(pgrep -c -P "$SRV")" -ge 2 ] && break
	sleep 0.1
done
check "start" "Apache runs the event MPM: parent $SRV (its pid file: $(cat "$ADIR/httpd.pid" 2>/dev/null)) + $(pgrep -c -P "$SRV") children" \
	eval 'file_has "$ADIR/error.log" "mpm_event:notice" && [ "$(cat "$ADIR/httpd.pid")" = "$SRV" ] && [ "$(pgrep -c -P "$SRV")" = 2 ]'

# ab without -k: a new connection per request, 2000 of them
ab_run ab sdp -n 2000 -c 8 "http://127.0.0.1:$PORT/64k.bin"
check "ab" "ab (sdp) -n 2000 -c 8, a new connection each: $(ab_says ab)" ab_ok ab 2000
# (ab opens a few more connections than requests, and closes the spares)
check "ab-sdp" "every ab connection was SDP (SDP_LOG: $(log_sdp_established "$TMP/ab.err") ESTABLISHED for 2000 requests, $(log_tcp_fallbacks "$TMP/ab.err") over TCP)" \
	eval 'ge "$(log_sdp_established "$TMP/ab.err")" 2000 && eq "$(log_tcp_fallbacks "$TMP/ab.err")" 0'
check "ab-server-sdp" "Apache's children logged them SDP too ($(log_sdp_established "$ADIR/error.log") ESTABLISHED, $(log_tcp_fallbacks "$ADIR/error.log") over TCP) and served 2000 GETs" \
	eval 'ge "$(log_sdp_established "$ADIR/error.log")" 2000 && eq "$(log_tcp_fallbacks "$ADIR/error.log")" 0 &&
		[ "$(grep -c "^200 65536 GET /64k.bin" "$ADIR/access.log")" = 2000 ]'

# curl: the bodies (sendfile, then mmap + writev)
i=0
for path in /1m.bin /nosf/1m.bin /1m.bin /nosf/1m.bin; do
	i=$((i + 1))
	fetch "curl$i" sdp "$path"
	check "curl$i-sdp" "curl's connection was SDP (SDP_LOG: ESTABLISHED, no fallback)" \
		eval 'ge "$(log_sdp_established "$TMP/curl$i.err")" 1 && eq "$(log_tcp_fallbacks "$TMP/curl$i.err")" 0'
done

# ab -k: 8 keep-alive connections; sdpstat on ab and on the children meanwhile
run_limited 60 "$TMP/abk.out" "$TMP/abk.err" env SDP_LOG=3 "$SDP_RUN" ab -k -n 20000 -c 8 "http://127.0.0.1:$PORT/64k.bin"
AB=$BG_PID
sleep 0.3
children_sdp_peak "$SRV" 1 >"$TMP/nw" &
NWS=$!
sample_conns "$AB" "$PORT" 1
wait "$NWS"
NW=$(cat "$TMP/nw")
wait "$AB"
check "ab-k" "ab (sdp) -k -n 20000 -c 8: complete $(ab_field abk "Complete requests"), keep-alive $(ab_field abk "Keep-Alive requests"), length $(ab_field abk "Document Length"), no non-2xx" \
	eval '[ "$(ab_field abk "Complete requests")" = 20000 ] && [ -n "$(ab_field abk "Keep-Alive requests")" ] &&
		[ "$(ab_field abk "Document Length")" = "65536 bytes" ] && file_lacks "$TMP/abk.out" Non-2xx'
LONGEST=$(sed -n 's/^ *100% *\([0-9]*\) (longest request)/\1/p' "$TMP/abk.out")
check "ab-k-nostall" "ab -k: failed $(ab_field abk "Failed requests"), longest request ${LONGEST:-?} ms (under 2000; KeepAliveTimeout ${KA_TIMEOUT}s)" \
	eval '[ "$(ab_field abk "Failed requests")" = 0 ] && [ -n "$LONGEST" ] && [ "$LONGEST" -lt 2000 ]'
check "ab-k-sdp" "ab's connections were SDP (sdpstat: $S_SDP of 8, $S_FALLBACK on TCP; $S_TCP kernel TCP connections on the port; SDP_LOG: no fallback)" \
	eval 'ge "$S_SDP" 8 && eq "$S_FALLBACK" 0 && eq "$S_TCP" 0 && eq "$(log_tcp_fallbacks "$TMP/abk.err")" 0'
check "ab-k-server-sdp" "the Apache children's connections were SDP (sdpstat saw $NW of 8 in the children)" ge "$NW" 8

# ---- fallback-server: plain clients against the sdp_run Apache --------------------
fetch fallback-server plain /1m.bin
ab_run fbs-ab plain -n 500 -c 4 "http://127.0.0.1:$PORT/64k.bin"
check "fallback-server-ab" "plain ab -n 500 -c 4: $(ab_says fbs-ab)" ab_ok fbs-ab 500
fetch fallback-server2 plain /1m.bin
check "server-log" "Apache's error.log has no error (emerg, alert, crit, error)" \
	eval '[ -s "$ADIR/error.log" ] && ! grep -qE "\[[a-z_]+:(error|crit|alert|emerg)\]" "$ADIR/error.log"'
[ "$NFAIL" -gt 0 ] && show "$TMP/server.err" "$ADIR/error.log" "$TMP/ab.out" "$TMP/abk.out" "$TMP/abk.err"
stop_apache server

# ---- fallback-client: sdp_run clients against a plain Apache ----------------------
SRVWRAP=plain
start_apache plainserver plain
fetch fallback-client sdp /1m.bin
check "fallback-client-log" "curl fell back (over TCP: no SDP listener)" \
	file_has "$TMP/fallback-client.err" "over TCP: no SDP listener"
ab_run fbc-ab sdp -n 500 -c 4 "http://127.0.0.1:$PORT/64k.bin"
check "fallback-client-ab" "ab (sdp) -n 500 -c 4 against plain Apache: $(ab_says fbc-ab)" ab_ok fbc-ab 500
check "fallback-client-ab-log" "every ab connection fell back ($(grep -c "over TCP: no SDP listener" "$TMP/fbc-ab.err") of 500), none ESTABLISHED over SDP" \
	eval '[ "$(grep -c "over TCP: no SDP listener" "$TMP/fbc-ab.err")" -ge 500 ] && eq "$(log_sdp_established "$TMP/fbc-ab.err")" 0'
[ "$NFAIL" -gt 0 ] && show "$TMP/plainserver.err" "$ADIR/error.log" "$TMP/fbc-ab.out" "$TMP/fbc-ab.err"
stop_apache plainserver
check "nothing-left" "no process of this test is left" eval '! pgrep -f "$TMP" >/dev/null'
finish
