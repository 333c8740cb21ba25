// SPDX-License-Identifier: MIT
/*
 * verbs_qp.c — QP life cycle and data path of the verbs transport: RC QPs on
 * the device's shared CQ, the receive region registered once, the send ring
 * that implements the engine's "copy at post time" SENDs, RDMA READ/WRITE,
 * memory registration, and per-QP software CQs fed by verbs_dev.c.
 *
 * The active side creates its QP before the device is known (the engine
 * posts receives before connect()); those receives are kept in order and
 * handed to the hardware once the route names the device.
 */
#include "transport/verbs/verbs.h"
#include "transport/multi.h"
#include "base/real.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define VB_RING_MIN (256u * 1024)
#define VB_MAX_INLINE 256	/* asked of the device; it may give less */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- creation ---------------------------------------------------------------- */

int sdp__verbs_create_qp(const struct sdp_qp_attr *attr, struct sdp_qp **out)
{
	struct vb_qp *qp;
	size_t rsz;
	int r = sdp__verbs_init();

	if (r < 0)
		return r;
	if (!attr->max_send_wr || !attr->max_recv_wr)
		return -EINVAL;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp->obj.ops = &sdp__verbs_ops;
	qp->attr = *attr;
	pthread_mutex_init(&qp->lock, NULL);
	qp->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	qp->sq_depth = attr->max_send_wr * 2;	/* completions polled late */
	qp->rq_depth = attr->max_recv_wr;
	qp->scq_cap = qp->sq_depth + qp->rq_depth;
	qp->scq = calloc(qp->scq_cap, sizeof(*qp->scq));
	qp->swr = calloc(qp->sq_depth, sizeof(*qp->swr));
	qp->rwr = calloc(qp->rq_depth, sizeof(*qp->rwr));
	qp->rlen = calloc(qp->rq_depth, sizeof(*qp->rlen));
	qp->roff = calloc(qp->rq_depth, sizeof(*qp->roff));
	rsz = ((size_t)attr->recv_region_size + 4095) & ~(size_t)4095;
	if (qp->evfd < 0 || !qp->scq || !qp->swr || !qp->rwr || !qp->rlen ||
	    !qp->roff || sdp__verbs_bufs_take(qp, rsz) < 0) {
		sdp__verbs_destroy_qp((struct sdp_qp *)qp);
		return -ENOMEM;
	}
	qp->recv_mr.addr = qp->region;
	qp->recv_mr.length = attr->recv_region_size;
	qp->recv_mr.remote_addr = (uint64_t)(uintptr_t)qp->region;
	qp->epoch = sdp__vb.epoch;
	atomic_store(&qp->state, VB_IDLE);
	*out = (struct sdp_qp *)qp;
	return 0;
}

static int post_recv_hw(struct vb_qp *qp, uint32_t idx)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	uint32_t i = idx % qp->rq_depth;

	sge.addr = (uint64_t)(uintptr_t)qp->region + qp->roff[i];
	sge.length = qp->rlen[i];
	sge.lkey = qp->region_mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = VB_WRID(qp->slot, qp->gen, 1, idx);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return ibv_post_recv(qp->hw, &wr, &bad) ? -EIO : 0;
}

/* One transition of our QP with the attributes the CM knows (path, PSNs,
 * MTU, access); SDP sets the RDMA READ depths (>= 0) and the ACK timeout. */
static int qp_modify(struct vb_qp *qp, enum ibv_qp_state to, int resp_res,
		     int init_depth)
{
	struct ibv_qp_attr a;
	int mask;

	memset(&a, 0, sizeof(a));
	a.qp_state = to;
	if (rdma_init_qp_attr(qp->id, &a, &mask))
		return errno ? -errno : -EIO;
	if (to == IBV_QPS_RTR && resp_res >= 0)
		a.max_dest_rd_atomic = (uint8_t)resp_res;
	if (to == IBV_QPS_RTS) {
		if (init_depth >= 0)
			a.max_rd_atomic = (uint8_t)init_depth;
		/* Bounded detection of a dead peer (verbs.h). */
		a.timeout = sdp__vb.ack_timeout;
		mask |= IBV_QP_TIMEOUT;
	}
	return ibv_modify_qp(qp->hw, &a, mask) ? -EIO : 0;
}

