// SPDX-License-Identifier: MIT
/*
 * shm_qp.c — the shm transport's queue pairs: segment creation, the data
 * path (post_send, post_recv, poll_cq), errors and flushes, and the ops
 * table.
 *
 * Producer/consumer positions.  The receiver owns its segment: it produces
 * receive descriptors into its rq ring (rq_prod) and consumes completions
 * from its cq ring.  The sender consumes the peer's descriptors and produces
 * the completions, synchronously inside post_send(): pop descriptor, copy the
 * SGEs into the peer's receive region, write the completion at the same ring
 * index, publish cq_prod, then wake the peer only if it sleeps.  No syscall
 * on the fast path.
 *
 * Nothing the peer wrote is trusted: indices are checked against what we
 * posted (cq_prod - rq_done <= receives outstanding, rq_prod - consumed <=
 * depth), offsets and lengths against the privately recorded region size,
 * and a receive completion's wr_id and buffer length come from our private
 * FIFO.  A violation puts the QP in error, which flushes.
 *
 * Error state: sdp__shm_set_error() is idempotent and may run from wait()
 * without the connection lock; it tells the peer (closed flag, shutdown of
 * the unix socket) and wakes our own waiters.  poll_cq() then returns the
 * local completions, the receive completions the peer had published, and
 * flushes the remaining receives.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/fdhigh.h"
#include "transport/shm/shm.h"
#include "base/real.h"

static uint32_t roundup_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static _Atomic unsigned long segs_made;

unsigned long sdp__shm_segs_made(void)
{
	return atomic_load(&segs_made);
}

/* A new sealed segment file mapped at `at` (MAP_FIXED, over what is
 * there), or anywhere if NULL, its header written.  Sets qp->memfd. */
