/* SPDX-License-Identifier: MIT */
/*
 * handover.c — a connection changes process within a fork family (see
 * handover.h).
 *
 * The mailbox holds the connection as its owner last left it: the engine's
 * state (struct sdp_conn, its receive queue and its unsent bytes), the
 * readiness mirror (what the kernel shows on the application's socketpair,
 * which every process of the family shares), and the transport's own
 * bookkeeping (export_qp).  It is created in the fork() prepare handler,
 * before the child exists, so that every process that holds the
 * connection maps it; MAP_NORESERVE, so that only what a hand-over writes
 * costs memory.
 *
 * A taker loads the state over its own copy but keeps what is its own:
 * its lock, references, progress registration, the socket layer's epoll
 * bookkeeping and its buffers' memory.  A connection is handed over only
 * while nothing of the owner's is in flight on it: no thread of the owner
 * inside a call on it, no ZCopy buffer of the owner advertised.
 */
#include "engine/handover.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/appwake.h"
#include "base/atfork.h"
#include "base/config.h"
#include "engine/conn.h"
#include "base/owner.h"
#include "engine/relay.h"
#include "engine/progress.h"

struct sdp_mbox {
	_Atomic uint32_t gen;	/* owner generation the state is from */
	uint32_t has_ready;
	uint64_t txq_len;	/* unsent bytes, from the ring's head */
	uint64_t qp_len;	/* transport state bytes */
	struct sdp_conn conn;
	struct sdp_ready ready;
	/* then: rxq[conn.nbufs], txq bytes, transport state */
};

#define MBOX_SLACK (64u * 1024)

static size_t rxq_bytes(const struct sdp_conn *c)
{
	return (size_t)c->nbufs * sizeof(*c->rxq);
}

/* Where the transport's state starts: after the receive queue and the
 * unsent bytes, aligned for any of its fields. */
static size_t qp_state_off(const struct sdp_conn *c, size_t txq_len)
{
	size_t off = sizeof(struct sdp_mbox) + rxq_bytes(c) + txq_len;

	return (off + 63) & ~(size_t)63;
}

static size_t mbox_size_for(struct sdp_conn *c)
{
	size_t txq = c->txq_cap > c->sndbuf ? c->txq_cap : c->sndbuf;
	ssize_t qp = SDP_TP(c->qp)->export_qp(c->qp, NULL, 0);
	size_t n = sizeof(struct sdp_mbox) + rxq_bytes(c) + txq +
		   (qp > 0 ? (size_t)qp : 0) + MBOX_SLACK;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) / pg * pg;
}

/* Before fork(): every connection that could be handed over gets its
 * mailbox now, while it is still mapped in one process only. */
static void give_mailbox(struct sdp_conn *c, void *arg)
{
	bool paired;
	void *p;
	size_t n;

	pthread_mutex_lock(&c->lock);
	if (c->owner_slot >= 0)
		++*(int *)arg;	/* a child may ask for a relay (relay.h) */
	/* Either process may poll it, or pass the file on: the pair goes
	 * in place now, while one process holds it (readiness.h); the
	 * update below brings its mirror in line. */
	paired = c->ready && atomic_load(&c->ready->lone) &&
		 sdp_ready_pair(c->ready) == 0;
	if (c->ready)
		sdp_ready_note_ino(c->ready);	/* exec.c */
	/* Either process may wait on the descriptor in the kernel, the
	 * other one's waits unseen here: the peer must wake it. */
	if (sdp_appwake_kernel_watch_locked(c) || paired)
		sdp_conn_update_ready_locked(c);
	/* A QP that could not be made reachable from the child stays
	 * here: no mailbox, so another process of the family gets EBADFD. */
	if (!c->mbox && c->qp && SDP_TP(c->qp)->export_qp &&
	    c->owner_slot >= 0 &&
	    (!SDP_TP(c->qp)->share_prepare ||
	     SDP_TP(c->qp)->share_prepare(c->qp) == 0)) {
		n = mbox_size_for(c);
		p = mmap(NULL, n, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p != MAP_FAILED) {
			c->mbox = p;
			c->mbox_size = n;
		}
	}
	pthread_mutex_unlock(&c->lock);
}

