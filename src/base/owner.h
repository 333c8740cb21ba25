/* SPDX-License-Identifier: MIT */
/*
 * owner.h — which process drives a connection after fork().
 *
 * A connection's state lives in process memory, and fork() copies it: two
 * processes polling one queue pair would each take some of the messages and
 * corrupt the stream.  So every connection has an owner slot in a region
 * shared by the whole process family (MAP_SHARED|MAP_ANONYMOUS, inherited
 * by fork, unreachable by anyone else).  Exactly one process owns a
 * connection at a time.  Another process that wants to use it *asks*: it
 * names itself in the slot and wakes the owner, which writes the live state
 * to the connection's hand-over mailbox (engine/handover.c) and releases
 * the slot; the asker then claims it and goes on from that state.  Nothing
 * here needs more than atomics and a futex: a sandboxed child (seccomp)
 * can claim.
 */
#ifndef SDP_BASE_OWNER_H
#define SDP_BASE_OWNER_H

#include <stdint.h>

/* A new owner slot set to this process; -1 if none could be had (then the
 * connection is simply not fork-aware). */
int sdp_owner_alloc(void);
/* 1 if this process owns the slot (or slot < 0). */
int sdp_owner_is_me(int slot);
/* The slot's owner now: a pid, or 0 when nobody owns it (released). */
uint32_t sdp_owner_get(int slot);
/* Take a released slot: 1 taken (the caller adopts the connection), 0
 * already ours, -EBUSY another process owns it. */
int sdp_owner_take(int slot);
/* The same from an owner that died without letting go. */
int sdp_owner_take_from(int slot, uint32_t dead);
/* Ask the owner for the connection: names this process in the slot. */
void sdp_owner_ask(int slot);
/* The pid of a process that asked for the connection, other than this
 * one; 0 if none. */
uint32_t sdp_owner_asked(int slot);
/* The owner declines for now (a call of its own is inside), or not. */
void sdp_owner_set_busy(int slot, int busy);
int sdp_owner_busy(int slot);
/* Wait up to `ms` while the slot's owner is still `owner`. */
void sdp_owner_wait_change(int slot, uint32_t owner, unsigned ms);
/* The owner lets go: the generation moves on (its mailbox, if it wrote
 * one, carries the new generation) and waiting askers wake.  Returns the
 * new generation. */
uint32_t sdp_owner_release(int slot);
/* The generation the last release left (what a valid mailbox carries). */
uint32_t sdp_owner_gen(int slot);
/* The generation a release would give next (for the mailbox). */
uint32_t sdp_owner_next_gen(int slot);
/* The connection is gone here (frees the slot only if we own it). */
void sdp_owner_free(int slot);
/* Is process `pid` still there?  (Only on a slow path: an owner that does
 * not answer for a second.) */
int sdp_owner_alive(uint32_t pid);
/* The connection was closed for good by the process that drove it (its
 * last descriptor elsewhere closed first). */
int sdp_owner_gone(int slot);

/* exec relay (relay.h).  A process about to exec asks the owner to relay
 * the connection for its new image: 0 (asked: send the request, then
 * wait), -ENOTSUP (nobody else owns it), -EBUSY (relayed already, or
 * another process is asking). */
int sdp_owner_relay_ask(int slot);
/* Wait up to `ms` for the owner to accept; withdraws the request if it did
 * not.  1 accepted, 0 not. */
int sdp_owner_relay_wait(int slot, unsigned ms);
/* Owner: accept `asker`'s request (1), unless it was withdrawn (0). */
int sdp_owner_relay_accept(int slot, uint32_t asker, int in_place);
/* Owner: relay in place on its own initiative (it hands the descriptor to
 * another process): the family sees the slot relayed in place.  1 done, 0
 * if another process's request is under way.  No slot (-1: none was left,
 * or no region): 1, and the caller keeps the mark itself
 * (conn.h, relayed_here). */
int sdp_owner_relay_self(int slot);
/* Owner: refuse `asker`'s request, so that it stops waiting. */
void sdp_owner_relay_refuse(int slot, uint32_t asker);
/* Is the connection relayed (for good)? */
int sdp_owner_relayed(int slot);
/* ... in place: its descriptor is, for every process, the plain socket it
 * names (relay.h). */
int sdp_owner_relayed_in_place(int slot);
/* Was any connection of the family relayed in place?  One load: the fast
 * path's test before it looks at a socket's connection. */
int sdp_owner_any_in_place(void);
#endif
