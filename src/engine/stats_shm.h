/* SPDX-License-Identifier: MIT */
/*
 * stats_shm.h — the per-process publisher behind sdpstat: one record per
 * socket (SDP connections, SDP listeners, and sockets the switch left on
 * TCP, with the reason) in /dev/shm/libsdp-stat.<pid>.  Layout, locking
 * and freshness rules: engine/stats_layout.h.
 *
 * The file is created on the first slot allocation and removed at exit;
 * a fork child gets its own copy (same slots, its own pid).  SDP_STAT=0 in
 * the environment turns publishing off; every function then does nothing
 * (alloc returns -ENODEV).
 *
 * Cost: updates are plain stores under one process-wide mutex (never
 * contended for long, no system call).  Slot functions accept any slot
 * number, including the negative results of a failed alloc, and then do
 * nothing, so callers need no checks.
 */
#ifndef SDP_STATS_SHM_H
#define SDP_STATS_SHM_H

#include <stdint.h>
#include <sys/socket.h>

struct sdp_conn;
struct sdp_listen;

/* ---- slots (for the socket switch) ---- */

/* A record for application descriptor `fd` (-1 if not known yet).
 * Returns the slot (>= 0) or -errno (-ENOSPC: table full). */
/* This process stops reporting (about to enter a seccomp sandbox, where
 * the exit's unlink would be refused): its file goes now. */
void sdp_stat_leave(void);
int sdp_stat_slot_alloc(int fd, int listener);
void sdp_stat_slot_free(int slot);
void sdp_stat_slot_set_fd(int slot, int fd);
/* Why a socket that could have been SDP is TCP ("" clears).  Truncated
 * to 127 bytes. */
void sdp_stat_slot_set_reason(int slot, const char *reason);
void sdp_stat_slot_set_transport(int slot, const char *name);
void sdp_stat_slot_set_state(int slot, const char *state);
/* Either address may be NULL (unchanged). */
void sdp_stat_slot_set_addrs(int slot, const struct sockaddr *local,
			     const struct sockaddr *remote);
/* Snapshot of an SDP connection: state, transport, addresses, counters,
 * credits.  Caller holds c->lock (or knows c is not changing). */
void sdp_stat_slot_update_conn(int slot, const struct sdp_conn *c);
/* Snapshot of an SDP listener (accept counters); caller holds l->lock. */
void sdp_stat_slot_update_listen(int slot, const struct sdp_listen *l);

/* ---- connections (engine: conn.c, progress.c) ---- */

/* sdp_conn_alloc: give c a record (fd unknown).  Failures are silent. */
void sdp_stat_conn_attach(struct sdp_conn *c);
/* conn_free: release c's record. */
void sdp_stat_conn_detach(struct sdp_conn *c);
/* c's slot, or -1 (for the socket switch: set fd, reason). */
int sdp_stat_conn_slot(const struct sdp_conn *c);

/* ---- progress thread hooks (progress.c) ---- */

/* Register the wake socket in the progress thread's epoll, with `tag` as
 * data.ptr (now, or as soon as the file exists). */
void sdp_stat_watch(int epfd, void *tag);
/* The wake socket was readable: drain it, refresh on the next tick. */
void sdp_stat_poked(void);
/* Cap the epoll timeout (ms, -1 = none) while a reader wants updates. */
int sdp_stat_progress_timeout(int tmo);
/* After each batch: refresh every connection's record if asked to. */
void sdp_stat_progress_tick(void);

#endif /* SDP_STATS_SHM_H */
