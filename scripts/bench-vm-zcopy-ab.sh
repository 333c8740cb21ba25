#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/bench-vm-zcopy-ab.sh BASE_LIB [BUILD] — runs INSIDE the VM:
#   scripts/vm-run -t 900 -- env REP=3 bash scripts/bench-vm-zcopy-ab.sh \
#       /work/other/build/lib/libsdp.so build
# A/B of two libsdp builds on the ZCopy stream of scripts/bench-vm.sh
# (blocking writes of SIZE, SDP_ZCOPY_THRESH=SIZE, across the veth: its
# zs(), or sc() with AB_METHOD=socat), alternated run by run in one
# boot; NEWFIRST=1 swaps the order.  Then ib_read_bw across the veth.
# BASE_LIB must be under a directory the VM mounts (the working tree or
# another directory of this machine's root; not /tmp).
set -u
BASE=${1:?usage: bench-vm-zcopy-ab.sh BASE_LIB [BUILD]} B=${2:-build}
. "$PWD/scripts/bench-vm-lib.sh"
NEW=$SDP_RUN_LIBRARY
# lib size -> Gbit/s: sdpperf in steady state (zs), or with AB_METHOD=socat
# the socat stream (sc), whose spread in one boot is wider (session 15).
rate() {
	if [ "${AB_METHOD:-sdpperf}" = socat ]; then SDP_RUN_LIBRARY=$1 sc sdp "$2" "$2"
	else zs "$2" "$2" "$1"; fi
}
for sz in ${SIZES:-262144 1048576}; do
	for i in $(seq "${REP:-3}"); do
		if [ -n "${NEWFIRST:-}" ]; then n=$(rate "$NEW" "$sz"); b=$(rate "$BASE" "$sz")
		else b=$(rate "$BASE" "$sz"); n=$(rate "$NEW" "$sz"); fi
		echo "size $sz base ${b:-n/a} new ${n:-n/a}"
	done
done
for sz in ${SIZES:-262144 1048576}; do
	echo "ib_read_bw $sz $(pt ib_read_bw "$sz")"
done
