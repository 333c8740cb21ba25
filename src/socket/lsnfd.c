/* SPDX-License-Identifier: MIT */
/*
 * lsnfd.c — the application's descriptor of a listening socket, and what
 * happens to listeners at fork().
 *
 * A listener's descriptor is an epoll set over kernel objects, so its
 * readiness ("a connection is pending") comes from the kernel and is the same
 * in every process that holds it, as for a TCP listener:
 *   - the token socketpair end (engine/readiness.c) while the listener is
 *     private: connections handshaken by this process's progress thread;
 *   - a "both" listener's kernel TCP socket;
 *   - once shared (fork), the transport's own kernel queue (shm: the
 *     listening rendezvous socket), in place of the token.
 * An epoll descriptor is pollable (poll, select, epoll, nested), survives
 * fork as one open file, and keeps the descriptor number and its epoll
 * registrations valid when the listener becomes shared, because the set is
 * changed in place.  The one thing it cannot do is EPOLLEXCLUSIVE (the
 * kernel refuses it on epoll descriptors), which nginx asks for with several
 * workers: epoll_ctl is interposed to drop the flag for listeners (all
 * waiters wake; the losers' accept() returns EAGAIN, as without the flag).
 *
 * At fork() (prepare handler, in the parent, before the child exists) every
 * listener is made shared, so both processes inherit the same state.  A
 * transport that cannot share keeps the old behaviour: a "both" listener
 * becomes the plain kernel TCP listener (switch.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/atfork.h"
#include "base/config.h"
#include "base/real.h"
#include "socket/sock.h"
#include "base/fdhigh.h"

static pthread_mutex_t lsn_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sdp_sock *lsn_head;

static void track(struct sdp_sock *s)
{
	pthread_mutex_lock(&lsn_lock);
	atomic_fetch_add(&s->refs, 1);
	s->lsn_next = lsn_head;
	lsn_head = s;
	s->lsn_tracked = 1;
	pthread_mutex_unlock(&lsn_lock);
}

static void untrack(struct sdp_sock *s)
{
	struct sdp_sock **pp;

	pthread_mutex_lock(&lsn_lock);
	for (pp = &lsn_head; *pp; pp = &(*pp)->lsn_next) {
		if (*pp == s) {
			*pp = s->lsn_next;
			s->lsn_tracked = 0;
			atomic_fetch_sub(&s->refs, 1);	/* never the last */
			break;
		}
	}
	pthread_mutex_unlock(&lsn_lock);
}

static int ep_add(int ep, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return sdp_real.epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

int sdp_lsnfd_install(struct sdp_sock *s, int fd)
{
	int tok, ep, fdfl, fl, r;

	/* Keep the token end open under a hidden number: the application's
	 * number is about to name the epoll set. */
	tok = sdp_fd_high(sdp_real.fcntl(fd, F_DUPFD_CLOEXEC, 0));
	if (tok < 0)
		return -errno;
	ep = sdp_fd_high(epoll_create1(EPOLL_CLOEXEC));
	if (ep < 0) {
		r = -errno;
		goto err_tok;
	}
	r = ep_add(ep, tok);
	if (r == 0 && s->lsn->tcp_fd >= 0)
		r = ep_add(ep, s->lsn->tcp_fd);
	if (r < 0)
		goto err_ep;
	fdfl = sdp_real.fcntl(fd, F_GETFD);
	fl = sdp_real.fcntl(fd, F_GETFL);
	if (sdp_real.dup3(ep, fd, fdfl > 0 && (fdfl & FD_CLOEXEC) ?
			  O_CLOEXEC : 0) < 0) {
		r = -errno;
		goto err_ep;
	}
	if (fl >= 0)
		sdp_real.fcntl(fd, F_SETFL, fl & O_NONBLOCK);
	s->ready.app_fd = tok;
	s->lsn_fd = fd;
	s->lsn_ep = ep;
	track(s);
	sdp_listen_stat_attach(s->lsn, fd, (struct sockaddr *)&s->local);
	return 0;
err_ep:
	sdp_real.close(ep);
err_tok:
	sdp_real.close(tok);
	return r;
}

void sdp_lsnfd_release(struct sdp_sock *s)
{
	if (s->lsn_tracked)
		untrack(s);
	if (s->lsn_ep < 0)
		return;
	sdp_real.close(s->lsn_ep);
	s->lsn_ep = -1;
	sdp_real.close(s->ready.app_fd);	/* the hidden token end */
	s->ready.app_fd = s->lsn_fd;
}

/* ---- fork ------------------------------------------------------------------ */

/* Runs in the parent before the child exists: whatever state the listener is
 * in then is what both processes get.  The listeners' locks are held across
 * fork() so that the child's copies are consistent. */
static void lsn_prepare(void)
{
	struct sdp_sock *s;

	pthread_mutex_lock(&lsn_lock);
	for (s = lsn_head; s; s = s->lsn_next) {
		if (!s->lsn)
			continue;
		s->share_failed = sdp_listen_share(s->lsn, s->lsn_ep,
						   s->ready.app_fd) < 0;
		pthread_mutex_lock(&s->lsn->lock);
	}
}

static void lsn_after(int child)
{
	struct sdp_sock *s, *next, **pp = &lsn_head;

	for (s = lsn_head; s; s = s->lsn_next) {
		if (!s->lsn)
			continue;
		if (child)
			sdp_listen_after_fork_child(s->lsn);
		else
			pthread_mutex_unlock(&s->lsn->lock);
	}
	for (s = lsn_head; s; s = next) {
		next = s->lsn_next;
		if (!s->lsn || !s->share_failed) {
			pp = &s->lsn_next;
			continue;
		}
		/* Not shareable: the old way ("both" only; an SDP-only
		 * listener then serves the parent alone). */
		sdp_switch_listener_to_tcp(s, child);
		if (s->lsn) {
			pp = &s->lsn_next;
			continue;
		}
		*pp = next;
		s->lsn_tracked = 0;
		if (!child)
			sdp_sock_put(s);
	}
	if (child)
		pthread_mutex_init(&lsn_lock, NULL);
	else
		pthread_mutex_unlock(&lsn_lock);
}

static void lsn_after_parent(void)
{
	lsn_after(0);
}

static void lsn_after_child(void)
{
	lsn_after(1);
}

__attribute__((constructor)) static void lsn_ctor(void)
{
	/* Outer: the switch to TCP closes listeners, which takes the
	 * locks of other modules (stats) that their prepare handlers hold
	 * across fork, and must find the transports already reset in the
	 * child (atfork.h). */
	sdp_atfork_add(SDP_ATFORK_OUTER, lsn_prepare, lsn_after_parent,
		       lsn_after_child);
}

/* ---- epoll_ctl --------------------------------------------------------------- */

SDP_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct epoll_event copy;

	if (sdp_real_init() < 0) {
		errno = ENOSYS;
		return -1;
	}
	/* Only EPOLLEXCLUSIVE registrations pay for the lookup. */
	if (op == EPOLL_CTL_ADD && ev && (ev->events & EPOLLEXCLUSIVE)) {
		struct sdp_sock *s = sdp_fd_get(fd);

		if (s) {
			if (s->lsn_ep >= 0) {
				copy = *ev;
				copy.events &= ~(uint32_t)EPOLLEXCLUSIVE;
				ev = &copy;
			}
			sdp_sock_put(s);
		}
	}
	return sdp_epfast_ctl(epfd, op, fd, ev);
}
