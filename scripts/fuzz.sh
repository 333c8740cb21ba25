#!/bin/sh
# Build the libFuzzer targets (tests/fuzz/fuzz_*.c) with clang into
# build-fuzz/ and run each for SDP_FUZZ_SECONDS on a scratch copy of its
# seed corpus.  Exit status is non-zero if any target finds a crash, leak or
# timeout; the reproducer is left in build-fuzz/artifacts/.
#
#   scripts/fuzz.sh                     all targets, 60 s each
#   SDP_FUZZ_SECONDS=300 scripts/fuzz.sh fuzz_msg
#   SDP_FUZZ_MERGE=1 scripts/fuzz.sh    also merge new coverage back into
#                                       tests/fuzz/corpus/<target> (minimised)
#
# A crash reproduces without libFuzzer through the replay build:
#   build/fuzz/fuzz_msg build-fuzz/artifacts/fuzz_msg-crash-...
set -eu

cd "$(dirname "$0")/.."
SECS=${SDP_FUZZ_SECONDS:-60}
BUILD=${SDP_FUZZ_BUILD:-build-fuzz}
PKGS="clang-14 libfuzzer-14-dev libclang-rt-14-dev"

find_cc() {
	for c in "${CC:-}" clang-14 clang; do
		[ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && {
			echo "$c"
			return 0
		}
	done
	return 1
}

# Does this compiler link a libFuzzer target?
cc_has_libfuzzer() {
	tmp=$(mktemp -d)
	printf '%s\n' '#include <stdint.h>' '#include <stddef.h>' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)' \
		'{ (void)d; (void)n; return 0; }' >"$tmp/t.c"
	"$1" -fsanitize=fuzzer,address,undefined "$tmp/t.c" -o "$tmp/t" \
		>/dev/null 2>&1
	rc=$?
	rm -rf "$tmp"
	return $rc
}

# apt may be busy (another install running): retry for up to ~10 minutes.
install_clang() {
	echo "fuzz: installing $PKGS"
	i=0
	until SDP_EXTRA_PKGS="$PKGS" scripts/install-deps.sh; do
		i=$((i + 1))
		[ $i -ge 60 ] && {
			echo "fuzz: could not install $PKGS" >&2
			exit 1
		}
		echo "fuzz: install failed (apt locked?), retrying in 10 s" >&2
		sleep 10
	done
}

CC_FUZZ=$(find_cc) || { install_clang; CC_FUZZ=$(find_cc); }
cc_has_libfuzzer "$CC_FUZZ" || {
	install_clang
	CC_FUZZ=$(find_cc)
	cc_has_libfuzzer "$CC_FUZZ" || {
		echo "fuzz: $CC_FUZZ cannot link -fsanitize=fuzzer" >&2
		exit 1
	}
}
echo "fuzz: compiler $CC_FUZZ, ${SECS}s per target"

# -fsanitize=fuzzer-no-link for the whole build: the library code under test
# lives in sdp_core, which must carry coverage instrumentation too, not only
# the fuzz_*.c harness that CMake compiles with -fsanitize=fuzzer.
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
GEN=""
command -v ninja >/dev/null 2>&1 && GEN="-G Ninja"
[ -f "$BUILD/CMakeCache.txt" ] && GEN=""
if [ $# -gt 0 ]; then
	targets="$*"
else
	targets=$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c; done)
fi

# Preferred: the CMake build (-DSDP_LIBFUZZER=ON).  If the tree does not
# configure or build as a whole (work in progress elsewhere), fall back to
# compiling each harness directly with SDP_FUZZ_SOURCES (default: the wire
# codecs, which is all the current targets need).
mkdir -p "$BUILD"
# shellcheck disable=SC2086
if CC="$CC_FUZZ" cmake -S . -B "$BUILD" $GEN -DSDP_LIBFUZZER=ON \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="$SAN" \
	>"$BUILD/cmake.log" 2>&1 &&
	cmake --build "$BUILD" --target $targets >>"$BUILD/cmake.log" 2>&1; then
	rm -f "$BUILD/cmake.log"
else
	echo "fuzz: CMake build failed (see $BUILD/cmake.log); building directly" >&2
	mkdir -p "$BUILD/fuzz"
	for t in $targets; do
		# shellcheck disable=SC2086
		"$CC_FUZZ" -std=gnu11 -O1 -g -Wall -Wextra -Werror \
			-Wno-unused-parameter -D_GNU_SOURCE -Iinclude -Isrc \
			$SAN -fsanitize=fuzzer "tests/fuzz/$t.c" \
			${SDP_FUZZ_SOURCES:-src/wire/*.c} -o "$BUILD/fuzz/$t"
	done
fi

mkdir -p "$BUILD/artifacts"
failed=""
for t in $targets; do
	seeds="tests/fuzz/corpus/$t"
	work="$BUILD/corpus/$t"
	rm -rf "$work"
	mkdir -p "$work"
	[ -d "$seeds" ] && cp "$seeds"/* "$work"/ 2>/dev/null || true
	echo "fuzz: $t for ${SECS}s ($(ls "$work" | wc -l) seeds)"
	if "$BUILD/fuzz/$t" -max_total_time="$SECS" -timeout=10 \
		-rss_limit_mb=2048 -max_len=1024 -print_final_stats=1 \
		-artifact_prefix="$BUILD/artifacts/$t-" "$work" \
		>"$BUILD/$t.log" 2>&1; then
		grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*DONE' \
			"$BUILD/$t.log" | sed "s/^/fuzz: $t: /"
	else
		echo "fuzz: $t FAILED, see $BUILD/$t.log" >&2
		grep -E 'ERROR|SUMMARY|Test unit written|runtime error' \
			"$BUILD/$t.log" | head -20 >&2
		failed="$failed $t"
	fi
	if [ "${SDP_FUZZ_MERGE:-0}" = 1 ] && [ -d "$seeds" ]; then
		"$BUILD/fuzz/$t" -merge=1 "$seeds" "$work" >/dev/null 2>&1
		echo "fuzz: $t: corpus now $(ls "$seeds" | wc -l) files"
	fi
done

[ -z "$failed" ] || { echo "fuzz: failures:$failed" >&2; exit 1; }
echo "fuzz: all targets clean"
