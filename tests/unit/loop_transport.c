// SPDX-License-Identifier: MIT
/*
 * loop.c — the "loop" transport: both ends of every connection live in this
 * process, for unit tests, fuzzing and fault injection.
 *
 * Everything is synchronous and deterministic: a SEND is copied into the
 * peer's next posted receive while post_send() runs, RDMA READ/WRITE are a
 * memcpy validated against the MRs the peer registered, ephemeral ports are
 * handed out in order.  One process-wide mutex protects all loop state (this
 * is a test transport; simplicity beats scalability) and one condition
 * variable serves every wait().
 *
 * RC semantics are enforced as strictly as the shm provider does, so that a
 * credit bug in the engine fails here first: no posted receive -> RNR error
 * for the sender, both QPs in error; oversize SEND -> REM_INV_REQ_ERR /
 * LOC_LEN_ERR; errors flush every outstanding WR after the completions that
 * were already delivered.
 *
 * Conventions shared with shm: create_qp_from_req() always consumes the
 * request (on failure it is rejected); connect() always consumes `local`;
 * a post_send() on a QP in error is accepted and completes with
 * SDP_WC_WR_FLUSH_ERR; an established QP that enters the error state reports
 * SDP_CM_DISCONNECTED once through get_event().
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "loop_transport.h"
#include "transport/shm/shm.h"
#include "transport/transport.h"

#define LOOP_EPHEMERAL_LO 32768
#define LOOP_EPHEMERAL_HI 60999


struct loop_listener {
	struct sdp_tp_object obj;
	struct shm_addr addr;
	int is_v6_socket;	/* bound with a sockaddr_in6 */
	int listening;
	int backlog;
	int evfd;		/* readable while requests are queued */
	struct loop_req *reqs, **reqs_tail;
	int nreqs;
	struct loop_listener *next;	/* port registry */
};

struct loop_req {
	struct loop_listener *l;	/* NULL once the listener closed */
	struct loop_qp *active;		/* NULL once the connector went away */
	struct shm_addr src, dst;
	int listener_v6;		/* present addresses as IPv6 */
	uint8_t priv[SDP_CM_PRIV_MAX];
	uint32_t priv_len;
	struct loop_req *next;
};

struct loop_mr {
	struct sdp_mr pub;
	unsigned access;
	struct loop_mr *next;
};

struct loop_rwr {			/* a posted receive */
	uint64_t wr_id;
	uint8_t *buf;
	uint32_t len;
	uint32_t byte_len;		/* valid once done */
	enum sdp_wc_status status;
};

struct loop_qp {
	struct sdp_tp_object obj;
	struct sdp_qp_attr attr;
	struct loop_qp *peer;
	struct loop_req *req;		/* active side: pending request */
	struct loop_req *from_req;	/* passive side: until accept() */
	struct loop_listener *local;	/* source port reservation */
	bool connected, error, disc_reported;
	struct sdp_tp_addr addr;
	struct sdp_cm_event ev;
	bool ev_pending;

	uint8_t *region;
	struct sdp_mr region_mr;
	struct loop_mr *mrs;

	struct loop_rwr *rq;		/* FIFO of max_recv_wr entries */
	uint32_t rq_head, rq_count;	/* rq_count posted, of which */
	uint32_t rq_done;		/* rq_done (a prefix) completed */
	struct sdp_wc *sq;		/* local completions, max_send_wr */
	uint32_t sq_head, sq_count;

	uint32_t seq;			/* bumped on every event */
	bool armed;
	int evfd;
};

/* ---- global state -------------------------------------------------------- */

static pthread_mutex_t loop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t loop_cond;
static pthread_once_t loop_once = PTHREAD_ONCE_INIT;
static struct loop_listener *loop_ports;
static uint16_t loop_next_port = LOOP_EPHEMERAL_LO;
static uint32_t loop_next_key = 0x100;

static void loop_init_once(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&loop_cond, &ca);
	pthread_condattr_destroy(&ca);
}

static void loop_lock_all(void)
{
	pthread_once(&loop_once, loop_init_once);
	pthread_mutex_lock(&loop_lock);
}

/* ---- fault injection ----------------------------------------------------- */

enum { F_BIND, F_LISTEN, F_CREATE_QP, F_CREATE_QP_FROM_REQ, F_CONNECT,
       F_ACCEPT, F_REG_MR, F_POST_SEND, F_POST_RECV, F_NR };

static const char *const fault_names[F_NR] = {
	"bind", "listen", "create_qp", "create_qp_from_req", "connect",
	"accept", "reg_mr", "post_send", "post_recv",
};

static struct {
	unsigned long calls;
	unsigned long nth;		/* 0 = no fault armed */
	bool persistent;
	bool wc;
	enum sdp_wc_status status;
} faults[F_NR];

static int fault_index(const char *op)
{
	for (int i = 0; i < F_NR; i++)
		if (op && !strcmp(op, fault_names[i]))
			return i;
	return -EINVAL;
}

