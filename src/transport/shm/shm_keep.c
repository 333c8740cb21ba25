// SPDX-License-Identifier: MIT
/*
 * shm_keep.c — a listener's segment kept for the next connection of the
 * same client process.
 *
 * Setting a connection up creates, seals, maps and faults in a segment on
 * each side and unmaps both at the end (munmap's TLB shootdown in a
 * threaded process); for a connection per request that is a large share of
 * its cost (docs/DESIGN.md, "Connection setup cost").  So when a
 * connection ends, the listener's side keeps its own segment and the
 * client keeps its mapping of it, each knowing the other process by pid.
 * The client's next Hello to the same address names the kept segment by
 * its nonce (and still carries a new segment of its own); a listener
 * process that keeps that segment for that client pid, whose client wrote
 * its last word in it (`released`, after its QP was gone), resets and
 * takes it, and its Accept says so instead of passing a memfd.  Any other
 * answer is a new segment as before, so an offer not taken costs nothing.
 *
 * Who can write into a kept segment: only the two processes (and their
 * fork() children, which inherited the mapping: their family) that shared
 * it before, and the listener takes it again only for the same client
 * pid, so no third process ever shares a connection's memory.  The
 * client's own segment is new for every connection: it gives its memfd
 * only to the process that answers, and keeping it would cost a descriptor
 * per connection (docs/DESIGN.md, "Descriptor budget").  QPs that a fork()
 * shared are never kept; a fork() child forgets what its parent kept.
 *
 * Bounds: 16 kept per role (as many as clients connecting at once use), the
 * oldest given up first, and none older than a second when the pool is
 * next used.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/atfork.h"
#include "transport/shm/shm.h"

#define KEEP_PER_ROLE 16
#define KEEP_IDLE_MS 1000

struct kept {
	bool used;
	bool client;		/* a client's mapping of a listener's segment;
				 * else a listener's own segment */
	struct shm_seg seg;
	pid_t peer;		/* the process it serves again */
	struct shm_addr dst;	/* client: the address dialled */
	bool mr_used;		/* listener: its MR table was written */
	uint64_t since_ms;
};

static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept keep_tab[2 * KEEP_PER_ROLE];
static pthread_once_t keep_once = PTHREAD_ONCE_INIT;
static atomic_ulong keep_kept, keep_taken;

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
	for (size_t i = 0; i < 2 * KEEP_PER_ROLE; i++)
		if (keep_tab[i].used)
			sdp__shm_seg_unmap(&keep_tab[i].seg);
	memset(keep_tab, 0, sizeof(keep_tab));
	pthread_mutex_unlock(&keep_lock);
}

static void keep_init(void)
{
	sdp_atfork_add(SDP_ATFORK_INNER, keep_prepare, keep_parent,
		       keep_child);
}

/* Entries of a role older than KEEP_IDLE_MS move to `out` (unmapped by
 * the caller, outside the lock); returns how many. */
static int expire_locked(uint64_t now, struct shm_seg *out)
{
	int n = 0;

	for (size_t i = 0; i < 2 * KEEP_PER_ROLE; i++) {
		struct kept *k = &keep_tab[i];

		if (k->used && now - k->since_ms > KEEP_IDLE_MS) {
			out[n++] = k->seg;
			k->used = false;
		}
	}
	return n;
}

/* The pool, locked, with what aged out of it moved to `old`. */
static int pool_lock(struct shm_seg *old)
{
	pthread_once(&keep_once, keep_init);
	pthread_mutex_lock(&keep_lock);
	return expire_locked(sdp__shm_now_ms(), old);
}

/* Unlocked, and what aged out unmapped outside the lock. */
static void pool_unlock(struct shm_seg *old, int n)
{
	pthread_mutex_unlock(&keep_lock);
	for (int i = 0; i < n; i++)
		sdp__shm_seg_unmap(&old[i]);
}

static bool same_addr(const struct shm_addr *a, const struct shm_addr *b)
{
	return a->v6 == b->v6 && a->port == b->port &&
	       !memcmp(a->a, b->a, sizeof(a->a));
}

/* The listener marks a segment it keeps (`kept`, its own word): its QP
 * on it has ended, so it can take it.  The newest such first, else the
 * newest: it may be kept by the time the Hello is read. */
static bool better(const struct kept *a, const struct kept *b)
{
	bool ka = atomic_load(&a->seg.ctrl->kept);
	bool kb = atomic_load(&b->seg.ctrl->kept);

	return ka != kb ? ka : a->since_ms > b->since_ms;
}

void sdp__shm_keep_offer(struct shm_qp *qp, const struct shm_addr *dst)
{
	struct shm_seg old[2 * KEEP_PER_ROLE];
	struct kept *best = NULL;
	int n;

	n = pool_lock(old);
	for (size_t i = 0; i < 2 * KEEP_PER_ROLE; i++) {
		struct kept *k = &keep_tab[i];

		if (k->used && k->client && same_addr(&k->dst, dst) &&
		    (!best || better(k, best)))
			best = k;
	}
	if (best) {
		qp->kept_peer = best->seg;
		qp->kept_pid = best->peer;
		qp->kept_since = best->since_ms;
		qp->offer = best->seg.nonce;
		best->used = false;
	}
	pool_unlock(old, n);
}

