/* SPDX-License-Identifier: MIT */
/*
 * handover.h — a connection changes process within a fork family.
 *
 * fork() copies a connection's state into the child, and from then on the
 * owner's copy alone is live (owner.h).  When another process of the
 * family uses the connection, the owner writes its live state into the
 * connection's mailbox, a MAP_SHARED region created before the fork and
 * so mapped at the same address in every process that holds the
 * connection, and lets go; the new owner loads it over its own copy.
 * Nothing is lost or delivered twice, whatever the owner's progress
 * thread was doing at the fork or since.  docs/DESIGN.md, "fork()".
 */
#ifndef SDP_HANDOVER_H
#define SDP_HANDOVER_H

struct sdp_conn;

/* Once: give every connection a mailbox at each fork (atfork prepare). */
void sdp_handover_init(void);
/* Make sure this process drives `c`: take it over (asking its owner and
 * waiting for it) if another process of the family does.  0, or -EBADFD
 * when the owner cannot let go (it is inside a call on the connection
 * for longer than SDP_FORK_CLAIM_MS, or its transport cannot move). */
int sdp_handover_claim(struct sdp_conn *c);
/* Owner, c->lock held: another process asked for `c` and nothing of ours
 * is in flight on it: write the mailbox and let go.  1 if it was handed
 * over (the caller stops servicing it), else 0. */
int sdp_handover_serve_locked(struct sdp_conn *c);
/* Owner, inside a call on `c` that sleeps (c->lock held, after its
 * wait): another process asked for `c`; hand it over if this call is the
 * only thing of ours on it.  1 if handed over: the call returns what it
 * has done, or -ERESTART when nothing (the socket layer claims the
 * connection back and calls again). */
int sdp_handover_yield_locked(struct sdp_conn *c);
/* Owner, c->lock held: let go of `c` for good (our descriptor closed,
 * another process holds one), leaving its state to the next taker. */
void sdp_handover_leave_locked(struct sdp_conn *c);
/* The connection is freed in this process. */
void sdp_handover_free(struct sdp_conn *c);
#endif
