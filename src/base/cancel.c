/* SPDX-License-Identifier: MIT */
/*
 * cancel.c — pthread_cancel() of a thread inside the library (cancel.h says
 * why and how): the registry of application threads, the canceller's side,
 * and the thread's own side at the boundary and around its sleeps.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/atfork.h"
#include "base/cancel.h"

SDP_SIG_TLS struct sdp_cancel_rec sdp_cancel_me;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sdp_cancel_rec *reg_head;
static pthread_key_t reg_key;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
/* glibc's pthread_cancel, known once any thread was cancelled through us
 * (no record is marked before). */
static int (*_Atomic real_cancel)(pthread_t);

static void unregister(void *arg)
{
	struct sdp_cancel_rec *t = arg;

	pthread_mutex_lock(&reg_lock);
	if (t->prev)
		t->prev->next = t->next;
	else
		reg_head = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->prev = t->next = NULL;
	t->registered = 0;
	pthread_mutex_unlock(&reg_lock);
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&reg_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&reg_lock);
}

/* Only the forking thread lives on in the child. */
static void fork_child(void)
{
	struct sdp_cancel_rec *t = &sdp_cancel_me;

	pthread_mutex_init(&reg_lock, NULL);
	reg_head = NULL;
	if (t->registered) {
		t->prev = t->next = NULL;
		reg_head = t;
	}
}

static int reg_ok;

static void reg_init(void)
{
	reg_ok = pthread_key_create(&reg_key, unregister) == 0;
	sdp_atfork_add(SDP_ATFORK_INNER, fork_prepare, fork_parent,
		       fork_child);
}

static void register_me(struct sdp_cancel_rec *t)
{
	pthread_once(&reg_once, reg_init);
	if (!reg_ok) {
		/* No destructor to take a dead thread's record out: keep it
		 * out of the registry (cancels go to glibc, as before). */
		t->registered = 1;
		return;
	}
	t->self = pthread_self();
	pthread_mutex_lock(&reg_lock);
	t->prev = NULL;
	t->next = reg_head;
	if (reg_head)
		reg_head->prev = t;
	reg_head = t;
	t->registered = 1;
	pthread_mutex_unlock(&reg_lock);
	pthread_setspecific(reg_key, t);	/* unregister() at exit */
}

/* Does the application let this thread be cancelled now? */
static int app_enabled(const struct sdp_cancel_rec *t)
{
	int old;

	if (t->disabled_by_us)
		return t->app_state == PTHREAD_CANCEL_ENABLE;
	/* Our record is marked but glibc's bit is not set yet (deferred):
	 * toggling the state cannot act. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	pthread_setcancelstate(old, NULL);
	return old == PTHREAD_CANCEL_ENABLE;
}

/* The cancel should end this call's wait now (once per call). */
static int wake_for_cancel(struct sdp_cancel_rec *t)
{
	if (!atomic_load(&t->requested) || t->woke || !app_enabled(t))
		return 0;
	t->woke = 1;
	return 1;
}

int sdp_cancel_actionable(void)
{
	struct sdp_cancel_rec *t = &sdp_cancel_me;

	return atomic_load(&t->requested) && !t->woke && app_enabled(t);
}

static void disable_for_call(struct sdp_cancel_rec *t)
{
	if (t->disabled_by_us)
		return;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &t->app_state);
	t->disabled_by_us = 1;
}

static void cancel_self(void)
{
	int (*real)(pthread_t) = atomic_load(&real_cancel);

	if (real)
		real(pthread_self());
}

void sdp__cancel_enter_slow(void)
{
	struct sdp_cancel_rec *t = &sdp_cancel_me;

	if (!t->registered)
		register_me(t);
	/* glibc's bit may be set (or be set any moment): no cancellation
	 * point inside the library may act on it.  Not acted upon here: the
	 * call holds its socket reference already. */
	if (atomic_load(&t->requested))
		disable_for_call(t);
}

void sdp__cancel_leave_slow(long r, int point)
{
	struct sdp_cancel_rec *t = &sdp_cancel_me;

	if (sdp_cancel_depth(t))
		return;		/* nested (a handler's call): the outer acts */
	if (t->disabled_by_us) {
		t->disabled_by_us = 0;
		pthread_setcancelstate(t->app_state, NULL);
	}
	t->woke = 0;
	/* Everything is released: hand the cancel to glibc, which acts now
	 * if this call had no effect, else at the next cancellation point,
	 * or when the application enables cancellation again. */
	cancel_self();
	if (point && r == -EINTR)
		pthread_testcancel();
}

static void spin_lock(struct sdp_cancel_rec *t)
{
	while (atomic_flag_test_and_set_explicit(&t->lock,
						 memory_order_acquire))
		;
}

static void spin_unlock(struct sdp_cancel_rec *t)
{
	atomic_flag_clear_explicit(&t->lock, memory_order_release);
}

/* The word of a sleep that this one interrupted (a signal handler's call
 * inside ours), put back by sleep_end. */
struct sdp_cancel_sleep {
	_Atomic uint32_t *prev;
	int prev_private, skipped;
};

static int sleep_end(struct sdp_cancel_sleep *cs);

