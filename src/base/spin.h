/* SPDX-License-Identifier: MIT */
/*
 * spin.h — busy-polling that gives way when the host has no CPU to spare.
 *
 * A blocking recv, an epoll_wait and the verbs waits poll for a short
 * while before they sleep: the answer to what was just sent usually comes
 * within microseconds, and a sleep and its wake-up cost about as much as
 * TCP's whole path.  They yield between looks rather than pause, because on
 * a small host the peer may need this very CPU to answer.
 *
 * Where every CPU is busy with other work, though, a yield hands the CPU to
 * that work for a whole scheduler slice (0.75–4 ms), while a thread that
 * sleeps is run again as soon as it is woken (wake-up preemption): spinning
 * then made an SDP round trip 4 ms against 17 us over TCP.  A yield that
 * does not come back within SDP_SPIN_LOST_NS is long; one now and then is
 * the peer's own turn or the kernel's work (0.08% of the yields of wrk
 * against nginx on two idle cores, some of them 2 ms), and backing off on
 * each of those cost that nginx a quarter of its rate.  Busy work shows as a run of them:
 * once a quarter of the recent yields (a moving average over about 16)
 * were long, the spin stops and no spin of the process yields for a
 * while: 10 ms, doubling each time it happens again soon after the last
 * backoff ended, up to 1 s; after a quiet while it starts at 10 ms again.
 * The cost under lasting contention is a few slices, then one a second.
 */
#ifndef SDP_BASE_SPIN_H
#define SDP_BASE_SPIN_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* A yield that takes longer than this gave the CPU to a thread that did
 * not give it back soon (a peer's turn is usually microseconds). */
#define SDP_SPIN_LOST_NS	500000ull
/* Back off once this fraction (1/N) of the recent yields were long. */
#define SDP_SPIN_LOST_SHARE	4u
#define SDP_SPIN_BACKOFF_MIN_NS	10000000ull
#define SDP_SPIN_BACKOFF_MAX_NS	1000000000ull

/* Times are CLOCK_MONOTONIC nanoseconds, read by the caller, whose loop
 * reads the clock anyway.  Inline: a spin's yields are on the path of
 * every round trip. */
extern _Atomic uint64_t sdp_spin_off_until_ns;
extern _Atomic uint32_t sdp_spin_long_share;

/* Whether a busy-poll may start at `now` (not within a backoff). */
static inline bool sdp_spin_allowed(uint64_t now)
{
	return now >= atomic_load_explicit(&sdp_spin_off_until_ns,
					   memory_order_relaxed);
}

/* The yield just taken ended at `now`, `lost` if it was long: keep the
 * share of long ones; false if the spin must stop (spin.c). */
bool sdp__spin_account(uint64_t now, bool lost);

/* Yield the CPU inside a busy-poll; *now, the time read last before it,
 * becomes the time after it.  False if yields keep losing the CPU to other
 * work: the caller stops spinning and sleeps (the backoff has started). */
static inline bool sdp_spin_yield(uint64_t *now)
{
	uint64_t t0 = *now;
	struct timespec ts;
	bool lost;

	sched_yield();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	*now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	lost = *now - t0 >= SDP_SPIN_LOST_NS;
	if (!lost && !atomic_load_explicit(&sdp_spin_long_share,
					   memory_order_relaxed))
		return true;
	return sdp__spin_account(*now, lost);
}

#endif
