/* SPDX-License-Identifier: MIT */
/*
 * signals.c — count the application's signal handlers as they run, so that
 * a blocking call can tell that one interrupted its user-space wait
 * (base/sigseen.h says why and who looks).
 *
 * sigaction() and signal() install a trampoline in place of the
 * application's handler: it bumps this thread's counts, then calls the
 * handler exactly as the kernel would have (SA_SIGINFO or not).  Flags and
 * mask are the application's, so nothing else changes; sigaction()'s
 * "old action" reports the application's handler, never the trampoline.
 *
 * The handler of each signal is kept twice and switched by one atomic
 * index, so that a signal arriving while sigaction() replaces it calls
 * either the old handler or the new one, whole.  Two threads replacing the
 * same signal's handler at once race as they would with the kernel alone:
 * one of the two wins.
 *
 * pthread_cancel() is here too, the other way a thread is interrupted:
 * base/cancel.h.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "base/cancel.h"
#include "base/sigseen.h"
#include "socket/sock.h"

static struct sigaction app[_NSIG][2];
static _Atomic unsigned char app_cur[_NSIG];

/* The real sigaction without dlsym (not async-signal-safe, and sigaction
 * may be called from a handler): glibc's __sigaction is the same call
 * under the name the dynamic linker cannot route to us. */
extern int __sigaction(int, const struct sigaction *, struct sigaction *);

static void trampoline(int sig, siginfo_t *si, void *uc)
{
	const struct sigaction *a;

	if (sig <= 0 || sig >= _NSIG)
		return;
	a = &app[sig][atomic_load_explicit(&app_cur[sig],
					   memory_order_acquire)];
	sdp_sig_seen++;
	if (!(a->sa_flags & SA_RESTART))
		sdp_sig_seen_norestart++;
	if (a->sa_flags & SA_SIGINFO) {
		if (a->sa_sigaction)
			a->sa_sigaction(sig, si, uc);
	} else if (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN) {
		a->sa_handler(sig);
	}
}

static int is_trampoline(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == trampoline;
}

/* What the application installed, for an action read from the kernel. */
static void unwrap(int sig, const struct sigaction *k, unsigned slot,
		   struct sigaction *out)
{
	if (is_trampoline(k))
		*out = app[sig][slot];
	else
		*out = *k;
}

static int wrappable(int sig, const struct sigaction *act)
{
	if (sig <= 0 || sig >= _NSIG || sig == SIGKILL || sig == SIGSTOP)
		return 0;
	if (act->sa_flags & SA_SIGINFO)
		return act->sa_sigaction != NULL;
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

SDP_EXPORT int sigaction(int sig, const struct sigaction *act,
			 struct sigaction *oact)
{
	struct sigaction k, w;
	unsigned cur, next;
	int r, e;

	if (!act || !wrappable(sig, act)) {
		cur = sig > 0 && sig < _NSIG ? atomic_load(&app_cur[sig]) : 0;
		r = __sigaction(sig, act, oact ? &k : NULL);
		if (r == 0 && oact)
			unwrap(sig, &k, cur, oact);
		return r;
	}
	cur = atomic_load(&app_cur[sig]);
	next = !cur;
	app[sig][next] = *act;
	atomic_store_explicit(&app_cur[sig], (unsigned char)next,
			      memory_order_release);
	w = *act;
	w.sa_flags |= SA_SIGINFO;
	w.sa_sigaction = trampoline;
	r = __sigaction(sig, &w, &k);
	if (r < 0) {
		e = errno;
		atomic_store(&app_cur[sig], (unsigned char)cur);
		errno = e;
		return r;
	}
	if (oact)
		unwrap(sig, &k, cur, oact);
	return 0;
}

/* glibc's signal(): BSD semantics, SA_RESTART and the signal blocked in
 * its handler (glibc's siginterrupt() changes that behind our back; its
 * calls then count as restarting). */
SDP_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction act, old;

	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	sigemptyset(&act.sa_mask);
	if (sig > 0 && sig < _NSIG)
		sigaddset(&act.sa_mask, sig);
	act.sa_flags = SA_RESTART;
	if (sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

SDP_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return signal(sig, handler);
}

/* pthread_cancel(): wake the target if it sleeps in the library, and let
 * the cancel act only at the library's boundary (base/cancel.h). */
SDP_EXPORT int pthread_cancel(pthread_t th)
{
	static void *real;
	int (*fn)(pthread_t) = sdp_real_sym(&real, "pthread_cancel");

	return fn ? sdp_cancel_thread(th, fn) : ENOSYS;
}
