/* SPDX-License-Identifier: MIT */
/*
 * listener.c — passive open.  Requests are validated (Hello decoded and
 * checked) before any connection state exists; a bad Hello is rejected, so a
 * malformed client costs the listener nothing but the rejection.
 */
#include "engine/listener.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine/config.h"
#include "engine/conn.h"
#include "engine/real.h"
#include "engine/progress.h"
#include "wire/wire.h"

#define SDP_SOMAXCONN 4096

static void futex_wake_all(atomic_uint *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

int sdp_listen_create(struct sdp_listener *tl, int backlog,
		      struct sdp_ready *ready, struct sdp_listen **out)
{
	const struct sdp_transport_ops *ops = sdp_tp_default();
	struct sdp_listen *l;
	int r;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->lock, NULL);
	atomic_init(&l->refs, 1);
	l->tl = tl;
	l->ready = ready;
	l->tcp_fd = -1;
	sdp_listen_set_backlog(l, backlog);
	r = ops->listen(tl, l->backlog);
	if (r < 0)
		goto err;
	r = sdp_progress_add_listener(l);
	if (r < 0)
		goto err;
	*out = l;
	return 0;
err:
	l->tl = NULL;	/* still the caller's on failure */
	pthread_mutex_destroy(&l->lock);
	free(l);
	return r;
}

void sdp_listen_set_backlog(struct sdp_listen *l, int backlog)
{
	/* As Linux: negative or huge means SOMAXCONN; at least one. */
	if (backlog < 0 || backlog > SDP_SOMAXCONN)
		backlog = SDP_SOMAXCONN;
	l->backlog = backlog ? backlog : 1;
}

void sdp_listen_get(struct sdp_listen *l)
{
	atomic_fetch_add(&l->refs, 1);
}

