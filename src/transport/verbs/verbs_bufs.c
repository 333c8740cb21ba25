// SPDX-License-Identifier: MIT
/*
 * verbs_bufs.c — a QP's receive region and send ring, registered, kept
 * between connections.
 *
 * Allocating, faulting in and registering those buffers (about 1 MiB per
 * QP with the default receive buffers) was half of what a connection cost
 * over soft-RoCE (docs/BENCHMARKS-VM.md, "Connection rate").  A QP that
 * ends hands its set back here, still registered; the next QP of the same
 * sizes takes it, and keeps the registration when it binds to the same
 * device.  The registrations allow local access only, and the hardware QP
 * is destroyed before the set is returned, so nothing reaches the memory
 * while it waits; it never leaves the process.
 *
 * Bounded three ways.  At most VB_BUFS_IDLE sets wait: as many as clients
 * that connect at once can use (8 concurrent connect loops ran 1.7x faster
 * with 16 than with 4).  A set idle for VB_BUFS_AGE_MS is released: at the
 * next take or return, or by the event thread, which sleeps no longer than
 * until the oldest idle set ages (sdp__verbs_bufs_trim), so a burst leaves
 * no memory pinned for long.  And idle pinned memory counts against
 * RLIMIT_MEMLOCK: when a registration fails, the idle sets are released and
 * it is tried once more, so the pool never costs a connection.  Idle sets
 * are MADV_DONTFORK: a fork() child does not copy pinned pages it would
 * never use, and forgets the pool.
 */
#include "transport/verbs/verbs.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define VB_BUFS_IDLE 16
#define VB_BUFS_AGE_MS 1000

