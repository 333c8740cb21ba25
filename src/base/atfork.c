/* SPDX-License-Identifier: MIT */
/* The library's fork handlers, in an order we choose (atfork.h). */
#include "base/atfork.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "base/config.h"
#include "base/libthreads.h"

#define SDP_ATFORK_MAX 32

struct hook {
	void (*prepare)(void);
	void (*parent)(void);
	void (*child)(void);
	enum sdp_atfork_class cls;
};

/* Entries are written before `n` is published (release) and never change:
 * a fork racing with a registration sees the table up to `n`. */
static struct hook hooks[SDP_ATFORK_MAX];
static _Atomic unsigned n_hooks;
static pthread_mutex_t add_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int registered;

static void run_prepare(void)
{
	unsigned n = atomic_load_explicit(&n_hooks, memory_order_acquire), i;

	for (i = 0; i < n; i++)
		if (hooks[i].cls == SDP_ATFORK_OUTER && hooks[i].prepare)
			hooks[i].prepare();
	for (i = n; i-- > 0;)
		if (hooks[i].cls == SDP_ATFORK_INNER && hooks[i].prepare)
			hooks[i].prepare();
}

static void run_after(int child)
{
	unsigned n = atomic_load_explicit(&n_hooks, memory_order_acquire), i;

	for (i = 0; i < n; i++) {
		void (*f)(void) = child ? hooks[i].child : hooks[i].parent;

		if (hooks[i].cls == SDP_ATFORK_INNER && f)
			f();
	}
	for (i = 0; i < n; i++) {
		void (*f)(void) = child ? hooks[i].child : hooks[i].parent;

		if (hooks[i].cls == SDP_ATFORK_OUTER && f)
			f();
	}
}

static void run_parent(void)
{
	run_after(0);
}

static void run_child(void)
{
	/* Only this thread exists: the copy of the lock may be held. */
	pthread_mutex_init(&add_lock, NULL);
	run_after(1);
}

long sdp_atfork_around(long (*call)(void *), void *arg)
{
	long r;
	int e;

	run_prepare();
	sdp_lib_threads_hold();
	r = call(arg);
	e = errno;
	sdp_lib_threads_release(r == 0);
	if (r == 0)
		run_child();
	else
		run_parent();
	errno = e;
	return r;
}

static void register_once(void)
{
	registered = pthread_atfork(run_prepare, run_parent, run_child) == 0;
}

int sdp_atfork_add(enum sdp_atfork_class cls, void (*prepare)(void),
		   void (*parent)(void), void (*child)(void))
{
	unsigned n;

	pthread_once(&once, register_once);
	if (!registered)
		return -ENOMEM;
	pthread_mutex_lock(&add_lock);
	n = atomic_load_explicit(&n_hooks, memory_order_relaxed);
	if (n == SDP_ATFORK_MAX) {
		pthread_mutex_unlock(&add_lock);
		sdp_log(SDP_LOG_ERR, "fork handler table full (%d)",
			SDP_ATFORK_MAX);
		return -ENOMEM;
	}
	hooks[n].prepare = prepare;
	hooks[n].parent = parent;
	hooks[n].child = child;
	hooks[n].cls = cls;
	atomic_store_explicit(&n_hooks, n + 1, memory_order_release);
	pthread_mutex_unlock(&add_lock);
	return 0;
}
