// SPDX-License-Identifier: MIT
/*
 * verbs_cm.c — connection management of the verbs transport over librdmacm:
 * SDP's port space (bind/listen/requests), the active side's resolve ->
 * route -> QP -> REQ sequence, the passive side's REP, and the CM events of
 * established connections (DREQ, device removal).
 *
 * Port space: user space cannot open RDMA_PS_SDP ids, so the transport uses
 * RDMA_PS_TCP (service ID 0x0106_xxxx instead of SDP's 0x0001_xxxx).  SDP's
 * port numbers therefore live in the RDMA CM's TCP port space, separate from
 * the kernel's TCP ports, as they were in RDMA_PS_SDP.
 *
 * Private data (see docs/PROTOCOL.md, "Verbs transport"): the RDMA CM puts its
 * 36-byte header (IP version, source port, both addresses) in front of the
 * 92-byte REQ area, leaving 56 bytes.  The REQ carries the Hello's first 32
 * bytes (BSDH, version, MaxAdverts, DesRemRcvSz, LocalRcvSz, LocalPort); the
 * passive side rebuilds the whole 92-byte Hello from them and from the CM
 * header's addresses and port, which is exactly what the kernel RDMA CM wrote
 * into the Hello for RDMA_PS_SDP.  The REP has no CM header: the 196-byte
 * HelloAck travels unchanged.
 *
 * Every CM event is handled on the event thread (verbs_dev.c), which acks it
 * last: rdma_destroy_id() in another thread waits for that ack, so an object
 * reached through id->context stays valid while its event is handled.
 */
#include "transport/verbs/verbs.h"
#include "base/real.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define VB_MAX_QUEUED 4096	/* unanswered requests per listener */

static socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
	       sizeof(struct sockaddr_in);
}

/* ---- listeners ------------------------------------------------------------- */

int sdp__verbs_bind(const struct sockaddr *addr, socklen_t len,
		    struct sdp_listener **out)
{
	struct vb_listener *l;
	int r = sdp__verbs_init();

	if (r < 0)
		return r;
	if (len < sizeof(struct sockaddr_in) ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return -EAFNOSUPPORT;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->obj.ops = &sdp__verbs_ops;
	l->epoch = sdp__vb.epoch;
	pthread_mutex_init(&l->lock, NULL);
	l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->evfd < 0) {
		r = -errno;
		goto err;
	}
	if (rdma_create_id(sdp__vb.cm, &l->id, l, RDMA_PS_TCP)) {
		r = -errno;
		goto err;
	}
	if (rdma_bind_addr(l->id, (struct sockaddr *)addr)) {
		r = -errno;
		rdma_destroy_id(l->id);
		goto err;
	}
	*out = (struct sdp_listener *)l;
	return 0;
err:
	if (l->evfd >= 0)
		sdp_close(l->evfd);
	free(l);
	return r;
}

int sdp__verbs_bound_addr(struct sdp_listener *tl, struct sockaddr_storage *ss,
			  socklen_t *len)
{
	struct sockaddr *sa = rdma_get_local_addr(VB_L(tl)->id);

	*len = sa_len(sa);
	memcpy(ss, sa, *len);
	return 0;
}

int sdp__verbs_listen(struct sdp_listener *tl, int backlog)
{
	struct vb_listener *l = VB_L(tl);

	if (sdp__verbs_inherited(l->epoch))
		return -EBADFD;	/* the parent's id: unusable here */
	if (rdma_listen(l->id, backlog > 0 ? backlog : 1))
		return -errno;
	pthread_mutex_lock(&l->lock);
	l->listening = true;
	l->backlog = backlog;
	pthread_mutex_unlock(&l->lock);
	return 0;
}

int sdp__verbs_listener_fd(struct sdp_listener *tl)
{
	return VB_L(tl)->evfd;
}

