/* SPDX-License-Identifier: MIT */
/*
 * listener.c — passive open.  Requests are validated (Hello decoded and
 * checked) before any connection state exists; a bad Hello is rejected, so a
 * malformed client costs the listener nothing but the rejection.
 */
#include "engine/listener.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/epoll.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/cancel.h"
#include "base/config.h"
#include "engine/conn.h"
#include "base/real.h"
#include "engine/progress.h"
#include "engine/stats_shm.h"
#include "transport/multi.h"
#include "wire/wire.h"

#define SDP_SOMAXCONN 4096

/*
 * A full accept queue holds new requests unanswered rather than refusing
 * them.  Linux drops the SYN of a client that finds the queue full, and the
 * client retries (1 s, 3 s, ...): a burst of connects larger than the
 * backlog (wrk -c 1000 against nginx's 511) only slows down.  A refusal
 * instead reaches a non-blocking connect as ECONNREFUSED once the
 * descriptor is already in the application's epoll set, where nothing can
 * fall back to TCP any more; wrk counted thousands of such errors.  So the
 * request waits here, and is answered as soon as accept() makes room: the
 * client's connect completes then, without TCP's retry delay.  Past
 * SDP_LISTEN_PEND_MAX waiting requests (TCP's SYN queue has a bound too)
 * they are refused.
 */
#define SDP_LISTEN_PEND_MAX SDP_SOMAXCONN

struct sdp_listen_pend {
	struct sdp_listen_pend *next;
	struct sdp_conn_req *req;
	uint32_t len;
	uint8_t priv[SDP_CM_PRIV_MAX];
};

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
	l->stat_slot = -1;
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
	if (l->tcp_fd >= 0)
		sdp_real.close(l->tcp_fd);	/* kept by a shutdown() */
	pthread_mutex_destroy(&l->lock);
	free(l);
}

int sdp_listen_fd(struct sdp_listen *l)
{
	return l->tl ? sdp_tp_default()->listener_fd(l->tl) : -1;
}

void sdp_listen_stat_attach(struct sdp_listen *l, int fd,
			    const struct sockaddr *local)
{
	int slot = sdp_stat_slot_alloc(fd, 1);

	if (slot < 0)
		return;
	sdp_stat_slot_set_transport(slot, sdp_tp_name(sdp_tp_default()));
	sdp_stat_slot_set_addrs(slot, local, NULL);
	pthread_mutex_lock(&l->lock);
	l->stat_slot = slot;
	sdp_stat_slot_update_listen(slot, l);
	pthread_mutex_unlock(&l->lock);
}

static void stat_update_locked(struct sdp_listen *l)
{
	if (l->stat_slot >= 0)
		sdp_stat_slot_update_listen(l->stat_slot, l);
}

/* Whether anything reads the token: a wait in the kernel on the
 * application's descriptor (kwatched), or a "both" listener's blocking
 * accept(), which polls it.  A private SDP-only listener served by
 * blocking accept() alone sleeps on `seq`: its token and the drain would
 * be two system calls per connection for nobody. */
static bool token_read_locked(const struct sdp_listen *l)
{
	return l->tcp_fd >= 0 || atomic_load(&l->ready->kwatched);
}

static void update_ready_locked(struct sdp_listen *l)
{
	stat_update_locked(l);
	/* Only our queue: a TCP side and a shared listener's kernel queue are
	 * members of the application's epoll descriptor themselves. */
	if (l->ready && token_read_locked(l))
		sdp_ready_set(l->ready, l->count ? SDP_READY_IN : 0);
}

void sdp_listen_kernel_watch(struct sdp_listen *l)
{
	pthread_mutex_lock(&l->lock);
	update_ready_locked(l);
	pthread_mutex_unlock(&l->lock);
}

int sdp_listen_add_tcp(struct sdp_listen *l, int fd)
{
	/* Never block in accept4 on it: blocking accept() polls the app fd. */
	sdp_real.fcntl(fd, F_SETFL, sdp_real.fcntl(fd, F_GETFL) | O_NONBLOCK);
	pthread_mutex_lock(&l->lock);
	l->tcp_fd = fd;
	update_ready_locked(l);	/* accept() polls the token from now on */
	pthread_mutex_unlock(&l->lock);
	return 0;
}