static int fault_arm(const char *op, int n, bool persistent, bool wc,
		     enum sdp_wc_status status)
{
	int i = fault_index(op);

	if (i < 0 || n < 1)
		return -EINVAL;
	if (wc && i != F_POST_SEND && i != F_POST_RECV)
		return -EINVAL;
	loop_lock_all();
	faults[i].nth = faults[i].calls + (unsigned long)n;
	faults[i].persistent = persistent;
	faults[i].wc = wc;
	faults[i].status = status;
	pthread_mutex_unlock(&loop_lock);
	return 0;
}

int sdp_loop_fail_nth(const char *op, int n)
{
	return fault_arm(op, n, false, false, SDP_WC_SUCCESS);
}

int sdp_loop_fail_from(const char *op, int n)
{
	return fault_arm(op, n, true, false, SDP_WC_SUCCESS);
}

int sdp_loop_fail_wc(const char *op, int n, enum sdp_wc_status status)
{
	return fault_arm(op, n, false, true, status);
}

void sdp_loop_fail_reset(void)
{
	loop_lock_all();
	memset(faults, 0, sizeof(faults));
	pthread_mutex_unlock(&loop_lock);
}

unsigned long sdp_loop_op_count(const char *op)
{
	int i = fault_index(op);
	unsigned long n;

	if (i < 0)
		return 0;
	loop_lock_all();
	n = faults[i].calls;
	pthread_mutex_unlock(&loop_lock);
	return n;
}

/* Count a call; caller holds loop_lock.  Returns 0, -ENOMEM, or 1 for "fail
 * with an error completion" (status in faults[i].status). */
static int fault_hit_locked(int i)
{
	unsigned long c = ++faults[i].calls;

	if (!faults[i].nth || c < faults[i].nth)
		return 0;
	if (c > faults[i].nth && !faults[i].persistent)
		return 0;
	return faults[i].wc ? 1 : -ENOMEM;
}

/* ---- addresses ----------------------------------------------------------- */

static bool addr_same_ip(const struct shm_addr *x, const struct shm_addr *y)
{
	return x->v6 == y->v6 && !memcmp(x->a, y->a, x->v6 ? 16 : 4);
}

/* Do two bindings of the same port collide?  A wildcard covers its family;
 * an IPv6 wildcard is dual stack and covers IPv4 too (bindv6only=0). */
static bool addr_conflict(const struct shm_addr *x, const struct shm_addr *y)
{
	if (x->port != y->port)
		return false;
	if (x->v6 == y->v6)
		return sdp__shm_addr_is_any(x) || sdp__shm_addr_is_any(y) || addr_same_ip(x, y);
	return (x->v6 && sdp__shm_addr_is_any(x)) || (y->v6 && sdp__shm_addr_is_any(y));
}

static bool port_taken_locked(const struct shm_addr *a)
{
	for (struct loop_listener *l = loop_ports; l; l = l->next)
		if (addr_conflict(&l->addr, a))
			return true;
	return false;
}

/* Registers `l` with its port (picking one if 0); caller holds loop_lock. */
static int port_register_locked(struct loop_listener *l)
{
	if (!l->addr.port) {
		int range = LOOP_EPHEMERAL_HI - LOOP_EPHEMERAL_LO + 1;

		for (int i = 0; i < range; i++) {
			l->addr.port = loop_next_port;
			loop_next_port = loop_next_port == LOOP_EPHEMERAL_HI ?
					 LOOP_EPHEMERAL_LO : loop_next_port + 1;
			if (!port_taken_locked(&l->addr))
				goto found;
		}
		l->addr.port = 0;
		return -EADDRNOTAVAIL;
	}
	if (port_taken_locked(&l->addr))
		return -EADDRINUSE;
found:
	l->next = loop_ports;
	loop_ports = l;
	return 0;
}

static void port_unregister_locked(struct loop_listener *l)
{
	for (struct loop_listener **p = &loop_ports; *p; p = &(*p)->next) {
		if (*p == l) {
			*p = l->next;
			return;
		}
	}
}

/* The listener a connect to `dst` reaches: exact address, then the family
 * wildcard, then (IPv4 destinations) the dual-stack IPv6 wildcard. */
static struct loop_listener *listener_lookup_locked(const struct shm_addr *dst)
{
	struct loop_listener *any = NULL, *any6 = NULL;

	for (struct loop_listener *l = loop_ports; l; l = l->next) {
		if (!l->listening || l->addr.port != dst->port)
			continue;
		if (addr_same_ip(&l->addr, dst))
			return l;
		if (sdp__shm_addr_is_any(&l->addr) && l->addr.v6 == dst->v6)
			any = l;
		else if (sdp__shm_addr_is_any(&l->addr) && l->addr.v6)
			any6 = l;
	}
	return any ? any : any6;
}

/* ---- notification -------------------------------------------------------- */