static void put_ip(uint8_t *out, const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else
		memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

/* Rebuild the 92-byte Hello from the REQ's 32 bytes and the CM header. */
static uint32_t hello_rebuild(const struct vb_conn_req *q, uint8_t *out)
{
	const struct sockaddr *peer = rdma_get_peer_addr(q->id);
	const struct sockaddr *self = rdma_get_local_addr(q->id);
	uint16_t port = rdma_get_dst_port(q->id);	/* network order */

	if (q->priv_len < VB_HELLO_WIRE) {	/* the engine rejects it */
		memcpy(out, q->priv, q->priv_len);
		return q->priv_len;
	}
	memset(out, 0, VB_HELLO_SIZE);
	memcpy(out, q->priv, VB_HELLO_WIRE);
	out[17] = (uint8_t)((peer->sa_family == AF_INET6 ? 0x60 : 0x40) |
			    (q->priv[17] & 0x0f));
	memcpy(out + 28, &port, 2);
	put_ip(out + 32, peer);
	put_ip(out + 48, self);
	return VB_HELLO_SIZE;
}

int sdp__verbs_get_request(struct sdp_listener *tl, struct sdp_conn_req **req,
			   void *priv, uint32_t *priv_len)
{
	struct vb_listener *l = VB_L(tl);
	struct vb_conn_req *q;
	uint64_t v;

	if (sdp__verbs_inherited(l->epoch))
		return -EAGAIN;	/* its requests reach the parent only */
	pthread_mutex_lock(&l->lock);
	q = l->head;
	if (!q) {
		if (sdp_real.read(l->evfd, &v, sizeof(v)) < 0) {
			/* already clear */
		}
		pthread_mutex_unlock(&l->lock);
		return -EAGAIN;
	}
	l->head = q->next;
	if (!l->head)
		l->tail = NULL;
	l->count--;
	pthread_mutex_unlock(&l->lock);
	if (*priv_len < VB_HELLO_SIZE) {
		sdp__verbs_reject((struct sdp_conn_req *)q);
		return -EAGAIN;
	}
	*priv_len = hello_rebuild(q, priv);
	*req = (struct sdp_conn_req *)q;
	return 0;
}

void sdp__verbs_reject(struct sdp_conn_req *req)
{
	struct vb_conn_req *q = (struct vb_conn_req *)req;

	if (!sdp__verbs_inherited(q->epoch)) {
		rdma_reject(q->id, NULL, 0);
		rdma_destroy_id(q->id);
	}
	free(q);
}

void sdp__verbs_close_listener(struct sdp_listener *tl)
{
	struct vb_listener *l = VB_L(tl);
	struct vb_conn_req *q, *next;

	if (sdp__verbs_inherited(l->epoch))
		/* fork() child: the id is the parent's; its lock may be a
		 * copy taken by a parent thread. */
		pthread_mutex_init(&l->lock, NULL);
	else	/* Waits for the event thread to ack any event naming it. */
		rdma_destroy_id(l->id);
	pthread_mutex_lock(&l->lock);
	q = l->head;
	l->head = l->tail = NULL;
	pthread_mutex_unlock(&l->lock);
	for (; q; q = next) {
		next = q->next;
		sdp__verbs_reject((struct sdp_conn_req *)q);
	}
	sdp_close(l->evfd);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

/* Event thread: a REQ reached a listener.  The request's id is ours now;
 * returns it when it must be refused (after the event's ack). */
static struct rdma_cm_id *cm_request(struct rdma_cm_event *e)
{
	struct vb_listener *l = e->listen_id->context;
	struct vb_conn_req *q;
	uint64_t one = 1;

	e->id->context = NULL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return e->id;
	q->epoch = sdp__vb.epoch;
	q->id = e->id;
	q->priv_len = e->param.conn.private_data_len;
	if (q->priv_len > sizeof(q->priv))
		q->priv_len = sizeof(q->priv);
	if (e->param.conn.private_data)
		memcpy(q->priv, e->param.conn.private_data, q->priv_len);
	else
		q->priv_len = 0;
	pthread_mutex_lock(&l->lock);
	if (!l->listening || l->count >= VB_MAX_QUEUED) {
		pthread_mutex_unlock(&l->lock);
		free(q);
		return e->id;
	}
	if (l->tail)
		l->tail->next = q;
	else
		l->head = q;
	l->tail = q;
	l->count++;
	if (sdp_real.write(l->evfd, &one, sizeof(one)) < 0) {
		/* counter saturated: readable anyway */
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

/* ---- active side ----------------------------------------------------------- */

int sdp__verbs_connect(struct sdp_qp *tq, struct sdp_listener *local,
		       const struct sockaddr *dst, socklen_t len,
		       const void *priv, uint32_t priv_len)
{
	struct vb_qp *qp = VB_QP(tq);
	int r;

	if (priv_len < VB_HELLO_WIRE || len < sizeof(struct sockaddr_in)) {
		if (local)
			sdp__verbs_close_listener(local);
		return -EINVAL;
	}
	memcpy(qp->hello, priv, VB_HELLO_WIRE);
	if (local && sdp__verbs_inherited(VB_L(local)->epoch)) {
		/* Bound before fork(): the id is the parent's. */
		sdp__verbs_close_listener(local);
		return -EBADFD;
	}
	if (local) {
		struct vb_listener *l = VB_L(local);

		/* Take over the bound id (source address and port). */
		qp->id = l->id;
		qp->id->context = qp;
		sdp_close(l->evfd);
		pthread_mutex_destroy(&l->lock);
		free(l);
	} else if (rdma_create_id(sdp__vb.cm, &qp->id, qp, RDMA_PS_TCP)) {
		return -errno;
	}
	atomic_store(&qp->state, VB_RESOLVING);
	memcpy(&qp->dst, dst, len < sizeof(qp->dst) ? len : sizeof(qp->dst));
	qp->resolve_ms = VB_RESOLVE_FIRST_MS;
	qp->resolve_dl_ms = sdp__verbs_now_ns() / 1000000u + VB_RESOLVE_MS;
	if (rdma_resolve_addr(qp->id, NULL, (struct sockaddr *)dst,
			      (int)qp->resolve_ms)) {
		r = -errno;
		atomic_store(&qp->state, VB_FAILED);
		return r;
	}
	return 0;
}

static void fill_addresses(struct vb_qp *qp)
{
	struct sockaddr *a = rdma_get_local_addr(qp->id);
	struct sockaddr *b = rdma_get_peer_addr(qp->id);

	qp->addr.local_len = sa_len(a);
	memcpy(&qp->addr.local, a, qp->addr.local_len);
	qp->addr.peer_len = sa_len(b);
	memcpy(&qp->addr.peer, b, qp->addr.peer_len);
}

static void conn_param(struct vb_qp *qp, struct rdma_conn_param *p,
		       const void *priv, uint32_t len)
{
	memset(p, 0, sizeof(*p));
	p->private_data = priv;
	p->private_data_len = (uint8_t)len;
	p->responder_resources = (uint8_t)qp->dev->max_rd_atom;
	p->initiator_depth = (uint8_t)qp->dev->max_rd_atom;
	p->retry_count = VB_RETRY_COUNT;
	p->rnr_retry_count = 0;	/* credits guarantee a posted receive */
	p->qp_num = qp->hw->qp_num;	/* our QP: the CM has none */
}

static void fail(struct vb_qp *qp, enum sdp_cm_event_type type, int err)
{
	atomic_store(&qp->state, VB_FAILED);
	sdp__verbs_push_event(qp, type, err, NULL, 0);
}

/* An address resolution timed out: try again, with a doubled timeout,
 * while the budget lasts (VB_RESOLVE_FIRST_MS).  True if a try is out. */
static bool resolve_again(struct vb_qp *qp)
{
	uint64_t now = sdp__verbs_now_ns() / 1000000u;
	uint32_t next = qp->resolve_ms * 2;

	if (atomic_load(&qp->state) != VB_RESOLVING || now >= qp->resolve_dl_ms)
		return false;
	if (next > qp->resolve_dl_ms - now)
		next = (uint32_t)(qp->resolve_dl_ms - now);
	qp->resolve_ms = next;
	return rdma_resolve_addr(qp->id, NULL, (struct sockaddr *)&qp->dst,
				 (int)next) == 0;
}

static void cm_route_resolved(struct vb_qp *qp)
{
	struct rdma_conn_param p;
	int r;

	r = sdp__verbs_qp_bind_dev(qp);
	if (r < 0) {
		fail(qp, SDP_CM_UNREACHABLE, r);
		return;
	}
	conn_param(qp, &p, qp->hello, VB_HELLO_WIRE);
	atomic_store(&qp->state, VB_CONNECTING);
	if (rdma_connect(qp->id, &p))
		fail(qp, SDP_CM_UNREACHABLE, -errno);
}

/* The QP is dead: flush everything, tell the engine once. */
static void cm_disconnected(struct vb_qp *qp)
{
	enum vb_state st = atomic_exchange(&qp->state, VB_DISCONNECTED);

	if (st == VB_DISCONNECTED || st == VB_FAILED) {
		atomic_store(&qp->state, st);
		return;
	}
	rdma_disconnect(qp->id);	/* QP -> error (flush), DREP */
	sdp__verbs_qp_set_error(qp);
	sdp__verbs_push_event(qp, SDP_CM_DISCONNECTED, -ECONNRESET, NULL, 0);
}

static void cm_qp_event(struct vb_qp *qp, struct rdma_cm_event *e)
{
	int st = e->status;

	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (atomic_load(&qp->state) != VB_RESOLVING)
			break;	/* disconnected meanwhile */
		if (rdma_resolve_route(qp->id, VB_RESOLVE_MS))
			fail(qp, SDP_CM_UNREACHABLE, -errno);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (atomic_load(&qp->state) == VB_RESOLVING)
			cm_route_resolved(qp);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		if (st == -ETIMEDOUT && resolve_again(qp))
			break;
		fail(qp, SDP_CM_UNREACHABLE, st < 0 ? st : -EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		fail(qp, SDP_CM_UNREACHABLE, st < 0 ? st : -EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		/* No answer to the REQ: nobody at that address. */
		fail(qp, SDP_CM_UNREACHABLE, st < 0 ? st : -ETIMEDOUT);
		break;
	case RDMA_CM_EVENT_REJECTED:
		/* IB_CM_REJ_INVALID_SERVICE_ID: no listener on the port;
		 * consumer reason: the listener refused. */
		fail(qp, SDP_CM_REJECTED, -ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		if (atomic_load(&qp->state) == VB_CONNECTING)
			fail(qp, SDP_CM_UNREACHABLE, st < 0 ? st : -ECONNRESET);
		else
			cm_disconnected(qp);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		/* The REP (HelloAck).  librdmacm moves only QPs it created:
		 * ours goes to RTS here, then the RTU (rdma_establish). */
		if (atomic_load(&qp->state) != VB_CONNECTING)
			break;
		st = sdp__verbs_qp_rtr_rts(qp, -1, -1);
		if (st == 0 && rdma_establish(qp->id))
			st = errno ? -errno : -EIO;
		if (st < 0) {
			rdma_reject(qp->id, NULL, 0);
			fail(qp, SDP_CM_UNREACHABLE, st);
			break;
		}
		fill_addresses(qp);
		atomic_store(&qp->state, VB_ESTABLISHED);
		sdp__verbs_push_event(qp, SDP_CM_ESTABLISHED, 0,
				      e->param.conn.private_data,
				      e->param.conn.private_data_len);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		break;	/* passive side: RTU, nothing to do */
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		cm_disconnected(qp);
		break;
	default:
		break;	/* TIMEWAIT_EXIT, ADDR_CHANGE */
	}
}

void sdp__verbs_cm_event(struct rdma_cm_event *e)
{
	struct rdma_cm_id *refuse = NULL;
	struct vb_qp *qp;

	if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		refuse = cm_request(e);
	else if ((qp = e->id->context))
		cm_qp_event(qp, e);
	rdma_ack_cm_event(e);
	if (refuse) {
		rdma_reject(refuse, NULL, 0);
		rdma_destroy_id(refuse);
	}
}

/* ---- passive side, events, teardown ------------------------------------------ */

int sdp__verbs_accept(struct sdp_qp *tq, const void *priv, uint32_t priv_len)
{
	struct vb_qp *qp = VB_QP(tq);
	struct rdma_conn_param p;

	int r;

	if (priv_len > 196)
		return -EINVAL;
	conn_param(qp, &p, priv, priv_len);
	/* Before the REP: the peer may send as soon as it has it. */
	r = sdp__verbs_qp_rtr_rts(qp, p.responder_resources,
				  p.initiator_depth);
	if (r < 0) {
		rdma_reject(qp->id, NULL, 0);
		atomic_store(&qp->state, VB_FAILED);
		return r;
	}
	fill_addresses(qp);
	atomic_store(&qp->state, VB_ESTABLISHED);
	if (rdma_accept(qp->id, &p)) {
		atomic_store(&qp->state, VB_FAILED);
		return -errno;
	}
	return 0;
}

int sdp__verbs_get_event(struct sdp_qp *tq, struct sdp_cm_event *ev)
{
	struct vb_qp *qp = VB_QP(tq);
	int r = -EAGAIN;

	if (sdp__verbs_inherited(qp->epoch))
		sdp__verbs_orphan(qp);
	pthread_mutex_lock(&qp->lock);
	if (qp->ev_count) {
		*ev = qp->ev[qp->ev_head];
		qp->ev_head = (qp->ev_head + 1) % VB_MAX_EVENTS;
		qp->ev_count--;
		r = 0;
	}
	pthread_mutex_unlock(&qp->lock);
	return r;
}

int sdp__verbs_addresses(struct sdp_qp *tq, struct sdp_tp_addr *addr)
{
	*addr = VB_QP(tq)->addr;
	return 0;
}

int sdp__verbs_disconnect(struct sdp_qp *tq)
{
	struct vb_qp *qp = VB_QP(tq);
	enum vb_state st;

	if (sdp__verbs_inherited(qp->epoch)) {
		sdp__verbs_orphan(qp);	/* nothing to tell the kernel */
		return 0;
	}
	st = atomic_load(&qp->state);
	switch (st) {
	case VB_CONNECTING:
	case VB_PASSIVE:
	case VB_ESTABLISHED:
		atomic_store(&qp->state, VB_DISCONNECTED);
		rdma_disconnect(qp->id);	/* QP -> error: flushes */
		sdp__verbs_qp_set_error(qp);
		break;
	case VB_IDLE:
	case VB_RESOLVING:
		atomic_store(&qp->state, VB_FAILED);
		break;
	default:
		break;
	}
	return 0;
}
