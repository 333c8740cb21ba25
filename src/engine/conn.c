/* SPDX-License-Identifier: MIT */
/*
 * conn.c — connection life: allocation, the Hello/HelloAck handshake (active
 * and passive), the state machine, close (graceful, abortive, orphaned) and
 * the per-connection progress step that the progress thread and application
 * threads both run under the connection lock.
 */
#include "engine/conn.h"
#include "engine/appwake.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/atfork.h"
#include "base/cancel.h"
#include "base/config.h"
#include "base/real.h"
#include "engine/handover.h"
#include "engine/relay.h"
#include "base/owner.h"
#include "engine/progress.h"
#include "engine/stats_shm.h"
#include "engine/zcopy.h"
#include "transport/multi.h"

static atomic_uint conn_ids;

uint64_t sdp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *sdp_state_name(enum sdp_state st)
{
	static const char *const names[SDP_ST_COUNT] = {
		[SDP_ST_CLOSED] = "CLOSED",
		[SDP_ST_CONNECTING] = "CONNECTING",
		[SDP_ST_ESTABLISHED] = "ESTABLISHED",
		[SDP_ST_FIN_WAIT] = "FIN_WAIT",
		[SDP_ST_CLOSE_WAIT] = "CLOSE_WAIT",
		[SDP_ST_LAST_ACK] = "LAST_ACK",
		[SDP_ST_TIME_WAIT] = "TIME_WAIT",
		[SDP_ST_RESET] = "RESET",
	};

	return (unsigned)st < SDP_ST_COUNT ? names[st] : "?";
}

const char *sdp_reason_str(enum sdp_reason r)
{
	switch (r) {
#define X(name, text) case SDP_REASON_##name: return text;
	SDP_REASON_MAP(X)
#undef X
	}
	return "?";
}

int sdp_reason_is_local_abort(enum sdp_reason r)
{
	return r == SDP_REASON_LOCAL_ABORT || r == SDP_REASON_CLOSED_UNREAD ||
	       r == SDP_REASON_DATA_AFTER_CLOSE ||
	       r == SDP_REASON_RELAY_UNREAD || r == SDP_REASON_RELAY_ENDED;
}

/*
 * Allowed transitions.  Anything else is an engine bug: refuse it (log and
 * reset the connection) rather than carry on in an impossible state.
 */
#define BIT(s) (1u << (s))
static const unsigned allowed_from[SDP_ST_COUNT] = {
	[SDP_ST_CLOSED] = ~0u,
	[SDP_ST_CONNECTING] = BIT(SDP_ST_CLOSED),
	[SDP_ST_ESTABLISHED] = BIT(SDP_ST_CONNECTING) | BIT(SDP_ST_CLOSED),
	[SDP_ST_FIN_WAIT] = BIT(SDP_ST_ESTABLISHED),
	[SDP_ST_CLOSE_WAIT] = BIT(SDP_ST_ESTABLISHED),
	[SDP_ST_LAST_ACK] = BIT(SDP_ST_CLOSE_WAIT),
	/* From CLOSE_WAIT: the peer sent DisConn, then its QP went away
	 * (rx.c): nothing more can come or go. */
	[SDP_ST_TIME_WAIT] = BIT(SDP_ST_FIN_WAIT) | BIT(SDP_ST_LAST_ACK) |
			     BIT(SDP_ST_CLOSE_WAIT),
	[SDP_ST_RESET] = ~0u,
};

int sdp_conn_set_state_locked(struct sdp_conn *c, enum sdp_state to)
{
	if (!(allowed_from[to] & BIT(c->state))) {
		sdp_log(SDP_LOG_ERR, "conn %u: refused transition %s -> %s",
			c->id, sdp_state_name(c->state), sdp_state_name(to));
		return -EPROTO;
	}
	sdp_log(SDP_LOG_DEBUG, "conn %u: %s -> %s", c->id,
		sdp_state_name(c->state), sdp_state_name(to));
	c->state = to;
	return 0;
}

const struct sdp_transport_ops *sdp_tp_default(void)
{
	return sdp_tp_select_default();	/* shm, verbs, or both (multi.h) */
}

/* Connections of this process that hold descriptors (socket/fdlimit.c). */
static atomic_int conns_live;

/* The soft descriptor limit, read at most once a second (a system call
 * per connect and accept otherwise) and again after the program sets it
 * (sdp_conn_fd_limit_changed); another process's prlimit() on us shows
 * within the second.  The budget is a share of it, not an exact count. */
static _Atomic uint64_t nofile_cur, nofile_until_ns;

void sdp_conn_fd_limit_changed(void)
{
	atomic_store(&nofile_until_ns, 0);
}

static rlim_t nofile_soft(void)
{
	uint64_t now = sdp_now_ns();
	struct rlimit rl;

	if (now < atomic_load_explicit(&nofile_until_ns, memory_order_acquire))
		return (rlim_t)atomic_load_explicit(&nofile_cur,
						    memory_order_relaxed);
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return RLIM_INFINITY;
	/* Two threads may both store: the same value. */
	atomic_store_explicit(&nofile_cur, rl.rlim_cur, memory_order_relaxed);
	atomic_store_explicit(&nofile_until_ns, now + 1000000000u,
			      memory_order_release);
	return rl.rlim_cur;
}

