/* SPDX-License-Identifier: MIT */
/*
 * cancel.h — pthread_cancel() of a thread inside the library.
 *
 * Why.  A blocking SDP recv/send/accept/connect sleeps on a futex (a raw
 * system call), not in one of glibc's cancellable calls, so a deferred
 * cancel was never delivered: on verbs a thread blocked in recv() could
 * not be cancelled at all.  And the engine calls cancellation points of its
 * own (poll, close, write on its internal descriptors; libibverbs' reads):
 * a cancel acted upon there unwinds through the engine with its locks held
 * and its counts raised.  On shm that is what happened, at the poll() of
 * the peer check.
 *
 * How.  The library interposes pthread_cancel() (socket/signals.c).  Every
 * application thread that enters the library through a socket call counts
 * its depth in a per-thread record, registered once.  The canceller marks
 * the target's record, then (after a process-wide memory barrier,
 * membarrier(2), so that the target's depth is current) either:
 *   - the target is outside the library: glibc's pthread_cancel, as always
 *     (it may be asleep in a kernel call glibc knows how to interrupt);
 *   - the target is inside: the cancel is deferred.  If the target sleeps
 *     in the library, its wait word is bumped and woken; the wait returns
 *     -EINTR once, as for a signal, the engine unwinds normally and releases
 *     everything, and at the boundary (sdp_cancel_leave) the thread cancels
 *     itself: glibc's pthread_cancel on itself, then pthread_testcancel() if
 *     the call is a cancellation point that had no effect.  A call that
 *     moved bytes returns them; the next cancellation point acts.
 * A thread whose record is marked runs every later library call with
 * cancellation disabled inside (the glibc bit may already be set); a
 * cancellation point that would block acts when its wait returns for the
 * cancel, one that completes at once returns its result first.  The
 * application's own cancel state is honoured: with cancellation disabled,
 * nothing is interrupted.
 *
 * Cost on the normal path: a thread-local increment and decrement and a
 * test of a thread-local flag per call; no atomic instruction (the barrier
 * is the canceller's, and pthread_cancel is rare).
 */
#ifndef SDP_BASE_CANCEL_H
#define SDP_BASE_CANCEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/sigseen.h"	/* SDP_SIG_TLS */

struct sdp_cancel_rec {
	/* Written by the owning thread only (plain loads and stores: relaxed
	 * atomics, no locked instruction); read by a canceller after its
	 * membarrier.  Use depth_get/depth_set. */
	atomic_uint depth;
	/* Set by a canceller (under the registry lock), never cleared: the
	 * thread is on its way out once its cancel state allows. */
	atomic_int requested;
	/* Owner only: this call's wait already returned for the cancel
	 * (one-shot, as a signal: a cancel acknowledgement waited for next
	 * is not cut short again); we disabled cancellation for this call
	 * and the application's state before it. */
	int woke, disabled_by_us, app_state;
	/* The wait word the thread sleeps on (or NULL), with its futex
	 * flavour; under `lock` (spin: held for a few instructions). */
	atomic_flag lock;
	_Atomic uint32_t *word;
	int word_private;
	/* Owner only: depth saved across sdp_cancel_kernel_wait_*(); inside
	 * `lock` (a signal handler's nested sleep must not take it). */
	unsigned kdepth;
	volatile int locking;
	/* Registry (cancel.c). */
	int registered;
	pthread_t self;
	struct sdp_cancel_rec *prev, *next;
};

extern SDP_SIG_TLS struct sdp_cancel_rec sdp_cancel_me;

static inline unsigned sdp_cancel_depth(const struct sdp_cancel_rec *t)
{
	return atomic_load_explicit(&t->depth, memory_order_relaxed);
}

static inline void sdp_cancel_depth_set(struct sdp_cancel_rec *t, unsigned d)
{
	atomic_store_explicit(&t->depth, d, memory_order_relaxed);
}

void sdp__cancel_enter_slow(void);
void sdp__cancel_leave_slow(long r, int point);

/* A socket call enters the library (after it took its socket reference:
 * nothing acts here; whether the call is a cancellation point matters at
 * the boundary, sdp_cancel_leave). */
static inline void sdp_cancel_enter(void)
{
	struct sdp_cancel_rec *t = &sdp_cancel_me;

	if (__builtin_expect(!t->registered ||
			     atomic_load_explicit(&t->requested,
						  memory_order_relaxed), 0))
		sdp__cancel_enter_slow();
	sdp_cancel_depth_set(t, sdp_cancel_depth(t) + 1);
	atomic_signal_fence(memory_order_seq_cst);
	/* A cancel marked after the canceller read our depth as 0 (it then
	 * used glibc's cancel): seen here, thanks to its barrier. */
	if (__builtin_expect(atomic_load_explicit(&t->requested,
						  memory_order_relaxed) &&
			     !t->disabled_by_us, 0))
		sdp__cancel_enter_slow();
}

/* After every reference the call took is released, just before the
 * errno conversion: r is its result (-errno or a count). */
static inline void sdp_cancel_leave(long r, int point)
{
	struct sdp_cancel_rec *t = &sdp_cancel_me;

	atomic_signal_fence(memory_order_seq_cst);
	sdp_cancel_depth_set(t, sdp_cancel_depth(t) - 1);
	atomic_signal_fence(memory_order_seq_cst);
	if (__builtin_expect(atomic_load_explicit(&t->requested,
						  memory_order_relaxed), 0))
		sdp__cancel_leave_slow(r, point);
}

/* The futex sleep of an application thread in the library, on `word`
 * while it holds `val` (private: FUTEX_WAIT_PRIVATE; ts: a relative
 * timeout or NULL), that pthread_cancel can end: the canceller bumps and
 * wakes the word this thread published.  Returns 0 (woken, or the word
 * had moved), -ETIMEDOUT, or -EINTR (a signal, or a cancel to act on:
 * then it does not sleep at all).  A signal handler's call that sleeps
 * inside it publishes its own word and puts ours back. */
struct timespec;
int sdp_cancel_futex_wait(_Atomic uint32_t *word, uint32_t val,
			  const struct timespec *ts, int private);

/* A pthread_cancel of this thread is marked, not yet acted on, and the
 * application's state lets it act: a wait that would sleep returns -EINTR
 * for it (for a thread that polls instead of sleeping, verbs_dev.c). */
int sdp_cancel_actionable(void);

/* This call's wait already returned -EINTR for a cancel: the engine must
 * not take that for a signal to restart after (SA_RESTART). */
static inline int sdp_cancel_woke(void)
{
	return sdp_cancel_me.woke;
}

/* For a thread about to sleep in a kernel call glibc can cancel (poll):
 * leave the library's depth for the duration, so that a canceller uses
 * glibc's cancel.  -EINTR if a cancel is already there (do not sleep; the
 * boundary acts), else 0; the caller must have a cleanup handler for what
 * it holds.  sdp_cancel_kernel_wait_end() after the call. */
int sdp_cancel_kernel_wait_begin(void);
void sdp_cancel_kernel_wait_end(void);

/* The interposed pthread_cancel (socket/signals.c): real is glibc's. */
int sdp_cancel_thread(pthread_t th, int (*real)(pthread_t));

#endif