static void evfd_signal(int fd)
{
	uint64_t one = 1;
	ssize_t r = write(fd, &one, sizeof(one));

	(void)r;	/* EAGAIN: counter saturated, already readable */
}

static void evfd_drain(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));

	(void)r;
}

/* A new completion for `qp`: wake waiters, ring the doorbell if armed. */
static void qp_notify_locked(struct loop_qp *qp)
{
	qp->seq++;
	pthread_cond_broadcast(&loop_cond);
	if (qp->armed) {
		qp->armed = false;
		evfd_signal(qp->evfd);
	}
}

/* CM events and errors make the event fd readable whether armed or not. */
static void qp_notify_event_locked(struct loop_qp *qp)
{
	qp->seq++;
	pthread_cond_broadcast(&loop_cond);
	qp->armed = false;
	evfd_signal(qp->evfd);
}

static void qp_set_error_locked(struct loop_qp *qp)
{
	if (qp->error)
		return;
	qp->error = true;
	qp_notify_event_locked(qp);
}

/* Errors of an RC connection take both ends down. */
static void pair_set_error_locked(struct loop_qp *qp)
{
	qp_set_error_locked(qp);
	if (qp->peer)
		qp_set_error_locked(qp->peer);
}

static void qp_post_event_locked(struct loop_qp *qp, enum sdp_cm_event_type t,
				 int err, const void *priv, uint32_t priv_len)
{
	memset(&qp->ev, 0, sizeof(qp->ev));
	qp->ev.type = t;
	qp->ev.err = err;
	qp->ev.priv_len = priv_len;
	if (priv_len)
		memcpy(qp->ev.priv, priv, priv_len);
	qp->ev_pending = true;
	qp_notify_event_locked(qp);
}

/* ---- listeners ----------------------------------------------------------- */

#define LL(l) ((struct loop_listener *)(l))
#define LQ(q) ((struct loop_qp *)(q))

static const struct sdp_transport_ops loop_ops;

static struct loop_listener *listener_alloc(void)
{
	struct loop_listener *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->obj.ops = &loop_ops;
	l->reqs_tail = &l->reqs;
	l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->evfd < 0) {
		free(l);
		return NULL;
	}
	return l;
}

static void listener_free(struct loop_listener *l)
{
	close(l->evfd);
	free(l);
}

static int loop_bind(const struct sockaddr *sa, socklen_t len,
		     struct sdp_listener **out)
{
	struct loop_listener *l;
	struct shm_addr a;
	int is_v6, err;

	err = sdp__shm_addr_parse(sa, len, &a, &is_v6);
	if (err)
		return err;
	l = listener_alloc();
	if (!l)
		return -ENOMEM;
	l->addr = a;
	l->is_v6_socket = is_v6;

	loop_lock_all();
	err = fault_hit_locked(F_BIND);
	if (!err)
		err = port_register_locked(l);
	pthread_mutex_unlock(&loop_lock);
	if (err) {
		listener_free(l);
		return err;
	}
	*out = (struct sdp_listener *)l;
	return 0;
}

static int loop_bound_addr(struct sdp_listener *sl, struct sockaddr_storage *ss,
			   socklen_t *len)
{
	struct loop_listener *l = LL(sl);

	sdp__shm_addr_to_sockaddr(&l->addr, l->is_v6_socket, ss, len);
	return 0;
}

static int loop_listen(struct sdp_listener *sl, int backlog)
{
	struct loop_listener *l = LL(sl);
	int err;

	loop_lock_all();
	err = fault_hit_locked(F_LISTEN);
	if (!err) {
		l->listening = 1;
		l->backlog = backlog > 0 ? backlog : 1;
	}
	pthread_mutex_unlock(&loop_lock);
	return err;
}

static int loop_listener_fd(struct sdp_listener *sl)
{
	return LL(sl)->evfd;
}

static int loop_get_request(struct sdp_listener *sl, struct sdp_conn_req **out,
			    void *priv, uint32_t *priv_len)
{
	struct loop_listener *l = LL(sl);
	struct loop_req *r;

	loop_lock_all();
	r = l->reqs;
	if (!r) {
		evfd_drain(l->evfd);
		pthread_mutex_unlock(&loop_lock);
		return -EAGAIN;
	}
	l->reqs = r->next;
	if (!l->reqs) {
		l->reqs_tail = &l->reqs;
		evfd_drain(l->evfd);
	}
	l->nreqs--;
	r->next = NULL;
	r->l = NULL;
	memcpy(priv, r->priv, r->priv_len);
	*priv_len = r->priv_len;
	pthread_mutex_unlock(&loop_lock);
	*out = (struct sdp_conn_req *)r;
	return 0;
}

/* Caller holds loop_lock; frees `r`. */
static void req_reject_locked(struct loop_req *r, int err)
{
	if (r->active) {
		r->active->req = NULL;
		qp_post_event_locked(r->active, SDP_CM_REJECTED, err, NULL, 0);
	}
	free(r);
}

