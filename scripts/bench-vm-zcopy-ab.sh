#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/bench-vm-zcopy-ab.sh BASE [BUILD] — runs INSIDE the VM:
#   scripts/vm-run -t 900 -- env REP=3 bash scripts/bench-vm-zcopy-ab.sh \
#       /work/other/build/lib/libsdp.so build
#   scripts/vm-run -t 900 -- env REP=4 bash scripts/bench-vm-zcopy-ab.sh \
#       env:SDP_VERBS_RDMA_SPIN_US=0 build
# A/B on the ZCopy stream of scripts/bench-vm.sh (blocking writes of SIZE,
# SDP_ZCOPY_THRESH=SIZE, across the veth: its zs(), or sc() with
# AB_METHOD=socat), alternated run by run in one boot; NEWFIRST=1 swaps
# the order.  BASE is another libsdp build, or env:K=V[,K=V] for this
# build with those settings.  With zs the CPU seconds per GB follow each
# rate.  Then ib_read_bw across the veth, for the ratio.
# A BASE library must be under a directory the VM mounts (the working tree
# or another directory of this machine's root; not /tmp).
set -u
BASE=${1:?usage: bench-vm-zcopy-ab.sh BASE_LIB [BUILD]} B=${2:-build}
. "$PWD/scripts/bench-vm-lib.sh"
NEW=$SDP_RUN_LIBRARY BASE_ENV=
case $BASE in env:*) BASE_ENV=${BASE#env:} BASE=$NEW ;; esac
# lib size [settings] -> Gbit/s: sdpperf in steady state (zs, with its CPU
# per GB), or with AB_METHOD=socat the socat stream (sc), whose spread in
# one boot is wider.
rate() {
	if [ "${AB_METHOD:-sdpperf}" = socat ]; then
		# shellcheck disable=SC2086 # K=V words
		(if [ -n "${3:-}" ]; then export ${3//,/ }; fi; SDP_RUN_LIBRARY=$1 sc sdp "$2" "$2")
	else ZS_ENV=${3:-} ZS_CPU=1 zs "$2" "$2" "$1"; fi
}
for sz in ${SIZES:-262144 1048576}; do
	for i in $(seq "${REP:-3}"); do
		if [ -n "${NEWFIRST:-}" ]; then n=$(rate "$NEW" "$sz"); b=$(rate "$BASE" "$sz" "$BASE_ENV")
		else b=$(rate "$BASE" "$sz" "$BASE_ENV"); n=$(rate "$NEW" "$sz"); fi
		echo "size $sz base ${b:-n/a} new ${n:-n/a}"
	done
done
for sz in ${SIZES:-262144 1048576}; do
	echo "ib_read_bw $sz $(pt ib_read_bw "$sz")"
done
