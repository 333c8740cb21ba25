// SPDX-License-Identifier: MIT
/*
 * shm_keep.c — a connection's two segments kept for the next connection
 * between the same two processes.
 *
 * Setting a connection up creates, seals, maps and faults in a segment on
 * each side and unmaps both at the end (munmap's TLB shootdown in a
 * threaded process); for a connection per request that is a large share of
 * its cost (docs/DESIGN.md, "Connection setup cost").  So when a
 * connection ends, each side keeps the pair: its own segment and its
 * mapping of the peer's, naming the peer process by the pid the kernel
 * stamped on its CM message.
 *
 * The client's next connection to the same address takes its pair when
 * the listener has kept its side too (the listener marks its segment
 * `kept`, after its QP on the pair is gone): it resets its own segment,
 * posts its receives there, and its Hello passes no memfd but names both
 * segments by their nonces.  A listener process that keeps that pair for
 * that client pid, whose client wrote its last word in it (`released`,
 * after its QP was gone), resets its own segment and takes both; its
 * Accept names them instead of passing a memfd.  Otherwise it answers
 * RETRY, and the client maps a new file over its segment in place, writes
 * the receives posted there again from its own records, and sends its
 * Hello again with it: so a segment is never given to a process that did
 * not share it before, and nothing a process that shared it wrote there
 * is carried over.  The pair named is then not lost: the client's segment
 * stays mapped elsewhere and goes back to the pool.
 *
 * A listener that processes share (a pre-forking server): which one
 * accepts is not known, so beside the newest pair the Hello names the
 * newest kept with each other process of the listener (SHM_KEEP_ALTS),
 * every client segment of them reset and holding the receives posted.
 * The process that accepts takes its own; if that is not the first, the
 * client moves that pair's segment to its segment's address (mremap) in
 * its place, and the first goes back to the pool, as do the others: the
 * answer shows no other process took them.  Where a quarter of the pairs
 * named are answered RETRY, the client names pairs there for a while only
 * when it keeps them with two processes or more, else only the listener's
 * segment beside a new one of its own, which the listener takes or
 * ignores at no cost.
 *
 * Who can write into a kept segment: only the two processes that shared
 * it (and fork() children that inherited a mapping of it: their family),
 * so no third process ever shares a connection's memory.  QPs that a
 * fork() shared are never kept; a fork() child forgets what its parent
 * kept.  Bounds: SHM_KEEP_PER_ROLE pairs per role, the oldest given up
 * first, and none idle for more than a second when the pool is next used
 * (a few aged out at each use).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/atfork.h"
#include "transport/shm/shm.h"

#define KEEP_PER_ROLE SHM_KEEP_PER_ROLE
#define KEEP_AGE_BATCH 8	/* pairs aged out per use of the pool */
#define KEEP_IDLE_MS 1000
#define KEEP_DESTS 8		/* addresses whose RETRY rate is known */
#define KEEP_DEST_WINDOW 32	/* pairs named, over which it is counted */
#define KEEP_OFF_MS 10000	/* no pair named there for this long after
				 * a quarter of them were answered RETRY */

struct kept {
	bool used;
	bool client;		/* the client's side of a pair; else the
				 * listener's */
	struct shm_seg mine;	/* our own segment */
	struct shm_seg theirs;	/* our mapping of the peer's */
	bool mr_used;		/* mine's MR table was written */
	pid_t peer;		/* the process it serves again */
	struct shm_addr dst;	/* client: the address dialled */
	uint64_t since_ms;
	uint64_t order;		/* when kept, among the others */
};

struct dest {
	struct shm_addr dst;
	unsigned named, retried;	/* pairs named there, RETRYs */
	uint64_t used_ms;
	uint64_t off_until_ms;		/* no pair named before this */
};

static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept keep_tab[2 * KEEP_PER_ROLE];
static struct dest keep_dests[KEEP_DESTS];
static pthread_once_t keep_once = PTHREAD_ONCE_INIT;
static atomic_ulong keep_kept, keep_taken;
static uint64_t keep_order;

/* Segments to unmap once the lock is dropped: the pairs aged out, and
 * one more pair (or one segment) the caller gives up. */
struct unmaps {
	struct shm_seg seg[2 * KEEP_AGE_BATCH + 2];
	int n;
};

static void drop(struct unmaps *u, struct kept *k)
{
	/* The client that keeps the other side names it no more. */
	if (!k->client)
		atomic_store(&k->mine.ctrl->kept, 0);
	u->seg[u->n++] = k->mine;
	u->seg[u->n++] = k->theirs;
	k->used = false;
}

static void keep_prepare(void)
{
	pthread_mutex_lock(&keep_lock);
}

static void keep_parent(void)
{
	pthread_mutex_unlock(&keep_lock);
}

