#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# vsftpd (Debian package vsftpd) under sdp_run, curl under sdp_run as the
# client: anonymous downloads, uploads and a listing, passive mode, sha256
# on every file.  vsftpd's process model is the test: the listener forks
# each session with syscall(SYS_clone, CLONE_NEWIPC|SIGCHLD), the session
# forks its pre-login and post-login children with CLONE_NEWNET, the
# pre-login child drops its descriptor limit to 0 before it talks to the
# client, and the privileged session process accepts each data connection
# and passes it to the post-login child over a unix socket (SCM_RIGHTS).
# Both ends log at SDP_LOG=3 (but for the listing's curl), the daemon with
# the control connection as its stderr: a log line there would break the
# FTP replies.  Evidence: SDP_LOG
# transitions in the client, no fallback.  Needs root (chroot, setuid).
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
if [ "$(id -u)" -ne 0 ]; then
	echo "ok 1 - # SKIP vsftpd needs root"
	exit 0
fi
need_pkg vsftpd vsftpd
need_pkg curl curl
SIZE=$((32 * 1024 * 1024))
# vsftpd refuses a chroot it can write to: the root is root's, 0755.
mkdir -p "$TMP/root/pub" "$TMP/empty"
chmod 755 "$TMP" "$TMP/root" "$TMP/empty"
chmod 777 "$TMP/root/pub"
head -c "$SIZE" /dev/urandom >"$TMP/root/pub/down.bin"
head -c "$SIZE" /dev/urandom >"$TMP/up.bin"
port=$(rand_port)
cat >"$TMP/vsftpd.conf" <<CONF
listen=YES
listen_ipv6=NO
listen_address=127.0.0.1
listen_port=$port
background=NO
anonymous_enable=YES
anon_root=$TMP/root
anon_upload_enable=YES
write_enable=YES
no_anon_password=YES
local_enable=NO
pasv_enable=YES
pasv_address=127.0.0.1
secure_chroot_dir=$TMP/empty
xferlog_enable=NO
seccomp_sandbox=NO
anon_umask=022
CONF

bg daemon "$SDP_RUN" -d vsftpd "$TMP/vsftpd.conf"
srv=$BG_PID
wait_listen "$port" || true
url="ftp://127.0.0.1:$port/pub"
want_down=$(sha256sum <"$TMP/root/pub/down.bin" | cut -d' ' -f1)
want_up=$(sha256sum <"$TMP/up.bin" | cut -d' ' -f1)

for i in 1 2 3; do
	tmo 60 "$SDP_RUN" -d curl -sS "$url/down.bin" -o "$TMP/got$i.bin" 2>"$TMP/down$i.err"
	rc=$?
	got=$(sha256sum <"$TMP/got$i.bin" 2>/dev/null | cut -d' ' -f1)
	check "download-$i" "RETR of 32 MiB: exit $rc, sha256 ${got:0:16}.." eq "$got" "$want_down"
done
for i in 1 2; do
	tmo 60 "$SDP_RUN" -d curl -sS -T "$TMP/up.bin" "$url/up$i.bin" 2>"$TMP/up$i.err"
	rc=$?
	got=$(sha256sum <"$TMP/root/pub/up$i.bin" 2>/dev/null | cut -d' ' -f1)
	check "upload-$i" "STOR of 32 MiB: exit $rc, sha256 ${got:0:16}.." eq "$got" "$want_up"
done
# Without -d here: curl's own lines, written by its progress thread, may
# land between curl's "< " and the reply it prefixes.
tmo 60 "$SDP_RUN" curl -v "$url/" >"$TMP/list.out" 2>"$TMP/list.err"
check listing "LIST shows down.bin, up1.bin and up2.bin" \
	eval 'file_has "$TMP/list.out" down.bin && file_has "$TMP/list.out" up1.bin && file_has "$TMP/list.out" up2.bin'
# curl -v prints every reply line it read ("< ..."): none is the library's
# (vsftpd's, logging with SDP_LOG=3).
check replies-clean "the control connection carried FTP replies only, no libsdp log line" \
	eval 'file_has "$TMP/list.err" "^< 226" && file_lacks "$TMP/list.err" "^< libsdp"'
LOG="$TMP/down1.err"
check client-sdp "the client logged its control and data connections over SDP, no fallback" \
	eval 'ge "$(log_sdp_established "$LOG")" 2 && eq "$(log_tcp_fallbacks "$LOG")" 0'
[ "$NFAIL" -gt 0 ] && show "$TMP/daemon.err" "$TMP/down1.err" "$TMP/up1.err" "$TMP/list.err"
stop "$srv"
finish
