// SPDX-License-Identifier: MIT
/*
 * shm_cm.c — connection management of the shm transport: the CM messages,
 * the active side (connect, get_event), accept, and mapping the peer's
 * segment.
 *
 * One CM message travels each way over the AF_UNIX seqpacket connection:
 * Hello (client -> listener) and Accept or Reject (listener -> client).  A
 * Hello or Accept carries the sender's segment memfd (SCM_RIGHTS), or
 * names a segment kept from the last connection between the same two
 * processes (shm_keep.c; a listener that does not keep what a Hello names
 * answers RETRY, and the client sends it again with a memfd), and the
 * kernel adds the sender's credentials (SCM_CREDENTIALS, as both ends have
 * SO_PASSCRED: the client sets it, an accepted socket inherits it from the
 * listener): the pid used for cross-memory attach is the pid of the
 * process that sent the message, not a number the peer chose.  After the
 * handshake the connection carries only one-byte doorbells, and its hang-up
 * tells each side that the other is gone.
 *
 * The peer's memfd is checked before it is trusted with a mapping: a regular
 * shmem file (it accepts F_GET_SEALS), sealed against shrinking (else the
 * peer could truncate it and SIGBUS us), with a control block whose layout
 * matches what we compute ourselves from its depth and region size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/shm/shm.h"
#include "base/real.h"

#define SHM_WIRE_MAGIC 0x4d434453u	/* "SDCM" */

struct shm_wire_msg {			/* host order: both ends share a host */
	uint32_t magic;
	uint16_t version;
	uint16_t type;			/* SHM_MSG_* */
	uint64_t seg_base;		/* sender's VA of its segment */
	uint64_t pair;			/* the nonce of a listener's segment
					 * kept (shm_keep.c): offered by a
					 * Hello, taken by an Accept that then
					 * carries no memfd */
	uint64_t pair_client;		/* Hello without a memfd: the nonce of
					 * the client's kept segment */
	uint64_t alt_pair[SHM_KEEP_ALTS];	/* Hello without a memfd: more
						 * pairs, kept with other
						 * processes of the listener */
	uint64_t alt_client[SHM_KEEP_ALTS];
	uint8_t dst_v6;			/* Hello: the address the client dialled */
	uint8_t flags;			/* Accept: SDP_CM_F_* (0 in a Hello) */
	uint16_t dst_port;
	uint8_t dst_addr[16];
	uint32_t priv_len;
	uint8_t priv[SDP_CM_PRIV_MAX];
};

#define SHM_WIRE_HDR offsetof(struct shm_wire_msg, priv)

union shm_cmsg_buf {
	char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(4 * sizeof(int))];
	struct cmsghdr align;
};

int sdp__shm_send_msg(int sock, uint16_t type, const struct shm_qp *qp,
		      const struct shm_addr *dst, const void *priv,
		      uint32_t priv_len)
{
	struct shm_wire_msg m;
	union shm_cmsg_buf cbuf;
	struct iovec iov = { &m, SHM_WIRE_HDR + priv_len };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf.buf,
	};
	ssize_t n;

	if (priv_len > SDP_CM_PRIV_MAX)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	memset(&cbuf, 0, sizeof(cbuf));
	m.magic = SHM_WIRE_MAGIC;
	m.version = SHM_VERSION;
	m.type = type;
	if (qp) {
		m.seg_base = (uintptr_t)qp->me.ctrl;
		m.flags = qp->cm_flags;
		m.pair = qp->offer;
		m.pair_client = qp->offer_mine;
		for (int a = 0; a < qp->nalt && qp->offer_mine; a++) {
			m.alt_pair[a] = qp->alt[a].theirs.nonce;
			m.alt_client[a] = qp->alt[a].mine.nonce;
		}
	}
	if (dst) {
		m.dst_v6 = (uint8_t)dst->v6;
		m.dst_port = dst->port;
		memcpy(m.dst_addr, dst->a, 16);
	}
	m.priv_len = priv_len;
	if (priv_len)
		memcpy(m.priv, priv, priv_len);

	/* No credentials of our own: both ends have SO_PASSCRED before the
	 * first message, and then the kernel stamps the sender's pid and real
	 * ids on every message itself (af_unix's maybe_add_creds). */
	if (qp && qp->memfd >= 0) {
		struct cmsghdr *c;

		mh.msg_controllen = CMSG_SPACE(sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &qp->memfd, sizeof(int));
	} else {
		mh.msg_control = NULL;
	}
	n = sdp_real.sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return (size_t)n == iov.iov_len ? 0 : -EPROTO;
}

