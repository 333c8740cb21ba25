// SPDX-License-Identifier: MIT
/*
 * shm_handover.c — an shm QP changes process within a fork family (the
 * transport's export_qp / import_qp, see transport.h and engine/handover.c).
 *
 * After fork() every process of the family maps the same segments and
 * holds the same descriptors (the rendezvous socket, and the summon
 * eventfd and epoll set made for the fork, share_prepare): the kernel
 * objects are shared.  What differs is the
 * bookkeeping in each process's memory: which of the peer's receives we
 * have seen and not used, our posted receives, local completions not yet
 * polled.  Export writes the owner's copy of that bookkeeping; import loads
 * it over the taker's copy, keeping what is the taker's own: descriptors it
 * opened after the fork (none of the owner's exist here), mappings, and the
 * memory the arrays live in.
 *
 * The peer knows the pid it was connected to: its RDMA reads and writes of
 * our registered memory go to that process.  A QP that moved to another
 * process therefore stops offering RDMA (caps.rdma = 0): the engine then
 * advertises no ZCopy buffer of its own and moves its data by BCopy.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fdhigh.h"
#include "base/real.h"
#include "transport/shm/shm.h"

struct shm_export {
	uint32_t me_depth, peer_depth, max_send_wr;
	uint32_t pid;			/* the exporting process */
	struct shm_qp qp;
	/* then: avail[peer_depth], rwr[me_depth], rwr_free[me_depth],
	 * lcq[max_send_wr] */
};

static size_t export_size(const struct shm_qp *qp)
{
	return sizeof(struct shm_export) +
	       (size_t)qp->peer.depth * sizeof(struct shm_avail) +
	       (size_t)qp->me.depth * (sizeof(struct shm_rwr) +
				       sizeof(uint32_t)) +
	       (size_t)qp->attr.max_send_wr * sizeof(struct sdp_wc);
}

ssize_t sdp__shm_export_qp(struct sdp_qp *sq, void *buf, size_t cap)
{
	struct shm_qp *qp = SHM_QP(sq);
	size_t need = export_size(qp);
	struct shm_export *e = buf;
	uint8_t *p;

	if (!buf)
		return (ssize_t)need;
	if (cap < need)
		return -ENOSPC;
	for (int i = 0; i < SHM_MAX_MR; i++)
		if (qp->mrs[i])
			return -EBUSY;	/* a ZCopy buffer of ours is out */
	e->me_depth = qp->me.depth;
	e->peer_depth = qp->peer.depth;
	e->max_send_wr = qp->attr.max_send_wr;
	e->pid = (uint32_t)getpid();
	memcpy(&e->qp, qp, sizeof(*qp));
	p = (uint8_t *)(e + 1);
	if (qp->avail)
		memcpy(p, qp->avail, qp->peer.depth * sizeof(*qp->avail));
	p += qp->peer.depth * sizeof(*qp->avail);
	memcpy(p, qp->rwr, qp->me.depth * sizeof(*qp->rwr));
	p += qp->me.depth * sizeof(*qp->rwr);
	memcpy(p, qp->rwr_free, qp->me.depth * sizeof(*qp->rwr_free));
	p += qp->me.depth * sizeof(*qp->rwr_free);
	memcpy(p, qp->lcq, qp->attr.max_send_wr * sizeof(*qp->lcq));
	return (ssize_t)need;
}

