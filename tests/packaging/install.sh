#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/packaging/install.sh BUILD — libsdp installed, two ways:
#   1. `cmake --install BUILD` into a DESTDIR (prefix /usr/local): the exact
#      file list, the soname, sdp.pc, the installed sdp_run naming the
#      installed library, the sample libsdp.conf parsing without an error
#      (its commented examples too); then a C program built with
#      `pkg-config --cflags --libs sdp` against that DESTDIR (-lsdp, no
#      preload) opens explicit AF_INET_SDP sockets, connects to its own
#      listener and moves checksummed bytes both ways over shm;
#   2. the Debian package (scripts/deb.sh, in a copy of the tree; lintian
#      clean at the warning level), installed here with apt-get: its
#      dependencies, the ldconfig trigger, the same C program built against
#      the system's pkg-config and run as is, `sdp_run iperf3 -s` and
#      `sdp_run iperf3 -c` from /usr/bin, run from /, on SDP by the
#      installed sdpstat (and no kernel TCP connection on the port), under
#      the installed /etc/libsdp.conf; then apt-get remove leaves the
#      conffile alone, and apt-get purge leaves nothing.
# It needs root (apt-get) and a host where no libsdp package, and none of
# its files, is installed (it would replace and purge them): otherwise it
# skips (77), saying why.  Whatever happens, the package is purged at exit.
KNOWN_FAILURES=""
. "$(dirname "$0")/../programs/common.sh"
need_pkg iperf3 iperf3
need_pkg pkg-config pkg-config
need_pkg gcc cc
PY=/usr/bin/python3
[ -x "$PY" ] || need_pkg python3 /usr/bin/python3

skip() {
	echo "# skip: $*"
	echo "$*"
	exit 77
}
# pkg_known: dpkg has libsdp in some state (installed, its conffile kept...).
pkg_known() {
	dpkg-query -W -f='${Status}\n' libsdp 2>/dev/null |
		grep -Eq ' (installed|config-files|unpacked|half-installed|half-configured|triggers-awaited|triggers-pending)$'
}
[ "$(id -u)" = 0 ] || skip "needs root: it installs and purges the libsdp package with apt-get"
if pkg_known; then
	skip "a libsdp package is on this host ($(dpkg-query -W -f='${Version} ${Status}' libsdp)); the test would replace and purge it"
fi
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")
for f in /etc/libsdp.conf /usr/bin/sdp_run /usr/bin/sdpstat /usr/bin/sdpperf /usr/include/sdp/sdp.h \
	"/usr/lib/$MA/libsdp.so.1" "/usr/lib/$MA/pkgconfig/sdp.pc"; do
	if [ -e "$f" ] || [ -L "$f" ]; then
		skip "$f exists on this host outside any libsdp package (make install?): installing the package and purging it would take it"
	fi
done

INSTALLED=0
PURGED=0
APT=(apt-get -q -y -o DPkg::Lock::Timeout=120)
export DEBIAN_FRONTEND=noninteractive
# At exit, failure or not: the package goes (its processes first).
pkg_cleanup() {
	local p
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
	if [ "$INSTALLED" = 1 ] && [ "$PURGED" = 0 ]; then
		"${APT[@]}" purge libsdp >"$TMP/cleanup-purge.log" 2>&1 ||
			echo "# cleanup: apt-get purge libsdp failed: $(tail -n 3 "$TMP/cleanup-purge.log")"
	fi
}
trap 'pkg_cleanup; cleanup' EXIT

