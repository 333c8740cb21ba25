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
 * or about to be; a client that stalls between the two is dropped
 * (refused).  The wait is bounded per accept(), not per connection: a
 * local user who queues silent connections stalls one accept() for
 * SHM_HELLO_WAIT_MS at most, not that long for each of them
 * (docs/SECURITY.md).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/fdhigh.h"
#include "transport/shm/shm.h"
#include "base/real.h"

int sdp__shm_share_listener(struct sdp_listener *sl)
{
	struct shm_listener *l = SHM_L(sl);

	if (!l->listening || l->sock < 0)
		return -EINVAL;
	if (l->shared)
		return l->sock;
	/* The private epoll set would be shared with the children too, and
	 * one process's epoll_ctl would change it for all: drop it (this is
	 * its only descriptor, so its registrations go with it).  Pending
	 * connections accepted before stay on the list; take_request() still
	 * serves them (a child's copies race harmlessly: one Hello, one
	 * reader). */
	if (l->epfd >= 0)
		sdp_close(l->epfd);
	l->epfd = -1;
	l->shared = true;
	return l->sock;
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

static int take_one(struct shm_listener *l, int s, uint64_t end,
		    struct sdp_conn_req **out, void *priv, uint32_t *priv_len)
{
	struct shm_conn_req *r;
	uint16_t type = 0;
	struct shm_hello h = { .memfd = -1 };
	uint32_t len = 0;
	int err;

	/* SO_PASSCRED comes from the listener (sdp__shm_listen).  A Hello
	 * naming a pair we do not keep is answered RETRY once. */
	for (int tries = 0;; tries++) {
		err = hello_wait(s, end);
		if (!err)
			err = sdp__shm_recv_msg(s, &type, priv, &len, &h, NULL);
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
	uint64_t end = sdp__shm_now_ms() + SHM_HELLO_WAIT_MS;
	int r, tries;

	if (!l->shared)
		return -EINVAL;
	/* Nothing polls a shared listener's claim: its TCP clients are reset
	 * when the next SDP client is taken. */
	sdp__shm_claim_reset_clients(l);
	if (l->pending) {	/* accepted before the listener was shared */
		r = sdp__shm_pending_scan(l, out, priv, priv_len);
		if (r != -EAGAIN)
			return r;
	}
	/* A bad or silent client is dropped and the next one tried, so one
	 * of them cannot make accept() fail; bounded like a batch. */
	for (tries = 0; tries < 16; tries++) {
		int s = sdp_real.accept4(l->sock, NULL, NULL,
					 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (s < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		}
		s = sdp_fd_high(s);
		r = take_one(l, s, end, out, priv, priv_len);
		if (r == 0)
			return 0;
		sdp_close(s);	/* the client sees its connect refused */
	}
	return -EAGAIN;
}
