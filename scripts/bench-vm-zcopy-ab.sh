#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/bench-vm-zcopy-ab.sh BASE_LIB [BUILD] — runs INSIDE the VM:
#   scripts/vm-run -t 900 -- env REP=3 bash scripts/bench-vm-zcopy-ab.sh \
#       /work/other/build/lib/libsdp.so build
# A/B of two libsdp builds on the ZCopy stream of scripts/bench-vm.sh
# (socat, blocking writes of SIZE, SDP_ZCOPY_THRESH=SIZE, rxe-a -> rxe-b),
# alternated run by run in one boot; NEWFIRST=1 swaps the order.  Each
# figure is 32 MiB over the difference of a 40 and an 8 MiB transfer
# (Gbit/s, without process start-up).  Then ib_read_bw across the veth.
# BASE_LIB must be under a directory the VM mounts (the working tree or
# another directory of this machine's root; not /tmp).
set -u
BASE=${1:?usage: bench-vm-zcopy-ab.sh BASE_LIB [BUILD]} B=${2:-build}
NEW=$PWD/$B/lib/libsdp.so
A=10.99.0.1 S=10.99.0.2
export SDP_TRANSPORT=verbs
one() { # lib size MiB -> ns
	local n=$(($3 * 1048576)) t0 t1
	SDP_RUN_LIBRARY=$1 SDP_ZCOPY_THRESH=$2 tools/sdp_run socat -b "$2" -u TCP-LISTEN:5400,bind=$S,reuseaddr OPEN:/dev/null >/dev/null 2>&1 & local sp=$!
	sleep 1
	t0=$(date +%s%N)
	SDP_RUN_LIBRARY=$1 SDP_ZCOPY_THRESH=$2 timeout 60 tools/sdp_run socat -b "$2" -u OPEN:/dev/zero,readbytes=$n TCP:$S:5400,bind=$A 2>/dev/null
	t1=$(date +%s%N); wait $sp; echo $((t1 - t0))
}
rate() { local a b; a=$(one "$1" "$2" 8); b=$(one "$1" "$2" 40); awk -v t=$((b - a)) 'BEGIN {printf "%.3f", 32*1048576*8/t}'; }
for sz in ${SIZES:-262144 1048576}; do
	for i in $(seq "${REP:-3}"); do
		if [ -n "${NEWFIRST:-}" ]; then n=$(rate "$NEW" "$sz"); b=$(rate "$BASE" "$sz")
		else b=$(rate "$BASE" "$sz"); n=$(rate "$NEW" "$sz"); fi
		echo "size $sz base $b new $n"
	done
done
eval "$(awk '/^gid_index\(\)/{p=1} /^rst\(\) {/{p=0} p' scripts/bench-vm.sh)"
T=3
for sz in ${SIZES:-262144 1048576}; do
	echo "ib_read_bw $sz $(pt ib_read_bw "$sz")"
done