int sdp_listen_accept_tcp(struct sdp_listen *l, int flags)
{
	int fd;

	if (l->tcp_fd < 0)
		return -EAGAIN;
	fd = sdp_real.accept4(l->tcp_fd, NULL, NULL, flags | SOCK_NONBLOCK);
	if (fd < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (!(flags & SOCK_NONBLOCK)) {
		int fl = sdp_real.fcntl(fd, F_GETFL);

		sdp_real.fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	return fd;
}

/* Validate a request and complete the passive side (HelloAck sent). */
static int passive_open(struct sdp_listen *l, struct sdp_conn_req *req,
			const uint8_t *priv, uint32_t len, struct sdp_conn **out)
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
		return r;
	}
	/* A client may send its next connections over TCP if this port
	 * takes them (policy/destmemo.h). */
	r = sdp_conn_accept_req(req, &hello,
				l->tcp_fd >= 0 ? SDP_CM_F_TCP_TOO : 0, &c);
	if (r < 0) {
		l->refused++;
		return r;
	}
	r = sdp_progress_add_conn(c);
	if (r < 0) {
		sdp_conn_put(c);
		l->refused++;
		return r;
	}
	*out = c;
	return 0;
}

static int queue_full_locked(const struct sdp_listen *l)
{
	return l->count >= (uint32_t)l->backlog;
}

/* Answer a request and queue the connection for accept(); 1 if queued. */
static int open_and_queue_locked(struct sdp_listen *l,
				 struct sdp_conn_req *req,
				 const uint8_t *priv, uint32_t len)
{
	struct sdp_conn *c;

	if (passive_open(l, req, priv, len, &c) < 0)
		return 0;
	c->acc_next = NULL;
	if (l->tail)
		l->tail->acc_next = c;
	else
		l->head = c;
	l->tail = c;
	l->count++;
	return 1;
}

/* Refuse a request: the client's connect fails at once, and a "both"
 * client falls back to TCP or retries. */
static void refuse_locked(struct sdp_listen *l, struct sdp_conn_req *req)
{
	sdp_tp_default()->reject(req);
	l->refused++;
}

/* Room in the queue: answer the requests that waited for it, oldest
 * first.  Returns how many connections were queued. */
static int pend_drain_locked(struct sdp_listen *l)
{
	int n = 0;

	while (l->pend_head && !queue_full_locked(l) && !l->closed) {
		struct sdp_listen_pend *p = l->pend_head;

		l->pend_head = p->next;
		if (!l->pend_head)
			l->pend_tail = NULL;
		l->npend--;
		n += open_and_queue_locked(l, p->req, p->priv, p->len);
		free(p);
	}
	return n;
}

/* The queue is full: keep the request unanswered (see the top). */
static void pend_add_locked(struct sdp_listen *l, struct sdp_conn_req *req,
			    const uint8_t *priv, uint32_t len)
{
	struct sdp_listen_pend *p = NULL;

	if (l->npend < SDP_LISTEN_PEND_MAX && len <= sizeof(p->priv))
		p = malloc(sizeof(*p));
	if (!p) {
		refuse_locked(l, req);
		return;
	}
	p->next = NULL;
	p->req = req;
	p->len = len;
	memcpy(p->priv, priv, len);
	if (l->pend_tail)
		l->pend_tail->next = p;
	else
		l->pend_head = p;
	l->pend_tail = p;
	l->npend++;
}

/* Closing: refuse every request still waiting. */
static void pend_reject_locked(struct sdp_listen *l)
{
	while (l->pend_head) {
		struct sdp_listen_pend *p = l->pend_head;

		l->pend_head = p->next;
		refuse_locked(l, p->req);
		free(p);
	}
	l->pend_tail = NULL;
	l->npend = 0;
}

static void handle_one(struct sdp_listen *l, struct sdp_conn_req *req,
		       const uint8_t *priv, uint32_t len)
{
	/* Half the descriptor limit in SDP use: a listener that also takes
	 * TCP refuses, and a "both" client comes back over TCP
	 * (socket/fdlimit.c). */
	if (l->closed || (l->tcp_fd >= 0 && !sdp_conn_fd_budget_ok())) {
		refuse_locked(l, req);
		return;
	}
	pend_drain_locked(l);
	if (queue_full_locked(l) || l->pend_head)
		pend_add_locked(l, req, priv, len);
	else
		open_and_queue_locked(l, req, priv, len);
}