# ---- 1. cmake --install into a DESTDIR ----------------------------------------------
D="$TMP/destdir"
LIBDIR=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$BUILD/CMakeCache.txt")
LIBDIR=${LIBDIR:-lib}
case "$LIBDIR" in /*) ;; *) LIBDIR=/usr/local/$LIBDIR ;; esac
check destdir-install "DESTDIR=... cmake --install $BUILD --prefix /usr/local" \
	eval 'DESTDIR="$D" cmake --install "$BUILD" --prefix /usr/local >"$TMP/install.log" 2>&1 || { show "$TMP/install.log"; false; }'

{
	echo "/etc/libsdp.conf"
	echo "/usr/local/bin/sdp_run"
	echo "/usr/local/bin/sdpperf"
	echo "/usr/local/bin/sdpstat"
	echo "/usr/local/include/sdp/sdp.h"
	echo "$LIBDIR/libsdp.so -> libsdp.so.1"
	echo "$LIBDIR/libsdp.so.1 -> libsdp.so.1.0.0"
	echo "$LIBDIR/libsdp.so.1.0.0"
	echo "$LIBDIR/pkgconfig/sdp.pc"
	for m in "$SRC"/docs/man/*.[1-8]; do
		[ -e "$m" ] || continue
		echo "/usr/local/share/man/man${m##*.}/$(basename "$m")"
	done
} | sort >"$TMP/files.want"
(cd "$D" && find . ! -type d | sed 's/^\.//' | sort | while read -r f; do
	if [ -L "$D$f" ]; then echo "$f -> $(readlink "$D$f")"; else echo "$f"; fi
done) >"$TMP/files.have"
check destdir-files "the installed files are exactly: $(tr '\n' ' ' <"$TMP/files.want")" \
	eval 'diff "$TMP/files.want" "$TMP/files.have" >"$TMP/files.diff" || { sed "s/^/#   /" "$TMP/files.diff"; false; }'
LIB="$D$LIBDIR/libsdp.so.1.0.0"
check destdir-soname "libsdp.so.1.0.0 has the soname libsdp.so.1" \
	eval '[ "$(objdump -p "$LIB" 2>/dev/null | awk "/SONAME/ {print \$2}")" = libsdp.so.1 ]'
check destdir-header "sdp/sdp.h is include/sdp/sdp.h" cmp -s "$D/usr/local/include/sdp/sdp.h" "$SRC/include/sdp/sdp.h"
check destdir-conf "/etc/libsdp.conf is packaging/libsdp.conf" cmp -s "$D/etc/libsdp.conf" "$SRC/packaging/libsdp.conf"
printf '< installed_lib=""\n> installed_lib="%s"\n' "$LIBDIR/libsdp.so.1" >"$TMP/sdp_run.want"
check destdir-sdp_run "the installed sdp_run is tools/sdp_run with installed_lib=\"$LIBDIR/libsdp.so.1\"" \
	eval 'diff "$SRC/tools/sdp_run" "$D/usr/local/bin/sdp_run" | grep "^[<>]" | cmp -s - "$TMP/sdp_run.want" &&
	      sh -n "$D/usr/local/bin/sdp_run"'
VERSION=$(sed -n 's/^project(libsdp VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
export PKG_CONFIG_PATH="$D$LIBDIR/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D"
check destdir-pc "sdp.pc: version $VERSION, prefix /usr/local, -I$D/usr/local/include, -L$D$LIBDIR -lsdp" \
	eval '[ "$(pkg-config --modversion sdp)" = "$VERSION" ] &&
	      grep -qx "prefix=/usr/local" "$D$LIBDIR/pkgconfig/sdp.pc" &&
	      [ "$(echo $(pkg-config --cflags sdp))" = "-I$D/usr/local/include" ] &&
	      [ "$(echo $(pkg-config --libs sdp))" = "-L$D$LIBDIR -lsdp" ]'

# The sample policy, and its examples uncommented, under the installed
# library: no line reported, the rules that decided named.
cat >"$TMP/conn.py" <<'PY'
import socket, os
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.create_connection(l.getsockname()); s, _ = l.accept()
data = os.urandom(100000); c.sendall(data)
got = b""
while len(got) < len(data): got += s.recv(65536)
print("same" if got == data else "DIFFERENT")
PY
sed 's/^#use /use /' "$D/etc/libsdp.conf" >"$TMP/examples.conf"
for conf in "$D/etc/libsdp.conf" "$TMP/examples.conf"; do
	out=$(LIBSDP_CONFIG_FILE=$conf SDP_LOG=2 LD_PRELOAD="$D$LIBDIR/libsdp.so.1" tmo 30 "$PY" "$TMP/conn.py" 2>&1)
	check "conf-$(basename "$conf")" "$(basename "$conf") parses with no error (SDP_LOG=2): $(grep -c "rule [0-9]* ($conf" <<<"$out") decisions by its rules" \
		eval 'grep -qx same <<<"$out" && ! grep -q "^libsdp: " <<<"$out" && grep -q "connect: rule [0-9]* ($conf:" <<<"$out" || { printf "%s\n" "$out" | head -n 5 | sed "s/^/#   /"; false; }'
done

# A program that opens SDP sockets itself, linked with -lsdp by pkg-config.
cat >"$TMP/sdpapp.c" <<'C'
#include <sdp/sdp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define N 65536
static uint64_t fnv(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	while (n--)
		h = (h ^ *p++) * 1099511628211ull;
	return h;
}
static int xfer(int from, int to, const unsigned char *out, unsigned char *in)
{
	size_t got = 0;
	ssize_t r;
	if (send(from, out, N, 0) != N)
		return -1;
	while (got < N && (r = recv(to, in + got, N - got, 0)) > 0)
		got += (size_t)r;
	return got == N ? 0 : -1;
}
int main(void)
{
	static unsigned char a[N], b[N], in[N];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int l, c, s, tc = 0, ts = 0, i;
	socklen_t ol = sizeof(int);

	for (i = 0; i < N; i++) {
		a[i] = (unsigned char)(i * 7 + 3);
		b[i] = (unsigned char)(i * 13 + 5);
	}
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	l = socket(AF_INET_SDP, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&sa, &len)) {
		perror("AF_INET_SDP listener");
		return 1;
	}
	c = socket(AF_INET_SDP, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("AF_INET_SDP connect");
		return 1;
	}
	s = accept(l, NULL, NULL);
	if (s < 0) {
		perror("accept");
		return 1;
	}
	if (getsockopt(c, IPPROTO_TCP, SDP_CONN_TRANSPORT, &tc, &ol) ||
	    getsockopt(s, IPPROTO_TCP, SDP_CONN_TRANSPORT, &ts, &ol)) {
		perror("getsockopt(SDP_CONN_TRANSPORT)");
		return 1;
	}
	if (xfer(c, s, a, in) || fnv(in, N) != fnv(a, N) ||
	    xfer(s, c, b, in) || fnv(in, N) != fnv(b, N)) {
		fprintf(stderr, "the bytes differ, or the transfer failed\n");
		return 1;
	}
	printf("version %s transport %d %d checksums %016llx %016llx\n", sdp_version(),
	       tc, ts, (unsigned long long)fnv(a, N), (unsigned long long)fnv(b, N));
	close(c);
	close(s);
	close(l);
	return 0;
}
C
# app NAME: build $TMP/NAME from sdpapp.c with the current pkg-config.
app() {
	# shellcheck disable=SC2046 # pkg-config's words
	cc -O2 -Wall -o "$TMP/$1" "$TMP/sdpapp.c" $(pkg-config --cflags --libs sdp) >"$TMP/$1.cc" 2>&1 ||
		{ show "$TMP/$1.cc"; return 1; }
}
# runs_sdp NAME OUT: OUT is a run of the program over shm with this version.
runs_sdp() {
	[[ $2 =~ ^version\ $VERSION\ transport\ 1\ 1\ checksums ]] || { echo "#   $1: $2" | head -n 5; return 1; }
}
check app-build "cc sdpapp.c \$(pkg-config --cflags --libs sdp) against the DESTDIR" app sdpapp-destdir
check app-needed "the program needs libsdp.so.1 (linked, not preloaded)" \
	eval 'objdump -p "$TMP/sdpapp-destdir" | grep -q "NEEDED *libsdp\.so\.1$"'
out=$(tmo 30 env -u LD_PRELOAD LD_LIBRARY_PATH="$D$LIBDIR" "$TMP/sdpapp-destdir" 2>&1)
check app-run "explicit AF_INET_SDP sockets over shm, 64 KiB each way, checksums equal: $out" runs_sdp destdir "$out"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR

# ---- 2. the Debian package -------------------------------------------------------------
# What the package build needs (make deps-deb; nothing to do when present).
SDP_EXTRA_PKGS="build-essential debhelper dpkg-dev lintian" "$SRC/scripts/install-deps.sh" >&2 ||
	note "scripts/install-deps.sh failed: the package build may fail"
# What dpkg-buildpackage leaves where it runs: debian/ build files, its
# build directory, the results next to the tree.
build_litter() {
	ls -d "$SRC"/debian/{files,libsdp,.debhelper,debhelper-build-stamp,libsdp.substvars,tmp} \
		"$SRC"/obj-* "$SRC"/../libsdp_* "$SRC"/../libsdp-dbgsym_* 2>/dev/null
}
before=$(build_litter)
check deb-build "scripts/deb.sh builds the package in a copy of the tree, lintian-clean" \
	eval '"$SRC/scripts/deb.sh" "$TMP/deb" >"$TMP/deb.log" 2>&1 || { show "$TMP/deb.log"; false; }'
check deb-tree-clean "no build files in the source tree or next to it (debian/files, obj-*, ../libsdp_*)" \
	eval '[ "$(build_litter)" = "$before" ]'
DEB=$(ls "$TMP"/deb/libsdp_"$VERSION"_*.deb 2>/dev/null | head -n 1)
[ -n "$DEB" ] || finish
dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ { print substr($6, 2) }' | sort >"$TMP/deb.files"
# None of its files may be here already: purging would take them.
taken=$(while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done <"$TMP/deb.files")
# shellcheck disable=SC2086 # one line
[ -z "$taken" ] || skip "files of the package exist on this host outside any libsdp package: $(echo $taken)"
check deb-depends "Depends has libibverbs1 and librdmacm1 (shlibs)" \
	eval 'dpkg-deb -f "$DEB" Depends | grep -q "libibverbs1" && dpkg-deb -f "$DEB" Depends | grep -q "librdmacm1"'
check deb-conffile "/etc/libsdp.conf is its conffile" eval 'dpkg-deb -I "$DEB" conffiles | grep -qx /etc/libsdp.conf'
INSTALLED=1
check deb-install "apt-get install ./$(basename "$DEB")" \
	eval '(cd "$TMP/deb" && "${APT[@]}" install "./$(basename "$DEB")") >"$TMP/apt-install.log" 2>&1 || { show "$TMP/apt-install.log"; false; }'
check deb-installed "dpkg says libsdp $VERSION is installed" \
	eq "$(dpkg-query -W -f='${Version} ${Status}' libsdp 2>/dev/null)" "$VERSION install ok installed"
check deb-ldconfig "the dynamic linker's cache has libsdp.so.1" eval 'ldconfig -p | grep -q "libsdp\.so\.1 "'
check deb-pc "pkg-config sdp (system): $VERSION" eq "$(pkg-config --modversion sdp 2>/dev/null)" "$VERSION"
check deb-app-build "cc sdpapp.c \$(pkg-config --cflags --libs sdp) against the package" app sdpapp-deb
out=$(cd / && tmo 30 env -u LD_PRELOAD -u LD_LIBRARY_PATH "$TMP/sdpapp-deb" 2>&1)
check deb-app-run "it runs as is, found by the library path: $out" runs_sdp deb "$out"
check deb-paths "sdp_run, sdpstat, sdpperf are /usr/bin's" \
	eval '[ "$(command -v sdp_run)" = /usr/bin/sdp_run ] && [ "$(command -v sdpstat)" = /usr/bin/sdpstat ] && [ "$(command -v sdpperf)" = /usr/bin/sdpperf ]'
LIBPATH=$(grep '/libsdp\.so\.1$' "$TMP/deb.files")
out=$(cd / && sdp_run -v true 2>&1)
check deb-sdp_run-lib "sdp_run preloads the installed library by its soname path: $out" \
	eval 'grep -q "LD_PRELOAD=$LIBPATH " <<<"$out"'

# iperf3 under the installed sdp_run, from /, with the installed policy.
SDPSTAT=/usr/bin/sdpstat
PORT=$(rand_port)
(cd / && exec env -u LIBSDP_CONFIG_FILE SDP_LOG=2 sdp_run iperf3 -s -p "$PORT") >"$TMP/server.out" 2>"$TMP/server.err" </dev/null &
SRV=$!
PIDS="$PIDS $SRV"
if wait_listen "$PORT"; then
	(cd / && exec env -u LIBSDP_CONFIG_FILE sdp_run iperf3 -c 127.0.0.1 -p "$PORT" -t 2 -J) >"$TMP/client.json" 2>"$TMP/client.err" </dev/null &
	CLI=$!
	PIDS="$PIDS $CLI"
	sleep 0.5
	sample_conns "$CLI" "$PORT" 2
	wait "$CLI"
	rc=$?
	sent=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_sent"]["bytes"])' "$TMP/client.json" 2>/dev/null)
	check iperf3-run "iperf3 -c: exit 0, ${sent:-?} bytes sent" eval '[ $rc -eq 0 ] && ge "${sent:-0}" 1000000 || { show "$TMP/client.err"; false; }'
	check iperf3-sdp "the installed sdpstat saw >= 2 SDP connections moving data in the client (saw $S_SDP)" ge "$S_SDP" 2
	check iperf3-notcp "no kernel TCP connection on port $PORT while it ran (ss saw $S_TCP)" eq "$S_TCP" 0
	check iperf3-policy "the server's sockets were decided by /etc/libsdp.conf, which had no error" \
		eval 'grep -q "listen: rule [0-9]* (/etc/libsdp.conf:[0-9]*) both" "$TMP/server.err" && ! grep -q "^libsdp: " "$TMP/server.err" || { show "$TMP/server.err"; false; }'
fi
stop "$SRV"

# remove: every file goes but the conffile; purge: that too.
check deb-remove "apt-get remove libsdp" \
	eval '"${APT[@]}" remove libsdp >"$TMP/apt-remove.log" 2>&1 || { show "$TMP/apt-remove.log"; false; }'
left=$(while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done <"$TMP/deb.files")
check remove-left "after remove only /etc/libsdp.conf is left (left: $(echo ${left:-nothing}))" eq "$left" /etc/libsdp.conf
check remove-state "dpkg: config-files" eq "$(dpkg-query -W -f='${Status}' libsdp 2>/dev/null)" "deinstall ok config-files"
check deb-purge "apt-get purge libsdp" \
	eval '"${APT[@]}" purge libsdp >"$TMP/apt-purge.log" 2>&1 || { show "$TMP/apt-purge.log"; false; }'
PURGED=1
left=$(while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done <"$TMP/deb.files")
check purge-left "after purge no file of the package is left (left: $(echo ${left:-nothing}))" test -z "$left"
check purge-dirs "nor its directories (/usr/include/sdp, /usr/share/doc/libsdp)" \
	eval '[ ! -e /usr/include/sdp ] && [ ! -e /usr/share/doc/libsdp ]'
check purge-state "dpkg has no libsdp in any state" eval '! pkg_known'
check purge-ldconfig "the dynamic linker's cache has no libsdp.so.1" eval '! ldconfig -p | grep -q "libsdp\.so\.1 "'
finish
