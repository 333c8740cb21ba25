/* SPDX-License-Identifier: MIT */
/*
 * listener.h — a listening SDP socket: the progress thread completes the
 * passive side of each handshake (Hello -> HelloAck) as requests arrive, so
 * connect() never waits for the server to call accept() (as with TCP), and
 * queues established connections up to the backlog.
 *
 * Shared listeners (fork): once a listener is inherited by another process,
 * that per-process queue could serve only one of them.  sdp_listen_share()
 * (called before fork) stops the eager handshakes; from then on accept()
 * takes requests straight from the transport's kernel queue, which every
 * process of the family holds, and completes the handshake itself.
 */
#ifndef SDP_LISTENER_H
#define SDP_LISTENER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "engine/readiness.h"
#include "transport/transport.h"

struct sdp_conn;

struct sdp_listen {
	pthread_mutex_t lock;
	atomic_int refs;
	atomic_uint seq;		/* futex word: bumped on new arrivals */
	struct sdp_listener *tl;	/* transport binding (owned) */
	int backlog;
	struct sdp_conn *head, *tail;	/* established, not yet accepted */
	uint32_t count;
	/* Requests that found the queue full, not yet answered (listener.c) */
	struct sdp_listen_pend *pend_head, *pend_tail;
	uint32_t npend;
	struct sdp_ready *ready;	/* NULL once the socket is closed */
	int tcp_fd;			/* "both": kernel TCP listener, or -1 */
	int accept_waiters;		/* threads blocked in accept */
	unsigned closed:1;
	unsigned shared:1;		/* requests taken by accept() (fork) */
	struct sdp_listen *rel_next;	/* progress release list */
	uint64_t accepted, refused;	/* stats */
	int stat_slot;			/* sdpstat record, or -1 */
};

/* A bound SDP address at the default transport (bind() before listen()
 * or connect()): flags SDP_BIND_* (transport.h); *local gets the address
 * as bound (the port chosen for port 0). */
int sdp_bound_create(const struct sockaddr *sa, socklen_t len, unsigned flags,
		     struct sdp_listener **out, struct sockaddr_storage *local,
		     socklen_t *local_len);
void sdp_bound_close(struct sdp_listener *tl);
/* An SDP-only listener keeps the kernel TCP socket `fd`, bound to its
 * port, as its claim (transport.h set_tcp_claim), where the transport
 * keeps one; else `fd` is closed.  Either way `fd` is no longer the
 * caller's. */
int sdp_bound_keep_claim(struct sdp_listener *tl, int fd);
/* A wait in the kernel names the listener's descriptor (its `ready`
 * is kwatched now): its token starts telling what is queued. */
void sdp_listen_kernel_watch(struct sdp_listen *l);
/* Takes ownership of `tl` (already bound); starts listening. */
int sdp_listen_create(struct sdp_listener *tl, int backlog,
		      struct sdp_ready *ready, struct sdp_listen **out);
void sdp_listen_set_backlog(struct sdp_listen *l, int backlog);
/* Pop an established connection (the caller owns the reference).  On a
 * shared listener it takes one from the kernel queue; -EAGAIN with *out NULL
 * then means "wait on the application's descriptor". */
int sdp_listen_accept(struct sdp_listen *l, int nonblock, int timeout_ms,
		      struct sdp_conn **out);
/* accept() could not take `c` (no descriptor for it): back to the head of
 * the queue (reset if the listener closed meanwhile). */
void sdp_listen_requeue(struct sdp_listen *l, struct sdp_conn *c);
/* Socket closed: refuse further requests, reset queued connections. */
void sdp_listen_close(struct sdp_listen *l);
/* Stop listening, as shutdown(SHUT_RD) of a TCP listener does: refuse new
 * connections, reset the queued ones, wake every accept() (-EINVAL from
 * now on).  Idempotent; sdp_listen_close() stops too, then drops the
 * reference.  keep_tcp_fd: a "both" listener's kernel socket is shut
 * down, not closed, until the last reference (other threads may be in
 * accept() on it); close() frees its port at once instead.  Returns 1 if
 * this call stopped it, 0 if it was stopped already. */
int sdp_listen_stop(struct sdp_listen *l, int keep_tcp_fd);
void sdp_listen_get(struct sdp_listen *l);
void sdp_listen_put(struct sdp_listen *l);
int sdp_listen_fd(struct sdp_listen *l);
/* sdpstat: publish a row for the listener on application descriptor `fd`
 * bound to `local` (best effort). */
void sdp_listen_stat_attach(struct sdp_listen *l, int fd,
			    const struct sockaddr *local);
/* Socket switch: also accept kernel TCP clients from `fd` (a listening TCP
 * socket, owned by the listener from now on).  Its readiness reaches the
 * application through the listener's epoll descriptor (socket/lsnfd.c). */
int sdp_listen_add_tcp(struct sdp_listen *l, int fd);
/* Before fork: make the listener shared.  `epfd` is the application's
 * descriptor (an epoll set): the transport's kernel queue is added to it and
 * `token_fd` (the per-process queue's readiness) removed.  0 or -errno
 * (-EOPNOTSUPP: the transport cannot share). */
int sdp_listen_share(struct sdp_listen *l, int epfd, int token_fd);
/* In a fork() child: the queued connections are the parent's; forget our
 * copies without touching them. */
void sdp_listen_after_fork_child(struct sdp_listen *l);
/* Accept one kernel TCP connection if any: fd, -EAGAIN, or -errno. */
int sdp_listen_accept_tcp(struct sdp_listen *l, int flags);
/* Progress thread: handle pending requests.  1 = unregister and release. */
int sdp_listen_service(struct sdp_listen *l);

#endif