static void loop_reject(struct sdp_conn_req *sr)
{
	struct loop_qp *active;

	loop_lock_all();
	active = ((struct loop_req *)sr)->active;
	req_reject_locked((struct loop_req *)sr, -ECONNREFUSED);
	if (active)	/* the engine refused: not "nobody listens" */
		active->ev.flags = SDP_CM_F_LISTENER_SAID_NO;
	pthread_mutex_unlock(&loop_lock);
}

static void loop_close_listener(struct sdp_listener *sl)
{
	struct loop_listener *l = LL(sl);
	struct loop_req *r;

	loop_lock_all();
	port_unregister_locked(l);
	while ((r = l->reqs)) {
		l->reqs = r->next;
		req_reject_locked(r, -ECONNREFUSED);
	}
	pthread_mutex_unlock(&loop_lock);
	listener_free(l);
}

/* ---- QPs ----------------------------------------------------------------- */

static int qp_alloc(const struct sdp_qp_attr *attr, struct loop_qp **out)
{
	struct loop_qp *qp;

	if (!attr->max_send_wr || !attr->max_recv_wr || !attr->recv_region_size)
		return -EINVAL;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp->obj.ops = &loop_ops;
	qp->attr = *attr;
	qp->rq = calloc(attr->max_recv_wr, sizeof(*qp->rq));
	qp->sq = calloc(attr->max_send_wr, sizeof(*qp->sq));
	qp->region = calloc(1, attr->recv_region_size);
	qp->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!qp->rq || !qp->sq || !qp->region || qp->evfd < 0)
		goto err_free;

	loop_lock_all();
	qp->region_mr.addr = qp->region;
	qp->region_mr.length = attr->recv_region_size;
	qp->region_mr.lkey = loop_next_key++;
	qp->region_mr.rkey = 0;
	qp->region_mr.remote_addr = 0;
	pthread_mutex_unlock(&loop_lock);
	*out = qp;
	return 0;

err_free:
	if (qp->evfd >= 0)
		close(qp->evfd);
	free(qp->region);
	free(qp->sq);
	free(qp->rq);
	free(qp);
	return -ENOMEM;
}

static int loop_create_qp(const struct sdp_qp_attr *attr, struct sdp_qp **out)
{
	struct loop_qp *qp;
	int err;

	loop_lock_all();
	err = fault_hit_locked(F_CREATE_QP);
	pthread_mutex_unlock(&loop_lock);
	if (err)
		return err;
	err = qp_alloc(attr, &qp);
	if (err)
		return err;
	*out = (struct sdp_qp *)qp;
	return 0;
}

static int loop_create_qp_from_req(struct sdp_conn_req *sr,
				   const struct sdp_qp_attr *attr,
				   struct sdp_qp **out)
{
	struct loop_qp *qp;
	int err;

	loop_lock_all();
	err = fault_hit_locked(F_CREATE_QP_FROM_REQ);
	pthread_mutex_unlock(&loop_lock);
	if (!err)
		err = qp_alloc(attr, &qp);
	if (err) {
		loop_reject(sr);	/* consumed even on failure */
		return err;
	}
	qp->from_req = (struct loop_req *)sr;
	*out = (struct sdp_qp *)qp;
	return 0;
}

static int loop_connect(struct sdp_qp *sq, struct sdp_listener *local,
			const struct sockaddr *dst, socklen_t len,
			const void *priv, uint32_t priv_len)
{
	struct loop_qp *qp = LQ(sq);
	struct loop_listener *src = LL(local), *l;
	struct shm_addr d;
	struct loop_req *r;
	int is_v6, err;

	err = sdp__shm_addr_parse(dst, len, &d, &is_v6);
	if (!err && (priv_len > SDP_CM_PRIV_MAX || !d.port))
		err = -EINVAL;
	if (!err && (qp->req || qp->connected || qp->from_req || qp->local))
		err = -EISCONN;
	if (err) {
		if (local)	/* consumed even on failure */
			loop_close_listener(local);
		return err;
	}
	if (!src) {
		src = listener_alloc();
		if (!src)
			return -ENOMEM;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		qp->local = src;	/* released by destroy_qp */
		if (local) {
			loop_lock_all();
			port_unregister_locked(src);
			pthread_mutex_unlock(&loop_lock);
		}
		return -ENOMEM;
	}

	loop_lock_all();
	qp->local = src;
	if (!local) {
		/* Same-host routing: the source is the destination address
		 * (the loopback address for a wildcard destination). */
		src->addr.v6 = d.v6;
		memcpy(src->addr.a, d.a, sizeof(d.a));
		if (sdp__shm_addr_is_any(&d)) {
			memset(src->addr.a, 0, sizeof(src->addr.a));
			if (d.v6)
				src->addr.a[15] = 1;
			else
				memcpy(src->addr.a, "\x7f\0\0\x01", 4);
		}
		err = port_register_locked(src);
		if (err) {
			pthread_mutex_unlock(&loop_lock);
			qp->local = NULL;
			listener_free(src);
			free(r);
			return err;
		}
	}
	r->src = src->addr;
	if (sdp__shm_addr_is_any(&r->src)) {
		memcpy(r->src.a, d.a, sizeof(d.a));
		r->src.v6 = d.v6;
	}
	r->dst = d;
	sdp__shm_addr_to_sockaddr(&r->src, is_v6, &qp->addr.local, &qp->addr.local_len);
	sdp__shm_addr_to_sockaddr(&d, is_v6, &qp->addr.peer, &qp->addr.peer_len);

	err = fault_hit_locked(F_CONNECT);
	l = listener_lookup_locked(&d);
	if (err) {
		free(r);
		qp_post_event_locked(qp, SDP_CM_UNREACHABLE, err, NULL, 0);
	} else if (!l || l->nreqs >= l->backlog) {
		free(r);
		qp_post_event_locked(qp, SDP_CM_REJECTED, -ECONNREFUSED, NULL, 0);
	} else {
		r->active = qp;
		r->l = l;
		r->listener_v6 = l->is_v6_socket;
		if (priv_len)
			memcpy(r->priv, priv, priv_len);
		r->priv_len = priv_len;
		*l->reqs_tail = r;
		l->reqs_tail = &r->next;
		l->nreqs++;
		qp->req = r;
		evfd_signal(l->evfd);
	}
	pthread_mutex_unlock(&loop_lock);
	return 0;
}