struct vb_bufs {
	struct vb_bufs *next;
	uint8_t *region;
	size_t region_size;		/* key: page-rounded receive region */
	uint8_t *ring;
	uint64_t ring_size;
	struct ibv_mr *region_mr, *ring_mr;
	struct vb_dev *dev;		/* whose PD the registrations are in */
	uint64_t idle_since_ms;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vb_bufs *pool;
static int pool_len;

static void bufs_advise(struct vb_bufs *b, int advice)
{
	if (b->region)
		madvise(b->region, b->region_size, advice);
	if (b->ring)
		madvise(b->ring, b->ring_size, advice);
}

/* Whole pages of their own (not the heap's), so that advice on them never
 * reaches a neighbour's memory. */
static uint8_t *pages(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void bufs_free(struct vb_bufs *b)
{
	if (b->ring)
		munmap(b->ring, b->ring_size);
	if (b->region)
		munmap(b->region, b->region_size);
	free(b);
}

static void bufs_dereg(struct vb_bufs *b)
{
	if (b->ring_mr)
		ibv_dereg_mr(b->ring_mr);
	if (b->region_mr)
		ibv_dereg_mr(b->region_mr);
	b->region_mr = b->ring_mr = NULL;
}

static void bufs_release(struct vb_bufs *b)
{
	bufs_dereg(b);
	bufs_free(b);
}

/* The QP lets go of its set (its pointers into it cleared). */
static struct vb_bufs *bufs_detach(struct vb_qp *qp)
{
	struct vb_bufs *b = qp->bufs;

	qp->bufs = NULL;
	qp->region = qp->ring = NULL;
	qp->region_mr = qp->ring_mr = NULL;
	return b;
}

static uint64_t coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Unlinks the sets idle too long (the newest are at the head, so they
 * are the tail) and returns them; under pool_lock. */
static struct vb_bufs *pool_unlink_aged(void)
{
	uint64_t now = coarse_ms();
	struct vb_bufs **pp, *aged;

	for (pp = &pool; *pp; pp = &(*pp)->next)
		if (now - (*pp)->idle_since_ms >= VB_BUFS_AGE_MS)
			break;
	aged = *pp;
	*pp = NULL;
	for (struct vb_bufs *b = aged; b; b = b->next)
		pool_len--;
	return aged;
}

static void release_list(struct vb_bufs *list)
{
	struct vb_bufs *b;

	while ((b = list)) {
		list = b->next;
		bufs_release(b);
	}
}

/* Releases the idle sets that aged; returns the milliseconds until the
 * next one ages, or -1 if none waits (the event thread's timeout). */
int sdp__verbs_bufs_trim(void)
{
	struct vb_bufs *aged, *b;
	uint64_t now;
	int ms = -1;

	pthread_mutex_lock(&pool_lock);
	aged = pool_unlink_aged();
	for (b = pool; b && b->next; b = b->next)
		;
	if (b) {
		now = coarse_ms();
		ms = (int)(b->idle_since_ms + VB_BUFS_AGE_MS - now) + 1;
	}
	pthread_mutex_unlock(&pool_lock);
	release_list(aged);
	return ms;
}

/* The receive region for a new QP: an idle set of that size, else fresh
 * memory.  Returns 0 or -ENOMEM. */
int sdp__verbs_bufs_take(struct vb_qp *qp, size_t region_size)
{
	struct vb_bufs **pp, *b = NULL, *aged;

	pthread_mutex_lock(&pool_lock);
	aged = pool_unlink_aged();
	for (pp = &pool; *pp; pp = &(*pp)->next) {
		if ((*pp)->region_size == region_size) {
			b = *pp;
			*pp = b->next;
			pool_len--;
			break;
		}
	}
	pthread_mutex_unlock(&pool_lock);
	release_list(aged);
	if (b) {
		bufs_advise(b, MADV_DOFORK);
	} else {
		b = calloc(1, sizeof(*b));
		if (!b)
			return -ENOMEM;
		b->region_size = region_size;
		if (region_size && !(b->region = pages(region_size))) {
			free(b);
			return -ENOMEM;
		}
	}
	qp->bufs = b;
	qp->region = b->region;
	return 0;
}

/* Releases every idle set; true if there was one. */
static bool pool_drain(void)
{
	struct vb_bufs *list;

	pthread_mutex_lock(&pool_lock);
	list = pool;
	pool = NULL;
	pool_len = 0;
	pthread_mutex_unlock(&pool_lock);
	release_list(list);
	return list != NULL;
}

static struct ibv_mr *reg(struct vb_dev *d, void *addr, size_t len)
{
	struct ibv_mr *mr = ibv_reg_mr(d->pd, addr, len, IBV_ACCESS_LOCAL_WRITE);

	if (!mr && pool_drain())	/* idle pinned memory in the way */
		mr = ibv_reg_mr(d->pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
	return mr;
}

/* The QP's device is known: registrations on it, and a send ring of
 * `ring_size`, reusing what the set already has. */
int sdp__verbs_bufs_bind(struct vb_qp *qp, uint64_t ring_size)
{
	struct vb_bufs *b = qp->bufs;

	if (b->dev != qp->dev) {
		bufs_dereg(b);
		b->dev = qp->dev;
	}
	if (b->ring && b->ring_size != ring_size) {
		if (b->ring_mr)
			ibv_dereg_mr(b->ring_mr);
		b->ring_mr = NULL;
		munmap(b->ring, b->ring_size);
		b->ring = NULL;
	}
	if (b->region && !b->region_mr) {
		b->region_mr = reg(b->dev, b->region, b->region_size);
		if (!b->region_mr)
			return -ENOMEM;
	}
	if (!b->ring) {
		b->ring = pages(ring_size);
		if (!b->ring)
			return -ENOMEM;
		b->ring_size = ring_size;
	}
	if (!b->ring_mr) {
		b->ring_mr = reg(b->dev, b->ring, b->ring_size);
		if (!b->ring_mr)
			return -ENOMEM;
	}
	qp->region_mr = b->region_mr;
	qp->ring = b->ring;
	qp->ring_size = b->ring_size;
	qp->ring_mr = b->ring_mr;
	return 0;
}

/* The QP is gone (its hardware QP destroyed, or never made): keep its
 * set for the next one, or release it. */
void sdp__verbs_bufs_put(struct vb_qp *qp)
{
	struct vb_bufs *b = bufs_detach(qp), *aged;
	bool first = false;

	if (!b)
		return;
	pthread_mutex_lock(&pool_lock);
	aged = pool_unlink_aged();
	if (pool_len < VB_BUFS_IDLE) {
		bufs_advise(b, MADV_DONTFORK);
		b->idle_since_ms = coarse_ms();
		b->next = pool;
		first = !pool;
		pool = b;
		pool_len++;
		b = NULL;
	}
	pthread_mutex_unlock(&pool_lock);
	release_list(aged);
	if (b)
		bufs_release(b);
	if (first)	/* the event thread may sleep without a timeout */
		sdp__verbs_trim_kick();
}

/* A QP inherited across fork(): its registrations are the parent's (never
 * released here), its memory is ours. */
void sdp__verbs_bufs_orphan(struct vb_qp *qp)
{
	struct vb_bufs *b = bufs_detach(qp);

	if (b)
		bufs_free(b);
}

/* fork() child: the idle sets were not copied (MADV_DONTFORK); forget
 * them.  Only this thread exists. */
void sdp__verbs_bufs_forget(void)
{
	pthread_mutex_init(&pool_lock, NULL);
	pool = NULL;
	pool_len = 0;
}