/* Connection accepted (passive: before rdma_accept; active: on the REP).
 * INIT again first: the access rights (RDMA READ for ZCopy) depend on the
 * responder resources, which the CM knows only now.  -1: the CM's values. */
int sdp__verbs_qp_rtr_rts(struct vb_qp *qp, int resp_res, int init_depth)
{
	int r = qp_modify(qp, IBV_QPS_INIT, -1, -1);

	if (r == 0)
		r = qp_modify(qp, IBV_QPS_RTR, resp_res, -1);
	if (r == 0)
		r = qp_modify(qp, IBV_QPS_RTS, -1, init_depth);
	return r;
}

/* The id now names a device: register memory, create the hardware QP on the
 * shared CQ, hand it the receives posted so far. */
int sdp__verbs_qp_bind_dev(struct vb_qp *qp)
{
	struct ibv_qp_init_attr ia;
	uint64_t slot, ring_size;
	int r;

	r = sdp__verbs_dev_get(qp->id, &qp->dev);
	if (r < 0)
		return r;
	slot = qp->attr.recv_region_size / qp->attr.max_recv_wr;
	ring_size = (uint64_t)qp->attr.max_send_wr * slot;
	if (ring_size < VB_RING_MIN)
		ring_size = VB_RING_MIN;
	r = sdp__verbs_bufs_bind(qp, (ring_size + 4095) & ~(uint64_t)4095);
	if (r < 0)
		return r;
	if (qp->region_mr)
		qp->recv_mr.lkey = qp->region_mr->lkey;
	r = sdp__verbs_dev_attach(qp->dev, qp, (int)qp->scq_cap);
	if (r < 0) {
		qp->dev = NULL;		/* nothing reserved */
		return r;
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = qp->dev->cq;
	ia.recv_cq = qp->dev->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 1;	/* the send ring is freed by completions */
	ia.cap.max_send_wr = qp->sq_depth;
	ia.cap.max_recv_wr = qp->rq_depth;
	ia.cap.max_send_sge = SDP_MAX_SGE;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = VB_MAX_INLINE;
	qp->hw = ibv_create_qp(qp->dev->pd, &ia);
	if (!qp->hw) {
		ia.cap.max_inline_data = 0;
		qp->hw = ibv_create_qp(qp->dev->pd, &ia);
		if (!qp->hw)
			return errno ? -errno : -ENOMEM;
	}
	r = qp_modify(qp, IBV_QPS_INIT, -1, -1);
	if (r < 0)
		return r;
	pthread_mutex_lock(&qp->lock);
	qp->max_inline = ia.cap.max_inline_data;
	r = 0;
	for (; qp->rq_hw != qp->rq_head && r == 0; qp->rq_hw++)
		r = post_recv_hw(qp, qp->rq_hw);
	pthread_mutex_unlock(&qp->lock);
	return r;
}

int sdp__verbs_create_qp_from_req(struct sdp_conn_req *req,
				  const struct sdp_qp_attr *attr,
				  struct sdp_qp **out)
{
	struct vb_conn_req *q = (struct vb_conn_req *)req;
	struct sdp_qp *tq;
	struct vb_qp *qp;
	int r;

	r = sdp__verbs_create_qp(attr, &tq);
	if (r < 0) {
		sdp__verbs_reject(req);
		return r;
	}
	qp = VB_QP(tq);
	qp->id = q->id;
	free(q);
	atomic_store(&qp->state, VB_PASSIVE);
	r = sdp__verbs_qp_bind_dev(qp);
	if (r < 0) {
		rdma_reject(qp->id, NULL, 0);
		atomic_store(&qp->state, VB_FAILED);
		sdp__verbs_destroy_qp(tq);
		return r;
	}
	qp->id->context = qp;	/* from now on its events are ours */
	*out = tq;
	return 0;
}

/* Wait (bounded) until every posted send completed: DREQ must not overtake
 * the last messages (DisConn) into the error state. */
static void linger_sends(struct vb_qp *qp)
{
	uint64_t end = now_ms() + 1000;
	uint32_t left;

	for (;;) {
		sdp__verbs_dev_drain(qp->dev);
		pthread_mutex_lock(&qp->lock);
		left = qp->sq_head - qp->sq_tail;
		pthread_mutex_unlock(&qp->lock);
		if (!left || now_ms() >= end)
			return;
		usleep(200);
	}
}

void sdp__verbs_destroy_qp(struct sdp_qp *tq)
{
	struct vb_qp *qp = VB_QP(tq);
	enum vb_state st = atomic_load(&qp->state);
	struct vb_mr *m, *next;

	if (sdp__verbs_inherited(qp->epoch)) {
		/* fork() child: the QP, MRs, id and CQ slot are the parent's
		 * (verbs_dev.c, "fork"); only our memory is ours to free. */
		sdp__verbs_orphan(qp);	/* fresh lock, nothing pending */
		m = qp->mrs;
		for (; m; m = next) {
			next = m->next;
			free(m);	/* the ibv_mr handle is leaked */
		}
		sdp__verbs_bufs_orphan(qp);
		goto free_mem;
	}
	if (qp->dev && qp->hw && (st == VB_ESTABLISHED || st == VB_PASSIVE))
		linger_sends(qp);
	sdp__verbs_disconnect(tq);
	/* Barrier: an event handler that saw the old state has finished (it
	 * may have just created the hardware QP); later ones see the new. */
	pthread_mutex_lock(&sdp__vb.cm_lock);
	pthread_mutex_unlock(&sdp__vb.cm_lock);
	if (qp->hw)
		ibv_destroy_qp(qp->hw);
	if (qp->id)
		rdma_destroy_id(qp->id);	/* waits for our events' acks */
	if (qp->dev && qp->slot < qp->dev->ntab &&
	    qp->dev->tab[qp->slot] == qp)
		sdp__verbs_dev_detach(qp->dev, qp, (int)qp->scq_cap);
	for (m = qp->mrs; m; m = next) {
		next = m->next;
		ibv_dereg_mr(m->mr);
		free(m);
	}
	sdp__verbs_bufs_put(qp);	/* the hardware QP is gone */
free_mem:
	free(qp->scq);
	free(qp->swr);
	free(qp->rwr);
	free(qp->rlen);
	free(qp->roff);
	if (qp->evfd >= 0)
		sdp_close(qp->evfd);
	pthread_mutex_destroy(&qp->lock);
	free(qp);
}

void sdp__verbs_query_caps(struct sdp_qp *tq, struct sdp_tp_caps *caps)
{
	memset(caps, 0, sizeof(*caps));
	caps->max_inline = UINT32_MAX;	/* copied into the send ring */
	caps->max_sge = SDP_MAX_SGE;
	caps->rdma = 1;
	strcpy(caps->name, "verbs");
}

struct sdp_mr *sdp__verbs_recv_region(struct sdp_qp *tq)
{
	return &VB_QP(tq)->recv_mr;
}

void sdp__verbs_qp_set_error(struct vb_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	if (qp->hw)
		ibv_modify_qp(qp->hw, &a, IBV_QP_STATE);
	sdp__verbs_bump(qp);
}

/* ---- memory ------------------------------------------------------------------ */

int sdp__verbs_reg_mr(struct sdp_qp *tq, void *addr, size_t len,
		      unsigned access, struct sdp_mr **out)
{
	struct vb_qp *qp = VB_QP(tq);
	struct vb_mr *m;
	int fl = 0;

	if (sdp__verbs_inherited(qp->epoch))
		return -ECONNRESET;
	if (!qp->dev)
		return -ENOTCONN;
	if (access & (SDP_ACCESS_LOCAL_WRITE | SDP_ACCESS_REMOTE_WRITE))
		fl |= IBV_ACCESS_LOCAL_WRITE;
	if (access & SDP_ACCESS_REMOTE_WRITE)
		fl |= IBV_ACCESS_REMOTE_WRITE;
	if (access & SDP_ACCESS_REMOTE_READ)
		fl |= IBV_ACCESS_REMOTE_READ;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->mr = ibv_reg_mr(qp->dev->pd, addr, len, fl);
	if (!m->mr) {
		int r = errno ? -errno : -ENOMEM;

		free(m);
		return r;
	}
	m->pub.addr = addr;
	m->pub.length = len;
	m->pub.lkey = m->mr->lkey;
	m->pub.rkey = m->mr->rkey;
	m->pub.remote_addr = (uint64_t)(uintptr_t)addr;
	pthread_mutex_lock(&qp->lock);
	m->next = qp->mrs;
	qp->mrs = m;
	pthread_mutex_unlock(&qp->lock);
	*out = &m->pub;
	return 0;
}

int sdp__verbs_dereg_mr(struct sdp_qp *tq, struct sdp_mr *mr)
{
	struct vb_qp *qp = VB_QP(tq);
	struct vb_mr **pp, *m = (struct vb_mr *)mr;

	if (sdp__verbs_inherited(qp->epoch)) {
		sdp__verbs_orphan(qp);	/* the lock may be a stale copy */
		pthread_mutex_lock(&qp->lock);
		for (pp = &qp->mrs; *pp && *pp != m; pp = &(*pp)->next)
			;
		if (*pp)
			*pp = m->next;
		pthread_mutex_unlock(&qp->lock);
		free(m);	/* the parent's registration: leaked */
		return 0;
	}
	pthread_mutex_lock(&qp->lock);
	for (pp = &qp->mrs; *pp && *pp != m; pp = &(*pp)->next)
		;
	if (!*pp) {
		pthread_mutex_unlock(&qp->lock);
		return -EINVAL;
	}
	*pp = m->next;
	pthread_mutex_unlock(&qp->lock);
	ibv_dereg_mr(m->mr);
	free(m);
	return 0;
}

/* ---- data path ----------------------------------------------------------------- */

/* Room for `len` contiguous bytes in the send ring; qp->lock held. */
static int ring_alloc(struct vb_qp *qp, uint32_t len, uint64_t *off)
{
	uint64_t need = ((uint64_t)len + 63) & ~(uint64_t)63;
	uint64_t pos = qp->ring_head % qp->ring_size;
	uint64_t skip = pos + need > qp->ring_size ? qp->ring_size - pos : 0;

	if (need > qp->ring_size)
		return -EMSGSIZE;
	if (qp->ring_head + skip + need - qp->ring_tail > qp->ring_size)
		return -ENOBUFS;
	qp->ring_head += skip;
	*off = qp->ring_head % qp->ring_size;
	qp->ring_head += need;
	return 0;
}

static int post_send_locked(struct vb_qp *qp, const struct sdp_send_wr *wr,
			    uint32_t total)
{
	static const enum ibv_wr_opcode opc[] = {
		[SDP_WR_SEND] = IBV_WR_SEND,
		[SDP_WR_RDMA_WRITE] = IBV_WR_RDMA_WRITE,
		[SDP_WR_RDMA_READ] = IBV_WR_RDMA_READ,
	};
	static const uint8_t wco[] = {
		[SDP_WR_SEND] = SDP_WC_SEND,
		[SDP_WR_RDMA_WRITE] = SDP_WC_RDMA_WRITE,
		[SDP_WR_RDMA_READ] = SDP_WC_RDMA_READ,
	};
	struct ibv_sge sge[SDP_MAX_SGE];
	struct ibv_send_wr w, *bad;
	uint64_t ring_head0 = qp->ring_head, off;
	struct vb_swr *e;
	int i, r;

	if (qp->sq_head - qp->sq_tail >= qp->sq_depth)
		return -ENOBUFS;
	memset(&w, 0, sizeof(w));
	w.opcode = opc[wr->opcode];
	w.send_flags = IBV_SEND_SIGNALED;
	if (wr->flags & SDP_SEND_SOLICITED)
		w.send_flags |= IBV_SEND_SOLICITED;
	w.sg_list = sge;
	if (wr->opcode != SDP_WR_SEND) {
		w.wr.rdma.remote_addr = wr->remote_addr;
		w.wr.rdma.rkey = wr->rkey;
	}
	if ((wr->flags & SDP_SEND_INLINE) && wr->opcode != SDP_WR_RDMA_READ &&
	    total > qp->max_inline) {
		/* Copy into registered memory: the caller reuses its buffer. */
		r = ring_alloc(qp, total, &off);
		if (r < 0)
			return r;
		sge[0].addr = (uint64_t)(uintptr_t)qp->ring + off;
		sge[0].length = total;
		sge[0].lkey = qp->ring_mr->lkey;
		for (i = 0; i < wr->num_sge; i++) {
			memcpy(qp->ring + off, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
		w.num_sge = total ? 1 : 0;
	} else {
		if ((wr->flags & SDP_SEND_INLINE) &&
		    wr->opcode != SDP_WR_RDMA_READ)
			w.send_flags |= IBV_SEND_INLINE;
		for (i = 0; i < wr->num_sge; i++) {
			sge[i].addr = wr->sg_list[i].addr;
			sge[i].length = wr->sg_list[i].length;
			sge[i].lkey = wr->sg_list[i].lkey;
		}
		w.num_sge = wr->num_sge;
	}
	e = &qp->swr[qp->sq_head % qp->sq_depth];
	e->wr_id = wr->wr_id;
	e->signaled = !!(wr->flags & SDP_SEND_SIGNALED);
	e->opcode = wco[wr->opcode];
	e->ring_end = qp->ring_head;
	w.wr_id = VB_WRID(qp->slot, qp->gen, 0, qp->sq_head);
	if (ibv_post_send(qp->hw, &w, &bad)) {
		qp->ring_head = ring_head0;
		return -EIO;
	}
	qp->sq_head++;
	return 0;
}

int sdp__verbs_post_send(struct sdp_qp *tq, const struct sdp_send_wr *wr)
{
	struct vb_qp *qp = VB_QP(tq);
	uint64_t deadline = 0;
	uint32_t total = 0;
	int i, r;

	if (sdp__verbs_inherited(qp->epoch)) {
		sdp__verbs_orphan(qp);
		return -ECONNRESET;
	}
	if (!qp->dev || !qp->hw)
		return -ENOTCONN;
	if (wr->num_sge < 0 || wr->num_sge > SDP_MAX_SGE ||
	    wr->opcode < SDP_WR_SEND || wr->opcode > SDP_WR_RDMA_READ)
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	for (;;) {
		pthread_mutex_lock(&qp->lock);
		r = post_send_locked(qp, wr, total);
		pthread_mutex_unlock(&qp->lock);
		if (r != -ENOBUFS)
			return r;
		/* Send queue or ring full of sends not yet acknowledged. */
		if (!deadline)
			deadline = now_ms() + VB_SEND_WAIT_MS;
		else if (now_ms() >= deadline)
			return -ENOBUFS;
		sdp__verbs_dev_drain(qp->dev);
		usleep(50);
	}
}

int sdp__verbs_post_recv(struct sdp_qp *tq, const struct sdp_recv_wr *wr)
{
	struct vb_qp *qp = VB_QP(tq);
	uint64_t base = (uint64_t)(uintptr_t)qp->region;
	uint32_t i;
	int r = 0;

	if (sdp__verbs_inherited(qp->epoch)) {
		sdp__verbs_orphan(qp);
		return -ECONNRESET;
	}
	if (wr->sge.addr < base || wr->sge.length > qp->recv_mr.length ||
	    wr->sge.addr - base > qp->recv_mr.length - wr->sge.length)
		return -EINVAL;
	pthread_mutex_lock(&qp->lock);
	if (qp->rq_head - qp->rq_tail >= qp->rq_depth) {
		pthread_mutex_unlock(&qp->lock);
		return -ENOMEM;
	}
	i = qp->rq_head % qp->rq_depth;
	qp->rwr[i] = wr->wr_id;
	qp->rlen[i] = wr->sge.length;
	qp->roff[i] = wr->sge.addr - base;
	qp->rq_head++;
	if (qp->dev && qp->hw && qp->rq_hw == qp->rq_head - 1) {
		r = post_recv_hw(qp, qp->rq_hw);
		if (r == 0)
			qp->rq_hw++;
		else
			qp->rq_head--;
	}
	pthread_mutex_unlock(&qp->lock);
	return r;
}

static enum sdp_wc_status wc_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS: return SDP_WC_SUCCESS;
	case IBV_WC_LOC_LEN_ERR: return SDP_WC_LOC_LEN_ERR;
	case IBV_WC_LOC_PROT_ERR: return SDP_WC_LOC_PROT_ERR;
	case IBV_WC_WR_FLUSH_ERR: return SDP_WC_WR_FLUSH_ERR;
	case IBV_WC_REM_ACCESS_ERR: return SDP_WC_REM_ACCESS_ERR;
	case IBV_WC_REM_INV_REQ_ERR: return SDP_WC_REM_INV_REQ_ERR;
	case IBV_WC_RNR_RETRY_EXC_ERR: return SDP_WC_RNR_RETRY_EXC_ERR;
	case IBV_WC_RETRY_EXC_ERR: return SDP_WC_RETRY_EXC_ERR;
	default: return SDP_WC_GENERAL_ERR;
	}
}

/* qp->lock held. */
void sdp__verbs_scq_push(struct vb_qp *qp, const struct sdp_wc *wc)
{
	if (qp->scq_count == qp->scq_cap) {
		uint32_t n = qp->scq_cap * 2, i;
		struct sdp_wc *s = malloc(n * sizeof(*s));

		if (!s)
			return;	/* cannot happen in practice: see sq_depth */
		for (i = 0; i < qp->scq_count; i++)
			s[i] = qp->scq[(qp->scq_head + i) % qp->scq_cap];
		free(qp->scq);
		qp->scq = s;
		qp->scq_head = 0;
		qp->scq_cap = n;
	}
	qp->scq[(qp->scq_head + qp->scq_count++) % qp->scq_cap] = *wc;
}

/* A hardware completion of `qp` (dev->lock held). */
void sdp__verbs_dispatch_wc(struct vb_qp *qp, const struct ibv_wc *hw)
{
	struct sdp_wc wc;
	struct vb_swr *e;
	bool push = true;

	memset(&wc, 0, sizeof(wc));
	wc.status = wc_status(hw->status);
	pthread_mutex_lock(&qp->lock);
	if (VB_WRID_RECV(hw->wr_id)) {
		wc.wr_id = qp->rwr[VB_WRID_IDX(hw->wr_id) % qp->rq_depth];
		wc.opcode = SDP_WC_RECV;
		wc.byte_len = hw->byte_len;
		qp->rq_tail++;
	} else {
		e = &qp->swr[VB_WRID_IDX(hw->wr_id) % qp->sq_depth];
		wc.wr_id = e->wr_id;
		wc.opcode = e->opcode;
		if (e->opcode == SDP_WC_RDMA_READ)
			wc.byte_len = hw->byte_len;
		qp->sq_tail++;
		qp->ring_tail = e->ring_end;
		push = e->signaled || wc.status != SDP_WC_SUCCESS;
	}
	if (push)
		sdp__verbs_scq_push(qp, &wc);
	pthread_mutex_unlock(&qp->lock);
	if (wc.status != SDP_WC_SUCCESS && wc.status != SDP_WC_WR_FLUSH_ERR &&
	    atomic_load(&qp->state) == VB_ESTABLISHED) {
		/* A QP error ends the connection for the peer too (DREQ): it
		 * may have nothing posted that would show it the error. */
		atomic_store(&qp->state, VB_DISCONNECTED);
		rdma_disconnect(qp->id);
	}
	if (push) {
		atomic_store(&qp->news_ns, sdp__verbs_coarse_ns());
		sdp__verbs_bump_completion(qp);
	}
}

int sdp__verbs_poll_cq(struct sdp_qp *tq, struct sdp_wc *wc, int max)
{
	struct vb_qp *qp = VB_QP(tq);
	int n = 0;

	if (sdp__verbs_inherited(qp->epoch))
		sdp__verbs_orphan(qp);	/* never drain the parent's CQ */
	else if (qp->dev && qp->scq_count < (uint32_t)max)
		sdp__verbs_dev_drain_for(qp);
	pthread_mutex_lock(&qp->lock);
	while (n < max && qp->scq_count) {
		wc[n++] = qp->scq[qp->scq_head];
		qp->scq_head = (qp->scq_head + 1) % qp->scq_cap;
		qp->scq_count--;
	}
	pthread_mutex_unlock(&qp->lock);
	/* What is left, this thread took in without ringing the progress
	 * thread (sdp__verbs_bump_completion): n == max, and the caller
	 * polls again (transport.h). */
	return n;
}

/* ---- the provider ------------------------------------------------------------- */

const struct sdp_transport_ops sdp__verbs_ops = {
	.bind = sdp__verbs_bind,
	.bound_addr = sdp__verbs_bound_addr,
	.listen = sdp__verbs_listen,
	.listener_fd = sdp__verbs_listener_fd,
	.get_request = sdp__verbs_get_request,
	.reject = sdp__verbs_reject,
	.close_listener = sdp__verbs_close_listener,
	.create_qp = sdp__verbs_create_qp,
	.create_qp_from_req = sdp__verbs_create_qp_from_req,
	.connect = sdp__verbs_connect,
	.accept = sdp__verbs_accept,
	.get_event = sdp__verbs_get_event,
	.addresses = sdp__verbs_addresses,
	.query_caps = sdp__verbs_query_caps,
	.disconnect = sdp__verbs_disconnect,
	.destroy_qp = sdp__verbs_destroy_qp,
	.detach_qp = sdp__verbs_destroy_qp,	/* no QP sharing across fork */
	.recv_region = sdp__verbs_recv_region,
	.reg_mr = sdp__verbs_reg_mr,
	.dereg_mr = sdp__verbs_dereg_mr,
	.post_send = sdp__verbs_post_send,
	.post_recv = sdp__verbs_post_recv,
	.poll_cq = sdp__verbs_poll_cq,
	.wait_seq = sdp__verbs_wait_seq,
	.wait = sdp__verbs_wait,
	.wait_rdma = sdp__verbs_wait_rdma,
	.send_slot = sdp_tp_no_send_slot,
	.kick = sdp__verbs_kick,
	.event_fd = sdp__verbs_event_fd,
	.req_notify = sdp__verbs_req_notify,
	.ack_events = sdp__verbs_ack_events,
	/* Half as many buffers, twice the size: the same 512 KiB per
	 * connection as the engine's default, half the messages per byte
	 * (rxe in the VM: faster at every size, docs/BENCHMARKS-VM.md). */
	.recv_bufs_pref = 8,
	.recv_buf_size_pref = 65536 + 16,
};

const struct sdp_transport sdp_verbs_transport = {
	.name = "verbs",
	.ops = &sdp__verbs_ops,
};

int sdp_verbs_available(void)
{
	return sdp__verbs_init();
}