/* Collect the first passed fd and the sender's credentials; close any other
 * fd a hostile peer might have stuffed into the message. */
static void take_cmsgs(struct msghdr *mh, int *fd, struct ucred *cred)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_CREDENTIALS &&
		    c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
			memcpy(cred, CMSG_DATA(c), sizeof(*cred));
		} else if (c->cmsg_type == SCM_RIGHTS) {
			size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (size_t i = 0; i < nfd; i++) {
				int f;

				memcpy(&f, CMSG_DATA(c) + i * sizeof(int),
				       sizeof(int));
				if (*fd < 0)
					*fd = f;
				else
					sdp_close(f);
			}
		}
	}
}

int sdp__shm_recv_msg(int sock, uint16_t *type, void *priv, uint32_t *priv_len,
		      struct shm_hello *h, uint8_t *flags)
{
	struct shm_addr *dst = &h->dst;
	struct ucred *cred = &h->cred;
	int *fd = &h->memfd;
	struct shm_wire_msg m;
	union shm_cmsg_buf cbuf;
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf),
	};
	ssize_t n;

	*fd = -1;
	*cred = (struct ucred){ 0, (uid_t)-1, (gid_t)-1 };
	h->base = h->pair = h->pair_client = 0;
	memset(h->alt_pair, 0, sizeof(h->alt_pair));
	memset(h->alt_client, 0, sizeof(h->alt_client));
	n = sdp_real.recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN ? -EAGAIN : -errno;
	take_cmsgs(&mh, fd, cred);
	if (n == 0) {
		if (*fd >= 0)
			sdp_close(*fd);
		*fd = -1;
		return -ECONNRESET;
	}
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    (size_t)n < SHM_WIRE_HDR || m.magic != SHM_WIRE_MAGIC ||
	    m.version != SHM_VERSION || m.priv_len > SDP_CM_PRIV_MAX ||
	    (size_t)n != SHM_WIRE_HDR + m.priv_len || m.dst_v6 > 1) {
		if (*fd >= 0)
			sdp_close(*fd);
		*fd = -1;
		return -EPROTO;
	}
	*type = m.type;
	h->base = m.seg_base;
	h->pair = m.pair;
	h->pair_client = m.pair_client;
	memcpy(h->alt_pair, m.alt_pair, sizeof(h->alt_pair));
	memcpy(h->alt_client, m.alt_client, sizeof(h->alt_client));
	if (flags)
		*flags = m.flags;
	memcpy(priv, m.priv, m.priv_len);
	*priv_len = m.priv_len;
	memset(dst, 0, sizeof(*dst));
	dst->v6 = m.dst_v6;
	dst->port = m.dst_port;
	memcpy(dst->a, m.dst_addr, 16);
	return 0;
}

/* ---- segments ------------------------------------------------------------ */

void sdp__shm_ctrl_header(struct shm_ctrl *c, uint32_t depth,
			  uint32_t region_size, uint64_t nonce)
{
	struct shm_layout lo = sdp__shm_layout(depth, region_size);

	c->magic = SHM_MAGIC;
	c->version = SHM_VERSION;
	c->depth = depth;
	c->seg_size = lo.total;
	c->region_off = lo.region;
	c->region_size = region_size;
	atomic_store(&c->nonce, nonce);
}

void sdp__shm_seg_place(struct shm_seg *seg, void *map, size_t size,
			uint32_t depth, uint32_t region_size)
{
	struct shm_layout lo = sdp__shm_layout(depth, region_size);

	seg->ctrl = map;
	seg->size = size;
	seg->depth = depth;
	seg->rq = (struct shm_rq_entry *)((uint8_t *)map + lo.rq);
	seg->cq = (struct shm_cq_entry *)((uint8_t *)map + lo.cq);
	seg->mr = (struct shm_mr_entry *)((uint8_t *)map + lo.mr);
	seg->region = (uint8_t *)map + lo.region;
	seg->region_size = region_size;
}