int sdp_conn_fd_budget_ok(void)
{
	rlim_t soft = nofile_soft();

	if (soft == RLIM_INFINITY)
		return 1;
	return (rlim_t)(atomic_load(&conns_live) + 1) * SDP_CONN_FDS <=
	       soft / 2;
}

/*
 * Every connection of this process, for fork(): a connection's lock may be
 * held by another thread at the instant of fork() (the progress thread
 * servicing it, a thread closing it), and the child would wait for it for
 * ever on its first use.  The child has one thread, so no lock of its
 * copies is really held: each is re-initialised there.
 */
static struct sdp_conn *all_conns;
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;

static void all_prepare(void)
{
	pthread_mutex_lock(&all_lock);
}

static void all_parent(void)
{
	pthread_mutex_unlock(&all_lock);
}

static void all_child(void)
{
	for (struct sdp_conn *c = all_conns; c; c = c->all_next) {
		pthread_mutex_init(&c->lock, NULL);
		sdp_relay_atfork_child(c);
	}
	pthread_mutex_init(&all_lock, NULL);
}

static pthread_once_t all_once = PTHREAD_ONCE_INIT;

static void all_init(void)
{
	sdp_atfork_add(SDP_ATFORK_INNER, all_prepare, all_parent, all_child);
}

static void all_add(struct sdp_conn *c)
{
	pthread_once(&all_once, all_init);
	pthread_mutex_lock(&all_lock);
	c->all_next = all_conns;
	if (all_conns)
		all_conns->all_prev = c;
	all_conns = c;
	pthread_mutex_unlock(&all_lock);
}

static void all_del(struct sdp_conn *c)
{
	pthread_mutex_lock(&all_lock);
	if (c->all_prev)
		c->all_prev->all_next = c->all_next;
	else if (all_conns == c)
		all_conns = c->all_next;
	if (c->all_next)
		c->all_next->all_prev = c->all_prev;
	pthread_mutex_unlock(&all_lock);
}

int sdp_conn_alloc(struct sdp_conn **out)
{
	struct sdp_conn *c;

	sdp_config_init();
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	atomic_fetch_add(&conns_live, 1);
	pthread_mutex_init(&c->lock, NULL);
	atomic_init(&c->refs, 1);
	c->id = atomic_fetch_add(&conn_ids, 1) + 1;
	c->state = SDP_ST_CLOSED;
	c->nbufs = sdp_cfg.recv_bufs;
	c->buf_size = sdp_cfg.recv_buf_size;
	c->sndbuf = sdp_cfg.sndbuf;
	c->rcvbuf = sdp_cfg.rcvbuf;
	c->tx_next_mseq = 1;
	/* Both halves start Combined, as gen1 (annex 5.1). */
	c->zc_mode_tx = SDP_MODE_COMBINED;
	c->zc_mode_rx = SDP_MODE_COMBINED;
	c->zc_peer_max_adverts = 1;	/* until the Hello says more */
	c->wake_word = c->wake_word_of = -1;
	c->ev_fd = -1;
	atomic_init(&c->armed_word, -1);
	c->owner_slot = sdp_owner_alloc();
	sdp_handover_init();
	all_add(c);
	sdp_stat_conn_attach(c);	/* sdpstat record */
	*out = c;
	return 0;
}

int sdp_conn_claim(struct sdp_conn *c)
{
	return sdp_handover_claim(c);
}

void sdp_conn_call_begin(struct sdp_conn *c)
{
	atomic_fetch_add(&c->app_calls, 1);
}

void sdp_conn_call_end(struct sdp_conn *c)
{
	if (atomic_fetch_sub(&c->app_calls, 1) != 1)
		return;
	if (!sdp_owner_asked(c->owner_slot)) {
		sdp_owner_set_busy(c->owner_slot, 0);
		return;
	}
	/* Another process waits for the connection and our calls kept it
	 * from getting it: hand it over now; the progress thread lets go of
	 * it when it next looks. */
	pthread_mutex_lock(&c->lock);
	if (sdp_handover_serve_locked(c) && c->registered)
		sdp_progress_arm_timer(c);
	pthread_mutex_unlock(&c->lock);
}

void sdp_conn_detach(struct sdp_conn *c, struct sdp_ready *r)
{
	struct sdp_ready *kept = malloc(sizeof(*kept));

	pthread_mutex_lock(&c->lock);
	sdp_appwake_disarm_locked(c);	/* no application of ours to wake */
	/* What the application wrote goes now, as at any close: nothing of
	 * ours will call again to push a Nagle-held rest. */
	if (sdp_owner_is_me(c->owner_slot) && c->qp)
		sdp_tx_flush_locked(c, 1);
	if (kept && sdp_owner_is_me(c->owner_slot) && c->qp) {
		/* Our copy of the application's end is gone, and its number
		 * may be reused: only the library end is ours to steer.  A
		 * QP that cannot move (verbs) stays here too: a child that
		 * execs can still have it relayed (relay.h), and one that
		 * uses it gets EBADFD, as while we held it. */
		*kept = *r;
		kept->app_fd = -1;
		/* Nothing here watches it in user space any more. */
		kept->user = (struct sdp_ready_user){ .off = 1 };
		r->lib_fd = -1;
		c->ready_kept = kept;
		c->ready = kept;
		c->held_elsewhere = 1;
		sdp_progress_watch_holders(c);
		kept = NULL;
	} else {
		sdp_handover_leave_locked(c);
		c->ready = NULL;
		c->detached = 1;
	}
	if (c->registered)
		sdp_progress_arm_timer(c);
	pthread_mutex_unlock(&c->lock);
	free(kept);
	sdp_conn_put(c);
}

