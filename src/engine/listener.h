/* SPDX-License-Identifier: MIT */
/*
 * listener.h — a listening SDP socket: the progress thread completes the
 * passive side of each handshake (Hello -> HelloAck) as requests arrive, so
 * connect() never waits for the server to call accept() (as with TCP), and
 * queues established connections up to the backlog.
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
	struct sdp_ready *ready;	/* NULL once the socket is closed */
	int tcp_fd;			/* "both": kernel TCP listener, or -1 */
	atomic_int tcp_pending;		/* TCP connections may be waiting */
	int accept_waiters;		/* threads blocked in accept */
	unsigned closed:1;
	struct sdp_listen *rel_next;	/* progress release list */
	uint64_t accepted, refused;	/* stats */
};

/* Takes ownership of `tl` (already bound); starts listening. */
int sdp_listen_create(struct sdp_listener *tl, int backlog,
		      struct sdp_ready *ready, struct sdp_listen **out);
void sdp_listen_set_backlog(struct sdp_listen *l, int backlog);
/* Pop an established connection (the caller owns the reference). */
int sdp_listen_accept(struct sdp_listen *l, int nonblock, int timeout_ms,
		      struct sdp_conn **out);
/* Socket closed: refuse further requests, reset queued connections. */
void sdp_listen_close(struct sdp_listen *l);
void sdp_listen_get(struct sdp_listen *l);
void sdp_listen_put(struct sdp_listen *l);
int sdp_listen_fd(struct sdp_listen *l);
/* Socket switch: also accept kernel TCP clients from `fd` (a listening TCP
 * socket, owned by the listener from now on). */
int sdp_listen_add_tcp(struct sdp_listen *l, int fd);
/* Progress thread: the TCP side became readable (edge). */
void sdp_listen_tcp_ready(struct sdp_listen *l);
/* Accept one kernel TCP connection if any: fd, -EAGAIN, or -errno. */
int sdp_listen_accept_tcp(struct sdp_listen *l, int flags);
/* Progress thread: handle pending requests.  1 = unregister and release. */
int sdp_listen_service(struct sdp_listen *l);

#endif
