#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/security/exec-setuid.sh BUILD — a root SDP server must never write
# into a setuid image that its peer exec'd.  sdpsec-b connects (claiming it
# can RDMA, as a hostile library would), advertises a 4 MiB recv buffer
# (Write ZCopy), keeps the connection in a forked child and execs a setuid
# root copy of the same non-PIE program, whose buffer is at the same
# address.  The target's buffer must stay intact, and the server's bytes
# go by copy: a root process makes its cross-memory copies without
# CAP_SYS_PTRACE, so another user's process is out of its reach.  Second
# case: the same root server and an ordinary sdpsec-a client exchange
# checksummed bytes both ways (by copy).  exec-setuid.c has the programs.
. "$(dirname "$0")/lib.sh"
need_pkg gcc cc
ZC=(SDP_ZCOPY_THRESH=65536)
# The server does not advertise its own recv buffers: the client's bytes
# come back by Read ZCopy (the server RDMA-reads them), never by the
# client's RDMA WRITE into root's memory, which the kernel refuses.
SRVZC=("${ZC[@]}" SDP_ZCOPY_WRITE=0)
PROG=$TMP/exec-setuid
cc -std=c11 -O2 -no-pie -rdynamic -pthread -I"$SRC/include" \
	-o "$PROG" "$SRC/tests/security/exec-setuid.c" ||
	{ check build "the test programs build" false; finish; }
chmod a+rx "$PROG"
# A directory that honours the setuid bit ($TMP may be on a nosuid mount).
SUID=""
for d in /var/tmp /root /usr/local/libexec; do
	[ -d "$d" ] || continue
	SUID=$(mktemp -d "$d/sdp-exec-setuid.XXXXXX") || continue
	chmod 755 "$SUID"
	cp "$PROG" "$SUID/target"
	chown root:root "$SUID/target"
	chmod 4755 "$SUID/target"
	[ "$(as sdpsec-b "$SUID/target" euid 2>/dev/null)" = 0 ] && break
	rm -rf "$SUID"
	SUID=""
done
trap 'pkill -KILL -u sdpsec-a,sdpsec-b 2>/dev/null; [ -n "$SUID" ] && rm -rf "$SUID"; cleanup' EXIT
check setuid "a setuid-root program runs with euid 0 somewhere (/var/tmp, /root)" test -n "$SUID" ||
	finish
note "setuid target: $SUID/target"

# server N BYTES: the root server of case N, sending BYTES once $TMP/goN
# exists; its pid in SRV, its port in PORT.
server() {
	run_limited 40 "$TMP/server$1.out" "$TMP/server$1.err" \
		"${PRE[@]}" "${SRVZC[@]}" "$PROG" server "$TMP/port$1" "$TMP/go$1" "$2"
	SRV=$BG_PID
	wait_line "$TMP/port$1" "" ||
		{ check "start$1" "the server starts" false; show "$TMP/server$1.err"; finish; }
	read -r PORT _ <"$TMP/port$1"
}

# ---- 1: the peer execs a setuid program ----
server 1 1048576
SRV1=$SRV
run_limited 40 "$TMP/hostile.out" "$TMP/hostile.err" \
	as sdpsec-b "${PRE[@]}" "${ZC[@]}" "$PROG" hostile "$PORT" "$SUID/target" "$TMP/check1"
HOST=$BG_PID
wait_line "$TMP/hostile.out" "target: ready"
check target-root "the peer exec'd the setuid program (euid 0, same buffer address)" \
	grep -q "target: ready uid [0-9]* euid 0 " "$TMP/hostile.out" ||
	show "$TMP/hostile.out" "$TMP/hostile.err"
touch "$TMP/go1"
wait_line "$TMP/server1.out" "server: \(sent\|send failed\)"
wait_line "$TMP/server1.out" "server: rdma"
touch "$TMP/check1"
wait_line "$TMP/hostile.out" "target: buf"
note "$(grep -h '^server\|^target\|^hostile' "$TMP/server1.out" "$TMP/hostile.out" | tr '\n' ';')"
check target-intact "the setuid image's memory is not written by the root server" \
	grep -qx "target: buf intact" "$TMP/hostile.out"
wait "$SRV1"
check by-copy "the server's bytes went by copy, not into the peer's memory" \
	grep -qx "server: rdma 0 written 0 read 0" "$TMP/server1.out"
check no-hang "the server ends" file_lacks "$TMP/server1.err" TIMEOUT
wait "$HOST"
check no-hang-target "the target ends" file_lacks "$TMP/hostile.err" TIMEOUT

# ---- 2: an ordinary cross-user exchange, both ways ----
touch "$TMP/go2"
server 2 3000000
SRV2=$SRV
tmo 30 runuser -u sdpsec-a -- "${PRE[@]}" "${ZC[@]}" "$PROG" client "$PORT" 3000000 \
	>"$TMP/client2.out" 2>"$TMP/client2.err"
wait "$SRV2"
note "$(cat "$TMP/server2.out" "$TMP/client2.out" | tr '\n' ';')"
sent=$(sed -n 's/^server: sent 3000000 sum //p' "$TMP/server2.out")
check legit-write "sdpsec-a receives the root server's 3000000 bytes intact" \
	grep -qx "client: received 3000000 sum ${sent:-none}" "$TMP/client2.out" ||
	show "$TMP/server2.err" "$TMP/client2.err"
check legit-read "the root server receives them back intact" \
	grep -qx "server: received 3000000 sum ${sent:-none}" "$TMP/server2.out"
check legit-by-copy "both ways went by copy: root reaches no other user's memory" \
	grep -qx "server: rdma 0 written 0 read 0" "$TMP/server2.out"
finish