int sdp__shm_map_peer(int fd, struct shm_seg *seg)
{
	struct shm_ctrl *c;
	uint64_t region_size;
	uint32_t depth;
	struct stat st;
	void *map;
	int seals;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_size < (off_t)sizeof(struct shm_ctrl) ||
	    st.st_size > (off_t)SHM_MAX_REGION * 2)
		return -EPROTO;
	seals = sdp_real.fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return -EPROTO;
	map = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	c = map;
	depth = __atomic_load_n(&c->depth, __ATOMIC_RELAXED);
	region_size = __atomic_load_n(&c->region_size, __ATOMIC_RELAXED);
	if (__atomic_load_n(&c->magic, __ATOMIC_RELAXED) != SHM_MAGIC ||
	    __atomic_load_n(&c->version, __ATOMIC_RELAXED) != SHM_VERSION ||
	    !depth || depth > SHM_MAX_DEPTH || (depth & (depth - 1)) ||
	    !region_size || region_size > SHM_MAX_REGION)
		goto err_unmap;
	if (sdp__shm_layout(depth, (uint32_t)region_size).total >
	    (size_t)st.st_size)
		goto err_unmap;
	sdp__shm_seg_place(seg, map, st.st_size, depth,
			   (uint32_t)region_size);
	seg->nonce = atomic_load(&c->nonce);
	return 0;

err_unmap:
	munmap(map, st.st_size);
	return -EPROTO;
}

void sdp__shm_seg_unmap(struct shm_seg *seg)
{
	if (seg->ctrl)
		munmap(seg->ctrl, seg->size);
	memset(seg, 0, sizeof(*seg));
}

/* ---- active side --------------------------------------------------------- */

static void post_event(struct shm_qp *qp, enum sdp_cm_event_type t, int err,
		       const void *priv, uint32_t priv_len)
{
	memset(&qp->ev, 0, sizeof(qp->ev));
	qp->ev.type = t;
	qp->ev.err = err;
	qp->ev.priv_len = priv_len;
	if (priv_len)
		memcpy(qp->ev.priv, priv, priv_len);
	qp->ev_pending = true;
	sdp__shm_wake_self(qp, true);
}

static void connect_failed(struct shm_qp *qp, int err)
{
	atomic_store(&qp->state, SHM_FAILED);
	sdp__shm_sock_unwatch(qp);
	if (err == -ECONNREFUSED || err == -ECONNRESET || err == -EPIPE)
		post_event(qp, SDP_CM_REJECTED, -ECONNREFUSED, NULL, 0);
	else
		post_event(qp, SDP_CM_UNREACHABLE, err, NULL, 0);
}

/* The listener answered with a refusal: the client's log must not say
 * that nobody listens. */
static void connect_refused_by_listener(struct shm_qp *qp)
{
	connect_failed(qp, -ECONNREFUSED);
	qp->ev.flags = SDP_CM_F_LISTENER_SAID_NO;
}

int sdp__shm_connect(struct sdp_qp *sq, struct sdp_listener *local,
		     const struct sockaddr *dst, socklen_t len,
		     const void *priv, uint32_t priv_len)
{
	struct shm_qp *qp = SHM_QP(sq);
	struct shm_listener *l = SHM_L(local);
	struct shm_addr d, src;
	int is_v6, one = 1, err;

	err = sdp__shm_addr_parse(dst, len, &d, &is_v6);
	if (!err && (!d.port || priv_len > SDP_CM_PRIV_MAX))
		err = -EINVAL;
	if (!err && atomic_load(&qp->state) != SHM_IDLE)
		err = -EISCONN;
	if (!err && l && (l->listening || l->sock < 0 || l->addr.v6 != d.v6))
		err = -EINVAL;
	if (!err && !sdp__shm_addr_is_local(&d))
		err = -ENETUNREACH;	/* not ours: a verbs transport's */
	if (err) {
		if (l)		/* consumed even on failure */
			sdp__shm_listener_free(l);
		return err;
	}
	sdp__shm_addr_dial(&d);
	if (!l) {
		/* Same-host routing: the source is the destination address. */
		src = d;
		src.port = 0;
		err = sdp__shm_bind_client(&src, is_v6, &l);
		if (err)
			return err;
	}
	qp->local = l;
	qp->sock = l->sock;
	l->sock = -1;
	qp->dst = d;
	qp->is_v6_socket = is_v6;
	src = l->addr;
	if (sdp__shm_addr_is_any(&src)) {
		memcpy(src.a, d.a, sizeof(src.a));
		src.v6 = d.v6;
	}
	sdp__shm_addr_to_sockaddr(&src, is_v6, &qp->addr.local,
				  &qp->addr.local_len);
	sdp__shm_addr_to_sockaddr(&d, is_v6, &qp->addr.peer, &qp->addr.peer_len);

	sdp_real.setsockopt(qp->sock, SOL_SOCKET, SO_PASSCRED, &one,
			    sizeof(one));
	if (!qp->offer)		/* no pair taken at create_qp */
		sdp__shm_keep_offer(qp, &d);
	if (qp->offer_mine && priv_len) {	/* a RETRY asks for it again */
		memcpy(qp->hello, priv, priv_len);
		qp->hello_len = priv_len;
	}
	/* A process that takes one of the other pairs named may send at
	 * once: our receives are there too. */
	for (int a = 0; a < qp->nalt; a++)
		sdp__shm_seg_write_recvs(qp, &qp->alt[a].mine);
	err = sdp__shm_name_connect(&qp->sock, &d);
	if (!err)
		err = sdp__shm_send_msg(qp->sock, SHM_MSG_HELLO, qp, &d, priv,
					priv_len);
	if (!err)
		sdp__shm_sock_watch(qp);
	if (qp->memfd >= 0)
		sdp_close(qp->memfd);	/* sent, or never will be */
	qp->memfd = -1;
	if (err) {
		connect_failed(qp, err);
		return 0;
	}
	atomic_store(&qp->state, SHM_CONNECTING);
	return 0;
}

