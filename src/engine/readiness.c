/* SPDX-License-Identifier: MIT */
/*
 * readiness.c — kernel readiness of the application's descriptor, steered
 * from SDP state (see readiness.h for the mapping and why it works).
 *
 * Linux AF_UNIX stream sockets report POLLOUT while the bytes a socket has
 * sent and its peer has not read stay under a quarter of its send buffer; we
 * shrink app_fd's send buffer to the minimum and write a few KiB from app_fd
 * to lib_fd to switch POLLOUT off, and read them back at lib_fd to switch it
 * on again, which also wakes EPOLLOUT waiters (edge-triggered included).
 */
#include "base/fdhigh.h"
#include "engine/readiness.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/real.h"

/* A pair whose library end (fds[1]) is non-blocking and close-on-exec
 * and whose application end (fds[0]) is non-blocking per `nonblock`, as
 * socketpair() makes them (one call fewer than setting flags after). */
static int make_pair(int fds[2], bool nonblock)
{
	if (sdp_real.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
				SOCK_NONBLOCK, 0, fds) < 0)
		return -errno;
	if (!nonblock)
		sdp_real.fcntl(fds[0], F_SETFL, O_RDWR);
	return 0;
}

int sdp_ready_init(struct sdp_ready *r, int sock_flags)
{
	int fds[2], fd, e;

	memset(r, 0, sizeof(*r));
	r->lib_fd = -1;
	if (sock_flags & SOCK_NONBLOCK) {
		/* Born non-blocking: an event loop's, which names it in
		 * poll or epoll next.  Paired at once, not at that call. */
		e = make_pair(fds, true);
		if (e < 0)
			return e;
		if (!(sock_flags & SOCK_CLOEXEC))
			sdp_real.fcntl(fds[0], F_SETFD, 0);
		r->app_fd = fds[0];
		r->lib_fd = sdp_fd_high(fds[1]);
		return 0;
	}
	fd = sdp_real.socket(AF_UNIX, SOCK_STREAM |
			     (sock_flags & SOCK_CLOEXEC), 0);
	if (fd < 0)
		return -errno;
	r->app_fd = fd;
	atomic_store(&r->lone, true);
	return 0;
}

