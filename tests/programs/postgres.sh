#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# PostgreSQL (Debian postgresql) under sdp_run: a postmaster that forks a
# backend per connection, so every connection is accepted by one process
# and moved to another (docs/DESIGN.md, "fork()").  A private cluster in
# $TMP (initdb, trust authentication, fsync off, no unix socket), run as
# the postgres user when the test runs as root (PostgreSQL refuses root).
# psql copies a 1 MiB value in (\copy, from the client) and reads it back,
# both compared by sha256 (the server's md5 of it too); pgbench -C -S (a
# connection per transaction, as a web application opening one per
# request) runs for 3 s with no failed transaction.  Then fallback both
# ways: plain psql against the sdp_run server, psql under sdp_run against
# a plain server.
# Evidence: SDP_LOG=3 transitions in psql's and pgbench's logs
# (ESTABLISHED, no "over TCP") and in the server's (the backends' stderr).
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg postgresql-client psql pgbench
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ ! -x "$PGBIN/postgres" ]; then
	SDP_EXTRA_PKGS=postgresql "$SRC/scripts/install-deps.sh" >&2 || true
	PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
fi
if [ ! -x "$PGBIN/postgres" ]; then
	echo "not ok - postgres not installed (Debian package postgresql; run make deps)"
	NFAIL=$((NFAIL + 1))
	exit 1
fi

# The server runs as postgres: it reads its own copy of the library and
# of sdp_run, whatever the permissions on the build tree.
AS=()
if [ "$(id -u)" -eq 0 ]; then
	id postgres >/dev/null 2>&1 || useradd -r -M postgres
	AS=(runuser -u postgres --)
