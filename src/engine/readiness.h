/* SPDX-License-Identifier: MIT */
/*
 * readiness.h — every SDP socket is a real file descriptor whose kernel
 * readiness mirrors SDP state, so epoll/poll/select work unintercepted.
 *
 * The application's descriptor is one end (app_fd) of an AF_UNIX stream
 * socketpair; the library holds the other end (lib_fd).  Until a wait in
 * the kernel may name app_fd, nobody reads its readiness, so it starts as
 * a lone AF_UNIX socket (`lone`) and the pair is put in its place, under
 * the same number, only then (sdp_ready_pair): a connection used only by
 * blocking calls never holds lib_fd.  We steer what the kernel reports for
 * app_fd:
 *   readable  <- one token byte queued from lib_fd to app_fd
 *   writable  <- app_fd's send queue not full (we fill it to turn POLLOUT off)
 *   POLLPRI   <- one MSG_OOB byte queued from lib_fd (urgent data pending)
 *   EOF       <- shutdown(lib_fd, SHUT_WR): POLLIN|POLLRDHUP, permanently
 *   reset     <- lib_fd closed with unread bytes: POLLERR|POLLHUP|POLLIN
 *                (and shut down both ways first, for POLLHUP at once even
 *                while the peer's process still holds a copy of lib_fd)
 * The readable byte may also come from the peer's process (appwake: it
 * holds a copy of lib_fd); `tokens` counts the bytes we know of, so that a
 * byte still in flight when we drain is drained later, not left behind to
 * make app_fd readable with nothing to read.
 * Each transition costs one or two non-blocking syscalls; nothing is done
 * when the state does not change.  Callers serialise with the owner's lock.
 */
#ifndef SDP_READINESS_H
#define SDP_READINESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * User-space readiness (socket/epfast.c): the layer above reports
 * "readable" for an epoll set from user space instead of through the
 * kernel mirror.  The socket layer owns and writes these fields, under the
 * connection's lock unless noted; the engine reads them to decide what to
 * mirror into the kernel and how loudly to arm, and clears `idle` at every
 * readiness update.
 */
struct sdp_ready_user {
	unsigned on:1;		/* "readable" reported from user space */
	unsigned off:1;		/* never again (fork, nesting, dup) */
	unsigned et:1;		/* its registration is EPOLLET */
	uint64_t seen_end;	/* rx_end at the last EPOLLET report */
	/* Threads asleep in the kernel's epoll_wait on the (one) set this
	 * connection is registered in: while nonzero, "readable" is
	 * mirrored and arms are loud.  Per connection, not per process: a
	 * multi-threaded event loop (wrk: a set per thread) would otherwise
	 * have every thread's connections armed loudly whenever one thread
	 * sleeps, and pay a byte and its drain per message. */
	int sleepers;
	/* Read by epoll_wait without the lock: the connection had nothing
	 * to report when the peer's arrival counter (*arrivals) read
	 * (uint32_t)idle; bit 32 set.  0: look under the lock. */
	_Atomic uint64_t idle;
	const _Atomic uint32_t *_Atomic arrivals;
};

struct sdp_ready {
	int app_fd;		/* what the application holds */
	int lib_fd;		/* our end; -1 while lone or once closed
				 * (reset) */
	uint64_t app_ino;	/* app_fd's inode, from the first fork on: names
				 * the pair in a child, under any number */
	unsigned readable:1;	/* token queued */
	unsigned unwritable:1;	/* app_fd send queue filled */
	unsigned urgent:1;	/* MSG_OOB byte queued */
	unsigned eof:1;		/* SHUT_WR done on lib_fd */
	unsigned reset:1;	/* lib_fd closed with unread data */
	unsigned sndbuf_small:1; /* app_fd's send buffer shrunk */
	unsigned tokens;	/* readable bytes queued or in flight to
				 * app_fd: ours, and the peer's (appwake) */
	/* Set for good once a wait in the kernel may name app_fd: poll,
	 * select or epoll called on it, O_ASYNC, a fork (either process
	 * may poll it), a holder elsewhere.  Until then the application
	 * only learns of news by calling in, so the peer need not write the
	 * readiness byte (appwake.h).  Written without the owner's lock. */
	atomic_bool kwatched;
	/* app_fd is a lone socket, no pair yet: the mirror is not kept
	 * (nobody reads it).  Cleared once, under the lock that serialises
	 * the mirror; read without it. */
	atomic_bool lone;
	struct sdp_ready_user user;
};

enum {
	SDP_READY_IN = 0x1,
	SDP_READY_OUT = 0x2,
	SDP_READY_PRI = 0x4,
	SDP_READY_EOF = 0x8,
	SDP_READY_ERR = 0x10,
	SDP_READY_PULSE = 0x20,	/* readable, and queue one more token (edge) */
};

/* The pair stops mirroring and becomes a plain stream (relay.h, in
 * place): the mirror's bytes leave it (the tokens queued to the
 * application's end `app_end`, waited for up to `wait_ms` when one is
 * still in flight; the filler; an urgent byte) and the application's send
 * buffer is a normal one again.  Nothing may write tokens any more (the
 * peer's wake-ups disarmed).  0, or -errno (-EAGAIN: a token did not come,
 * or the application took some: unknown state). */
int sdp_ready_hand_over(struct sdp_ready *r, int app_end, unsigned wait_ms);

/* Create app_fd, lone, with O_NONBLOCK/O_CLOEXEC per `sock_flags`
 * (SOCK_NONBLOCK, SOCK_CLOEXEC).  Returns 0 or -errno. */
int sdp_ready_init(struct sdp_ready *r, int sock_flags);
/* Before anything may read app_fd's readiness or share its file (a wait in
 * the kernel, a dup, a fork, a signal owner, a listener): put the pair's
 * application end in place of the lone socket, under the same number and
 * with its descriptor and status flags.  The mirror starts empty (nothing
 * readable, writable): the caller brings it in line (sdp_ready_set).  The
 * caller holds the lock that serialises the mirror and makes sure app_fd
 * still names this socket.  0 (also when paired already), or -errno: the
 * socket stays lone. */
int sdp_ready_pair(struct sdp_ready *r);
/* Record app_fd's inode (app_ino) if not yet known: the name of the
 * pair's file in another process, under any number (exec.c, relay.c). */
void sdp_ready_note_ino(struct sdp_ready *r);
/* Bring the kernel state in line with `want` (SDP_READY_* mask). */
void sdp_ready_set(struct sdp_ready *r, unsigned want);
/* The peer took our appwake arm: a readable byte is queued or about to be
 * (written by the peer's process into lib_fd; see transport.h app_arm). */
void sdp_ready_peer_token(struct sdp_ready *r);
/* Close the library end (the application closes app_fd itself). */
void sdp_ready_release(struct sdp_ready *r);

#endif
