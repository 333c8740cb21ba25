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
 * then made an SDP round trip 4 ms against 17 us over TCP.  So a yield
 * that did not come back within a peer's turn stops the spin, and no spin
 * of the process yields again for a while: 10 ms, doubling each time a
 * spin loses the CPU again soon after the last backoff ended (the host is
 * still busy), up to 1 s; a loss after a quiet while starts again at 10
 * ms.  A yield that comes back quickly proves little (the busy work may
 * just be on the other CPU for a moment), so it does not end a backoff.
 * The cost under lasting contention is one slice per second.
 */
#ifndef SDP_BASE_SPIN_H
#define SDP_BASE_SPIN_H

#include <stdbool.h>
#include <stdint.h>

/* A yield that takes longer than this gave the CPU to a thread that did
 * not give it back (a peer's turn is a few microseconds). */
#define SDP_SPIN_LOST_NS	200000ull
#define SDP_SPIN_BACKOFF_MIN_NS	10000000ull
#define SDP_SPIN_BACKOFF_MAX_NS	1000000000ull

/* Times are CLOCK_MONOTONIC nanoseconds, read by the caller, whose loop
 * reads the clock anyway. */
/* Whether a busy-poll may start at `now` (not within a backoff). */
bool sdp_spin_allowed(uint64_t now);
/* Yield the CPU inside a busy-poll; *now, the time read last before it,
 * becomes the time after it.  False if the yield lost the CPU for longer
 * than a peer's turn: the caller stops spinning and sleeps (the backoff
 * has started). */
bool sdp_spin_yield(uint64_t *now);

#endif
