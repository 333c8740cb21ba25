#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scripts/deb.sh OUTDIR — build the Debian binary package libsdp_VERSION_ARCH.deb
# into OUTDIR (`make deb`), then check it with lintian: any W: or E: line
# fails.  dpkg-buildpackage works in a temporary copy of the source tree
# (the files git tracks or would track, or without git everything but the
# build directories), since it writes into debian/ and its results next to
# the tree: the tree itself is left as it was.  Needs build-essential,
# debhelper, dpkg-dev and lintian (`make deb` installs them).
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
SRC=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)

for c in dpkg-buildpackage dh lintian; do
	command -v "$c" >/dev/null 2>&1 || {
		echo "deb: $c not found (make deb installs build-essential, debhelper, dpkg-dev and lintian)" >&2
		exit 1
	}
done

# The package version is the project's: debian/changelog and CMakeLists.txt
# must agree.
deb_version=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
cmake_version=$(sed -n 's/^project(libsdp VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
if [ "$deb_version" != "$cmake_version" ]; then
	echo "deb: debian/changelog says $deb_version, CMakeLists.txt $cmake_version" >&2
	exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/libsdp-deb.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/libsdp-$deb_version"
TREE="$WORK/libsdp-$deb_version"
if git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git -C "$SRC" ls-files -z -c -o --exclude-standard |
		(cd "$SRC" && while IFS= read -r -d '' f; do
			if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
		done) |
		(cd "$SRC" && tar --null -T - -cf -) | tar -C "$TREE" -xf -
else
	(cd "$SRC" && tar --exclude='./build*' --exclude='./obj-*' --exclude='./.vm-run.*' -cf - .) |
		tar -C "$TREE" -xf -
fi

echo "deb: building in $TREE"
if ! (cd "$TREE" && dpkg-buildpackage -b -us -uc -jauto) >"$WORK/build.log" 2>&1; then
	tail -n 40 "$WORK/build.log" >&2
	echo "deb: dpkg-buildpackage failed (the last 40 lines above)" >&2
	exit 1
fi
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb="libsdp_${deb_version}_${arch}.deb"
cp "$WORK/$deb" "$OUT/"
echo "deb: $OUT/$deb"

# Clean at the warning level: no W: or E: line (overridden tags,
# debian/libsdp.lintian-overrides, print none).
rc=0
lintian --fail-on error,warning "$OUT/$deb" >"$WORK/lintian.log" 2>&1 || rc=$?
if [ $rc -ne 0 ] || grep -qE '^[WE]: ' "$WORK/lintian.log"; then
	grep -v 'running with root privileges' "$WORK/lintian.log" >&2
	echo "deb: lintian is not clean at the warning level (exit status $rc, above)" >&2
	exit 1
fi
echo "deb: lintian: no warnings, no errors"