fi
chmod a+rx "$TMP"
PG=$TMP/pg
mkdir -p "$PG/lib" "$PG/bin"
cp -L "$BUILD/lib/libsdp.so" "$PG/lib/libsdp.so"
cp "$SDP_RUN" "$PG/bin/sdp_run"
chmod -R a+rX "$PG"
[ ${#AS[@]} -gt 0 ] && chown postgres "$PG"
tmo 60 "${AS[@]}" "$PGBIN/initdb" -D "$PG/data" -A trust -U postgres >"$TMP/initdb.out" 2>&1
check "initdb" "initdb made a cluster" file_has "$TMP/initdb.out" "Success"

start_pg() { # NAME WRAP(sdp|plain): sets PORT, SRV
	local name=$1 wrap=$2
	local -a w=()
	PORT=$(rand_port)
	[ "$wrap" = sdp ] && w=(env SDP_RUN_LIBRARY="$PG/lib/libsdp.so" bash "$PG/bin/sdp_run" -d)
	bg "$name" "${AS[@]}" "${w[@]}" "$PGBIN/postgres" -D "$PG/data" -p "$PORT" \
		-c listen_addresses=127.0.0.1 -c unix_socket_directories= \
		-c fsync=off -c max_connections=40
	SRV=$BG_PID
	wait_listen "$PORT" || show "$TMP/$name.out" "$TMP/$name.err"
}

stop_pg() { # the server of SRV, with its backends
	tmo 20 "${AS[@]}" "$PGBIN/pg_ctl" -D "$PG/data" stop -m fast -w >/dev/null 2>&1
	stop "$SRV"
}
pg_cleanup() {
	"${AS[@]}" "$PGBIN/pg_ctl" -D "$PG/data" stop -m immediate -w >/dev/null 2>&1
	cleanup
}
trap pg_cleanup EXIT

# sql NAME WRAP ARGS...: psql with a timeout; output in $TMP/NAME.out
sql() {
	local name=$1 wrap=$2
	local -a w=()
	shift 2
	[ "$wrap" = sdp ] && w=("$SDP_RUN" -d)
	tmo 30 "${w[@]}" psql -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres \
		-At "$@" postgres >"$TMP/$name.out" 2>"$TMP/$name.err"
}

# ---- sdp <-> sdp ---------------------------------------------------------------
start_pg server sdp
head -c 786432 /dev/urandom | base64 -w 0 >"$TMP/value"	# 1 MiB of text
echo >>"$TMP/value"
WANT=$(tr -d '\n' <"$TMP/value" | sha256sum | cut -d' ' -f1)
WANT_MD5=$(tr -d '\n' <"$TMP/value" | md5sum | cut -d' ' -f1)
sql create sdp -c "CREATE TABLE t (v text)"
sql copyin sdp -c "\\copy t FROM '$TMP/value'"
check "copy-in" "psql \\copy of a 1 MiB value: COPY 1" file_has "$TMP/copyin.out" "COPY 1"
sql md5 sdp -c "SELECT md5(v) FROM t"
check "server-md5" "the server's md5 of it matches ($(cut -c1-16 "$TMP/md5.out")..)" \
	eq "$(cat "$TMP/md5.out")" "$WANT_MD5"
sql readback sdp -c "SELECT v FROM t"
GOT=$(tr -d '\n' <"$TMP/readback.out" | sha256sum | cut -d' ' -f1)
check "read-back" "read back: sha256 ${GOT:0:16}.. (want ${WANT:0:16}..)" eq "$GOT" "$WANT"
check "psql-sdp" "psql's connections were SDP (SDP_LOG: ESTABLISHED, no fallback)" \
	eval 'ge "$(log_sdp_established "$TMP/readback.err")" 1 && eq "$(log_tcp_fallbacks "$TMP/readback.err")" 0'

tmo 60 pgbench -h 127.0.0.1 -p "$PORT" -U postgres -i -q postgres >"$TMP/pgbench-init.out" 2>&1
run_limited 30 "$TMP/bench.out" "$TMP/bench.err" env SDP_LOG=3 "$SDP_RUN" pgbench -h 127.0.0.1 \
	-p "$PORT" -U postgres -C -S -c 4 -j 2 -T 3 postgres
wait "$BG_PID"
TX=$(grep -o 'number of transactions actually processed: [0-9]*' "$TMP/bench.out" | grep -o '[0-9]*$')
check "pgbench" "pgbench -C -S: ${TX:-no} transactions, a connection each" ge "${TX:-x}" 20
check "pgbench-failed" "pgbench: no failed transaction" \
	file_has "$TMP/bench.out" "number of failed transactions: 0 "
check "pgbench-sdp" "pgbench's connections were SDP ($(log_sdp_established "$TMP/bench.err") established, no fallback)" \
	eval 'ge "$(log_sdp_established "$TMP/bench.err")" 20 && eq "$(log_tcp_fallbacks "$TMP/bench.err")" 0'
check "backends-sdp" "the backends' log shows SDP connections ($(log_sdp_established "$TMP/server.err"))" \
	ge "$(log_sdp_established "$TMP/server.err")" 20
sql alive sdp -c "SELECT count(*) FROM pgbench_accounts"
check "server-alive" "the server still answers" file_has "$TMP/alive.out" "^100000$"
[ "$NFAIL" -gt 0 ] && show "$TMP/server.err" "$TMP/bench.out" "$TMP/bench.err"
stop_pg

# ---- fallback: the server under sdp_run, plain psql -----------------------------
start_pg sdpserver sdp
sql plaincli plain -c "SELECT 6 * 7"
check "plaincli" "plain psql against the sdp_run server: 42" file_has "$TMP/plaincli.out" "^42$"
check "plaincli-tcp" "the server has no SDP connection" \
	eq "$(log_sdp_established "$TMP/sdpserver.err")" 0
stop_pg

# ---- fallback: a plain server, psql under sdp_run -------------------------------
start_pg plainserver plain
sql sdpcli sdp -c "SELECT 6 * 7"
check "sdpcli" "psql under sdp_run against a plain server: 42" file_has "$TMP/sdpcli.out" "^42$"
check "sdpcli-fallback" "psql fell back to TCP (SDP_LOG: over TCP: no SDP listener)" \
	file_has "$TMP/sdpcli.err" "over TCP: no SDP listener"
[ "$NFAIL" -gt 0 ] && show "$TMP/sdpcli.err"
stop_pg
finish