/* The first pair named, passed over by the answer (its client segment
 * now mapped at `was`), into `slot` of qp->alt, and every pair there back
 * to the pool: no process of the listener took them. */
static void pairs_back(struct shm_qp *qp, struct shm_alt *slot,
		       const struct shm_seg *was)
{
	*slot = (struct shm_alt){
		.mine = *was, .theirs = qp->kept_peer, .peer = qp->kept_pid,
		.since_ms = sdp__shm_now_ms(),
	};
	memset(&qp->kept_peer, 0, sizeof(qp->kept_peer));
	sdp__shm_keep_alts_return(qp, true);
}

/* The listener's segment an Accept names: the kept one we offered, taken
 * by the process that keeps it, or a new one (its memfd).  An offer not
 * taken is forgotten. */
static int accept_segment(struct shm_qp *qp, const struct shm_hello *h)
{
	if (h->pair && h->memfd < 0 && qp->offer_mine) {
		/* One of the pairs named beside the first, taken by the
		 * process it was kept with: its segments take the place of
		 * the first pair's, which goes back to the pool. */
		for (int a = 0; a < qp->nalt; a++) {
			struct shm_alt *t = &qp->alt[a];
			struct shm_seg was;
			int err;

			if (h->pair != t->theirs.nonce || h->cred.pid != t->peer)
				continue;
			err = sdp__shm_seg_switch(qp, &t->mine, &was);
			if (err)
				return err;
			qp->peer = t->theirs;
			qp->offer = t->theirs.nonce;
			pairs_back(qp, t, &was);
			qp->kept_pid = h->cred.pid;
			return 0;
		}
	}
	/* Our first pair taken by the process that keeps it: the others
	 * not.  Anything else is an error, after which none is trusted. */
	sdp__shm_keep_alts_return(qp, h->pair && h->pair == qp->offer &&
					  h->memfd < 0 &&
					  h->cred.pid == qp->kept_pid);
	if (h->pair) {
		if (h->pair != qp->offer || h->memfd >= 0 ||
		    h->cred.pid != qp->kept_pid)
			return -EPROTO;
		qp->peer = qp->kept_peer;
		memset(&qp->kept_peer, 0, sizeof(qp->kept_peer));
		return 0;
	}
	sdp__shm_seg_unmap(&qp->kept_peer);
	qp->offer = 0;
	if (h->memfd < 0)
		return -EPROTO;
	return sdp__shm_map_peer(h->memfd, &qp->peer);
}

/* The listener does not keep the pair our Hello named: a new segment in
 * place of ours (sdp__shm_seg_renew), and the Hello again, with it.  Only
 * after a Hello without a memfd: a second RETRY is a protocol error. */
