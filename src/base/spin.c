/* SPDX-License-Identifier: MIT */
/*
 * spin.c — busy-polling that gives way when the host has no CPU to spare
 * (spin.h).  Process-wide: whether the CPUs are all busy is a fact of the
 * host, not of one thread.
 */
#include "base/spin.h"

_Atomic uint64_t sdp_spin_off_until_ns;	/* no spin before this */
_Atomic uint32_t sdp_spin_long_share;
static _Atomic uint64_t spin_lost_ns;		/* the last backoff began */
static _Atomic uint64_t spin_backoff_ns = SDP_SPIN_BACKOFF_MIN_NS;

/* sdp_spin_long_share is the share of recent yields that were long, in
 * 1/65536: a moving average over about the last 16 (updates may race; it
 * is a hint). */
#define SHARE_ONE 65536u

bool sdp__spin_account(uint64_t now, bool lost)
{
	uint32_t share = atomic_load_explicit(&sdp_spin_long_share,
					      memory_order_relaxed);
	uint64_t b, last;

	share -= share / 16 ? share / 16 : share;	/* decays to 0 */
	share += lost ? SHARE_ONE / 16 : 0;
	atomic_store_explicit(&sdp_spin_long_share, share,
			      memory_order_relaxed);
	if (!lost || share < SHARE_ONE / SDP_SPIN_LOST_SHARE)
		return true;
	/* Lost again soon after the last backoff ended: the host is still
	 * busy, back off longer.  Lost after a quiet while: start short. */
	b = atomic_load_explicit(&spin_backoff_ns, memory_order_relaxed);
	last = atomic_exchange_explicit(&spin_lost_ns, now,
					memory_order_relaxed);
	if (last && (int64_t)(now - last) <
		    (int64_t)(2 * b + SDP_SPIN_BACKOFF_MIN_NS))
		b = b * 2 < SDP_SPIN_BACKOFF_MAX_NS ? b * 2 :
						      SDP_SPIN_BACKOFF_MAX_NS;
	else
		b = SDP_SPIN_BACKOFF_MIN_NS;
	atomic_store_explicit(&spin_backoff_ns, b, memory_order_relaxed);
	atomic_store_explicit(&sdp_spin_off_until_ns, now + b,
			      memory_order_relaxed);
	return false;
}