bool sdp__shm_keep_take(struct shm_conn_req *r, const struct shm_hello *h)
{
	struct shm_seg old[2 * KEEP_PER_ROLE];
	struct kept *hit = NULL;
	int n;

	n = pool_lock(old);
	for (size_t i = 0; i < 2 * KEEP_PER_ROLE && !hit; i++) {
		struct kept *k = &keep_tab[i];

		if (k->used && !k->client && k->seg.nonce == h->pair &&
		    k->peer == h->cred.pid &&
		    atomic_load(&k->seg.ctrl->released))
			hit = k;
	}
	if (hit) {
		r->kept_me = hit->seg;
		r->kept_nonce = hit->seg.nonce;
		r->kept_mr_used = hit->mr_used;
		hit->used = false;
		atomic_fetch_add(&keep_taken, 1);
	}
	pool_unlock(old, n);
	return hit != NULL;
}

void sdp__shm_keep_reset(struct shm_seg *me, bool mr_used)
{
	struct shm_layout lo = sdp__shm_layout(me->depth, me->region_size);
	struct shm_ctrl *c = me->ctrl;
	size_t from = offsetof(struct shm_ctrl, rq_prod);

	/* The header as we wrote it first (the peer could write it too),
	 * then everything either side writes during a connection. */
	c->magic = SHM_MAGIC;
	c->version = SHM_VERSION;
	c->depth = me->depth;
	c->seg_size = me->size;
	c->region_off = lo.region;
	c->region_size = me->region_size;
	atomic_store(&c->nonce, me->nonce);
	memset((uint8_t *)c + from, 0, sizeof(*c) - from);
	memset(me->rq, 0, (size_t)me->depth * sizeof(*me->rq));
	memset(me->cq, 0, (size_t)me->depth * sizeof(*me->cq));
	if (mr_used)
		memset(me->mr, 0, SHM_MAX_MR * sizeof(*me->mr));
}

/* Kept only from a connection that was established between this process
 * and the one the peer's credentials named, and that no fork() shared. */
static bool may_keep(const struct shm_qp *qp)
{
	return atomic_load(&qp->state) == SHM_ESTABLISHED && !qp->shared &&
	       qp->peer_pid > 0 && qp->me.ctrl && qp->peer.ctrl;
}

/* Into the pool, in place of the oldest of its role if full; false if
 * there is no room (the caller unmaps it). */
static bool store(const struct kept *e)
{
	struct shm_seg old[2 * KEEP_PER_ROLE + 1];
	struct kept *slot = NULL, *oldest = NULL;
	int n, mine = 0;

	n = pool_lock(old);
	for (size_t i = 0; i < 2 * KEEP_PER_ROLE; i++) {
		struct kept *k = &keep_tab[i];

		if (!k->used) {
			if (!slot)
				slot = k;
		} else if (k->client == e->client) {
			mine++;
			if (!oldest || k->since_ms < oldest->since_ms)
				oldest = k;
		}
	}
	if ((mine >= KEEP_PER_ROLE || !slot) && oldest) {
		old[n++] = oldest->seg;
		slot = oldest;
	}
	if (slot) {
		*slot = *e;
		slot->used = true;
		atomic_fetch_add(&keep_kept, 1);
	}
	pool_unlock(old, n);
	return slot != NULL;
}

void sdp__shm_keep_park(struct shm_qp *qp)
{
	struct kept e = {
		.client = qp->dst.port != 0,	/* set by connect only */
		.peer = qp->peer_pid,
		.since_ms = sdp__shm_now_ms(),
	};

	if (!may_keep(qp))
		return;
	if (e.client) {
		e.seg = qp->peer;
		e.dst = qp->dst;
		if (store(&e))
			memset(&qp->peer, 0, sizeof(qp->peer));
	} else {
		e.seg = qp->me;
		e.mr_used = qp->mr_gen != 0;
		atomic_store(&qp->me.ctrl->kept, 1);
		if (store(&e))
			memset(&qp->me, 0, sizeof(qp->me));
	}
}

void sdp__shm_keep_unused(struct shm_qp *qp)
{
	struct kept e = {
		.client = true, .seg = qp->kept_peer, .peer = qp->kept_pid,
		.dst = qp->dst, .since_ms = qp->kept_since,
	};

	if (store(&e))
		memset(&qp->kept_peer, 0, sizeof(qp->kept_peer));
}

void sdp__shm_keep_counts(unsigned long *kept, unsigned long *taken)
{
	*kept = atomic_load(&keep_kept);
	*taken = atomic_load(&keep_taken);
}