int sdp__shm_import_qp(struct sdp_qp *sq, const void *buf, size_t len)
{
	struct shm_qp *qp = SHM_QP(sq), own;
	const struct shm_export *e = buf;
	struct stat st;
	struct shm_avail *avail = qp->avail;
	const uint8_t *p;

	if (len < sizeof(*e) || e->me_depth != qp->me.depth ||
	    e->max_send_wr != qp->attr.max_send_wr ||
	    len < export_size(qp) - (size_t)qp->peer.depth * sizeof(*avail) +
		  (size_t)e->peer_depth * sizeof(*avail))
		return -EINVAL;
	/* The peer's segment is mapped at connect/accept, before any fork
	 * that shares the connection; without it the state cannot be ours. */
	if (e->peer_depth && (!qp->peer.ctrl || qp->peer.depth != e->peer_depth))
		return -EINVAL;
	if (e->peer_depth && !avail) {
		avail = calloc(e->peer_depth, sizeof(*avail));
		if (!avail)
			return -ENOMEM;
	}
	own = *qp;
	*qp = e->qp;
	/* Ours: descriptors, mappings, arrays, the source-port hold. */
	qp->obj = own.obj;
	qp->sock = own.sock;
	qp->summon_fd = own.summon_fd;
	qp->summon_ep = own.summon_ep;
	qp->memfd = own.memfd;
	qp->me = own.me;
	qp->peer = own.peer;
	qp->peer_pidfd = own.peer_pidfd;
	qp->peer_app_fd = own.peer_app_fd;
	qp->peer_app_ino = own.peer_app_ino;
	/* fork() copies the descriptor table before the memory: a readiness
	 * descriptor the parent's progress thread took in between is named
	 * in our copy of the QP but is not ours (its number may be another
	 * file by now).  Then it is lost, as if never inherited. */
	if (qp->peer_app_fd >= 0 &&
	    (fstat(qp->peer_app_fd, &st) < 0 ||
	     (uint64_t)st.st_ino != qp->peer_app_ino))
		qp->peer_app_fd = -1;
	qp->peer_app_fd_lost = qp->peer_app_fd < 0 &&
			       (e->qp.peer_app_fd >= 0 || e->qp.peer_app_fd_lost);
	qp->peer_words = own.peer_words;
	qp->local = own.local;
	qp->recv_mr = own.recv_mr;
	qp->avail = avail;
	qp->rwr = own.rwr;
	qp->rwr_free = own.rwr_free;
	qp->lcq = own.lcq;
	/* Regions this copy had registered at the fork were deregistered by
	 * the owner since (export needs none): only the memory is left. */
	for (int i = 0; i < SHM_MAX_MR; i++) {
		free(own.mrs[i]);
		qp->mrs[i] = NULL;
	}
	/* Our wake page is not the one the peer was given, if any. */
	qp->app_word = -1;
	qp->ww_gen = -1;
	if (e->pid != (uint32_t)getpid() ||
	    (qp->rdma_probed && !qp->caps.rdma)) {
		qp->caps.rdma = 0;
		qp->rdma_probed = true;
		strcpy(qp->caps.rdma_reason,
		       "connection moved to another process");
	}
	p = (const uint8_t *)(e + 1);
	if (avail)
		memcpy(avail, p, e->peer_depth * sizeof(*avail));
	p += e->peer_depth * sizeof(*avail);
	memcpy(qp->rwr, p, qp->me.depth * sizeof(*qp->rwr));
	p += qp->me.depth * sizeof(*qp->rwr);
	memcpy(qp->rwr_free, p, qp->me.depth * sizeof(*qp->rwr_free));
	p += qp->me.depth * sizeof(*qp->rwr_free);
	memcpy(qp->lcq, p, qp->attr.max_send_wr * sizeof(*qp->lcq));
	return 0;
}

int sdp__shm_share_prepare(struct sdp_qp *sq)
{
	struct shm_qp *qp = SHM_QP(sq);
	struct epoll_event evfd = { .events = EPOLLIN };
	struct epoll_event evsock = { .events = EPOLLIN | EPOLLRDHUP,
				      .data.fd = qp->sock };
	int fd, ep, err;

	qp->shared = true;	/* its segments are the family's now */
	if (qp->summon_ep >= 0)
		return 0;
	fd = sdp_fd_high(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (fd < 0)
		return fd;
	ep = sdp_fd_high(sdp_real.epoll_create1(EPOLL_CLOEXEC));
	if (ep < 0) {
		sdp_close(fd);
		return ep;
	}
	evfd.data.fd = fd;
	if (sdp_real.epoll_ctl(ep, EPOLL_CTL_ADD, fd, &evfd) < 0 ||
	    (atomic_load(&qp->sock_in_ep) &&
	     sdp_real.epoll_ctl(ep, EPOLL_CTL_ADD, qp->sock, &evsock) < 0)) {
		err = -errno;
		sdp_close(ep);
		sdp_close(fd);
		return err;
	}
	qp->summon_fd = fd;
	qp->summon_ep = ep;
	if (qp->attr.events)
		qp->attr.events->fd_changed(qp->attr.events_ctx);
	return 0;
}

void sdp__shm_summon(struct sdp_qp *sq)
{
	struct shm_qp *qp = SHM_QP(sq);
	struct shm_ctrl *c = qp->me.ctrl;
	uint64_t one = 1;

	/* Its waiting threads (the word is in our shared segment), and its
	 * progress thread (the eventfd is in its epoll). */
	atomic_fetch_add(&c->seq, 1);
	sdp__shm_futex_wake(&c->seq);
	if (qp->summon_fd >= 0 &&
	    sdp_real.write(qp->summon_fd, &one, sizeof(one)) < 0) {
		/* saturated: a wake-up is pending anyway */
	}
}