static void handover_prepare(void)
{
	int n = 0;

	sdp_progress_foreach(give_mailbox, &n);
	if (n)
		sdp_relay_before_fork();	/* children may exec */
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_once_fn(void)
{
	/* Outer: before any module takes its lock for the fork, since the
	 * walk may drop the last reference to a closing connection. */
	sdp_atfork_add(SDP_ATFORK_OUTER, handover_prepare, NULL, NULL);
}

void sdp_handover_init(void)
{
	pthread_once(&init_once, init_once_fn);
}

void sdp_handover_free(struct sdp_conn *c)
{
	if (c->mbox)
		munmap(c->mbox, c->mbox_size);
	c->mbox = NULL;
}

/* Nothing of ours in flight on it: no call of our threads inside but
 * `calls` (the caller's own), no ZCopy buffer of ours advertised or RDMA
 * of ours running. */
static int quiet_locked(const struct sdp_conn *c, int calls)
{
	return atomic_load(&c->app_calls) == calls && !c->zc_tx.active &&
	       !c->zc_snk.active && !c->zc_snk_nmore && !c->zc_rx.reading &&
	       !c->zc_snk_peer.writing;
}


/* Write the mailbox; `calls`: our calls inside the engine on it that may
 * stay (a call that yields counts itself). */
static int export_locked(struct sdp_conn *c, uint32_t gen, int calls)
{
	struct sdp_mbox *m = c->mbox;
	uint8_t *p;
	size_t off, first;
	ssize_t n;

	if (!m || !c->qp || !SDP_TP(c->qp)->export_qp)
		return -ENOTSUP;
	if (!quiet_locked(c, calls))
		return -EBUSY;
	off = qp_state_off(c, c->txq_len);
	if (off > c->mbox_size)
		return -ENOSPC;
	/* The peer's next message must ring whoever owns the connection
	 * then: our arm would wake our application's wait. */
	sdp_appwake_disarm_locked(c);
	n = SDP_TP(c->qp)->export_qp(c->qp, (uint8_t *)m + off,
				     c->mbox_size - off);
	if (n < 0)
		return (int)n;
	atomic_store(&m->gen, 0);	/* being rewritten */
	memcpy(&m->conn, c, sizeof(*c));
	m->conn.txq_head = 0;		/* written out from the head */
	m->has_ready = c->ready != NULL;
	if (c->ready)
		m->ready = *c->ready;
	p = (uint8_t *)(m + 1);
	if (c->rxq)
		memcpy(p, c->rxq, rxq_bytes(c));
	p += rxq_bytes(c);
	if (c->txq_len) {
		first = c->txq_cap - c->txq_head;
		if (first > c->txq_len)
			first = c->txq_len;
		memcpy(p, c->txq + c->txq_head, first);
		memcpy(p + first, c->txq, c->txq_len - first);
	}
	m->txq_len = c->txq_len;
	m->qp_len = (uint64_t)n;
	atomic_store(&m->gen, gen);
	return 0;
}

/* Another process asked: write the mailbox and let go.  1 handed over,
 * 0 nobody asked, -EBUSY not now (something of ours is in flight). */
static int hand_over_locked(struct sdp_conn *c, int calls)
{
	if (!sdp_owner_is_me(c->owner_slot) || !sdp_owner_asked(c->owner_slot))
		return 0;
	if (sdp_owner_relayed(c->owner_slot))
		return -EBUSY;	/* the relay lives here (relay.h) */
	if (export_locked(c, sdp_owner_next_gen(c->owner_slot), calls) < 0)
		return -EBUSY;
	sdp_owner_release(c->owner_slot);
	c->detached = 1;	/* the QP is detached, never destroyed, here */
	return 1;
}

int sdp_handover_serve_locked(struct sdp_conn *c)
{
	int r = hand_over_locked(c, 0);

	if (r < 0)	/* the asker waits, and gives up if we stay busy */
		sdp_owner_set_busy(c->owner_slot, 1);
	return r > 0;
}

int sdp_handover_yield_locked(struct sdp_conn *c)
{
	return hand_over_locked(c, 1) > 0;
}

void sdp_handover_leave_locked(struct sdp_conn *c)
{
	if (!sdp_owner_is_me(c->owner_slot))
		return;
	/* A state that cannot be written (a call of ours still inside) is
	 * lost: the next taker then resets the connection, an error the
	 * application sees, never a hole in the stream. */
	export_locked(c, sdp_owner_next_gen(c->owner_slot), 0);
	sdp_owner_release(c->owner_slot);
	c->detached = 1;
}

/* Load the mailbox over our copy of `c`.  -ESTALE: the last owner left no
 * state (it died, or could not write it). */
static int import(struct sdp_conn *c)
{
	struct sdp_mbox *m = c->mbox;
	struct sdp_rx_seg *own_rxq;
	struct sdp_mr *own_rmr;
	struct sdp_qp *own_qp;
	const uint8_t *p;
	uint8_t *txq;
	int r;

	if (!m || atomic_load(&m->gen) != sdp_owner_gen(c->owner_slot) ||
	    m->conn.nbufs != c->nbufs || !c->qp)
		return -ESTALE;
	p = (const uint8_t *)(m + 1);
	txq = c->txq;
	if (m->conn.txq_cap && (!txq || c->txq_cap < m->conn.txq_cap)) {
		txq = malloc(m->conn.txq_cap);
		if (!txq)
			return -ENOMEM;
	}
	r = SDP_TP(c->qp)->import_qp(c->qp, (const uint8_t *)m +
				     qp_state_off(c, m->txq_len),
				     (size_t)m->qp_len);
	if (r < 0) {
		if (txq != c->txq)
			free(txq);
		return r;
	}
	if (txq != c->txq)
		free(c->txq);
	/* The protocol state: everything from `state` to the life section,
	 * and from the statistics on.  The lock, the references and the
	 * life section (registration, readiness bookkeeping of this
	 * process) stay ours: other threads of ours touch some of them
	 * without the lock. */
	own_qp = c->qp;
	own_rmr = c->rmr;
	own_rxq = c->rxq;
	memcpy(&c->state, &m->conn.state,
	       offsetof(struct sdp_conn, owner_slot) -
	       offsetof(struct sdp_conn, state));
	memcpy(&c->stats, &m->conn.stats,
	       sizeof(*c) - offsetof(struct sdp_conn, stats));
	c->qp = own_qp;
	c->rmr = own_rmr;
	c->rxq = own_rxq;
	c->txq = txq;
	c->close_deadline_ns = m->conn.close_deadline_ns;
	c->app_fd_shared = m->conn.app_fd_shared;
	c->peer_takes_tcp = m->conn.peer_takes_tcp;
	c->active_open_done = m->conn.active_open_done;
	c->appwake_off = m->conn.appwake_off;
	c->app_armed = 0;	/* the last owner disarmed */
	c->app_quiet = 0;
	/* No ZCopy buffer was out (quiet_locked): no region to name. */
	for (int i = 0; i < SDP_ZC_WINDOW; i++)
		c->zc_tx.adv[i].mr = NULL;
	c->zc_snk.mr = NULL;
	for (int i = 0; i < SDP_ZC_WINDOW - 1; i++)
		c->zc_snk_more[i].mr = NULL;
	if (c->rxq)
		memcpy(c->rxq, p, rxq_bytes(c));
	p += rxq_bytes(c);
	if (m->txq_len)
		memcpy(c->txq, p, m->txq_len);
	if (c->ready && m->has_ready) {
		c->ready->readable = m->ready.readable;
		c->ready->unwritable = m->ready.unwritable;
		c->ready->urgent = m->ready.urgent;
		c->ready->eof = m->ready.eof;
		c->ready->reset = m->ready.reset;
		c->ready->sndbuf_small = m->ready.sndbuf_small;
		c->ready->tokens = m->ready.tokens;
	}
	/* RDMA may be off here now (the peer knows another pid). */
	SDP_TP(c->qp)->query_caps(c->qp, &c->caps);
	return 0;
}

static pthread_mutex_t adopt_lock = PTHREAD_MUTEX_INITIALIZER;

/* We took the slot: make our copy the live one and service it here. */
static int adopt(struct sdp_conn *c, int reset)
{
	int r = 0;

	pthread_mutex_lock(&c->lock);
	/* Inherited by fork: the fork parent's registrations held these
	 * (progress.c forgot them in the child). */
	atomic_fetch_sub(&c->refs, (int)c->inherited_refs);
	c->inherited_refs = 0;
	c->detached = 0;
	if (!reset && c->qp && SDP_TP(c->qp)->import_qp)
		r = import(c);
	if (r < 0 || reset)
		/* Whatever the last owner did since our copy was made is
		 * unknown: end the connection rather than guess. */
		sdp_conn_reset_locked(c, -ECONNRESET, SDP_REASON_OWNER_GONE);
	pthread_mutex_unlock(&c->lock);
	if (c->qp && !c->registered)
		r = sdp_progress_add_conn(c);
	else
		r = 0;
	if (c->qp && SDP_TP(c->qp)->summon)
		SDP_TP(c->qp)->summon(c->qp);	/* our thread looks at it */
	return r < 0 ? r : 0;
}

int sdp_handover_claim(struct sdp_conn *c)
{
	const struct sdp_transport_ops *tp = c->qp ? SDP_TP(c->qp) : NULL;
	int movable = tp && tp->export_qp && tp->summon && c->mbox;
	uint64_t t0 = 0, now;
	uint32_t o;
	int r;

	if (sdp_owner_is_me(c->owner_slot))
		return 0;
	for (;;) {
		pthread_mutex_lock(&adopt_lock);
		r = sdp_owner_take(c->owner_slot);
		if (r == 1)
			r = adopt(c, 0);
		pthread_mutex_unlock(&adopt_lock);
		if (r != -EBUSY)
			return r;
		if (sdp_owner_gone(c->owner_slot))
			return -EBADFD;	/* closed elsewhere as we closed */
		o = sdp_owner_get(c->owner_slot);
		if (!o)
			continue;	/* released meanwhile */
		if (movable) {
			sdp_owner_ask(c->owner_slot);
			tp->summon(c->qp);
		}
		sdp_owner_wait_change(c->owner_slot, o, 10);
		now = sdp_now_ns();
		if (!t0)
			t0 = now;
		if (now - t0 < (uint64_t)sdp_cfg.fork_claim_ms * 1000000ull)
			continue;
		if (sdp_owner_alive(o)) {
			/* A live owner that uses the connection itself (or,
			 * for a transport that cannot move, holds it) keeps
			 * it: we are a second user.  One that is merely slow
			 * (exiting, descheduled) is waited for. */
			if (!movable || sdp_owner_busy(c->owner_slot))
				return -EBADFD;
			t0 = 0;
			continue;
		}
		/* The owner died without leaving the state. */
		pthread_mutex_lock(&adopt_lock);
		r = sdp_owner_take_from(c->owner_slot, o);
		if (r == 1)
			r = adopt(c, 1);
		pthread_mutex_unlock(&adopt_lock);
		if (r != -EBUSY)
			return r;
		t0 = 0;
	}
}