void sdp_conn_get(struct sdp_conn *c)
{
	atomic_fetch_add(&c->refs, 1);
}

static void conn_free(struct sdp_conn *c)
{
	all_del(c);
	sdp_stat_conn_detach(c);	/* sdpstat record */
	if (c->qp && c->detached)
		/* Providers without fork sharing destroy instead. */
		(SDP_TP(c->qp)->detach_qp ? SDP_TP(c->qp)->detach_qp :
		 SDP_TP(c->qp)->destroy_qp)(c->qp);
	else if (c->qp)
		SDP_TP(c->qp)->destroy_qp(c->qp);
	if (!c->detached)
		sdp_owner_free(c->owner_slot);
	sdp_handover_free(c);
	sdp_relay_free(c);
	if (c->ready_kept) {
		sdp_ready_release(c->ready_kept);
		free(c->ready_kept);
	}
	free(c->rxq);
	free(c->txq);
	pthread_mutex_destroy(&c->lock);
	free(c);
	atomic_fetch_sub(&conns_live, 1);
}

void sdp_conn_put(struct sdp_conn *c)
{
	if (atomic_fetch_sub(&c->refs, 1) == 1)
		conn_free(c);
}

/* Create the QP, its receive ring bookkeeping, and post every receive. */
static int conn_setup_qp(struct sdp_conn *c, struct sdp_qp *qp)
{
	uint32_t i;
	int r;

	c->qp = qp;
	SDP_TP(qp)->query_caps(qp, &c->caps);
	c->rmr = SDP_TP(qp)->recv_region(qp);
	if (!c->rmr || c->rmr->length < (size_t)c->nbufs * c->buf_size)
		return -ENOMEM;
	c->rxq = calloc(c->nbufs, sizeof(*c->rxq));
	if (!c->rxq)
		return -ENOMEM;
	for (i = 0; i < c->nbufs; i++) {
		r = sdp_rx_post_locked(c, i);
		if (r < 0)
			return r;
	}
	c->adv_bufs = (uint16_t)c->posted;
	return 0;
}

/* The provider's preferred receive buffers, unless the environment set
 * them (before the QP exists: they size its receive region). */
static void conn_bufs_for(struct sdp_conn *c,
			  const struct sdp_transport_ops *ops)
{
	if (ops->recv_bufs_pref && !sdp_cfg.recv_bufs_set)
		c->nbufs = ops->recv_bufs_pref;
	if (ops->recv_buf_size_pref && !sdp_cfg.recv_buf_size_set)
		c->buf_size = ops->recv_buf_size_pref;
}

static void qp_attr(struct sdp_conn *c, struct sdp_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->events = &sdp_progress_qp_events;
	a->events_ctx = c;
	a->max_send_wr = 64;
	a->max_recv_wr = c->nbufs;
	a->recv_region_size = c->nbufs * c->buf_size;
}

static void addr_to_hello_ip(const struct sockaddr *sa, uint8_t ip[16],
			     uint16_t *port)
{
	memset(ip, 0, 16);
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)sa;

		memcpy(ip + 12, &sin->sin_addr, 4);
		if (port)
			*port = ntohs(sin->sin_port);
	} else {
		const struct sockaddr_in6 *sin6 = (const void *)sa;

		memcpy(ip, &sin6->sin6_addr, 16);
		if (port)
			*port = ntohs(sin6->sin6_port);
	}
}