static int loop_accept(struct sdp_qp *sq, const void *priv, uint32_t priv_len)
{
	struct loop_qp *qp = LQ(sq), *active;
	struct loop_req *r = qp->from_req;
	int err;

	if (!r)
		return -EINVAL;
	if (priv_len > SDP_CM_PRIV_MAX)
		return -EINVAL;
	loop_lock_all();
	err = fault_hit_locked(F_ACCEPT);
	if (err) {
		pthread_mutex_unlock(&loop_lock);
		return err;
	}
	qp->from_req = NULL;
	active = r->active;
	qp->connected = true;
	/* Passive side: local = the address the client connected to. */
	sdp__shm_addr_to_sockaddr(&r->dst, r->listener_v6, &qp->addr.local,
			 &qp->addr.local_len);
	sdp__shm_addr_to_sockaddr(&r->src, r->listener_v6, &qp->addr.peer,
			 &qp->addr.peer_len);
	if (!active) {
		qp_set_error_locked(qp);	/* the connector gave up */
	} else {
		active->req = NULL;
		active->peer = qp;
		qp->peer = active;
		active->connected = true;
		qp_post_event_locked(active, SDP_CM_ESTABLISHED, 0, priv,
				     priv_len);
	}
	free(r);
	pthread_mutex_unlock(&loop_lock);
	return 0;
}

static int loop_get_event(struct sdp_qp *sq, struct sdp_cm_event *ev)
{
	struct loop_qp *qp = LQ(sq);
	int ret = -EAGAIN;

	loop_lock_all();
	if (qp->ev_pending) {
		*ev = qp->ev;
		qp->ev_pending = false;
		ret = 0;
	} else if (qp->connected && qp->error && !qp->disc_reported) {
		memset(ev, 0, sizeof(*ev));
		ev->type = SDP_CM_DISCONNECTED;
		ev->err = -ECONNRESET;
		qp->disc_reported = true;
		ret = 0;
	}
	pthread_mutex_unlock(&loop_lock);
	return ret;
}

static int loop_addresses(struct sdp_qp *sq, struct sdp_tp_addr *addr)
{
	struct loop_qp *qp = LQ(sq);

	if (!qp->addr.local_len)
		return -ENOTCONN;
	*addr = qp->addr;
	return 0;
}

static void loop_query_caps(struct sdp_qp *qp, struct sdp_tp_caps *caps)
{
	memset(caps, 0, sizeof(*caps));
	caps->max_inline = UINT32_MAX;
	caps->max_sge = SDP_MAX_SGE;
	caps->rdma = 1;
	strcpy(caps->name, "loop");
}

static int loop_disconnect(struct sdp_qp *sq)
{
	struct loop_qp *qp = LQ(sq);

	loop_lock_all();
	pair_set_error_locked(qp);
	pthread_mutex_unlock(&loop_lock);
	return 0;
}

static void loop_destroy_qp(struct sdp_qp *sq)
{
	struct loop_qp *qp = LQ(sq);
	struct loop_mr *mr;

	loop_lock_all();
	pair_set_error_locked(qp);
	if (qp->peer)
		qp->peer->peer = NULL;
	if (qp->req)
		qp->req->active = NULL;	/* still queued at the listener */
	if (qp->from_req)
		req_reject_locked(qp->from_req, -ECONNREFUSED);
	if (qp->local)
		port_unregister_locked(qp->local);
	pthread_mutex_unlock(&loop_lock);

	if (qp->local)
		listener_free(qp->local);
	while ((mr = qp->mrs)) {
		qp->mrs = mr->next;
		free(mr);
	}
	close(qp->evfd);
	free(qp->region);
	free(qp->sq);
	free(qp->rq);
	free(qp);
}

