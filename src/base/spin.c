/* SPDX-License-Identifier: MIT */
/*
 * spin.c — busy-polling that gives way when the host has no CPU to spare
 * (spin.h).  Process-wide: whether the CPUs are all busy is a fact of the
 * host, not of one thread.
 */
#include "base/spin.h"

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

static _Atomic uint64_t spin_off_until_ns;	/* no spin before this */
static _Atomic uint64_t spin_lost_ns;		/* the last yield lost */
static _Atomic uint64_t spin_backoff_ns = SDP_SPIN_BACKOFF_MIN_NS;

bool sdp_spin_allowed(uint64_t now)
{
	return now >= atomic_load_explicit(&spin_off_until_ns,
					   memory_order_relaxed);
}

bool sdp_spin_yield(uint64_t *now)
{
	uint64_t t0 = *now, b, last;
	struct timespec ts;

	sched_yield();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	*now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (*now - t0 < SDP_SPIN_LOST_NS)
		return true;
	/* Lost again soon after the last backoff ended: the host is still
	 * busy, back off longer.  Lost after a quiet while: start short. */
	b = atomic_load_explicit(&spin_backoff_ns, memory_order_relaxed);
	last = atomic_exchange_explicit(&spin_lost_ns, *now,
					memory_order_relaxed);
	if (last && (int64_t)(*now - last) <
		    (int64_t)(2 * b + SDP_SPIN_BACKOFF_MIN_NS))
		b = b * 2 < SDP_SPIN_BACKOFF_MAX_NS ? b * 2 :
						      SDP_SPIN_BACKOFF_MAX_NS;
	else
		b = SDP_SPIN_BACKOFF_MIN_NS;
	atomic_store_explicit(&spin_backoff_ns, b, memory_order_relaxed);
	atomic_store_explicit(&spin_off_until_ns, *now + b,
			      memory_order_relaxed);
	return false;
}
