/* SPDX-License-Identifier: MIT */
/*
 * owner.h — which process drives a connection after fork().
 *
 * A connection's state lives in process memory, and fork() copies it: two
 * processes polling one queue pair would each take some of the messages and
 * corrupt the stream.  So every connection has an owner word in a region
 * shared by the whole process family (MAP_SHARED|MAP_ANONYMOUS, inherited
 * by fork, unreachable by anyone else).  Exactly one process owns a
 * connection; another may take it over only once the owner released it
 * (closed its descriptor while the other still held one) or died.  Using a
 * connection another live process owns fails with EBADFD: an error, never
 * corrupt data.
 */
#ifndef SDP_OWNER_H
#define SDP_OWNER_H

/* A new owner word set to this process; -1 if none could be had (then the
 * connection is simply not fork-aware). */
int sdp_owner_alloc(void);
/* 0: this process owns it; 1: it just took it over (adopt the connection);
 * -EBADFD: another live process owns it. */
int sdp_owner_claim(int slot);
/* Wait at most wait_ms while another live process owns the slot.  After
 * fork() the child's first use of a connection races the parent's close()
 * of its copy (fork-per-connection servers): give the owner a moment to
 * release it before sdp_owner_claim() calls the child a second user. */
int sdp_owner_wait_released(int slot, unsigned wait_ms);
/* This process no longer uses it; another may claim it. */
void sdp_owner_release(int slot);
/* The connection is gone (only the owner, or nobody, may free it). */
void sdp_owner_free(int slot);
/* 1 if this process owns the slot (or slot < 0). */
int sdp_owner_is_me(int slot);
#endif
