/* SPDX-License-Identifier: MIT */
/*
 * sigseen.h — which signal handlers ran on this thread (socket/signals.c).
 *
 * Why.  A blocking socket call under the library does part of its waiting
 * in user space (epoll_wait looks at its set and spins, recv spins, before
 * they sleep in the kernel).  A signal handled in that part interrupts no
 * system call, so without this the call would go on to sleep as if nothing
 * had happened, where the kernel's own call returns EINTR.  Event loops
 * that set a flag in a handler and test it between waits (nginx on
 * SIGTERM) then sleep through it: seen as an nginx that did not stop.
 *
 * The library wraps the application's handlers (sigaction, signal) in a
 * trampoline that counts, per thread, the handlers that ran, and those
 * among them without SA_RESTART.  A blocking call reads the count it cares
 * about when it starts, and before it sleeps: moved means interrupted.
 * poll, select and epoll_wait are interrupted by any handler (the kernel
 * never restarts them); recv and send only by one without SA_RESTART.
 *
 * Handlers installed by a raw rt_sigaction system call, or by glibc
 * internally (siginterrupt), are not seen: for those the calls behave as
 * before.
 */
#ifndef SDP_BASE_SIGSEEN_H
#define SDP_BASE_SIGSEEN_H

/* Initial-exec TLS: read and written in signal handlers, which must not
 * allocate (the library is preloaded, so its TLS is in the static block). */
#define SDP_SIG_TLS __thread __attribute__((tls_model("initial-exec")))

extern SDP_SIG_TLS unsigned sdp_sig_seen;		/* any handler */
extern SDP_SIG_TLS unsigned sdp_sig_seen_norestart;	/* without SA_RESTART */

/* For recv/send-like calls, which SA_RESTART handlers do not interrupt:
 * taken at the start of the call, then compared before each sleep. */
struct sdp_sig_mark {
	unsigned any, norestart;
};

static inline struct sdp_sig_mark sdp_sig_mark(void)
{
	return (struct sdp_sig_mark){ sdp_sig_seen, sdp_sig_seen_norestart };
}

/* A handler without SA_RESTART ran: the call ends with EINTR. */
static inline int sdp_sig_interrupted(struct sdp_sig_mark m)
{
	return sdp_sig_seen_norestart != m.norestart;
}

/* The sleep ended with EINTR, and every handler that ran had SA_RESTART:
 * the kernel would have restarted the call (our sleeps have a timeout,
 * which the kernel never restarts, so we do).  None seen (installed
 * behind our back): EINTR, as before. */
static inline int sdp_sig_restart(struct sdp_sig_mark m)
{
	return sdp_sig_seen != m.any && sdp_sig_seen_norestart == m.norestart;
}

#endif