void sdp_listen_put(struct sdp_listen *l)
{
	if (atomic_fetch_sub(&l->refs, 1) != 1)
		return;
	if (l->tl)
		sdp_tp_default()->close_listener(l->tl);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

int sdp_listen_fd(struct sdp_listen *l)
{
	return l->tl ? sdp_tp_default()->listener_fd(l->tl) : -1;
}

static void update_ready_locked(struct sdp_listen *l)
{
	if (l->ready)
		sdp_ready_set(l->ready, l->count || atomic_load(&l->tcp_pending) ?
			      SDP_READY_IN : 0);
}

int sdp_listen_add_tcp(struct sdp_listen *l, int fd)
{
	int r;

	/* Never block in accept4 on it: blocking accept() polls the app fd. */
	sdp_real.fcntl(fd, F_SETFL, sdp_real.fcntl(fd, F_GETFL) | O_NONBLOCK);
	pthread_mutex_lock(&l->lock);
	l->tcp_fd = fd;
	atomic_store(&l->tcp_pending, 1);	/* look once: maybe queued */
	update_ready_locked(l);
	pthread_mutex_unlock(&l->lock);
	r = sdp_progress_watch_tcp_listener(l, fd);
	if (r < 0) {
		pthread_mutex_lock(&l->lock);
		l->tcp_fd = -1;
		pthread_mutex_unlock(&l->lock);
	}
	return r;
}

void sdp_listen_tcp_ready(struct sdp_listen *l)
{
	pthread_mutex_lock(&l->lock);
	atomic_store(&l->tcp_pending, 1);
	update_ready_locked(l);
	if (l->accept_waiters) {
		atomic_fetch_add(&l->seq, 1);
		futex_wake_all(&l->seq);
	}
	pthread_mutex_unlock(&l->lock);
}

int sdp_listen_accept_tcp(struct sdp_listen *l, int flags)
{
	int fd;

	if (l->tcp_fd < 0)
		return -EAGAIN;
	/* Clear first: a connection arriving after this makes a new edge
	 * (the progress thread watches the socket edge-triggered). */
	atomic_store(&l->tcp_pending, 0);
	fd = sdp_real.accept4(l->tcp_fd, NULL, NULL, flags | SOCK_NONBLOCK);
	if (fd < 0) {
		int e = errno;

		pthread_mutex_lock(&l->lock);
		update_ready_locked(l);
		pthread_mutex_unlock(&l->lock);
		return e == EWOULDBLOCK ? -EAGAIN : -e;
	}
	{
		/* More waiting?  Ask the kernel rather than leave a stale
		 * "readable": select() then accept() must not block. */
		struct pollfd p = { .fd = l->tcp_fd, .events = POLLIN };

		atomic_store(&l->tcp_pending,
			     poll(&p, 1, 0) > 0 && (p.revents & POLLIN));
		pthread_mutex_lock(&l->lock);
		update_ready_locked(l);
		pthread_mutex_unlock(&l->lock);
	}
	if (!(flags & SOCK_NONBLOCK)) {
		int fl = sdp_real.fcntl(fd, F_GETFL);

		sdp_real.fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	return fd;
}

static void handle_one(struct sdp_listen *l, struct sdp_conn_req *req,
		       const uint8_t *priv, uint32_t len)
{
	const struct sdp_transport_ops *ops = sdp_tp_default();
	struct sdp_hello hello;
	struct sdp_conn *c;
	int r;

	r = sdp_wire_decode_hello(priv, len, &hello);
	if (r < 0) {
		sdp_log(SDP_LOG_ERR, "listener: rejecting a malformed Hello (%d)", r);
		ops->reject(req);
		l->refused++;
		return;
	}
	if (l->count >= (uint32_t)l->backlog || l->closed) {
		ops->reject(req);	/* full: refused, the client may retry */
		l->refused++;
		return;
	}
	r = sdp_conn_accept_req(req, &hello, &c);
	if (r < 0) {
		l->refused++;
		return;
	}
	r = sdp_progress_add_conn(c);
	if (r < 0) {
		sdp_conn_put(c);
		l->refused++;
		return;
	}
	c->acc_next = NULL;
	if (l->tail)
		l->tail->acc_next = c;
	else
		l->head = c;
	l->tail = c;
	l->count++;
}

int sdp_listen_service(struct sdp_listen *l)
{
	const struct sdp_transport_ops *ops = sdp_tp_default();
	uint8_t priv[SDP_CM_PRIV_MAX];
	struct sdp_conn_req *req;
	uint32_t len;
	int r, n = 0, closed;

	pthread_mutex_lock(&l->lock);
	for (;;) {
		if (!l->tl)
			break;
		len = sizeof(priv);
		r = ops->get_request(l->tl, &req, priv, &len);
		if (r < 0)
			break;
		handle_one(l, req, priv, len);
		n++;
	}
	if (n) {
		atomic_fetch_add(&l->seq, 1);
		futex_wake_all(&l->seq);
		update_ready_locked(l);
	}
	closed = l->closed;
	pthread_mutex_unlock(&l->lock);
	(void)closed;
	return 0;	/* released through sdp_progress_release_listener */
}

int sdp_listen_accept(struct sdp_listen *l, int nonblock, int timeout_ms,
		      struct sdp_conn **out)
{
	/* A "both" listener wakes us for TCP arrivals too: the caller then
	 * tries the TCP side (-EAGAIN with *out NULL means "look there"). */
	struct timespec ts, *tsp = NULL;
	unsigned seq;
	long r;

	for (;;) {
		pthread_mutex_lock(&l->lock);
		seq = atomic_load(&l->seq);
		if (l->closed) {
			pthread_mutex_unlock(&l->lock);
			return -EINVAL;
		}
		if (l->head) {
			struct sdp_conn *c = l->head;

			l->head = c->acc_next;
			if (!l->head)
				l->tail = NULL;
			l->count--;
			l->accepted++;
			update_ready_locked(l);
			pthread_mutex_unlock(&l->lock);
			*out = c;
			return 0;
		}
		if (nonblock || (l->tcp_fd >= 0 && atomic_load(&l->tcp_pending))) {
			pthread_mutex_unlock(&l->lock);
			*out = NULL;
			return -EAGAIN;
		}
		l->accept_waiters++;
		pthread_mutex_unlock(&l->lock);
		if (timeout_ms > 0) {
			ts.tv_sec = timeout_ms / 1000;
			ts.tv_nsec = (timeout_ms % 1000) * 1000000L;
			tsp = &ts;
		}
		r = syscall(SYS_futex, &l->seq, FUTEX_WAIT_PRIVATE, seq, tsp,
			    NULL, 0);
		pthread_mutex_lock(&l->lock);
		l->accept_waiters--;
		pthread_mutex_unlock(&l->lock);
		if (r < 0 && errno == EINTR)
			return -EINTR;
		if (r < 0 && errno == ETIMEDOUT)
			return -EAGAIN;
	}
}

void sdp_listen_close(struct sdp_listen *l)
{
	struct sdp_conn *c, *next;

	pthread_mutex_lock(&l->lock);
	l->closed = 1;
	l->ready = NULL;
	c = l->head;
	l->head = l->tail = NULL;
	l->count = 0;
	atomic_fetch_add(&l->seq, 1);
	futex_wake_all(&l->seq);
	/* Free the port now; closing the fd also drops it from epoll. */
	if (l->tl)
		sdp_tp_default()->close_listener(l->tl);
	l->tl = NULL;
	if (l->tcp_fd >= 0) {
		sdp_progress_unwatch(l->tcp_fd);
		sdp_real.close(l->tcp_fd);
	}
	l->tcp_fd = -1;
	pthread_mutex_unlock(&l->lock);
	/* Queued, never accepted: reset them, as TCP does. */
	for (; c; c = next) {
		next = c->acc_next;
		sdp_conn_close(c, 1);
	}
	sdp_progress_release_listener(l);
	sdp_listen_put(l);
}