static int seg_file(struct shm_qp *qp, void *at, void **out)
{
	uint32_t depth = roundup_pow2(qp->attr.max_recv_wr);
	struct shm_layout lo = sdp__shm_layout(depth,
					       qp->attr.recv_region_size);
	uint64_t nonce = 0;
	void *map;
	int err;

	qp->memfd = memfd_create("libsdp-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (qp->memfd < 0)
		return -errno;
	atomic_fetch_add_explicit(&segs_made, 1, memory_order_relaxed);
	if (ftruncate(qp->memfd, lo.total) ||
	    sdp_real.fcntl(qp->memfd, F_ADD_SEALS,
			   F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		goto err_close;
	map = mmap(at, lo.total, PROT_READ | PROT_WRITE,
		   MAP_SHARED | (at ? MAP_FIXED : 0), qp->memfd, 0);
	if (map == MAP_FAILED)
		goto err_close;
	if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce))
		nonce = (uintptr_t)map ^ ((uint64_t)getpid() << 32);
	sdp__shm_ctrl_header(map, depth, qp->attr.recv_region_size,
			     nonce | 1);
	*out = map;
	return 0;

err_close:
	err = -errno;
	sdp_close(qp->memfd);
	qp->memfd = -1;
	return err;
}

static int seg_create(struct shm_qp *qp)
{
	uint32_t depth = roundup_pow2(qp->attr.max_recv_wr);
	uint32_t region = qp->attr.recv_region_size;
	void *map;
	int err = seg_file(qp, NULL, &map);

	if (err)
		return err;
	sdp__shm_seg_place(&qp->me, map, sdp__shm_layout(depth, region).total,
			   depth, region);
	qp->me.nonce = atomic_load(&qp->me.ctrl->nonce);
	return 0;
}

void sdp__shm_seg_write_recvs(const struct shm_qp *qp, struct shm_seg *seg)
{
	uint32_t mask = qp->me.depth - 1;

	for (uint32_t t = 0; t < qp->me.depth; t++) {
		const struct shm_rwr *w = &qp->rwr[t];

		if (!w->posted)
			continue;
		atomic_store(&seg->rq[w->seq & mask].offset, w->offset);
		atomic_store(&seg->rq[w->seq & mask].length, w->length);
		atomic_store(&seg->rq[w->seq & mask].tag, t);
	}
	atomic_store(&seg->ctrl->rq_prod, qp->rq_prod);
}

/* The segment now at our address, in place of the one whose first page
 * `old` still maps: the receives posted, from our own records, and the
 * sleepers on the old one moved over. */
static void seg_adopt(struct shm_qp *qp, struct shm_ctrl *old)
{
	struct shm_ctrl *c = qp->me.ctrl;

	qp->me.nonce = atomic_load(&c->nonce);
	sdp__shm_seg_write_recvs(qp, &qp->me);
	atomic_fetch_add(&c->waiters, atomic_load(&old->waiters));
	/* Moved on, for a sleeper that looks again here. */
	atomic_store(&c->seq, atomic_load(&old->seq) + 1);
}

/* The new mapping at our address failed, and may have unmapped the old
 * file: keep the range mapped for what touches it until the QP, which
 * fails, is destroyed. */
static void seg_hole(struct shm_qp *qp)
{
	mmap(qp->me.ctrl, qp->me.size, PROT_READ | PROT_WRITE,
	     MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
}

/* Sleepers on the old file's seq look again (at the new one); its
 * mapping `old` of `len` bytes goes, or is the whole segment, given back
 * in *was. */
static void seg_leave(const struct shm_qp *qp, struct shm_ctrl *old,
		      size_t len, struct shm_seg *was)
{
	atomic_fetch_add(&old->seq, 1);
	sdp__shm_futex_wake(&old->seq);
	if (!was) {
		munmap(old, len);
		return;
	}
	sdp__shm_seg_place(was, old, len, qp->me.depth, qp->me.region_size);
	was->nonce = atomic_load(&old->nonce);
}

/* Nothing is read from the segment being replaced: a process that mapped
 * it before may have written anything there.  Threads asleep on its seq
 * (a connect waiting) sleep on the old file's futex, and the count of
 * them is in the old file: both are reached through a second mapping of
 * it (mremap of a shared mapping with an old size of 0). */
int sdp__shm_seg_renew(struct shm_qp *qp, struct shm_seg *was)
{
	struct shm_ctrl *c = qp->me.ctrl, *old;
	size_t keep = was ? qp->me.size : 4096;
	void *map;
	int err;

	if (was)
		memset(was, 0, sizeof(*was));
	old = mremap(c, 0, keep, MREMAP_MAYMOVE);
	if (old == MAP_FAILED)
		return -errno;
	err = seg_file(qp, c, &map);
	if (!err)
		seg_adopt(qp, old);
	else
		seg_hole(qp);
	seg_leave(qp, old, keep, err ? NULL : was);
	return err;
}

/* A kept segment of ours, reset (shm_keep.c), moved to our segment's
 * address in its place: the engine and the user-space readiness hold
 * pointers into it.  The one it replaces stays mapped elsewhere, in *was
 * (a second mapping of the whole file, made first: the address is never
 * a hole), for the pool. */
int sdp__shm_seg_switch(struct shm_qp *qp, struct shm_seg *to,
			struct shm_seg *was)
{
	struct shm_ctrl *c = qp->me.ctrl, *old;
	size_t size = qp->me.size;

	memset(was, 0, sizeof(*was));
	if (to->size != size || to->depth != qp->me.depth ||
	    to->region_size != qp->me.region_size)
		return -EPROTO;
	old = mremap(c, 0, size, MREMAP_MAYMOVE);
	if (old == MAP_FAILED)
		return -errno;
	if (mremap(to->ctrl, size, size, MREMAP_MAYMOVE | MREMAP_FIXED,
		   c) == MAP_FAILED) {
		int err = -errno;

		seg_hole(qp);
		seg_leave(qp, old, size, NULL);
		return err;
	}
	memset(to, 0, sizeof(*to));
	seg_adopt(qp, old);
	seg_leave(qp, old, size, was);
	return 0;
}

/* A kept segment of the request's, if it has the sizes asked. */
static bool seg_take_kept(struct shm_qp *qp, struct shm_conn_req *r)
{
	bool fits;

	if (!r || !r->kept_me.ctrl)
		return false;
	fits = r->kept_me.depth == roundup_pow2(qp->attr.max_recv_wr) &&
	       r->kept_me.region_size == qp->attr.recv_region_size;
	if (fits) {
		sdp__shm_keep_reset(&r->kept_me, r->kept_mr_used);
		qp->me = r->kept_me;
		qp->offer = r->kept_nonce;
		memset(&r->kept_me, 0, sizeof(r->kept_me));
		return true;
	}
	sdp__shm_seg_unmap(&r->kept_me);
	return false;
}

int sdp__shm_qp_alloc(const struct sdp_qp_attr *attr, struct shm_conn_req *r,
		      const struct shm_addr *dst, struct shm_qp **out)
{
	struct shm_qp *qp;
	int err;

	if (!attr->max_send_wr || attr->max_send_wr > SHM_MAX_DEPTH ||
	    !attr->max_recv_wr || attr->max_recv_wr > SHM_MAX_DEPTH ||
	    !attr->recv_region_size || attr->recv_region_size > SHM_MAX_REGION)
		return -EINVAL;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp->obj.ops = &sdp__shm_ops;
	qp->attr = *attr;
	qp->attr.dst = NULL;	/* the caller's */
	qp->attr.dst_len = 0;
	qp->sock = qp->memfd = qp->peer_pidfd = -1;
	qp->summon_fd = qp->summon_ep = -1;
	qp->peer_app_fd = -1;
	qp->app_word = qp->ww_gen = -1;
	qp->cm_pid = getpid();	/* this process sends the CM message */
	if (seg_take_kept(qp, r) ||
	    (dst && sdp__shm_keep_take_pair(qp, dst,
					    roundup_pow2(attr->max_recv_wr))))
		err = 0;
	else
		err = seg_create(qp);
	if (err)
		goto err_free;
	err = -ENOMEM;
	qp->rwr = calloc(qp->me.depth, sizeof(*qp->rwr));
	qp->rwr_free = calloc(qp->me.depth, sizeof(*qp->rwr_free));
	qp->lcq = calloc(attr->max_send_wr, sizeof(*qp->lcq));
	if (!qp->rwr || !qp->rwr_free || !qp->lcq)
		goto err_unmap;
	/* Tag 0 on top: the first receive posted is tag 0. */
	for (uint32_t i = 0; i < qp->me.depth; i++)
		qp->rwr_free[i] = qp->me.depth - 1 - i;
	qp->nfree = qp->me.depth;
	qp->recv_mr.addr = qp->me.region;
	qp->recv_mr.length = attr->recv_region_size;
	qp->recv_mr.lkey = SHM_RECV_LKEY;
	qp->caps.max_inline = UINT32_MAX;
	qp->caps.max_sge = SDP_MAX_SGE;
	strcpy(qp->caps.rdma_reason, "not connected");
	strcpy(qp->caps.name, "shm");
	*out = qp;
	return 0;

err_unmap:
	free(qp->lcq);
	free(qp->rwr_free);
	free(qp->rwr);
	sdp__shm_seg_unmap(&qp->me);
	sdp__shm_seg_unmap(&qp->kept_peer);
	sdp__shm_keep_alts_return(qp, false);
	if (qp->memfd >= 0)
		sdp_close(qp->memfd);
err_free:
	free(qp);
	return err;
}

static int shm_create_qp(const struct sdp_qp_attr *attr, struct sdp_qp **out)
{
	struct shm_addr d;
	int v6;

	/* A connect's destination: the pair kept from the last one there. */
	if (attr->dst &&
	    !sdp__shm_addr_parse(attr->dst, attr->dst_len, &d, &v6) &&
	    d.port) {
		sdp__shm_addr_dial(&d);
		return sdp__shm_qp_alloc(attr, NULL, &d,
					 (struct shm_qp **)out);
	}
	return sdp__shm_qp_alloc(attr, NULL, NULL, (struct shm_qp **)out);
}

static void shm_destroy_qp(struct sdp_qp *sq);

/* Always consumes `req`: on failure the client is refused, so that it does
 * not wait for an answer that will never come. */
static int shm_create_qp_from_req(struct sdp_conn_req *sr,
				  const struct sdp_qp_attr *attr,
				  struct sdp_qp **out)
{
	struct shm_conn_req *r = (struct shm_conn_req *)sr;
	struct shm_qp *qp;
	int err;

	err = sdp__shm_qp_alloc(attr, r, NULL, &qp);
	if (err)
		goto err_reject;
	qp->sock = r->sock;
	sdp__shm_sock_watch(qp);	/* the engine registers it */
	qp->peer = r->peer;
	qp->peer_base = r->peer_base;
	qp->peer_pid = r->peer_pid;
	qp->peer_uid = r->peer_uid;
	qp->peer_gid = r->peer_gid;
	qp->is_v6_socket = r->is_v6_socket;
	qp->cm_flags = (uint8_t)attr->cm_flags;
	sdp__shm_addr_to_sockaddr(&r->dst, r->is_v6_socket, &qp->addr.local,
				  &qp->addr.local_len);
	sdp__shm_addr_to_sockaddr(&r->src, r->is_v6_socket, &qp->addr.peer,
				  &qp->addr.peer_len);
	atomic_store(&qp->state, SHM_PASSIVE);
	free(r);
	*out = (struct sdp_qp *)qp;
	return 0;

err_reject:
	sdp__shm_reject(sr);
	return err;
}

void sdp__shm_set_error(struct shm_qp *qp)
{
	if (atomic_exchange(&qp->err, 1))
		return;
	if (qp->peer.ctrl) {
		/* Ordered after every completion we published for the peer,
		 * so it drains those before it flushes. */
		atomic_store(&qp->peer.ctrl->closed, 1);
		sdp__shm_wake_owner_seg(qp->peer.ctrl, -1, -1, NULL, 0);
	}
	if (qp->sock >= 0)
		sdp_real.shutdown(qp->sock, SHUT_RDWR);
	sdp__shm_sock_unwatch(qp);
	sdp__shm_wake_self(qp, true);
}

static int shm_addresses(struct sdp_qp *sq, struct sdp_tp_addr *addr)
{
	struct shm_qp *qp = SHM_QP(sq);

	if (!qp->addr.local_len)
		return -ENOTCONN;
	*addr = qp->addr;
	return 0;
}

/* Whether RDMA works is probed when it is first asked after the
 * handshake (the engine asks before its first ZCopy): a short connection
 * never pays the probe, its cross-memory attach and the peer's pidfd. */
static bool shm_rdma_ok(struct shm_qp *qp)
{
	if (!qp->rdma_probed &&
	    atomic_load(&qp->state) == SHM_ESTABLISHED) {
		qp->rdma_probed = true;
		sdp__shm_rdma_probe(qp);
	}
	return qp->caps.rdma;
}

static void shm_query_caps(struct sdp_qp *sq, struct sdp_tp_caps *caps)
{
	struct shm_qp *qp = SHM_QP(sq);

	shm_rdma_ok(qp);
	*caps = qp->caps;
}

static int shm_disconnect(struct sdp_qp *sq)
{
	sdp__shm_set_error(SHM_QP(sq));
	return 0;
}

static void shm_release_qp(struct shm_qp *qp);

static void shm_destroy_qp(struct sdp_qp *sq)
{
	struct shm_qp *qp = SHM_QP(sq);

	sdp__shm_set_error(qp);
	/* Our last word in the peer's segment: it may be used again. */
	if (qp->peer.ctrl)
		atomic_store(&qp->peer.ctrl->released, 1);
	sdp__shm_keep_park(qp);
	shm_release_qp(qp);
}

/* Another process inherited the QP: drop our mappings and descriptors but
 * signal nothing to the peer (its copies keep the connection alive). */
static void shm_detach_qp(struct sdp_qp *sq)
{
	shm_release_qp(SHM_QP(sq));
}

static void shm_release_qp(struct shm_qp *qp)
{
	for (int i = 0; i < SHM_MAX_MR; i++)
		free(qp->mrs[i]);
	sdp__shm_seg_unmap(&qp->peer);
	sdp__shm_seg_unmap(&qp->me);
	sdp__shm_seg_unmap(&qp->kept_peer);
	/* Named, never answered: a process may hold them now. */
	sdp__shm_keep_alts_return(qp, false);
	if (qp->sock >= 0)
		sdp_close(qp->sock);
	if (qp->memfd >= 0)
		sdp_close(qp->memfd);
	sdp__shm_peer_pidfd_put(qp->peer_pidfd);
	sdp__shm_drop_peer_app_fd((struct sdp_qp *)qp);
	if (qp->summon_ep >= 0)
		sdp_close(qp->summon_ep);
	if (qp->summon_fd >= 0)
		sdp_close(qp->summon_fd);
	if (qp->local)
		sdp__shm_listener_free(qp->local);
	free(qp->lcq);
	free(qp->avail);
	free(qp->rwr_free);
	free(qp->rwr);
	free(qp);
}

static struct sdp_mr *shm_recv_region(struct sdp_qp *sq)
{
	return &SHM_QP(sq)->recv_mr;
}

/* ---- data path ----------------------------------------------------------- */

static bool range_in(uint64_t addr, uint64_t len, uint64_t base, uint64_t size)
{
	return addr >= base && len <= size && addr - base <= size - len;
}

bool sdp__shm_local_sge_ok(struct shm_qp *qp, const struct sdp_sge *sge,
			   unsigned access)
{
	struct shm_mr *mr;

	if (sge->lkey == SHM_RECV_LKEY)
		return range_in(sge->addr, sge->length,
				(uintptr_t)qp->recv_mr.addr, qp->recv_mr.length);
	mr = qp->mrs[sge->lkey & (SHM_MAX_MR - 1)];
	return mr && mr->pub.lkey == sge->lkey &&
	       (mr->access & access) == access &&
	       range_in(sge->addr, sge->length, (uintptr_t)mr->pub.addr,
			mr->pub.length);
}

void sdp__shm_lcq_push(struct shm_qp *qp, uint64_t wr_id,
		       enum sdp_wc_opcode op, enum sdp_wc_status st,
		       uint32_t byte_len)
{
	struct sdp_wc *wc;

	wc = &qp->lcq[(qp->lcq_head + qp->lcq_count) % qp->attr.max_send_wr];
	wc->wr_id = wr_id;
	wc->opcode = op;
	wc->status = st;
	wc->byte_len = byte_len;
	wc->flags = 0;
	qp->lcq_count++;
	sdp__shm_wake_self(qp, false);
}

/*
 * Which of the peer's posted receives a SEND fills.  The peer announces
 * each receive it posts in its rq ring; we read them into `avail` and use
 * the newest first, where a verbs RQ would use the oldest.  In
 * request/response traffic the newest is the buffer the peer has just
 * read and reposted, still in cache: a connection then works in one
 * buffer per direction instead of cycling through all of them, which with
 * 1000 connections decides whether the rings fit in the caches (nginx at
 * wrk -c 1000: +15%, docs/DESIGN.md).  Completions name the receive they
 * filled by its tag; the peer checks it (recv_from_ring).
 *
 * Returns 0, -EAGAIN if none is posted, -EPROTO if the peer's ring is
 * corrupt.
 */
static int avail_refill(struct shm_qp *qp)
{
	struct shm_seg *p = &qp->peer;
	uint32_t prod = atomic_load_explicit(&p->ctrl->rq_prod,
					     memory_order_acquire);

	if (prod - qp->peer_rd > p->depth)
		return -EPROTO;		/* more than the ring holds */
	if (prod != qp->peer_rd && !qp->avail) {
		qp->avail = calloc(p->depth, sizeof(*qp->avail));
		if (!qp->avail)
			return -EAGAIN;	/* RNR: the QP fails, as it should */
	}
	for (; qp->peer_rd != prod; qp->peer_rd++) {
		struct shm_rq_entry *e = &p->rq[qp->peer_rd & (p->depth - 1)];
		struct shm_avail a = {
			atomic_load_explicit(&e->offset, memory_order_relaxed),
			atomic_load_explicit(&e->length, memory_order_relaxed),
			atomic_load_explicit(&e->tag, memory_order_relaxed),
		};

		/* Never more posted than the ring holds; never outside the
		 * peer's region. */
		if (qp->navail == p->depth || a.tag >= p->depth ||
		    a.offset > p->region_size ||
		    a.length > p->region_size - a.offset)
			return -EPROTO;
		qp->avail[qp->navail++] = a;
	}
	return qp->navail ? 0 : -EAGAIN;
}

/* Take the receive to fill: the one at `want` if a slot handed out by
 * shm_send_slot() is being posted in place, else the newest. */
static struct shm_avail avail_take(struct shm_qp *qp, const uint8_t *want)
{
	const uint8_t *base = qp->peer.region;
	uint32_t i = qp->navail - 1;
	struct shm_avail a;

	if (want >= base && want < base + qp->peer.region_size) {
		for (uint32_t j = qp->navail; j-- > 0;) {
			if (base + qp->avail[j].offset == want) {
				i = j;
				break;
			}
		}
	}
	a = qp->avail[i];
	memmove(&qp->avail[i], &qp->avail[i + 1],
		(qp->navail - 1 - i) * sizeof(*qp->avail));
	qp->navail--;
	return a;
}

/* Deliver one SEND into one of the peer's posted receives. */
static enum sdp_wc_status do_send(struct shm_qp *qp,
				  const struct sdp_send_wr *wr, uint64_t total)
{
	struct shm_seg *p = &qp->peer;
	struct shm_cq_entry *cqe = &p->cq[qp->peer_cons & (p->depth - 1)];
	struct shm_avail a;
	uint8_t *dst;
	int r = avail_refill(qp);

	if (r == -EPROTO)
		return SDP_WC_GENERAL_ERR;	/* peer corrupted its ring */
	if (r < 0)
		return SDP_WC_RNR_RETRY_EXC_ERR;
	a = avail_take(qp, wr->num_sge ?
		       (const uint8_t *)(uintptr_t)wr->sg_list[0].addr : NULL);
	qp->peer_cons++;
	atomic_store_explicit(&cqe->tag, a.tag, memory_order_relaxed);
	if (total > a.length) {
		atomic_store_explicit(&cqe->byte_len,
				      total > UINT32_MAX ? UINT32_MAX :
				      (uint32_t)total, memory_order_relaxed);
		atomic_store_explicit(&cqe->status, SHM_CQE_LEN_ERR,
				      memory_order_relaxed);
		atomic_store(&p->ctrl->cq_prod, qp->peer_cons);
		return SDP_WC_REM_INV_REQ_ERR;
	}
	dst = p->region + a.offset;
	for (int i = 0; i < wr->num_sge; i++) {
		const void *src = (const void *)(uintptr_t)wr->sg_list[i].addr;

		if (src != dst)	/* else written in place (shm_send_slot) */
			memcpy(dst, src, wr->sg_list[i].length);
		dst += wr->sg_list[i].length;
	}
	atomic_store_explicit(&cqe->byte_len, (uint32_t)total,
			      memory_order_relaxed);
	atomic_store_explicit(&cqe->status, SHM_CQE_OK, memory_order_relaxed);
	/* seq_cst: ordered before the peer's armed/waiters checks below. */
	atomic_store(&p->ctrl->cq_prod, qp->peer_cons);
	if ((wr->flags & SDP_SEND_SOLICITED) && qp->peer_app_fd < 0)
		sdp__shm_take_offer(qp);
	if ((wr->flags & SDP_SEND_SOLICITED) && qp->peer_app_fd_lost)
		sdp__shm_wake_owner_nofd(p->ctrl, qp->sock);
	else
		sdp__shm_wake_owner_seg(p->ctrl, qp->sock,
					(wr->flags & SDP_SEND_SOLICITED) ?
					qp->peer_app_fd : -1, qp->peer_words,
					qp->peer_cons);
	return SDP_WC_SUCCESS;
}

/* The peer's receive buffer that do_send() fills next. */
static uint8_t *shm_send_slot(struct sdp_qp *sq, uint32_t *cap)
{
	struct shm_qp *qp = SHM_QP(sq);
	struct shm_avail *a;

	if (atomic_load(&qp->err) ||
	    atomic_load_explicit(&qp->state, memory_order_relaxed) !=
	    SHM_ESTABLISHED || !qp->peer.ctrl || avail_refill(qp) < 0)
		return NULL;	/* none posted, or a corrupt ring: do_send says */
	a = &qp->avail[qp->navail - 1];
	*cap = a->length;
	return qp->peer.region + a->offset;
}

static const enum sdp_wc_opcode wc_opcode[] = {
	[SDP_WR_SEND] = SDP_WC_SEND,
	[SDP_WR_RDMA_WRITE] = SDP_WC_RDMA_WRITE,
	[SDP_WR_RDMA_READ] = SDP_WC_RDMA_READ,
};

static int shm_post_send(struct sdp_qp *sq, const struct sdp_send_wr *wr)
{
	struct shm_qp *qp = SHM_QP(sq);
	enum sdp_wc_status st = SDP_WC_SUCCESS;
	bool inl = wr->opcode == SDP_WR_SEND && (wr->flags & SDP_SEND_INLINE);
	unsigned need = wr->opcode == SDP_WR_RDMA_READ ? SDP_ACCESS_LOCAL_WRITE : 0;
	uint64_t total = 0;

	if (wr->num_sge < 0 || wr->num_sge > SDP_MAX_SGE ||
	    (wr->num_sge && !wr->sg_list) ||
	    wr->opcode < SDP_WR_SEND || wr->opcode > SDP_WR_RDMA_READ)
		return -EINVAL;
	if (!atomic_load(&qp->err) &&
	    atomic_load_explicit(&qp->state, memory_order_relaxed) !=
	    SHM_ESTABLISHED)
		return -ENOTCONN;
	if (wr->opcode != SDP_WR_SEND && !shm_rdma_ok(qp))
		return -EOPNOTSUPP;
	if (qp->lcq_count >= qp->attr.max_send_wr)
		return -ENOMEM;
	for (int i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;

	if (!atomic_load(&qp->err) &&
	    atomic_load_explicit(&qp->me.ctrl->closed, memory_order_acquire))
		sdp__shm_set_error(qp);
	if (atomic_load(&qp->err)) {
		st = SDP_WC_WR_FLUSH_ERR;
		goto complete;
	}
	for (int i = 0; i < wr->num_sge && !inl; i++) {
		if (!sdp__shm_local_sge_ok(qp, &wr->sg_list[i], need)) {
			st = SDP_WC_LOC_PROT_ERR;
			goto complete;
		}
	}
	if (wr->opcode == SDP_WR_SEND)
		st = do_send(qp, wr, total);
	else
		st = sdp__shm_rdma(qp, wr, total);
complete:
	if (st != SDP_WC_SUCCESS)
		sdp__shm_set_error(qp);
	/* Unsignaled WRs complete silently unless they fail. */
	if (st != SDP_WC_SUCCESS || (wr->flags & SDP_SEND_SIGNALED))
		sdp__shm_lcq_push(qp, wr->wr_id, wc_opcode[wr->opcode], st,
				  wr->opcode == SDP_WR_RDMA_READ && !st ?
				  (uint32_t)total : 0);
	return 0;
}

static int shm_post_recv(struct sdp_qp *sq, const struct sdp_recv_wr *wr)
{
	struct shm_qp *qp = SHM_QP(sq);
	uint32_t idx = qp->rq_prod & (qp->me.depth - 1);
	uint32_t tag;

	if (wr->sge.lkey != SHM_RECV_LKEY ||
	    !range_in(wr->sge.addr, wr->sge.length, (uintptr_t)qp->me.region,
		      qp->me.region_size))
		return -EINVAL;
	/* Posted and not yet returned: at most max_recv_wr <= depth, so a
	 * tag is free, and the peer has read the rq entry this overwrites
	 * (it reads an entry before it can fill that receive). */
	if (qp->rq_prod - qp->rq_done >= qp->attr.max_recv_wr)
		return -ENOMEM;
	tag = qp->rwr_free[--qp->nfree];
	qp->rwr[tag] = (struct shm_rwr){
		.wr_id = wr->wr_id,
		.offset = (uint32_t)(wr->sge.addr - (uintptr_t)qp->me.region),
		.length = wr->sge.length, .seq = qp->rq_prod, .posted = true,
	};
	qp->rq_prod++;
	if (atomic_load(&qp->err))
		return 0;	/* flushed by poll_cq */
	atomic_store_explicit(&qp->me.rq[idx].offset,
			      (uint32_t)(wr->sge.addr - (uintptr_t)qp->me.region),
			      memory_order_relaxed);
	atomic_store_explicit(&qp->me.rq[idx].length, wr->sge.length,
			      memory_order_relaxed);
	atomic_store_explicit(&qp->me.rq[idx].tag, tag, memory_order_relaxed);
	atomic_store_explicit(&qp->me.ctrl->rq_prod, qp->rq_prod,
			      memory_order_release);
	return 0;
}

/* The posted receive with the oldest post: the one a flush or a
 * completion that names no valid receive reports (as a verbs RQ would). */
static uint32_t rwr_oldest(const struct shm_qp *qp)
{
	uint32_t best = 0, age = 0;

	for (uint32_t t = 0; t < qp->me.depth; t++) {
		if (qp->rwr[t].posted &&
		    (!age || qp->rq_prod - qp->rwr[t].seq > age)) {
			best = t;
			age = qp->rq_prod - qp->rwr[t].seq;
		}
	}
	return best;
}

/* A posted receive completed (or was flushed): its tag is free again. */
static uint64_t rwr_retire(struct shm_qp *qp, uint32_t tag)
{
	qp->rwr[tag].posted = false;
	qp->rwr_free[qp->nfree++] = tag;
	qp->rq_done++;
	return qp->rwr[tag].wr_id;
}

/* Next receive completion from the peer-written ring, or false. */
static bool recv_from_ring(struct shm_qp *qp, struct sdp_wc *wc)
{
	uint32_t prod, idx, len, status, tag;

	if (qp->rx_bad)
		return false;
	prod = atomic_load_explicit(&qp->me.ctrl->cq_prod, memory_order_acquire);
	if (prod == qp->rq_done)
		return false;
	idx = qp->rq_done & (qp->me.depth - 1);
	wc->opcode = SDP_WC_RECV;
	wc->byte_len = 0;
	wc->flags = 0;
	if (prod - qp->rq_done > qp->rq_prod - qp->rq_done) {
		wc->status = SDP_WC_GENERAL_ERR;	/* completes unposted */
		goto bad;
	}
	tag = atomic_load_explicit(&qp->me.cq[idx].tag, memory_order_relaxed);
	len = atomic_load_explicit(&qp->me.cq[idx].byte_len,
				   memory_order_relaxed);
	status = atomic_load_explicit(&qp->me.cq[idx].status,
				      memory_order_relaxed);
	wc->byte_len = len;
	if (tag >= qp->me.depth || !qp->rwr[tag].posted) {
		wc->status = SDP_WC_GENERAL_ERR;	/* names no receive */
		goto bad;
	}
	if (status == SHM_CQE_LEN_ERR || (status == SHM_CQE_OK &&
					  len > qp->rwr[tag].length)) {
		wc->status = SDP_WC_LOC_LEN_ERR;
		goto bad_tag;
	}
	if (status != SHM_CQE_OK) {
		wc->status = SDP_WC_GENERAL_ERR;
		goto bad_tag;
	}
	wc->status = SDP_WC_SUCCESS;
	wc->wr_id = rwr_retire(qp, tag);
	qp->rx_bytes += len;
	/* Messages up to app_woke_upto were announced to our application
	 * by the peer's readiness byte (wrapping compare). */
	if ((int32_t)(atomic_load_explicit(&qp->me.ctrl->app_woke_upto,
					   memory_order_relaxed) -
		      qp->rq_done) >= 0)
		wc->flags = SDP_WC_APP_WOKEN;
	return true;

bad:
	tag = rwr_oldest(qp);
bad_tag:
	/* Stop reading the ring: everything after this is flushed. */
	qp->rx_bad = true;
	wc->wr_id = rwr_retire(qp, tag);
	sdp__shm_set_error(qp);
	return true;
}

static int shm_poll_cq(struct sdp_qp *sq, struct sdp_wc *wc, int max)
{
	struct shm_qp *qp = SHM_QP(sq);
	int n = 0;

	/* Acquire: completions published before `closed` are visible.  While
	 * connecting, the CM reply (get_event) reports a refusal instead. */
	if (!atomic_load_explicit(&qp->err, memory_order_relaxed) &&
	    atomic_load_explicit(&qp->state, memory_order_relaxed) >=
	    SHM_PASSIVE &&
	    atomic_load_explicit(&qp->me.ctrl->closed, memory_order_acquire))
		sdp__shm_set_error(qp);
	/* In error, the peer's completions (published before `closed`)
	 * come first, as on a real CQ where they completed before our send
	 * failed: a send flushed because the peer finished and left must not
	 * overtake its last data and DisConn (the engine resets on it). */
	while (n < max && atomic_load(&qp->err) && qp->rq_done != qp->rq_prod &&
	       recv_from_ring(qp, &wc[n]))
		n++;
	while (n < max && qp->lcq_count) {
		wc[n++] = qp->lcq[qp->lcq_head];
		qp->lcq_head = (qp->lcq_head + 1) % qp->attr.max_send_wr;
		qp->lcq_count--;
	}
	while (n < max && qp->rq_done != qp->rq_prod) {
		if (recv_from_ring(qp, &wc[n])) {
			n++;
			continue;
		}
		if (!atomic_load(&qp->err))
			break;
		wc[n].wr_id = rwr_retire(qp, rwr_oldest(qp));
		wc[n].opcode = SDP_WC_RECV;
		wc[n].status = SDP_WC_WR_FLUSH_ERR;
		wc[n].byte_len = 0;
		wc[n].flags = 0;
		n++;
		qp->rx_bad = true;	/* flushed slots are gone for good */
	}
	if (atomic_load_explicit(&qp->me.ctrl->cq_cons, memory_order_relaxed) !=
	    qp->rq_done)
		atomic_store(&qp->me.ctrl->cq_cons, qp->rq_done);
	return n;
}

static const struct sdp_app_wake_ops shm_app_wake = {
	.share_app_fd = sdp__shm_share_app_fd,
	.app_arm = sdp__shm_app_arm,
	.app_sleep_id = sdp__shm_app_sleep_id,
	.app_word = sdp__shm_app_word,
	.drop_peer_app_fd = sdp__shm_drop_peer_app_fd,
	.app_arrivals = sdp__shm_app_arrivals,
};

const struct sdp_transport_ops sdp__shm_ops = {
	.bind = sdp__shm_bind,
	.bind_flags = sdp__shm_bind_flags,
	.set_tcp_claim = sdp__shm_set_tcp_claim,
	.bound_addr = sdp__shm_bound_addr,
	.listen = sdp__shm_listen,
	.listener_fd = sdp__shm_listener_fd,
	.get_request = sdp__shm_get_request,
	.reject = sdp__shm_reject,
	.share_listener = sdp__shm_share_listener,
	.take_request = sdp__shm_take_request,
	.close_listener = sdp__shm_close_listener,
	.create_qp = shm_create_qp,
	.create_qp_from_req = shm_create_qp_from_req,
	.connect = sdp__shm_connect,
	.accept = sdp__shm_accept,
	.get_event = sdp__shm_get_event,
	.addresses = shm_addresses,
	.query_caps = shm_query_caps,
	.disconnect = shm_disconnect,
	.destroy_qp = shm_destroy_qp,
	.detach_qp = shm_detach_qp,
	.export_qp = sdp__shm_export_qp,
	.import_qp = sdp__shm_import_qp,
	.share_prepare = sdp__shm_share_prepare,
	.summon = sdp__shm_summon,
	.recv_region = shm_recv_region,
	.reg_mr = sdp__shm_reg_mr,
	.dereg_mr = sdp__shm_dereg_mr,
	.post_send = shm_post_send,
	.post_recv = shm_post_recv,
	.poll_cq = shm_poll_cq,
	.wait_seq = sdp__shm_wait_seq,
	.wait = sdp__shm_wait,
	.kick = sdp__shm_kick,
	.event_fd = sdp__shm_event_fd,
	.req_notify = sdp__shm_req_notify,
	.ack_events = sdp__shm_ack_events,
	.answer_fd = sdp__shm_answer_fd,
	/* An RDMA in flight is a copy the peer makes in the kernel: no
	 * completion to poll for. */
	.wait_rdma = sdp_tp_wait_rdma_plain,
	.send_slot = shm_send_slot,
	.app_wake = &shm_app_wake,
};

const struct sdp_transport sdp_shm_transport = {
	.name = "shm",
	.ops = &sdp__shm_ops,
};
