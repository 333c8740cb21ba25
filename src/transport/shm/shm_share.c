// SPDX-License-Identifier: MIT
/*
 * shm_share.c — a listener shared by a process family (pre-forking servers).
 *
 * Normally the progress thread of the listening process accepts rendezvous
 * connections eagerly and reads their Hello (shm_portspace.c), so requests
 * end up in that process's memory.  After fork() every process holds the
 * same listening AF_UNIX socket, so a shared listener leaves requests in the
 * kernel's queue instead: whichever process calls accept() takes the next
 * connection with accept4() and reads its Hello itself.  Losers of a race
 * get EAGAIN from the kernel, exactly as with a TCP listener.
 *
 * The client sends its Hello right after connect() returns, so it is there
 * or about to be, and accept() waits for it, up to SHM_HELLO_WAIT_MS per
 * call (not per connection).  A client that stays silent that long is not
 * refused but held by the process (parked: shm_portspace.c's pending list,
 * at most SHM_PARKED_MAX, each for SHM_PENDING_TMO_MS), and for
 * SHM_SILENT_HOLD_MS after it accept() waits SHM_HELLO_PARK_WAIT_MS only,
 * parking the connections whose Hello is not there by then.  A held
 * connection is in the listener's epoll set (the family's), so its Hello
 * makes the listener readable again, and every accept() of the process
 * looks at what it holds first; a call that took only connections that
 * became no request says -ECONNABORTED (socket/socket.c: a blocking
 * accept() waits for a real one a while, then returns that).  So a local
 * user who keeps silent connections queued costs the server one wait of a
 * second, then two milliseconds each, not a second each
 * (docs/SECURITY.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/fdhigh.h"
#include "transport/shm/shm.h"
#include "base/real.h"

int sdp__shm_share_listener(struct sdp_listener *sl, int watch_ep)
{
	struct shm_listener *l = SHM_L(sl);
	struct epoll_event ev = { .events = EPOLLIN };
	int ep;

	if (!l->listening || l->sock < 0)
		return -EINVAL;
	if (l->shared)
		return 0;
	/* The caller's set itself, not one nested in it: a program may nest
	 * its own epoll sets as deep as the kernel allows.  Our own
	 * descriptor of it, for the connections held later (the caller's may
	 * be closed, and its number reused, before this listener goes). */
	ep = sdp_fd_high(sdp_real.fcntl(watch_ep, F_DUPFD_CLOEXEC, 0));
	if (ep < 0)
		return ep;
	if (sdp_real.epoll_ctl(ep, EPOLL_CTL_ADD, l->sock, &ev) &&
	    errno != EEXIST) {
		int err = -errno;

		sdp_close(ep);
		return err;
	}
	/* The private epoll set would be shared with the children too, and
	 * one process's epoll_ctl would change it for all: drop it (this is
	 * its only descriptor, so its registrations go with it).  Pending
	 * connections accepted before stay on the list; take_request() still
	 * serves them (a child's copies race harmlessly: one Hello, one
	 * reader). */
	if (l->epfd >= 0)
		sdp_close(l->epfd);
	l->epfd = -1;
	l->share_ep = ep;
	sdp__shm_pending_watch(l, ep);
	l->shared = true;
	return 0;
}

/* Wait for the Hello of a just-accepted connection until `end` (see the
 * top comment); past it, only one already there is taken. */
static int hello_wait(int s, uint64_t end)
{
	struct pollfd p = { .fd = s, .events = POLLIN };
	uint64_t now;
	int n;

	for (;;) {
		now = sdp__shm_now_ms();
		n = sdp_real.poll(&p, 1, now >= end ? 0 : (int)(end - now));
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* -ETIMEDOUT: no Hello by `end`; *retried: after a RETRY of ours. */
static int take_one(struct shm_listener *l, int s, uint64_t end,
		    bool *retried, struct sdp_conn_req **out, void *priv,
		    uint32_t *priv_len)
{
	struct shm_conn_req *r;
	uint16_t type = 0;
	struct shm_hello h = { .memfd = -1 };
	uint32_t len = 0;
	int err;

	/* SO_PASSCRED comes from the listener (sdp__shm_listen).  A Hello
	 * naming a pair we do not keep is answered RETRY once. */
	for (int tries = 0;; tries++) {
		*retried = tries > 0;
		/* Read first: the Hello is usually there already, and a
		 * poll() before it would be a system call for nothing. */
		err = sdp__shm_recv_msg(s, &type, priv, &len, &h, NULL);
		if (err == -EAGAIN) {
			err = hello_wait(s, end);
			if (!err)
				err = sdp__shm_recv_msg(s, &type, priv, &len,
							&h, NULL);
		}
		if (!err)
			err = sdp__shm_hello_check(type, &h);
		if (!err)
			err = sdp__shm_request_build(l, s, &h, &r);
		if (h.memfd >= 0)
			sdp_close(h.memfd);
		h.memfd = -1;
		if (err != -ESTALE || tries ||
		    sdp__shm_send_msg(s, SHM_MSG_RETRY, NULL, NULL, NULL, 0))
			break;
	}
	if (err)
		return err;
	*priv_len = len;
	*out = (struct sdp_conn_req *)r;
	return 0;
}

int sdp__shm_take_request(struct sdp_listener *sl, struct sdp_conn_req **out,
			  void *priv, uint32_t *priv_len)
{
	struct shm_listener *l = SHM_L(sl);
	uint64_t now = sdp__shm_now_ms();
	uint64_t end = now + (now < l->silent_until ? SHM_HELLO_PARK_WAIT_MS :
			      SHM_HELLO_WAIT_MS);
	bool taken = false;
	int r, tries;

	if (!l->shared)
		return -EINVAL;
	/* Nothing polls a shared listener's claim: its TCP clients are reset
	 * when the next SDP client is taken. */
	sdp__shm_claim_reset_clients(l);
	if (l->pending) {	/* parked, or accepted before the sharing */
		r = sdp__shm_pending_scan(l, out, priv, priv_len);
		if (r != -EAGAIN)
			return r;
	}
	/* A bad client is dropped and the next one tried, so one of them
	 * cannot make accept() fail; bounded like a batch. */
	for (tries = 0; tries < 16; tries++) {
		int s = sdp_real.accept4(l->sock, NULL, NULL,
					 SOCK_NONBLOCK | SOCK_CLOEXEC);
		bool retried;

		if (s < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EWOULDBLOCK)
				return -errno;
			return taken ? -ECONNABORTED : -EAGAIN;
		}
		s = sdp_fd_high(s);
		taken = true;
		r = take_one(l, s, end, &retried, out, priv, priv_len);
		if (r == 0)
			return 0;
		if (r == -ETIMEDOUT) {
			/* `end` has passed: the next ones in this call
			 * are taken only with their Hello there. */
			l->silent_until = sdp__shm_now_ms() +
					  SHM_SILENT_HOLD_MS;
			sdp__shm_pending_park(l, s, retried, SHM_PARKED_MAX);
			continue;
		}
		sdp_close(s);	/* the client sees its connect refused */
	}
	return -ECONNABORTED;
}