/* ---- memory -------------------------------------------------------------- */

static struct sdp_mr *loop_recv_region(struct sdp_qp *sq)
{
	return &LQ(sq)->region_mr;
}

static int loop_reg_mr(struct sdp_qp *sq, void *addr, size_t len,
		       unsigned access, struct sdp_mr **out)
{
	struct loop_qp *qp = LQ(sq);
	struct loop_mr *mr;
	int err;

	if (!addr || !len)
		return -EINVAL;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	loop_lock_all();
	err = fault_hit_locked(F_REG_MR);
	if (!err) {
		mr->pub.addr = addr;
		mr->pub.length = len;
		mr->pub.lkey = mr->pub.rkey = loop_next_key++;
		mr->pub.remote_addr = (uintptr_t)addr;
		mr->access = access;
		mr->next = qp->mrs;
		qp->mrs = mr;
	}
	pthread_mutex_unlock(&loop_lock);
	if (err) {
		free(mr);
		return err;
	}
	*out = &mr->pub;
	return 0;
}

static int loop_dereg_mr(struct sdp_qp *sq, struct sdp_mr *pub)
{
	struct loop_qp *qp = LQ(sq);

	loop_lock_all();
	for (struct loop_mr **p = &qp->mrs; *p; p = &(*p)->next) {
		if (&(*p)->pub == pub) {
			struct loop_mr *mr = *p;

			*p = mr->next;
			pthread_mutex_unlock(&loop_lock);
			free(mr);
			return 0;
		}
	}
	pthread_mutex_unlock(&loop_lock);
	return -EINVAL;
}

static bool range_in(uint64_t addr, uint64_t len, uint64_t base, uint64_t size)
{
	return addr >= base && len <= size && addr - base <= size - len;
}

/* Is [addr, addr+len) covered by a local MR with key `lkey` and `access`? */
static bool local_ok_locked(struct loop_qp *qp, const struct sdp_sge *sge,
			    unsigned access)
{
	if (sge->lkey == qp->region_mr.lkey)
		return range_in(sge->addr, sge->length,
				(uintptr_t)qp->region, qp->attr.recv_region_size);
	for (struct loop_mr *mr = qp->mrs; mr; mr = mr->next)
		if (mr->pub.lkey == sge->lkey)
			return (mr->access & access) == access &&
			       range_in(sge->addr, sge->length,
					(uintptr_t)mr->pub.addr, mr->pub.length);
	return false;
}

static bool remote_ok_locked(struct loop_qp *peer, uint64_t addr, uint64_t len,
			     uint32_t rkey, unsigned access)
{
	for (struct loop_mr *mr = peer->mrs; mr; mr = mr->next)
		if (mr->pub.rkey == rkey)
			return (mr->access & access) == access &&
			       range_in(addr, len, mr->pub.remote_addr,
					mr->pub.length);
	return false;
}

/* ---- data path ----------------------------------------------------------- */

static void sq_push_locked(struct loop_qp *qp, const struct sdp_send_wr *wr,
			   enum sdp_wc_status status, uint32_t byte_len)
{
	static const enum sdp_wc_opcode opc[] = {
		[SDP_WR_SEND] = SDP_WC_SEND,
		[SDP_WR_RDMA_WRITE] = SDP_WC_RDMA_WRITE,
		[SDP_WR_RDMA_READ] = SDP_WC_RDMA_READ,
	};
	struct sdp_wc *wc;

	/* Unsignaled WRs produce a completion only when they fail. */
	if (status == SDP_WC_SUCCESS && !(wr->flags & SDP_SEND_SIGNALED))
		return;
	wc = &qp->sq[(qp->sq_head + qp->sq_count) % qp->attr.max_send_wr];
	wc->wr_id = wr->wr_id;
	wc->status = status;
	wc->opcode = opc[wr->opcode];
	wc->byte_len = byte_len;
	wc->flags = 0;
	qp->sq_count++;
	qp_notify_locked(qp);
}

