#!/bin/sh
# Install the Debian packages libsdp needs to build and test, if missing.
# Runs apt-get as root (directly, or through sudo when available).
set -eu
pkgs="gcc make cmake ninja-build pkg-config libc6-dev python3 procps iproute2 util-linux rdma-core libibverbs-dev librdmacm-dev ibverbs-providers iperf3 iperf sockperf redis-server redis-tools nginx wrk curl socat netcat-openbsd strace memcached libmemcached-tools haproxy apache2 apache2-utils vsftpd postgresql postgresql-client"
[ -n "${SDP_EXTRA_PKGS:-}" ] && pkgs="$pkgs $SDP_EXTRA_PKGS"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing"
if [ "$(id -u)" -eq 0 ]; then
	SUDO=""
elif command -v sudo >/dev/null 2>&1; then
	SUDO="sudo"
else
	echo "install-deps: need root to install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# A server package (openssh-server for tests/programs/sshd.sh) must not
# start its service on this machine: the tests start their own instances.
policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
	policy=/usr/sbin/policy-rc.d
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
	$SUDO chmod 755 "$policy"
	trap '$SUDO rm -f "$policy"' EXIT
fi
$SUDO apt-get update -q >/dev/null || echo "install-deps: apt-get update failed, trying the cached lists" >&2
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null