int sdp_ready_pair(struct sdp_ready *r)
{
	int fds[2], fdfl, fl, e;

	if (!atomic_load(&r->lone))
		return 0;
	if (r->app_fd < 0)
		return -EBADF;
	fdfl = sdp_real.fcntl(r->app_fd, F_GETFD);
	fl = sdp_real.fcntl(r->app_fd, F_GETFL);
	if (fdfl < 0 || fl < 0)
		return -errno;
	e = make_pair(fds, fl & O_NONBLOCK);
	if (e < 0)
		return e;
	/* One atomic step for the application's number: a thread of its
	 * that uses it meanwhile meets either socket, never a free number. */
	if (sdp_real.dup3(fds[0], r->app_fd,
			  (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
		e = -errno;
		sdp_real.close(fds[0]);
		sdp_real.close(fds[1]);
		return e;
	}
	sdp_real.close(fds[0]);
	r->lib_fd = sdp_fd_high(fds[1]);
	atomic_store(&r->lone, false);
	return 0;
}

void sdp_ready_note_ino(struct sdp_ready *r)
{
	struct stat st;

	if (!r->app_ino && r->app_fd >= 0 && fstat(r->app_fd, &st) == 0)
		r->app_ino = (uint64_t)st.st_ino;
}

static void fill_app_sendq(struct sdp_ready *r)
{
	static const char junk[4096];
	int i, small = 1;	/* the kernel rounds up to its minimum */
	ssize_t n;

	/* Shrunk at the first need, not in init: a socket that the switch
	 * turns into TCP at connect() never needs it. */
	if (!r->sndbuf_small) {
		sdp_real.setsockopt(r->app_fd, SOL_SOCKET, SO_SNDBUF, &small,
				    sizeof(small));
		r->sndbuf_small = 1;
	}
	for (i = 0; i < 64; i++) {
		n = sdp_real.send(r->app_fd, junk, sizeof(junk),
				  MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n <= 0)
			break;
	}
	r->unwritable = 1;
}

/* Read everything queued on `fd`; returns the byte count.  One call
 * empties an AF_UNIX stream queue unless it fills the buffer. */
static size_t drain(int fd, int flags)
{
	char buf[16384];
	size_t total = 0;
	ssize_t n;

	do {
		n = sdp_real.recv(fd, buf, sizeof(buf), MSG_DONTWAIT | flags);
		if (n > 0)
			total += (size_t)n;
	} while (n == (ssize_t)sizeof(buf));
	return total;
}

static void drain_tokens(struct sdp_ready *r)
{
	size_t n = drain(r->app_fd, 0);

	r->tokens = n >= r->tokens ? 0 : r->tokens - (unsigned)n;
}

static void set_readable(struct sdp_ready *r, int on)
{
	if (on) {
		if (sdp_real.send(r->lib_fd, "r", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) {
			r->readable = 1;
			r->tokens++;
		}
	} else {
		drain_tokens(r);
		r->readable = 0;
	}
}

void sdp_ready_peer_token(struct sdp_ready *r)
{
	if (r->lib_fd < 0 || r->eof)
		return;		/* the byte cannot arrive any more */
	r->readable = 1;
	r->tokens++;
}

static void set_urgent(struct sdp_ready *r, int on)
{
	char c;

	if (on) {
		/* EOPNOTSUPP on kernels without AF_UNIX OOB: POLLPRI is then
		 * not mirrored; recv(MSG_OOB) and SIOCATMARK still work. */
		if (sdp_real.send(r->lib_fd, "u", 1,
				  MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
			r->urgent = 1;
	} else {
		sdp_real.recv(r->app_fd, &c, 1, MSG_OOB | MSG_DONTWAIT);
		r->urgent = 0;
	}
}

void sdp_ready_set(struct sdp_ready *r, unsigned want)
{
	int saved = errno;

	if (r->lib_fd < 0)
		goto out;
	if (want & SDP_READY_ERR) {
		/* A reset is writable, as TCP reports it (a writer blocked in
		 * poll(POLLOUT) must wake): our filler goes.  Closing lib_fd
		 * while it holds an unread byte then makes the kernel flag
		 * app_fd with ECONNRESET: POLLERR|POLLHUP, permanently, once
		 * the last copy of lib_fd is closed.  The peer's process
		 * (appwake) or another of the family may hold one: hang up
		 * now, so that POLLHUP comes at once.  (A waiter may see the
		 * POLLOUT an instant before the POLLHUP; its send then fails
		 * with the reset.) */
		if (r->unwritable) {
			drain(r->lib_fd, 0);
			r->unwritable = 0;
		}
		sdp_real.send(r->app_fd, "e", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		sdp_real.shutdown(r->lib_fd, SHUT_RDWR);
		sdp_real.close(r->lib_fd);
		r->lib_fd = -1;
		r->reset = 1;
		goto out;
	}
	if ((want & SDP_READY_PRI) && !r->urgent)
		set_urgent(r, 1);
	else if (!(want & SDP_READY_PRI) && r->urgent)
		set_urgent(r, 0);
	if (want & SDP_READY_EOF) {
		if (!r->eof) {
			sdp_real.shutdown(r->lib_fd, SHUT_WR);
			r->eof = 1;
			r->tokens = 0;	/* none can arrive after this */
		}
	} else if (!!(want & SDP_READY_IN) != r->readable) {
		set_readable(r, !!(want & SDP_READY_IN));
	} else if ((want & SDP_READY_PULSE) && r->readable) {
		/* A new byte wakes edge-triggered waiters again. */
		if (sdp_real.send(r->lib_fd, "r", 1,
				  MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
			r->tokens++;
	} else if (!r->readable && r->tokens) {
		/* The peer's byte was still in flight at the last drain. */
		drain_tokens(r);
	}
	if ((want & SDP_READY_OUT) && r->unwritable) {
		drain(r->lib_fd, 0);
		r->unwritable = 0;
	} else if (!(want & SDP_READY_OUT) && !r->unwritable) {
		fill_app_sendq(r);
	}
out:
	errno = saved;
}

int sdp_ready_hand_over(struct sdp_ready *r, int app_end, unsigned wait_ms)
{
	int big = 212992, queued = 0;	/* net.core.wmem_default */
	unsigned waited = 0;
	char c;

	if (r->lib_fd < 0 || r->reset)
		return -EPIPE;
	if (r->urgent) {
		sdp_real.recv(app_end, &c, 1, MSG_OOB | MSG_DONTWAIT);
		r->urgent = 0;
	}
	/* Every token counted must be in the queue before it is taken: a
	 * peer's one may still be on its way (appwake.h), and one read later
	 * would be taken for data. */
	for (;;) {
		if (sdp_real.ioctl(app_end, FIONREAD, &queued) < 0)
			return -errno;
		if ((unsigned)queued >= r->tokens || waited >= wait_ms)
			break;
		usleep(1000);
		waited++;
	}
	if ((unsigned)queued != r->tokens)
		return -EAGAIN;
	while (r->tokens) {
		char buf[256];
		ssize_t n = sdp_real.recv(app_end, buf, r->tokens < sizeof(buf) ?
					  r->tokens : sizeof(buf), MSG_DONTWAIT);

		if (n <= 0)
			return -EAGAIN;
		r->tokens -= (unsigned)n;
	}
	r->readable = 0;
	if (r->unwritable) {
		drain(r->lib_fd, 0);
		r->unwritable = 0;
	}
	if (r->sndbuf_small) {
		sdp_real.setsockopt(app_end, SOL_SOCKET, SO_SNDBUF, &big,
				    sizeof(big));
		r->sndbuf_small = 0;
	}
	return 0;
}

void sdp_ready_release(struct sdp_ready *r)
{
	if (r->lib_fd >= 0)
		sdp_real.close(r->lib_fd);
	r->lib_fd = -1;
}