/* The child is not the process either peer knows. */
static void keep_child(void)
{
	for (size_t i = 0; i < 2 * KEEP_PER_ROLE; i++) {
		if (!keep_tab[i].used)
			continue;
		sdp__shm_seg_unmap(&keep_tab[i].mine);
		sdp__shm_seg_unmap(&keep_tab[i].theirs);
	}
	memset(keep_tab, 0, sizeof(keep_tab));
	pthread_mutex_unlock(&keep_lock);
}

static void keep_init(void)
{
	sdp_atfork_add(SDP_ATFORK_INNER, keep_prepare, keep_parent,
		       keep_child);
}

/* The pool, locked, with what aged out of it moved to `u`. */
static void pool_lock(struct unmaps *u)
{
	uint64_t now = sdp__shm_now_ms();

	u->n = 0;
	pthread_once(&keep_once, keep_init);
	pthread_mutex_lock(&keep_lock);
	/* A few at a time: the rest go at the next use. */
	for (size_t i = 0; i < 2 * KEEP_PER_ROLE &&
			   u->n < 2 * KEEP_AGE_BATCH; i++) {
		struct kept *k = &keep_tab[i];

		if (k->used && now - k->since_ms > KEEP_IDLE_MS)
			drop(u, k);
	}
}

/* Unlocked, and what aged out unmapped outside the lock. */
static void pool_unlock(struct unmaps *u)
{
	pthread_mutex_unlock(&keep_lock);
	for (int i = 0; i < u->n; i++)
		sdp__shm_seg_unmap(&u->seg[i]);
}

static bool same_addr(const struct shm_addr *a, const struct shm_addr *b)
{
	return a->v6 == b->v6 && a->port == b->port &&
	       !memcmp(a->a, b->a, sizeof(a->a));
}

/* The record of `dst`, made in place of the least recently used one. */
static struct dest *dest_locked(const struct shm_addr *dst, uint64_t now)
{
	struct dest *d = &keep_dests[0];

	for (int i = 0; i < KEEP_DESTS; i++) {
		if (keep_dests[i].used_ms &&
		    same_addr(&keep_dests[i].dst, dst)) {
			d = &keep_dests[i];
			d->used_ms = now;
			return d;
		}
		if (keep_dests[i].used_ms < d->used_ms)
			d = &keep_dests[i];
	}
	memset(d, 0, sizeof(*d));
	d->dst = *dst;
	d->used_ms = now;
	return d;
}

/* A listener that processes share answers RETRY about as often as not
 * (which one accepts is not known); one process that gave a pair up (its
 * pool was full) now and then, which costs one round trip each. */
void sdp__shm_keep_missed(const struct shm_addr *dst)
{
	uint64_t now = sdp__shm_now_ms();
	struct dest *d;
	struct unmaps u;

	pool_lock(&u);
	d = dest_locked(dst, now);
	d->retried++;
	if (d->retried >= 3 && d->retried * 4 > d->named) {
		d->off_until_ms = now + KEEP_OFF_MS;
		d->named = d->retried = 0;
	}
	pool_unlock(&u);
}

/* The listener's mark: its QP on the pair ended and it kept its side. */
static bool listener_kept(const struct kept *k)
{
	return atomic_load(&k->theirs.ctrl->kept);
}

/* The newest pair to `dst`, those the listener kept first: it may keep
 * the other by the time it reads the Hello. */
static struct kept *client_pair_locked(const struct shm_addr *dst)
{
	struct kept *best = NULL;

	for (size_t i = 0; i < 2 * KEEP_PER_ROLE; i++) {
		struct kept *k = &keep_tab[i];

		if (!k->used || !k->client || !same_addr(&k->dst, dst))
			continue;
		if (!best || (listener_kept(k) != listener_kept(best) ?
			      listener_kept(k) : k->order > best->order))
			best = k;
	}
	return best;
}

/* The newest pair to `dst`, of the size asked, whose both sides are free
 * again: the listener kept its side, and its QP on our segment is gone
 * (`released`, which it writes before it keeps its side; both are read,
 * as the listener can write either), so ours is ours to reset. */
static bool pair_whole(const struct kept *k, const struct shm_addr *dst,
		       uint32_t depth, uint32_t region_size)
{
	return k->used && k->client && same_addr(&k->dst, dst) &&
	       listener_kept(k) && atomic_load(&k->mine.ctrl->released) &&
	       k->mine.depth == depth && k->mine.region_size == region_size;
}

static struct kept *whole_pair_locked(const struct shm_addr *dst,
				      uint32_t depth, uint32_t region_size)
{
	struct kept *best = NULL;

	for (size_t i = 0; i < 2 * KEEP_PER_ROLE; i++) {
		struct kept *k = &keep_tab[i];

		if (!pair_whole(k, dst, depth, region_size))
			continue;
		if (!best || k->order > best->order)
			best = k;
	}
	return best;
}

