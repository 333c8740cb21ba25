#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# OpenSSH (Debian openssh-server, openssh-client): sshd with its default
# process model under sdp_run -- the listener accepts, forks, and the child
# re-execs sshd with the connection on stdin/stdout -- and scp under
# sdp_run copying a 200 MB file up and down, sha256 both.  The re-exec'd
# sshd gets the connection relayed by the listener (engine/relay.h), and
# must see the client's address (AllowUsers root@127.0.0.1, and the log).
# Then a plain scp against the same sshd (fallback-server).  Then sshd -r
# (no re-exec): the per-connection child forks the preauth child, which
# enters OpenSSH's seccomp sandbox and talks to the client there; the
# connection is relayed in place for it (socket/sandbox.c), and the
# session after it goes on in the monitor's family on the same descriptor.
# Evidence: SDP_LOG=3 ESTABLISHED and no fallback in scp's log; sdpstat on
# the sshd listener during the copy: an SDP connection, no kernel TCP one on
# the port.
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg openssh-server sshd
need_pkg openssh-client ssh scp
SSHD=$(command -v sshd)
if [ "$(id -u)" -ne 0 ]; then
	echo "not ok - sshd needs root (privilege separation)"
	exit 1
fi
mkdir -p /run/sshd	# privilege separation directory
SIZE=$((200 * 1024 * 1024))
head -c "$SIZE" /dev/urandom >"$TMP/up.bin"
head -c "$SIZE" /dev/urandom >"$TMP/down.bin"
ssh-keygen -q -t ed25519 -N '' -f "$TMP/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$TMP/userkey"
cp "$TMP/userkey.pub" "$TMP/authorized_keys"
port=$(rand_port)
cat >"$TMP/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $TMP/hostkey
AuthorizedKeysFile $TMP/authorized_keys
StrictModes no
PidFile $TMP/sshd.pid
AllowUsers root@127.0.0.1
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel VERBOSE
EOF
SCP_OPTS=(-i "$TMP/userkey" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
	-o BatchMode=yes -P "$port")

bg sshd env SDP_LOG=3 "$SDP_RUN" "$SSHD" -D -e -f "$TMP/sshd_config"
srv=$BG_PID
wait_listen "$port" || show "$TMP/sshd.err"

# copy NAME WRAP(sdp|plain) SRC DST WANT-FILE GOT-FILE: one scp, checked.
copy() {
	local name=$1 wrap=$2 src=$3 dst=$4 want got rc
	local -a pre=()
	[ "$wrap" = sdp ] && pre=(env SDP_LOG=3 "$SDP_RUN")
	run_limited 120 "$TMP/$name.out" "$TMP/$name.err" "${pre[@]}" scp "${SCP_OPTS[@]}" "$src" "$dst"
	local cp=$BG_PID
	sample_conns "$srv" "$port" 120 "$cp"
	wait "$cp"
	rc=$?
	want=$(sha256sum <"$5" | cut -d' ' -f1)
	got=$(sha256sum <"$6" 2>/dev/null | cut -d' ' -f1)
	check "$name" "scp ($wrap) $name, 200 MB: exit $rc, sha256 ${got:0:16}.." eq "$got" "$want"
}

copy up sdp "$TMP/up.bin" "root@127.0.0.1:$TMP/got-up.bin" "$TMP/up.bin" "$TMP/got-up.bin"
check up-sdp "scp's connection was SDP (SDP_LOG: ESTABLISHED, no fallback)" \
	eval 'ge "$(log_sdp_established "$TMP/up.err")" 1 && eq "$(log_tcp_fallbacks "$TMP/up.err")" 0'
check up-server "sshd's listener process held an SDP connection, no kernel TCP one on the port (sdp $S_SDP, tcp $S_TCP)" \
	eval 'ge "$S_SDP" 1 && eq "$S_TCP" 0'
check up-addr "the re-exec'd sshd saw the client's address (AllowUsers root@127.0.0.1)" \
	file_has "$TMP/sshd.err" "Accepted publickey for root from 127.0.0.1 port"
copy down sdp "root@127.0.0.1:$TMP/down.bin" "$TMP/got-down.bin" "$TMP/down.bin" "$TMP/got-down.bin"
check down-sdp "scp's connection was SDP (SDP_LOG: ESTABLISHED, no fallback)" \
	eval 'ge "$(log_sdp_established "$TMP/down.err")" 1 && eq "$(log_tcp_fallbacks "$TMP/down.err")" 0'
rm -f "$TMP/got-up.bin" "$TMP/got-down.bin"

# fallback-server: a plain scp reaches the same sshd over TCP.
copy plain plain "$TMP/up.bin" "root@127.0.0.1:$TMP/got-plain.bin" "$TMP/up.bin" "$TMP/got-plain.bin"
check plain-tcp "the plain scp's connection was kernel TCP (tcp $S_TCP)" ge "$S_TCP" 1
[ "$NFAIL" -gt 0 ] && show "$TMP/sshd.err" "$TMP/up.err" "$TMP/down.err" "$TMP/plain.err"
stop "$srv"

# sshd -r: the preauth child works inside its seccomp sandbox.
port=$(rand_port)
sed "s/^Port .*/Port $port/; s|^PidFile .*|PidFile $TMP/sshd-r.pid|" \
	"$TMP/sshd_config" >"$TMP/sshd_config_r"
SCP_OPTS=(-i "$TMP/userkey" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
	-o BatchMode=yes -P "$port")
bg sshd-r env SDP_LOG=3 "$SDP_RUN" "$SSHD" -r -D -e -f "$TMP/sshd_config_r"
srv=$BG_PID
wait_listen "$port" || show "$TMP/sshd-r.err"
head -c $((64 * 1024 * 1024)) "$TMP/up.bin" >"$TMP/up64.bin"
copy r-up sdp "$TMP/up64.bin" "root@127.0.0.1:$TMP/got-r.bin" "$TMP/up64.bin" "$TMP/got-r.bin"
check r-up-sdp "scp's connection to sshd -r was SDP (SDP_LOG, no kernel TCP one on the port: tcp $S_TCP), relayed in place for the sandbox (sshd's SDP_LOG)" \
	eval 'ge "$(log_sdp_established "$TMP/r-up.err")" 1 && eq "$(log_tcp_fallbacks "$TMP/r-up.err")" 0 && eq "$S_TCP" 0 && file_has "$TMP/sshd-r.err" "in place (sandbox): started"'
copy r-down sdp "root@127.0.0.1:$TMP/got-r.bin" "$TMP/got-r-down.bin" "$TMP/up64.bin" "$TMP/got-r-down.bin"
check r-sandbox "the preauth child lived through its seccomp sandbox (no 'terminated by signal' in sshd's log)" \
	eval '! grep -q "preauth child terminated by signal" "$TMP/sshd-r.err" && file_has "$TMP/sshd-r.err" "Accepted publickey for root from 127.0.0.1 port"'
[ "$NFAIL" -gt 0 ] && show "$TMP/sshd-r.err" "$TMP/r-up.err"
stop "$srv"
finish