int sdp_listen_service(struct sdp_listen *l)
{
	const struct sdp_transport_ops *ops = sdp_tp_default();
	uint8_t priv[SDP_CM_PRIV_MAX];
	struct sdp_conn_req *req;
	uint32_t len;
	int r, n = 0, waiters;

	pthread_mutex_lock(&l->lock);
	for (;;) {
		/* Shared: requests are left to whoever calls accept(). */
		if (!l->tl || l->shared)
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
		update_ready_locked(l);
	}
	waiters = n && l->accept_waiters;
	pthread_mutex_unlock(&l->lock);
	/* Woken after the lock is let go: a thread woken under it would
	 * only wait for it at once.  A waiter counted in accept_waiters read
	 * `seq` before the bump, so its sleep ends either way. */
	if (waiters)
		futex_wake_all(&l->seq);
	return 0;	/* released through sdp_progress_release_listener */
}

int sdp_listen_share(struct sdp_listen *l, int epfd, int token_fd)
{
	const struct sdp_transport_ops *ops = sdp_tp_default();
	int lfd, k, r = 0;

	pthread_mutex_lock(&l->lock);
	if (l->shared || l->closed || !l->tl)
		goto out;
	lfd = sdp_listen_fd(l);
	/* Providers whose listeners cannot be shared across processes
	 * (verbs: RDMA resources do not follow fork) leave this NULL. */
	/* The kernel queue itself makes the descriptor readable, in every
	 * process that holds it.  A listener that cannot be watched so is
	 * not shared (the caller makes a "both" one plain TCP). */
	k = ops->share_listener ? ops->share_listener(l->tl, epfd) :
				  -EOPNOTSUPP;
	if (k < 0) {
		r = k;
		goto out;
	}
	/* The progress thread no longer takes requests (a stale event finds
	 * l->shared set). */
	if (lfd >= 0)
		sdp_progress_unwatch(lfd);
	/* Connections already queued here stay ours (accept() returns them
	 * first) but no longer make the shared descriptor readable: every
	 * other process would wake for them and find nothing (README). */
	if (token_fd >= 0)
		sdp_real.epoll_ctl(epfd, EPOLL_CTL_DEL, token_fd, NULL);
	/* No sdpstat update here: this runs in a fork prepare handler, after
	 * the stats' own one took its lock; the row says "shared" from the
	 * first accept on. */
	l->shared = 1;
	/* Threads asleep in the per-process queue must look again. */
	atomic_fetch_add(&l->seq, 1);
	futex_wake_all(&l->seq);
out:
	pthread_mutex_unlock(&l->lock);
	return r;
}

void sdp_listen_after_fork_child(struct sdp_listen *l)
{
	pthread_mutex_init(&l->lock, NULL);
	l->head = l->tail = NULL;
	l->count = 0;
	l->accept_waiters = 0;
	/* The parent answers its waiting requests; the child forgets them. */
	l->pend_head = l->pend_tail = NULL;
	l->npend = 0;
}

/* Shared listener, lock held: one connection from the kernel queue. */
static int take_shared_locked(struct sdp_listen *l, struct sdp_conn **out)
{
	const struct sdp_transport_ops *ops = sdp_tp_default();
	uint8_t priv[SDP_CM_PRIV_MAX];
	struct sdp_conn_req *req;
	uint32_t len;
	int r, tries;

	/* A bad request is dropped and the next one tried: it must not turn
	 * into a spurious EAGAIN while good ones wait. */
	for (tries = 0; tries < 8; tries++) {
		len = sizeof(priv);
		r = ops->take_request ? ops->take_request(l->tl, &req, priv,
							  &len) : -EOPNOTSUPP;
		if (r < 0)
			return r;
		if (passive_open(l, req, priv, len, out) == 0)
			return 0;
	}
	return -EAGAIN;
}

int sdp_listen_accept(struct sdp_listen *l, int nonblock, int timeout_ms,
		      struct sdp_conn **out)
{
	/* A "both" listener wakes us for TCP arrivals too: the caller then
	 * tries the TCP side (-EAGAIN with *out NULL means "look there"). */
	struct timespec ts, *tsp = NULL;
	unsigned seq;
	int r;

