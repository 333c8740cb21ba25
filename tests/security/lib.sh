# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# tests/security/lib.sh — sourced by the security tests (tests/security/
# NAME.sh BUILD_DIR).  Two unprivileged users: sdpsec-a, the victim, and
# sdpsec-b, hostile; created here if missing (system users, no home, no
# login shell).  What they run is copied into a directory they can read;
# `as USER CMD...` runs CMD as that user.  Checks and cleanup come from
# tests/programs/common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/../programs/common.sh"
if [ "$(id -u)" != 0 ]; then
	echo "not ok - needs root: it creates two users (useradd) and runs as them"
	exit 1
fi
need_pkg util-linux runuser
need_pkg passwd useradd
need_pkg python3 python3

for u in sdpsec-a sdpsec-b; do
	id -u "$u" >/dev/null 2>&1 ||
		useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$u" ||
		{ echo "not ok - useradd $u failed"; exit 1; }
done
chmod 755 "$TMP"
mkdir -p "$TMP/lib" "$TMP/bin" "$TMP/a" "$TMP/b"
cp "$BUILD/lib/libsdp.so" "$TMP/lib/"
cp "$BUILD/bin/sdpstat" "$TMP/bin/"
cp "$SRC"/tests/security/*.py "$TMP/"
cp "$TMP/default.conf" "$TMP/policy.conf"
chmod -R a+rX "$TMP/lib" "$TMP/bin" "$TMP"/*.py "$TMP/policy.conf"
chown sdpsec-a "$TMP/a"
chown sdpsec-b "$TMP/b"
PY=(/usr/bin/python3)
# Under the libsdp preload, "both" everywhere (the default policy).
PRE=(env LD_PRELOAD="$TMP/lib/libsdp.so" LIBSDP_CONFIG_FILE="$TMP/policy.conf")
as() { local u=$1; shift; runuser -u "$u" -- "$@"; }
# runuser does not pass a signal on to its command: at exit, everything the
# two users run goes (they exist for these tests only).
trap 'pkill -KILL -u sdpsec-a,sdpsec-b 2>/dev/null; cleanup' EXIT

# wait_line FILE TEXT: until FILE has a line containing TEXT (10 s x MULT).
wait_line() {
	local i
	for i in $(seq 1 $((200 * MULT))); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# cpu_ticks PID: user + system time of PID so far, in clock ticks.
cpu_ticks() {
	local f
	read -r -a f <"/proc/$1/stat" || return 1
	# Fields 14 and 15 (utime, stime); the command name (field 2) has no
	# spaces here (python3).
	echo $((f[13] + f[14]))
}