int sdp_conn_connect(struct sdp_conn *c, struct sdp_listener *local,
		     const struct sockaddr *dst, socklen_t len)
{
	const struct sdp_transport_ops *ops = sdp_tp_default();
	uint8_t priv[SDP_HELLO_SIZE];
	struct sdp_hello h;
	struct sdp_qp_attr attr;
	struct sdp_qp *qp = NULL;
	int r;

	/* Per connection: shm for this host, verbs over RDMA. */
	ops = sdp_tp_for_dest(dst, len);
	local = sdp_tp_local_for(ops, local);
	pthread_mutex_lock(&c->lock);
	conn_bufs_for(c, ops);
	qp_attr(c, &attr);
	attr.dst = dst;
	attr.dst_len = len;
	r = ops->create_qp(&attr, &qp);
	if (r < 0)
		goto out_unlock;
	r = conn_setup_qp(c, qp);
	if (r < 0)
		goto out_unlock;

	memset(&h, 0, sizeof(h));
	h.bsdh.mid = SDP_MID_HELLO;
	h.bsdh.bufs = (uint16_t)c->posted;
	h.bsdh.len = SDP_HELLO_SIZE;
	h.major = SDP_VERSION_MAJOR;
	h.minor = SDP_VERSION_MINOR;
	h.ip_version = dst->sa_family == AF_INET ? 4 : 6;
	h.max_adverts = SDP_ZC_MAX_ADVERTS;
	h.des_rem_rcv_sz = c->buf_size;
	h.local_rcv_sz = c->buf_size;
	addr_to_hello_ip(dst, h.dst_ip, NULL);
	if (local) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		if (ops->bound_addr(local, &ss, &sl) == 0 &&
		    ss.ss_family == dst->sa_family)
			addr_to_hello_ip((struct sockaddr *)&ss, h.src_ip,
					 &h.local_port);
	}
	r = sdp_wire_encode_hello(&h, priv, sizeof(priv));
	if (r < 0)
		goto out_unlock;
	r = sdp_conn_set_state_locked(c, SDP_ST_CONNECTING);
	if (r < 0)
		goto out_unlock;
	r = SDP_TP(qp)->connect(qp, local, dst, len, priv, SDP_HELLO_SIZE);
	if (r < 0) {
		sdp_conn_set_state_locked(c, SDP_ST_CLOSED);
		goto out_unlock;
	}
	/* A listener that never answers (its process stopped, or stuck)
	 * must not hold the client for ever: the progress thread resets the
	 * attempt at the deadline, and a "both" socket falls back. */
	c->connect_deadline_ns = sdp_now_ns() +
		(uint64_t)sdp_cfg.connect_timeout_ms * 1000000ull;
	if (c->connect_waits && SDP_TP(qp)->answer_fd &&
	    SDP_TP(qp)->answer_fd(qp) >= 0) {
		c->unlisted = 1;	/* sdp_conn_wait_connected lists it */
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	pthread_mutex_unlock(&c->lock);
	r = sdp_progress_add_conn(c);
	if (r == 0)
		sdp_progress_arm_timer_at(c, c->connect_deadline_ns);
	return r;

out_unlock:
	if (local && r < 0 && !c->qp)
		ops->close_listener(local);
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* Active side: the CM answered.  Returns 0, or -errno if refused/failed. */
static int conn_handle_cm_event_locked(struct sdp_conn *c)
{
	struct sdp_cm_event ev;
	struct sdp_hello_ack ack;
	int r;

	memset(&ev, 0, sizeof(ev));	/* flags: 0 unless the provider sets */
	r = SDP_TP(c->qp)->get_event(c->qp, &ev);
	if (r == -EAGAIN)
		return 0;
	if (r < 0)
		return r;
	switch (ev.type) {
	case SDP_CM_ESTABLISHED:
		r = sdp_wire_decode_hello_ack(ev.priv, ev.priv_len, &ack);
		if (r < 0) {
			sdp_log(SDP_LOG_ERR, "conn %u: bad HelloAck (%d)",
				c->id, r);
			return -ECONNREFUSED;
		}
		c->peer_rcv_sz = ack.act_rcv_sz;
		c->tx_credits = ack.bsdh.bufs;
		c->zc_peer_max_adverts = ack.max_adverts;
		c->peer_takes_tcp = !!(ev.flags & SDP_CM_F_TCP_TOO);
		c->active_open_done = 1;
		SDP_TP(c->qp)->addresses(c->qp, &c->addr);
		return sdp_conn_set_state_locked(c, SDP_ST_ESTABLISHED);
	case SDP_CM_REJECTED:
		c->reason = ev.flags & SDP_CM_F_LISTENER_SAID_NO ?
			    SDP_REASON_LISTENER_REFUSED : SDP_REASON_REFUSED;
		return ev.err ? ev.err : -ECONNREFUSED;
	case SDP_CM_UNREACHABLE:
		return ev.err ? ev.err : -ENETUNREACH;
	case SDP_CM_DISCONNECTED:
		return -ECONNRESET;
	default:
		return 0;
	}
}

int sdp_conn_accept_req(struct sdp_conn_req *req, const struct sdp_hello *hello,
			uint32_t cm_flags, struct sdp_conn **out)
{
	const struct sdp_transport_ops *ops = sdp_tp_default();
	uint8_t priv[SDP_HELLO_ACK_SIZE];
	struct sdp_hello_ack ack;
	struct sdp_qp_attr attr;
	struct sdp_qp *qp = NULL;
	struct sdp_conn *c;
	int r;

	r = sdp_conn_alloc(&c);
	if (r < 0) {
		ops->reject(req);
		return r;
	}
	conn_bufs_for(c, sdp_tp_req_provider(ops, req));
	qp_attr(c, &attr);
	attr.cm_flags = cm_flags;
	r = ops->create_qp_from_req(req, &attr, &qp);
	if (r < 0) {
		sdp_conn_put(c);
		return r;
	}
	pthread_mutex_lock(&c->lock);
	r = conn_setup_qp(c, qp);
	if (r < 0)
		goto err;
	c->peer_rcv_sz = hello->local_rcv_sz;
	c->tx_credits = hello->bsdh.bufs;
	c->zc_peer_max_adverts = hello->max_adverts;
	memset(&ack, 0, sizeof(ack));
	ack.bsdh.mid = SDP_MID_HELLO_ACK;
	ack.bsdh.bufs = (uint16_t)c->posted;
	ack.bsdh.len = SDP_HELLO_ACK_SIZE;
	ack.major = SDP_VERSION_MAJOR;
	ack.minor = SDP_VERSION_MINOR;
	ack.max_adverts = SDP_ZC_MAX_ADVERTS;
	ack.act_rcv_sz = c->buf_size;
	r = sdp_wire_encode_hello_ack(&ack, priv, sizeof(priv));
	if (r < 0)
		goto err;
	sdp_appwake_arm_queued_locked(c);	/* before the peer can send */
	r = SDP_TP(qp)->accept(qp, priv, SDP_HELLO_ACK_SIZE);
	if (r < 0)
		goto err;
	SDP_TP(qp)->addresses(qp, &c->addr);
	sdp_conn_set_state_locked(c, SDP_ST_ESTABLISHED);
	pthread_mutex_unlock(&c->lock);
	*out = c;
	return 0;
err:
	pthread_mutex_unlock(&c->lock);
	sdp_conn_put(c);	/* destroys the QP, which refuses the peer */
	return r;
}

/* Tear the QP down and make every later call fail with `err`. */
void sdp_conn_reset_locked(struct sdp_conn *c, int err, enum sdp_reason why)
{
	if (c->state == SDP_ST_RESET)
		return;
	sdp_log(SDP_LOG_INFO, "conn %u: reset in %s: %s (%s)", c->id,
		sdp_state_name(c->state), strerror(-err), sdp_reason_str(why));
	sdp_appwake_stop_locked(c);
	c->appwake_off = 1;
	if (sdp_reason_is_local_abort(why) && c->qp && !c->abort_sent &&
	    c->tx_credits >= 1 && c->state != SDP_ST_CONNECTING) {
		/* Tell the peer explicitly; the QP teardown follows anyway. */
		c->abort_sent = 1;
		sdp_tx_post_ctrl_locked(c, SDP_MID_ABORT_CONN);
	}
	if (c->qp)
		SDP_TP(c->qp)->disconnect(c->qp);
	sdp_conn_set_state_locked(c, SDP_ST_RESET);
	c->err = err;
	c->so_error = err;
	c->reason = why;
	c->txq_len = 0;
	if (c->qp)
		SDP_TP(c->qp)->kick(c->qp);
}

static int conn_drain_cq_locked(struct sdp_conn *c)
{
	struct sdp_wc wc[16];
	int n, i, r;

	for (;;) {
		n = sdp_poll_cq(c->qp, wc, 16);
		if (n <= 0)
			return n;
		for (i = 0; i < n; i++) {
			/* A ZCopy RDMA's completion belongs to the thread
			 * that posted it (it may sleep while we poll). */
			if (sdp_zcopy_take_wc_locked(c, &wc[i]))
				continue;
			if (c->state == SDP_ST_RESET)
				continue;	/* drain what is left */
			if (wc[i].opcode == SDP_WC_RECV) {
				r = sdp_rx_handle_wc_locked(c, &wc[i]);
				if (r < 0)
					return r;
				continue;
			}
			if (wc[i].status != SDP_WC_SUCCESS) {
				sdp_log(SDP_LOG_INFO, "conn %u: send failed: %s",
					c->id, sdp_wc_status_str(wc[i].status));
				sdp_conn_reset_locked(c, -ECONNRESET,
						      SDP_REASON_TRANSPORT);
			}
		}
		if (n < 16)
			return 0;
	}
}

/* Take in what the CQ holds; a transport failure resets the connection. */
static void conn_take_in_locked(struct sdp_conn *c)
{
	if (c->state != SDP_ST_RESET && conn_drain_cq_locked(c) < 0 &&
	    c->state != SDP_ST_RESET)
		sdp_conn_reset_locked(c, -ECONNRESET, SDP_REASON_TRANSPORT);
}

int sdp_conn_progress_locked(struct sdp_conn *c)
{
	struct sdp_wc wc[16];
	int r;

	/* Only the process that drives the connection touches its rings:
	 * any other copy is stale (handover.h). */
	if (!sdp_owner_is_me(c->owner_slot))
		return c->state == SDP_ST_RESET ? c->err : 0;
	if (c->qp && (c->state == SDP_ST_RESET || c->state == SDP_ST_TIME_WAIT)) {
		/* Nothing more can happen: discard the flushes, or req_notify
		 * would keep reporting them as pending work. */
		while (sdp_poll_cq(c->qp, wc, 16) > 0)
			;
		goto out;
	}
	if (!c->qp || c->state == SDP_ST_CLOSED)
		goto out;
	if (c->state == SDP_ST_CONNECTING) {
		r = conn_handle_cm_event_locked(c);
		if (r < 0) {
			c->so_error = r;
			c->err = r;
			sdp_conn_set_state_locked(c, SDP_ST_RESET);
			if (c->reason == SDP_REASON_NONE)
				c->reason = SDP_REASON_TRANSPORT;
			goto out;
		}
		if (c->state == SDP_ST_CONNECTING)
			goto out;
	}
	conn_take_in_locked(c);
	if (c->state == SDP_ST_RESET)
		goto out;
	sdp_tx_flush_locked(c, 0);
	sdp_rx_maybe_credit_update_locked(c);
out:
	sdp_conn_update_ready_locked(c);
	return c->state == SDP_ST_RESET ? c->err : 0;
}

int sdp_conn_poll_locked(struct sdp_conn *c)
{
	int r;

	c->ready_defer = 1;
	r = sdp_conn_progress_locked(c);
	c->ready_defer = 0;
	return r;
}

unsigned sdp_conn_ready_mask_locked(const struct sdp_conn *c)
{
	unsigned m = 0;

	switch (c->state) {
	case SDP_ST_CONNECTING:
		return 0;
	case SDP_ST_RESET:
		/* A refused connect reports like TCP: POLLOUT|POLLERR. */
		return SDP_READY_ERR;
	case SDP_ST_CLOSED:
		return SDP_READY_OUT;
	default:
		break;
	}
	if (sdp_conn_rx_avail_locked(c) > 0 || c->rd_shut)
		m |= SDP_READY_IN;
	if (c->disconn_rcvd)
		m |= SDP_READY_IN | SDP_READY_EOF;
	if (c->oob_have && !c->oob_inline)
		m |= SDP_READY_PRI;
	if (c->wr_shut || c->txq_len <= c->sndbuf / 2)
		m |= SDP_READY_OUT;
	return m;
}

__thread int sdp_in_progress_thread;

/* What the kernel is told: all of `m`, except plain "readable" on a
 * user-space-readiness connection that no application thread waits for
 * in the kernel (socket/epfast.c reports it from user space instead).
 * EOF and errors always go to the kernel: they are rare and permanent. */
static unsigned ready_kernel_mask(const struct sdp_conn *c, unsigned m)
{
	const struct sdp_ready_user *u = &c->ready->user;

	if ((m & (SDP_READY_EOF | SDP_READY_ERR)) || !u->on)
		return m;
	/* An application thread sleeps in the kernel: mirror, except data
	 * whose edge an EPOLLET registration (the only observer) has had:
	 * a byte now would be a second edge for the same arrival. */
	if (sdp_appwake_set_sleeps_locked(c) &&
	    !(u->et && c->rx_end == u->seen_end))
		return m;
	return m & ~(unsigned)(SDP_READY_IN | SDP_READY_PULSE);
}

void sdp_conn_update_ready_locked(struct sdp_conn *c)
{
	unsigned m;
	int round, unannounced = 0;

	/* Whatever changed, epoll_wait must look again (socket/epfast.c),
	 * and a thread that adds itself to the set's wake word and then
	 * finds user.idle still set is seen below as asleep (wakeword.h):
	 * store, fence, load, against its add, fence, load.  Found clear
	 * (under the lock that conn_check() sets it under), it stays clear
	 * until the next look, so no sleeper can pass it: no fence, which
	 * costs the send path the drain of its copy's stores. */
	if (c->ready &&
	    atomic_load_explicit(&c->ready->user.idle, memory_order_relaxed)) {
		atomic_store_explicit(&c->ready->user.idle, 0,
				      memory_order_release);
		if (c->wake_word >= 0)
			atomic_thread_fence(memory_order_seq_cst);
	}

	/* Another process drives it (handover.h): our copy is stale, and
	 * the rings and the arm word are that process's to touch. */
	if (!c->ready || !sdp_owner_is_me(c->owner_slot))
		return;
	for (round = 0;; round++) {
		/* A byte the peer wrote into our readiness fd announces a
		 * message, and a message that slipped in before the arm was
		 * visible was announced to nobody: take either in before
		 * deciding what is readable, or the byte would be drained
		 * with the message unseen. */
		int announced = sdp_appwake_disarm_locked(c);

		if (announced || unannounced)
			conn_take_in_locked(c);
		m = sdp_conn_ready_mask_locked(c);
		/* New data while the application is away (possibly asleep in
		 * an edge-triggered epoll_wait): make a fresh edge, as TCP
		 * does for each arriving segment.  Arrivals seen by the
		 * application's own call need no edge: it is awake. */
		if (c->rx_pulse && sdp_in_progress_thread && (m & SDP_READY_IN))
			m |= SDP_READY_PULSE;
		c->rx_pulse = 0;
		/* Mid-call, the transitions would be undone by the call's
		 * own end (a token written, then drained): skip them.  The
		 * appwake arm is still taken back and re-decided, so a byte
		 * the peer wrote is accounted. */
		if (!c->ready_defer)
			sdp_ready_set(c->ready, ready_kernel_mask(c, m));
		unannounced = sdp_appwake_arm_locked(c, m);
		if (!unannounced)
			break;
		/* Each round consumes messages, so this ends; past a few,
		 * let the application come and look. */
		if (round == 8) {
			sdp_appwake_disarm_locked(c);
			if (!c->ready_defer)
				sdp_ready_set(c->ready, ready_kernel_mask(c,
						m | SDP_READY_IN));
			break;
		}
	}
}

int sdp_conn_take_err_locked(struct sdp_conn *c)
{
	int e = c->err;

	if (e == -ECONNRESET || e == -ETIMEDOUT)
		c->err = -EPIPE;
	return e;
}

/* Hand an unlisted active open to the progress thread once its wait ends:
 * an attempt still under way gets its deadline there.  One that failed
 * has nothing left to progress: it stays off the list, and its close frees
 * it.  0, or -errno if the progress thread cannot take it (the connection
 * is reset then). */
static int conn_list(struct sdp_conn *c)
{
	int r;

	pthread_mutex_lock(&c->lock);
	if (!c->unlisted || c->state == SDP_ST_RESET) {
		c->unlisted = 0;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	c->unlisted = 0;
	pthread_mutex_unlock(&c->lock);
	r = sdp_progress_add_conn(c);
	pthread_mutex_lock(&c->lock);
	if (r < 0 && c->state != SDP_ST_RESET)
		sdp_conn_reset_locked(c, r, SDP_REASON_TRANSPORT);
	else if (r == 0 && c->state == SDP_ST_CONNECTING)
		sdp_progress_arm_timer_at(c, c->connect_deadline_ns);
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* A blocking connect's sleep on the answer, in slices (below). */
#define SDP_ANSWER_SLICE_MS 100

/* Sleep until the answer may be there, at most `ms` (-1: no bound): 0, or
 * -EINTR for a signal or a cancel.  No thread but this one watches the
 * answer's descriptor.  The sleep is sliced so that a pthread_cancel,
 * which cannot wake a poll(), acts within a slice. */
static int conn_wait_answer(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	int slice = ms < 0 || ms > SDP_ANSWER_SLICE_MS ? SDP_ANSWER_SLICE_MS :
		    ms;

	if (sdp_cancel_actionable())
		return -EINTR;
	if (sdp_real.poll(&p, 1, slice) < 0 && errno == EINTR)
		return -EINTR;
	return sdp_cancel_actionable() ? -EINTR : 0;
}

int sdp_conn_wait_connected(struct sdp_conn *c, int timeout_ms)
{
	uint64_t deadline = timeout_ms >= 0 ?
		sdp_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	uint32_t seq;
	int r, tmo, listed;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		uint64_t now, until;
		int afd, unlisted;

		seq = SDP_TP(c->qp)->wait_seq(c->qp);
		sdp_conn_progress_locked(c);
		if (c->state != SDP_ST_CONNECTING)
			break;
		now = sdp_now_ns();
		/* Unlisted, the attempt's own deadline is ours to keep. */
		if (c->unlisted && now >= c->connect_deadline_ns) {
			sdp_conn_reset_locked(c, -ETIMEDOUT,
					      SDP_REASON_CONNECT_TIMEOUT);
			break;
		}
		if (deadline && now >= deadline) {
			pthread_mutex_unlock(&c->lock);
			conn_list(c);
			return -ETIMEDOUT;
		}
		until = deadline;
		if (c->unlisted && (!until || c->connect_deadline_ns < until))
			until = c->connect_deadline_ns;
		tmo = until ? (int)((until - now) / 1000000ull) + 1 : -1;
		unlisted = c->unlisted;
		afd = unlisted ? SDP_TP(c->qp)->answer_fd(c->qp) : -1;
		pthread_mutex_unlock(&c->lock);
		if (unlisted && afd < 0) {
			/* Nothing to sleep on: the progress thread's wait. */
			conn_list(c);
			pthread_mutex_lock(&c->lock);
			continue;
		}
		r = afd >= 0 ? conn_wait_answer(afd, tmo) :
			       SDP_TP(c->qp)->wait(c->qp, seq, tmo);
		pthread_mutex_lock(&c->lock);
		if (r == -EINTR) {
			pthread_mutex_unlock(&c->lock);
			conn_list(c);
			return -EINTR;
		}
	}
	r = c->state == SDP_ST_RESET ? c->err : 0;
	if (r)
		c->so_error = 0;	/* reported by connect() itself */
	pthread_mutex_unlock(&c->lock);
	listed = conn_list(c);
	return listed < 0 ? listed : r;
}

int sdp_conn_shutdown(struct sdp_conn *c, int how)
{
	int r = sdp_conn_claim(c);

	if (r < 0)
		return r;

	pthread_mutex_lock(&c->lock);
	if (c->state == SDP_ST_CLOSED || c->state == SDP_ST_CONNECTING) {
		r = -ENOTCONN;
		goto out;
	}
	if (how == SHUT_RD || how == SHUT_RDWR)
		c->rd_shut = 1;
	if ((how == SHUT_WR || how == SHUT_RDWR) && !c->wr_shut &&
	    c->state != SDP_ST_RESET) {
		c->wr_shut = 1;
		sdp_tx_flush_locked(c, 1);
	}
	sdp_conn_update_ready_locked(c);
	if (c->qp)
		SDP_TP(c->qp)->kick(c->qp);
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

int sdp_conn_can_still_send_locked(const struct sdp_conn *c)
{
	switch (c->state) {
	case SDP_ST_ESTABLISHED:
	case SDP_ST_CLOSE_WAIT:
	case SDP_ST_FIN_WAIT:
		return !c->err;
	default:
		return 0;	/* peer gone, reset, or both DisConns done */
	}
}

/*
 * A TCP close() returns at once and the kernel still delivers what was
 * queued, even if the process then calls _exit() or is killed.  Our queue
 * lives in the process, so close() gives it a bounded moment
 * (SDP_CLOSE_FLUSH_MS) to reach the peer: posting is delivery on shm, and
 * a reading peer returns credits quickly.  A peer that does not read gets
 * the rest from the progress thread, as long as the process lives.
 */
static void close_flush_locked(struct sdp_conn *c)
{
	uint64_t deadline = sdp_now_ns() +
		(uint64_t)sdp_cfg.close_flush_ms * 1000000ull;
	uint32_t seq;

	while (sdp_conn_can_still_send_locked(c) &&
	       (c->txq_len || !c->disconn_sent)) {
		seq = SDP_TP(c->qp)->wait_seq(c->qp);
		sdp_conn_progress_locked(c);
		sdp_tx_flush_locked(c, 1);
		if (!sdp_conn_can_still_send_locked(c) ||
		    (!c->txq_len && c->disconn_sent))
			break;
		pthread_mutex_unlock(&c->lock);
		if (sdp_conn_wait(c, seq, deadline) < 0) {	/* time, signal */
			pthread_mutex_lock(&c->lock);
			break;
		}
		pthread_mutex_lock(&c->lock);
	}
}

/*
 * A closed connection that has sent everything (its DisConn or reset
 * included) only waits: for the peer's DisConn and hang-up, or for its
 * QP to be let go.  Waking the progress thread for it at close cost a
 * wake-up and a lock hand-off per connection-per-request, for nothing the
 * peer waits on; the thread finishes it at its next wake-up (the peer's
 * hang-up rings it) or by this many ms.  An orphan with data still queued
 * is looked at now: credits that free it must reach an armed QP.
 */
#define SDP_ORPHAN_LOOK_MS 10

int sdp_conn_over_locked(const struct sdp_conn *c)
{
	return c->state == SDP_ST_RESET || c->state == SDP_ST_CLOSED ||
	       c->state == SDP_ST_TIME_WAIT;
}

static int orphan_waits_only_locked(const struct sdp_conn *c)
{
	return sdp_conn_over_locked(c) ||
	       (c->disconn_sent && !c->txq_len && !c->zc_tx.n);
}

void sdp_conn_close(struct sdp_conn *c, int abort)
{
	/* The last descriptor in the family closes here: the connection is
	 * closed from its live state, wherever that is now. */
	if (sdp_conn_claim(c) < 0) {
		sdp_conn_put(c);
		return;
	}
	pthread_mutex_lock(&c->lock);
	sdp_conn_close_locked(c, abort);	/* arms the orphan's timer */
	pthread_mutex_unlock(&c->lock);
	sdp_conn_put(c);
}

void sdp_conn_close_locked(struct sdp_conn *c, int abort)
{
	/* From now on the progress thread finishes the connection: the
	 * peer's messages must ring it, not the closed descriptor. */
	sdp_appwake_disarm_locked(c);
	c->appwake_off = 1;
	c->ready = NULL;
	c->orphan = 1;
	if (c->qp && c->state != SDP_ST_RESET && c->state != SDP_ST_CLOSED) {
		sdp_conn_progress_locked(c);
		if (abort || c->rx_bytes > 0 || c->state == SDP_ST_CONNECTING) {
			/* Like TCP: unread data or SO_LINGER 0 means RST.  A
			 * caller that knows better named the cause already. */
			enum sdp_reason why = c->close_reason;

			if (why == SDP_REASON_NONE)
				why = c->state == SDP_ST_CONNECTING ?
				      SDP_REASON_CLOSED_CONNECTING :
				      abort ? SDP_REASON_LOCAL_ABORT :
				      SDP_REASON_CLOSED_UNREAD;
			sdp_conn_reset_locked(c, -ECONNRESET, why);
		} else if (!c->wr_shut) {
			c->wr_shut = 1;
			sdp_tx_flush_locked(c, 1);
		}
		close_flush_locked(c);
		c->close_deadline_ns = sdp_now_ns() +
			(uint64_t)sdp_cfg.close_timeout_ms * 1000000ull;
	}
	if (c->qp)
		SDP_TP(c->qp)->kick(c->qp);
	/* The progress thread must look at the orphan even if no completion
	 * ever comes (already TIME_WAIT/RESET, or a silent peer): the timer
	 * list makes it do so, and finish or time it out. */
	if (!c->registered)
		return;
	if (orphan_waits_only_locked(c))
		sdp_progress_arm_orphan(c, sdp_now_ns() +
				       SDP_ORPHAN_LOOK_MS * 1000000ull);
	else
		sdp_progress_arm_timer(c);
}