static int hello_again(struct shm_qp *qp)
{
	struct shm_seg was;
	int err;

	if (!qp->offer_mine)
		return -EPROTO;
	sdp__shm_keep_missed(&qp->dst);
	qp->offer = qp->offer_mine = 0;
	err = sdp__shm_seg_renew(qp, &was);
	/* No pair named was taken, the first one neither. */
	if (!err) {
		qp->nalt++;	/* the slot beside the three named */
		pairs_back(qp, &qp->alt[qp->nalt - 1], &was);
	} else {
		sdp__shm_seg_unmap(&qp->kept_peer);
		sdp__shm_keep_alts_return(qp, true);
	}
	if (!err)
		err = sdp__shm_send_msg(qp->sock, SHM_MSG_HELLO, qp, &qp->dst,
					qp->hello, qp->hello_len);
	if (qp->memfd >= 0)
		sdp_close(qp->memfd);
	qp->memfd = -1;
	return err;
}

static int connect_reply(struct shm_qp *qp, struct sdp_cm_event *ev)
{
	uint8_t priv[SDP_CM_PRIV_MAX];
	struct shm_hello h;
	uint16_t type = 0;
	uint32_t plen = 0;
	uint8_t flags = 0;
	int err;

	err = sdp__shm_recv_msg(qp->sock, &type, priv, &plen, &h, &flags);
	if (err == -EAGAIN)
		return -EAGAIN;
	if (!err && type == SHM_MSG_RETRY) {
		if (h.memfd >= 0)
			sdp_close(h.memfd);
		err = hello_again(qp);
		if (!err)
			return -EAGAIN;
	}
	if (!err && type != SHM_MSG_ACCEPT)
		err = type == SHM_MSG_REJECT ? -ECONNREFUSED : -EPROTO;
	if (!err)
		err = accept_segment(qp, &h);
	if (h.memfd >= 0)
		sdp_close(h.memfd);
	if (err) {
		if (type == SHM_MSG_REJECT)
			connect_refused_by_listener(qp);
		else
			connect_failed(qp, err);
		qp->ev_pending = false;
		*ev = qp->ev;
		return 0;
	}
	qp->peer_pid = h.cred.pid;
	qp->peer_uid = h.cred.uid;
	qp->peer_gid = h.cred.gid;
	qp->peer_base = h.base;
	atomic_store(&qp->state, SHM_ESTABLISHED);
	memset(ev, 0, sizeof(*ev));
	ev->type = SDP_CM_ESTABLISHED;
	ev->flags = flags;
	ev->priv_len = plen;
	memcpy(ev->priv, priv, plen);
	return 0;
}

int sdp__shm_get_event(struct sdp_qp *sq, struct sdp_cm_event *ev)
{
	struct shm_qp *qp = SHM_QP(sq);

	if (qp->ev_pending) {
		*ev = qp->ev;
		qp->ev_pending = false;
		return 0;
	}
	switch (atomic_load(&qp->state)) {
	case SHM_CONNECTING:
		return connect_reply(qp, ev);
	case SHM_ESTABLISHED:
		sdp__shm_check_peer(qp, !atomic_load(&qp->sock_in_ep));
		if (!atomic_load(&qp->err) || qp->disc_reported)
			return -EAGAIN;
		qp->disc_reported = true;
		memset(ev, 0, sizeof(*ev));
		ev->type = SDP_CM_DISCONNECTED;
		ev->err = -ECONNRESET;
		return 0;
	default:
		return -EAGAIN;
	}
}

/* ---- passive side -------------------------------------------------------- */

int sdp__shm_accept(struct sdp_qp *sq, const void *priv, uint32_t priv_len)
{
	struct shm_qp *qp = SHM_QP(sq);
	int err;

	if (atomic_load(&qp->state) != SHM_PASSIVE || priv_len > SDP_CM_PRIV_MAX)
		return -EINVAL;
	err = sdp__shm_send_msg(qp->sock, SHM_MSG_ACCEPT, qp, NULL, priv,
				priv_len);
	if (err)
		return err == -EPIPE ? -ECONNRESET : err;
	if (qp->memfd >= 0)
		sdp_close(qp->memfd);
	qp->memfd = -1;
	atomic_store(&qp->state, SHM_ESTABLISHED);
	/* The client may be asleep in wait() for the connect to finish. */
	sdp__shm_wake_owner_seg(qp->peer.ctrl, -1, -1, NULL, 0);
	return 0;
}