	for (;;) {
		pthread_mutex_lock(&l->lock);
		seq = atomic_load(&l->seq);
		if (l->closed) {
			pthread_mutex_unlock(&l->lock);
			return -EINVAL;
		}
		if (!l->head)
			pend_drain_locked(l);	/* the backlog grew: listen() */
		if (l->head) {
			struct sdp_conn *c = l->head;

			l->head = c->acc_next;
			if (!l->head)
				l->tail = NULL;
			l->count--;
			l->accepted++;
			if (pend_drain_locked(l) && l->accept_waiters) {
				/* Another thread may take the next one. */
				atomic_fetch_add(&l->seq, 1);
				futex_wake_all(&l->seq);
			}
			update_ready_locked(l);
			pthread_mutex_unlock(&l->lock);
			*out = c;
			return 0;
		}
		if (l->shared && l->tl) {
			int r2 = take_shared_locked(l, out);

			if (r2 == 0) {
				l->accepted++;
				stat_update_locked(l);
			}
			pthread_mutex_unlock(&l->lock);
			if (r2 < 0)
				*out = NULL;
			return r2;
		}
		if (nonblock || l->tcp_fd >= 0) {
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
		/* pthread_cancel wakes us through the same word. */
		r = sdp_cancel_futex_wait(&l->seq, seq, tsp, 1);
		pthread_mutex_lock(&l->lock);
		l->accept_waiters--;
		pthread_mutex_unlock(&l->lock);
		if (r == -EINTR)
			return -EINTR;
		if (r == -ETIMEDOUT)
			return -EAGAIN;
	}
}

void sdp_listen_requeue(struct sdp_listen *l, struct sdp_conn *c)
{
	pthread_mutex_lock(&l->lock);
	if (l->closed) {
		pthread_mutex_unlock(&l->lock);
		sdp_conn_close(c, 1);
		return;
	}
	c->acc_next = l->head;
	l->head = c;
	if (!l->tail)
		l->tail = c;
	l->count++;
	l->accepted--;
	update_ready_locked(l);
	pthread_mutex_unlock(&l->lock);
}

void sdp_listen_close(struct sdp_listen *l)
{
	sdp_listen_stop(l, 0);
	sdp_listen_put(l);
}

int sdp_listen_stop(struct sdp_listen *l, int keep_tcp_fd)
{
	struct sdp_conn *c, *next;

	pthread_mutex_lock(&l->lock);
	if (l->closed) {
		pthread_mutex_unlock(&l->lock);
		return 0;
	}
	l->closed = 1;
	l->ready = NULL;
	if (l->stat_slot >= 0)
		sdp_stat_slot_free(l->stat_slot);
	l->stat_slot = -1;
	c = l->head;
	l->head = l->tail = NULL;
	l->count = 0;
	pend_reject_locked(l);
	atomic_fetch_add(&l->seq, 1);
	futex_wake_all(&l->seq);
	/* Free the port now; closing the fd also drops it from epoll. */
	if (l->tl)
		sdp_tp_default()->close_listener(l->tl);
	l->tl = NULL;
	if (l->tcp_fd >= 0 && keep_tcp_fd) {
		/* shutdown(): other threads may be in accept() on it; the
		 * number stays ours until the last reference (put). */
		sdp_real.shutdown(l->tcp_fd, SHUT_RD);
	} else if (l->tcp_fd >= 0) {
		sdp_real.close(l->tcp_fd);
		l->tcp_fd = -1;
	}
	pthread_mutex_unlock(&l->lock);
	/* Queued, never accepted: reset them, as TCP does. */
	for (; c; c = next) {
		next = c->acc_next;
		sdp_conn_close(c, 1);
	}
	sdp_progress_release_listener(l);
	return 1;
}

int sdp_bound_create(const struct sockaddr *sa, socklen_t len, unsigned flags,
		     struct sdp_listener **out, struct sockaddr_storage *local,
		     socklen_t *local_len)
{
	const struct sdp_transport_ops *ops = sdp_tp_default();
	int r = sdp_tp_bind(ops, sa, len, flags, out);

	if (r < 0)
		return r;
	*local_len = sizeof(*local);
	ops->bound_addr(*out, local, local_len);
	return 0;
}

void sdp_bound_close(struct sdp_listener *tl)
{
	sdp_tp_default()->close_listener(tl);
}

int sdp_bound_keep_claim(struct sdp_listener *tl, int fd)
{
	const struct sdp_transport_ops *ops = sdp_tp_default();

	if (ops->set_tcp_claim)
		return ops->set_tcp_claim(tl, fd);
	sdp_real.close(fd);
	return 0;
}