/* Execute a SEND; returns the sender's completion status. */
static enum sdp_wc_status do_send_locked(struct loop_qp *qp,
					 const struct sdp_send_wr *wr,
					 uint64_t total)
{
	struct loop_qp *peer = qp->peer;
	struct loop_rwr *rwr;
	uint8_t *p;

	if (peer->error)
		return SDP_WC_RETRY_EXC_ERR;
	if (peer->rq_done == peer->rq_count)
		return SDP_WC_RNR_RETRY_EXC_ERR;
	rwr = &peer->rq[(peer->rq_head + peer->rq_done) % peer->attr.max_recv_wr];
	rwr->byte_len = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
	peer->rq_done++;
	if (total > rwr->len) {
		rwr->status = SDP_WC_LOC_LEN_ERR;
		qp_notify_locked(peer);
		return SDP_WC_REM_INV_REQ_ERR;
	}
	p = rwr->buf;
	for (int i = 0; i < wr->num_sge; i++) {
		memcpy(p, (void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		p += wr->sg_list[i].length;
	}
	rwr->status = SDP_WC_SUCCESS;
	qp_notify_locked(peer);
	return SDP_WC_SUCCESS;
}

static enum sdp_wc_status do_rdma_locked(struct loop_qp *qp,
					 const struct sdp_send_wr *wr,
					 uint64_t total)
{
	bool rd = wr->opcode == SDP_WR_RDMA_READ;
	uint8_t *remote = (uint8_t *)(uintptr_t)wr->remote_addr;

	if (qp->peer->error)
		return SDP_WC_RETRY_EXC_ERR;
	if (!remote_ok_locked(qp->peer, wr->remote_addr, total, wr->rkey,
			      rd ? SDP_ACCESS_REMOTE_READ :
				   SDP_ACCESS_REMOTE_WRITE))
		return SDP_WC_REM_ACCESS_ERR;
	for (int i = 0; i < wr->num_sge; i++) {
		void *local = (void *)(uintptr_t)wr->sg_list[i].addr;

		if (rd)
			memmove(local, remote, wr->sg_list[i].length);
		else
			memmove(remote, local, wr->sg_list[i].length);
		remote += wr->sg_list[i].length;
	}
	return SDP_WC_SUCCESS;
}

static int loop_post_send(struct sdp_qp *sq, const struct sdp_send_wr *wr)
{
	struct loop_qp *qp = LQ(sq);
	enum sdp_wc_status st = SDP_WC_SUCCESS;
	uint64_t total = 0;
	unsigned need;
	int err = 0;

	if (wr->num_sge < 0 || wr->num_sge > SDP_MAX_SGE ||
	    (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	if (wr->opcode < SDP_WR_SEND || wr->opcode > SDP_WR_RDMA_READ)
		return -EINVAL;
	for (int i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;

	loop_lock_all();
	if (!qp->connected && !qp->error) {
		err = -ENOTCONN;
		goto out;
	}
	if (qp->sq_count >= qp->attr.max_send_wr) {
		err = -ENOMEM;
		goto out;
	}
	err = fault_hit_locked(F_POST_SEND);
	if (err < 0)
		goto out;
	if (err > 0) {
		err = 0;
		st = faults[F_POST_SEND].status;
		goto complete;
	}
	if (qp->error || !qp->peer) {
		st = SDP_WC_WR_FLUSH_ERR;
		goto complete;
	}
	need = wr->opcode == SDP_WR_RDMA_READ ? SDP_ACCESS_LOCAL_WRITE : 0;
	for (int i = 0; i < wr->num_sge; i++) {
		if (wr->opcode == SDP_WR_SEND && (wr->flags & SDP_SEND_INLINE))
			break;
		if (!local_ok_locked(qp, &wr->sg_list[i], need)) {
			st = SDP_WC_LOC_PROT_ERR;
			goto complete;
		}
	}
	if (wr->opcode == SDP_WR_SEND)
		st = do_send_locked(qp, wr, total);
	else
		st = do_rdma_locked(qp, wr, total);
complete:
	if (st != SDP_WC_SUCCESS && st != SDP_WC_WR_FLUSH_ERR)
		pair_set_error_locked(qp);
	sq_push_locked(qp, wr, st,
		       wr->opcode == SDP_WR_RDMA_READ && !st ? (uint32_t)total : 0);
out:
	pthread_mutex_unlock(&loop_lock);
	return err;
}

static int loop_post_recv(struct sdp_qp *sq, const struct sdp_recv_wr *wr)
{
	struct loop_qp *qp = LQ(sq);
	struct loop_rwr *rwr;
	int err;

	if (wr->sge.lkey != qp->region_mr.lkey ||
	    !range_in(wr->sge.addr, wr->sge.length, (uintptr_t)qp->region,
		      qp->attr.recv_region_size))
		return -EINVAL;
	loop_lock_all();
	if (qp->rq_count >= qp->attr.max_recv_wr) {
		err = -ENOMEM;
		goto out;
	}
	err = fault_hit_locked(F_POST_RECV);
	if (err < 0)
		goto out;
	rwr = &qp->rq[(qp->rq_head + qp->rq_count) % qp->attr.max_recv_wr];
	rwr->wr_id = wr->wr_id;
	rwr->buf = (uint8_t *)(uintptr_t)wr->sge.addr;
	rwr->len = wr->sge.length;
	rwr->byte_len = 0;
	qp->rq_count++;
	if (err > 0) {
		/* Injected: complete this receive with an error now. */
		err = 0;
		if (qp->rq_done == qp->rq_count - 1) {
			rwr->status = faults[F_POST_RECV].status;
			qp->rq_done++;
		}
		pair_set_error_locked(qp);
	}
out:
	pthread_mutex_unlock(&loop_lock);
	return err;
}

static int loop_poll_cq(struct sdp_qp *sq, struct sdp_wc *wc, int max)
{
	struct loop_qp *qp = LQ(sq);
	int n = 0;

	loop_lock_all();
	while (n < max && qp->sq_count) {
		wc[n++] = qp->sq[qp->sq_head];
		qp->sq_head = (qp->sq_head + 1) % qp->attr.max_send_wr;
		qp->sq_count--;
	}
	while (n < max && qp->rq_count && (qp->rq_done || qp->error)) {
		struct loop_rwr *rwr = &qp->rq[qp->rq_head];

		wc[n].wr_id = rwr->wr_id;
		wc[n].opcode = SDP_WC_RECV;
		wc[n].flags = 0;
		if (qp->rq_done) {
			wc[n].status = rwr->status;
			wc[n].byte_len = rwr->byte_len;
			qp->rq_done--;
		} else {
			wc[n].status = SDP_WC_WR_FLUSH_ERR;
			wc[n].byte_len = 0;
		}
		n++;
		qp->rq_head = (qp->rq_head + 1) % qp->attr.max_recv_wr;
		qp->rq_count--;
	}
	pthread_mutex_unlock(&loop_lock);
	return n;
}

/* ---- waiting ------------------------------------------------------------- */

static uint32_t loop_wait_seq(struct sdp_qp *sq)
{
	uint32_t s;

	loop_lock_all();
	s = LQ(sq)->seq;
	pthread_mutex_unlock(&loop_lock);
	return s;
}

static int loop_wait(struct sdp_qp *sq, uint32_t seq, int timeout_ms)
{
	struct loop_qp *qp = LQ(sq);
	struct timespec dl;
	int ret = 0;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	if (timeout_ms >= 0) {
		dl.tv_sec += timeout_ms / 1000;
		dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
	}
	loop_lock_all();
	while (qp->seq == seq && !ret) {
		if (timeout_ms < 0)
			pthread_cond_wait(&loop_cond, &loop_lock);
		else if (pthread_cond_timedwait(&loop_cond, &loop_lock, &dl))
			ret = qp->seq == seq ? -ETIMEDOUT : 0;
	}
	pthread_mutex_unlock(&loop_lock);
	return ret;
}

static void loop_kick(struct sdp_qp *sq)
{
	loop_lock_all();
	LQ(sq)->seq++;
	pthread_cond_broadcast(&loop_cond);
	pthread_mutex_unlock(&loop_lock);
}

static int loop_event_fd(struct sdp_qp *sq)
{
	return LQ(sq)->evfd;
}

static int loop_req_notify(struct sdp_qp *sq)
{
	struct loop_qp *qp = LQ(sq);
	int pending;

	loop_lock_all();
	pending = qp->sq_count || qp->rq_done || qp->ev_pending ||
		  (qp->error && qp->rq_count);
	qp->armed = !pending;
	pthread_mutex_unlock(&loop_lock);
	return pending;
}

static void loop_ack_events(struct sdp_qp *sq)
{
	evfd_drain(LQ(sq)->evfd);
}

void sdp_loop_qp_error(struct sdp_qp *sq)
{
	loop_lock_all();
	pair_set_error_locked(LQ(sq));
	pthread_mutex_unlock(&loop_lock);
}

static const struct sdp_transport_ops loop_ops = {
	.bind = loop_bind,
	.bound_addr = loop_bound_addr,
	.listen = loop_listen,
	.listener_fd = loop_listener_fd,
	.get_request = loop_get_request,
	.reject = loop_reject,
	.close_listener = loop_close_listener,
	.create_qp = loop_create_qp,
	.create_qp_from_req = loop_create_qp_from_req,
	.connect = loop_connect,
	.accept = loop_accept,
	.get_event = loop_get_event,
	.addresses = loop_addresses,
	.query_caps = loop_query_caps,
	.disconnect = loop_disconnect,
	.destroy_qp = loop_destroy_qp,
	.detach_qp = loop_destroy_qp,	/* in-process: nothing to share */
	.recv_region = loop_recv_region,
	.reg_mr = loop_reg_mr,
	.dereg_mr = loop_dereg_mr,
	.post_send = loop_post_send,
	.post_recv = loop_post_recv,
	.poll_cq = loop_poll_cq,
	.wait_seq = loop_wait_seq,
	.wait = loop_wait,
	.wait_rdma = sdp_tp_wait_rdma_plain,
	.send_slot = sdp_tp_no_send_slot,
	.kick = loop_kick,
	.event_fd = loop_event_fd,
	.req_notify = loop_req_notify,
	.ack_events = loop_ack_events,
};

const struct sdp_transport sdp_loop_transport = {
	.name = "loop",
	.ops = &loop_ops,
};