static void offer_listener_seg(struct shm_qp *qp, struct kept *k)
{
	qp->kept_peer = k->theirs;
	qp->kept_pid = k->peer;
	qp->offer = k->theirs.nonce;
}

/* Beside the pair taken (with process `first`), up to SHM_KEEP_ALTS more
 * whole pairs to `dst`, each with another process of the listener, the
 * newest of each: a listener that processes share accepts in any of them,
 * and each takes its own (shm_cm.c switches to it). */
static struct kept *alt_pair_locked(const struct shm_qp *qp,
				    const struct shm_addr *dst, uint32_t depth,
				    pid_t first)
{
	struct kept *best = NULL;

	for (size_t i = 0; i < 2 * KEEP_PER_ROLE; i++) {
		struct kept *k = &keep_tab[i];
		bool named = k->peer == first;

		for (int a = 0; a < qp->nalt && !named; a++)
			named = qp->alt[a].peer == k->peer;
		if (named ||
		    !pair_whole(k, dst, depth, qp->attr.recv_region_size))
			continue;
		if (!best || k->order > best->order)
			best = k;
	}
	return best;
}

/* Each is reset now, and holds the receives posted when the Hello goes
 * (sdp__shm_seg_write_recvs): the process that takes it may send at
 * once. */
static void take_alts_locked(struct shm_qp *qp, const struct shm_addr *dst,
			     uint32_t depth, pid_t first)
{
	struct kept *k;

	while (qp->nalt < SHM_KEEP_ALTS &&
	       (k = alt_pair_locked(qp, dst, depth, first))) {
		sdp__shm_keep_reset(&k->mine, k->mr_used);
		qp->alt[qp->nalt++] = (struct shm_alt){
			.mine = k->mine, .theirs = k->theirs,
			.peer = k->peer, .since_ms = k->since_ms,
		};
		k->used = false;
	}
}

bool sdp__shm_keep_take_pair(struct shm_qp *qp, const struct shm_addr *dst,
			     uint32_t depth)
{
	uint64_t now = sdp__shm_now_ms();
	struct dest *d;
	struct kept *k;
	struct unmaps u;
	bool taken = false;

	pool_lock(&u);
	d = dest_locked(dst, now);
	k = whole_pair_locked(dst, depth, qp->attr.recv_region_size);
	/* After many RETRYs, only with pairs kept with two processes or
	 * more: the listener's processes that accept, named together. */
	qp->nalt = 0;
	if (k && d->off_until_ms > now &&
	    !alt_pair_locked(qp, dst, depth, k->peer))
		k = NULL;
	if (k) {
		sdp__shm_keep_reset(&k->mine, k->mr_used);
		qp->me = k->mine;
		qp->offer_mine = k->mine.nonce;
		offer_listener_seg(qp, k);
		k->used = false;
		taken = true;
		take_alts_locked(qp, dst, depth, k->peer);
		if (++d->named > KEEP_DEST_WINDOW) {
			d->named /= 2;
			d->retried /= 2;
		}
	}
	pool_unlock(&u);
	return taken;
}

void sdp__shm_keep_offer(struct shm_qp *qp, const struct shm_addr *dst)
{
	struct kept *k;
	struct unmaps u;

	pool_lock(&u);
	k = client_pair_locked(dst);
	/* Only a pair the listener kept: another may still become whole. */
	if (k && listener_kept(k)) {
		/* Our segment of it goes: a new one takes its place. */
		offer_listener_seg(qp, k);
		u.seg[u.n++] = k->mine;
		k->used = false;
	}
	pool_unlock(&u);
}

/* The listener's side of the pair a Hello names as (pair, client), kept
 * by this process for the sender, whose client is done with it. */
static struct kept *listener_pair_locked(const struct shm_hello *h,
					 uint64_t pair, uint64_t client)
{
	for (size_t i = 0; pair && i < 2 * KEEP_PER_ROLE; i++) {
		struct kept *k = &keep_tab[i];

		if (k->used && !k->client && k->mine.nonce == pair &&
		    k->peer == h->cred.pid &&
		    atomic_load(&k->mine.ctrl->released) &&
		    (!client || k->theirs.nonce == client))
			return k;
	}
	return NULL;
}

bool sdp__shm_keep_take(struct shm_conn_req *r, const struct shm_hello *h)
{
	struct kept *hit;
	struct unmaps u;

	pool_lock(&u);
	hit = listener_pair_locked(h, h->pair, h->pair_client);
	/* Pairs kept with other processes of ours are named only beside a
	 * client segment of each (no memfd passed). */
	for (int a = 0; a < SHM_KEEP_ALTS && !hit && h->pair_client; a++)
		if (h->alt_client[a])
			hit = listener_pair_locked(h, h->alt_pair[a],
						   h->alt_client[a]);
	if (hit) {
		r->kept_me = hit->mine;
		r->kept_nonce = hit->mine.nonce;
		r->kept_mr_used = hit->mr_used;
		if (h->pair_client)	/* the one named with ours */
			r->peer = hit->theirs;
		else	/* the client passed a new segment of its own */
			u.seg[u.n++] = hit->theirs;
		hit->used = false;
		atomic_fetch_add(&keep_taken, 1);
	}
	pool_unlock(&u);
	return hit != NULL;
}

