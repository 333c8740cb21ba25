/* SPDX-License-Identifier: MIT */
/*
 * progress.h — the per-process progress thread: connections make progress
 * (queued sends drain when credits arrive, credit updates go out, closes
 * complete, listeners complete handshakes) while the application sleeps in
 * poll or does something else.  It sleeps in epoll on the transports' event
 * descriptors, so an idle process uses no CPU.
 */
#ifndef SDP_PROGRESS_H
#define SDP_PROGRESS_H

#include <stdint.h>

struct sdp_conn;
struct sdp_listen;

/* Start watching a connection that has a QP (takes a reference). */
int sdp_progress_add_conn(struct sdp_conn *c);
/* The callbacks a connection's QP reaches the progress thread with
 * (transport.h), its context the connection. */
extern const struct sdp_qp_events sdp_progress_qp_events;
/* Watch for the last descriptor of a held_elsewhere connection to close
 * (c->lock held, after sdp_conn_detach kept its readiness pair). */
void sdp_progress_watch_holders(struct sdp_conn *c);
/* Watch another descriptor for `c` (its events service `c`; the
 * connection must be registered), or stop. */
int sdp_progress_watch_fd(struct sdp_conn *c, int fd, uint32_t events);
void sdp_progress_unwatch_fd(int fd);
/* Watch the socket relay requests arrive on (relay.h). */
int sdp_progress_watch_relay(int fd);
/* c->lock held: the last descriptor of a connection we drive for other
 * processes is gone: close it (abort: with a reset). */
void sdp_progress_end_held_locked(struct sdp_conn *c, int abort);
/* Start watching a listener (takes a reference). */
int sdp_progress_add_listener(struct sdp_listen *l);
/* Stop watching `fd` (before closing it: a fork child may hold a copy,
 * which would keep it in the epoll set). */
void sdp_progress_unwatch(int fd);
/* The listener was closed (its fd is gone): drop the progress reference
 * once no event batch can name it any more. */
void sdp_progress_release_listener(struct sdp_listen *l);
/* Caller holds c->lock: make sure c's deadlines (Nagle, close) are seen. */
void sdp_progress_arm_timer(struct sdp_conn *c);
/* The same for a timer due at `deadline_ns`: the thread is woken only if
 * it would otherwise sleep past it. */
void sdp_progress_arm_timer_at(struct sdp_conn *c, uint64_t deadline_ns);
/* The same for a Nagle or cork hold, which may come with every response:
 * c->lock held, c->nagle_deadline_ns just set to `deadline_ns`. */
void sdp_progress_arm_hold(struct sdp_conn *c, uint64_t deadline_ns);
/* The same with a full service by `by_ns`: a closed connection with
 * nothing left to send, which only waits for the peer (whose hang-up
 * rings the thread anyway) or for its resources to be let go. */
void sdp_progress_arm_orphan(struct sdp_conn *c, uint64_t by_ns);
/* Have the thread re-examine orphans and timers soon. */
void sdp_progress_wake(void);

/* Visit every live connection (for sdpstat/tests); cb runs unlocked. */
void sdp_progress_foreach(void (*cb)(struct sdp_conn *c, void *arg), void *arg);
/* The process exits (exit() or _exit()): send what is queued, end what
 * the application left open, leave to other processes what they hold;
 * bounded to about a second. */
void sdp_progress_exit_flush(void);
/* The same from _exit(), which a signal handler may call: connections
 * whose lock is held are skipped. */
void sdp_progress_exit_flush_try(void);
/* After fork(), in a parent about to _exit(): leave every connection another
 * process holds to it (as the exit handler does). */
void sdp_progress_hand_over(void);

#endif