/* -EINTR if the thread has a cancel to act on (do not sleep), else 0. */
static int sleep_begin(struct sdp_cancel_sleep *cs, _Atomic uint32_t *word,
		       int private)
{
	struct sdp_cancel_rec *t = &sdp_cancel_me;

	/* Not through a call (a library thread), or a signal handler's call
	 * that interrupted ours inside its lock (it would spin on itself). */
	cs->skipped = !t->registered || !sdp_cancel_depth(t) || t->locking;
	if (cs->skipped)
		return 0;
	t->locking = 1;
	spin_lock(t);
	cs->prev = t->word;	/* a sleep this handler's call interrupted */
	cs->prev_private = t->word_private;
	t->word = word;
	t->word_private = private;
	spin_unlock(t);
	t->locking = 0;
	/* The canceller marks, then looks at the word under the lock: either
	 * it saw our word (and bumps it: the futex wait returns at once), or
	 * its mark is visible to us now. */
	if (wake_for_cancel(t)) {
		sleep_end(cs);
		return -EINTR;
	}
	return 0;
}

/* -EINTR if a cancel came during the sleep (it bumped and woke the word). */
static int sleep_end(struct sdp_cancel_sleep *cs)
{
	struct sdp_cancel_rec *t = &sdp_cancel_me;

	if (cs->skipped)
		return 0;
	cs->skipped = 1;
	t->locking = 1;
	spin_lock(t);
	t->word = cs->prev;
	t->word_private = cs->prev_private;
	spin_unlock(t);
	t->locking = 0;
	return wake_for_cancel(t) ? -EINTR : 0;
}

int sdp_cancel_futex_wait(_Atomic uint32_t *word, uint32_t val,
			  const struct timespec *ts, int private)
{
	struct sdp_cancel_sleep cs;
	int r = 0;

	if (sleep_begin(&cs, word, private))
		return -EINTR;
	if (atomic_load(word) == val &&
	    syscall(SYS_futex, word, private ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT,
		    val, ts, NULL, 0) < 0 &&
	    (errno == EINTR || errno == ETIMEDOUT))
		r = -errno;
	if (sleep_end(&cs))
		r = -EINTR;
	return r;
}

int sdp_cancel_kernel_wait_begin(void)
{
	struct sdp_cancel_rec *t = &sdp_cancel_me;

	if (!t->registered || !sdp_cancel_depth(t))
		return 0;
	t->kdepth = sdp_cancel_depth(t);
	sdp_cancel_depth_set(t, 0);
	atomic_signal_fence(memory_order_seq_cst);
	if (wake_for_cancel(t)) {
		sdp_cancel_depth_set(t, t->kdepth);
		t->kdepth = 0;
		return -EINTR;
	}
	return 0;
}

void sdp_cancel_kernel_wait_end(void)
{
	struct sdp_cancel_rec *t = &sdp_cancel_me;

	if (!t->kdepth)
		return;
	atomic_signal_fence(memory_order_seq_cst);
	sdp_cancel_depth_set(t, t->kdepth);
	t->kdepth = 0;
	atomic_signal_fence(memory_order_seq_cst);
	/* A canceller that read the depth of 0 just before it came back
	 * used glibc's cancel: the rest of the call runs without it. */
	if (atomic_load(&t->requested))
		disable_for_call(t);
}

/* Make every other thread's plain stores to its record visible to us (and
 * ours to it) before we read its depth: membarrier(2), which costs the
 * rare canceller and nothing on the threads' paths. */
static void barrier_all(void)
{
	static int mode;	/* 0 unknown, 1 private expedited, 2 global, 3 none */

	if (!mode) {
		if (syscall(SYS_membarrier,
			    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
			mode = 1;
		else if (syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) > 0)
			mode = 2;
		else
			mode = 3;
	}
	if (mode == 1 &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return;
	if (mode <= 2 &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0)
		return;
	/* No membarrier (seccomp): the window of a cancel that reads a
	 * stale depth of 0 stays open (docs/DESIGN.md). */
	{
		/* A full fence (a locked instruction; TSan has no fences). */
		static atomic_int fence_word;

		atomic_fetch_add(&fence_word, 0);
	}
}

int sdp_cancel_thread(pthread_t th, int (*real)(pthread_t))
{
	struct sdp_cancel_rec *t;
	int deferred = 0, state;

	atomic_store(&real_cancel, real);
	/* pthread_cancel is async-cancel-safe: a canceller of asynchronous
	 * type cancelled here must not leave with the registry lock. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
	pthread_mutex_lock(&reg_lock);	/* the record outlives its use */
	for (t = reg_head; t; t = t->next)
		if (pthread_equal(t->self, th))
			break;
	if (t) {
		atomic_store(&t->requested, 1);
		barrier_all();
		deferred = sdp_cancel_depth(t) != 0;
	}
	if (deferred) {
		/* It cancels itself when it leaves the library. */
		spin_lock(t);
		if (t->word) {
			atomic_fetch_add(t->word, 1);
			syscall(SYS_futex, t->word,
				t->word_private ? FUTEX_WAKE_PRIVATE : FUTEX_WAKE,
				INT_MAX, NULL, NULL, 0);
		}
		spin_unlock(t);
	}
	pthread_mutex_unlock(&reg_lock);
	pthread_setcancelstate(state, NULL);
	/* Outside the library (or never in it): glibc's, after the lock (a
	 * self-cancel of asynchronous type acts inside it). */
	return deferred ? 0 : real(th);
}
