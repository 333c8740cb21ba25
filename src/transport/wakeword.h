/* SPDX-License-Identifier: MIT */
/*
 * wakeword.h — one word per sleeping epoll set, readable by peer processes.
 *
 * Why.  An event loop with many SDP connections (wrk: 125 per thread) used
 * to arm every one of them loudly before each sleep in the kernel, and
 * quietly again after it: two locked updates of a line the peer also
 * writes, per connection, per sleep.  With a wake word the connections of
 * a set stay armed once, pointing at the set's word, and a sleep is one
 * store: the peer that publishes a message for such a connection reads the
 * word and writes the readiness byte only while a thread of the set sleeps
 * (shm_appwake.c, SDP_APP_ARM_QUIET with a word).
 *
 * Layout.  One memfd page array per process, sealed so that nobody can
 * grow or shrink it and nobody but this process can write it (the peer
 * maps it read-only: a hostile peer can read whether our sets sleep,
 * nothing more, and cannot make them miss a wake-up).  Slot s is a 64-byte
 * line holding a 64-bit word: the number of threads asleep on the set in
 * the low 16 bits, a generation bumped by every sleep above them (a peer
 * that already woke this sleep, for another connection of the set, skips
 * its byte: the woken thread looks at the whole set before sleeping again).
 *
 * Ordering.  The sleeper adds itself (seq_cst), then looks at every
 * connection's arrival counter; a peer publishes (seq_cst), then reads the
 * word.  One of them sees the other, as with the per-connection arms.
 *
 * fork(): the child gets a page of its own on first use (its sets would
 * otherwise share slots with the parent's).
 */
#ifndef SDP_TRANSPORT_WAKEWORD_H
#define SDP_TRANSPORT_WAKEWORD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SDP_WAKEWORD_SLOTS	1024
#define SDP_WAKEWORD_STRIDE	8	/* uint64_t per slot: a cache line */
#define SDP_WAKEWORD_BYTES	(SDP_WAKEWORD_SLOTS * SDP_WAKEWORD_STRIDE * 8)
#define SDP_WAKEWORD_SLEEPERS	0xffffu	/* mask of the sleeper count */

/* A handle (the slot and which page) for a new epoll set, or -1 (none left, or no page: the set then
 * arms its connections one by one, as before). */
int sdp_wakeword_alloc(void);
void sdp_wakeword_free(int slot);

/* A thread of the set is about to sleep (+1, followed by a full fence) or
 * is back (-1). */
void sdp_wakeword_sleep(int slot, int delta);
/* Some thread sleeps on the set. */
bool sdp_wakeword_sleeping(int slot);

/* The page's descriptor, to be handed to a peer (read-only for it), or -1
 * if this process can have none; *gen names the page, and *dev, *ino (if
 * not NULL; 0 without a page) its file, as a peer checks it. */
int sdp_wakeword_share(int *gen, uint64_t *dev, uint64_t *ino);
/* Handle h is a slot of the page named gen (the one a peer was given). */
bool sdp_wakeword_of_gen(int h, int gen);

/* Peer side: the word of `slot` in a page mapped from a peer's descriptor
 * (NULL: not mapped, or slot out of range). */
static inline const _Atomic uint64_t *
sdp_wakeword_at(const _Atomic uint64_t *page, uint32_t slot)
{
	if (!page || slot >= SDP_WAKEWORD_SLOTS)
		return NULL;
	return page + (size_t)slot * SDP_WAKEWORD_STRIDE;
}

/* Peer side: map a descriptor a peer sent as its wake page, after checking
 * that it is one (a sealed memfd of the right size: a shrinkable one could
 * SIGBUS us).  Mappings of the same page are shared and counted.  Returns
 * the page or NULL; the descriptor is not consumed. */
const _Atomic uint64_t *sdp_wakeword_map_peer(int fd);
void sdp_wakeword_unmap_peer(const _Atomic uint64_t *page);
/* The peer page of file (dev, ino) if one is mapped already (a
 * connection to the same process had it): a reference, as
 * sdp_wakeword_map_peer gives, with no descriptor needed.  NULL if
 * none. */
const _Atomic uint64_t *sdp_wakeword_peer_mapped(uint64_t dev, uint64_t ino);

#endif