void sdp__shm_keep_reset(struct shm_seg *me, bool mr_used)
{
	struct shm_ctrl *c = me->ctrl;
	size_t from = offsetof(struct shm_ctrl, rq_prod);

	/* The header as we wrote it first (the peer could write it too),
	 * then everything either side writes during a connection. */
	sdp__shm_ctrl_header(c, me->depth, me->region_size, me->nonce);
	memset((uint8_t *)c + from, 0, sizeof(*c) - from);
	memset(me->rq, 0, (size_t)me->depth * sizeof(*me->rq));
	memset(me->cq, 0, (size_t)me->depth * sizeof(*me->cq));
	if (mr_used)
		memset(me->mr, 0, SHM_MAX_MR * sizeof(*me->mr));
}

/* Into the pool, in place of the oldest of its role if full. */
static bool store(const struct kept *e)
{
	struct kept *slot = NULL, *oldest = NULL;
	struct unmaps u;
	int mine = 0;

	pool_lock(&u);
	for (size_t i = 0; i < 2 * KEEP_PER_ROLE; i++) {
		struct kept *k = &keep_tab[i];

		if (!k->used) {
			if (!slot)
				slot = k;
		} else if (k->client == e->client) {
			mine++;
			if (!oldest || k->order < oldest->order)
				oldest = k;
		}
	}
	if ((mine >= KEEP_PER_ROLE || !slot) && oldest) {
		drop(&u, oldest);
		slot = oldest;
	}
	if (slot) {
		*slot = *e;
		slot->used = true;
		slot->order = ++keep_order;
		/* The listener's mark, set while nothing can drop it. */
		if (!slot->client)
			atomic_store(&slot->mine.ctrl->kept, 1);
		atomic_fetch_add(&keep_kept, 1);
	}
	pool_unlock(&u);
	return slot != NULL;
}

/* Kept only from a connection that was established between this process
 * and the one the peer's credentials named, and that no fork() shared. */
static bool may_keep(const struct shm_qp *qp)
{
	return atomic_load(&qp->state) == SHM_ESTABLISHED && !qp->shared &&
	       qp->peer_pid > 0 && qp->me.ctrl && qp->peer.ctrl;
}

void sdp__shm_keep_park(struct shm_qp *qp)
{
	struct kept e = {
		.client = qp->dst.port != 0,	/* set by connect only */
		.mine = qp->me,
		.theirs = qp->peer,
		.mr_used = qp->mr_gen != 0,
		.peer = qp->peer_pid,
		.dst = qp->dst,
		.since_ms = sdp__shm_now_ms(),
	};

	if (!may_keep(qp))
		return;
	/* Pages the peer filled stay resident in a kept pair until the
	 * next connection takes it, however long that is: past a bound,
	 * give them back (the file keeps its size; a hole reads as zero). */
	if (qp->rx_bytes > SHM_KEEP_RESIDENT)
		madvise(qp->me.region, ((size_t)qp->me.region_size + 4095) &
				       ~(size_t)4095, MADV_REMOVE);
	if (store(&e)) {
		memset(&qp->me, 0, sizeof(qp->me));
		memset(&qp->peer, 0, sizeof(qp->peer));
	}
}

void sdp__shm_keep_alts_return(struct shm_qp *qp, bool untaken)
{
	for (int a = 0; a < qp->nalt; a++) {
		struct shm_alt *t = &qp->alt[a];
		struct kept e = {
			.client = true, .mine = t->mine, .theirs = t->theirs,
			.peer = t->peer, .dst = qp->dst, .since_ms = t->since_ms,
		};

		if (!t->mine.ctrl)
			continue;
		/* The reset cleared the listener's `released`: no QP of its
		 * is on it, as the answer shows, so it is whole again. */
		if (untaken && qp->dst.port) {
			atomic_store(&t->mine.ctrl->released, 1);
			if (store(&e))
				continue;
		}
		sdp__shm_seg_unmap(&t->mine);
		sdp__shm_seg_unmap(&t->theirs);
	}
	memset(qp->alt, 0, sizeof(qp->alt));
	qp->nalt = 0;
}

void sdp__shm_keep_counts(unsigned long *kept, unsigned long *taken)
{
	*kept = atomic_load(&keep_kept);
	*taken = atomic_load(&keep_taken);
}
