/* SPDX-License-Identifier: MIT */
/*
 * appwake.h — let the peer wake our application directly (one wake-up per
 * message for programs that sleep in epoll/poll/select on SDP sockets).
 *
 * The transport mechanism is in transport.h (struct sdp_app_wake_ops, a
 * provider's optional app_wake table); here is the engine's policy: when to hand over our
 * readiness descriptor, when to arm, and when to stop.  The arm is only set
 * when the application has nothing to read and nothing else needs the
 * progress thread on the next message (no queued send waiting for credits,
 * no orphan, no close in progress): a data message then needs no one but
 * the application, which polls the ring itself in recv().
 */
#ifndef SDP_APPWAKE_H
#define SDP_APPWAKE_H

struct sdp_conn;

#include <stdatomic.h>
#include <stdint.h>

/* Set by socket/epfast.c around the arms it makes before sleeping: which
 * wait they are for (transport.h app_sleep_id), else 0. */
extern __thread uint64_t sdp_appwake_sleep_id;

/* True if "readable" must be left out of the kernel mirror of `c`. */
int sdp_appwake_user_locked(const struct sdp_conn *c);
/* True if an application thread sleeps in the kernel on the connection's
 * epoll set (counted on the connection, or in the set's wake word). */
int sdp_appwake_set_sleeps_locked(const struct sdp_conn *c);
/* The connection's epoll set has wake word `handle` (-1: none; socket/
 * epfast.c): quiet arms defer to it where the transport can.  Returns 1
 * if that changed (the next readiness update re-arms with it). */
int sdp_appwake_word_locked(struct sdp_conn *c, int handle);
/* Without the lock: the word the quiet arm is keyed to now, or -1. */
int sdp_appwake_armed_word(const struct sdp_conn *c);

/* c->lock held: a wait in the kernel may name the connection's
 * descriptor from now on (readiness.h, kwatched).  Returns 1 if that is
 * news: the caller re-decides the arm (sdp_conn_update_ready_locked), so
 * that the peer writes the readiness byte before that wait sleeps. */
int sdp_appwake_kernel_watch_locked(struct sdp_conn *c);

/* c->lock held, a passive connection not yet accepted: accept() takes in
 * whatever came (its readiness update), so until then the peer's messages
 * need no one, not even the progress thread. */
void sdp_appwake_arm_queued_locked(struct sdp_conn *c);

/* Before computing readiness: take back the arm.  Returns 1 if the peer
 * consumed it: its byte is accounted as a readable token, and the message
 * it announces must be taken from the CQ before readiness is computed
 * (else the byte would be drained with the message still unseen). */
int sdp_appwake_disarm_locked(struct sdp_conn *c);
/* After readiness is in the kernel (`mask`, SDP_READY_*): arm if useful.
 * Returns 1 if a message arrived unannounced meanwhile: poll, then again. */
int sdp_appwake_arm_locked(struct sdp_conn *c, unsigned mask);
/* The calling thread is about to busy-poll this connection (SDP_SPIN_US)
 * in a blocking call: a loud arm would make the peer write a readiness
 * byte for a message we are looking for anyway, and us drain it.  Switch
 * it to quiet; the call's final readiness update re-decides. */
void sdp_appwake_spin_locked(struct sdp_conn *c);
/* For socket/epfast.c, which reaches the transport only through here. */
/* The connection's transport can wake the application itself. */
int sdp_appwake_capable_locked(const struct sdp_conn *c);
/* The counter the transport moves for every message that arrives, or NULL
 * (transport.h app_arrivals). */
const _Atomic uint32_t *sdp_appwake_arrivals_locked(struct sdp_conn *c);
/* Quietly armed, and the arm re-made with nothing waiting in the ring
 * (transport.h app_arm, SDP_APP_ARM_QUIET): nothing new since the last
 * look. */
int sdp_appwake_quiet_idle_locked(struct sdp_conn *c);
/* An application thread goes to sleep in the kernel (a token for _end), is
 * back, or looks in user space: the transports that need to know
 * (multi.h). */
int sdp_appwake_sleep_begin(void);
void sdp_appwake_sleep_end(int token);
void sdp_appwake_look(void);
/* An epoll set's wake word (transport/wakeword.h): a handle or -1, freed,
 * and its sleepers counted (delta +1 / -1). */
int sdp_appwake_set_word_alloc(void);
void sdp_appwake_set_word_free(int handle);
void sdp_appwake_set_word_sleep(int handle, int delta);

/* We will send no more data (DisConn/AbortConn next, or reset): forget the
 * peer's descriptor so that its socketpair end is the peer's alone. */
void sdp_appwake_stop_locked(struct sdp_conn *c);

#endif
